"""The organization hub's resource policies, as applied (`terraform show -json` of the
aws-organization example on moto), judged request by request by the IAM evaluator: who may publish
which cluster's policy, who writes the function's own folder and the contest state, who may put
events on the hub bus and messages on the member-events queue, what the function may write.

Usage: check_organization_policies.py <state.json> <hub account> <organization id>
Prints `N passed, N failed`.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from iam_eval import ALLOW, Request, evaluate  # noqa: E402

ANYTHING = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def resources(module: dict):
    yield from module.get("resources", [])
    for child in module.get("child_modules", []):
        yield from resources(child)


def main(path: str, hub: str, org: str) -> int:
    state = json.load(open(path))
    found, at = {}, {}
    for r in resources(state["values"]["root_module"]):
        found.setdefault((r["type"], r["name"]), []).append(r["values"])
        at[r["address"]] = r["values"]
    # The hub's bucket is the private_bucket module's, inside the organization module.
    bucket_module = "module.organization.module.organization_bucket."
    bucket_policy = json.loads(at[bucket_module + "aws_s3_bucket_policy.this"]["policy"])
    bucket = at[bucket_module + "aws_s3_bucket.this"]["bucket"]
    # The member-events queue is the queue_with_dlq module's, inside the organization module.
    queue_module = "module.organization.module.member_events_queue."
    queue_policy = json.loads(at[queue_module + "aws_sqs_queue_policy.this"]["policy"])
    queue_arn = at[queue_module + "aws_sqs_queue.this"]["arn"]
    rule_arn = found[("aws_cloudwatch_event_rule", "member_events")][0]["arn"]
    bus_policy = json.loads(found[("aws_cloudwatch_event_bus_policy", "hub")][0]["policy"])
    bus_arn = found[("aws_cloudwatch_event_bus", "hub")][0]["arn"]
    function_policy = json.loads(
        [p for p in found[("aws_iam_role_policy", "function")] if p["name"] == "organization"][0]["policy"]
    )
    function_role = [r for r in found[("aws_iam_role", "lambda")]][0]["arn"] if ("aws_iam_role", "lambda") in found else None
    passed = failed = 0

    def check(ok: bool, what: str) -> None:
        nonlocal passed, failed
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {what}")

    member = "111122223333"
    org_ctx = {"aws:PrincipalOrgID": org}

    def put(principal, account, key, identity=(), tags=None):
        ctx = dict(org_ctx)
        for k, v in (tags or {}).items():
            ctx[f"aws:PrincipalTag/{k}"] = v
        req = Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}", principal, account, hub, ctx)
        return evaluate(req, list(identity), resource=bucket_policy)

    hub_user = f"arn:aws:iam::{hub}:user/intern"
    # The hub's own principals: a same-account grant no longer lets any of them publish.
    check(put(hub_user, hub, f"accounts/{hub}/hub-a1b2c/policy.yaml") != ALLOW, "an untagged hub principal with no grant publishes the hub's cluster")
    check(put(hub_user, hub, f"accounts/{hub}/hub-a1b2c/policy.yaml", [ANYTHING]) != ALLOW, "an untagged hub principal with s3:* publishes")
    hub_pub = f"arn:aws:iam::{hub}:role/hub-a1b2c-publisher"
    check(put(hub_pub, hub, f"accounts/{hub}/hub-a1b2c/policy.yaml", tags={"tagwarden-cluster": "hub-a1b2c"}) == ALLOW, "the hub cluster's tagged publisher publishes its own")
    check(put(hub_pub, hub, f"accounts/{hub}/other-1/policy.yaml", [ANYTHING], tags={"tagwarden-cluster": "hub-a1b2c"}) != ALLOW, "a tagged publisher with s3:* writes another cluster's folder")
    # A member account's principals.
    m_pub = f"arn:aws:iam::{member}:role/prod-publisher"
    check(put(m_pub, member, f"accounts/{member}/prod-7xk2p/policy.yaml", [ANYTHING], tags={"tagwarden-cluster": "prod-7xk2p"}) == ALLOW, "a member cluster's tagged publisher publishes its own")
    check(put(m_pub, member, f"accounts/{member}/prod-7xk2p/policy.yaml", [ANYTHING]) != ALLOW, "an untagged member principal with s3:* publishes")
    check(put(m_pub, member, f"accounts/{member}/dev-1/policy.yaml", [ANYTHING], tags={"tagwarden-cluster": "prod-7xk2p"}) != ALLOW, "a member's tagged publisher writes its account's other cluster")
    check(put(m_pub, member, f"accounts/444455556666/shop-3kd9s/policy.yaml", [ANYTHING], tags={"tagwarden-cluster": "shop-3kd9s"}) != ALLOW, "a member writes another account's folder")
    setp = f"arn:aws:iam::{member}:role/hypershift-publisher"
    check(put(setp, member, f"accounts/{member}/hc-1/policy.yaml", [ANYTHING], tags={"tagwarden-publisher": "cluster-set"}) == ALLOW, "a cluster-set publisher writes its account's clusters")
    check(put(setp, member, f"accounts/444455556666/hc-1/policy.yaml", [ANYTHING], tags={"tagwarden-publisher": "cluster-set"}) != ALLOW, "a cluster-set publisher writes another account")
    # The function's own folder and the contest state.
    for who, ident in ((m_pub, member), (hub_user, hub)):
        for key in ("accounts/_organization/111122223333/eu-west-1.json", "accounts/_organization/contests/111122223333/prod-7xk2p.json"):
            check(put(who, ident, key, [ANYTHING], tags={"tagwarden-publisher": "cluster-set"}) != ALLOW, f"{who} writes {key}")
    if function_role:
        fn = function_role.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/") + "/s"
        fn_ctx_req = lambda key: Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}", fn, hub, hub, {"aws:PrincipalArn": function_role})
        check(evaluate(fn_ctx_req("accounts/_organization/contests/111122223333/prod-7xk2p.json"), [function_policy], resource=bucket_policy) == ALLOW, "the function writes the contest state")
        check(evaluate(fn_ctx_req(f"accounts/{member}/prod-7xk2p/tagwarden-status.json"), [function_policy], resource=None) == ALLOW, "the function writes a status report")
        check(evaluate(fn_ctx_req(f"accounts/{member}/prod-7xk2p/policy.yaml"), [function_policy]) != ALLOW, "the function rewrites a member's policy")
    operator = f"arn:aws:iam::{hub}:role/platform-oncall"
    op = lambda key: evaluate(Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{key}", operator + "", hub, hub, {"aws:PrincipalArn": operator}), [], resource=bucket_policy)
    check(op("accounts/_organization/contests/111122223333/prod-7xk2p.json") == ALLOW, "a contest operator lifts (writes the contest state)")
    check(op("accounts/_organization/111122223333/eu-west-1.json") != ALLOW, "a contest operator writes a shard outcome")
    check(op(f"accounts/{member}/prod-7xk2p/policy.yaml") != ALLOW, "a contest operator publishes a policy")

    # The member-events queue: the hub bus's rule alone, whatever a hub principal is granted.
    send = lambda principal, ctx: evaluate(Request("sqs:SendMessage", queue_arn, principal, hub, hub, ctx), [ANYTHING] if principal != "events.amazonaws.com" else [], resource=queue_policy)
    check(send("events.amazonaws.com", {"aws:SourceArn": rule_arn}) == ALLOW, "the hub rule sends member events")
    check(send(hub_user, {}) != ALLOW, "a hub principal with sqs:* injects a member event")

    # The hub bus: the spokes' forwarding roles, forwarded AWS events only.
    fwd = f"arn:aws:iam::{member}:role/tagwarden-member-forward-eu-west-1"
    def put_event(principal, source, detail_type, org_id=org):
        ctx = {"aws:PrincipalOrgID": org_id, "events:source": source, "events:detail-type": detail_type, "aws:PrincipalArn": principal}
        return evaluate(Request("events:PutEvents", bus_arn, principal, member, hub, ctx), [ANYTHING], resource=bus_policy)
    check(put_event(fwd, "aws.ec2", "AWS API Call via CloudTrail") == ALLOW, "a spoke forwards a CloudTrail event")
    check(put_event(fwd, "aws.tag", "Tag Change on Resource") == ALLOW, "a spoke forwards a tag change")
    check(put_event(f"arn:aws:iam::{member}:role/app", "aws.ec2", "AWS API Call via CloudTrail") != ALLOW, "another principal of the organization puts events")
    check(put_event(fwd, "my.app", "AWS API Call via CloudTrail") != ALLOW, "a forwarding role puts a custom source")
    check(put_event(fwd, "aws.ec2", "AWS API Call via CloudTrail", "o-zzzzzzzzzz") != ALLOW, "an account of another organization puts events")

    # The function assumes member roles only in the organization; a member role's trust policy
    # (the resource policy of sts:AssumeRole) names the function's role alone.
    trust = json.loads([r for r in found[("aws_iam_role", "member")]][0]["assume_role_policy"])
    fn_session = (function_role or f"arn:aws:iam::{hub}:role/tagwarden").replace(":iam::", ":sts::").replace(":role/", ":assumed-role/") + "/s"

    def assume(arn, org_id, principal=fn_session, identity=None):
        req = Request("sts:AssumeRole", arn, principal, hub, arn.split(":")[4], {"aws:ResourceOrgID": org_id})
        return evaluate(req, [function_policy] if identity is None else identity, resource=trust)

    check(assume(f"arn:aws:iam::{member}:role/tagwarden-member", org, principal=f"arn:aws:sts::{hub}:assumed-role/admin/s", identity=[ANYTHING]) != ALLOW, "another hub principal assumes a member role")
    check(assume(f"arn:aws:iam::{member}:role/tagwarden-member-1", org) == ALLOW, "the function assumes a member role")
    check(assume("arn:aws:iam::999999999999:role/tagwarden-member", "o-zzzzzzzzzz") != ALLOW, "the function assumes a role outside the organization")
    check(assume(f"arn:aws:iam::{member}:role/OrganizationAccountAccessRole", org) != ALLOW, "the function assumes another role")

    print(f"organization policies: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
