"""The organization guide, executed: docs/src/guides/aws-organization.md's blocks (deploy, the
publisher's tag and publish per cluster, the report, a person's preview, an audit layer, the switch
to enforce with a sweep), the upgrade (docs/src/operations/upgrade.md: the one-account guide's
`upgrade-aws` block with `-chdir=infra/examples/aws-organization`, from PREVIOUS_LAYOUT's infra/ to
this tree's, as run.py does) and docs/src/operations/uninstall.md's `org-uninstall`, run as written in
one bash against a moto server, in a copy of the repository, with the values a reader takes from
their organization (the guide's example ids) replaced by ones made up for this run. Then:

  * every command exited 0 (the preview 2: it found drift, as the guide says) and the commands
    are counted, to the first correction and to a clean uninstall;
  * in audit (after the deploy, the publish and its notification's sweep, the report and the
    preview) no owned resource of either member account is written; the preview names them;
  * enforced, after the sweep the guide starts: the IPI cluster's owned resources carry its tags,
    the hosted cluster under its audit layer and the resource no cluster owns are untouched;
  * the upgrade's plan destroys nothing (the block's own jq check) and the hub stays in enforce;
  * after the uninstall, moto holds what it held before, in the hub account and in each member
    account, but for the tags written.

Stand-ins beside run.py's (`oc`, `cargo`, `aws lambda invoke`, S3's notifications):
  organization  moto keeps no accounts apart without a login to each: the hub is moto's default
           account (the session's login, as the guide's "in the hub account"); each member account's
           blocks (`org-tag`: its administrator; `org-publish`, `org-audit-layer`: its publisher's
           role; `org-preview`: the hub's auditors role) run with credentials of an AssumeRole into
           that role, exported before the block and restored after it.
  StackSets  moto stores the StackSets and deploys no instance: after the deploy's apply, each
           StackSet's template becomes a stack in the accounts and regions its instances target
           (the OU stands for the two member accounts); the destroy's deletion of the instances
           is stood in by deleting those stacks after it.
  SQS      Lambda's event source mappings (the hub's member-events and shard queues): after each
           command, standins.py sqs-deliver hands each mapped queue's messages to the function.
  the cluster  `oc` answers from each cluster's Infrastructure object (the fixture with the
           cluster's infraID and region), the one of the cluster whose block runs.

usage: organization.py ROOT  (as run.py; env: TAGWARDEN_CLI, TAGWARDEN_BOOTSTRAP, KEEP_WORK=1)
"""
import json
import os
import random
import re
import signal
import string
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import readme_blocks  # noqa: E402
sys.path.insert(0, HERE)
import standins  # noqa: E402
from harness import (PREVIOUS_LAYOUT, ROOT, check, cleanup, make_clone, previous_layout, results, run_session,  # noqa: E402
                     shell_env, start_moto, work)

GUIDE = "docs/src/guides/aws-organization.md"
UNINSTALL = "docs/src/operations/uninstall.md"
# docs/src/operations/upgrade.md: an organization's upgrade is the one-account guide's block "with
# -chdir=infra/examples/aws-organization".
UPGRADE = "docs/src/guides/aws-account.md"
HUB = "123456789012"  # moto's default account: the session's login
FIXTURE = "tests/fixtures/policies/infrastructure-aws.yaml"
FIXTURE_INFRA_ID, FIXTURE_REGION = "mycluster-7xk2p", "eu-west-1"
REGIONS = ["ap-southeast-2", "ca-central-1", "sa-east-1", "eu-north-1"]
DEADLINE_S = 2400  # about 17 minutes on an idle two-core machine; scripts/test runs it beside cargo test
started = time.monotonic()


def rand(alphabet, n):
    return "".join(random.choices(alphabet, k=n))


def guide_block(path, name):
    return readme_blocks.commands(readme_blocks.block(open(os.path.join(ROOT, path)).read(), name, path))


def tfvars_block():
    text = open(os.path.join(ROOT, GUIDE)).read()
    m = re.search(r"<!-- tfvars: infra/examples/aws-organization -->\n```hcl\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"FAIL {GUIDE}: no tfvars block for infra/examples/aws-organization")
    return m.group(1)


def creds(account, role, session="doctest"):
    c = standins.boto("sts", "us-east-1").assume_role(RoleArn=f"arn:aws:iam::{account}:role/{role}",
                                                      RoleSessionName=session)["Credentials"]
    return {"AWS_ACCESS_KEY_ID": c["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": c["SecretAccessKey"],
            "AWS_SESSION_TOKEN": c["SessionToken"]}


def client(service, region, c):
    import boto3

    return boto3.client(service, region_name=region, endpoint_url=os.environ["AWS_ENDPOINT_URL"], verify=os.environ["AWS_CA_BUNDLE"],
                        aws_access_key_id=c["AWS_ACCESS_KEY_ID"], aws_secret_access_key=c["AWS_SECRET_ACCESS_KEY"],
                        aws_session_token=c["AWS_SESSION_TOKEN"])


def member_inventory(account, regions):
    c = creds(account, "OrganizationAccountAccessRole", "inventory")
    out = set()
    iam = client("iam", "us-east-1", c)
    out |= {f"iam role {r['RoleName']}" for r in iam.list_roles()["Roles"]}
    for region in regions:
        out |= {f"{region} events rule {r['Name']}" for r in client("events", region, c).list_rules()["Rules"]}
        out |= {f"{region} cfn stack {s['StackName']}" for s in client("cloudformation", region, c).list_stacks(
            StackStatusFilter=["CREATE_COMPLETE", "UPDATE_COMPLETE"])["StackSummaries"]}
        for t in standins.pages(client("ec2", region, c), "describe_tags", "Tags"):
            out.add(f"{region} ec2 tag {t['ResourceId']} {t['Key']}={t['Value']}")
    return out


def tags_of(account, region, ids):
    c = creds(account, "OrganizationAccountAccessRole", "probe")
    out = {i: {} for i in ids}
    for t in standins.pages(client("ec2", region, c), "describe_tags", "Tags", Filters=[{"Name": "resource-id", "Values": list(ids)}]):
        out[t["ResourceId"]][t["Key"]] = t["Value"]
    return out


def main():
    import yaml

    hub_region = random.choice(REGIONS)
    member_regions = ["us-east-1", hub_region]
    org_id, ou = "o-" + rand(string.ascii_lowercase + string.digits, 10), "ou-" + rand("abcdef0123456789", 4) + "-" + rand("abcdef0123456789", 8)
    acct_a, acct_b = (rand("123456789", 1) + rand(string.digits, 11) for _ in range(2))
    prod, hca, capa = ("dt" + rand(string.ascii_lowercase, 5) + "-" + rand(string.ascii_lowercase + string.digits, 5) for _ in range(3))
    # The reader's values, for the guide's example ones (its "Before you start" says where each comes from).
    subst = [("o-xxxxxxxxxx", org_id), ("ou-xxxx-xxxxxxxx", ou), ("111122223333", acct_a), ("444455556666", acct_b),
             ("prod-7xk2p", prod), ("hca-7xk2p", hca), ("capa-prod", capa), ("<hub account>", HUB), ("eu-west-1", hub_region)]
    sub = lambda s: [s := s.replace(a, b) for a, b in subst][-1]
    clusters = {prod: (acct_a, hub_region), hca: (acct_b, "us-east-1")}  # capa: its set publisher is the Cluster API guide's
    clone = make_clone()
    checkout, upgrade_from = previous_layout(clone, PREVIOUS_LAYOUT)
    print(f"     the upgrade starts from {upgrade_from}", flush=True)
    pki, endpoint = start_moto(member_regions)

    # Each cluster's Infrastructure object, and its owned VPC and instance without its tags; one
    # instance in each member account no cluster owns.
    infra_files, desired, owned, foreign = {}, {}, {}, {}
    fixture = open(os.path.join(ROOT, FIXTURE)).read()
    for infra_id, (acct, region) in clusters.items():
        text = fixture.replace(FIXTURE_INFRA_ID, infra_id).replace(f"region: {FIXTURE_REGION}", f"region: {region}")
        obj = yaml.safe_load(text)
        # As a real cluster serves it: no spec tags (openshift/api has no such field; run.py says more).
        obj.get("spec", {}).get("platformSpec", {}).get("aws", {}).pop("resourceTags", None)
        infra_files[infra_id] = os.path.join(work, f"infrastructure-{infra_id}.yaml")
        yaml.safe_dump(obj, open(infra_files[infra_id], "w"), sort_keys=False)
        desired[infra_id] = {t["key"]: t["value"] for t in obj["status"]["platformStatus"]["aws"]["resourceTags"]}
        c = creds(acct, "OrganizationAccountAccessRole", "setup")
        ec2 = client("ec2", region, c)
        spec = lambda kind, name: [{"ResourceType": kind, "Tags": [{"Key": f"kubernetes.io/cluster/{infra_id}", "Value": "owned"},
                                                                   {"Key": "Name", "Value": name}]}]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=spec("vpc", f"{infra_id}-vpc"))["Vpc"]["VpcId"]
        image = ec2.describe_images()["Images"][0]["ImageId"]
        inst = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=spec("instance", f"{infra_id}-worker"))["Instances"][0]["InstanceId"]
        other = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "no-cluster"}]}])["Instances"][0]["InstanceId"]
        owned[infra_id], foreign[infra_id] = [vpc, inst], other
        # The identity the in-cluster publisher runs as (ccoctl's role): it exists before tagwarden.
        client("iam", "us-east-1", c).create_role(RoleName=f"{infra_id}-tagwarden-publisher", AssumeRolePolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{acct}:root"}, "Action": "sts:AssumeRole"}]}))
    standins.boto("iam", "us-east-1").create_role(RoleName="platform-auditors", AssumeRolePolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{HUB}:root"}, "Action": "sts:AssumeRole"}]}))
    before = {HUB: standins.inventory(member_regions), acct_a: member_inventory(acct_a, member_regions),
              acct_b: member_inventory(acct_b, member_regions)}

    env, hooks = shell_env(pki, endpoint, clone, {"DOCTEST_REGIONS": ",".join(member_regions), "DOCTEST_OWNED": "", "DOCTEST_REGION": hub_region,
                                                  "DOCTEST_INFRASTRUCTURE": infra_files[prod]})
    ex = os.path.join(clone, "infra/examples/aws-organization")
    override = open(os.path.join(ROOT, "tests/terraform/moto/aws-organization_providers_override.tf.in")).read()
    open(os.path.join(ex, "moto_providers_override.tf"), "w").write(override.replace("@MOTO_ENDPOINT@", endpoint))
    tfvars_in = os.path.join(work, "terraform.tfvars.in")
    open(tfvars_in, "w").write(sub(tfvars_block()))
    helper = os.path.join(work, "org-standins.py")
    open(helper, "w").write(HELPER)

    # The session: each block, in the account (and as the role) the guide says; the stand-ins between.
    plan = [(GUIDE, "org-deploy", None, None)]
    for infra_id, (acct, _) in clusters.items():
        plan += [(GUIDE, "org-tag", (acct, "OrganizationAccountAccessRole"), infra_id),
                 (GUIDE, "org-publish", (acct, f"{infra_id}-tagwarden-publisher"), infra_id)]
    plan += [(GUIDE, "org-report", None, None), (GUIDE, "org-preview", (HUB, "platform-auditors"), None),
             (GUIDE, "org-audit-layer", (acct_b, f"{hca}-tagwarden-publisher"), hca), (GUIDE, "org-enforce", None, None),
             (UPGRADE, "upgrade-aws", None, None), (UNINSTALL, "org-uninstall", None, None)]
    # The command whose documented exit is 2: the preview, when it finds drift (the guide says so).
    expect2 = {("org-preview", 1)}
    py = env.get("DOCTEST_PY", sys.executable)
    script = ["set -o pipefail"]
    order, counted = [], {}
    for path, name, role, infra_id in plan:
        cmds = guide_block(path, name)
        if name == "upgrade-aws":
            cmds = [(c.replace("infra/examples/aws-basic", "infra/examples/aws-organization"),
                     [l.replace("infra/examples/aws-basic", "infra/examples/aws-organization") for l in raw]) for c, raw in cmds]
            script.extend(checkout)
        if infra_id:
            acct = clusters.get(infra_id, (acct_b,))[0]
            cmds = [(c.replace("<the publisher's role>", f"{infra_id}-tagwarden-publisher").replace("<infraID>", infra_id)
                     .replace("<its account>", acct), [l.replace("<the publisher's role>", f"{infra_id}-tagwarden-publisher")
                                                       .replace("<infraID>", infra_id).replace("<its account>", acct) for l in raw])
                    for c, raw in cmds]
        cmds = [(sub(c), [sub(l) for l in raw]) for c, raw in cmds]
        holes = [c for c, _ in cmds if readme_blocks.placeholders(c)]
        check(f"{name}: no <placeholder> left to fill in", not holes, "; ".join(holes))
        if infra_id in infra_files:
            script.append(f"export DOCTEST_INFRASTRUCTURE={infra_files[infra_id]}")
        if role:
            c = creds(*role)
            script.append("__saved=$(export -p | grep -E ' (AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN)=')")
            script.append(" ".join(f"export {k}={v};" for k, v in c.items()))
        for n, (c, raw) in enumerate(cmds, 1):
            label = f"{name} {n}/{len(cmds)}"
            order.append(label)
            script.append(f"echo; echo '@@ {label}'")
            script.extend(raw)
            ok = "2" if (name, n) in expect2 else "0"
            script.append(f'__rc=$?; echo; echo "@@ exit $__rc $SECONDS"; case " {ok} " in *" $__rc "*) ;; *) exit 1;; esac')
            if name == "org-deploy" and c.startswith("zip="):
                script.append(f'"{py}" "{helper}" tfvars "{tfvars_in}" "$zip" "{ex}/terraform.tfvars" || exit 1')
            if name == "org-deploy" and " apply" in c:
                script.append(f'"{py}" "{helper}" stacksets-create "{ou}:{acct_a},{acct_b}" || exit 1')
            if name == "upgrade-aws" and " apply " in c:
                script.append(f'"{py}" "{helper}" mode')
            if name == "org-uninstall" and " destroy" in c:
                script.append(f'"{py}" "{helper}" stacksets-delete || exit 1')
            script.append(f'"{hooks}/s3-deliver" || {{ echo "@@ S3 notification delivery failed"; exit 1; }}')
            script.append(f'"{hooks}/sqs-deliver" || {{ echo "@@ SQS delivery failed"; exit 1; }}')
            script.append(f'"{py}" "{helper}" probe "{label}" || exit 1')
        if role:
            script.append('unset AWS_SESSION_TOKEN; eval "$__saved"')
        counted[name] = counted.get(name, 0) + len(cmds)
    script.append("echo '@@ done'")
    env.update({"DOCTEST_HERE": HERE, "DOCTEST_PROBE": json.dumps({i: [clusters[i][0], clusters[i][1], owned[i] + [foreign[i]]] for i in clusters}),
                "DOCTEST_STACKSET_REGIONS": ",".join(member_regions)})
    text, typed, stopped, session_s = run_session(script, clone, env, DEADLINE_S)

    exits = re.findall(r"^@@ exit (\d+) (\d+)$", text, re.M)
    finished = "\n@@ done" in text and not stopped
    ran = re.findall(r"^@@ (\S+ \d+/\d+)$", text, re.M)
    check(f"every documented command ran as the guide says ({len(exits)} commands, exits {sorted(set(r for r, _ in exits))}, "
          f"{typed} confirmations typed, {session_s:.0f} s)", finished and len(exits) == len(order),
          f"{stopped or ''}\n  stopped after {ran[-1] if ran else 'nothing'}\n  --- session.log (tail)\n"
          + "\n".join("  " + l for l in text.splitlines()[-40:]))

    probes = [json.loads(l) for l in open(os.path.join(work, "probe.jsonl"))] if os.path.exists(os.path.join(work, "probe.jsonl")) else []
    carries = lambda p, infra_id, rid: all(p["tags"].get(rid, {}).get(k) == v for k, v in desired[infra_id].items())
    written = lambda p, infra_id, rid: any(p["tags"].get(rid, {}).get(k) == v for k, v in desired[infra_id].items())
    enforced_at = next((i for i, p in enumerate(probes) if p["after"].startswith("org-enforce")), len(probes))
    audit_probes = probes[:enforced_at]
    check("in audit, no owned resource of either member account is written (deploy, publish, report, preview, audit layer)",
          audit_probes and not any(written(p, i, r) for p in audit_probes for i in clusters for r in owned[i]))
    first = next((p["after"] for p in probes if all(carries(p, prod, r) for r in owned[prod])), None)
    check(f"enforced and swept: the IPI cluster {prod}'s owned resources carry its tags (first after {first})",
          first is not None and first.startswith("org-enforce"))
    last = next((p for p in reversed(probes) if p["after"].startswith("org-enforce")), None)
    check(f"the hosted cluster {hca} under its audit layer, and the instances no cluster owns, are untouched",
          last and not any(written(last, hca, r) for r in owned[hca])
          and not any(written(last, i, foreign[i]) for i in clusters), json.dumps(last)[:1500])
    jq_n = next((n for n, (c, _) in enumerate(guide_block(UPGRADE, "upgrade-aws"), 1) if "nothing to destroy" in c), 0)
    upgraded = re.search(rf"^@@ upgrade-aws {jq_n}/\d+\n(.*?)^@@ exit", text, re.M | re.S)
    check(f"upgrade from {upgrade_from}: the plan destroys nothing (the guide's jq check)",
          bool(upgraded and '"nothing to destroy"' in upgraded.group(1)), upgraded.group(1)[-1500:] if upgraded else "")
    mode = re.findall(r"^@@ mode (\S+)$", text, re.M)
    check(f"upgrade: the hub is still in the mode terraform.tfvars says (TAGWARDEN_MODE={mode[-1] if mode else None})",
          mode[-1:] == ["enforce"])
    preview = re.search(r"^@@ org-preview 1/\d+\n(.*?)^@@ exit", text, re.M | re.S)
    shown = preview.group(1) if preview else ""
    check("the preview names the owned resources it would write, in both member accounts",
          all(r in shown for i in clusters for r in owned[i]) and not any(foreign[i] in shown for i in clusters), shown[-2000:])

    after = {HUB: standins.inventory(member_regions), acct_a: member_inventory(acct_a, member_regions),
             acct_b: member_inventory(acct_b, member_regions)}
    ours = {f"{clusters[prod][1]} ec2 tag {r} {k}={v}" for r in owned[prod] for k, v in desired[prod].items()}
    left = {a: sorted((after[a] - before[a]) - ours - {l for l in after[a] - before[a] if " tagged " in l}) for a in after}
    gone = {a: sorted(before[a] - after[a]) for a in after}
    clean = finished and not any(left.values()) and not any(gone.values())
    check("after the uninstall moto holds what it held before, in the hub and each member account, but the tags written",
          clean, json.dumps({"left": left, "gone": gone})[:3000])
    to_first = order.index(first) + 1 if first in order else None
    return sum(1 for _, ok in results if not ok), (
        "organization guide executed: " + ", ".join(f"{n} {k}" for n, k in counted.items()) + " commands; "
        f"first correction after command {to_first} ({first}); clean uninstall after command "
        f"{len(order) if clean else 'none (not clean)'}; hub in {hub_region}, members {acct_a}, {acct_b}; "
        f"session {session_s:.0f} s, wall {time.monotonic() - started:.0f} s")


# The stand-ins this runner adds (run by the session between commands, as standins.py's are).
HELPER = r'''
import json, os, sys
sys.path.insert(0, os.environ["DOCTEST_HERE"])
import standins

def tfvars(src, zip_path, dest):
    """The guide's terraform.tfvars block, the reader's values in it, lambda_zip = the path
    scripts/package-lambda printed ("then lambda_zip = that path in terraform.tfvars")."""
    text = open(src).read()
    lines = [('lambda_zip = "%s"' % zip_path) if l.split("=")[0].strip() == "lambda_zip" else l for l in text.splitlines()]
    open(dest, "w").write("\n".join(lines) + "\n")

def member(account, region, service):
    c = standins.boto("sts", "us-east-1").assume_role(
        RoleArn=f"arn:aws:iam::{account}:role/stacksets-exec-doctest", RoleSessionName="stackset")["Credentials"]
    import boto3
    return boto3.client(service, region_name=region, endpoint_url=os.environ["AWS_ENDPOINT_URL"], verify=os.environ["AWS_CA_BUNDLE"],
                        aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"], aws_session_token=c["SessionToken"])

def targets(name, ou_accounts, regions):
    # tagwarden-member: every account of the OU, each member region; tagwarden-member-roles-<account>:
    # that account, in us-east-1 when a member region (modules/organization, role_region).
    if name.startswith("tagwarden-member-roles-"):
        return [(name.rsplit("-", 1)[1], "us-east-1" if "us-east-1" in regions else regions[0])]
    return [(a, r) for a in ou_accounts for r in regions]

def stacksets(op, arg=""):
    regions = os.environ["DOCTEST_STACKSET_REGIONS"].split(",")
    record = os.path.join(os.environ["DOCTEST_WORK"], "stacksets.json")
    if op == "create":
        ou_accounts = arg.split(":", 1)[1].split(",")
        cf = standins.boto("cloudformation", os.environ["DOCTEST_REGION"])
        made = []
        for s in cf.list_stack_sets(Status="ACTIVE")["Summaries"]:
            d = cf.describe_stack_set(StackSetName=s["StackSetName"])["StackSet"]
            for account, region in targets(s["StackSetName"], ou_accounts, regions):
                m = member(account, region, "cloudformation")
                name = "StackSet-" + s["StackSetName"]
                m.create_stack(StackName=name, TemplateBody=d["TemplateBody"], Capabilities=d.get("Capabilities", []),
                               Parameters=[{"ParameterKey": p["ParameterKey"], "ParameterValue": p["ParameterValue"]} for p in d.get("Parameters", [])])
                status = m.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
                if status != "CREATE_COMPLETE":
                    sys.exit(f"StackSet {s['StackSetName']} in {account} {region}: {status}")
                made.append([account, region, name])
        json.dump(made, open(record, "w"))
        print(f"doc-test stand-in: the StackSets' instances, {len(made)} stacks in the member accounts", file=sys.stderr)
    else:
        for account, region, name in json.load(open(record)):
            member(account, region, "cloudformation").delete_stack(StackName=name)
        print("doc-test stand-in: the StackSets' instances deleted", file=sys.stderr)

def probe(label):
    out = {"after": label, "tags": {}}
    for infra_id, (account, region, ids) in json.loads(os.environ["DOCTEST_PROBE"]).items():
        for t in standins.pages(member(account, region, "ec2"), "describe_tags", "Tags", Filters=[{"Name": "resource-id", "Values": ids}]):
            out["tags"].setdefault(t["ResourceId"], {})[t["Key"]] = t["Value"]
    with open(os.path.join(os.environ["DOCTEST_WORK"], "probe.jsonl"), "a") as f:
        f.write(json.dumps(out) + "\n")

def mode():
    """The hub function's TAGWARDEN_MODE, as moto holds it (the upgrade's check)."""
    env = standins.boto("lambda", os.environ["DOCTEST_REGION"]).get_function_configuration(FunctionName="tagwarden")
    print("@@ mode " + env.get("Environment", {}).get("Variables", {}).get("TAGWARDEN_MODE", "(unset)"))

op, args = sys.argv[1], sys.argv[2:]
if op == "tfvars":
    tfvars(*args)
elif op.startswith("stacksets-"):
    stacksets(op.split("-", 1)[1], *args)
elif op == "probe":
    probe(*args)
elif op == "mode":
    mode()
'''

if __name__ == "__main__":
    os.environ["DOCTEST_HERE"] = HERE
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        failed, summary = main()
    finally:
        cleanup()
    print(summary)
    sys.exit(1 if failed else 0)
