"""An IAM policy evaluator for the tests: the part of AWS's evaluation our policies rely on.

It answers whether a request is allowed given the policies in force, following the IAM User Guide:
- "Policy evaluation logic" (the flow chart): an explicit Deny in any policy wins; then an SCP must
  allow; then a resource-based policy or the identity-based policy allows, within a permissions
  boundary and a session policy where they exist.
- "Cross-account policy evaluation logic": when the principal's account is not the resource's,
  the identity-based policy AND the resource-based policy must both allow.
- "Session policies": the session's permissions are the intersection of the role's identity-based
  policies and the session policy; a resource-based policy that names the *session* (or its role,
  for same-account requests) also grants.
- "IAM JSON policy elements: Condition operators": String*, Arn*, Bool, Null, Numeric*; the
  `...IfExists` suffix; `ForAllValues:` / `ForAnyValue:` for multivalued keys; "If the key that you
  specify in a policy condition is not present in the request context, the values do not match"
  (positive operators false; the negated ones, `StringNotEquals` etc., true, as the guide's
  examples show); several keys in one operator, and several operators in one block, must all
  match; several values for one key match any one.
- "IAM policy elements: Variables and tags": `${aws:PrincipalAccount}` and other single-valued keys
  in `Resource` and in condition values; a variable whose key is absent from the context leaves
  the element unmatched.
- Condition key names are case-insensitive (including the tag-key part of `aws:ResourceTag/...`);
  action names are case-insensitive; resources are case-sensitive.

Inferred here, not quoted: the order of the flow chart is collapsed to Deny > (SCP) >
(resource-policy grant | identity grant within boundary and session), which is what the chart
gives for the request kinds the tests make (no KMS key policies, no ACLs, no permission sets).

Pure: no I/O, stdlib only. `python3 -m unittest tests/iam/test_iam_eval.py` runs its own tests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

ALLOW = "Allow"
EXPLICIT_DENY = "ExplicitDeny"
IMPLICIT_DENY = "ImplicitDeny"


@dataclass
class Request:
    """One API request as IAM sees it."""

    action: str
    resource: str
    principal_arn: str
    principal_account: str
    resource_account: Optional[str] = None  # None: same as the principal's
    context: dict = field(default_factory=dict)  # condition key -> str | list[str] | bool

    def keys(self) -> dict:
        """The request context with the keys IAM adds for every request (global condition keys)."""
        ctx = {k.lower(): v for k, v in self.context.items()}
        ctx.setdefault("aws:principalaccount", self.principal_account)
        ctx.setdefault("aws:principalarn", self.principal_arn)
        ctx.setdefault("aws:resourceaccount", self.resource_account or self.principal_account)
        return ctx


def _list(x: Any) -> list:
    if x is None:
        return []
    return x if isinstance(x, list) else [x]


def _statements(policy: Any) -> list[dict]:
    if isinstance(policy, str):
        policy = json.loads(policy)
    return _list(policy.get("Statement"))


_VAR = re.compile(r"\$\{([^}]+)\}")


def _substitute(text: str, ctx: dict) -> Optional[str]:
    """`text` with its policy variables replaced; None if one names a key the context lacks.
    `${*}`, `${?}` and `${$}` stand for the literal characters (IAM User Guide)."""
    missing = False

    def repl(m: re.Match) -> str:
        nonlocal missing
        name = m.group(1)
        if name in ("*", "?", "$"):
            return "\0" + name  # a literal, protected from globbing below
        # A default value: ${key, 'default'}.
        default = None
        if "," in name:
            name, _, rest = name.partition(",")
            default = rest.strip().strip("'")
        value = ctx.get(name.strip().lower())
        if isinstance(value, list):
            value = value[0] if len(value) == 1 else None
        if value is None:
            if default is not None:
                return default
            missing = True
            return ""
        return str(value)

    out = _VAR.sub(repl, text)
    return None if missing else out


def _glob(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """IAM's wildcards: `*` any run of characters (across `/` and `:` too), `?` one."""
    if ignore_case:
        pattern, text = pattern.lower(), text.lower()
    regex = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\0":  # a literal from ${*} / ${?}
            regex += re.escape(pattern[i + 1])
            i += 2
            continue
        regex += ".*" if c == "*" else "." if c == "?" else re.escape(c)
        i += 1
    return re.fullmatch(regex, text, re.DOTALL) is not None


def _action_matches(patterns: Iterable[str], action: str) -> bool:
    return any(_glob(p, action, ignore_case=True) for p in patterns)


def _resource_matches(patterns: Iterable[str], resource: str, ctx: dict) -> bool:
    for p in patterns:
        p = _substitute(p, ctx)
        if p is not None and _glob(p, resource):
            return True
    return False


def _principal_matches(principal: Any, req: Request) -> bool:
    """A resource-based policy's Principal (or NotPrincipal is not supported: fail)."""
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False
    for kind, ids in principal.items():
        for p in _list(ids):
            if kind == "AWS":
                if p == "*":
                    return True
                if re.fullmatch(r"\d{12}", p) or p == f"arn:aws:iam::{req.principal_account}:root":
                    if (p if p.isdigit() else p.split(":")[4]) == req.principal_account:
                        return True
                    continue
                if p == req.principal_arn or _role_of_session(req.principal_arn) == p:
                    return True
            elif kind == "Service":
                if req.principal_arn == p:
                    return True
    return False


def _role_of_session(arn: str) -> Optional[str]:
    """arn:aws:sts::A:assumed-role/R/S -> arn:aws:iam::A:role/R (path unknown: none)."""
    m = re.fullmatch(r"arn:([^:]+):sts::(\d{12}):assumed-role/([^/]+)/.+", arn)
    return f"arn:{m.group(1)}:iam::{m.group(2)}:role/{m.group(3)}" if m else None


def _values(v: Any) -> list[str]:
    return [str(x).lower() if isinstance(x, bool) else str(x) for x in _list(v)]


def _single(op: str, have: str, want: str) -> bool:
    base = op
    if base in ("StringEquals", "StringNotEquals"):
        return have == want
    if base in ("StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase"):
        return have.lower() == want.lower()
    if base in ("StringLike", "StringNotLike"):
        return _glob(want, have)
    if base in ("ArnEquals", "ArnNotEquals", "ArnLike", "ArnNotLike"):
        # Arn operators compare each of the six colon-separated parts; Like with wildcards.
        hp, wp = have.split(":", 5), want.split(":", 5)
        if len(hp) != 6 or len(wp) != 6:
            return False
        return all(_glob(w, h) for h, w in zip(hp, wp))
    if base == "Bool":
        return have.lower() == want.lower()
    if base.startswith("Numeric"):
        h, w = float(have), float(want)
        return {
            "NumericEquals": h == w,
            "NumericNotEquals": h == w,
            "NumericLessThan": h < w,
            "NumericLessThanEquals": h <= w,
            "NumericGreaterThan": h > w,
            "NumericGreaterThanEquals": h >= w,
        }[base]
    raise ValueError(f"condition operator {op} is not modelled: extend iam_eval")


NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "ArnNotEquals",
    "ArnNotLike",
    "NumericNotEquals",
}


def _condition_matches(op_full: str, key: str, wanted: Any, ctx: dict) -> bool:
    op = op_full
    qualifier = None
    if ":" in op:
        qualifier, op = op.split(":", 1)
    if_exists = op.endswith("IfExists")
    if if_exists:
        op = op[: -len("IfExists")]
    present = key.lower() in ctx
    have_raw = ctx.get(key.lower())

    if op == "Null":
        want_null = _values(wanted)[0] == "true"
        return (not present) == want_null

    wants = []
    for w in _values(wanted):
        s = _substitute(w, ctx)
        if s is not None:
            wants.append(s)
    negated = op in NEGATED

    if not present:
        if if_exists:
            return True
        if qualifier == "ForAllValues":
            return True  # vacuously: no value fails
        if qualifier == "ForAnyValue":
            return False
        return negated

    haves = _values(have_raw)
    if qualifier == "ForAllValues":
        return all(_any_match(op, h, wants, negated) for h in haves)
    if qualifier == "ForAnyValue":
        return any(_any_match(op, h, wants, negated) for h in haves)
    # A single-valued key.
    return _any_match(op, haves[0] if haves else "", wants, negated)


def _any_match(op: str, have: str, wants: list[str], negated: bool) -> bool:
    """Positive: any wanted value matches. Negated: no wanted value matches."""
    hit = any(_single(op, have, w) for w in wants)
    return not hit if negated else hit


def _conditions_match(cond: Optional[dict], ctx: dict) -> bool:
    for op, block in (cond or {}).items():
        for key, wanted in block.items():
            if not _condition_matches(op, key, wanted, ctx):
                return False
    return True


def _statement_applies(st: dict, req: Request, ctx: dict, resource_policy: bool) -> bool:
    if "NotPrincipal" in st:
        raise ValueError("NotPrincipal is not modelled")
    if resource_policy and not _principal_matches(st.get("Principal"), req):
        return False
    if "Action" in st and not _action_matches(_list(st["Action"]), req.action):
        return False
    if "NotAction" in st and _action_matches(_list(st["NotAction"]), req.action):
        return False
    if "Resource" in st and not _resource_matches(_list(st["Resource"]), req.resource, ctx):
        return False
    if "NotResource" in st and _resource_matches(_list(st["NotResource"]), req.resource, ctx):
        return False
    return _conditions_match(st.get("Condition"), ctx)


def decide(policies: Iterable[Any], req: Request, resource_policy: bool = False) -> str:
    """One set of policies of one kind: ExplicitDeny, Allow or ImplicitDeny."""
    ctx = req.keys()
    allowed = False
    for policy in policies:
        for st in _statements(policy):
            if _statement_applies(st, req, ctx, resource_policy):
                if st.get("Effect") == "Deny":
                    return EXPLICIT_DENY
                allowed = True
    return ALLOW if allowed else IMPLICIT_DENY


def evaluate(
    req: Request,
    identity: Iterable[Any] = (),
    session: Optional[Iterable[Any]] = None,
    boundary: Optional[Iterable[Any]] = None,
    resource: Optional[Any] = None,
    scps: Optional[Iterable[Any]] = None,
) -> str:
    """The decision for `req`: the identity-based policies of the principal (a role's), the session
    policies it was assumed with (None: none passed), its permissions boundary, the resource's
    resource-based policy, and the SCPs of the principal's account."""
    identity = list(identity)
    kinds = [decide(identity, req)]
    if session is not None:
        kinds.append(decide(session, req))
    if boundary is not None:
        kinds.append(decide(boundary, req))
    res = decide([resource], req, resource_policy=True) if resource is not None else IMPLICIT_DENY
    kinds.append(res)
    if scps is not None:
        kinds.append(decide(scps, req))
    if EXPLICIT_DENY in kinds:
        return EXPLICIT_DENY
    if scps is not None and kinds[-1] != ALLOW:
        return IMPLICIT_DENY

    # Identity-based permissions, within the session policy and the boundary where there are.
    identity_ok = all(k == ALLOW for k in kinds[: len(kinds) - 1 - (scps is not None)])

    # A role's trust policy must allow AssumeRole, within the account too ("Roles terms and
    # concepts": the trust policy "defines which principals can assume the role"). Inferred
    # simplification: a trust policy naming the account's root is treated like one naming the
    # principal (IAM then also wants the identity's grant, which the tests always give).
    if req.action.lower().startswith("sts:assumerole") and res != ALLOW:
        return IMPLICIT_DENY
    cross_account = (req.resource_account or req.principal_account) != req.principal_account
    if cross_account:
        # Both sides must allow (IAM User Guide, "Cross-account policy evaluation logic").
        return ALLOW if identity_ok and res == ALLOW else IMPLICIT_DENY
    if res == ALLOW:
        # Same account: a resource-based policy that names the principal grants on its own; for a
        # role session named through its role ARN, the session policy still limits it (IAM User
        # Guide, "Session policies").
        if session is not None and _names_role_not_session(resource, req):
            return ALLOW if kinds[1] == ALLOW else IMPLICIT_DENY
        return ALLOW
    return ALLOW if identity_ok else IMPLICIT_DENY


def _names_role_not_session(resource: Any, req: Request) -> bool:
    for st in _statements(resource):
        p = st.get("Principal")
        if isinstance(p, dict) and req.principal_arn not in _list(p.get("AWS")):
            return True
    return False


def size(policy: Any) -> int:
    """The characters IAM counts against a policy's quota: whitespace aside (IAM User Guide, "IAM
    and AWS STS quotas": "IAM doesn't count white space when calculating the size of a policy")."""
    text = policy if isinstance(policy, str) else json.dumps(policy, separators=(",", ":"))
    return len(re.sub(r"\s", "", text))
