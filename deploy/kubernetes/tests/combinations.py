"""Render every documented kustomize combination and check what it would apply.

    combinations.py [--root DIR]

scripts/test-kubernetes runs this with the pinned kubectl's kustomize (.tools/venv-kube/bin/kubectl).
validate.py checks the three committed bundles; this checks the routes the documentation sends
people down, built as it tells them to:

  * the overlays as they are (openshift-aws, openshift-azure, configmap-source), configmap-source
    without the monitoring component (deploy/kubernetes/README.md), another namespace set in
    base/kustomization.yaml (README, "Another namespace"), the set components on each platform
    overlay: components/cluster-api (capa, and capz as its comment says) and components/hypershift,
    each in an overlay of one's own on top of the platform overlay, and the overlay blocks written
    in the components' own comments and in deploy/kubernetes/README.md, extracted and rendered as
    written;
  * the publisher's command line of each: accepted by `tagwarden publish` as clap parses it. The
    rules are read from src/bin/tagwarden/publish.rs itself (its `#[arg(...)]` attributes:
    `requires`, `conflicts_with_all`, the `source` ArgGroup, which flags take a value), so the check
    follows the code: for instance `--cluster-set` `conflicts_with_all = ["configmap", "cluster"]`;
    the set kinds from crates/cluster/src/cluster_set.rs (`impl FromStr for SetKind`);
  * every namespaced object of every combination has a namespace: tagwarden's (the
    ServiceAccount's), or CCO's for the CredentialsRequest, or the workload clusters' namespace
    for the set components' Event Roles; a kind this file does not classify is an error;
  * every object against its schema (validate.py's schema_checks, strict);
  * the AWS publisher's grant (openshift-aws's CredentialsRequest, from publisher-scope.yaml) for
    every documented layout: the single account's one object (infra/examples/aws-basic's
    policy_key), layers under a prefix, a cluster set's folder (infra/examples/aws-clusters), an
    AWS Organization's two-segment accounts/<account>/<infraID>/ (infra/aws/modules/organization),
    a cluster set's publisher: every object key and listing the publisher needs is allowed (IAM's
    wildcard matching, the s3:prefix condition), and a neighbour's folder is not.

--root DIR checks another copy of the repository's deploy/ and src/ (for instance an older commit,
`git archive`d), still with this repository's kubectl and validate.py.
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
KUBECTL = REPO / ".tools/venv-kube/bin/kubectl"
sys.path.insert(0, str(HERE))
import validate  # noqa: E402  (the schema checks, the vendored CRDs)

CCO_NAMESPACE = "openshift-cloud-credential-operator"
# Kinds these manifests use, by scope (Kubernetes API reference; the CRDs' spec.scope for
# CredentialsRequest, ServiceMonitor and PrometheusRule: Namespaced).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
NAMESPACED = {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Secret", "Service", "Deployment",
              "CredentialsRequest", "ServiceMonitor", "PrometheusRule"}
# The set components' Event Roles live in the namespace of the objects they report on (their
# rbac.yaml says so: copy them for each namespace of workload clusters).
MEMBER_EVENT_ROLES = {"tagwarden-infracluster-events": "fleet", "tagwarden-hostedcluster-events": "clusters"}


# --- the CLI's rules, from publish.rs -----------------------------------------------------------

def clap_rules(root):
    """The `publish` subcommand's arguments as clap derives them from src/bin/tagwarden/publish.rs."""
    src = (root / "src/bin/tagwarden/publish.rs").read_text()
    body = re.search(r"pub struct Args \{(.*?)\n\}", src, re.S).group(1)
    flags = {}
    pending = None
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("#[arg("):
            pending = line
        elif pending is not None and re.match(r"\w+: ", line):
            name, ty = re.match(r"(\w+): ([^,]+),", line).groups()
            attr = pending
            pending = None
            flags[name] = {
                "long": "--" + name.replace("_", "-"),
                "value": ty.strip() != "bool",
                "requires": re.findall(r'requires = "(\w+)"', attr),
                "conflicts": re.findall(r'"(\w+)"', (re.search(r"conflicts_with_all = \[([^\]]*)\]", attr) or [None, ""])[1])
                + re.findall(r'conflicts_with = "(\w+)"', attr),
                "required": "Option<" not in ty and ty.strip() != "bool" and "default_value" not in attr,
            }
        elif line and not line.startswith("///") and not line.startswith("#["):
            pending = None
    groups = []
    for g in re.finditer(r'ArgGroup::new\("(\w+)"\)([^\n]*)', src):
        members = re.findall(r'"(\w+)"', re.search(r"\.args\(\[([^\]]*)\]\)", g.group(2)).group(1))
        groups.append({"name": g.group(1), "args": members, "required": ".required(true)" in g.group(2),
                       "multiple": ".multiple(true)" in g.group(2)})
    kinds = set(re.findall(r'"(\w+)" => Ok\(SetKind::', (root / "crates/cluster/src/cluster_set.rs").read_text()))
    # The parse must have found what the code is known to hold; if publish.rs changes shape, this
    # fails rather than check nothing.
    assert flags.get("cluster_set", {}).get("conflicts") and "configmap" in flags["cluster_set"]["conflicts"], \
        "publish.rs: --cluster-set's conflicts_with_all not found"
    assert flags["to"]["required"] and not flags["watch"]["value"] and groups, "publish.rs: the Args struct did not parse"
    assert kinds >= {"hypershift", "capa", "capz"}, f"cluster_set.rs: set kinds {kinds}"
    return flags, groups, kinds


def refusals(args, rules):
    """What `tagwarden <args>` would be refused for (clap's usage errors), [] if accepted."""
    flags, groups, kinds = rules
    if not args or args[0] != "publish":
        return [f"the subcommand is {args[:1]}, not publish"]
    by_long = {f["long"]: n for n, f in flags.items()}
    present = {}
    out = []
    i = 1
    while i < len(args):
        a = args[i]
        name, _, inline = a.partition("=")
        if name not in by_long:
            out.append(f"unexpected argument {a!r}")
            i += 1
            continue
        n = by_long[name]
        if n in present:
            out.append(f"{name} given twice")
        if flags[n]["value"]:
            if inline:
                present[n] = inline
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                present[n] = args[i + 1]
                i += 1
            else:
                out.append(f"{name} needs a value")
        else:
            present[n] = True
        i += 1
    for n, f in flags.items():
        if f["required"] and n not in present:
            out.append(f"{f['long']} is required")
        if n not in present:
            continue
        for r in f["requires"]:
            if r not in present and not any(g["name"] == r and any(m in present for m in g["args"]) for g in groups):
                out.append(f"{f['long']} requires --{r.replace('_', '-')}")
        for c in f["conflicts"]:
            if c in present:
                out.append(f"{f['long']} cannot be used with --{c.replace('_', '-')} (conflicts_with_all)")
    for g in groups:
        given = [m for m in g["args"] if m in present]
        if g["required"] and not given:
            out.append(f"one of {g['args']} is required")
        if len(given) > 1 and not g["multiple"]:
            out.append(f"{given} cannot be used together (group {g['name']})")
    if "cluster_set" in present and present["cluster_set"] not in kinds:
        out.append(f"--cluster-set {present['cluster_set']!r} is none of {sorted(kinds)}")
    return out


# --- rendering -------------------------------------------------------------------------------

def kustomize(directory):
    r = subprocess.run([str(KUBECTL), "kustomize", str(directory)], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"kubectl kustomize {directory}: {r.stderr.strip()}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def commented_overlays(path):
    """The overlay blocks a component's header comment shows (`#   # my-…/kustomization.yaml` and
    the indented lines after it)."""
    blocks, cur = [], None
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line[1:]
        m = re.match(r"   # ([\w-]+)/kustomization\.yaml$", text)
        if m:
            cur = [m.group(1), []]
            blocks.append(cur)
        elif cur is not None and text.startswith("   ") and text.strip():
            cur[1].append(text[3:])
        else:
            cur = None
    return [(name, "\n".join(lines) + "\n") for name, lines in blocks]


def readme_overlays(path):
    """deploy/kubernetes/README.md's ```yaml blocks that are a whole overlay of one's own (first line
    `# my-…/kustomization.yaml`, resources in ../deploy/kubernetes)."""
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S):
        m = re.match(r"# (my-[\w-]+)/kustomization\.yaml[^\n]*\n", block)
        if m and "../deploy/kubernetes/" in block:
            out.append((m.group(1), block))
    return out


def readme_inplace_patches(path):
    """deploy/kubernetes/README.md's ```yaml blocks that add patches to an overlay in place (first
    line `# <overlay>/kustomization.yaml`, a `patches:` list): [(overlay, patches)]."""
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S):
        m = re.match(r"# ((?:openshift|configmap)[\w-]*)/kustomization\.yaml\n", block)
        if m:
            patches = (yaml.safe_load(block) or {}).get("patches")
            if patches:
                out.append((m.group(1), patches))
    return out


class Workspace:
    """A scratch copy of deploy/ (so that in-place edits the docs ask for can be made) beside the
    overlays of one's own, as the docs lay them out (my-tagwarden/ next to deploy/)."""

    def __init__(self, root):
        self.root = root
        self.dir = Path(tempfile.mkdtemp(prefix="tagwarden-kustomize."))

    def fresh(self, edits=()):
        """A copy of deploy/kubernetes with edits [(relative path, old, new)] applied."""
        base = self.dir / f"w{len(list(self.dir.iterdir()))}"
        shutil.copytree(self.root / "deploy", base / "deploy", symlinks=True)
        for rel, old, new in edits:
            p = base / "deploy/kubernetes" / rel
            text = p.read_text()
            if old not in text:
                raise RuntimeError(f"{rel}: the documented edit cannot be made: {old!r} is not there")
            p.write_text(text.replace(old, new))
        return base

    def overlay(self, base, name, kustomization):
        d = base / name
        d.mkdir(exist_ok=True)
        (d / "kustomization.yaml").write_text(kustomization)
        return d

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def own_overlay(*resources, components=()):
    text = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    text += "".join(f"  - ../deploy/kubernetes/{r}\n" for r in resources)
    if components:
        text += "components:\n" + "".join(f"  - ../deploy/kubernetes/{c}\n" for c in components)
    return text


def combinations(ws, fail):
    """[(name, docs, what the publisher must be)]; what: None, "configmap", or the set kind."""
    out = []
    w = ws.fresh()
    for overlay, what in (("openshift-aws", None), ("openshift-azure", None), ("configmap-source", "configmap")):
        out.append((overlay, kustomize(w / "deploy/kubernetes" / overlay), what))
    # README: "Without the Prometheus Operator's CRDs, drop ../components/monitoring from
    # configmap-source/kustomization.yaml".
    w2 = ws.fresh([("configmap-source/kustomization.yaml", "components:\n  - ../components/monitoring\n", "")])
    out.append(("configmap-source without monitoring", kustomize(w2 / "deploy/kubernetes/configmap-source"), "configmap"))
    # The set components, in an overlay of one's own on each platform overlay.
    for platform in ("configmap-source", "openshift-aws", "openshift-azure"):
        for comp, kind in (("cluster-api", "capa"), ("hypershift", "hypershift")):
            d = ws.overlay(w, f"my-{platform}-{comp}", own_overlay(platform, components=[f"components/{comp}"]))
            out.append((f"{platform} + components/{comp} (own overlay)", kustomize(d), kind))
    # components/cluster-api for CAPZ: "change the value `capa` below to `capz`".
    w3 = ws.fresh([("components/cluster-api/kustomization.yaml", '"--cluster-set", "capa"', '"--cluster-set", "capz"')]) \
        if '"--cluster-set", "capa"' in (ws.root / "deploy/kubernetes/components/cluster-api/kustomization.yaml").read_text() \
        else ws.fresh([("components/cluster-api/kustomization.yaml", "value: capa", "value: capz")])
    d = ws.overlay(w3, "my-capz", own_overlay("configmap-source", components=["components/cluster-api"]))
    out.append(("configmap-source + components/cluster-api, capz", kustomize(d), "capz"))
    # The overlays the components' comments show, as written.
    for comp, kind in (("cluster-api", "capa"), ("hypershift", "hypershift")):
        blocks = commented_overlays(ws.root / f"deploy/kubernetes/components/{comp}/kustomization.yaml")
        if not blocks:
            fail(f"components/{comp}/kustomization.yaml shows no overlay of one's own to add it in (`#   # my-…/kustomization.yaml`)")
        for name, text in blocks:
            wc = ws.fresh()
            out.append((f"components/{comp}'s comment: {name}", kustomize(ws.overlay(wc, name, text)), kind))
    # README.md's overlays of one's own.
    for i, (name, text) in enumerate(readme_overlays(ws.root / "deploy/kubernetes/README.md"), 1):
        wr = ws.fresh()
        what = ("capa" if "components/cluster-api" in text else "hypershift" if "components/hypershift" in text
                else "configmap" if "configmap-source" in text else None)
        out.append((f"README.md's overlay {i}: {name}", kustomize(ws.overlay(wr, name, text)), what))
    # README.md's patches to an overlay's own kustomization.yaml (the SSM grant, a role ARN for
    # manual mode with STS: a ROSA HCP hosted cluster's own publisher), added there as written.
    for overlay, patches in readme_inplace_patches(ws.root / "deploy/kubernetes/README.md"):
        wp = ws.fresh()
        k = wp / "deploy/kubernetes" / overlay / "kustomization.yaml"
        doc = yaml.safe_load(k.read_text())
        doc.setdefault("patches", []).extend(patches)
        k.write_text(yaml.safe_dump(doc, sort_keys=False))
        what = "configmap" if overlay == "configmap-source" else None
        try:
            out.append((f"README.md: {overlay} with its patch {json.dumps(patches)[:60]}…", kustomize(k.parent), what))
        except RuntimeError as e:
            fail(f"README.md's patch to {overlay}/kustomization.yaml, added there as written, does not build: {e}")
    # README, "Another namespace": set in base/kustomization.yaml; with a set component too.
    w4 = ws.fresh([("base/kustomization.yaml", "namespace: tagwarden\n", "namespace: tw-system\n")])
    for platform, comp, what in (("openshift-aws", None, None), ("configmap-source", "cluster-api", "capa"),
                                 ("openshift-aws", "hypershift", "hypershift")):
        d = ws.overlay(w4, f"my-ns-{platform}-{comp}", own_overlay(platform, components=[f"components/{comp}"] if comp else []))
        out.append((f"namespace tw-system: {platform}{' + components/' + comp if comp else ''}", kustomize(d), what))
    return out


# --- checks ----------------------------------------------------------------------------------

def check_combination(name, docs, what, rules, crds, provider, fail):
    sa = [d for d in docs if d["kind"] == "ServiceAccount"]
    ns = sa[0]["metadata"].get("namespace") if len(sa) == 1 else None
    if not ns:
        fail(f"{name}: no one ServiceAccount with a namespace")
    for d in docs:
        kind, meta = d["kind"], d["metadata"]
        where = meta.get("namespace")
        label = f"{name}: {kind}/{meta['name']}"
        if kind in CLUSTER_SCOPED:
            if where:
                fail(f"{label} is cluster-scoped but names namespace {where}")
        elif kind in NAMESPACED:
            want = CCO_NAMESPACE if kind == "CredentialsRequest" else MEMBER_EVENT_ROLES.get(meta["name"], ns)
            if not where:
                fail(f"{label} has no namespace: it would land in whatever namespace the person applying it is in (want {want})")
            elif where != want:
                fail(f"{label} is in namespace {where}, not {want}")
        else:
            fail(f"{label}: kind not classified as namespaced or cluster-scoped in combinations.py")
        for s in d.get("subjects", []) or []:
            if s.get("kind") == "ServiceAccount" and s.get("namespace") != ns:
                fail(f"{label} binds ServiceAccount {s.get('namespace')}/{s.get('name')}, not {ns}/tagwarden")
    validate.schema_checks(docs, name, crds, provider, fail)

    deploys = [d for d in docs if d["kind"] == "Deployment"]
    if len(deploys) != 1:
        fail(f"{name}: {len(deploys)} Deployments")
        return
    c = deploys[0]["spec"]["template"]["spec"]["containers"][0]
    args = c.get("args", [])
    for r in refusals(args, rules):
        fail(f"{name}: the publisher's args {args} are refused by tagwarden publish (src/bin/tagwarden/publish.rs): {r}")
    env = {e["name"] for e in c.get("env", [])}
    for var in re.findall(r"\$\((\w+)\)", " ".join(args)):
        if var not in env:
            fail(f"{name}: args use $({var}) but the container defines no {var}")
    has = lambda flag: flag in args  # noqa: E731
    if what == "configmap" and not has("--configmap"):
        fail(f"{name}: the ConfigMap source's publisher has no --configmap: {args}")
    if what in ("capa", "capz", "hypershift"):
        if not has("--cluster-set") or args[args.index("--cluster-set") + 1] != what:
            fail(f"{name}: a {what} set publisher must run with --cluster-set {what}: {args}")
        if any(d["kind"] == "Role" and d["metadata"]["name"] == "tagwarden-policy-reader" for d in docs):
            fail(f"{name}: a set publisher keeps the ConfigMap policy reader Role it never uses")
    if what is None and (has("--cluster-set") or has("--configmap")):
        fail(f"{name}: the Infrastructure source's publisher has {args}")


def allowed(statements, action, resource, context=None):
    """IAM: an Allow statement whose action, resource (wildcards * and ?) and conditions
    (StringEquals, StringLike) match; nothing here uses Deny or NotAction."""
    for s in statements:
        acts = s.get("action", [])
        if s.get("effect") != "Allow" or not any(fnmatchcase(action, a) for a in acts):
            continue
        if not fnmatchcase(resource, s.get("resource", "").replace("[", "[[]")):
            continue
        ok = True
        for op, kv in (s.get("policyCondition") or {}).items():
            for key, want in kv.items():
                have = (context or {}).get(key)
                wants = want if isinstance(want, list) else [want]
                if have is None or op not in ("StringEquals", "StringLike"):
                    ok = False
                elif op == "StringEquals" and have not in wants:
                    ok = False
                elif op == "StringLike" and not any(fnmatchcase(have, w) for w in wants):
                    ok = False
        if ok:
            return True
    return False


def layouts(root):
    """(layout, folder for publisher-scope.yaml, keys read and written, listings, a neighbour's
    keys and listings that must stay out of reach)."""
    basic_key = re.search(r'policy_key\s*=\s*"([^"]+)"', (root / "infra/examples/aws-basic/main.tf").read_text()).group(1)
    basic = basic_key.rsplit("/", 1)[0]
    me, other, acct, other_acct = "mycluster-7xk2p", "othercl-9abcd", "111122223333", "444455556666"

    def layered(folder):  # publish into a prefix writes 10-cluster.yaml (crates/core/src/publish.rs)
        return [f"{folder}/10-cluster.yaml", f"{folder}/tagwarden-status.json"], [f"{folder}/"]

    keys_l, lists_l = layered("cluster")
    keys_s, lists_s = layered(f"clusters/{me}")
    keys_o, lists_o = layered(f"accounts/{acct}/{me}")
    return [
        ("one cluster, one object (infra/examples/aws-basic policy_key)", basic,
         [basic_key, f"{basic}/tagwarden-status.json"], [],
         [f"other/{basic_key}", "tagwarden-status.json"], [""]),
        ("one cluster, layers (policy_prefix cluster/)", "cluster", keys_l, lists_l,
         ["cluster-b/10-cluster.yaml"], ["", "cluster-b/"]),
        ("a cluster set's cluster (infra/examples/aws-clusters, s3://BUCKET/clusters/*/)", f"clusters/{me}", keys_s, lists_s,
         [f"clusters/{other}/10-cluster.yaml", f"clusters/{me}x/10-cluster.yaml"], ["clusters/", f"clusters/{other}/"]),
        ("an AWS Organization's cluster (accounts/<account>/<infraID>/, infra/aws/modules/organization)",
         f"accounts/{acct}/{me}", keys_o, lists_o,
         [f"accounts/{acct}/{other}/10-cluster.yaml", f"accounts/{other_acct}/{me}/10-cluster.yaml",
          "accounts/_organization/hub.json"], ["accounts/", f"accounts/{acct}/"]),
        ("a cluster set's publisher (components/hypershift, cluster-api)", "clusters",
         [f"clusters/{me}/10-cluster.yaml", f"clusters/{other}/10-cluster.yaml", f"clusters/{me}/tagwarden-status.json"],
         ["clusters/", f"clusters/{me}/"],
         ["_tagwarden/member-roles.json", "other/10-cluster.yaml"], ["", "_tagwarden/"]),
    ]


def check_grants(ws, fail):
    scope = ws.root / "deploy/kubernetes/openshift-aws/publisher-scope.yaml"
    data = yaml.safe_load(scope.read_text())["data"]
    bucket = "tagwarden-123456789012"
    count = 0
    for layout, folder, keys, lists, far_keys, far_lists in layouts(ws.root):
        if "folder" in data:
            edits = [("openshift-aws/publisher-scope.yaml", f"folder: {data['folder']}\n", f"folder: {folder}\n")]
        else:
            # The older layout of publisher-scope.yaml (prefix, infra-id): the folder's
            # last segment as the infra-id, the rest as the prefix.
            head, _, tail = folder.rpartition("/")
            edits = [("openshift-aws/publisher-scope.yaml", f"prefix: {data['prefix']}\n", f"prefix: {head}\n"),
                     ("openshift-aws/publisher-scope.yaml", f"infra-id: {data['infra-id']}\n", f"infra-id: {tail}\n")]
        edits.append(("openshift-aws/publisher-scope.yaml", f"bucket-arn: {data['bucket-arn']}\n", f"bucket-arn: arn:aws:s3:::{bucket}\n"))
        try:
            docs = kustomize(ws.fresh(edits) / "deploy/kubernetes/openshift-aws")
        except RuntimeError as e:
            fail(f"grant for {layout}: {e}")
            continue
        cr = next(d for d in docs if d["kind"] == "CredentialsRequest")
        st = cr["spec"]["providerSpec"]["statementEntries"]
        arn = f"arn:aws:s3:::{bucket}"
        for key in keys:
            for action in (("s3:GetObject",) if key.endswith("tagwarden-status.json") else ("s3:GetObject", "s3:PutObject")):
                count += 1
                if not allowed(st, action, f"{arn}/{key}"):
                    fail(f"grant for {layout}: {action} on {key} is denied (AccessDenied): {json.dumps(st)}")
        for prefix in lists:
            count += 1
            if not allowed(st, "s3:ListBucket", arn, {"s3:prefix": prefix}):
                fail(f"grant for {layout}: listing {prefix!r} is denied: {json.dumps(st)}")
        for key in far_keys:
            count += 1
            if allowed(st, "s3:PutObject", f"{arn}/{key}") or allowed(st, "s3:GetObject", f"{arn}/{key}"):
                fail(f"grant for {layout}: reaches {key}, outside the publisher's folder {folder}/")
        for prefix in far_lists:
            count += 1
            if allowed(st, "s3:ListBucket", arn, {"s3:prefix": prefix}):
                fail(f"grant for {layout}: lists {prefix!r}, outside the publisher's folder {folder}/")
    return count


def main(argv):
    root = REPO
    if "--root" in argv:
        root = Path(argv[argv.index("--root") + 1]).resolve()
    failures = []
    fail = failures.append
    rules = clap_rules(root)
    crds, provider = validate.load_crd_validators()
    ws = Workspace(root)
    try:
        try:
            combos = combinations(ws, fail)
        except RuntimeError as e:
            print("FAIL", e)
            return 1
        for name, docs, what in combos:
            check_combination(name, docs, what, rules, crds, provider, fail)
        grants = check_grants(ws, fail)
    finally:
        ws.close()
    # The check itself: clap's refusals it must report.
    for bad, phrase in ((["publish", "--from-cluster", "--configmap", "a/b", "--cluster-set", "capa", "--to", "x"], "conflicts_with_all"),
                        (["publish", "--from-cluster", "--cluster-set", "capq", "--to", "x"], "none of"),
                        (["publish", "--from-cluster", "--listen", "0.0.0.0:8080", "--to", "x"], "requires --watch"),
                        (["publish", "--from", "-", "--from-cluster", "--to", "x"], "group source"),
                        (["publish", "--from-cluster"], "--to is required")):
        if not any(phrase in r for r in refusals(bad, rules)):
            fail(f"self-test: {bad} was not refused for {phrase!r}: {refusals(bad, rules)}")
    for f in failures:
        print("FAIL", f)
    if failures:
        return 1
    print(f"combinations: {len(combos)} documented kustomize combinations rendered ({', '.join(n for n, _, _ in combos)}); "
          "each publisher's args accepted by publish.rs's clap rules, every namespaced object in its namespace, schemas strict")
    print(f"grants: openshift-aws's CredentialsRequest for {len(layouts(root))} layouts, {grants} object and listing checks "
          "(each needed key and listing allowed, each neighbour's refused)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
