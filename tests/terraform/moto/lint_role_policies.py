#!/usr/bin/env python3
"""Lint every IAM policy of an applied example (aws-basic, aws-clusters) with parliament (run by scripts/test-terraform).

usage: lint_role_policies.py <terraform show -json state> <parliament executable>

Reads the state that `terraform show -json` prints after the apply against moto, takes the rendered
`policy` of every `aws_iam_role_policy` (the tagwarden function's role and the us-east-1
IAM/Route 53 forwarding role) and `aws_iam_policy` (the function role's tag writes, one per
cluster), and runs the pinned parliament (scripts/install-tools) on each: unknown actions,
actions that do not apply to the listed resource types, malformed conditions, unknown condition
keys. Prints one "PASS <policy>" / "FAIL <policy>: <findings>" line each and a count; exits 1 on any
finding, so an accepted finding must be fixed in iam.tf, not waved through here.
"""
import json
import subprocess
import sys


def role_policies(module, out):
    for r in module.get("resources", []):
        if r.get("type") in ("aws_iam_role_policy", "aws_iam_policy") and r.get("mode") == "managed":
            out.append((r["address"], r["values"]["policy"]))
    for child in module.get("child_modules", []):
        role_policies(child, out)
    return out


def main():
    state = json.load(open(sys.argv[1]))
    parliament = sys.argv[2]
    policies = role_policies(state["values"]["root_module"], [])
    if len(policies) < 3:
        print(f"FAIL expected the function role's, its tag writes' and the forwarding role's policies, found {[a for a, _ in policies]}")
        sys.exit(1)
    findings_total = 0
    for address, policy in policies:
        # On stdin: parliament refuses --file when its stdin is not a terminal.
        r = subprocess.run([parliament], input=json.dumps(json.loads(policy), indent=1),
                           capture_output=True, text=True)
        findings = [line for line in r.stdout.splitlines() if line.strip()]
        statements = len(json.loads(policy)["Statement"])
        if r.returncode != 0 or findings:
            findings_total += max(len(findings), 1)
            print(f"FAIL {address} ({statements} statements): {len(findings)} finding(s)")
            for line in findings + [line for line in r.stderr.splitlines() if line.strip()]:
                print(f"     {line}")
        else:
            print(f"PASS {address} ({statements} statements): parliament, 0 findings")
    print(f"parliament: {len(policies)} role policies, {findings_total} finding(s)")
    sys.exit(1 if findings_total else 0)


if __name__ == "__main__":
    main()
