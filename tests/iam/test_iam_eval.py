"""The evaluator's own tests: each case is an example of the IAM User Guide's evaluation rules."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from iam_eval import ALLOW, EXPLICIT_DENY, IMPLICIT_DENY, Request, evaluate, size  # noqa: E402

A, B = "111122223333", "444455556666"
SESSION = f"arn:aws:sts::{A}:assumed-role/tagwarden-member/s"
INSTANCE = f"arn:aws:ec2:us-east-1:{A}:instance/i-0abc"


def tag_write(tags=None, resource=INSTANCE, principal=SESSION, account=A, resource_account=None, keys=("team",)):
    ctx = {f"aws:ResourceTag/{k}": v for k, v in (tags or {}).items()}
    ctx["aws:TagKeys"] = list(keys)
    return Request("ec2:CreateTags", resource, principal, account, resource_account, ctx)


OWNED_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*"},
        {
            "Effect": "Deny",
            "Action": "ec2:CreateTags",
            "Resource": "*",
            "Condition": {
                "StringNotEquals": {
                    "aws:ResourceTag/kubernetes.io/cluster/a-1": "owned",
                    "aws:ResourceTag/kubernetes.io/cluster/b-2": "owned",
                }
            },
        },
    ],
}


class Conditions(unittest.TestCase):
    def test_negated_operator_over_several_keys_denies_only_what_no_key_owns(self):
        self.assertEqual(evaluate(tag_write({"kubernetes.io/cluster/a-1": "owned"}), [OWNED_ONLY]), ALLOW)
        self.assertEqual(evaluate(tag_write({"kubernetes.io/cluster/b-2": "owned"}), [OWNED_ONLY]), ALLOW)
        self.assertEqual(evaluate(tag_write({}), [OWNED_ONLY]), EXPLICIT_DENY)
        self.assertEqual(evaluate(tag_write({"kubernetes.io/cluster/a-1": "shared"}), [OWNED_ONLY]), EXPLICIT_DENY)
        self.assertEqual(evaluate(tag_write({"kubernetes.io/cluster/c-3": "owned"}), [OWNED_ONLY]), EXPLICIT_DENY)

    def test_condition_key_names_ignore_case(self):
        self.assertEqual(evaluate(tag_write({"Kubernetes.io/Cluster/A-1": "owned"}), [OWNED_ONLY]), ALLOW)

    def test_positive_operator_on_a_missing_key_does_not_match_and_if_exists_does(self):
        p = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"StringEquals": {"aws:ResourceTag/x": "1"}}}]}
        self.assertEqual(evaluate(tag_write({}), [p]), IMPLICIT_DENY)
        p["Statement"][0]["Condition"] = {"StringEqualsIfExists": {"aws:ResourceTag/x": "1"}}
        self.assertEqual(evaluate(tag_write({}), [p]), ALLOW)

    def test_for_all_values_and_for_any_value(self):
        guard = {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "*",
                    "Resource": "*",
                    "Condition": {
                        "Null": {"aws:TagKeys": "false"},
                        "ForAllValues:StringNotEqualsIgnoreCase": {"aws:TagKeys": ["Name"]},
                    },
                },
                {"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": {"ForAnyValue:StringLike": {"aws:TagKeys": ["kubernetes.io/*"]}}},
            ]
        }
        self.assertEqual(evaluate(tag_write(keys=["team", "env"]), [guard]), ALLOW)
        self.assertEqual(evaluate(tag_write(keys=["team", "name"]), [guard]), IMPLICIT_DENY)
        self.assertEqual(evaluate(tag_write(keys=["kubernetes.io/x"]), [guard]), EXPLICIT_DENY)
        no_keys = Request("ec2:CreateTags", INSTANCE, SESSION, A)
        self.assertEqual(evaluate(no_keys, [guard]), IMPLICIT_DENY, "Null false fails closed")

    def test_policy_variables_in_resource_and_a_missing_one_matches_nothing(self):
        p = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/accounts/${aws:PrincipalAccount}/${aws:PrincipalTag/tagwarden:cluster}/*"}]}
        ok = Request("s3:PutObject", f"arn:aws:s3:::b/accounts/{A}/c-1/p.yaml", f"arn:aws:iam::{A}:role/pub", A, B, {"aws:PrincipalTag/tagwarden:cluster": "c-1"})
        self.assertEqual(evaluate(ok, [{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}], resource=p), ALLOW)
        other = Request("s3:PutObject", f"arn:aws:s3:::b/accounts/{A}/c-2/p.yaml", ok.principal_arn, A, B, ok.context)
        self.assertEqual(evaluate(other, [{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}], resource=p), IMPLICIT_DENY)
        untagged = Request("s3:PutObject", ok.resource, ok.principal_arn, A, B)
        self.assertEqual(evaluate(untagged, [{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}], resource=p), IMPLICIT_DENY)

    def test_arn_operators_compare_part_by_part(self):
        p = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/tagwarden-member-forward-*"}}}]}
        yes = Request("events:PutEvents", "arn:aws:events:us-east-1:1:event-bus/x", f"arn:aws:iam::{A}:role/tagwarden-member-forward-us-east-1", A)
        self.assertEqual(evaluate(yes, [p]), ALLOW)
        no = Request("events:PutEvents", yes.resource, f"arn:aws:iam::{A}:role/someone", A)
        self.assertEqual(evaluate(no, [p]), IMPLICIT_DENY)


class Kinds(unittest.TestCase):
    ALL = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}

    def test_session_policy_intersects_the_role(self):
        session = {"Statement": [{"Effect": "Allow", "Action": "ec2:CreateTags", "Resource": "*", "Condition": {"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/a-1": "owned"}}}]}
        self.assertEqual(evaluate(tag_write({"kubernetes.io/cluster/a-1": "owned"}), [self.ALL], session=[session]), ALLOW)
        self.assertEqual(evaluate(tag_write({}), [self.ALL], session=[session]), IMPLICIT_DENY)
        self.assertEqual(evaluate(tag_write({}), [self.ALL]), ALLOW, "without the session policy: the role alone")

    def test_cross_account_needs_both_sides(self):
        bucket = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": A}, "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*"}]}
        req = Request("s3:PutObject", "arn:aws:s3:::b/k", SESSION, A, B)
        self.assertEqual(evaluate(req, [self.ALL], resource=bucket), ALLOW)
        self.assertEqual(evaluate(req, [], resource=bucket), IMPLICIT_DENY, "no identity grant")
        self.assertEqual(evaluate(req, [self.ALL]), IMPLICIT_DENY, "no resource grant")

    def test_same_account_resource_policy_grants_alone(self):
        bucket = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*"}]}
        req = Request("s3:PutObject", "arn:aws:s3:::b/k", f"arn:aws:iam::{A}:user/nobody", A, A)
        self.assertEqual(evaluate(req, [], resource=bucket), ALLOW)

    def test_deny_anywhere_wins_and_scp_must_allow(self):
        deny = {"Statement": [{"Effect": "Deny", "Action": "ec2:*", "Resource": "*"}]}
        self.assertEqual(evaluate(tag_write(), [self.ALL], boundary=[deny]), EXPLICIT_DENY)
        self.assertEqual(evaluate(tag_write(), [self.ALL], scps=[{"Statement": []}]), IMPLICIT_DENY)
        self.assertEqual(evaluate(tag_write(), [self.ALL], scps=[self.ALL]), ALLOW)

    def test_assume_role_needs_the_trust_policy_even_in_the_account(self):
        trust = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{A}:role/fn"}, "Action": "sts:AssumeRole"}]}
        role = f"arn:aws:iam::{A}:role/tagwarden-member"
        ok = Request("sts:AssumeRole", role, f"arn:aws:sts::{A}:assumed-role/fn/s", A, A)
        self.assertEqual(evaluate(ok, [self.ALL], resource=trust), ALLOW)
        other = Request("sts:AssumeRole", role, f"arn:aws:sts::{A}:assumed-role/admin/s", A, A)
        self.assertEqual(evaluate(other, [self.ALL], resource=trust), IMPLICIT_DENY)

    def test_size_counts_no_whitespace(self):
        self.assertEqual(size('{"a": [1, 2]}'), len('{"a":[1,2]}'))


if __name__ == "__main__":
    unittest.main()
