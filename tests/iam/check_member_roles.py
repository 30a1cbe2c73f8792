"""The member roles hold the ownership bound themselves: assumed WITHOUT a session policy, each is
refused a tag write on an unowned instance, an unowned IAM role, a KMS key, another account's bucket
and another role's cluster, and allowed its own clusters' resources, at any number of clusters.

Usage: check_member_roles.py <rendered.json>
  rendered.json: `terraform output -json` of a root that calls modules/member_definition with
  account_clusters (scripts/test-terraform renders 1, 20 and 1,000 clusters in one account each)
  and exposes its `member_roles` output as `roles`.
Prints one line per account (roles, clusters, largest policy) and `N passed, N failed`.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from iam_eval import ALLOW, Request, evaluate, size  # noqa: E402

FUNCTION = "arn:aws:sts::123456789012:assumed-role/{role}/tagwarden"
ROLE_QUOTA = 10240  # IAM and AWS STS quotas: a role's inline policies, characters


def main(path: str) -> int:
    out = json.load(open(path))
    roles_by_account = out["roles"]["value"]
    passed = failed = 0

    def check(ok: bool, what: str) -> None:
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {what}")

    for account, roles in sorted(roles_by_account.items()):
        other_account = "999999999999"
        seen = []
        for n, role in enumerate(roles):
            policy = json.loads(role["policy_json"])
            check(size(policy) <= ROLE_QUOTA, f"{account} {role['name']}: {size(policy)} characters > {ROLE_QUOTA}")
            seen += role["clusters"]
            principal = FUNCTION.format(role=role["name"]).replace("123456789012", account)

            def write(action, resource, tags, keys=("cost-center",), resource_account=None):
                ctx = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
                ctx["aws:TagKeys"] = list(keys)
                return evaluate(Request(action, resource, principal, account, resource_account, ctx), [policy])

            own = role["clusters"][0]
            owned = {f"kubernetes.io/cluster/{own}": "owned"}
            instance = f"arn:aws:ec2:eu-west-1:{account}:instance/i-0123456789abcdef0"
            iam_role = f"arn:aws:iam::{account}:role/{own}-master-role"
            key = f"arn:aws:kms:eu-west-1:{account}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
            bucket = f"arn:aws:s3:::{own}-image-registry"
            where = f"{account} {role['name']} (no session policy)"
            check(write("ec2:CreateTags", instance, owned) == ALLOW, f"{where}: own cluster's instance allowed")
            check(write("iam:TagRole", iam_role, owned) == ALLOW, f"{where}: own cluster's IAM role allowed")
            check(write("ec2:CreateTags", instance, {}) != ALLOW, f"{where}: unowned instance refused")
            check(
                write("ec2:CreateTags", instance, {f"kubernetes.io/cluster/{own}": "shared"}) != ALLOW,
                f"{where}: a shared instance refused",
            )
            check(write("iam:TagRole", iam_role, {}) != ALLOW, f"{where}: unowned IAM role refused")
            check(write("iam:TagUser", f"arn:aws:iam::{account}:user/alice", {}) != ALLOW, f"{where}: unowned IAM user refused")
            check(write("kms:TagResource", key, {}) != ALLOW, f"{where}: unowned KMS key refused")
            check(
                write("s3:PutBucketTagging", bucket, {}, resource_account=account) == ALLOW,
                f"{where}: own cluster's bucket allowed",
            )
            check(
                write("s3:PutBucketTagging", bucket, {}, resource_account=other_account) != ALLOW,
                f"{where}: a bucket of that name in another account refused",
            )
            check(
                write("s3:PutBucketTagging", "arn:aws:s3:::payroll-exports", {}, resource_account=account) != ALLOW,
                f"{where}: another bucket refused",
            )
            check(
                write("ec2:CreateTags", instance, owned, keys=("kubernetes.io/cluster/x",)) != ALLOW,
                f"{where}: a reserved key refused",
            )
            # Another role's cluster in the same account: that role's to write, not this one's.
            for other in roles[n + 1 : n + 2] + roles[max(0, n - 1) : n]:
                theirs = {f"kubernetes.io/cluster/{other['clusters'][0]}": "owned"}
                check(write("ec2:CreateTags", instance, theirs) != ALLOW, f"{where}: another role's cluster refused")
        check(sorted(seen) == sorted(set(seen)), f"{account}: a cluster in two roles")
        largest = max(size(json.loads(r["policy_json"])) for r in roles)
        print(f"{account}: {len(seen)} cluster(s) in {len(roles)} role(s), largest policy {largest} of {ROLE_QUOTA} characters")

    # The auditor role: a person's preview reads everything the member roles read and writes nothing.
    auditor = (out.get("auditor") or {}).get("value")
    if auditor:
        policy = json.loads(auditor["policy_json"])
        trust = json.loads(auditor["trust_policy_json"])
        account = sorted(roles_by_account)[0]
        person = f"arn:aws:sts::{account}:assumed-role/{auditor['name']}/alice"
        owned = {"aws:ResourceTag/kubernetes.io/cluster/" + roles_by_account[account][0]["clusters"][0]: "owned", "aws:TagKeys": ["cost-center"]}
        for action, resource in (
            ("ec2:CreateTags", f"arn:aws:ec2:eu-west-1:{account}:instance/i-0123456789abcdef0"),
            ("iam:TagRole", f"arn:aws:iam::{account}:role/r"),
            ("kms:TagResource", f"arn:aws:kms:eu-west-1:{account}:key/k"),
            ("s3:PutBucketTagging", "arn:aws:s3:::b"),
            ("tag:TagResources", "*"),
            ("route53:ChangeTagsForResource", "arn:aws:route53:::hostedzone/Z1"),
        ):
            check(evaluate(Request(action, resource, person, account, None, owned), [policy]) != ALLOW, f"the auditor role is refused {action}")
        check(evaluate(Request("tag:GetResources", "*", person, account), [policy]) == ALLOW, "the auditor role reads (tag:GetResources)")
        check(evaluate(Request("ec2:DescribeTags", "*", person, account), [policy]) == ALLOW, "the auditor role reads (ec2:DescribeTags)")
        named = trust["Statement"][0]["Principal"]["AWS"]
        for p in named:
            acct = p.split(":")[4]
            session = p.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/") + "/alice"
            req = Request("sts:AssumeRole", f"arn:aws:iam::{account}:role/{auditor['name']}", session, acct, account)
            check(evaluate(req, [{"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}], resource=trust) == ALLOW, f"{p} assumes the auditor role")
            other = Request("sts:AssumeRole", req.resource, f"arn:aws:sts::{acct}:assumed-role/tagwarden-lambda/x", acct, account)
            check(evaluate(other, [{"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}], resource=trust) != ALLOW, "the function's role assumes the auditor role")
        print(f"auditor role: {size(policy)} characters, trusted by {len(named)} principal(s)")

    print(f"member roles: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
