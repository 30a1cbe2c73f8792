#!/usr/bin/env python3
"""Structural facts of infra/gcp and infra/examples/gcp-basic, read with python-hcl2 (no google
provider here, so no `terraform validate`; the provider schema is check_provider_schema.py's).

What the design promises and a schema cannot see: the audit-log sink at each scope kind with the
filter on Admin Activity entries of every enforced type, its writer identity allowed to publish on
the topic and nothing more, the push subscription's OIDC identity, dead-lettering, retries and ack
deadline, the internal-only service scaled from zero as its own account, audit as the default mode,
the policy bucket's protections and each publisher's object-prefix condition, the custom role with
no delete permission granted at the scope only, the sweep schedule's message, and the custom metrics
named as the core's one metrics table names them.

usage: check_gcp_hcl.py ROOT      Prints PASS/FAIL per check; exit 1 on any FAIL.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import hcl2

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
MODULE = ROOT / "infra/gcp"
EXAMPLE = ROOT / "infra/examples/gcp-basic"

FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    if not ok:
        FAILED.append(name)


def unquote(s):
    return s[1:-1] if isinstance(s, str) and len(s) >= 2 and s[0] == s[-1] == '"' else s


def clean(v):
    """A parsed value without python-hcl2's quotes and block markers."""
    if isinstance(v, dict):
        return {unquote(k): clean(x) for k, x in v.items() if k not in ("__is_block__", "__comments__")}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return unquote(v)


def load(d: Path) -> dict:
    """resources, data, variables, locals, outputs and terraform blocks of a directory's *.tf."""
    out = {"resource": {}, "data": {}, "variable": {}, "locals": {}, "output": {}, "terraform": [], "module": {}}
    for f in sorted(d.glob("*.tf")):
        with f.open() as fh:
            doc = clean(hcl2.load(fh))
        for kind in ("resource", "data"):
            for block in doc.get(kind, []):
                for t, named in block.items():
                    for n, body in named.items():
                        out[kind][(t, n)] = body
        for block in doc.get("variable", []):
            out["variable"].update(block)
        for block in doc.get("locals", []):
            out["locals"].update(block)
        for block in doc.get("output", []):
            out["output"].update(block)
        for block in doc.get("module", []):
            out["module"].update(block)
        out["terraform"] += doc.get("terraform", [])
    return out


def first(v):
    return v[0] if isinstance(v, list) and v else (v or {})


def constraint(doc: dict) -> str | None:
    for t in doc["terraform"]:
        for rp in t.get("required_providers", []):
            if "google" in rp:
                return rp["google"].get("version")
    return None


def core_metric_names() -> list[str]:
    """Every metric name of the core's one metrics table (`metric("Name", unit, meaning)`), wherever the
    report module's files are (report.rs, or report/*.rs)."""
    src = ROOT / "crates/core/src"
    files = sorted([src / "report.rs"] if (src / "report.rs").exists() else []) + sorted((src / "report").rglob("*.rs"))
    names: list[str] = []
    for f in files:
        names += re.findall(r'metric\(\s*"([A-Za-z]+)",', f.read_text())
    return names


def main() -> int:
    m = load(MODULE)
    ex = load(EXAMPLE)
    R, L, V = m["resource"], m["locals"], m["variable"]

    # --- versions ------------------------------------------------------------------------------
    c = constraint(m)
    check("module and example declare the same google constraint", c is not None and c == constraint(ex), f"{c} / {constraint(ex)}")

    # --- variables -----------------------------------------------------------------------------
    check("mode defaults to audit, validated audit|enforce (the AWS and Azure name)",
          V.get("mode", {}).get("default") == "audit" and 'contains(["audit", "enforce"], var.mode)' in str(V.get("mode")))
    check("image has no default and is validated as an Artifact Registry or Container Registry reference",
          "default" not in V.get("image", {}) and "docker\\\\.pkg\\\\.dev" in first(V["image"].get("validation")).get("condition", "")
          and "gcr\\\\.io" in first(V["image"].get("validation")).get("condition", ""))
    check("scope is {type, id}, its type and its id validated",
          V.get("scope", {}).get("type") == "${object({type = string, id = string})}" and len(V["scope"].get("validation", [])) == 2,
          str(V.get("scope", {}).get("type")))

    # --- sink and filter -----------------------------------------------------------------------
    f = L.get("audit_filter", "")
    check("filter: Admin Activity audit logs (logName ...cloudaudit.googleapis.com%2Factivity), AuditLog payloads",
          'logName:\\"cloudaudit.googleapis.com%2Factivity\\"' in f and "google.cloud.audit.AuditLog" in f, f[:200])
    collections = L.get("compute_collections", [])
    # The Compute collections whose setLabels tagwarden calls: the core's one table of Google Cloud
    # types (crates/core/src/gcp/resources.rs), by the collection its audit-log methods name.
    table = (ROOT / "crates/core/src/gcp/resources.rs").read_text()
    labelable = set(re.findall(r'compute\(\s*"[^"]+",\s*"[^"]+",\s*"([^"]+)",\s*\w+,\s*ComputeSetLabels', table))
    check("filter: every Compute collection the core's type table writes labels on (%s)" % ", ".join(sorted(labelable)),
          len(labelable) >= 7 and set(collections) == labelable
          and "local.compute_collections" in f and set(L.get("compute_methods", [])) == {"insert", "setLabels"}, str(collections))
    for service, methods in [("storage.googleapis.com", ["storage.buckets.create", "storage.buckets.update"]),
                             ("dns.googleapis.com", ["dns.managedZones.create", "dns.managedZones.patch"]),
                             ("cloudresourcemanager.googleapis.com", ["CreateTagBinding", "DeleteTagBinding"])]:
        check(f"filter: {service} {', '.join(methods)}", service in f and all(x in f for x in methods))
    check("filter: long-running operations once (their last entry), failed calls left out, the function's own writes left out",
          "operation.last=true" in f and "protoPayload.status.code" in f and "protoPayload.authenticationInfo.principalEmail" in f)
    sinks = {t: b for (t, n), b in R.items() if t.startswith("google_logging_") and t.endswith("_sink")}
    check("one sink per scope kind, created by count on scope.type",
          set(sinks) == {"google_logging_organization_sink", "google_logging_folder_sink", "google_logging_project_sink"}
          and all("var.scope.type" in str(b.get("count")) for b in sinks.values()), str(sinks.keys()))
    check("organization and folder sinks are aggregated (include_children)",
          all(sinks[t].get("include_children") is True for t in ("google_logging_organization_sink", "google_logging_folder_sink")))
    check("every sink routes local.audit_filter to the events topic",
          all(b.get("filter") == "${local.audit_filter}" and b.get("destination") == "${local.sink_destination}" for b in sinks.values())
          and "google_pubsub_topic.events.id" in L.get("sink_destination", ""))
    pub = R.get(("google_pubsub_topic_iam_member", "sink_publisher"), {})
    check("the sink's writer identity may publish on the events topic (roles/pubsub.publisher), nothing more",
          pub.get("role") == "roles/pubsub.publisher" and pub.get("member") == "${local.sink_writer_identity}"
          and "google_pubsub_topic.events" in pub.get("topic", "") and all(f"{t}.events[*].writer_identity" in str(L.get("sink_writer_identity")) for t in sinks))

    # --- push subscription ---------------------------------------------------------------------
    sub = R.get(("google_pubsub_subscription", "events"), {})
    push = first(sub.get("push_config"))
    oidc = first(push.get("oidc_token"))
    check("push to the Cloud Run service with an OIDC token of the invoker account",
          "google_cloud_run_v2_service.this.uri" in push.get("push_endpoint", "")
          and oidc.get("service_account_email") == "${google_service_account.invoker.email}")
    dl = first(sub.get("dead_letter_policy"))
    check("dead-letter topic with max_delivery_attempts, retry policy, ack deadline",
          dl.get("dead_letter_topic") == "${google_pubsub_topic.dead_letters.id}" and dl.get("max_delivery_attempts") == "${var.max_delivery_attempts}"
          and first(sub.get("retry_policy")).get("minimum_backoff") and sub.get("ack_deadline_seconds") == "${var.ack_deadline_seconds}")
    check("the Pub/Sub service agent may publish dead letters and acknowledge them on the subscription",
          R.get(("google_pubsub_topic_iam_member", "dead_letter_publisher"), {}).get("member") == "${local.pubsub_agent}"
          and R.get(("google_pubsub_subscription_iam_member", "dead_letter_subscriber"), {}).get("role") == "roles/pubsub.subscriber")
    inv = R.get(("google_cloud_run_v2_service_iam_member", "invoker"), {})
    check("only the invoker account gets roles/run.invoker on the service",
          inv.get("role") == "roles/run.invoker" and inv.get("member") == "${google_service_account.invoker.member}"
          and [k for (t, k) in R if t.endswith("_iam_member") and "run.invoker" in str(R[(t, k)].get("role"))] == ["invoker"])

    # --- Cloud Run -----------------------------------------------------------------------------
    run = R.get(("google_cloud_run_v2_service", "this"), {})
    tpl = first(run.get("template"))
    scaling = first(tpl.get("scaling"))
    container = first(tpl.get("containers"))
    check("Cloud Run: ingress internal only, min 0 instances, its own service account, image from var.image",
          run.get("ingress") == "INGRESS_TRAFFIC_INTERNAL_ONLY" and scaling.get("min_instance_count") == 0
          and tpl.get("service_account") == "${google_service_account.function.email}" and container.get("image") == "${var.image}")
    env = L.get("environment", {})
    check("environment: TAGWARDEN_POLICY (the bucket), TAGWARDEN_MODE (var.mode), clusters, sweep scope, self principal",
          env.get("TAGWARDEN_POLICY") == "${local.policy_url}" and env.get("TAGWARDEN_MODE") == "${var.mode}"
          and "TAGWARDEN_CLUSTERS" in env and env.get("TAGWARDEN_SWEEP_SCOPES") == "${local.scope_resource}"
          and env.get("TAGWARDEN_SELF_PRINCIPAL") == "${google_service_account.function.email}"
          and "local.environment" in str(container.get("dynamic")), str(env))

    # --- policy bucket -------------------------------------------------------------------------
    b = R.get(("google_storage_bucket", "policy"), {})
    check("policy bucket: uniform bucket-level access, public access prevention enforced, versioning",
          b.get("uniform_bucket_level_access") is True and b.get("public_access_prevention") == "enforced"
          and first(b.get("versioning")).get("enabled") is True)
    p = R.get(("google_storage_bucket_iam_member", "publisher"), {})
    cond = first(p.get("condition"))
    check("each publisher's write is conditioned on its cluster's object prefix",
          p.get("for_each") == "${local.publisher_grants}" and
          cond.get("expression") == 'resource.name.startsWith(\\"${local.object_name_prefix}${var.policy_prefix}${each.value.id}/\\")'
          and L.get("object_name_prefix") == "projects/_/buckets/${local.policy_bucket_name}/objects/", str(cond))
    ow = R.get(("google_project_iam_custom_role", "object_writer"), {})
    conditioned = all(first(R[k].get("condition")).get("expression") for k in R
                      if k[0] == "google_storage_bucket_iam_member" and R[k].get("role") == "${google_project_iam_custom_role.object_writer.name}")
    check("the object writer role (create, read, replace objects) is granted on the bucket under a condition only",
          sorted(ow.get("permissions", [])) == ["storage.objects.create", "storage.objects.delete", "storage.objects.get"] and conditioned)

    # --- the function's custom role ------------------------------------------------------------
    perms_text = str(L.get("function_permissions"))
    must = ["storage.buckets.get", "storage.buckets.update", "dns.managedZones.get", "dns.managedZones.update",
            "resourcemanager.tagValues.get", "resourcemanager.tagValues.list", "cloudasset.assets.searchAllResources"]
    check("custom role: compute <type>.get/list/setLabels for every enforced type, buckets, zones, tags in effect, asset search",
          all(x in perms_text for x in must) and all(x in perms_text for x in ("compute.${c}.get", "compute.${c}.list", "compute.${c}.setLabels"))
          and all(x in perms_text for x in ("${c}.listEffectiveTags", "${c}.createTagBinding", "${c}.deleteTagBinding", '["storage.buckets"]')),
          perms_text)
    check("custom role: no delete permission but a tag binding's resource end (no resource or label is ever deleted)",
          not re.search(r"delete|Delete|remove|destroy", perms_text.replace("${c}.deleteTagBinding", "")), perms_text)
    tag_user = R.get(("google_tags_tag_key_iam_member", "function"), {})
    check("the value end of tag bindings (Tag User) is granted on var.tag_keys only, to the function's account",
          tag_user.get("for_each") == "${toset(var.tag_keys)}" and tag_user.get("tag_key") == "${each.value}"
          and tag_user.get("role") == "roles/resourcemanager.tagUser"
          and tag_user.get("member") == "${google_service_account.function.member}", str(tag_user))
    roles = [(t, n) for (t, n) in R if t in ("google_organization_iam_custom_role", "google_project_iam_custom_role") and n == "function"]
    check("the role is defined on the organization (organization, folder scope) or the scope's project",
          len(roles) == 2 and all(R[r].get("permissions") == "${local.function_permissions}" for r in roles)
          and R[("google_organization_iam_custom_role", "function")].get("org_id") == "${local.role_organization}"
          and R[("google_project_iam_custom_role", "function")].get("project") == "${var.scope.id}")
    grants = {t: R[(t, "function")] for t in ("google_organization_iam_member", "google_folder_iam_member", "google_project_iam_member") if (t, "function") in R}
    check("granted at the scope only (one grant per scope kind, by count), to the function's account",
          len(grants) == 3 and all(g.get("role") == "${local.function_role}" and g.get("member") == "${google_service_account.function.member}"
                                   and "var.scope.type" in str(g.get("count")) for g in grants.values()))

    # --- sweep schedule ------------------------------------------------------------------------
    job = R.get(("google_cloud_scheduler_job", "sweep"), {})
    tgt = first(job.get("pubsub_target"))
    check("Cloud Scheduler publishes the sweep message (attribute tagwarden=sweep) to the events topic",
          tgt.get("topic_name") == "${google_pubsub_topic.events.id}" and tgt.get("attributes") == {"tagwarden": "sweep"}
          and tgt.get("data") == "${base64encode(local.sweep_message)}" and job.get("schedule") == "${var.sweep_schedule}")

    # --- monitoring ----------------------------------------------------------------------------
    core = core_metric_names()
    ours = list(L.get("count_metrics", {})) + list(L.get("distribution_metrics", {}))
    check("custom metrics: every name of the core's metrics table but CloudWatch's CallsPerCorrection, no other",
          len(core) > 10 and sorted(ours) == sorted(n for n in core if n != "CallsPerCorrection"),
          f"core {sorted(core)} / module {sorted(ours)}")
    check("metric types custom.googleapis.com/tagwarden/<name>", L.get("metric_prefix") == "custom.googleapis.com/tagwarden/")
    check("custom metric labels: the other clouds' dimensions as the function writes them (cloud, resource_type, infra_id)",
          set(L.get("metric_labels", {})) == {"cloud", "resource_type", "infra_id"}, str(L.get("metric_labels")))
    descriptor = R.get(("google_monitoring_metric_descriptor", "this"), {})
    check("every metric declared (one descriptor per name of count_metrics and distribution_metrics)",
          descriptor.get("for_each") == "${local.metrics}"
          and all(f"local.{k}" in str(L.get("metrics")) for k in ("count_metrics", "distribution_metrics")), str(L.get("metrics")))
    platform = L.get("platform_alert_policies", {})
    check("alert policies on WriteFailures, Contested, PolicyRejected, ListingFailures, ComplianceLag, dead letters, 5xx",
          set(L.get("count_alerts", {})) == {"WriteFailures", "Contested", "PolicyRejected", "ListingFailures"}
          and "local.count_alerts" in str(L.get("count_alert_policies"))
          and set(platform) == {"compliance_lag", "dead_letters", "function_errors"}
          and 'ComplianceLag' in platform["compliance_lag"].get("filter", "")
          and "dead_letter_message_count" in platform["dead_letters"].get("filter", "")
          and "5xx" in platform["function_errors"].get("filter", "")
          and all(f"local.{k}" in str(L.get("alerts")) for k in ("count_alert_policies", "platform_alert_policies"))
          and R.get(("google_monitoring_alert_policy", "this"), {}).get("for_each") == "${local.alerts}", str(platform.keys()))
    check("a dashboard over every metric",
          ("google_monitoring_dashboard", "this") in R and "local.chart_tiles" in str(L.get("dashboard"))
          and "local.metric_charts" in str(L.get("chart_tiles"))
          and all(f"keys(local.{k})" in str(L.get("metric_charts")) for k in ("count_metrics", "distribution_metrics")))

    # --- example -------------------------------------------------------------------------------
    mod = ex["module"].get("tagwarden", {})
    check("example gcp-basic: the module at project scope (the example's project), mode passed through",
          mod.get("source") == "../../gcp" and mod.get("scope") == {"type": "project", "id": "${var.project_id}"}
          and mod.get("mode") == "${var.mode}", str(mod))
    check("example gcp-basic: mode defaults to audit", ex["variable"].get("mode", {}).get("default") == "audit")

    print(f"{'FAIL' if FAILED else 'PASS'}: {len(FAILED)} failed checks" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
