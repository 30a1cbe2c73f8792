"""The documented path is executed: the commands of the one-account guide's `deploy-aws` block
(docs/src/guides/aws-account.md: from nothing to the first audit, its values written once to a
terraform.tfvars), its `enforce-aws`, `sweep-aws`, `day2-aws` and `upgrade-aws` blocks (the switch
to enforce as a one-line edit of that file, a sweep by hand, a tag changed on the cluster and
published, the upgrade's plan and apply with the same tfvars) and docs/src/operations/uninstall.md's
`uninstall-aws` block (readme_blocks.EXECUTED), extracted from the docs (readme_blocks.py, as the
static check_readme_deploy.py reads them) and run as written, one after the other in one bash, in
a copy of the repository, against a local moto server. Then:

  * every command exited 0, and the deploy block has at most 10 commands (the count is printed);
  * day 2: after the publish of the patched Infrastructure object, the owned resources carry its
    new tags (corrected by the sweep the publish's notification starts), and `tagwarden status`
    says every owned resource is in line, with no failure;
  * the upgrade, from the previous layout (PREVIOUS_LAYOUT's infra/, the blocks before it ran on)
    to this tree's: its plan destroys nothing (the block's own `jq` check printed "nothing to
    destroy"), and the function is still in the mode terraform.tfvars says (enforce);
  * the counts, printed last: the guide's commands up to the first correction (the first command
    after which every owned resource carries the cluster's tags, from a probe of moto after each
    command) and up to a clean uninstall (every executed command, when moto is then clean);
  * the cluster's owned VPC, subnet and instance, created in moto beforehand without the cluster's
    tags, carry the Infrastructure object's status.platformStatus.aws.resourceTags, and an
    instance the cluster does not own carries none of them;
  * no value was guessed: the cluster's infraID and region are made up for each run (no default
    or example in the repository holds them) and the function exists under that infraID, in that
    region only; every `$VAR` a block reads was set by an earlier command (readme_blocks.unset_reads);
    no `<placeholder>` is left; `tagwarden` is not on PATH until the documented install;
  * `tagwarden status` says the policy is in force with no failure, and the manual sweep answers
    `{"sweep": N, "failed": 0}`;
  * after the uninstall, moto holds what it held before the deploy, in every service the
    Terraform's provider reaches, in the cluster's region, us-east-1 and the default region,
    except the tags written on the cluster's resources.

Stand-ins, only for what moto or this machine cannot do; each a wrapper first on PATH (written by
this script, running standins.py) or a call between two documented commands:

  oc       the cluster: `oc get infrastructure cluster -o yaml` prints the Infrastructure object
           (tests/fixtures/policies/infrastructure-aws.yaml, OpenShift's shape, its infraID and
           region replaced by this run's, without the spec tags a real API server prunes), `-o
           jsonpath=...` answers field paths from it, `oc patch infrastructure cluster
           --subresource=status --type json|merge -p JSON` applies the day-2 edit to its status
           (RFC 6902 add/replace, RFC 7386). Any other `oc` command fails, naming itself.
  cargo    no build here (a release build of the function takes ~25 minutes): `cargo lambda build`,
           as scripts/package-lambda runs it, puts the prebuilt bootstrap (TAGWARDEN_BOOTSTRAP)
           where cargo-lambda puts its binary, after checking that the bootstrap's ELF machine is
           the architecture asked for; scripts/package-lambda itself runs as written (its glibc
           check, the zip, the manifest by `cargo xtask manifest`, which the machine's cargo runs).
           `cargo install --path . --locked` copies the prebuilt CLI (TAGWARDEN_CLI, with the aws
           feature as the default build has it) to $CARGO_INSTALL_ROOT/bin, which is on PATH as
           ~/.cargo/bin would be. Any other cargo command fails.
  aws      the real AWS CLI (pinned: .tools/venv-awscli; v1, given AWS_REGION as AWS_DEFAULT_REGION,
           as v2 reads it), except `aws lambda invoke` (moto cannot
           run a Lambda function without Docker): it runs the function Terraform created through
           cargo-lambda's Runtime API (as functions/aws-lambda/tests/runtime_api.rs does), from the
           package whose sha256 moto holds as its code, with the environment moto holds for it
           (GetFunctionConfiguration: the Terraform's wiring is what runs) plus what Lambda adds,
           and the execution role's credentials (sts:AssumeRole).
  git checkout  the guide's "from the new release's checkout" before the upgrade block: the blocks
           before it ran on PREVIOUS_LAYOUT's infra/, and infra/ becomes this tree's (files the
           new layout dropped removed, terraform.tfvars, state and .terraform kept), as a checkout
           would; the CLI and the function are this tree's throughout (no release to take older ones from).
  S3's notifications (publish -> Object Created -> sweep, which the guide promises): moto does not
           deliver them to Lambda. After each documented command, `s3-deliver` sends every new
           object version that a bucket's notification configuration routes to a function (its
           events, prefix/suffix filter, and the function's permission for s3.amazonaws.com from
           that bucket) as S3's event message to that function, run as above.

Environment, no shim: the login to the account (static test credentials; no region and no profile,
so the region must come from the commands); AWS's endpoints (AWS_ENDPOINT_URL for the CLIs and the
function; Terraform through the provider override file tests/terraform/moto/ renders beside the
copied example, as scripts/test-terraform does) and certificate chain (a CA made here: moto's TLS
certificate is signed by it; TAGWARDEN_CA_BUNDLE and AWS_CA_BUNDLE trust it); the Terraform
registry (the provider mirror, through the CLI configuration); "yes" typed at Terraform's
confirmation prompt, and only there (any other prompt, e.g. for a variable the docs do not give,
fails the test).

usage: run.py ROOT    (from scripts/test-terraform; ROOT is the repository, copied, never written)
env:   TAGWARDEN_CLI, TAGWARDEN_BOOTSTRAP   the prebuilt CLI and Lambda bootstrap (debug builds do)
       TF_PLUGIN_MIRROR                      the provider mirror (else install-tools' cache)
       KEEP_WORK=1                           keep the work directory (session.log, function.log)
Prints PASS/FAIL lines, the command counts and the wall time; exits 1 on any failure.
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
from harness import (PREVIOUS_LAYOUT, ROOT, aws_cli, check, cleanup, die, make_clone, previous_layout, results,  # noqa: E402
                     run_session, shell_env, start_moto, work)

ACCOUNT = "123456789012"  # moto's
OVERRIDE = os.path.join(ROOT, "tests/terraform/moto/aws-basic_providers_override.tf.in")
FIXTURE = "tests/fixtures/policies/infrastructure-aws.yaml"
FIXTURE_INFRA_ID, FIXTURE_REGION = "mycluster-7xk2p", "eu-west-1"
DEFAULT_REGION = "eu-west-1"  # infra/examples/aws-basic's default: a guessed region would land here
# A region no default or example of the repository names, so that a value taken from anywhere but
# the cluster cannot pass.
REGIONS = ["ap-southeast-2", "ca-central-1", "sa-east-1", "eu-north-1"]
BLOCKS = readme_blocks.EXECUTED
DEADLINE_S = 900

started = time.monotonic()


# --- the blocks ---------------------------------------------------------------------------------------

blocks = []
for path, name in BLOCKS:
    blocks.append((name, readme_blocks.commands(readme_blocks.block(open(os.path.join(ROOT, path)).read(), name, path))))
counts = {name: len(cmds) for name, cmds in blocks}
check(f"deploy-aws has at most 10 commands ({counts['deploy-aws']})", counts["deploy-aws"] <= 10)
assigned = ("AWS_REGION",)
for name, cmds in blocks:
    unset, assigned = readme_blocks.unset_reads([c for c, _ in cmds], assigned)
    check(f"{name}: every $VAR is set by an earlier command", not unset, "; ".join(f"${v} in: {c}" for v, c in unset))
    holes = [c for c, _ in cmds if readme_blocks.placeholders(c)]
    check(f"{name}: no <placeholder> to fill in", not holes, "; ".join(holes))

# --- the run --------------------------------------------------------------------------------------------


def main():
    rnd = random.Random()
    infra_id = "dt" + "".join(rnd.choices(string.ascii_lowercase, k=6)) + "-" + "".join(rnd.choices(string.ascii_lowercase + string.digits, k=5))
    region = rnd.choice(REGIONS)
    regions = sorted({region, "us-east-1", DEFAULT_REGION})
    fn_name = f"tagwarden-{infra_id}"
    clone = make_clone()
    checkout, upgrade_from = previous_layout(clone, PREVIOUS_LAYOUT)
    print(f"     the upgrade starts from {upgrade_from}", flush=True)

    import yaml

    text = open(os.path.join(ROOT, FIXTURE)).read().replace(FIXTURE_INFRA_ID, infra_id).replace(f"region: {FIXTURE_REGION}", f"region: {region}")
    obj = yaml.safe_load(text)
    # As a real cluster serves it: openshift/api has no spec.platformSpec.aws.resourceTags (the
    # fixture's, of an unmerged design), so the API server prunes it (tests/kube_crd.rs).
    obj.get("spec", {}).get("platformSpec", {}).get("aws", {}).pop("resourceTags", None)
    infrastructure = os.path.join(work, "infrastructure.yaml")
    yaml.safe_dump(obj, open(infrastructure, "w"), sort_keys=False)
    if obj["status"]["infrastructureName"] != infra_id or obj["status"]["platformStatus"]["aws"]["region"] != region:
        die(f"{FIXTURE}: its infraID {FIXTURE_INFRA_ID} and region {FIXTURE_REGION} are not where this test replaces them")
    # The policy's tags as the policy page (docs/src/concepts/policy.md) says: status, with spec's on top.
    desired = {t["key"]: t["value"] for t in obj["status"]["platformStatus"]["aws"]["resourceTags"]}
    desired.update({t["key"]: t["value"] for t in obj.get("spec", {}).get("platformSpec", {}).get("aws", {}).get("resourceTags", [])})

    override_services = set(re.findall(r"^\s*(\w+)\s*=\s*\"@MOTO_ENDPOINT@\"", open(OVERRIDE).read(), re.M))
    check("the inventory covers every service the provider override reaches", override_services <= standins.INVENTORIED,
          f"not inventoried: {sorted(override_services - standins.INVENTORIED)}")

    pki, endpoint = start_moto(regions)
    # The cluster, before tagwarden: owned resources without the cluster's tags, and one not owned.
    ec2 = standins.boto("ec2", region)
    owned = [{"Key": f"kubernetes.io/cluster/{infra_id}", "Value": "owned"}]
    spec = lambda kind, name: [{"ResourceType": kind, "Tags": owned + [{"Key": "Name", "Value": name}]}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=spec("vpc", f"{infra_id}-vpc"))["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", TagSpecifications=spec("subnet", f"{infra_id}-subnet-private"))["Subnet"]["SubnetId"]
    image = ec2.describe_images()["Images"][0]["ImageId"]
    worker = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, SubnetId=subnet,
                               TagSpecifications=spec("instance", f"{infra_id}-worker-a"))["Instances"][0]["InstanceId"]
    other = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1,
                              TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "not-the-cluster"}]}])["Instances"][0]["InstanceId"]
    owned_ids = {vpc: "VPC", subnet: "subnet", worker: "instance"}
    before = standins.inventory(regions)

    env, hooks = shell_env(pki, endpoint, clone, {
        "DOCTEST_INFRASTRUCTURE": infrastructure, "DOCTEST_REGIONS": ",".join(regions),
        "DOCTEST_OWNED": ",".join(owned_ids), "DOCTEST_REGION": region})
    # The example as written, with the provider override beside it (as scripts/test-terraform).
    ex = os.path.join(clone, "infra/examples/aws-basic")
    open(os.path.join(ex, "moto_providers_override.tf"), "w").write(open(OVERRIDE).read().replace("@MOTO_ENDPOINT@", endpoint))

    deployed_file = os.path.join(work, "deployed.json")
    swept_file = os.path.join(work, "swept.json")
    day2_file = os.path.join(work, "day2.json")
    upgraded_file = os.path.join(work, "upgraded-function.json")
    script = ["set -o pipefail",
              'if command -v tagwarden >/dev/null; then echo "@@ tagwarden is on PATH before it is installed: $(command -v tagwarden)"; exit 1; fi']
    for name, cmds in blocks:
        if name == "upgrade-aws":
            script.extend(checkout)
        for n, (c, raw) in enumerate(cmds, 1):
            script.append(f"echo; echo '@@ {name} {n}/{len(cmds)}'")
            script.extend(raw)
            script.append('__rc=$?; echo; echo "@@ exit $__rc $SECONDS"; [ "$__rc" = 0 ] || exit 1')
            script.append(f'"{hooks}/s3-deliver" || {{ echo "@@ S3 notification delivery failed"; exit 1; }}')
            script.append(f'"{hooks}/probe" "{name} {n}/{len(cmds)}" || exit 1')
        if name == "deploy-aws":
            script.append(f'"{hooks}/snapshot" "{deployed_file}" || exit 1')
        if name == "sweep-aws":
            script.append(f'"{hooks}/snapshot" "{swept_file}" || exit 1')
        if name == "day2-aws":
            script.append(f'"{hooks}/snapshot" "{day2_file}" || exit 1')
        if name == "upgrade-aws":  # not a stand-in: the real AWS CLI, to read what moto holds
            script.append(f'"{aws_cli}" lambda get-function-configuration --region {region} --function-name {fn_name} '
                          f'>"{upgraded_file}" || exit 1')
    script.append("echo '@@ done'")

    text, typed, stopped, session_s = run_session(script, clone, env, DEADLINE_S)
    ran = re.findall(r"^@@ (\S+) (\d+)/(\d+)$", text, re.M)
    exits = re.findall(r"^@@ exit (\d+) (\d+)$", text, re.M)
    took = [int(b) - int(a) for (_, a), (_, b) in zip([("", "0")] + exits, exits)]
    finished = "\n@@ done" in text and not stopped
    if finished:
        check(f"every documented command ran and exited 0 ({len(exits)} commands, {typed} confirmations typed, {session_s:.0f} s)",
              len(exits) == sum(counts.values()) and {rc for rc, _ in exits} == {"0"})
        slow = sorted(zip(took, [f"{b} {n}/{len(dict(blocks)[b])}" for b, n, _ in ran]), reverse=True)[:3]
        print("    slowest: " + ", ".join(f"{what} {t} s" for t, what in slow))
    else:
        last = ran[-1] if ran else None
        at = f"{last[0]} {last[1]}/{last[2]}: {dict(blocks)[last[0]][int(last[1]) - 1][0]}" if last else "before the first command"
        check("every documented command ran and exited 0", False,
              f"{stopped or ''}\n  stopped at {at}\n  --- session.log (tail)\n" + "\n".join("  " + l for l in text.splitlines()[-40:]))

    standin_log = os.path.join(work, "standins.jsonl")
    calls = [json.loads(line) for line in open(standin_log)] if os.path.exists(standin_log) else []
    invokes = [c for c in calls if c["standin"] == "lambda invoke"]
    check("the CLI came from the documented install (cargo install)", any(c["standin"] == "cargo install" for c in calls))
    check("the package came from scripts/package-lambda (cargo lambda build --x86-64)",
          any(c["standin"] == "cargo lambda build" and c["arch"] == "x86_64" for c in calls))
    notified = [c for c in invokes if '"aws:s3"' in c["payload"]]
    check("each publish's Object Created notification (the deploy's, day 2's) ran the function once, without failure",
          len(notified) == 2 and all(c["ok"] for c in notified), json.dumps(notified)[:2000])
    swept = [c for c in invokes if json.loads(c["payload"]) == {"tagwarden": "sweep"}]
    resp = json.loads(swept[0]["response"]) if swept and swept[0]["ok"] else {}
    check(f"the manual sweep answered {{\"sweep\": N, \"failed\": 0}} ({resp})",
          len(swept) == 1 and isinstance(resp.get("sweep"), int) and resp.get("failed") == 0, json.dumps(swept)[:2000])
    policy = f"s3://{fn_name}-{ACCOUNT}/tagwarden/infrastructure.yaml"
    wrong = [c for c in invokes if not (c["function"] == fn_name and c["region"] == region and c["architectures"] == ["x86_64"]
                                        and c["environment"].get("TAGWARDEN_POLICY") == policy)]
    check(f"each run was {fn_name} in {region}, x86_64 as the package's manifest says, TAGWARDEN_POLICY={policy}",
          invokes and not wrong, json.dumps(wrong)[:2000])
    status = re.search(r"^@@ deploy-aws (\d+)/\1\n(.*?)^@@ exit", text, re.M | re.S)
    shown = status.group(2) if status else ""
    check("tagwarden status: the policy in force, state ok, no failure",
          bool(re.search(r"^state\s+ok$", shown, re.M) and re.search(r"^in force\s+version \w+", shown, re.M)
               and re.search(r"^failures\s+0$", shown, re.M)), shown)
    # The audit (the deployment's default mode): the report names what would be written.
    check("tagwarden status in audit: it names the resources it would write", "would write" in shown and
          any(rid in shown for rid in owned_ids), shown)

    # After the deploy: tagwarden's resources in the cluster's region (and the us-east-1 forwarding);
    # in audit, nothing written. After the switch to enforce and a sweep: the cluster's resources
    # corrected, the one not owned untouched.
    deployed = set(json.load(open(deployed_file))) if os.path.exists(deployed_file) else set()
    swept = set(json.load(open(swept_file))) if os.path.exists(swept_file) else set()
    created = {l for l in deployed - before if " ec2 tag " not in l and " tagged " not in l}
    misplaced = {l for l in created if not (l.startswith(region + " ") or l.startswith("us-east-1 ") or l.startswith("iam ")
                                            or l.startswith("s3 object ") or (l.startswith("s3 bucket ") and l.endswith(" " + region)))}
    check(f"the deploy created its resources in {region} (us-east-1: the global events' forwarding), none elsewhere",
          created and not misplaced, "elsewhere: " + "; ".join(sorted(misplaced)))
    check(f"the deploy created the function {fn_name} in {region}", f"{region} lambda function {fn_name}" in created)
    for rid, kind in owned_ids.items():
        had = {l.split(" ", 4)[4].split("=", 1)[0]: l.split("=", 1)[1] for l in deployed if l.startswith(f"{region} ec2 tag {rid} ")}
        written = {k: v for k, v in desired.items() if had.get(k) == v}
        check(f"in audit the cluster's {kind} is not written", deployed and not written, f"written: {written}")
        have = {l.split(" ", 4)[4].split("=", 1)[0]: l.split("=", 1)[1] for l in swept if l.startswith(f"{region} ec2 tag {rid} ")}
        missing = {k: v for k, v in desired.items() if have.get(k) != v}
        check(f"enforced and swept, the cluster's {kind} carries the Infrastructure object's tags", swept and not missing,
              f"missing or different: {missing}")
    stray = {l for l in swept if l.startswith(f"{region} ec2 tag {other} ") and l.split(" ", 4)[4].split("=", 1)[0] in desired}
    check("the instance the cluster does not own carries none of them", swept and not stray, "; ".join(sorted(stray)))

    # Day 2: the Infrastructure object as the day-2 patch left it; its tags on the owned resources.
    obj2 = yaml.safe_load(open(infrastructure).read())
    desired2 = {t["key"]: t["value"] for t in obj2["status"]["platformStatus"]["aws"]["resourceTags"]}
    desired2.update({t["key"]: t["value"] for t in obj2.get("spec", {}).get("platformSpec", {}).get("aws", {}).get("resourceTags", [])})
    check(f"day 2 changed the cluster's tags ({sorted(set(desired2.items()) - set(desired.items()))})", desired2 != desired)
    day2 = set(json.load(open(day2_file))) if os.path.exists(day2_file) else set()
    for rid, kind in owned_ids.items():
        have = {l.split(" ", 4)[4].split("=", 1)[0]: l.split("=", 1)[1] for l in day2 if l.startswith(f"{region} ec2 tag {rid} ")}
        missing = {k: v for k, v in desired2.items() if have.get(k) != v}
        check(f"day 2: the cluster's {kind} carries the changed tags", day2 and not missing, f"missing or different: {missing}")
    stray = {l for l in day2 if l.startswith(f"{region} ec2 tag {other} ") and l.split(" ", 4)[4].split("=", 1)[0] in desired2}
    check("day 2: the instance the cluster does not own still carries none of them", day2 and not stray, "; ".join(sorted(stray)))
    status2 = re.search(r"^@@ day2-aws (\d+)/\1\n(.*?)^@@ exit", text, re.M | re.S)
    shown2 = status2.group(2) if status2 else ""
    row = re.search(r"^\S+\s+enforce\s+(\d+)\s+(\d+)\s+(\d+)\s", shown2, re.M)
    check("day 2: tagwarden status says every owned resource is in line, in enforce, no failure",
          bool(row and row.group(1) == row.group(2) and row.group(1) != "0" and row.group(3) == "0"
               and re.search(r"^failures\s+0$", shown2, re.M)), shown2)
    # The upgrade: nothing destroyed, the mode kept.
    jq_n = next((n for n, (c, _) in enumerate(dict(blocks)["upgrade-aws"], 1) if "nothing to destroy" in c), 0)
    upgrade_out = re.search(rf"^@@ upgrade-aws {jq_n}/\d+\n(.*?)^@@ exit", text, re.M | re.S)
    check("upgrade: the plan destroys nothing (the guide's jq check)",
          bool(upgrade_out and '"nothing to destroy"' in upgrade_out.group(1)), upgrade_out.group(1)[-1500:] if upgrade_out else "")
    upgraded = json.load(open(upgraded_file)) if os.path.exists(upgraded_file) and os.path.getsize(upgraded_file) else {}
    mode = upgraded.get("Environment", {}).get("Variables", {}).get("TAGWARDEN_MODE")
    check(f"upgrade: the function is still in the mode terraform.tfvars says (TAGWARDEN_MODE={mode})", mode == "enforce")
    plan_n = next((n for n, (c, _) in enumerate(dict(blocks)["upgrade-aws"], 1) if " plan " in c), 0)
    plan_out = re.search(rf"^@@ upgrade-aws {plan_n}/\d+\n(.*?)^@@ exit", text, re.M | re.S)
    moved = len(re.findall(r"has moved to", plan_out.group(1))) if plan_out else 0
    summary_plan = re.search(r"^Plan: .*$|^No changes\..*$", plan_out.group(1), re.M) if plan_out else None
    print(f"     upgrade from {upgrade_from}: {moved} moved, {summary_plan.group(0) if summary_plan else 'no plan line'}", flush=True)

    # The counts: the first command after which every owned resource carries the cluster's tags; all
    # of them to a clean uninstall.
    order = [f"{name} {n}/{len(cmds)}" for name, cmds in blocks for n in range(1, len(cmds) + 1)]
    probes = [json.loads(l) for l in open(os.path.join(work, "probe.jsonl"))] if os.path.exists(os.path.join(work, "probe.jsonl")) else []
    carry = lambda p, want: all(all(p["tags"].get(rid, {}).get(k) == v for k, v in want.items()) for rid in owned_ids)
    first = next((p["after"] for p in probes if carry(p, desired)), None)
    first_day2 = next((p["after"] for p in probes if p["after"].startswith("day2-aws ") and carry(p, desired2)), None)
    to_first = order.index(first) + 1 if first in order else None
    check(f"the first correction: after command {to_first} of the guide ({first}), not in audit",
          to_first is not None and to_first > counts["deploy-aws"])
    check(f"day 2's correction: after {first_day2}", first_day2 is not None)

    # After the uninstall: moto as before, but for the tags written.
    after = standins.inventory(regions)
    desired = desired2  # the tags the resources carry last
    written = {f"{region} ec2 tag {rid} {k}={v}" for rid in owned_ids for k, v in desired.items()}
    arns = {vpc: f"vpc/{vpc}", subnet: f"subnet/{subnet}", worker: f"instance/{worker}"}
    written |= {l for l in after - before if l.startswith(f"{region} tagged ") and any(l.split(" ")[2].endswith(a) for a in arns.values())
                and l.split(" ", 3)[3] in {f"{k}={v}" for k, v in desired.items()}}
    left, gone = (after - before) - written, before - after
    check("after the uninstall moto holds what it held before, but the tags written",
          finished and not left and not gone and written <= after,
          "\n  left behind: " + "\n  ".join(sorted(left)[:60]) + "\n  gone: " + "\n  ".join(sorted(gone)[:20]))

    clean = results[-1][1]
    return sum(1 for _, ok in results if not ok), (
        "guide path executed: " + ", ".join(f"{n} {k}" for n, k in counts.items()) + " commands; "
        f"first correction after command {to_first} ({first}), day 2's after {first_day2}; "
        f"clean uninstall after command {len(order) if clean else 'none (not clean)'} (through day 2 and the upgrade "
        f"from {upgrade_from}); "
        f"cluster {infra_id} in {region}; session {session_s:.0f} s, wall {time.monotonic() - started:.0f} s")

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleanup() on a kill too
    try:
        failed, summary = main()
    finally:
        cleanup()
    print(summary)  # last: scripts/test-terraform shows this line
    sys.exit(1 if failed else 0)
