"""Validate the rendered install bundles (scripts/test-kubernetes runs this; no API server here).

    validate.py [--template] [--self-test] BUNDLE...

Every object of every bundle is validated, none skipped:
  * built-in kinds against the Kubernetes JSON schemas kubernetes-validate ships, strictly (unknown
    fields are errors), for each release in K8S_VERSIONS; a kind it has no schema for is an error,
    not the warning kubernetes-validate's CLI prints;
  * custom resources against the openAPIV3Schema of their real CRDs, vendored and pinned in
    tests/fixtures/schemas/ (CredentialsRequest, ServiceMonitor, PrometheusRule), turned into JSON
    Schema as the API server reads a structural schema, and strictly: an object schema with
    properties rejects other fields, as `kubectl apply --validate=strict` does; metadata against the
    Kubernetes ObjectMeta schema; anything in a CRD schema this converter does not understand (a CEL
    rule, say) stops the run instead of being dropped;
  * a CredentialsRequest's providerSpec (a RawExtension in the CRD) against the schema derived from
    the Go types, tests/fixtures/schemas/cloudcredential-providerspec.schema.json;
and then what no schema sees: the wiring between the objects (namespaces, the Secret and token paths
the CredentialsRequest and the pod agree on, ports, probes, the ServiceMonitor's selector), the image
version, a restricted pod, least-privilege RBAC, no secret in a ConfigMap.

It writes the PrometheusRule's groups as a Prometheus rule file beside each bundle's name in
$RULES_DIR (for promtool) when that is set.

--template: the bundles are the committed templates, whose image is the placeholder
set-your-registry.invalid/tagwarden; without it that image is refused, since nobody can
pull it: what an install builds must name the registry the image was pushed to.

--self-test breaks copies of the bundles in known ways and fails unless each break is reported, so
that a validator that silently passes everything cannot go unnoticed.
"""

import copy
import json
import os
import re
import sys
from pathlib import Path

import jsonschema
import yaml
from kubernetes_validate import utils as kv
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "tests/fixtures/schemas"
# 1.33: OpenShift 4.20's Kubernetes; 1.37: the newest schemas kubernetes-validate ships.
K8S_VERSIONS = ["1.33.0", "1.37.0"]
# Nobody publishes an image under a name these manifests could know; the committed
# bundles carry this placeholder (".invalid" never resolves: RFC 2606, section 2), and an install
# sets its own registry in an overlay (README, "The image"). Refused unless --template.
PLACEHOLDER_REPO = "set-your-registry.invalid/tagwarden"
IMAGE = PLACEHOLDER_REPO
CCO_NAMESPACE = "openshift-cloud-credential-operator"
CRD_FILES = {
    ("cloudcredential.openshift.io/v1", "CredentialsRequest"): "credentialsrequests.cloudcredential.openshift.io.crd.yaml",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitors.monitoring.coreos.com.crd.yaml",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrules.monitoring.coreos.com.crd.yaml",
}
# The metrics `tagwarden publish --watch --listen` serves, and Prometheus' own `up`.
METRICS = {
    "tagwarden_publish_last_success_timestamp_seconds",
    "tagwarden_publish_failures_total",
    "tagwarden_watch_restarts_total",
    "tagwarden_policy_refused",
    "up",
}

# --- CRD openAPIV3Schema -> JSON Schema ------------------------------------------------------

# Keywords with the same meaning in a structural schema and in JSON Schema 2020-12.
SAME = {"type", "required", "enum", "pattern", "minLength", "maxLength", "minimum", "maximum",
        "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "multipleOf"}
# Keywords that constrain nothing (documentation, defaulting, formats the API server does not
# enforce for these types).
IGNORED = {"description", "default", "example", "format", "x-kubernetes-list-type",
           "x-kubernetes-list-map-keys", "x-kubernetes-map-type", "title"}
OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def go_pattern(pattern, where):
    """A Go (RE2) pattern as Python `re` reads it: the same except that Python wants global flags
    first (`^(?i)x` is `(?i)^x`). Anything else Python cannot compile stops the run."""
    moved = re.sub(r"^\^\(\?([a-zA-Z]+)\)", r"(?\1)^", pattern)
    try:
        re.compile(moved)
    except re.error as e:
        raise SystemExit(f"CRD pattern {pattern!r} at {where} is not a Python regex ({e}); translate it")
    return moved


def convert(node, where="$"):
    """One structural-schema node as JSON Schema, strict about unknown fields."""
    out = {}
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    for key, value in node.items():
        if key == "pattern":
            out[key] = go_pattern(value, where)
        elif key in SAME:
            out[key] = value
        elif key in IGNORED:
            pass
        elif key == "properties":
            out["properties"] = {k: convert(v, f"{where}.{k}") for k, v in value.items()}
        elif key == "items":
            out["items"] = convert(value, f"{where}[]")
        elif key == "additionalProperties":
            out["additionalProperties"] = value if isinstance(value, bool) else convert(value, f"{where}.*")
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [convert(v, where) for v in value]
        elif key == "not":
            out["not"] = convert(value, where)
        elif key == "nullable":
            pass  # handled below
        elif key == "x-kubernetes-int-or-string":
            pass  # handled below
        elif key in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource"):
            pass
        elif key == "exclusiveMinimum" or key == "exclusiveMaximum":
            # OpenAPI 3.0: a boolean qualifying minimum/maximum.
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value:
                out[key] = node[bound]
                out.pop(bound, None)
        else:
            raise SystemExit(f"CRD schema keyword {key!r} at {where} is not understood by this "
                             "converter; teach it (tests would otherwise pass without checking it)")
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if node.get("x-kubernetes-list-type") == "map":
        out["x-list-map-keys"] = node["x-kubernetes-list-map-keys"]
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def list_map_keys(validator, keys, instance, schema):
    """x-kubernetes-list-type: map: the items' key tuples are unique."""
    if not isinstance(instance, list):
        return
    seen = set()
    for item in instance:
        key = tuple(json.dumps(item.get(k)) for k in keys) if isinstance(item, dict) else None
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate entry for key {dict(zip(keys, key))} in a list of type map")
        seen.add(key)


Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"x-list-map-keys": list_map_keys})


def k8s_definitions():
    """kubernetes-validate's definitions (for ObjectMeta), strict, newest release."""
    path = Path(kv.__file__).parent / "kubernetes-json-schema" / f"v{K8S_VERSIONS[-1]}-local-strict" / "_definitions.json"
    return json.loads(path.read_text())


def load_crd_validators():
    defs = k8s_definitions()
    registry = Resource.from_contents(defs) @ Registry()
    validators = {}
    for (api_version, kind), name in CRD_FILES.items():
        crd = next(d for d in yaml.safe_load_all((SCHEMAS / name).read_text()) if d)
        group = crd["spec"]["group"]
        assert crd["spec"]["names"]["kind"] == kind, name
        for version in crd["spec"]["versions"]:
            if f"{group}/{version['name']}" != api_version:
                continue
            if not version.get("served", True):
                raise SystemExit(f"{name}: {api_version} is not served")
            schema = convert(version["schema"]["openAPIV3Schema"])
            schema["properties"]["metadata"] = {"$ref": OBJECT_META}
            schema["properties"]["apiVersion"] = {"const": api_version}
            schema["properties"]["kind"] = {"const": kind}
            schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
            schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
            Validator.check_schema(schema)
            validators[(api_version, kind)] = Validator(schema, registry=registry)
    missing = set(CRD_FILES) - set(validators)
    if missing:
        raise SystemExit(f"no served version in the vendored CRDs for {missing}")
    provider = json.loads((SCHEMAS / "cloudcredential-providerspec.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(provider)
    # One validator per kind, so that a mistake is reported against the type it was meant for.
    per_kind = {}
    for kind in provider["$defs"]:
        if kind.endswith("ProviderSpec"):
            schema = {k: v for k, v in provider.items() if k != "oneOf"} | {"$ref": f"#/$defs/{kind}"}
            per_kind[kind] = jsonschema.Draft202012Validator(schema)
    return validators, per_kind


# --- the checks -------------------------------------------------------------------------------


def errors_of(validator, doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))


def schema_checks(docs, path, crds, provider, fail):
    for d in docs:
        name = f"{path}: {d.get('kind')}/{d.get('metadata', {}).get('name')}"
        key = (d.get("apiVersion"), d.get("kind"))
        if key in crds:
            for e in errors_of(crds[key], d):
                fail(f"{name}: {'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message} (CRD schema)")
            if d.get("kind") == "CredentialsRequest":
                spec = d.get("spec", {}).get("providerSpec")
                if spec is None:
                    fail(f"{name}: no providerSpec")
                elif spec.get("kind") not in provider:
                    fail(f"{name}: spec.providerSpec.kind {spec.get('kind')!r} is none of {sorted(provider)}")
                else:
                    for e in errors_of(provider[spec["kind"]], spec):
                        fail(f"{name}: spec.providerSpec.{'.'.join(map(str, e.absolute_path))}: {e.message} (Go types)")
            continue
        for version in K8S_VERSIONS:
            try:
                kv.validate(d, version, strict=True)
            except kv.ValidationError as e:
                fail(f"{name}: {'.'.join(map(str, e.path))}: {e.message} (Kubernetes {version} schema)")
            except kv.SchemaNotFoundError as e:
                fail(f"{name}: {e.message}; neither a built-in kind nor a vendored CRD")


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def mount_for(container, volume):
    return next((m for m in container.get("volumeMounts", []) if m["name"] == volume), None)


def wiring_checks(docs, path, version, fail, template):
    bundle = Path(path).name
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)

    def one(kind):
        found = by_kind.get(kind, [])
        if len(found) != 1:
            fail(f"{path}: expected one {kind}, found {len(found)}")
            return None
        return found[0]

    sa, deploy, service = one("ServiceAccount"), one("Deployment"), one("Service")
    if not (sa and deploy and service):
        return
    ns = sa["metadata"].get("namespace")
    namespaces = [d["metadata"]["name"] for d in by_kind.get("Namespace", [])]
    if namespaces != [ns]:
        fail(f"{path}: the Namespace object(s) {namespaces} are not the ServiceAccount's namespace {ns}")

    # Every namespaced object is in the one namespace, but the CredentialsRequest (CCO reads it
    # in its own namespace).
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for d in docs:
        want = CCO_NAMESPACE if d["kind"] == "CredentialsRequest" else (None if d["kind"] in cluster_scoped else ns)
        if d["metadata"].get("namespace") != want:
            fail(f"{path}: {d['kind']}/{d['metadata']['name']} is in namespace {d['metadata'].get('namespace')}, not {want}")

    # RBAC: bindings only to our ServiceAccount, no wildcard, nothing on Secrets.
    for b in by_kind.get("RoleBinding", []) + by_kind.get("ClusterRoleBinding", []):
        for s in b.get("subjects", []):
            if (s.get("kind"), s.get("name"), s.get("namespace")) != ("ServiceAccount", "tagwarden", ns):
                fail(f"{path}: {b['kind']} {b['metadata']['name']} binds {s}, not ServiceAccount {ns}/tagwarden")
    for r in by_kind.get("Role", []) + by_kind.get("ClusterRole", []):
        for rule in r.get("rules", []):
            if "*" in rule.get("verbs", []) + rule.get("resources", []) + rule.get("apiGroups", []):
                fail(f"{path}: {r['kind']} {r['metadata']['name']} uses a wildcard")
            if "secrets" in rule.get("resources", []):
                fail(f"{path}: {r['kind']} {r['metadata']['name']} grants access to Secrets (mounts need none)")

    pod = deploy["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = env_of(c)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    # The image: <registry>/<path>/tagwarden at Cargo.toml's version (optionally pinned by digest
    # too), or by a bare digest; the placeholder registry only in the committed templates.
    image = c["image"]
    repo = re.fullmatch(r"([a-z0-9.-]+(?::[0-9]+)?(?:/[a-z0-9._-]+)*/tagwarden)(?::([A-Za-z0-9._-]+))?(@sha256:[0-9a-f]{64})?", image)
    if not repo or not (repo.group(2) == version or (repo.group(2) is None and repo.group(3))):
        fail(f"{path}: image {image} is neither <registry>/tagwarden:{version} (Cargo.toml's version) nor pinned by digest")
    elif repo.group(1) == PLACEHOLDER_REPO and not template:
        fail(f"{path}: image {image} is the placeholder, which nobody can pull: build and push the image to your "
             f"registry and set it in your overlay's images: (name {PLACEHOLDER_REPO}, newName <registry>/tagwarden), "
             "deploy/kubernetes/README.md, \"The image\"")

    # The command line the Rust side implements.
    args = c.get("args", [])
    want = ["publish", "--from-cluster"]
    if bundle == "configmap-source.yaml":
        want += ["--configmap", "$(POD_NAMESPACE)/tagwarden-policy"]
    want += ["--watch", "--to", "$(TAGWARDEN_POLICY)", "--listen", "0.0.0.0:8080"]
    if args != want:
        fail(f"{path}: args {args}, expected {want}")
    for var in re.findall(r"\$\((\w+)\)", " ".join(args)):
        if var not in env:
            fail(f"{path}: args use $({var}) but the container defines no {var}")
    if env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.namespace":
        fail(f"{path}: POD_NAMESPACE must come from metadata.namespace")
    if pod.get("serviceAccountName") != "tagwarden":
        fail(f"{path}: the pod must run as the tagwarden ServiceAccount")

    # Restricted pod.
    sc = c.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False or sc.get("readOnlyRootFilesystem") is not True \
            or sc.get("capabilities", {}).get("drop") != ["ALL"] or pod.get("securityContext", {}).get("runAsNonRoot") is not True:
        fail(f"{path}: the container must be restricted (non-root, no escalation, read-only root, no capabilities)")

    # HTTP: the --listen port is the container's `http` port, the probes' and the Service's.
    ports = {p.get("name"): p for p in c.get("ports", [])}
    if ports.get("http", {}).get("containerPort") != 8080:
        fail(f"{path}: the container must expose 8080 (--listen) as the port named http")
    for probe, route in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c.get(probe, {}).get("httpGet", {})
        if (get.get("path"), get.get("port")) != (route, "http"):
            fail(f"{path}: {probe} must GET {route} on port http, not {get}")
    sport = next((p for p in service["spec"].get("ports", []) if p.get("name") == "http"), {})
    if sport.get("targetPort") != "http":
        fail(f"{path}: the Service's http port must target the container port http")
    pod_labels = deploy["spec"]["template"]["metadata"].get("labels", {})
    if not service["spec"].get("selector") or any(pod_labels.get(k) != v for k, v in service["spec"]["selector"].items()):
        fail(f"{path}: the Service's selector {service['spec'].get('selector')} does not select the pod {pod_labels}")
    for sm in by_kind.get("ServiceMonitor", []):
        sel = sm["spec"]["selector"].get("matchLabels", {})
        if not sel or any(service["metadata"].get("labels", {}).get(k) != v for k, v in sel.items()):
            fail(f"{path}: ServiceMonitor selects {sel}, which the Service's labels do not match")
        if [(e.get("port"), e.get("path", "/metrics")) for e in sm["spec"].get("endpoints", [])] != [("http", "/metrics")]:
            fail(f"{path}: ServiceMonitor must scrape /metrics on the port http")
    for pr in by_kind.get("PrometheusRule", []):
        for g in pr["spec"]["groups"]:
            for rule in g["rules"]:
                used = set(re.findall(r"\b(tagwarden_[a-z0-9_]+|up)\b", rule["expr"]))
                unknown = used - METRICS
                if unknown:
                    fail(f"{path}: alert {rule.get('alert')} uses {sorted(unknown)}, which tagwarden does not serve")
                if not used:
                    fail(f"{path}: alert {rule.get('alert')} uses none of tagwarden's metrics")
                for a in ("summary", "description"):
                    if not rule.get("annotations", {}).get(a):
                        fail(f"{path}: alert {rule.get('alert')} has no {a}")

    # ConfigMaps the pod reads: ours (in the bundle) or the admin's tagwarden-settings; none of them
    # carries a secret (a SAS, a key, a token) - those come only from Secrets.
    ours = {d["metadata"]["name"] for d in by_kind.get("ConfigMap", [])}
    for name, e in env.items():
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        if ref:
            if ref["name"] not in ours | {"tagwarden-settings"}:
                fail(f"{path}: env {name} reads ConfigMap {ref['name']}, which nothing creates")
            if re.search(r"sas|secret|token|password|key$|credential", ref["key"], re.I) and ref["key"] != "policy-location":
                fail(f"{path}: env {name} reads {ref['key']!r} from a ConfigMap; a secret belongs in a Secret")
        if name == "TAGWARDEN_BLOB_SAS" and e.get("valueFrom", {}).get("secretKeyRef", {}) != {"name": "tagwarden-blob-sas", "key": "sas", "optional": True}:
            fail(f"{path}: TAGWARDEN_BLOB_SAS must come from the optional Secret tagwarden-blob-sas, key sas")
        if "value" in e and re.search(r"sig=|SharedAccessSignature|aws_secret", str(e["value"])):
            fail(f"{path}: env {name} holds a secret literally")
    for v in volumes.values():
        if "configMap" in v and v["configMap"]["name"] not in ours:
            fail(f"{path}: volume {v['name']} mounts ConfigMap {v['configMap']['name']}, which nothing creates")

    crs = by_kind.get("CredentialsRequest", [])
    is_openshift = bundle.startswith("openshift")
    if not is_openshift:
        if crs or by_kind.get("ClusterRole") or "TAGWARDEN_CA_BUNDLE" in env:
            fail(f"{path}: a non-OpenShift bundle has a CredentialsRequest, a ClusterRole or the injected CA bundle")
        roles = [r["metadata"]["name"] for r in by_kind.get("Role", [])]
        if sorted(roles) != ["tagwarden-policy-reader", "tagwarden-status"]:
            fail(f"{path}: Roles {roles}")
        return

    # OpenShift: the Infrastructure reader, the injected CA bundle, the CredentialsRequest.
    if [r["metadata"]["name"] for r in by_kind.get("ClusterRole", [])] != ["tagwarden-infrastructure-reader"]:
        fail(f"{path}: expected the one ClusterRole tagwarden-infrastructure-reader")
    ca = next((d for d in by_kind.get("ConfigMap", []) if d["metadata"]["labels"].get("config.openshift.io/inject-trusted-cabundle") == "true"), None)
    vol = next((v for v in volumes.values() if ca and v.get("configMap", {}).get("name") == ca["metadata"]["name"]), None)
    if not ca or not vol:
        fail(f"{path}: no ConfigMap labelled config.openshift.io/inject-trusted-cabundle mounted")
    else:
        item = next((i for i in vol["configMap"].get("items", []) if i["key"] == "ca-bundle.crt"), None)
        m = mount_for(c, vol["name"])
        if not item or not m or vol["configMap"].get("optional"):
            fail(f"{path}: the trusted CA volume must mount the key ca-bundle.crt, not optionally")
        elif env.get("TAGWARDEN_CA_BUNDLE", {}).get("value") != f"{m['mountPath']}/{item['path']}":
            fail(f"{path}: TAGWARDEN_CA_BUNDLE is {env.get('TAGWARDEN_CA_BUNDLE')}, not {m['mountPath']}/{item['path']}")

    if len(crs) != 1:
        fail(f"{path}: expected one CredentialsRequest, found {len(crs)}")
        return
    cr = crs[0]["spec"]
    if cr.get("serviceAccountNames") != ["tagwarden"] or cr["secretRef"].get("namespace") != ns:
        fail(f"{path}: the CredentialsRequest must name ServiceAccount tagwarden and a Secret in {ns}")
    secret = cr["secretRef"]["name"]
    # The projected token the Secret's token file names: audience openshift (the audience of the
    # IAM OIDC provider ccoctl creates, and of the federated credential it puts on the identity).
    token = next(((n, s["serviceAccountToken"]) for n, v in volumes.items()
                  for s in v.get("projected", {}).get("sources", []) if "serviceAccountToken" in s), None)
    if not token:
        fail(f"{path}: no projected ServiceAccount token volume")
        return
    m = mount_for(c, token[0])
    if not m or f"{m['mountPath']}/{token[1]['path']}" != cr.get("cloudTokenPath"):
        fail(f"{path}: the projected token is not mounted at the CredentialsRequest's cloudTokenPath {cr.get('cloudTokenPath')}")
    if token[1].get("audience") != "openshift":
        fail(f"{path}: the projected token's audience must be openshift (ccoctl's), not {token[1].get('audience')}")
    kind = cr["providerSpec"]["kind"]
    if kind == "AWSProviderSpec":
        vol = next((v for v in volumes.values() if v.get("secret", {}).get("secretName") == secret), None)
        item = vol and next((i for i in vol["secret"].get("items", []) if i["key"] == "credentials"), None)
        m = vol and mount_for(c, vol["name"])
        if not item or not m:
            fail(f"{path}: the pod must mount the key credentials of Secret {secret}")
        elif env.get("AWS_SHARED_CREDENTIALS_FILE", {}).get("value") != f"{m['mountPath']}/{item['path']}":
            fail(f"{path}: AWS_SHARED_CREDENTIALS_FILE must name {m['mountPath']}/{item['path']}")
        actions = sorted(a for s in cr["providerSpec"].get("statementEntries", []) for a in s.get("action", []))
        if actions != ["s3:GetObject", "s3:ListBucket", "s3:PutObject"]:
            fail(f"{path}: the CredentialsRequest grants {actions}, not what publish and the status mirror call")
        # One publisher reaches its own folder only: objects under <bucket>/<folder>/
        # (one or more segments: tagwarden, clusters/<infraID>, accounts/<account>/<infraID>),
        # listings inside that folder, nothing on "*". combinations.py checks the grant
        # against each documented layout's keys.
        for s in cr["providerSpec"].get("statementEntries", []):
            res, cond = s.get("resource", ""), s.get("policyCondition") or {}
            if s.get("action") == ["s3:ListBucket"]:
                folder = cond.get("StringLike", {}).get("s3:prefix", "")
                if not re.fullmatch(r"arn:aws[a-z-]*:s3:::[a-z0-9.-]+", res) or not re.fullmatch(r"([^/*]+/)+\*", folder):
                    fail(f"{path}: s3:ListBucket on {res!r} with {cond}: the policy bucket, only for s3:prefix StringLike <folder>/*")
            elif not re.fullmatch(r"arn:aws[a-z-]*:s3:::[a-z0-9.-]+/([^/*]+/)+\*", res):
                fail(f"{path}: {s.get('action')} on {res!r}: only the publisher's folder arn:aws:s3:::<bucket>/<folder>/*")
    elif kind == "AzureProviderSpec":
        for var, key in (("AZURE_CLIENT_ID", "azure_client_id"), ("AZURE_TENANT_ID", "azure_tenant_id"),
                         ("AZURE_FEDERATED_TOKEN_FILE", "azure_federated_token_file")):
            ref = env.get(var, {}).get("valueFrom", {}).get("secretKeyRef", {})
            if (ref.get("name"), ref.get("key")) != (secret, key):
                fail(f"{path}: {var} must come from Secret {secret}, key {key} (what ccoctl writes)")
        if "TAGWARDEN_BLOB_SAS" not in env:
            fail(f"{path}: the Azure bundle must offer TAGWARDEN_BLOB_SAS from a Secret")
    else:
        fail(f"{path}: providerSpec kind {kind}")


def rules_file(docs):
    groups = [g for d in docs if d["kind"] == "PrometheusRule" for g in d["spec"]["groups"]]
    return yaml.safe_dump({"groups": groups}, sort_keys=False) if groups else None


def version_of_cargo():
    return re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)


def run(bundles, crds, provider, version, template):
    """{path: docs} -> list of failures. template: the committed bundles, whose image is the
    placeholder an install replaces."""
    failures = []
    for path, docs in bundles.items():
        schema_checks(docs, path, crds, provider, failures.append)
        wiring_checks(docs, path, version, failures.append, template)
    return failures


def self_test(bundles, crds, provider, version, template):
    """Break copies of the bundles in known ways; each break must be reported, and for its reason.
    Returns how many breaks were tried and the ones that went unnoticed."""
    def first(b, bundle, kind):
        return next(d for d in b[bundle] if d["kind"] == kind)

    def container(b, bundle):
        return first(b, bundle, "Deployment")["spec"]["template"]["spec"]["containers"][0]

    def cr(b, bundle):
        return first(b, bundle, "CredentialsRequest")

    def rules(b):
        return first(b, "openshift.yaml", "PrometheusRule")["spec"]["groups"]

    def token(b, bundle):
        volumes = first(b, bundle, "Deployment")["spec"]["template"]["spec"]["volumes"]
        return next(s for v in volumes for s in v.get("projected", {}).get("sources", []))["serviceAccountToken"]

    def rename(d, old, new):
        d[new] = d.pop(old)

    # (what, a phrase the report must contain, the break)
    breaks = [
        ("unknown field in a Deployment", "'imagePullPolicyy' was unexpected",
         lambda b: container(b, "openshift.yaml").__setitem__("imagePullPolicyy", "Always")),
        ("wrong type in a Service", "'eighty' is not of type 'integer'",
         lambda b: first(b, "configmap-source.yaml", "Service")["spec"]["ports"][0].__setitem__("port", "eighty")),
        ("unknown kind", "neither a built-in kind nor a vendored CRD",
         lambda b: first(b, "configmap-source.yaml", "ConfigMap").__setitem__("kind", "ConfigMapp")),
        ("unknown field in a ServiceMonitor endpoint", "'intervall' was unexpected",
         lambda b: first(b, "openshift.yaml", "ServiceMonitor")["spec"]["endpoints"][0].__setitem__("intervall", "30s")),
        ("bad duration in a PrometheusRule", "'15 minutes' does not match",
         lambda b: rules(b)[0]["rules"][0].__setitem__("for", "15 minutes")),
        ("duplicate rule group", "in a list of type map",
         lambda b: rules(b).append(copy.deepcopy(rules(b)[0]))),
        ("unknown field in a CredentialsRequest spec", "'secretRefs' was unexpected",
         lambda b: cr(b, "openshift.yaml")["spec"].__setitem__("secretRefs", {})),
        ("unknown metadata field in a custom resource", "'labelz' was unexpected",
         lambda b: cr(b, "openshift.yaml")["metadata"].__setitem__("labelz", {})),
        ("misspelt AWSProviderSpec field", "'statmentEntries' was unexpected",
         lambda b: rename(cr(b, "openshift.yaml")["spec"]["providerSpec"], "statementEntries", "statmentEntries")),
        ("misspelt AzureProviderSpec field", "'dataPermission' was unexpected",
         lambda b: rename(cr(b, "openshift-azure.yaml")["spec"]["providerSpec"], "dataPermissions", "dataPermission")),
        ("IAM action not service:Action", "does not match",
         lambda b: cr(b, "openshift.yaml")["spec"]["providerSpec"]["statementEntries"][0]["action"].append("GetObject")),
        ("publisher grant on every bucket", "only the publisher's folder",
         lambda b: cr(b, "openshift.yaml")["spec"]["providerSpec"]["statementEntries"][0].__setitem__("resource", "*")),
        ("publisher listing every folder", "only for s3:prefix",
         lambda b: cr(b, "openshift.yaml")["spec"]["providerSpec"]["statementEntries"][1].pop("policyCondition")),
        ("CredentialsRequest moved out of CCO's namespace", "not openshift-cloud-credential-operator",
         lambda b: cr(b, "openshift.yaml")["metadata"].__setitem__("namespace", "tagwarden")),
        ("Secret in another namespace", "a Secret in tagwarden",
         lambda b: cr(b, "openshift-azure.yaml")["spec"]["secretRef"].__setitem__("namespace", "default")),
        ("token path the Secret does not name", "cloudTokenPath",
         lambda b: cr(b, "openshift.yaml")["spec"].__setitem__("cloudTokenPath", "/var/run/secrets/kubernetes.io/serviceaccount/token")),
        ("Azure token audience", "audience must be openshift",
         lambda b: token(b, "openshift-azure.yaml").__setitem__("audience", "api://AzureADTokenExchange")),
        ("Azure client id from another key", "AZURE_CLIENT_ID must come from",
         lambda b: next(e for e in container(b, "openshift-azure.yaml")["env"] if e["name"] == "AZURE_CLIENT_ID")
         ["valueFrom"]["secretKeyRef"].__setitem__("key", "client_id")),
        ("SAS in a ConfigMap", "a secret belongs in a Secret",
         lambda b: container(b, "openshift-azure.yaml")["env"].append(
             {"name": "TAGWARDEN_BLOB_SAS2", "valueFrom": {"configMapKeyRef": {"name": "tagwarden-settings", "key": "blob-sas"}}})),
        ("CA bundle path not the mount", "TAGWARDEN_CA_BUNDLE is",
         lambda b: next(e for e in container(b, "openshift.yaml")["env"] if e["name"] == "TAGWARDEN_CA_BUNDLE").__setitem__("value", "/etc/ssl/ca.pem")),
        ("probe on the wrong route", "readinessProbe must GET /readyz",
         lambda b: container(b, "configmap-source.yaml")["readinessProbe"]["httpGet"].__setitem__("path", "/healthz")),
        ("RBAC wildcard", "uses a wildcard",
         lambda b: first(b, "configmap-source.yaml", "Role")["rules"][0].__setitem__("verbs", ["*"])),
        ("binding to another namespace's ServiceAccount", "not ServiceAccount tagwarden/tagwarden",
         lambda b: first(b, "openshift.yaml", "ClusterRoleBinding")["subjects"][0].__setitem__("namespace", "default")),
        ("alert on a metric tagwarden does not serve", "which tagwarden does not serve",
         lambda b: rules(b)[0]["rules"][1].__setitem__("expr", "tagwarden_publish_errors_total > 0")),
        ("image of another version", "Cargo.toml's version",
         lambda b: container(b, "openshift.yaml").__setitem__("image", f"{IMAGE}:0.0.0-other")),
    ]
    missed = []
    for what, phrase, breaker in breaks:
        broken = copy.deepcopy(bundles)
        breaker({Path(p).name: docs for p, docs in broken.items()})
        reported = run(broken, crds, provider, version, template)
        if not any(phrase in f for f in reported):
            missed.append(f"{what} (reported instead: {reported[:2]})")
    # The placeholder image outside the templates (an install that skipped the setting).
    if template:
        reported = run(bundles, crds, provider, version, False)
        if not any("is the placeholder, which nobody can pull" in f for f in reported):
            missed.append(f"the placeholder image in an install (reported instead: {reported[:2]})")
    return len(breaks) + (1 if template else 0), missed


def main(argv):
    do_self_test = "--self-test" in argv
    template = "--template" in argv
    paths = [a for a in argv if a not in ("--self-test", "--template")]
    bundles = {p: [d for d in yaml.safe_load_all(open(p)) if d] for p in paths}
    crds, provider = load_crd_validators()
    version = version_of_cargo()
    failures = run(bundles, crds, provider, version, template)
    for f in failures:
        print("FAIL", f)
    if failures:
        return 1
    objects = sum(len(d) for d in bundles.values())
    print(f"schemas: {objects} objects in {len(paths)} bundles valid (built-in kinds against Kubernetes "
          f"{' and '.join(K8S_VERSIONS)}, strict; {len(CRD_FILES)} CRD kinds against their vendored CRDs, "
          "strict; providerSpec against the Go types)")
    images = sorted({d["spec"]["template"]["spec"]["containers"][0]["image"] for docs in bundles.values() for d in docs if d.get("kind") == "Deployment"})
    print(f"wiring: image {', '.join(images)}{' (the templates: placeholder allowed)' if template else ''}, namespaces, Secret/token paths, ports, probes, ServiceMonitor, "
          "restricted pod, least-privilege RBAC, no secret in a ConfigMap")
    rules_dir = os.environ.get("RULES_DIR")
    if rules_dir:
        for p, docs in bundles.items():
            text = rules_file(docs)
            if text:
                (Path(rules_dir) / f"{Path(p).stem}.rules.yaml").write_text(text)
    if do_self_test:
        count, missed = self_test(bundles, crds, provider, version, template)
        for m in missed:
            print("FAIL self-test: this break went unreported:", m)
        if missed:
            return 1
        print(f"self-test: each of {count} deliberate breaks was reported")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
