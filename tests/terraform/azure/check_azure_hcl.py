#!/usr/bin/env python3
"""Structural checks of infra/azure and infra/examples/azure-basic without the azurerm provider.

There is no azurerm provider offline, so `terraform init/validate` cannot run. This parses every .tf
file with python-hcl2 (pinned in scripts/install-tools, own venv) and asserts the facts the design
depends on: typed and described variables, the required resources, the Event Grid filters and
dead-lettering, the role assignments (roles, scopes, ABAC condition), the handler's app-setting
contract, the workbook metrics and the alerts. Prints PASS/FAIL per check; exit 1 on any FAIL.

Usage: check_azure_hcl.py [repo root]   (default: the current directory)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import hcl2

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
MODULE = ROOT / "infra/azure"
EXAMPLE = ROOT / "infra/examples/azure-basic"

CONTRACT_KEYS = [
    "TAGWARDEN_POLICY", "TAGWARDEN_ARM_ENDPOINT", "POLICY_TTL", "TAGWARDEN_SELF_PRINCIPAL_ID",
    "TAGWARDEN_SELF_CLIENT_ID", "TAGWARDEN_METRICS_RESOURCE_ID", "TAGWARDEN_METRICS_REGION",
    "TAGWARDEN_SWEEP_SCOPES", "RUST_LOG",
]
METRICS = [
    "EventsReceived", "EventsIgnored", "ResourcesEvaluated", "DriftDetected", "TagsWritten",
    "WriteFailures", "TagLimitExceeded", "PolicyRejected", "Conflicts", "ReconcileLatency",
]
ROLE_IDS = {
    "Tag Contributor": "4a9ae827-6dc8-4573-8ac7-8239d42aa03f",
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
}
FORBIDDEN_ROLES = {
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
}
# azurerm resource types without a `tags` argument.
UNTAGGABLE = {
    "azurerm_role_assignment", "azurerm_storage_container", "azurerm_storage_blob",
    "azurerm_storage_management_policy", "azurerm_eventgrid_system_topic_event_subscription",
}

results: list[tuple[bool, str, str]] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    results.append((bool(ok), name, detail))


# --- parsing and normalisation ----------------------------------------------------------------------


def unquote(v):
    """python-hcl2 8 keeps string literals quoted ('"x"') and expressions as '${...}'."""
    if isinstance(v, str) and len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        return v[1:-1]
    return v


def norm(v):
    if isinstance(v, dict):
        return {unquote(k): norm(x) for k, x in v.items() if k not in ("__comments__", "__is_block__")}
    if isinstance(v, list):
        return [norm(x) for x in v]
    return unquote(v)


def parse_dir(d: Path) -> tuple[dict, dict]:
    """Returns ({file: parsed}, merged) where merged has resource/data/variable/output/locals/module."""
    files, merged = {}, {"resource": {}, "data": {}, "variable": {}, "output": {}, "locals": {}, "module": {}, "provider": {}}
    for f in sorted(d.glob("*.tf")):
        try:
            with f.open() as fh:
                doc = norm(hcl2.load(fh))
        except Exception as e:  # noqa: BLE001 - report any parser error as a failed check
            check(f"parse {f.relative_to(ROOT)}", False, f"{type(e).__name__}: {e}")
            continue
        check(f"parse {f.relative_to(ROOT)}", True)
        files[f.name] = doc
        for block in doc.get("resource", []):
            for rtype, named in block.items():
                for rname, body in named.items():
                    merged["resource"][(rtype, rname)] = body
        for block in doc.get("data", []):
            for dtype, named in block.items():
                for dname, body in named.items():
                    merged["data"][(dtype, dname)] = body
        for kind in ("variable", "output", "module", "provider"):
            for block in doc.get(kind, []):
                merged[kind].update(block)
        for block in doc.get("locals", []):
            merged["locals"].update(block)
    return files, merged


def first(block):
    """Nested blocks parse as lists of dicts."""
    if isinstance(block, list):
        return block[0] if block else {}
    return block or {}


def text_of(d: Path) -> str:
    return "\n".join(f.read_text() for f in sorted(d.glob("*.tf")))


LOCAL_REF = re.compile(r"^\$\{local\.([A-Za-z0-9_]+)((?:\.[A-Za-z0-9_]+)*)\}$")


def resolve(v, locals_: dict, depth: int = 0):
    """Follow a bare `${local.x.y}` reference through the module's locals (nothing fancier)."""
    if depth > 10 or not isinstance(v, str):
        return v
    m = LOCAL_REF.match(v)
    if not m or m.group(1) not in locals_:
        return v
    out = locals_[m.group(1)]
    for part in [p for p in m.group(2).split(".") if p]:
        if isinstance(out, dict) and part in out:
            out = out[part]
        else:
            return v
    return resolve(out, locals_, depth + 1)


def var_default(variables: dict, name: str):
    return variables.get(name, {}).get("default")


# --- checks -----------------------------------------------------------------------------------------


def check_variables(label: str, variables: dict) -> None:
    missing = [n for n, b in variables.items() if "type" not in b or not str(b.get("description", "")).strip()]
    check(f"{label}: every variable has type and description ({len(variables)} variables)", not missing, f"missing: {missing}")


def main() -> int:
    _, mod = parse_dir(MODULE)
    _, ex = parse_dir(EXAMPLE)
    R, L, V = mod["resource"], mod["locals"], mod["variable"]
    mod_text, ex_text = text_of(MODULE), text_of(EXAMPLE)

    check_variables("infra/azure", V)
    check_variables("azure-basic", ex["variable"])
    check("infra/azure: every output has a description", all(str(o.get("description", "")).strip() for o in mod["output"].values()))

    infra_id_validation = json.dumps(first(V.get("infra_id", {}).get("validation")))
    check("infra_id validated like the AWS module", "^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$" in infra_id_validation.replace("\\\\", "\\"))

    # Required resources.
    required = [
        ("azurerm_resource_group", "this"), ("azurerm_user_assigned_identity", "function"),
        ("azurerm_user_assigned_identity", "platform"),
        ("azurerm_storage_account", "runtime"), ("azurerm_storage_account", "policy"),
        ("azurerm_storage_container", "policy"), ("azurerm_storage_container", "dead_letters"),
        ("azurerm_storage_container", "deployment"), ("azurerm_service_plan", "this"),
        ("azurerm_function_app_flex_consumption", "this"), ("azurerm_eventgrid_system_topic", "arm"),
        ("azurerm_eventgrid_system_topic", "policy"), ("azurerm_eventgrid_system_topic_event_subscription", "arm"),
        ("azurerm_eventgrid_system_topic_event_subscription", "policy"), ("azurerm_log_analytics_workspace", "this"),
        ("azurerm_application_insights", "this"), ("azurerm_application_insights_workbook", "this"),
        ("azurerm_monitor_action_group", "this"), ("azurerm_monitor_metric_alert", "custom"),
        ("azurerm_monitor_metric_alert", "function_errors"), ("azurerm_monitor_metric_alert", "dead_letters"),
    ]
    missing = [f"{t}.{n}" for t, n in required if (t, n) not in R]
    check("required resources exist", not missing, f"missing: {missing}")
    check("resource group optional (count on create_resource_group) with existing-RG data source",
          "create_resource_group" in str(R.get(("azurerm_resource_group", "this"), {}).get("count"))
          and ("azurerm_resource_group", "existing") in mod["data"])

    # Tags everywhere they exist.
    untagged = [f"{t}.{n}" for (t, n), b in R.items() if t not in UNTAGGABLE and b.get("tags") != "${local.tags}"]
    check("every taggable resource has tags = local.tags", not untagged, f"untagged: {untagged}")
    check("local.tags is var.tags", L.get("tags") == "${var.tags}")

    # Storage: no shared keys, TLS 1.2, no public blobs; policy account versioned.
    for sa in ("runtime", "policy"):
        b = R.get(("azurerm_storage_account", sa), {})
        ok = (b.get("shared_access_key_enabled") is False and b.get("min_tls_version") == "TLS1_2"
              and b.get("allow_nested_items_to_be_public") is False)
        check(f"storage account {sa}: no shared keys, TLS1_2, no public blobs", ok)
    check("policy account: blob versioning on",
          first(R.get(("azurerm_storage_account", "policy"), {}).get("blob_properties")).get("versioning_enabled") is True)

    # Function App.
    fa = R.get(("azurerm_function_app_flex_consumption", "this"), {})
    plan = R.get(("azurerm_service_plan", "this"), {})
    check("plan: Linux Flex Consumption (FC1)", plan.get("os_type") == "Linux" and plan.get("sku_name") == "FC1")
    check("function: custom handler runtime (runtime_name = custom, i.e. FUNCTIONS_WORKER_RUNTIME=custom)", fa.get("runtime_name") == "custom")
    ident = first(fa.get("identity"))
    # User-assigned, not system-assigned: their ids are needed before the app exists (README "Identities").
    check("function: managed identities = code identity + platform identity (user-assigned)",
          ident.get("type") == "UserAssigned"
          and "azurerm_user_assigned_identity.function.id" in str(ident.get("identity_ids"))
          and "azurerm_user_assigned_identity.platform.id" in str(ident.get("identity_ids")))
    check("function: package from var.function_zip via zip_deploy_file", fa.get("zip_deploy_file") == "${var.function_zip}")
    check("function: https only, deployment storage via managed identity",
          fa.get("https_only") is True and fa.get("storage_authentication_type") == "UserAssignedIdentity"
          and fa.get("storage_user_assigned_identity_id") == "${azurerm_user_assigned_identity.platform.id}")

    app_settings = fa.get("app_settings", "")
    contract = resolve("${local.contract_app_settings}", L)
    check("app_settings merge the contract map", "local.contract_app_settings" in str(app_settings))
    missing = [k for k in CONTRACT_KEYS if k not in (contract if isinstance(contract, dict) else {})]
    check("app settings contain every contract key", not missing, f"missing: {missing}")
    check("APPLICATIONINSIGHTS_CONNECTION_STRING set (site_config.application_insights_connection_string)",
          "azurerm_application_insights.this.connection_string" in str(first(fa.get("site_config")).get("application_insights_connection_string")))
    if isinstance(contract, dict):
        check("TAGWARDEN_POLICY is the policy URL in the policy container",
              contract.get("TAGWARDEN_POLICY") == "${local.policy_url}" and "local.policy_container_url" in str(L.get("policy_url")))
        check("TAGWARDEN_SELF_PRINCIPAL_ID / _CLIENT_ID are the code identity's ids",
              "user_assigned_identity.function.principal_id" in str(contract.get("TAGWARDEN_SELF_PRINCIPAL_ID"))
              and "user_assigned_identity.function.client_id" in str(contract.get("TAGWARDEN_SELF_CLIENT_ID")))
        check("TAGWARDEN_METRICS_RESOURCE_ID is the Function App id",
              contract.get("TAGWARDEN_METRICS_RESOURCE_ID") == "${local.function_app_id}"
              and "Microsoft.Web/sites/${local.function_app_name}" in str(L.get("function_app_id"))
              and fa.get("name") == "${local.function_app_name}")
    check("defaults: ARM endpoint https://management.azure.com, POLICY_TTL 60, sweep hourly",
          var_default(V, "arm_endpoint") == "https://management.azure.com" and var_default(V, "policy_ttl_seconds") == 60
          and var_default(V, "sweep_schedule") == "0 0 * * * *")
    check("policy_container named `policy`, status blob is tagwarden-status.json",
          L.get("policy_container") == "policy" and str(L.get("status_blob", "")).endswith("tagwarden-status.json"))

    # Event Grid: ARM subscription.
    topic = R.get(("azurerm_eventgrid_system_topic", "arm"), {})
    check("ARM system topic: Microsoft.Resources.Subscriptions, location global, on the subscription",
          topic.get("topic_type") == "Microsoft.Resources.Subscriptions" and topic.get("location") == "global"
          and topic.get("source_resource_id") == "${local.subscription_id}")
    es = R.get(("azurerm_eventgrid_system_topic_event_subscription", "arm"), {})
    types = resolve(es.get("included_event_types"), L)
    check("ARM event subscription includes only Microsoft.Resources.ResourceWriteSuccess",
          types == ["Microsoft.Resources.ResourceWriteSuccess"], f"got {types}")
    check("ARM event subscription: Event Grid schema, azure_function_endpoint -> function `drift`",
          es.get("event_delivery_schema") == "EventGridSchema"
          and first(es.get("azure_function_endpoint")).get("function_id") == "${local.drift_function_id}"
          and str(L.get("drift_function_id", "")).endswith("/functions/${local.function_drift_name}")
          and L.get("function_drift_name") == "drift")
    nbw = resolve("${local.arm_filter.string_not_begins_with}", L)
    prefixes = var_default(V, "ignored_operation_prefixes") or []
    check("ARM filter: data.operationName StringNotBeginsWith deployments/ and Microsoft.Authorization/",
          isinstance(nbw, dict) and nbw.get("data.operationName") == "${var.ignored_operation_prefixes}"
          and "Microsoft.Resources/deployments/" in prefixes and "Microsoft.Authorization/" in prefixes
          and not any(p.lower().startswith("microsoft.resources/tags") for p in prefixes))
    af = json.dumps(es.get("advanced_filter"))
    check("ARM filter: advanced_filter renders string_not_begins_with, string_begins_with (RG scopes), string_not_in (self)",
          all(s in af for s in ('"string_not_begins_with"', '"string_begins_with"', '"string_not_in"')))
    check("ARM filter: self exclusion keys", "data.authorization.evidence.principalId" in str(L.get("arm_filter"))
          and "data.claims.appid" in str(L.get("arm_filter")))
    for key in ("arm", "policy"):
        s = R.get(("azurerm_eventgrid_system_topic_event_subscription", key), {})
        dl = first(s.get("storage_blob_dead_letter_destination"))
        rp = first(s.get("retry_policy"))
        check(f"{key} event subscription dead-letters to the dead-letter container (topic identity) with a retry policy",
              dl.get("storage_blob_container_name") == "${azurerm_storage_container.dead_letters.name}"
              and first(s.get("dead_letter_identity")).get("type") == "SystemAssigned"
              and "max_delivery_attempts" in rp and "event_time_to_live" in rp)

    # Event Grid: policy blob subscription.
    ptopic = R.get(("azurerm_eventgrid_system_topic", "policy"), {})
    pes = R.get(("azurerm_eventgrid_system_topic_event_subscription", "policy"), {})
    check("policy system topic: Microsoft.Storage.StorageAccounts on the policy account",
          ptopic.get("topic_type") == "Microsoft.Storage.StorageAccounts"
          and ptopic.get("source_resource_id") == "${azurerm_storage_account.policy.id}")
    nends = first(first(pes.get("advanced_filter")).get("string_not_ends_with"))
    check("policy subscription: BlobCreated under the policy container/prefix, status report excluded",
          pes.get("included_event_types") == ["Microsoft.Storage.BlobCreated"]
          and "containers/${local.policy_container}/blobs/" in str(L.get("policy_subject_prefix"))
          and first(pes.get("subject_filter")).get("subject_begins_with") == "${local.policy_subject_prefix}"
          and nends.get("key") == "subject" and nends.get("values") == ["/tagwarden-status.json"]
          and first(pes.get("azure_function_endpoint")).get("function_id") == "${local.drift_function_id}")

    # Role assignments.
    role_ids = L.get("role_ids", {})
    check("role id table matches the built-in role ids",
          role_ids == {"tag_contributor": ROLE_IDS["Tag Contributor"], "reader": ROLE_IDS["Reader"],
                       "storage_blob_data_reader": ROLE_IDS["Storage Blob Data Reader"],
                       "storage_blob_data_contributor": ROLE_IDS["Storage Blob Data Contributor"],
                       "monitoring_metrics_publisher": ROLE_IDS["Monitoring Metrics Publisher"]}, f"got {role_ids}")
    ra = {n: b for (t, n), b in R.items() if t == "azurerm_role_assignment"}
    expect = {
        # name: (role key, scope expression, principal expression)
        "tag_contributor": ("tag_contributor", "${each.value}", "${local.code_principal_id}"),
        "reader": ("reader", "${each.value}", "${local.code_principal_id}"),
        "policy_reader": ("storage_blob_data_reader", "${local.policy_container_scope}", "${local.code_principal_id}"),
        "status_report_writer": ("storage_blob_data_contributor", "${local.policy_container_scope}", "${local.code_principal_id}"),
        "metrics_publisher": ("monitoring_metrics_publisher", "${azurerm_function_app_flex_consumption.this.id}", "${local.code_principal_id}"),
        "dead_letter_writer": ("storage_blob_data_contributor", "${local.dead_letter_container_scope}", "${each.value}"),
        "runtime_storage": ("storage_blob_data_contributor", "${azurerm_storage_account.runtime.id}", "${azurerm_user_assigned_identity.platform.principal_id}"),
    }
    for name, (role, scope, principal) in expect.items():
        b = ra.get(name, {})
        rd = str(b.get("role_definition_id", ""))
        ok = (role in rd or role_ids.get(role, "?") in rd) and b.get("scope") == scope and (principal is None or b.get("principal_id") == principal)
        check(f"role assignment {name}: {role} at {scope}", ok, f"got role={rd} scope={b.get('scope')} principal={b.get('principal_id')}")
    check("Tag Contributor and Reader for_each the enforcement scopes (default: the subscription)",
          ra.get("tag_contributor", {}).get("for_each") == "${local.enforcement_scopes}"
          and ra.get("reader", {}).get("for_each") == "${local.enforcement_scopes}"
          and "toset([local.subscription_id])" in str(L.get("enforcement_scopes")))
    check("policy container scope is the container, not the account",
          str(L.get("policy_container_scope", "")).endswith("/blobServices/default/containers/${azurerm_storage_container.policy.name}"))
    sr = ra.get("status_report_writer", {})
    cond = str(resolve(sr.get("condition"), L))
    write_actions = ["blobs/write", "blobs/add/action", "blobs/delete", "blobs/move/action"]
    check("status report writer: ABAC condition 2.0 limits every blob change to the status blob path",
          sr.get("condition_version") == "2.0"
          and all(f"ActionMatches{{'Microsoft.Storage/storageAccounts/blobServices/containers/{a}'}}" in cond for a in write_actions)
          and "@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringEquals '${local.status_blob}'" in cond)
    every_ra_described = [n for n, b in ra.items() if not b.get("description")]
    check("every role assignment has a description", not every_ra_described, f"{every_ra_described}")
    all_text = mod_text + ex_text
    bad = [r for r, gid in FORBIDDEN_ROLES.items()
           if gid in all_text or re.search(rf'role_definition_name\s*=\s*"{re.escape(r)}"', all_text)]
    check("no Owner / Contributor / User Access Administrator role anywhere", not bad, f"found: {bad}")
    check("no role_definition_name lookups (built-in ids only)", "role_definition_name" not in all_text)

    # Monitoring.
    ai = R.get(("azurerm_application_insights", "this"), {})
    check("Application Insights is workspace-based", ai.get("workspace_id") == "${azurerm_log_analytics_workspace.this.id}")
    check("local.tagwarden_metrics lists all 10 metrics", L.get("tagwarden_metrics") == METRICS, f"got {L.get('tagwarden_metrics')}")
    wb = R.get(("azurerm_application_insights_workbook", "this"), {})
    wbl = json.dumps(L.get("workbook"))
    wbi = json.dumps(L.get("workbook_metric_items"))
    check("workbook: data_json renders local.workbook built from every metric + DeadLetteredCount",
          wb.get("data_json") == "${jsonencode(local.workbook)}" and "local.workbook_metric_items" in wbl
          and "local.tagwarden_metrics" in wbi and "DeadLetteredCount" in wbl and L.get("metric_namespace") == "TagWarden")
    check("workbook: metrics split by ResourceType and filtered on InfraID", "ResourceType" in wbi and "InfraID" in wbi)
    alerts = L.get("custom_metric_alerts", {})
    custom = R.get(("azurerm_monitor_metric_alert", "custom"), {})
    crit = first(custom.get("criteria"))
    check("alerts: WriteFailures > 0 and PolicyRejected > 0 (custom metrics, TagWarden namespace)",
          {a.get("metric") for a in alerts.values()} == {"WriteFailures", "PolicyRejected"}
          and crit.get("operator") == "GreaterThan" and crit.get("threshold") == 0
          and crit.get("metric_namespace") == "${local.metric_namespace}" and crit.get("skip_metric_validation") is True)
    fe = first(R.get(("azurerm_monitor_metric_alert", "function_errors"), {}).get("criteria"))
    dlc = first(R.get(("azurerm_monitor_metric_alert", "dead_letters"), {}).get("criteria"))
    check("alerts: function errors and dead-lettered events",
          fe.get("metric_name") == "requests/failed" and dlc.get("metric_name") == "DeadLetteredCount")
    ag = R.get(("azurerm_monitor_action_group", "this"), {})
    check("action group only when an email or webhook is given",
          "var.alert_emails" in str(ag.get("count")) and "var.alert_webhook_url" in str(ag.get("count")))

    # Outputs.
    want = ["function_app_id", "function_app_name", "principal_id", "policy_container_url", "event_subscription_ids", "workbook_id"]
    missing = [o for o in want if o not in mod["output"]]
    check("outputs: function app id/name, principal id, policy container URL, event subscription ids, workbook id", not missing, f"missing: {missing}")

    # Example.
    m = ex["module"].get("tagwarden", {})
    required_vars = [n for n, b in V.items() if "default" not in b]
    check("example uses ../../azure and passes every required module variable",
          m.get("source") == "../../azure" and all(v in m for v in required_vars), f"required: {required_vars}")
    prov = ex["provider"].get("azurerm", {})
    check("example provider: features {} and storage_use_azuread = true (shared keys are disabled)",
          "features" in prov and prov.get("storage_use_azuread") is True)
    unknown = [k for k in m if k not in V and k not in ("source", "version", "providers", "count", "for_each", "depends_on")]
    check("example passes only variables the module declares", not unknown, f"unknown: {unknown}")

    # README documents every input and output and the handler contract.
    readme = (MODULE / "README.md").read_text() if (MODULE / "README.md").exists() else ""
    undocumented = [f"var {v}" for v in V if f"`{v}`" not in readme] + [f"output {o}" for o in mod["output"] if f"`{o}`" not in readme]
    check("infra/azure/README.md documents every input and output", not undocumented, f"{undocumented}")
    check("README has the handler contract section with every contract key",
          "## Handler contract" in readme and all(k in readme for k in CONTRACT_KEYS + ["APPLICATIONINSIGHTS_CONNECTION_STRING"]))

    for ok, name, detail in results:
        print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok or not detail else f"\n     {detail}"))
    failed = sum(1 for ok, _, _ in results if not ok)
    print(f"{len(results) - failed}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
