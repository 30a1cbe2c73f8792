#!/usr/bin/env python3
"""Check what `infra/examples/aws-basic` created in moto (run by scripts/test-terraform).

usage: check_aws_basic.py <terraform-output.json> <phase>
  phase "resources": inspect the created resources (read-only, before the no-drift plan)
  phase "routing":   PutEvents fixtures and check which reach the buffer queue (mutates: disables
                     the queue mapping, because moto would try to run the placeholder function)

Prints one "PASS <check>" / "FAIL <check>: <why>" line per check; exits 1 if any failed.
Environment: MOTO_ENDPOINT (https://127.0.0.1:<port>, self-signed).
"""
import json
import os
import random
import re
import sys
import time
import urllib.parse

import boto3
import urllib3

urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

REGION = "eu-west-1"  # tests/terraform/moto/aws-basic.tfvars
INFRA_ID = "mycluster-7xk2p"
ACCOUNT = "123456789012"  # moto's
WRITABLE_ZONE = "Z0123456789ABCDEFGHIJ"  # route53_hosted_zone_ids in aws-basic.tfvars
WRITABLE_HEALTH_CHECK = "0123abcd-0000-1111-2222-333344445555"  # route53_health_check_ids there

# The descriptors' contract as tests/iam_policy.rs writes it from crates/core/src/services/ (and
# checks it there against the descriptors): the events and actions the Terraform must render and
# grant, exactly, so a new service needs no edit here.
GENERATED = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                        "infra", "aws", "generated", "services.json")))
EVENT_NAMES = GENERATED["cloudtrail_event_names"]
_THROUGH_TAGGING = [s for s in GENERATED["services"] if s["guard"] == "owned_via_tagging_api"]
# The owning services' tag actions that tag:TagResources needs (iam.tf generic_tag_actions), plus
# the example's extra_tag_actions (tests/terraform/moto/aws-basic.tfvars).
GENERIC_TAG_ACTIONS = {a for s in _THROUGH_TAGGING for a in s["write"]}
EXTRA_TAG_ACTIONS = {"lambda:TagResource"}
# Writes that IAM conditions on the cluster's ownership tag, each under the aws:TagKeys guard.
OWNED_TAG_WRITES = {a for s in GENERATED["services"] if s["guard"] == "owned" for a in s["write"]}
# What the code calls: every descriptor's reads and writes, and the policy store's (hand-listed:
# no descriptor holds them).
CODE_ACTIONS = {a for s in GENERATED["services"] if s["guard"] != "owned_via_tagging_api"
                for k in ("read", "read_anywhere", "write") for a in s[k]} | {
    "ssm:GetParameter", "ssm:GetParametersByPath", "ssm:PutParameter",
    "s3:GetObject", "s3:ListBucket", "s3:PutObject",
}
PLATFORM_ACTIONS = {"logs:CreateLogStream", "logs:PutLogEvents", "sqs:ReceiveMessage", "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes", "sqs:SendMessage"}
# S3 policy source: everything but the SSM read.
EXPECTED_ROLE_ACTIONS = ((CODE_ACTIONS - {"ssm:GetParameter", "ssm:GetParametersByPath", "ssm:PutParameter"}) | GENERIC_TAG_ACTIONS
                         | EXTRA_TAG_ACTIONS | PLATFORM_ACTIONS)
METRICS = ["EventsReceived", "EventsIgnored", "ResourcesEvaluated", "DriftDetected", "TagsWritten",
           "WriteFailures", "TagLimitExceeded", "PolicyRejected", "Conflicts", "ReconcileLatency", "ListingFailures"]
# The module's batching defaults (infra/aws variables.tf), written out independently.
FUNCTION_TIMEOUT = 300
BATCH_SIZE, BATCHING_WINDOW, MAXIMUM_CONCURRENCY, EC2_WRITES_PER_SECOND = 100, 2, 2, 2

failures = []


def check(name, fn):
    try:
        problem = fn()
    except Exception as e:  # noqa: BLE001 - report, keep checking
        problem = f"{type(e).__name__}: {e}"
    if problem:
        failures.append(name)
        print(f"FAIL {name}: {problem}")
    else:
        print(f"PASS {name}")


def client(svc, region=REGION):
    return boto3.client(svc, region_name=region, endpoint_url=os.environ["MOTO_ENDPOINT"],
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        verify=False)  # moto's self-signed TLS certificate


def as_list(x):
    return x if isinstance(x, list) else [x]


def role_document(iam, role_name):
    """The role's inline "tagwarden" policy and its attached managed policies (the ownership-
    conditioned tag writes, one per cluster) as one document, with the policy names found."""
    inline = iam.list_role_policies(RoleName=role_name)["PolicyNames"]
    attached = iam.list_attached_role_policies(RoleName=role_name)["AttachedPolicies"]
    statements = []
    for name in inline:
        statements += as_list(iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]["Statement"])
    for a in attached:
        version = iam.get_policy(PolicyArn=a["PolicyArn"])["Policy"]["DefaultVersionId"]
        doc = iam.get_policy_version(PolicyArn=a["PolicyArn"], VersionId=version)["PolicyVersion"]["Document"]
        if isinstance(doc, str):  # URL-encoded JSON in the raw API; boto3 decodes it, moto may not
            doc = json.loads(urllib.parse.unquote(doc))
        statements += as_list(doc["Statement"])
    return {"Statement": statements}, inline, sorted(a["PolicyName"] for a in attached)


def policy_actions(doc):
    out = set()
    for st in doc["Statement"]:
        out |= set(as_list(st.get("Action", [])))
    return out


# ---------------------------------------------------------------------------------------------
def statement_problems(doc, policy_bucket):
    """Every problem with the function role's statements (not just the first), so one run shows
    each missing fix: ownership conditions, the fail-closed aws:TagKeys guard, listener
    ARNs, the cluster bucket pattern, the unconditioned ListBucket."""
    problems = []
    key = f"aws:ResourceTag/kubernetes.io/cluster/{INFRA_ID}"
    for st in doc["Statement"]:
        if st["Effect"] == "Deny":
            continue  # judged by the evaluator (tag_write_cases, reserved_key_cases)
        acts = set(as_list(st["Action"]))
        cond = st.get("Condition", {})
        service_tag_writes = OWNED_TAG_WRITES | GENERIC_TAG_ACTIONS | EXTRA_TAG_ACTIONS
        if acts & service_tag_writes:
            if cond.get("StringEquals", {}).get(key) != "owned":
                problems.append(f"{st.get('Sid')} not conditioned on {key}=owned")
            # The reserved-key guard fails closed. ForAllValues is true for a
            # request without aws:TagKeys, so Null aws:TagKeys = false must accompany it.
            if cond.get("Null", {}).get("aws:TagKeys") != "false":
                problems.append(f"{st.get('Sid')}: ForAllValues guard without Null aws:TagKeys=false (fails open)")
            if as_list(cond.get("ForAllValues:StringNotEqualsIgnoreCase", {}).get("aws:TagKeys", [])) != ["Name"]:
                problems.append(f"{st.get('Sid')}: Name guard {cond.get('ForAllValues:StringNotEqualsIgnoreCase')}")
        if any(k.startswith("ForAllValues:") for k in cond) and cond.get("Null", {}).get("aws:TagKeys") != "false":
            problems.append(f"{st.get('Sid')}: ForAllValues condition without Null aws:TagKeys=false")
        if "elasticloadbalancing:AddTags" in acts:
            # Owned listeners and listener rules are writable like LBs and TGs.
            prefix = f"arn:aws:elasticloadbalancing:{REGION}:123456789012:"
            want = {prefix + t + "/*" for t in ("loadbalancer", "targetgroup", "listener", "listener-rule")}
            if set(as_list(st["Resource"])) != want:
                problems.append(f"AddTags resources {st['Resource']} != {sorted(want)}")
        # Route 53 evaluates no tag condition keys; its statements are scoped to hosted
        # zones and health checks and must carry no condition (one would never match: deny all).
        # Reads on every zone and health check, writes only on the listed zone.
        r53 = [f"arn:aws:route53:::{t}/*" for t in ("hostedzone", "healthcheck")]
        if acts & {"route53:ListTagsForResource", "route53:ListTagsForResources"}:
            if sorted(as_list(st["Resource"])) != sorted(r53) or cond:
                problems.append(f"{st.get('Sid')}: Route 53 tag reads on {st['Resource']} with {cond} (want {r53}, no condition)")
        if "route53:ChangeTagsForResource" in acts:
            want = [f"arn:aws:route53:::hostedzone/{WRITABLE_ZONE}", f"arn:aws:route53:::healthcheck/{WRITABLE_HEALTH_CHECK}"]
            if sorted(as_list(st["Resource"])) != sorted(want) or cond:
                problems.append(f"{st.get('Sid')}: Route 53 tag writes on {st['Resource']} with {cond} (want the listed zone and health check only)")
        # The Tagging API's TagResources has no resource type: "*", alone, unconditioned; each ARN is
        # authorized again as the owning service's action (conditioned above).
        if "tag:TagResources" in acts and (acts != {"tag:TagResources"} or as_list(st["Resource"]) != ["*"] or cond):
            problems.append(f"{st.get('Sid')}: tag:TagResources with {sorted(acts)} on {st['Resource']} {cond}")
        if acts & GENERIC_TAG_ACTIONS:
            want = {f"arn:aws:elasticfilesystem:{REGION}:123456789012:{t}/*" for t in ("file-system", "access-point")}
            if set(as_list(st["Resource"])) != want:
                problems.append(f"{st.get('Sid')}: EFS TagResource on {st['Resource']} != {sorted(want)}")
        # The status report beside the policy, and the contest state apart from it (the function's
        # alone: the bucket policy denies every other writer).
        if "s3:PutObject" in acts and as_list(st["Resource"]) not in (
            [f"arn:aws:s3:::{policy_bucket}/tagwarden/tagwarden-status.json"],
            [f"arn:aws:s3:::{policy_bucket}/_tagwarden/contests/*"],
        ):
            problems.append(f"PutObject resource {st['Resource']}")
        # The default bucket pattern is the cluster's, never "*".
        if acts & {"s3:PutBucketTagging", "s3:GetBucketTagging"} and as_list(st["Resource"]) != [f"arn:aws:s3:::{INFRA_ID}-*"]:
            problems.append(f"bucket tagging resource {st['Resource']}")
        # ListBucket unconditioned on the policy bucket, so a missing policy
        # object answers 404 NoSuchKey (a grant conditioned on s3:prefix leaves GetObject at 403).
        if "s3:ListBucket" in acts:
            if as_list(st["Resource"]) != [f"arn:aws:s3:::{policy_bucket}"] or cond:
                problems.append(f"ListBucket: resource {st['Resource']} condition {cond} (want the policy bucket, unconditioned)")
    if not any("s3:ListBucket" in as_list(st["Action"]) for st in doc["Statement"]):
        problems.append("no s3:ListBucket on the policy bucket")
    return problems


# ---------------------------------------------------------------------------------------------
# A small evaluator of the role's statements, so that "who may write what" is checked as IAM would
# decide it, not only as text: a request is allowed when one Allow statement matches its action, its
# resource and every condition, and no Deny statement matches ("an explicit deny in any policy
# overrides any allows", IAM User Guide, "Policy evaluation logic"). It knows exactly the operators
# the module uses and raises on any other, never matching silently. Condition keys a service does
# not put in the request context (Route 53: no aws:ResourceTag, no aws:TagKeys; S3 PutBucketTagging:
# no aws:TagKeys) are simply absent, as in IAM. Condition key *names* are matched without
# regard to case ("Condition key names are not case-sensitive", IAM User Guide, "IAM JSON policy
# elements: Condition"), so a resource tagged `Kubernetes.io/cluster/x` has
# aws:ResourceTag/kubernetes.io/cluster/x; values are compared as each operator says (StringLike:
# case-sensitive; ...IgnoreCase: not).

def _like(pattern, value):
    """IAM wildcard match: * any run, ? one character, case-sensitive."""
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, flags=re.S) is not None


def _condition_holds(op, key, want, ctx):
    want = as_list(want)
    have = {k.lower(): v for k, v in ctx.items()}.get(key.lower())
    if op == "Null":
        return (have is None) == (want == ["true"])
    if op == "StringEquals":
        return have is not None and any(v in want for v in as_list(have))
    if op == "ForAllValues:StringNotLike":  # the former, case-sensitive reserved-key guard (judges older policies)
        return have is None or all(not any(_like(w, v) for w in want) for v in as_list(have))
    if op == "ForAllValues:StringNotEqualsIgnoreCase":
        return have is None or all(v.lower() not in {w.lower() for w in want} for v in as_list(have))
    if op == "ArnNotEquals":  # no wildcards in the policies judged here; a missing key matches
        return have is None or all(v not in want for v in as_list(have))
    if op == "ForAnyValue:StringLike":
        return have is not None and any(any(_like(w, v) for w in want) for v in as_list(have))
    raise ValueError(f"the test evaluator does not know condition operator {op}")


def _matches(st, action, arn, ctx):
    if not any(_like(a.lower(), action.lower()) for a in as_list(st["Action"])):
        return False
    if not any(_like(r, arn) for r in as_list(st["Resource"])):
        return False
    return all(_condition_holds(op, k, v, ctx) for op, kv in st.get("Condition", {}).items() for k, v in kv.items())


def allowed_by(doc, action, arn, ctx):
    """The Sid of the first statement allowing the request, else None (also when a Deny matches)."""
    if any(st["Effect"] == "Deny" and _matches(st, action, arn, ctx) for st in doc["Statement"]):
        return None
    for st in doc["Statement"]:
        if st["Effect"] == "Allow" and _matches(st, action, arn, ctx):
            return st.get("Sid") or "(no sid)"
    return None


def case_variants(key, n=24, seed=35):
    """`key` in other cases: upper, title, swapped, and n random mixes (deterministic)."""
    rnd = random.Random(f"{seed}{key}")
    out = {key.upper(), key.title(), key.swapcase(), key[0].upper() + key[1:]}
    for _ in range(n):
        out.add("".join(c.upper() if rnd.random() < 0.5 else c.lower() for c in key))
    out.discard(key)
    return sorted(out)


# The reserved namespaces (docs/src/concepts/ownership.md; Cluster API's AWS provider; HyperShift writes
# kubernetes.io/cluster/<infraID> like OpenShift), each as written and in other cases, and keys that
# only look alike, which stay writable.
RESERVED_KEYS = ["kubernetes.io/cluster/other-abcde", f"kubernetes.io/cluster/{INFRA_ID}", "openshift.io/x",
                 "sigs.k8s.io/cluster-api-provider-aws/cluster/other", "k8s.io/x", "node.kubernetes.io/role",
                 "foo.openshift.io/x", "name"]
FREE_KEYS = ["team", "app.example.io/x", "kubeflow.org/x", "kubernetes-team", "openshift-version",
             "mycompany.io/cost-center", "example.k8s-tools.io/x", "K8s-Team"]


def reserved_key_cases(arns):
    """(case, action, ARN, context, allowed?) for every guarded tag write: a reserved key in any
    case is refused, a free key is written. `arns`: action => an owned resource's ARN."""
    owned = {f"aws:ResourceTag/kubernetes.io/cluster/{INFRA_ID}": "owned"}
    cases = []
    for action, arn in arns.items():
        for key in RESERVED_KEYS:
            for k in [key] + case_variants(key):
                cases.append((f"{action} writing {k}", action, arn, dict(owned, **{"aws:TagKeys": ["team", k]}), False))
        for k in FREE_KEYS:
            cases.append((f"{action} writing {k}", action, arn, dict(owned, **{"aws:TagKeys": [k]}), True))
    return cases


def tag_write_cases():
    """(case, action, resource ARN, request context, allowed?) for the function role in eu-west-1."""
    acct, owned_key = "123456789012", f"kubernetes.io/cluster/{INFRA_ID}"

    def req(tags=None, keys=("team",)):
        ctx = {f"aws:ResourceTag/{k}": v for k, v in (tags or {}).items()}
        if keys is not None:
            ctx["aws:TagKeys"] = list(keys)
        return ctx

    owned, shared = {owned_key: "owned"}, {owned_key: "shared"}
    i = f"arn:aws:ec2:{REGION}:{acct}:instance/i-0123456789abcdef0"
    clb = f"arn:aws:elasticloadbalancing:{REGION}:{acct}:loadbalancer/{INFRA_ID}-ingress"
    fs = f"arn:aws:elasticfilesystem:{REGION}:{acct}:file-system/fs-0123456789abcdef0"
    ap = f"arn:aws:elasticfilesystem:{REGION}:{acct}:access-point/fsap-0123456789abcdef0"
    key = f"arn:aws:kms:{REGION}:{acct}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    zone, hc = f"arn:aws:route53:::hostedzone/{WRITABLE_ZONE}", f"arn:aws:route53:::healthcheck/{WRITABLE_HEALTH_CHECK}"
    return [
        ("EC2 instance, owned", "ec2:CreateTags", i, req(owned), True),
        ("EC2 instance, not owned", "ec2:CreateTags", i, req({}), False),
        ("EC2 instance, shared", "ec2:CreateTags", i, req(shared), False),
        ("EC2 instance, owned, writing Name", "ec2:CreateTags", i, req(owned, ["team", "name"]), False),
        ("EC2 instance, owned, writing an ownership tag", "ec2:CreateTags", i, req(owned, ["kubernetes.io/cluster/x"]), False),
        ("EC2 instance, owned, request without aws:TagKeys", "ec2:CreateTags", i, req(owned, None), False),
        ("EC2 DeleteTags, owned", "ec2:DeleteTags", i, req(owned), False),
        ("Classic load balancer, owned", "elasticloadbalancing:AddTags", clb, req(owned), True),
        ("Classic load balancer, not owned", "elasticloadbalancing:AddTags", clb, req({}), False),
        ("Classic load balancer, owned, writing openshift.io/x", "elasticloadbalancing:AddTags", clb, req(owned, ["openshift.io/x"]), False),
        ("Classic load balancer in us-east-1, owned", "elasticloadbalancing:AddTags", clb.replace(REGION, "us-east-1"), req(owned), False),
        ("ELBv2 NLB, owned", "elasticloadbalancing:AddTags", f"arn:aws:elasticloadbalancing:{REGION}:{acct}:loadbalancer/net/{INFRA_ID}-ext/50dc6c495c0c9188", req(owned), True),
        ("ELBv2 listener, owned", "elasticloadbalancing:AddTags", f"arn:aws:elasticloadbalancing:{REGION}:{acct}:listener/net/{INFRA_ID}-ext/50dc6c495c0c9188/f2f7dc8efc522ab2", req(owned), True),
        ("tag:TagResources (no resource type)", "tag:TagResources", "*", req(), True),
        ("EFS file system, owned", "elasticfilesystem:TagResource", fs, req(owned), True),
        ("EFS access point, owned", "elasticfilesystem:TagResource", ap, req(owned), True),
        ("EFS file system, not owned", "elasticfilesystem:TagResource", fs, req({}), False),
        ("EFS file system, owned, writing Name", "elasticfilesystem:TagResource", fs, req(owned, ["Name"]), False),
        ("EFS file system in another account, owned", "elasticfilesystem:TagResource", fs.replace(acct, "210987654321"), req(owned), False),
        ("EFS UntagResource, owned", "elasticfilesystem:UntagResource", fs, req(owned), False),
        ("KMS key, owned", "kms:TagResource", key, req(owned), True),
        ("KMS key, not owned", "kms:TagResource", key, req({}), False),
        ("KMS key, owned, writing kubernetes.io/x", "kms:TagResource", key, req(owned, ["kubernetes.io/x"]), False),
        ("KMS key in another account, owned", "kms:TagResource", key.replace(acct, "210987654321"), req(owned), False),
        ("KMS UntagResource, owned", "kms:UntagResource", key, req(owned), False),
        ("KMS key's tags, read", "kms:ListResourceTags", key, {}, True),
        ("Lambda function, owned (extra_tag_actions)", "lambda:TagResource", f"arn:aws:lambda:{REGION}:{acct}:function:f", req(owned), True),
        ("Lambda function, not owned (extra_tag_actions)", "lambda:TagResource", f"arn:aws:lambda:{REGION}:{acct}:function:f", req({}), False),
        ("SNS topic, owned", "sns:TagResource", f"arn:aws:sns:{REGION}:{acct}:t", req(owned), True),
        ("SNS topic, not owned", "sns:TagResource", f"arn:aws:sns:{REGION}:{acct}:t", req({}), False),
        ("RDS, owned (not granted)", "rds:AddTagsToResource", f"arn:aws:rds:{REGION}:{acct}:db:d", req(owned), False),
        # Route 53 puts no tag keys in the request context. Only the listed zone is writable.
        ("Route 53 hosted zone, listed", "route53:ChangeTagsForResource", zone, {}, True),
        ("Route 53 hosted zone, not listed", "route53:ChangeTagsForResource", "arn:aws:route53:::hostedzone/ZOTHERZONE0000000", {}, False),
        ("Route 53 health check, listed", "route53:ChangeTagsForResource", hc, {}, True),
        ("Route 53 health check, not listed", "route53:ChangeTagsForResource", "arn:aws:route53:::healthcheck/ffffffff-0000-1111-2222-333344445555", {}, False),
        ("Route 53 health check tags, read", "route53:ListTagsForResource", hc, {}, True),
        ("Route 53 traffic policy", "route53:ChangeTagsForResource", "arn:aws:route53:::trafficpolicy/x", {}, False),
        ("Route 53 hosted zone tags, one", "route53:ListTagsForResource", zone, {}, True),
        ("Route 53 hosted zone tags, batch", "route53:ListTagsForResources", zone, {}, True),
        ("Route 53 zones listed", "route53:ListHostedZones", "*", {}, True),
        ("Route 53 health checks listed", "route53:ListHealthChecks", "*", {}, True),
        ("IAM role, owned", "iam:TagRole", f"arn:aws:iam::{acct}:role/{INFRA_ID}-master-role", req(owned), True),
        ("IAM role, not owned", "iam:TagRole", f"arn:aws:iam::{acct}:role/OrganizationAccountAccessRole", req({}), False),
        # S3 evaluates s3:ResourceAccount for PutBucketTagging, and no tag keys.
        ("cluster bucket", "s3:PutBucketTagging", f"arn:aws:s3:::{INFRA_ID}-image-registry-{REGION}-abc", {"s3:ResourceAccount": acct}, True),
        ("cluster-named bucket in another account", "s3:PutBucketTagging", f"arn:aws:s3:::{INFRA_ID}-image-registry-{REGION}-abc", {"s3:ResourceAccount": "210987654321"}, False),
        ("other bucket", "s3:PutBucketTagging", "arn:aws:s3:::payroll", {"s3:ResourceAccount": acct}, False),
        # IAM matches condition key names without regard to case: a case variant of the ownership
        # tag reads as the ownership tag. This is why the variants must never be written.
        ("EC2 instance tagged Kubernetes.io/cluster/<infraID>=owned", "ec2:CreateTags", i, req({owned_key.upper(): "owned"}), True),
    ] + reserved_key_cases({
        "ec2:CreateTags": i, "elasticloadbalancing:AddTags": clb, "elasticfilesystem:TagResource": fs, "kms:TagResource": key,
        "sns:TagResource": f"arn:aws:sns:{REGION}:{acct}:t", "lambda:TagResource": f"arn:aws:lambda:{REGION}:{acct}:function:f", "iam:TagRole": f"arn:aws:iam::{acct}:role/{INFRA_ID}-master-role",
        "iam:TagUser": f"arn:aws:iam::{acct}:user/{INFRA_ID}-cloud-credential",
    })


def resources_phase(tf):
    out = tf["tagwarden"]
    events, sqs, s3, iam, cw, lam = (client(s) for s in ("events", "sqs", "s3", "iam", "cloudwatch", "lambda"))
    patterns = {k: json.loads(v) for k, v in out["event_patterns"].items()}
    role_arn = out["role_arn"]

    def rendered_patterns_follow_contract():
        want_keys = set(EVENT_NAMES) | {"tag_change"}
        if set(patterns) != want_keys:
            return f"pattern keys {sorted(patterns)} != {sorted(want_keys)}"
        for svc, names in EVENT_NAMES.items():
            p = patterns[svc]
            want = {
                "source": [f"aws.{svc}"],
                "account": [ACCOUNT],  # this account's events only
                "detail-type": ["AWS API Call via CloudTrail"],
                "detail": {
                    "eventSource": [f"{svc}.amazonaws.com"],
                    "eventName": names,
                    "errorCode": [{"exists": False}],
                    "$or": [
                        {"userIdentity": {"sessionContext": {"sessionIssuer": {"arn": [{"anything-but": role_arn}]}}}},
                        {"userIdentity": {"sessionContext": {"sessionIssuer": {"arn": [{"exists": False}]}}}},
                    ],
                },
            }
            # The names' order is the generated file's (sorted); EventBridge matches any of them.
            if p.get("detail", {}).get("eventName"):
                p["detail"]["eventName"] = sorted(p["detail"]["eventName"])
            want["detail"]["eventName"] = sorted(names)
            if p != want:
                return f"{svc}: {json.dumps(p)} != {json.dumps(want)}"
        # Only owned resources' tag changes (detail.tags carries the full tag set).
        # Of every service (no detail.service filter).
        tc = {"source": ["aws.tag"], "account": [ACCOUNT], "detail-type": ["Tag Change on Resource"],
              "detail": {"tags": {f"kubernetes.io/cluster/{INFRA_ID}": ["owned"]}}}
        if patterns["tag_change"] != tc:
            return f"tag_change: {patterns['tag_change']}"
        return None

    def deployed_rules_equal_rendered():
        arns = out["event_rule_arns"]
        if set(arns) != set(patterns):
            return f"rules {sorted(arns)} != patterns {sorted(patterns)}"
        for key, arn in arns.items():
            rule = events.describe_rule(Name=arn.split("/")[-1])
            if json.loads(rule["EventPattern"]) != patterns[key]:
                return f"rule {rule['Name']} pattern differs from output event_patterns[{key}]"
            targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
            if [t["Arn"] for t in targets] != [out["events_queue_arn"]]:
                return f"rule {rule['Name']} targets {[t['Arn'] for t in targets]}"
        return None

    def sweep_rule_targets_function():
        name = out["sweep_rule_arn"].split("/")[-1]
        rule = events.describe_rule(Name=name)
        if rule.get("ScheduleExpression") != "rate(1 hour)":
            return f"schedule {rule.get('ScheduleExpression')}"
        t = events.list_targets_by_rule(Rule=name)["Targets"]
        if len(t) != 1 or t[0]["Arn"] != out["function_arn"] or json.loads(t[0]["Input"]) != {"tagwarden": "sweep"}:
            return f"targets {t}"
        pol = json.loads(lam.get_policy(FunctionName=out["function_name"])["Policy"])
        if not any(s["Principal"] == {"Service": "events.amazonaws.com"} for s in pol["Statement"]):
            return "no lambda permission for events.amazonaws.com"
        return None

    def global_forwarding_rules_in_us_east_1():
        # IAM and Route 53 events (global services, us-east-1 only) are both forwarded,
        # one rule each, through one role and one dead-letter queue.
        ev1 = client("events", "us-east-1")
        rules = tf["global_forwarding_rule_arns"]
        if set(rules) != {"iam", "route53"} or out["global_event_patterns"] != {k: out["event_patterns"][k] for k in ("iam", "route53")}:
            return f"forwarding rules {sorted(rules)}, global_event_patterns {sorted(out['global_event_patterns'])}"
        bus = f"arn:aws:events:{REGION}:123456789012:event-bus/default"
        dlq = tf["global_forwarding_dlq_arn"]
        roles = set()
        for key, arn in rules.items():
            name = arn.split("/")[-1]
            if name != f"tagwarden-{INFRA_ID}-{key}-forward":
                return f"rule name {name}"
            rule = ev1.describe_rule(Name=name)
            if json.loads(rule["EventPattern"]) != patterns[key]:
                return f"forwarding pattern {key} != event_patterns[{key}]"
            t = ev1.list_targets_by_rule(Rule=name)["Targets"]
            if len(t) != 1 or t[0]["Arn"] != bus or not t[0].get("RoleArn"):
                return f"{key} targets {t}"
            roles.add(t[0]["RoleArn"])
            # Undeliverable forwarded events are retried, then kept in a us-east-1
            # DLQ that admits only these rules.
            if t[0].get("DeadLetterConfig", {}).get("Arn") != dlq or not dlq.startswith("arn:aws:sqs:us-east-1:"):
                return f"{key} target dead-letter config {t[0].get('DeadLetterConfig')} (output {dlq})"
            rp = t[0].get("RetryPolicy", {})
            if rp.get("MaximumRetryAttempts") != 185 or rp.get("MaximumEventAgeInSeconds") != 86400:
                return f"{key} target retry policy {rp}"
        if len(roles) != 1:
            return f"forwarding roles {roles}"
        role_name = roles.pop().split("/")[-1]
        doc = iam.get_role_policy(RoleName=role_name, PolicyName="put-events")["PolicyDocument"]
        if policy_actions(doc) != {"events:PutEvents"} or as_list(doc["Statement"][0]["Resource"]) != [bus]:
            return f"forwarding role policy {doc}"
        sqs1 = client("sqs", "us-east-1")
        url = sqs1.get_queue_url(QueueName=dlq.split(":")[-1])["QueueUrl"]
        qa = sqs1.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        qp = json.loads(qa["Policy"])
        allow = [st for st in qp["Statement"] if st["Effect"] == "Allow"]
        if (len(allow) != 1 or allow[0].get("Principal") != {"Service": "events.amazonaws.com"}
                or set(as_list(allow[0].get("Condition", {}).get("ArnEquals", {}).get("aws:SourceArn"))) != set(rules.values())):
            return f"forwarding DLQ policy {qp}"
        if qa.get("SqsManagedSseEnabled") != "true":
            return f"forwarding DLQ SSE {qa.get('SqsManagedSseEnabled')}"
        return None

    def queue_redrive_and_encryption():
        a = sqs.get_queue_attributes(QueueUrl=out["events_queue_url"], AttributeNames=["All"])["Attributes"]
        rp = json.loads(a["RedrivePolicy"])
        if rp["deadLetterTargetArn"] != out["dlq_arn"] or int(rp["maxReceiveCount"]) != 5:
            return f"redrive {rp}"
        # Lambda Developer Guide: at least six times the function timeout; the module adds the window.
        if int(a["VisibilityTimeout"]) != 6 * FUNCTION_TIMEOUT + BATCHING_WINDOW:
            return f"visibility timeout {a['VisibilityTimeout']} != 6 x function timeout + batching window"
        if a.get("SqsManagedSseEnabled") != "true":
            return f"SSE {a.get('SqsManagedSseEnabled')}"
        qp = json.loads(a["Policy"])
        if not any(s.get("Principal") == {"Service": "events.amazonaws.com"} for s in qp["Statement"]):
            return "queue policy does not admit EventBridge"
        # Every sender but the module's rules is refused by an explicit Deny (moto does not
        # enforce queue policies: judged by the evaluator, the Deny alone deciding).
        rules = list(out["event_rule_arns"].values())
        deny = {"Statement": [dict(st, Effect="Allow") for st in qp["Statement"]
                              if st["Effect"] == "Deny" and st.get("Sid") == "DenyAllButTheRules"]}
        q = out["events_queue_arn"]
        for case, ctx, denied in [
            ("EventBridge from a module rule", {"aws:SourceArn": rules[0]}, False),
            ("EventBridge from every module rule", {"aws:SourceArn": rules[-1]}, False),
            ("EventBridge from another rule", {"aws:SourceArn": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/other"}, True),
            ("a role of this account (no aws:SourceArn)", {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/admin"}, True),
        ]:
            if bool(allowed_by(deny, "sqs:SendMessage", q, ctx)) != denied:
                return f"queue policy: {case} {'not ' if denied else ''}denied"
        d = sqs.get_queue_attributes(QueueUrl=out["dlq_url"], AttributeNames=["All"])["Attributes"]
        if d.get("SqsManagedSseEnabled") != "true" or int(d["MessageRetentionPeriod"]) != 1209600:
            return f"dlq attributes {d}"
        return None

    def event_source_mapping_partial_batches():
        m = lam.list_event_source_mappings(EventSourceArn=out["events_queue_arn"])["EventSourceMappings"]
        if len(m) != 1 or m[0]["FunctionArn"] != out["function_arn"]:
            return f"mappings {m}"
        if m[0].get("FunctionResponseTypes") != ["ReportBatchItemFailures"]:
            return f"FunctionResponseTypes {m[0].get('FunctionResponseTypes')}"
        got = (m[0].get("BatchSize"), m[0].get("MaximumBatchingWindowInSeconds"), m[0].get("ScalingConfig"))
        if got != (BATCH_SIZE, BATCHING_WINDOW, {"MaximumConcurrency": MAXIMUM_CONCURRENCY}):
            return f"BatchSize, MaximumBatchingWindowInSeconds, ScalingConfig {got}"
        bound = out["ec2_writes_per_second_bound"]
        # Reserved concurrency by default, the mapping's maximum + 1, so the bound of every
        # invocation together holds without configuration.
        want = {"per_invocation": EC2_WRITES_PER_SECOND, "event_path": EC2_WRITES_PER_SECOND * MAXIMUM_CONCURRENCY,
                "all_invocations": EC2_WRITES_PER_SECOND * (MAXIMUM_CONCURRENCY + 1)}
        if bound != want:
            return f"ec2_writes_per_second_bound {bound}, want {want}"
        reserved = lam.get_function_concurrency(FunctionName=out["function_name"]).get("ReservedConcurrentExecutions")
        if reserved != MAXIMUM_CONCURRENCY + 1:
            return f"reserved concurrency {reserved}, want {MAXIMUM_CONCURRENCY + 1}"
        return None

    def bucket_denies_non_tls_and_is_private():
        b = out["policy_bucket_name"]
        pol = json.loads(s3.get_bucket_policy(Bucket=b)["Policy"])
        deny = [s for s in pol["Statement"] if s["Effect"] == "Deny"
                and s.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"]
        if not deny or "s3:*" not in as_list(deny[0]["Action"]):
            return f"no TLS-only deny in {pol}"
        if s3.get_bucket_versioning(Bucket=b).get("Status") != "Enabled":
            return "versioning not enabled"
        pab = s3.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]
        if not all(pab.values()):
            return f"public access block {pab}"
        enc = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"][0]
        if enc["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] != "AES256":
            return f"encryption {enc}"
        own = s3.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"]["Rules"][0]["ObjectOwnership"]
        if own != "BucketOwnerEnforced":
            return f"ownership {own}"
        return None

    def policy_object_and_notification():
        b = out["policy_bucket_name"]
        if out["policy_uri"] != f"s3://{b}/tagwarden/infrastructure.yaml":
            return f"policy_uri {out['policy_uri']}"
        body = s3.get_object(Bucket=b, Key="tagwarden/infrastructure.yaml")["Body"].read().decode()
        if f"infrastructureName: {INFRA_ID}" not in body:
            return "policy object lacks infrastructureName"
        n = s3.get_bucket_notification_configuration(Bucket=b)["LambdaFunctionConfigurations"]
        if len(n) != 1 or n[0]["LambdaFunctionArn"] != out["function_arn"]:
            return f"notifications {n}"
        rules = n[0]["Filter"]["Key"]["FilterRules"]
        if {r["Name"].lower(): r["Value"] for r in rules}.get("prefix") != "tagwarden/infrastructure.yaml":
            return f"notification filter {rules}"
        return None

    def role_policy_is_exactly_the_action_list():
        doc, inline, attached = role_document(iam, out["role_name"])
        if inline != ["tagwarden"] or attached != [f"tagwarden-{INFRA_ID}-tag-writes"]:
            return f"role policies: inline {inline}, attached {attached}"
        problems = []
        got = policy_actions(doc)
        if got != EXPECTED_ROLE_ACTIONS:
            problems.append(f"extra {sorted(got - EXPECTED_ROLE_ACTIONS)} missing {sorted(EXPECTED_ROLE_ACTIONS - got)}")
        flat = {a for svc in out["iam_actions"]["code"].values() for acts in svc.values() for a in acts}
        if flat != CODE_ACTIONS:
            problems.append(f"output iam_actions.code: extra {sorted(flat - CODE_ACTIONS)} missing {sorted(CODE_ACTIONS - flat)}")
        if set(out["iam_actions"]["generic_tag"]) != GENERIC_TAG_ACTIONS | EXTRA_TAG_ACTIONS:
            problems.append(f"output iam_actions.generic_tag {out['iam_actions']['generic_tag']}")
        tag_services = ("ec2", "s3", "elasticloadbalancing", "iam", "tag", "route53", "elasticfilesystem", "sns", "kms")
        bad = [a for a in got if a.split(":")[0] in tag_services
               and a.split(":")[1].startswith(("Delete", "Untag", "RemoveTags"))]
        if bad:
            problems.append(f"forbidden actions {bad}")
        # One Deny, the case-blind reserved-key guard; no NotAction/NotResource.
        denies = [st.get("Sid") for st in doc["Statement"] if st["Effect"] != "Allow"]
        if denies != ["DenyReservedTagKeys"] or any("NotAction" in st or "NotResource" in st for st in doc["Statement"]):
            problems.append(f"unexpected Deny {denies} or NotAction/NotResource")
        problems += statement_problems(doc, out["policy_bucket_name"])
        return "; ".join(problems) or None

    def role_allows_exactly_the_owned_tag_writes():
        doc = role_document(iam, out["role_name"])[0]
        wrong = []
        for case, action, arn, ctx, want in tag_write_cases():
            sid = allowed_by(doc, action, arn, ctx)
            if bool(sid) != want:
                wrong.append(f"{case}: {'allowed by ' + sid if sid else 'denied'}, want {'allowed' if want else 'denied'}")
        return "; ".join(wrong) or None

    def lambda_contract():
        f = lam.get_function_configuration(FunctionName=out["function_name"])
        env = f["Environment"]["Variables"]
        want_env = {"TAGWARDEN_POLICY": out["policy_uri"], "TAGWARDEN_SELF_ROLE_ARN": role_arn,
                    "POLICY_TTL": "60", "RUST_LOG": "info",
                    "TAGWARDEN_EC2_WRITES_PER_SECOND": str(EC2_WRITES_PER_SECOND),
                    "TAGWARDEN_CLUSTERS": INFRA_ID, "TAGWARDEN_MODE": "audit"}
        if env != want_env:
            return f"environment {env}"
        # The architecture is the package manifest's (x86_64 here), not a default.
        if (f["Runtime"], f["Handler"], f["Architectures"]) != ("provided.al2023", "bootstrap", ["x86_64"]):
            return f"runtime {f['Runtime']} handler {f['Handler']} arch {f['Architectures']}"
        if f.get("DeadLetterConfig", {}).get("TargetArn") != out["dlq_arn"]:
            return f"dead letter config {f.get('DeadLetterConfig')}"
        logs = client("logs")
        g = logs.describe_log_groups(logGroupNamePrefix=f"/aws/lambda/{out['function_name']}")["logGroups"]
        if len(g) != 1 or g[0].get("retentionInDays") != 30:
            return f"log group {g}"
        return None

    def dashboard_searches_every_metric():
        body = json.loads(cw.get_dashboard(DashboardName=out["dashboard_name"])["DashboardBody"])
        text = json.dumps(body)
        for m in METRICS:
            if f'MetricName=\\"{m}\\"' not in text:
                return f"no SEARCH widget for {m}"
        for needle in ('"AWS/Lambda", "Errors"', '"AWS/Lambda", "Duration"', '"ApproximateNumberOfMessagesVisible"'):
            if needle not in text:
                return f"dashboard lacks {needle}"
        # The calls per correction, beside the compliance lag, under the deployment's InfraID.
        titles = [w["properties"].get("title", "") for w in body["widgets"]]
        lag = next((i for i, t in enumerate(titles) if t.startswith("ComplianceLag")), None)
        if lag is None or not titles[lag + 1].startswith("CallsPerCorrection"):
            return f"CallsPerCorrection is not beside ComplianceLag: {titles}"
        calls = body["widgets"][lag + 1]["properties"]["metrics"]
        if [m[:6] for m in calls] != [["TagWarden", "CallsPerCorrection", "Cloud", "aws", "InfraID", INFRA_ID]] * 2:
            return f"CallsPerCorrection lines {calls}"
        # This deployment audits; right after the header, the compliance % (over the
        # range and over time: metric math on the cluster's ResourcesInLine and ResourcesDrifted),
        # the would-be writes and in line vs drifted.
        w = body["widgets"]
        pct = w[2]["properties"]["metrics"]
        if not ("Mode **audit**" in w[0]["properties"]["markdown"] and w[1]["properties"].get("view") == "singleValue"
                and w[2]["properties"]["title"].startswith("Compliance %") and w[1]["properties"]["metrics"] == pct
                and [m[:6] for m in pct[:2]] == [["TagWarden", n, "Cloud", "aws", "InfraID", INFRA_ID] for n in ("ResourcesInLine", "ResourcesDrifted")]
                and pct[2] == [{"expression": "100 * i0 / (i0 + d0)", "id": "c0", "label": INFRA_ID}]
                and w[3]["properties"]["metrics"][0][:6] == ["TagWarden", "WouldWrite", "Cloud", "aws", "InfraID", INFRA_ID]
                and [m[1] for m in w[4]["properties"]["metrics"]] == ["ResourcesInLine", "ResourcesDrifted"]):
            return f"compliance widgets {json.dumps(w[:5])}"
        return None

    def alarms_exist_with_sns():
        names = {f"tagwarden-{INFRA_ID}-{s}"
                 for s in ("write-failures", "contested", "policy-rejected", "listing-failures", "lambda-errors", "dlq-not-empty",
                           "compliance-lag-p99", "no-events", "no-sweep")}
        got = {a["AlarmName"]: a for a in cw.describe_alarms(AlarmNamePrefix=f"tagwarden-{INFRA_ID}")["MetricAlarms"]}
        if set(got) != names:
            return f"alarms {sorted(got)}"
        topic = tf["alarm_topic_arn"]
        lag = got[f"tagwarden-{INFRA_ID}-compliance-lag-p99"]
        if lag.get("ExtendedStatistic") != "p99" or lag["Threshold"] != 300000 or lag.get("MetricName") != "ComplianceLag":
            return f"compliance-lag alarm: {lag.get('ExtendedStatistic')} {lag['Threshold']} {lag.get('MetricName')}"
        # Silence is an alarm: no events for 24 h, no sweep for 2 h (twice rate(1 hour)),
        # missing data breaching, on the deployment's own series.
        silence = {f"tagwarden-{INFRA_ID}-no-events": ("EventsReceived", 24), f"tagwarden-{INFRA_ID}-no-sweep": ("SweepsCompleted", 2)}
        for n, (metric, periods) in silence.items():
            a = got[n]
            dims = {d["Name"]: d["Value"] for d in a.get("Dimensions", [])}
            if (a.get("MetricName"), a.get("Namespace"), dims, a["Period"], a["EvaluationPeriods"], a.get("TreatMissingData"),
                    a["ComparisonOperator"], a["Threshold"], a["AlarmActions"]) != (
                    metric, "TagWarden", {"Cloud": "aws", "InfraID": INFRA_ID}, 3600, periods, "breaching",
                    "LessThanThreshold", 1, [topic]):
                return f"{n}: {a}"
        for n, a in got.items():
            if n in silence:
                continue
            want = 300000 if a is lag else 0
            if a["AlarmActions"] != [topic] or a["Threshold"] != want or a["ComparisonOperator"] != "GreaterThanThreshold":
                return f"{n}: actions {a['AlarmActions']} threshold {a['Threshold']} {a['ComparisonOperator']}"
        q = got[f"tagwarden-{INFRA_ID}-write-failures"].get("Metrics", [])
        if not q or "SUM(WriteFailures)" not in q[0].get("Expression", ""):
            return f"write-failures query {q}"
        q = got[f"tagwarden-{INFRA_ID}-listing-failures"].get("Metrics", [])
        if not q or q[0].get("Expression") != f"SELECT SUM(ListingFailures) FROM \"TagWarden\" WHERE InfraID = '{INFRA_ID}'":
            return f"listing-failures query {q}"
        # Someone receives them (alarm_emails), in eu-west-1 and, for the forwarding
        # dead-letter queue, in us-east-1.
        subs = client("sns").list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
        if [(x["Protocol"], x["Endpoint"]) for x in subs] != [("email", "ops@example.com")]:
            return f"alarm topic subscriptions {subs}"
        east = client("cloudwatch", "us-east-1").describe_alarms(AlarmNamePrefix=f"tagwarden-{INFRA_ID}-forward")["MetricAlarms"]
        if [a["AlarmName"] for a in east] != [f"tagwarden-{INFRA_ID}-forward-dlq-not-empty"]:
            return f"us-east-1 alarms {[a['AlarmName'] for a in east]}"
        dims = {d["Name"]: d["Value"] for d in east[0]["Dimensions"]}
        if dims != {"QueueName": f"tagwarden-{INFRA_ID}-forward-dlq"} or len(east[0]["AlarmActions"]) != 1:
            return f"forwarding DLQ alarm {east[0]}"
        east_subs = client("sns", "us-east-1").list_subscriptions_by_topic(TopicArn=east[0]["AlarmActions"][0])["Subscriptions"]
        if [(x["Protocol"], x["Endpoint"]) for x in east_subs] != [("email", "ops@example.com")]:
            return f"us-east-1 alarm topic subscriptions {east_subs}"
        return None

    def trail_records_management_events():
        # create_trail = true: multi-Region, management events read and write, logging,
        # log file validation, into its own private TLS-only bucket whose policy is CloudTrail's.
        ct = client("cloudtrail")
        trails = [t for t in ct.describe_trails()["trailList"] if t["Name"] == f"tagwarden-{INFRA_ID}-trail"]
        if len(trails) != 1:
            return f"trails {ct.describe_trails()['trailList']}"
        t = trails[0]
        if not (t["IsMultiRegionTrail"] and t["IncludeGlobalServiceEvents"] and t["LogFileValidationEnabled"]):
            return f"trail {t}"
        if not ct.get_trail_status(Name=t["TrailARN"])["IsLogging"]:
            return "trail is not logging"
        sel = ct.get_event_selectors(TrailName=t["TrailARN"]).get("EventSelectors", [])
        if [(e["ReadWriteType"], e["IncludeManagementEvents"]) for e in sel] != [("All", True)]:
            return f"event selectors {sel}"
        b = t["S3BucketName"]
        pol = json.loads(s3.get_bucket_policy(Bucket=b)["Policy"])
        by_sid = {st.get("Sid"): st for st in pol["Statement"]}
        acl, write = by_sid.get("AWSCloudTrailAclCheck"), by_sid.get("AWSCloudTrailWrite")
        if not acl or not write or "DenyInsecureTransport" not in by_sid:
            return f"trail bucket policy sids {sorted(by_sid)}"
        if (acl["Principal"], acl["Action"], acl["Condition"]) != ({"Service": "cloudtrail.amazonaws.com"}, "s3:GetBucketAcl",
                                                                    {"StringEquals": {"aws:SourceArn": t["TrailARN"]}}):
            return f"acl check statement {acl}"
        if (write["Action"], write["Resource"], write["Condition"]) != (
                "s3:PutObject", f"arn:aws:s3:::{b}/AWSLogs/{ACCOUNT}/*",
                {"StringEquals": {"aws:SourceArn": t["TrailARN"], "s3:x-amz-acl": "bucket-owner-full-control"}}):
            return f"write statement {write}"
        enc = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"][0]
        if enc["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] != "AES256":
            return f"trail bucket encryption {enc}"
        return None

    def tags_on_resources():
        t = lam.list_tags(Resource=out["function_arn"])["Tags"]
        if t.get("app") != "tagwarden" or t.get("test") != "moto":
            return f"function tags {t}"
        q = sqs.list_queue_tags(QueueUrl=out["events_queue_url"]).get("Tags", {})
        if q.get("test") != "moto":
            return f"queue tags {q}"
        return None

    for name, fn in [
        ("rendered event patterns follow the contract", rendered_patterns_follow_contract),
        ("deployed rule patterns equal the rendered output", deployed_rules_equal_rendered),
        ("sweep schedule targets the function with {\"tagwarden\":\"sweep\"}", sweep_rule_targets_function),
        ("IAM and Route 53 forwarding rules in us-east-1 -> eu-west-1 bus", global_forwarding_rules_in_us_east_1),
        ("event queue: redrive to DLQ (5), visibility = 6x timeout + window, SSE", queue_redrive_and_encryption),
        ("queue mapping: partial batch failures, batch 100, window 2 s, at most 2 invocations", event_source_mapping_partial_batches),
        ("policy bucket: TLS-only policy, versioned, private, encrypted", bucket_denies_non_tls_and_is_private),
        ("policy object and S3 notification on the policy key", policy_object_and_notification),
        ("role policy is exactly the action list, writes conditioned", role_policy_is_exactly_the_action_list),
        (f"role policy evaluated: {len(tag_write_cases())} tag-write cases (owned only; Classic ELB, EFS, Route 53)",
         role_allows_exactly_the_owned_tag_writes),
        ("Lambda runtime/handler/arch/env/DLQ and log group", lambda_contract),
        ("dashboard searches every TagWarden metric; in audit mode, compliance % and would-be writes first", dashboard_searches_every_metric),
        ("alarms exist with SNS actions, silence alarms, e-mail subscriptions, the forwarding DLQ's alarm", alarms_exist_with_sns),
        ("create_trail: multi-Region management-events trail, CloudTrail's bucket policy, encrypted", trail_records_management_events),
        ("tags var reaches resources", tags_on_resources),
    ]:
        check(name, fn)


# ---------------------------------------------------------------------------------------------
def cloudtrail(svc, name, caller, marker, error=None):
    detail = {"eventVersion": "1.09", "eventSource": f"{svc}.amazonaws.com", "eventName": name,
              "awsRegion": REGION, "userIdentity": caller, "requestID": marker}
    if error:
        detail["errorCode"] = error
    return {"Source": f"aws.{svc}", "DetailType": "AWS API Call via CloudTrail", "Detail": json.dumps(detail)}


def tag_change(service, tags, marker, resource_type="instance"):
    return {"Source": "aws.tag", "DetailType": "Tag Change on Resource",
            "Detail": json.dumps({"service": service, "resource-type": resource_type,
                                  "changed-tag-keys": sorted(tags), "tags": tags, "requestID": marker})}


def classic_elb(name, marker, caller):
    """A Classic ELB call: same source and eventName as ELBv2, apiVersion 2012-06-01."""
    e = cloudtrail("elasticloadbalancing", name, caller, marker)
    d = json.loads(e["Detail"])
    d.update(apiVersion="2012-06-01", requestParameters={"loadBalancerNames": [f"{INFRA_ID}-ingress"]})
    e["Detail"] = json.dumps(d)
    return e


def routing_phase(tf):
    out = tf["tagwarden"]
    lam, sqs = client("lambda"), client("sqs")
    role = out["role_arn"]
    other_role = "arn:aws:iam::123456789012:role/OrganizationAccountAccessRole"

    def assumed(role_arn):
        return {"type": "AssumedRole", "arn": f"{role_arn.replace(':iam:', ':sts:').replace(':role/', ':assumed-role/')}/s",
                "sessionContext": {"sessionIssuer": {"type": "Role", "arn": role_arn}}}

    console_user = {"type": "IAMUser", "arn": "arn:aws:iam::123456789012:user/mateo",
                    "sessionContext": {"sessionIssuer": {}, "attributes": {"mfaAuthenticated": "true"}}}
    plain_user = {"type": "IAMUser", "arn": "arn:aws:iam::123456789012:user/ci"}

    # (marker, region, entry, delivered?)
    cases = [
        ("ec2-other-role", REGION, cloudtrail("ec2", "CreateTags", assumed(other_role), "m1"), True),
        ("ec2-console-user-empty-issuer", REGION, cloudtrail("ec2", "RunInstances", console_user, "m2"), True),
        ("ec2-user-no-session", REGION, cloudtrail("ec2", "CreateVolume", plain_user, "m3"), True),
        ("ec2-own-role", REGION, cloudtrail("ec2", "CreateTags", assumed(role), "m4"), False),
        ("ec2-failed-call", REGION, cloudtrail("ec2", "RunInstances", plain_user, "m5", error="UnauthorizedOperation"), False),
        ("ec2-unlisted-event", REGION, cloudtrail("ec2", "StartInstances", plain_user, "m6"), False),
        ("s3-own-role", REGION, cloudtrail("s3", "PutBucketTagging", assumed(role), "m7"), False),
        ("s3-other-role", REGION, cloudtrail("s3", "DeleteBucketTagging", assumed(other_role), "m8"), True),
        ("elbv2-add-tags", REGION, cloudtrail("elasticloadbalancing", "AddTags", assumed(other_role), "m9"), True),
        ("iam-in-function-region", REGION, cloudtrail("iam", "TagRole", plain_user, "m10"), True),
        ("iam-own-role", REGION, cloudtrail("iam", "TagRole", assumed(role), "m11"), False),
        ("tag-change-ec2-owned", REGION, tag_change("ec2", {f"kubernetes.io/cluster/{INFRA_ID}": "owned", "a": "1"}, "m12"), True),
        ("tag-change-ec2-untagged", REGION, tag_change("ec2", {"a": "1"}, "m15"), False),
        ("tag-change-ec2-shared", REGION, tag_change("ec2", {f"kubernetes.io/cluster/{INFRA_ID}": "shared"}, "m16"), False),
        ("tag-change-other-cluster", REGION, tag_change("ec2", {"kubernetes.io/cluster/other-abcde": "owned"}, "m17"), False),
        # Every service's owned resources, no service list.
        ("tag-change-rds-owned", REGION, tag_change("rds", {f"kubernetes.io/cluster/{INFRA_ID}": "owned"}, "m13", "db"), True),
        ("tag-change-efs-owned", REGION, tag_change("elasticfilesystem", {f"kubernetes.io/cluster/{INFRA_ID}": "owned"}, "m18", "file-system"), True),
        ("tag-change-efs-other-cluster", REGION, tag_change("elasticfilesystem", {"kubernetes.io/cluster/other-abcde": "owned"}, "m19", "file-system"), False),
        ("elb-create-listener", REGION, cloudtrail("elasticloadbalancing", "CreateListener", assumed(other_role), "m20"), True),
        ("elb-create-rule", REGION, cloudtrail("elasticloadbalancing", "CreateRule", plain_user, "m21"), True),
        ("elb-classic-add-tags", REGION, classic_elb("AddTags", "m22", plain_user), True),
        ("elb-classic-own-role", REGION, classic_elb("AddTags", "m23", assumed(role)), False),
        ("efs-create-file-system", REGION, cloudtrail("elasticfilesystem", "CreateFileSystem", plain_user, "m24"), True),
        ("efs-create-access-point", REGION, cloudtrail("elasticfilesystem", "CreateAccessPoint", plain_user, "m25"), True),
        ("efs-delete-tags", REGION, cloudtrail("elasticfilesystem", "DeleteTags", assumed(other_role), "m26"), True),
        ("efs-untag-resource", REGION, cloudtrail("elasticfilesystem", "UntagResource", plain_user, "m27"), True),
        ("efs-own-role", REGION, cloudtrail("elasticfilesystem", "TagResource", assumed(role), "m28"), False),
        ("efs-unlisted-event", REGION, cloudtrail("elasticfilesystem", "CreateMountTarget", plain_user, "m29"), False),
        ("efs-failed-call", REGION, cloudtrail("elasticfilesystem", "CreateFileSystem", plain_user, "m30", error="FileSystemAlreadyExists"), False),
        # An EFS-named event from another source does not match (source + eventSource + eventName).
        ("ec2-named-like-efs", REGION, cloudtrail("ec2", "TagResource", plain_user, "m31"), False),
        ("route53-in-function-region", REGION, cloudtrail("route53", "CreateHostedZone", plain_user, "m32"), True),
        ("route53-own-role", REGION, cloudtrail("route53", "ChangeTagsForResource", assumed(role), "m33"), False),
        ("route53-unlisted-event", REGION, cloudtrail("route53", "ChangeResourceRecordSets", plain_user, "m34"), False),
    ]
    forwarded = [
        ("iam-forwarded-from-us-east-1", "us-east-1", cloudtrail("iam", "CreateRole", plain_user, "m14"), True),
        # Route 53's events arrive in us-east-1 only, like IAM's.
        ("route53-zone-forwarded-from-us-east-1", "us-east-1", cloudtrail("route53", "CreateHostedZone", plain_user, "m40"), True),
        ("route53-tags-forwarded-from-us-east-1", "us-east-1", cloudtrail("route53", "ChangeTagsForResource", assumed(other_role), "m41"), True),
        ("route53-health-check-forwarded-from-us-east-1", "us-east-1", cloudtrail("route53", "CreateHealthCheck", console_user, "m42"), True),
        ("route53-own-role-in-us-east-1", "us-east-1", cloudtrail("route53", "ChangeTagsForResource", assumed(role), "m43"), False),
        ("route53-records-in-us-east-1", "us-east-1", cloudtrail("route53", "ChangeResourceRecordSets", plain_user, "m44"), False),
        ("route53-failed-in-us-east-1", "us-east-1", cloudtrail("route53", "CreateHostedZone", plain_user, "m45", error="HostedZoneAlreadyExists"), False),
        # Regional services are not forwarded (their events reach the function's region directly).
        ("ec2-in-us-east-1", "us-east-1", cloudtrail("ec2", "CreateVpc", plain_user, "m46"), False),
    ]

    def disable_mapping():
        for m in lam.list_event_source_mappings(EventSourceArn=out["events_queue_arn"])["EventSourceMappings"]:
            lam.update_event_source_mapping(UUID=m["UUID"], Enabled=False)
        return None

    def drain(url):
        got = []
        deadline = time.time() + 10
        while time.time() < deadline:
            r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            msgs = r.get("Messages", [])
            if not msgs:
                break
            for m in msgs:
                got.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return got

    def run(case_list):
        def fn():
            for marker, region, entry, _ in case_list:
                r = client("events", region).put_events(Entries=[dict(entry, EventBusName="default")])
                if r.get("FailedEntryCount"):
                    return f"{marker}: PutEvents failed {r}"
            got = {e.get("detail", {}).get("requestID") for e in drain(out["events_queue_url"])}
            want = {json.loads(e["Detail"])["requestID"] for _, _, e, ok in case_list if ok}
            if got != want:
                names = {json.loads(e["Detail"])["requestID"]: m for m, _, e, _ in case_list}
                return (f"unexpectedly delivered {sorted(names[g] for g in got - want)}; "
                        f"missing {sorted(names[w] for w in want - got)}")
            return None
        return fn

    check("disable queue mapping for routing (moto cannot run the function)", disable_mapping)
    check("event routing: own role, failed and unlisted calls dropped; others queued", run(cases))
    check("event routing: IAM and Route 53 events forwarded from us-east-1 reach the queue; others not", run(forwarded))
    check("DLQ empty after routing", lambda: (
        None if not drain(out["dlq_url"]) else "dead letters present"))


def publish_phase(tf):
    """Play the publisher. It writes the policy object as `tagwarden publish` does
    (crates/aws/src/policy_store.rs: PutObject with the key's content type, conditional on the ETag it
    read, no tags); scripts/test-terraform then requires the next plan to change nothing."""
    out = tf["tagwarden"]
    s3 = client("s3")
    b, key = out["policy_bucket_name"], "tagwarden/infrastructure.yaml"

    def publisher_writes_the_policy():
        etag = s3.head_object(Bucket=b, Key=key)["ETag"]
        body = s3.get_object(Bucket=b, Key=key)["Body"].read().decode()
        published = body.replace('value: "4242"', 'value: "5151"')
        if published == body:
            return "the initial policy lacks cost-center 4242"
        s3.put_object(Bucket=b, Key=key, Body=published.encode(), ContentType="application/yaml", IfMatch=etag)
        if s3.get_object(Bucket=b, Key=key)["Body"].read().decode() != published:
            return "the published version was not read back"
        return None

    check("the publisher writes a new policy version (PutObject, If-Match, no tags)", publisher_writes_the_policy)


def main():
    tf = {k: v["value"] for k, v in json.load(open(sys.argv[1])).items()}
    {"resources": resources_phase, "routing": routing_phase, "publish": publish_phase}[sys.argv[2]](tf)
    if failures:
        print(f"check_aws_basic {sys.argv[2]}: {len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
