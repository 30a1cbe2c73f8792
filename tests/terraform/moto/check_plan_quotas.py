#!/usr/bin/env python3
"""Hold a planned tagwarden role to IAM's quotas at their default values.

usage: check_plan_quotas.py <terraform show -json PLANFILE> [expected clusters]

moto does not enforce IAM's quotas, and AWS refuses at apply what exceeds them, after the policies
were created. "Managed policies attached to an IAM role: 10" (adjustable to 20), "Managed policy
size: 6,144 characters", "Role policy size: 10,240 characters" for all inline policies of a role,
and "IAM doesn't count white space when calculating the size of a policy against this limit" (IAM
User Guide, "IAM and AWS STS quotas"). Reads the planned values of the tagwarden module: its
customer managed policies, their attachments to the role, and the role's inline policy; prints
the count and every size; exits 1 if any quota is exceeded or a cluster's ownership tag is in no
policy.
"""
import json
import re
import sys

MANAGED_POLICIES_PER_ROLE = 10
MANAGED_POLICY_SIZE = 6144
ROLE_POLICY_SIZE = 10240


def resources(module):
    yield from module.get("resources", [])
    for child in module.get("child_modules", []):
        yield from resources(child)


def size(doc: str) -> int:
    return len("".join(doc.split()))


def main() -> int:
    plan = json.load(open(sys.argv[1]))
    want = int(sys.argv[2]) if len(sys.argv) > 2 else None
    planned = list(resources(plan["planned_values"]["root_module"]))
    policies = {r["index"]: r["values"] for r in planned if r["type"] == "aws_iam_policy" and r["name"] == "owned_tag_writes"}
    attached = [r for r in planned if r["type"] == "aws_iam_role_policy_attachment"]
    inline = [r["values"] for r in planned if r["type"] == "aws_iam_role_policy"]
    failures = []

    sizes = {k: size(v["policy"]) for k, v in policies.items()}
    owners = {}
    for k, v in policies.items():
        for st in json.loads(v["policy"])["Statement"]:
            for key in st.get("Condition", {}).get("StringEquals", {}):
                m = re.fullmatch(r"aws:ResourceTag/kubernetes\.io/cluster/(.+)", key)
                if m:
                    owners.setdefault(m.group(1), set()).add(k)
    print(f"managed tag-write policies: {len(policies)} (attachments {len(attached)}; quota {MANAGED_POLICIES_PER_ROLE})")
    for k in sorted(policies):
        clusters = sorted(c for c, ks in owners.items() if k in ks)
        print(f"  {policies[k]['name']}: {sizes[k]} characters without white space / {MANAGED_POLICY_SIZE}; clusters {', '.join(clusters)}")
    for r in inline:
        print(f"inline {r['name']}: {size(r['policy'])} characters without white space / {ROLE_POLICY_SIZE}")

    if len(attached) > MANAGED_POLICIES_PER_ROLE or len(policies) > MANAGED_POLICIES_PER_ROLE:
        failures.append(f"{len(attached)} managed policies attached to the role, quota {MANAGED_POLICIES_PER_ROLE}")
    failures += [f"{policies[k]['name']}: {n} > {MANAGED_POLICY_SIZE}" for k, n in sizes.items() if n > MANAGED_POLICY_SIZE]
    if sum(size(r["policy"]) for r in inline) > ROLE_POLICY_SIZE:
        failures.append(f"inline policies {sum(size(r['policy']) for r in inline)} > {ROLE_POLICY_SIZE}")
    if want is not None and len(owners) != want:
        failures.append(f"{len(owners)} clusters have tag writes, want {want}")
    if any(len(ks) != 1 for ks in owners.values()):
        failures.append(f"a cluster in more than one policy: {owners}")
    if max(sizes.values(), default=0):
        print(f"largest {max(sizes.values())}, smallest {min(sizes.values())} characters")
    for f in failures:
        print(f"FAIL {f}")
    print("PASS within IAM's default quotas" if not failures else f"{len(failures)} quota failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
