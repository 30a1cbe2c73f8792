"""The published policy schema (schema/tagwarden.schema.json) against `tagwarden validate`.

An editor that checks tagwarden.yaml with the schema must never refuse a policy tagwarden takes,
and should refuse what tagwarden refuses wherever a schema can say it. So, for every document
here, the schema's verdict must equal the CLI's:

- single-tag documents, generated (seeded) from the pieces the rules are about: every character
  class, the reserved names and prefixes in other cases, lengths at and past the limits, number
  and boolean values; one tag, so nothing a schema cannot see (keys repeated in another case, the
  user-tag count) decides;
- structural cases: unknown fields, nulls, selectors, limits, types;
- the repository's own native documents (the fixtures and README.md's example), which must also
  carry the yaml-language-server modeline that points editors at the schema.

The field lists themselves are checked against the Rust types by the core's
`the_published_schema_describes_exactly_what_the_reader_takes`.

Usage: check_policy_schema.py TAGWARDEN_CLI
"""

import json
import pathlib
import random
import re
import subprocess
import sys
import tempfile

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schema/tagwarden.schema.json").read_text())
MODELINE = re.compile(r"^# yaml-language-server: \$schema=\S*tagwarden\.schema\.json$", re.M)

PIECES = [
    "a", "Z", "9", "_", ".", ":", "/", "=", "+", "-", "@", " ", "\u00a0", "\u3000", "\t", ",", ";",
    "<", ">", "?", "*", "#", "é", "team", "cost-center", "Name", "name", "NAME", "aws:", "Aws:x",
    "kubernetes.io/", "x.Kubernetes.IO/", "OpenShift.io/", "kubernetesXio/", "some/openshift.io/",
    "sigs.k8s.io/cluster-api-provider-aws/", "SIGS.k8s.io_cluster-api-provider-azure_",
    "microsoft", "Azure", "windows", "kubernetes.io_cluster_x",
    "kubernetes-io-cluster-x", "openshift-io", "capg-", "goog-", "я",
]


def schema_errors(doc):
    v = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in v.iter_errors(doc)]


def cli_verdict(cli, cloud, text, suffix):
    with tempfile.NamedTemporaryFile("w", suffix=suffix, encoding="utf-8") as f:
        f.write(text)
        f.flush()
        r = subprocess.run([cli, "validate", "--cloud", cloud, f.name, "--json"], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"tagwarden validate exited {r.returncode} on {text!r}: {r.stderr}")
    return r.returncode == 0, r.stdout + r.stderr


CLEAN = ["team", "env", "a", "Z", "9", "_", ".", "-", "cost-center", "pool_1"]


def piece(rng):
    if rng.random() < 0.4:
        return "".join(rng.choice(CLEAN) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.05:
        return rng.choice(["x" * 127, "y" * 128, "v" * 255, "w" * 256])
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))


def single_tag_docs():
    rng = random.Random(37)
    for i in range(600):
        cloud = ("aws", "azure", "gcp")[i % 3]
        key = "" if rng.random() < 0.02 else piece(rng)
        value = rng.choice([piece(rng), piece(rng), piece(rng), "", 42, True, 1.5, -7])
        tags = {key: value}
        if i % 3 == 0:
            doc = {"version": 1, "cloud": cloud, "overrides": [{"selector": {"type": "*"}, "tags": tags}]}
        else:
            doc = {"version": 1, "cloud": cloud, "tags": tags}
        yield f"generated[{i}]", cloud, doc


def gcp_label_docs():
    """Google Cloud labels at each of their rules' edges (OpenShift's user-label rules)."""
    keys = ["team", "t", "t" * 63, "t" * 64, "Team", "9team", "-team", "tëam", "te.am", "goog-team",
            "capg-role", "kubernetes-io-x", "openshift-io-y", "team_1-a"]
    values = ["platform", "", "x" * 63, "x" * 64, "Platform", "a.b", "ë", 42, -7, True, 1.5]
    for k in keys:
        yield f"gcp key {k[:20]!r}", "gcp", {"version": 1, "cloud": "gcp", "tags": {k: "platform"}}
    for v in values:
        yield f"gcp value {str(v)[:20]!r}", "gcp", {"version": 1, "cloud": "gcp", "tags": {"team": v}}
    # Resource Manager tags, `<parentID>/<key>: <value>` (OpenShift's tag rules).
    tag_keys = ["123456789012/env", "my-project/env", "0123/env", "my-p/env", "123/Env_1.a", "123/-env",
                "123/e" + "n" * 62, "123/e" + "n" * 63, "123/en v", "123/env/x", "/env", "123/"]
    tag_values = ["production", "Prod 1", "a@b", "-prod", "prod.", "p" * 63, "p" * 64, "", "pröd", 42, -7, True]
    for k in tag_keys:
        yield f"gcp tag key {k[:24]!r}", "gcp", {"version": 1, "cloud": "gcp", "tags": {k: "production"}}
    for v in tag_values:
        yield f"gcp tag value {str(v)[:20]!r}", "gcp", {"version": 1, "cloud": "gcp", "tags": {"123/env": v}}


def structural_docs():
    one = {"selector": {"type": "ec2:instance"}, "tags": {"pool": "general"}}
    cases = {
        "minimal": {"version": 1, "tags": {}},
        "nulls where the reader takes them": {
            "version": 1, "cloud": None, "infraID": None, "enforce": None, "limits": None,
            "overrides": [{"name": None, "selector": {"type": "s3:*", "id": None, "tag": None}, "tags": {}}],
        },
        "infraId spelling": {"version": 1, "infraId": "mycluster-7xk2p", "tags": {}},
        "unknown top-level field": {"version": 1, "tags": {}, "tag": {"a": "b"}},
        "version 2": {"version": 2, "tags": {}},
        "cloud gcp": {"version": 1, "cloud": "gcp", "tags": {"team": "platform"}},
        "cloud oci": {"version": 1, "cloud": "oci", "tags": {}},
        "enforce as text": {"version": 1, "enforce": "yes", "tags": {}},
        "tags null": {"version": 1, "tags": None},
        "tag value null": {"version": 1, "tags": {"team": None}},
        "tag value a list": {"version": 1, "tags": {"team": ["a"]}},
        "override": {"version": 1, "overrides": [one]},
        "override without selector": {"version": 1, "overrides": [{"tags": {"a": "b"}}]},
        "override without tags": {"version": 1, "overrides": [{"selector": {"type": "x"}}]},
        "override with an unknown field": {"version": 1, "overrides": [dict(one, match={"type": "x"})]},
        "selector naming no criterion": {"version": 1, "overrides": [{"selector": {}, "tags": {}}]},
        "selector with only nulls": {"version": 1, "overrides": [{"selector": {"tag": None}, "tags": {}}]},
        "tag selector without key": {"version": 1, "overrides": [{"selector": {"tag": {"value": "w"}}, "tags": {}}]},
        "tag selector with key only": {"version": 1, "overrides": [{"selector": {"tag": {"key": "role"}}, "tags": {}}]},
        "selector with an unknown criterion": {"version": 1, "overrides": [{"selector": {"name": "x"}, "tags": {}}]},
        "200 overrides": {"version": 1, "overrides": [one] * 200},
        "201 overrides": {"version": 1, "overrides": [one] * 201},
        "limits": {"version": 1, "limits": {"userTags": 30, "resourceTags": 50, "resourceTagsByType": {"s3:*": 10}}},
        "userTags 0": {"version": 1, "limits": {"userTags": 0}},
        "resourceTags 0": {"version": 1, "limits": {"resourceTags": 0}},
        "resourceTags negative": {"version": 1, "limits": {"resourceTags": -1}},
        "resourceTagsByType 0": {"version": 1, "limits": {"resourceTagsByType": {"s3:*": 0}}},
        "an unknown limit": {"version": 1, "limits": {"tags": 3}},
        "sensitive": {"version": 1, "sensitive": ["cost-center"], "tags": {}},
        "sensitive as text": {"version": 1, "sensitive": "cost-center", "tags": {}},
        "neverYield": {"version": 1, "neverYield": ["cost-center"], "tags": {"cost-center": "cc-1"}},
        "neverYield as text": {"version": 1, "neverYield": "cost-center", "tags": {"cost-center": "cc-1"}},
        "neverYield an empty key": {"version": 1, "neverYield": [""], "tags": {"cost-center": "cc-1"}},
        "auditKeys": {"version": 1, "auditKeys": ["cost-center"], "tags": {"cost-center": "cc-1", "team": "a"}},
        "auditKeys as text": {"version": 1, "auditKeys": "cost-center", "tags": {"cost-center": "cc-1"}},
        "auditKeys an empty key": {"version": 1, "auditKeys": [""], "tags": {"cost-center": "cc-1"}},
        "enforce false": {"version": 1, "enforce": False, "tags": {"cost-center": "cc-1"}},
    }
    for name, doc in cases.items():
        # A document that names its cloud is validated for that cloud (a flag naming another is
        # refused by the CLI, which a schema cannot know); the others for each cloud.
        named = doc.get("cloud")
        for cloud in (named,) if named in ("aws", "azure", "gcp") else ("aws", "azure", "gcp"):
            yield f"{name} ({cloud})", cloud, doc


def readme_policy():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    native = [b for b in blocks if re.search(r"^version: 1$", b, re.M)]
    if len(native) != 1:
        raise SystemExit(f"README.md: expected one tagwarden.yaml example, found {len(native)}")
    return native[0]


def repo_docs():
    """The repository's own native policy documents, with whether each must carry the modeline."""
    policies = ROOT / "tests/fixtures/policies"
    for path in sorted(policies.rglob("*.yaml")):
        text = path.read_text()
        if re.search(r"^version: 1$", text, re.M):
            yield str(path.relative_to(ROOT)), text
    yield "README.md's tagwarden.yaml example", readme_policy()


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    cli = sys.argv[1]
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    disagreements, counts = [], {"accepted": 0, "refused": 0}

    def compare(name, cloud, text, suffix, doc):
        ok, said = cli_verdict(cli, cloud, text, suffix)
        errors = schema_errors(doc)
        counts["accepted" if ok else "refused"] += 1
        if ok == bool(errors):
            side = "the schema refuses what tagwarden takes" if ok else "the schema takes what tagwarden refuses"
            disagreements.append(f"{name}: {side}\n  document: {text.strip()}\n  schema: {errors}\n  tagwarden: {said.strip()[:400]}")

    generated = list(single_tag_docs()) + list(structural_docs())
    for name, cloud, doc in list(generated) + list(gcp_label_docs()):
        compare(name, cloud, json.dumps(doc, ensure_ascii=False), ".json", doc)
    missing = []
    for name, text in repo_docs():
        doc = yaml.safe_load(text)
        compare(name, doc.get("cloud") or "aws", text, ".yaml", doc)
        if not MODELINE.search(text):
            missing.append(name)
    for d in disagreements:
        print("DISAGREE", d)
    for m in missing:
        print(f"NO MODELINE {m}: add '# yaml-language-server: $schema=<path or URL of schema/tagwarden.schema.json>'")
    total = counts["accepted"] + counts["refused"]
    print(
        f"policy schema: {total} documents ({counts['accepted']} taken, {counts['refused']} refused by tagwarden), "
        f"{len(disagreements)} disagreements, {len(missing)} without the modeline"
    )
    sys.exit(1 if disagreements or missing else 0)


if __name__ == "__main__":
    main()
