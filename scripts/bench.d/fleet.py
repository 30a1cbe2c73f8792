"""Build a benchmark fleet in moto, compute the write-call lower bound, and verify the result.

    python fleet.py build  --moto URL --kind mixed|ec2-only --size N --out fleet.json
    python fleet.py verify --moto URL --fleet fleet.json

Talks to moto directly (never through the counting proxy), so building and verifying are not
counted. ``build`` starts from a fresh moto (``POST /moto-api/reset``), puts the policy (an OpenShift
``Infrastructure`` object) into ``s3://bench-policy/infrastructure.yaml``, and creates N *owned*
resources plus foreign ones. The fleet is deterministic: the same kind and size always give the
same drift classes, so tagwarden and Cloud Custodian see identical fleets.
"""

import argparse
import json
import math
import sys
import time
import urllib.request
from collections import Counter

import boto3
from botocore.config import Config

REGION = "us-east-1"
INFRA_ID = "bench-1"
OWNER = f"kubernetes.io/cluster/{INFRA_ID}"
FOREIGN = "kubernetes.io/cluster/other-2"
DESIRED = {"team": "platform", "env": "prod", "cost-center": "4242"}
POLICY_BUCKET, POLICY_KEY = "bench-policy", "infrastructure.yaml"
POLICY = f"""apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata:
  name: cluster
status:
  infrastructureName: {INFRA_ID}
  platform: AWS
  platformStatus:
    type: AWS
    aws:
      region: {REGION}
      resourceTags:
        - {{key: team, value: platform}}
        - {{key: env, value: prod}}
        - {{key: cost-center, value: "4242"}}
"""
EC2_BATCH = 1000  # RunInstances MaxCount per call (moto accepts it; AWS would cap by quota)
# API lower bound per write call, by family: how many resources one call can tag.
# ELBv2 AddTags takes one ARN per call on AWS ("Only one resource can be tagged at a time"), even
# though its parameter is a list and moto accepts more.
PER_CALL = {"ec2": 1000, "elbv2": 1, "s3": 1, "iam": 1}


def clients(moto):
    kw = dict(endpoint_url=moto, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing",
              config=Config(read_timeout=900, retries={"max_attempts": 1}))
    return {s: boto3.client(s, **kw) for s in ("ec2", "s3", "elbv2", "iam", "resourcegroupstaggingapi")}


def reset(moto):
    urllib.request.urlopen(urllib.request.Request(moto + "/moto-api/reset", method="POST"), timeout=120).read()


def tags_list(d):
    return [{"Key": k, "Value": v} for k, v in d.items()]


def plan(kind, n):
    """Owned resource counts and drift classes: {family: [(count, tags), ...]}, and foreign ones.

    Drift classes (tags the resource starts with, besides the ownership tag):
    EC2 mixed: 5 % compliant, 5 % wrong team (delta: team only), 90 % missing all three (one
    identical delta). S3: unmanaged tags (app, backup) that must survive; 10 % also a wrong team.
    ELBv2 target groups: 10 % compliant, rest missing. IAM roles: 10 % wrong env, rest missing.
    """
    own = {OWNER: "owned"}
    wrong_team = {**DESIRED, "team": "web"}
    if kind == "ec2-only":
        return {"ec2": [(n, {**own, "Name": "bench-worker"})]}, {"ec2": [(max(1, n // 100), {FOREIGN: "owned"})]}
    n_lb, n_tg, n_iam, n_s3 = max(1, n // 200), max(1, n * 8 // 100), max(1, n * 5 // 100), max(1, n * 5 // 100)
    n_ec2 = n - n_lb - n_tg - n_iam - n_s3
    ok_ec2, wrong_ec2 = n_ec2 // 20, n_ec2 // 20
    s3_wrong = n_s3 // 10
    owned = {
        "ec2": [
            (ok_ec2, {**own, "Name": "bench-worker", **DESIRED}),
            (wrong_ec2, {**own, "Name": "bench-worker", **wrong_team}),
            (n_ec2 - ok_ec2 - wrong_ec2, {**own, "Name": "bench-worker"}),
        ],
        "s3": [
            (s3_wrong, {**own, "app": "registry", "backup": "daily", "team": "web"}),
            (n_s3 - s3_wrong, {**own, "app": "registry", "backup": "daily"}),
        ],
        "tg": [(n_tg // 10, {**own, **DESIRED}), (n_tg - n_tg // 10, dict(own))],
        "lb": [(n_lb, dict(own))],
        "iam": [(n_iam // 10, {**own, **DESIRED, "env": "dev"}), (n_iam - n_iam // 10, dict(own))],
    }
    nf = max(2, n // 10)
    foreign = {
        "ec2": [(nf // 2, {FOREIGN: "owned"}), (nf - nf // 2, {})],
        "s3": [(1, {FOREIGN: "owned"}), (1, {})],
        "tg": [(1, {FOREIGN: "owned"}), (1, {})],
        "iam": [(1, {FOREIGN: "owned"}), (1, {})],
    }
    return owned, foreign


def delta(tags):
    """The tags a minimal enforcer must write (missing or wrong desired keys), as a sorted tuple."""
    return tuple(sorted((k, v) for k, v in DESIRED.items() if tags.get(k) != v))


def lower_bound(owned):
    """Write calls the APIs allow at best: per family and identical delta, ceil(count / per-call)."""
    groups = Counter()
    for family, classes in owned.items():
        fam = {"tg": "elbv2", "lb": "elbv2"}.get(family, family)
        for count, tags in classes:
            d = delta(tags)
            if d and count:
                groups[(fam, d)] += count
    by_family = Counter()
    for (fam, _), count in groups.items():
        by_family[fam] += math.ceil(count / PER_CALL[fam])
    return dict(by_family), sum(by_family.values()), sum(groups.values())


class Builder:
    def __init__(self, moto, deadline):
        self.c = clients(moto)
        self.deadline = deadline
        self.seq = Counter()
        self.made = {"ec2": [], "s3": [], "tg": [], "lb": [], "iam": []}
        self.vpc = self.subnets = self.image = None

    def check_time(self):
        if time.monotonic() > self.deadline:
            raise TimeoutError("fleet creation exceeded its time budget")

    def name(self, family):
        self.seq[family] += 1
        return f"bench-{family}-{self.seq[family]:05d}"

    def ec2(self, count, tags, owned):
        if self.image is None:
            self.image = self.c["ec2"].describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        while count > 0:
            self.check_time()
            k = min(EC2_BATCH, count)
            spec = [{"ResourceType": "instance", "Tags": tags_list(tags)}] if tags else []
            out = self.c["ec2"].run_instances(ImageId=self.image, MinCount=k, MaxCount=k, InstanceType="t3.micro",
                                              TagSpecifications=spec)
            self.made["ec2"] += [(i["InstanceId"], tags, owned) for i in out["Instances"]]
            count -= k

    def s3(self, count, tags, owned):
        for _ in range(count):
            self.check_time()
            b = self.name("s3")
            self.c["s3"].create_bucket(Bucket=b)
            if tags:
                self.c["s3"].put_bucket_tagging(Bucket=b, Tagging={"TagSet": tags_list(tags)})
            self.made["s3"].append((b, tags, owned))

    def network(self):
        if self.vpc is None:
            self.vpc = self.c["ec2"].create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            self.subnets = [
                self.c["ec2"].create_subnet(VpcId=self.vpc, CidrBlock=f"10.0.{i}.0/24",
                                            AvailabilityZone=f"{REGION}{az}")["Subnet"]["SubnetId"]
                for i, az in enumerate("ab")
            ]

    def tg(self, count, tags, owned):
        self.network()
        for _ in range(count):
            self.check_time()
            kw = {"Tags": tags_list(tags)} if tags else {}
            arn = self.c["elbv2"].create_target_group(Name=self.name("tg"), Protocol="HTTP", Port=80, VpcId=self.vpc,
                                                      TargetType="instance", **kw)["TargetGroups"][0]["TargetGroupArn"]
            self.made["tg"].append((arn, tags, owned))

    def lb(self, count, tags, owned):
        self.network()
        for _ in range(count):
            self.check_time()
            kw = {"Tags": tags_list(tags)} if tags else {}
            arn = self.c["elbv2"].create_load_balancer(Name=self.name("lb"), Subnets=self.subnets, Type="application",
                                                       **kw)["LoadBalancers"][0]["LoadBalancerArn"]
            self.made["lb"].append((arn, tags, owned))

    def iam(self, count, tags, owned):
        trust = json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
        for _ in range(count):
            self.check_time()
            kw = {"Tags": tags_list(tags)} if tags else {}
            name = self.name("role")
            self.c["iam"].create_role(RoleName=name, AssumeRolePolicyDocument=trust, **kw)
            self.made["iam"].append((name, tags, owned))


def build(moto, kind, size, max_seconds=900):
    """Reset moto and build the fleet; returns its manifest (with the lower bound)."""
    started = time.monotonic()
    reset(moto)
    owned, foreign = plan(kind, size)
    b = Builder(moto, started + max_seconds)
    b.c["s3"].create_bucket(Bucket=POLICY_BUCKET)
    b.c["s3"].put_object(Bucket=POLICY_BUCKET, Key=POLICY_KEY, Body=POLICY.encode())
    for is_owned, spec in ((True, owned), (False, foreign)):
        for family, classes in spec.items():
            for count, tags in classes:
                getattr(b, family)(count, tags, is_owned)
    by_family, total, drifted = lower_bound(owned)
    fleet = {
        "kind": kind, "size": size, "infra_id": INFRA_ID, "desired": DESIRED,
        "policy": f"s3://{POLICY_BUCKET}/{POLICY_KEY}",
        "owned": {f: sum(c for c, _ in cl) for f, cl in owned.items()},
        "foreign": {f: sum(c for c, _ in cl) for f, cl in foreign.items()},
        "drifted": drifted,
        "lower_bound": {"total": total, "by_family": by_family},
        "build_seconds": round(time.monotonic() - started, 2),
        "resources": b.made,
    }
    print(f"fleet {kind} n={size}: {sum(fleet['owned'].values())} owned, {sum(fleet['foreign'].values())} foreign, "
          f"{drifted} drifted, lower bound {total} write calls {by_family}, built in {fleet['build_seconds']} s",
          file=sys.stderr)
    return fleet


def current_tags(c, fleet):
    """{family: {id: tags}} read back from moto."""
    out = {f: {} for f in fleet["resources"]}
    # EC2 through the Tagging API: moto needs minutes for DescribeInstances over 10,000 instances.
    # An instance it does not list has no tags.
    out["ec2"] = {i: {} for i, _, _ in fleet["resources"]["ec2"]}
    pages = c["resourcegroupstaggingapi"].get_paginator("get_resources")
    for page in pages.paginate(ResourceTypeFilters=["ec2:instance"], ResourcesPerPage=100):
        for m in page["ResourceTagMappingList"]:
            out["ec2"][m["ResourceARN"].rsplit("/", 1)[-1]] = {t["Key"]: t["Value"] for t in m["Tags"]}
    for b, _, _ in fleet["resources"]["s3"]:
        try:
            ts = c["s3"].get_bucket_tagging(Bucket=b)["TagSet"]
        except c["s3"].exceptions.ClientError:
            ts = []
        out["s3"][b] = {t["Key"]: t["Value"] for t in ts}
    arns = [a for f in ("tg", "lb") for a, _, _ in fleet["resources"][f]]
    for i in range(0, len(arns), 20):
        for d in c["elbv2"].describe_tags(ResourceArns=arns[i:i + 20])["TagDescriptions"]:
            fam = "lb" if ":loadbalancer/" in d["ResourceArn"] else "tg"
            out[fam][d["ResourceArn"]] = {t["Key"]: t["Value"] for t in d["Tags"]}
    for name, _, _ in fleet["resources"]["iam"]:
        out["iam"][name] = {t["Key"]: t["Value"] for t in c["iam"].list_role_tags(RoleName=name)["Tags"]}
    return out


def verify(moto, fleet):
    """Every owned resource ends with its original tags overlaid by the desired ones; foreign ones
    are untouched. Returns {"ok": bool, "problems": n, "examples": [...]}."""
    now = current_tags(clients(moto), fleet)
    problems = []
    for family, items in fleet["resources"].items():
        for rid, tags, owned in items:
            want = {**tags, **DESIRED} if owned else tags
            got = now[family].get(rid)
            if got != want:
                problems.append({"family": family, "id": rid, "owned": owned, "want": want, "got": got})
    return {"ok": not problems, "problems": len(problems), "examples": problems[:3]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--moto", required=True)
    b.add_argument("--kind", choices=["mixed", "ec2-only"], default="mixed")
    b.add_argument("--size", type=int, required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--max-seconds", type=float, default=900)
    v = sub.add_parser("verify")
    v.add_argument("--moto", required=True)
    v.add_argument("--fleet", required=True)
    a = ap.parse_args()
    if a.cmd == "build":
        fleet = build(a.moto, a.kind, a.size, a.max_seconds)
        with open(a.out, "w") as f:
            json.dump(fleet, f)
    else:
        with open(a.fleet) as f:
            print(json.dumps(verify(a.moto, json.load(f))))


if __name__ == "__main__":
    main()
