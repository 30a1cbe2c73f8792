#!/usr/bin/env python3
"""Structural checks of infra/azure and the Azure examples (infra/examples/azure-basic, azure-clusters,
azure-management-group) without the azurerm provider.

There is no azurerm provider offline, so `terraform init/validate` cannot run. This parses every .tf
file with python-hcl2 (pinned in scripts/install-tools, own venv) and asserts the facts the design
depends on: typed and described variables, the required resources, the Event Grid filters and
dead-lettering, the role assignments (roles, scopes, ABAC condition), the handler's app-setting
contract, the workbook metrics and the alerts. Prints PASS/FAIL per check; exit 1 on any FAIL.

Usage: check_azure_hcl.py [repo root]   (default: the current directory)
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import hcl2

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
MODULE = ROOT / "infra/azure"
# Every Event Grid system topic of the ARM and Resource Notifications sources, created or existing.
TOPIC_MODULE = MODULE / "modules/system_topic"
# Every event subscription to the `drift` function (ARM and Resource Notifications), azurerm or azapi.
SUBS_MODULE = MODULE / "modules/event_subscription"
EXAMPLE = ROOT / "infra/examples/azure-basic"
CLUSTERS_EXAMPLE = ROOT / "infra/examples/azure-clusters"
MG_EXAMPLE = ROOT / "infra/examples/azure-management-group"
EXAMPLES = {"azure-basic": EXAMPLE, "azure-clusters": CLUSTERS_EXAMPLE, "azure-management-group": MG_EXAMPLE}
MG_PREFIX = "/providers/Microsoft.Management/managementGroups/"

CONTRACT_KEYS = [
    "TAGWARDEN_POLICY", "TAGWARDEN_ARM_ENDPOINT", "POLICY_TTL", "TAGWARDEN_SELF_PRINCIPAL_ID",
    "TAGWARDEN_SELF_CLIENT_ID", "TAGWARDEN_METRICS_RESOURCE_ID", "TAGWARDEN_METRICS_REGION",
    "TAGWARDEN_SWEEP_SCOPES", "RUST_LOG", "TAGWARDEN_CLUSTERS", "TAGWARDEN_EVENT_TOPICS",
    "TAGWARDEN_CONCURRENCY", "TAGWARDEN_MODE",
]
METRICS = [
    "EventsReceived", "EventsIgnored", "ResourcesEvaluated", "DriftDetected", "TagsWritten",
    "WriteFailures", "TagLimitExceeded", "PolicyRejected", "Conflicts", "ReconcileLatency",
    "ListingFailures",
]
ROLE_IDS = {
    "Tag Contributor": "4a9ae827-6dc8-4573-8ac7-8239d42aa03f",
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
    "Storage Queue Data Reader": "19e7f393-937e-4f77-808e-94535e297925",
    "Storage Queue Data Message Processor": "8a0f0c08-91a1-4084-bc3d-661d67233fed",
    "Storage Queue Data Message Sender": "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a",
    "Storage Queue Data Contributor": "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
}
# azurerm_function_app_flex_consumption: runtime_name "custom" since 4.21.0; maximum_instance_count
# below 40 only from 4.58.0 (CHANGELOG-v4.md, PR #31392);
# application_insights.local_authentication_enabled only from 4.78.0 (the provider schema extracts).
AZURERM_MIN = (4, 78)
FORBIDDEN_ROLES = {
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
    # Includes Microsoft.Resources/deployments/*; replaced by the custom tag writer role.
    "Tag Contributor": "4a9ae827-6dc8-4573-8ac7-8239d42aa03f",
}
# azurerm resource types without a `tags` argument.
UNTAGGABLE = {
    "azurerm_role_assignment", "azurerm_storage_container", "azurerm_storage_blob",
    "azurerm_storage_management_policy", "azurerm_eventgrid_system_topic_event_subscription",
    "azurerm_storage_queue", "azurerm_role_definition",
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
    files, merged = {}, {"resource": {}, "data": {}, "variable": {}, "output": {}, "locals": {}, "module": {}, "provider": {},
                         "moved": []}
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
        merged["moved"] += doc.get("moved", [])
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


def hcl_regexes(condition: str) -> list[str]:
    """The regex() literals of a validation condition, as Terraform reads them (HCL string escapes undone)."""
    lits = re.findall(r'regex\(\s*"((?:[^"\\]|\\.)*)"', condition)
    return [re.sub(r'\\(.)', r'\1', x) for x in lits]


def accepts(regexes: list[str], value: str) -> bool:
    """What `can(regex(a, s)) || can(regex(b, s)) ...` gives for one value (RE2 and Python agree on these)."""
    return any(re.search(r, value) for r in regexes)


TOPICS: dict = {}


def topic_module() -> dict:
    _, tm = parse_dir(TOPIC_MODULE)
    return tm


def check_system_topic_module(tm: dict) -> None:
    """modules/system_topic: each topic created by azurerm in the provider's subscription or by
    azapi in another (parent id = its resource group there), or read there and checked for source,
    type (without case) and a system-assigned identity; one merged map out."""
    TR, TD, TL, TV = tm["resource"], tm["data"], tm["locals"], tm["variable"]
    t = TR.get(("azurerm_eventgrid_system_topic", "this"), {})
    check("system_topic: azurerm creates the topics of the provider's subscription (create, no subscription_id): name, group, location, source, type, system identity, tags",
          t.get("for_each") == "${local.home_created}" and "t.create && t.subscription_id == null" in str(TL.get("home_created"))
          and t.get("name") == "${each.value.name}" and t.get("resource_group_name") == "${each.value.resource_group_name}"
          and t.get("location") == "${each.value.location}" and t.get("source_resource_id") == "${each.value.source_resource_id}"
          and t.get("topic_type") == "${each.value.topic_type}" and first(t.get("identity")).get("type") == "SystemAssigned"
          and t.get("tags") == "${var.tags}" and 'location = optional(string, "global")' in str(TV.get("topics", {}).get("type")).replace("  ", " "),
          f"{t}")
    at = TR.get(("azapi_resource", "this"), {})
    props = ((at.get("body") or {}).get("properties") or {}) if isinstance(at.get("body"), dict) else {}
    check("system_topic: azapi creates those of another subscription by parent id (the group there), global by default, source/topicType, identity, tags",
          at.get("for_each") == "${local.foreign_created}" and "t.create && t.subscription_id != null" in str(TL.get("foreign_created"))
          and str(at.get("type", "")).startswith("Microsoft.EventGrid/systemTopics@")
          and at.get("parent_id") == "${each.value.resource_group_id}" and at.get("location") == "${each.value.location}"
          and first(at.get("identity")).get("type") == "SystemAssigned" and at.get("name") == "${each.value.name}"
          and props.get("source") == "${each.value.source_resource_id}" and props.get("topicType") == "${each.value.topic_type}"
          and at.get("tags") == "${var.tags}"
          and any("t.resource_group_id != null" in str(v.get("condition")) for v in TV.get("topics", {}).get("validation", [])), f"{at}")
    for dtype, local_, src, typ in (
            ("azurerm_eventgrid_system_topic", "home_existing", "lower(self.source_resource_id) == lower(each.value.source_resource_id)",
             "lower(self.topic_type) == lower(each.value.topic_type)"),
            ("azapi_resource", "foreign_existing", "lower(self.output.properties.source) == lower(each.value.source_resource_id)",
             "lower(self.output.properties.topicType) == lower(each.value.topic_type)")):
        d = TD.get((dtype, "this"), {})
        posts = " ".join(str(pc.get("condition", "")) for pc in first(d.get("lifecycle")).get("postcondition", []))
        check(f"system_topic: existing topics ({dtype}) are read and checked for source, type (without case) and a system-assigned identity",
              d.get("for_each") == "${local.%s}" % local_ and "!t.create" in str(TL.get(local_))
              and src in posts and typ in posts and 'strcontains(self.identity[0].type, "SystemAssigned")' in posts
              and (dtype.startswith("azurerm") or ("each.value.subscription_id" in str(d.get("resource_id"))
                                                  and str(d.get("type", "")).startswith("Microsoft.EventGrid/systemTopics@"))), posts)
    topics = str(TL.get("topics", ""))
    check("system_topic: output topics merges created and existing topics, in the provider's subscription and in others",
          all(x in topics for x in ("azurerm_eventgrid_system_topic.this", "data.azurerm_eventgrid_system_topic.this",
                                    "azapi_resource.this", "data.azapi_resource.this"))
          and tm["output"].get("topics", {}).get("value") == "${local.topics}", topics)


SUBS: dict = {}


def check_event_subscription_module(sm: dict) -> None:
    """modules/event_subscription: each subscription by azurerm on a topic in the provider's
    subscription or by azapi (the REST shape) on one in another; the same delivery, retry policy and
    dead-lettering in both forms; advanced filters or a subject prefix; one map of ids out."""
    SR, SL, SV = sm["resource"], sm["locals"], sm["variable"]
    es = SR.get(("azurerm_eventgrid_system_topic_event_subscription", "this"), {})
    dyn = {k: v for d in es.get("dynamic", []) for k, v in d.items()}
    af = json.dumps(dyn.get("advanced_filter"))
    sf = first((dyn.get("subject_filter") or {}).get("content"))
    check("event_subscription: azurerm on topics of the provider's subscription: name, topic, group, Event Grid schema, event types, one event per batch to the function",
          es.get("for_each") == "${local.home}" and "!s.in_other_subscription" in str(SL.get("home"))
          and es.get("name") == "${each.value.name}" and es.get("system_topic") == "${each.value.topic_name}"
          and es.get("resource_group_name") == "${each.value.topic_resource_group_name}"
          and es.get("event_delivery_schema") == "EventGridSchema" and es.get("included_event_types") == "${each.value.included_event_types}"
          and first(es.get("azure_function_endpoint")) == {"function_id": "${var.function_id}", "max_events_per_batch": 1,
                                                           "preferred_batch_size_in_kilobytes": 64}, f"{es}")
    check("event_subscription: azurerm renders advanced_filter (string_not_begins_with, string_not_in) or a subject filter without case, each only when given",
          "each.value.advanced_filter == null ? [] : [each.value.advanced_filter]" in af
          and all(x in af for x in ('"string_not_begins_with"', '"string_not_in"'))
          and sf.get("subject_begins_with") == "${subject_filter.value}" and sf.get("case_sensitive") is False
          and "each.value.subject_begins_with == null ? []" in str((dyn.get("subject_filter") or {}).get("for_each")), af)
    rp, dl = first(es.get("retry_policy")), first(es.get("storage_blob_dead_letter_destination"))
    check("event_subscription: azurerm retry policy and dead letters (topic identity) into the caller's container",
          rp == {"max_delivery_attempts": "${var.max_delivery_attempts}", "event_time_to_live": "${var.event_time_to_live_minutes}"}
          and first(es.get("dead_letter_identity")).get("type") == "SystemAssigned"
          and dl == {"storage_account_id": "${var.dead_letter_storage_account_id}", "storage_blob_container_name": "${var.dead_letter_container_name}"},
          f"{rp} {dl}")
    aes = SR.get(("azapi_resource", "this"), {})
    ap = ((aes.get("body") or {}).get("properties") or {}) if isinstance(aes.get("body"), dict) else {}
    dest, flt = ap.get("destination") or {}, str(ap.get("filter") or "")
    adl = ap.get("deadLetterWithResourceIdentity") or {}
    check("event_subscription: azapi on topics of another subscription (parent id = the topic): the same delivery, filter, retry and dead-lettering in the REST shape",
          aes.get("for_each") == "${local.foreign}" and "s.in_other_subscription" in str(SL.get("foreign")) and "!" not in str(SL.get("foreign"))
          and aes.get("parent_id") == "${each.value.topic_id}" and aes.get("name") == "${each.value.name}"
          and str(aes.get("type", "")).startswith("Microsoft.EventGrid/systemTopics/eventSubscriptions@")
          and ap.get("eventDeliverySchema") == "EventGridSchema"
          and dest.get("endpointType") == "AzureFunction" and (dest.get("properties") or {}).get("resourceId") == "${var.function_id}"
          and (dest.get("properties") or {}).get("maxEventsPerBatch") == 1
          and all(x in flt for x in ("includedEventTypes = each.value.included_event_types", "StringNotBeginsWith", "f.string_not_begins_with",
                                     "StringNotIn", "f.string_not_in", "if f != null",
                                     "subjectBeginsWith = s, isSubjectCaseSensitive = false} if s != null"))
          and (adl.get("identity") or {}).get("type") == "SystemAssigned"
          and ((adl.get("deadLetterDestination") or {}).get("properties") or {}).get("blobContainerName") == "${var.dead_letter_container_name}"
          and (ap.get("retryPolicy") or {}).get("maxDeliveryAttempts") == "${var.max_delivery_attempts}", f"{ap}")
    check("event_subscription: both forms refuse more than 25 advanced-filter values (Event Grid's limit)",
          all("local.advanced_filter_value_count[each.key] <= 25" in json.dumps(r.get("lifecycle")) for r in (es, aes))
          and "string_not_begins_with" in str(SL.get("advanced_filter_value_count")), f"{SL.get('advanced_filter_value_count')}")
    ids = str(sm["output"].get("ids", {}).get("value"))
    check("event_subscription: output ids merges azurerm's and azapi's by key",
          "azurerm_eventgrid_system_topic_event_subscription.this" in ids and "azapi_resource.this" in ids, ids)


def check_subscription_call(mod: dict, call: str, subs: str) -> dict:
    """A call of modules/event_subscription in infra/azure: every subscription of local.<subs>, home
    or foreign by the source's subscription, to the drift function, the module's retry policy and
    dead-letter container, after the package and the role propagation. Returns the call."""
    m = mod["module"].get(call, {})
    sp = str(m.get("subscriptions", ""))
    check(f"{call}: every subscription of local.{subs} through modules/event_subscription (azapi for another subscription's topic), "
          "to the drift function, the retry policy, the dead-letter container, after the package and the role propagation",
          m.get("source") == "./modules/event_subscription" and sp.startswith("${{for s, t in local.%s : s => {" % subs)
          and all(x in sp for x in ("topic_name = t.name", "topic_resource_group_name = t.resource_group_name", "topic_id = t.id",
                                    "in_other_subscription = contains(local.foreign_sources, s)"))
          and m.get("function_id") == "${local.drift_function_id}"
          and m.get("max_delivery_attempts") == "${var.max_delivery_attempts}"
          and m.get("event_time_to_live_minutes") == "${var.event_time_to_live_minutes}"
          and m.get("dead_letter_storage_account_id") == "${azurerm_storage_account.policy.id}"
          and m.get("dead_letter_container_name") == "${azurerm_storage_container.dead_letters.name}"
          and set(m.get("depends_on", [])) >= {"${terraform_data.package}", "${time_sleep.role_propagation}"}, f"{m}")
    return m


def check_topic_call(mod: dict, L: dict, call: str, specs: str, topics: str, existing_var: str) -> None:
    m = mod["module"].get(call, {})
    check(f"{call}: every topic through modules/system_topic ({existing_var} named in its messages), local.{topics} its output",
          m.get("source") == "./modules/system_topic" and m.get("topics") == "${local.%s}" % specs
          and m.get("existing_variable_name") == existing_var and m.get("tags") == "${local.tags}"
          and L.get(topics) == "${module.%s.topics}" % call, f"{m}")


def check_management_groups(mod: dict, V: dict, L: dict, R: dict, ra: dict, rdef: dict) -> None:
    """A management group as enforcement scope, subscriptions outside the deployment's."""
    guid = "11111111-2222-3333-4444-555555555555"
    # Validation regexes accept the management group form and refuse malformed ones. The sample
    # values run through the regexes Terraform would run (tests/terraform/azure/validations runs
    # the validations themselves under `terraform test`).
    es_conds = [str(v.get("condition", "")) for v in V.get("enforcement_scopes", {}).get("validation", [])]
    form = next((c for c in es_conds if "regex(" in c), "")
    rx = hcl_regexes(form)
    good = [MG_PREFIX + "platform-lz", MG_PREFIX + "Contoso_(EU).prod-1", MG_PREFIX + "a" * 90, MG_PREFIX + guid,
            f"/subscriptions/{guid}", f"/subscriptions/{guid}/resourceGroups/dev-a1b2c-rg"]
    bad = [MG_PREFIX, MG_PREFIX + "platform.", MG_PREFIX + "a" * 91, MG_PREFIX + "a/b", MG_PREFIX + "a b",
           MG_PREFIX + "tenant#root", "/providers/microsoft.management/managementgroups/platform",
           "/providers/Microsoft.Management/managementGroup/platform", "/managementGroups/platform",
           f"/subscriptions/{guid}/resourceGroups/", "/subscriptions/not-a-guid"]
    wrong = [g for g in good if not accepts(rx, g)] + [b for b in bad if accepts(rx, b)]
    check("enforcement_scopes validation accepts /providers/Microsoft.Management/managementGroups/<id> (1-90 of letters, digits, -_().; "
          "not ending in '.') beside subscription and resource group ids, and refuses malformed ones",
          len(rx) == 2 and not wrong, f"regexes {rx}, wrong on {wrong}")
    check("at most one management group scope (a custom role names one management group among its assignable scopes)",
          any(MG_PREFIX in c and "<= 1" in c for c in es_conds), f"{es_conds}")
    check("a resource group inside a listed subscription is refused by a validation (runs even when no topic is created here)",
          any("/resourcegroups/" in c and "== 0" in c and "slice(split(" in c for c in es_conds)
          and not first(TOPICS["resource"].get(("azurerm_eventgrid_system_topic", "this"), {}).get("lifecycle")).get("precondition"))

    ev = V.get("event_source_subscription_ids", {})
    ev_conds = [str(v.get("condition", "")) for v in ev.get("validation", [])]
    grx = hcl_regexes(next((c for c in ev_conds if "regex(" in c), ""))
    g_wrong = [g for g in (guid, guid.upper()) if not accepts(grx, g)] + [b for b in (
        f"/subscriptions/{guid}", guid[:-1], guid + "0", "1111111122223333444455555555555x", "") if accepts(grx, b)]
    check("event_source_subscription_ids: list(string), described, default [], GUIDs only, distinct without case",
          ev.get("type") == "${list(string)}" and "management group" in str(ev.get("description", "")) and ev.get("default") == []
          and grx and not g_wrong and any("distinct([for g in var.event_source_subscription_ids : lower(g)])" in c for c in ev_conds),
          f"type={ev.get('type')} regexes {grx}, wrong on {g_wrong}")
    check("event_source_subscription_ids goes with a management group scope and a management group needs it",
          any("(length(var.event_source_subscription_ids) > 0) ==" in c and MG_PREFIX in c for c in ev_conds), f"{ev_conds}")
    check("one topic per source: a listed subscription that is or holds a scope is refused; existing topics must be on a source",
          any("lower(split(\"/\", s)[2])" in c and "var.event_source_subscription_ids" in c for c in ev_conds)
          and "var.event_source_subscription_ids" in json.dumps(V.get("existing_system_topics", {}).get("validation")))

    # Sources: the subscription / resource group scopes and /subscriptions/<guid> of each listed
    # subscription; a management group is none. Sources outside the deployment's subscription are
    # the foreign ones.
    check("Event Grid sources = subscription/resource-group scopes + /subscriptions/<guid> per listed subscription; no management group",
          L.get("mg_scope_prefix") == MG_PREFIX
          and "!startswith(s, local.mg_scope_prefix)" in str(L.get("arm_scopes"))
          and L.get("event_source_subscriptions") == '${[for g in var.event_source_subscription_ids : "/subscriptions/${lower(g)}"]}'
          and L.get("arm_sources") == "${toset(concat(local.arm_scopes, local.event_source_subscriptions))}"
          and "local.arm_sources" in str(L.get("arm_topic_type")) and "local.arm_sources" in str(L.get("arm_scope_key")),
          f"arm_sources={L.get('arm_sources')}")
    check("foreign sources = those whose subscription is not the deployment's (no longer refused)",
          "data.azurerm_subscription.current.subscription_id" in str(L.get("home_subscription"))
          and "local.source_subscription[s] != local.home_subscription" in str(L.get("foreign_sources"))
          and "foreign_scopes" not in L and "local.foreign_scopes" not in text_of(MODULE))
    specs = str(L.get("arm_topic_specs", ""))
    check("azurerm creates topics only for sources in this subscription, azapi for the others",
          "contains(local.foreign_sources, s) ? local.source_subscription[s] : null" in specs
          and "local.foreign_sources" in str(L.get("created_foreign_topic_sources")), specs)

    # Topics per subscription by for_each, created by azapi in the source's subscription
    # (modules/system_topic), under that subscription's events group.
    check("one system topic per other-subscription source (azapi in the module, parent_id = that subscription's resource group, source = the key)",
          "contains(local.created_foreign_topic_sources, s) ? local.event_resource_group_id[local.source_subscription[s]] : null" in specs
          and "source_resource_id = s" in specs and "topic_type = local.arm_topic_type[s]" in specs, specs)
    rg = R.get(("azapi_resource", "event_resource_group"), {})
    check("the topics' resource group in each other subscription: created (<name>-events) unless event_topic_resource_group_name names one",
          str(rg.get("type", "")).startswith("Microsoft.Resources/resourceGroups@") and rg.get("parent_id") == "/subscriptions/${each.key}"
          and "var.event_topic_resource_group_name == null ? local.foreign_topic_subscriptions" in str(rg.get("for_each"))
          and "local.created_foreign_topic_sources" in str(L.get("foreign_topic_subscriptions"))
          and "azapi_resource.event_resource_group[sub].id" in str(L.get("event_resource_group_id"))
          and "event_topic_resource_group_name" in V and V["event_topic_resource_group_name"].get("default", "x") is None,
          f"{rg}")
    check("existing topics in other subscriptions are read by id in the source's subscription and the named group",
          "try(local.existing_topic_of[s].resource_group_name," in specs and "try(local.existing_topic_of[s].name," in specs, specs)
    m = check_subscription_call(mod, "arm_event_subscriptions", "arm_subscriptions")
    check("the event subscription of a topic in another subscription (azapi in modules/event_subscription): the ARM filter as at home",
          "advanced_filter = {string_not_begins_with = local.arm_filter.string_not_begins_with, string_not_in = local.arm_filter.string_not_in}"
          in str(m.get("subscriptions")), f"{m}")

    # Roles once at the management group: scope = the management group id, the role definition id
    # in the form ARM returns at that scope; the custom role assignable there.
    rdb = str(L.get("role_definition_base", ""))
    check("tag writer and Reader at each enforcement scope, a management group included, with the role definition id ARM returns there",
          all(ra.get(n, {}).get("for_each") == "${local.enforcement_scopes}" and ra.get(n, {}).get("scope") == "${each.value}"
              and str(ra.get(n, {}).get("role_definition_id", "")).startswith("${local.role_definition_base[each.value]}/")
              for n in ("tag_contributor", "reader"))
          and "startswith(s, local.mg_scope_prefix) ? \"/providers/Microsoft.Authorization/roleDefinitions\"" in rdb
          and '"/subscriptions/${split(\"/\", s)[2]}/providers/Microsoft.Authorization/roleDefinitions"' in rdb
          and "for s in local.enforcement_scopes" in rdb, rdb)
    tw, bw = rdef.get("tag_writer", {}), rdef.get("blob_writer", {})
    tas = str(L.get("tag_writer_assignable_scopes", ""))
    check("the tag writer role's assignable_scopes include the management group (and the other subscriptions it is assigned in); "
          "the blob writer (DataActions) stays assignable in this subscription only",
          tw.get("assignable_scopes") == "${local.tag_writer_assignable_scopes}" and tw.get("scope") == "${local.subscription_id}"
          and tas.startswith("${distinct(concat([local.subscription_id], local.mg_scopes,")
          and "local.arm_scopes" in tas and "!= local.home_subscription" in tas
          and L.get("mg_scopes") == "${[for s in local.enforcement_scopes : s if startswith(s, local.mg_scope_prefix)]}"
          and bw.get("assignable_scopes") == ["${local.subscription_id}"], tas)

    # The app settings: the management group as-is; every topic's source, in any subscription.
    contract = L.get("contract_app_settings", {}) if isinstance(L.get("contract_app_settings"), dict) else {}
    check("TAGWARDEN_SWEEP_SCOPES carries the enforcement scopes as given (a management group id as-is); "
          "TAGWARDEN_EVENT_TOPICS every ARM topic's source (local.arm_topics: created, existing, other subscriptions)",
          contract.get("TAGWARDEN_SWEEP_SCOPES") == '${join(",", sort(tolist(local.enforcement_scopes)))}'
          and "keys(local.arm_topics)" in str(contract.get("TAGWARDEN_EVENT_TOPICS")))
    out = json.dumps(mod["output"].get("event_subscription_ids", {}))
    check("output event_subscription_ids.arm includes the event subscriptions in other subscriptions (the module's ids: azurerm's and azapi's)",
          "module.arm_event_subscriptions.ids" in out)


RN_TOPIC_TYPE = "Microsoft.ResourceNotifications.Resources"
RN_EVENT = "Microsoft.ResourceNotifications.Resources.CreatedOrUpdated"


def check_resource_notifications(mod: dict, V: dict, L: dict, R: dict, ra: dict, readme: str) -> None:
    """Azure Resource Notifications topics and subscriptions beside the ARM ones."""
    guid = "11111111-2222-3333-4444-555555555555"
    rn = V.get("resource_notifications", {})
    desc = str(rn.get("description", ""))
    check("resource_notifications: bool, default false, not nullable, described (preview, the deployer's subscribeToResources/action, ResourceWriteSuccess kept)",
          rn.get("type") in ("bool", "${bool}") and rn.get("default") is False and rn.get("nullable") is False
          and all(x in desc for x in ("preview", "Microsoft.ResourceNotifications/systemTopics/subscribeToResources/action",
                                      "ResourceWriteSuccess", RN_TOPIC_TYPE)), f"{rn}")

    ex = V.get("existing_resource_notifications_topics", {})
    conds = [str(v.get("condition", "")) for v in ex.get("validation", [])]
    rx = hcl_regexes(next((c for c in conds if "regex(" in c), ""))
    key_rx = rx[:1]
    wrong = [k for k in (f"/subscriptions/{guid}", f"/subscriptions/{guid.upper()}") if not accepts(key_rx, k)] + [k for k in (
        f"/subscriptions/{guid}/resourceGroups/rg", guid, f"/subscriptions/{guid[:-1]}", f"/subscriptions/{guid}/",
        "/providers/Microsoft.Management/managementGroups/platform") if accepts(key_rx, k)]
    check("existing_resource_notifications_topics: map(object({name, resource_group_name})), default {}, keys are /subscriptions/<guid> only",
          ex.get("type") == "${map(object({name = string, resource_group_name = string}))}" and ex.get("default") == {}
          and key_rx and not wrong, f"type={ex.get('type')} regexes {rx}, wrong on {wrong}")
    check("existing_resource_notifications_topics keys must be a source's subscription, each once, and need resource_notifications",
          any("var.enforcement_scopes" in c and "var.event_source_subscription_ids" in c and "distinct(" in c for c in conds)
          and any(c.strip() == "${var.resource_notifications || length(var.existing_resource_notifications_topics) == 0}" for c in conds),
          f"{conds}")

    # Locals: one topic per subscription of the ARM sources, only with the option; existing ones
    # reused; azurerm at home, azapi elsewhere.
    filt = L.get("rn_filter", {}) if isinstance(L.get("rn_filter"), dict) else {}
    check("the Resource Notifications filter: CreatedOrUpdated only, each ARM source's subject prefix '<source>/'",
          L.get("rn_topic_type") == RN_TOPIC_TYPE and filt.get("included_event_types") == [RN_EVENT]
          and filt.get("subject_begins_with") == '${{for s in local.arm_sources : s => "${s}/"}}', f"{filt}")
    check("one topic per subscription of the ARM sources (lowercase /subscriptions/<guid>), only with resource_notifications",
          L.get("rn_sources") == '${var.resource_notifications ? toset([for s in local.arm_sources : "/subscriptions/${local.source_subscription[s]}"]) : toset([])}'
          and L.get("rn_source_of") == '${{for s in local.arm_sources : s => "/subscriptions/${local.source_subscription[s]}"}}',
          f"{L.get('rn_sources')}")
    check("an existing topic (keys compared without case) is not created; azurerm creates at home, azapi elsewhere",
          "lower(k) == s" in str(L.get("rn_existing_topic_of")) and "var.existing_resource_notifications_topics" in str(L.get("rn_existing_topic_of"))
          and "create = !contains(keys(local.rn_existing_topic_of), s)" in str(L.get("rn_topic_specs"))
          and "contains(local.rn_foreign_sources, s) ? split(\"/\", s)[2] : null" in str(L.get("rn_topic_specs"))
          and "!contains(keys(local.rn_existing_topic_of), s)" in str(L.get("created_foreign_rn_topic_sources"))
          and "local.rn_foreign_sources" in str(L.get("created_foreign_rn_topic_sources"))
          and "!= local.home_subscription" in str(L.get("rn_foreign_sources")))

    rspecs = str(L.get("rn_topic_specs", ""))
    check("one topic per subscription (modules/system_topic): Microsoft.ResourceNotifications.Resources, source = the subscription, "
          "global (the module's default), named <name>-rn-<hash>, in another subscription under its events group",
          "topic_type = local.rn_topic_type" in rspecs and "source_resource_id = s" in rspecs and "location" not in rspecs
          and '"${local.name}-${local.rn_topic_key[s]}"' in rspecs
          and 'contains(local.created_foreign_rn_topic_sources, s) ? local.event_resource_group_id[split("/", s)[2]] : null' in rspecs
          and "local.created_foreign_rn_topic_sources" in str(L.get("foreign_topic_subscriptions")), rspecs)
    check_topic_call(mod, L, "resource_notifications_topics", "rn_topic_specs", "rn_topics", "existing_resource_notifications_topics")

    # Event subscriptions: one per ARM source, on its subscription's topic, once the package is
    # published; the ARM subscriptions' destination, retry and dead-lettering.
    check("one event subscription per ARM source on its subscription's topic, only with the option and a published package; home/foreign by the source",
          L.get("rn_subscriptions") == "${{for s in local.arm_sources : s => local.rn_topics[local.rn_source_of[s]] if var.resource_notifications && local.package_published}}"
          , f"{L.get('rn_subscriptions')}")
    m = check_subscription_call(mod, "resource_notifications_event_subscriptions", "rn_subscriptions")
    arm = mod["module"].get("arm_event_subscriptions", {})
    sp = str(m.get("subscriptions", ""))
    types = resolve("${local.rn_filter.included_event_types}", L)
    check("event subscriptions: CreatedOrUpdated to drift, subject '<source>/' (without case: the module), no advanced filter, named by source (<= 64 characters)",
          "included_event_types = local.rn_filter.included_event_types" in sp and types == [RN_EVENT]
          and "subject_begins_with = local.rn_filter.subject_begins_with[s]" in sp and "advanced_filter" not in sp
          # name: <name>-<infra_id> is at most 20 + 1 + 27 characters (variables.tf regexes), arm_scope_key 12.
          and 'name = "${local.name}-${local.arm_scope_key[s]}"' in sp and 48 + 1 + 12 <= 64, sp)
    check("event subscriptions: the ARM subscriptions' function, retry policy and dead-lettering",
          all(m.get(k) == arm.get(k) and m.get(k) for k in ("function_id", "max_delivery_attempts", "event_time_to_live_minutes",
                                                           "dead_letter_storage_account_id", "dead_letter_container_name")), f"{m}")

    # The function accepts their deliveries; dead-lettering, alerts, workbook and outputs cover them.
    contract = L.get("contract_app_settings", {}) if isinstance(L.get("contract_app_settings"), dict) else {}
    check("TAGWARDEN_EVENT_TOPICS lists the Resource Notifications topics' sources (/subscriptions/<guid>) not already there",
          "local.rn_event_topic_sources" in str(contract.get("TAGWARDEN_EVENT_TOPICS"))
          and L.get("rn_event_topic_sources") == "${[for s in keys(local.rn_topics) : s if !contains([for k in keys(local.arm_topics) : lower(k)], s)]}",
          f"{contract.get('TAGWARDEN_EVENT_TOPICS')} / {L.get('rn_event_topic_sources')}")
    wb = json.dumps(L.get("workbook"))
    check("each Resource Notifications topic's identity writes dead letters, and has its dead-letter alert and workbook row",
          "local.rn_topics" in str(ra.get("dead_letter_writer", {}).get("for_each"))
          and "local.rn_topics" in str(L.get("dead_letter_topics")) and "local.rn_topics" in wb)
    outs = json.dumps({k: mod["output"].get(k, {}) for k in ("system_topic_ids", "event_subscription_ids")})
    check("outputs system_topic_ids and event_subscription_ids carry resource_notifications",
          "local.rn_topics" in outs and "module.resource_notifications_event_subscriptions.ids" in outs)
    doc = readme.split("## Resource Notifications (preview)")[1].split("\n## ")[0] if "## Resource Notifications (preview)" in readme else ""
    check("README 'Resource Notifications (preview)': what is created, which event each type takes, why ResourceWriteSuccess stays, "
          "the deployer's permission, preview, one topic per source",
          all(x in doc for x in ("**What is created.**", "**Which event each type takes.**", "costs nothing more than before",
                                 "does not cover", "**Permission of the deploying principal.**",
                                 "Microsoft.ResourceNotifications/systemTopics/subscribeToResources/action",
                                 "0b962ed2-6d56-471c-bd5f-3477d83a7ba4", "preview", "**One topic per source.**",
                                 "existing_resource_notifications_topics", "Inferred, not run here")))


def main() -> int:
    global TOPICS, SUBS
    _, mod = parse_dir(MODULE)
    TOPICS = topic_module()
    _, SUBS = parse_dir(SUBS_MODULE)
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
        ("azurerm_function_app_flex_consumption", "this"),
        ("azurerm_eventgrid_system_topic", "policy"),
        ("azurerm_storage_queue", "sweep"), ("azurerm_storage_queue", "sweep_poison"),
        ("time_sleep", "role_propagation"), ("terraform_data", "package"),
        ("azurerm_eventgrid_system_topic_event_subscription", "policy"), ("azurerm_log_analytics_workspace", "this"),
        ("azurerm_application_insights", "this"), ("azurerm_application_insights_workbook", "this"),
        ("azurerm_monitor_action_group", "this"), ("azurerm_monitor_metric_alert", "this"),
        ("azurerm_monitor_metric_alert", "dead_letters"),
    ]
    missing = [f"{t}.{n}" for t, n in required if (t, n) not in R]
    check("required resources exist", not missing, f"missing: {missing}")
    check("resource group optional (count on create_resource_group) with existing-RG data source",
          "create_resource_group" in str(R.get(("azurerm_resource_group", "this"), {}).get("count"))
          and ("azurerm_resource_group", "existing") in mod["data"])

    # Tags everywhere they exist.
    untagged = [f"{t}.{n}" for (t, n), b in R.items()
                if t.startswith("azurerm_") and t not in UNTAGGABLE and b.get("tags") != "${local.tags}"]
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
    # zip_deploy_file posts to /api/zipdeploy, which Flex does not implement
    # (terraform-provider-azurerm #29630); the package goes through One Deploy (az CLI) instead,
    # and the ARM subscriptions wait for it.
    check("no zip_deploy_file on the Flex app (provider posts to /api/zipdeploy), basic-auth publishing off",
          "zip_deploy_file" not in fa and fa.get("webdeploy_publish_basic_authentication_enabled") is False)
    pkg = R.get(("terraform_data", "package"), {})
    prov = first(first(pkg.get("provisioner")).get("local-exec")) if pkg.get("provisioner") else {}
    cmd = str(prov.get("command", ""))
    env = prov.get("environment", {}) or {}
    check("terraform_data.package publishes var.function_zip with One Deploy (az ... config-zip) and waits for `drift`",
          "var.function_zip == null ? 0 : 1" in str(pkg.get("count"))
          and "filesha256(var.function_zip)" in str(pkg.get("triggers_replace"))
          and "az functionapp deployment source config-zip" in cmd and "az functionapp function show" in cmd
          and "--subscription" in cmd and env.get("FUNCTION") == "${local.function_drift_name}"
          and "abspath(var.function_zip)" in str(env.get("PACKAGE")),
          f"count={pkg.get('count')} env={env}")
    check("package_published = function_zip given or var.package_published (default false)",
          L.get("package_published") == "${var.function_zip != null || var.package_published}"
          and var_default(V, "package_published") is False)
    check("function: https only, deployment storage via managed identity",
          fa.get("https_only") is True and fa.get("storage_authentication_type") == "UserAssignedIdentity"
          and fa.get("storage_user_assigned_identity_id") == "${azurerm_user_assigned_identity.platform.id}")

    app_settings = fa.get("app_settings", "")
    contract = resolve("${local.contract_app_settings}", L)
    check("app_settings merge the contract map",
          app_settings == "${local.app_settings}" and "local.contract_app_settings" in str(L.get("app_settings")))
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
        # Event Grid writes a system topic's source into an event's `topic`, so the
        # accepted list is the ARM topics' sources (their keys) and the policy storage account:
        # the topics' own ids would refuse every delivery.
        topics = str(contract.get("TAGWARDEN_EVENT_TOPICS"))
        check("TAGWARDEN_EVENT_TOPICS lists the topics' sources (scopes, policy account), not the topics' ids",
              "keys(local.arm_topics)" in topics and "azurerm_storage_account.policy.id" in topics and ".id]" not in topics.replace("policy.id]", ""),
              topics)
    check("defaults: ARM endpoint https://management.azure.com, POLICY_TTL 60, sweep hourly",
          var_default(V, "arm_endpoint") == "https://management.azure.com" and var_default(V, "policy_ttl_seconds") == 60
          and var_default(V, "sweep_schedule") == "0 0 * * * *")
    check("policy_container named `policy`, status blob is tagwarden-status.json (a set: one per cluster folder)",
          L.get("policy_container") == "policy" and "${local.policy_dir}tagwarden-status.json" in str(L.get("status_blob", ""))
          and "${local.set_prefix}*/tagwarden-status.json" in str(L.get("status_blob", "")))

    # Event Grid: ARM topics, one per enforcement scope (one system topic per source).
    specs = str(L.get("arm_topic_specs", ""))
    ttype = str(L.get("arm_topic_type", ""))
    check("one ARM system topic per source (enforcement scope or listed subscription), global (the module's default), source = the scope, type by scope kind",
          "for s in local.arm_sources : s =>" in specs and "source_resource_id = s" in specs and "location" not in specs
          and "topic_type = local.arm_topic_type[s]" in specs and '"${local.name}-arm-${local.arm_scope_key[s]}"' in specs
          and "Microsoft.Resources.ResourceGroups" in ttype and "Microsoft.Resources.Subscriptions" in ttype
          and "/resourcegroups/" in ttype, specs)
    check_system_topic_module(TOPICS)
    check_topic_call(mod, L, "arm_topics", "arm_topic_specs", "arm_topics", "existing_system_topics")
    # An upgrade from the layout before the module moves the created topics into it (same keys).
    moves = re.findall(r"moved\s*\{\s*from\s*=\s*(\S+)\s*to\s*=\s*(\S+)\s*\}", mod_text)
    want = [("azurerm_eventgrid_system_topic.arm", "module.arm_topics.azurerm_eventgrid_system_topic.this"),
            ("azapi_resource.arm_topic", "module.arm_topics.azapi_resource.this"),
            ("azurerm_eventgrid_system_topic.resource_notifications", "module.resource_notifications_topics.azurerm_eventgrid_system_topic.this"),
            ("azapi_resource.resource_notifications_topic", "module.resource_notifications_topics.azapi_resource.this"),
            ("azurerm_eventgrid_system_topic_event_subscription.arm", "module.arm_event_subscriptions.azurerm_eventgrid_system_topic_event_subscription.this"),
            ("azapi_resource.arm_event_subscription", "module.arm_event_subscriptions.azapi_resource.this"),
            ("azurerm_eventgrid_system_topic_event_subscription.resource_notifications",
             "module.resource_notifications_event_subscriptions.azurerm_eventgrid_system_topic_event_subscription.this"),
            ("azapi_resource.resource_notifications_event_subscription", "module.resource_notifications_event_subscriptions.azapi_resource.this")]
    check("the topics and event subscriptions created before modules/system_topic and modules/event_subscription move into them (moved blocks: nothing destroyed on upgrade)",
          all(w in moves for w in want), f"{moves}")
    subs_topics = [n for (t, n), b in R.items() if t == "azurerm_eventgrid_system_topic"
                   and "subscription_id" in str(b.get("source_resource_id"))]
    check("no system topic hard-wired to the whole subscription", not subs_topics, f"{subs_topics}")
    check("sources with an existing topic get none created (existing_system_topics, keys compared without case)",
          "create = !contains(keys(local.existing_topic_of), s)" in specs
          and "!contains(keys(local.existing_topic_of), s)" in str(L.get("created_foreign_topic_sources"))
          and "lower(k) == lower(s)" in str(L.get("existing_topic_of"))
          and var_default(V, "existing_system_topics") == {})
    check_event_subscription_module(SUBS)
    m = check_subscription_call(mod, "arm_event_subscriptions", "arm_subscriptions")
    sp = str(m.get("subscriptions", ""))
    check("one ARM event subscription per topic (on the topic's own resource group: modules/event_subscription), named <name>-drift",
          'name = "${local.name}-drift"' in sp and "topic_resource_group_name = t.resource_group_name" in sp, sp)
    check("ARM event subscriptions only once the package is published, after terraform_data.package",
          "local.arm_topics" in str(L.get("arm_subscriptions")) and "if local.package_published" in str(L.get("arm_subscriptions"))
          and "${terraform_data.package}" in m.get("depends_on", []))
    types = resolve("${local.arm_filter.included_event_types}", L)
    check("ARM event subscription includes only Microsoft.Resources.ResourceWriteSuccess",
          "included_event_types = local.arm_filter.included_event_types" in sp
          and types == ["Microsoft.Resources.ResourceWriteSuccess"], f"got {types}")
    check("ARM event subscription: Event Grid schema (the module), azure function endpoint -> function `drift`",
          m.get("function_id") == "${local.drift_function_id}"
          and str(L.get("drift_function_id", "")).endswith("/functions/${local.function_drift_name}")
          and L.get("function_drift_name") == "drift")
    nbw = resolve("${local.arm_filter.string_not_begins_with}", L)
    prefixes = var_default(V, "ignored_operation_prefixes") or []
    check("ARM filter: data.operationName StringNotBeginsWith deployments/ and Microsoft.Authorization/",
          isinstance(nbw, dict) and nbw.get("data.operationName") == "${var.ignored_operation_prefixes}"
          and "Microsoft.Resources/deployments/" in prefixes and "Microsoft.Authorization/" in prefixes
          and not any(p.lower().startswith("microsoft.resources/tags") for p in prefixes))
    check("ARM filter: advanced_filter carries string_not_begins_with and string_not_in (self); scoping is the topic's source",
          "advanced_filter = {string_not_begins_with = local.arm_filter.string_not_begins_with, string_not_in = local.arm_filter.string_not_in}" in sp, sp)
    check("ARM filter: self exclusion keys", "data.authorization.evidence.principalId" in str(L.get("arm_filter"))
          and "data.claims.appid" in str(L.get("arm_filter")))
    s = R.get(("azurerm_eventgrid_system_topic_event_subscription", "policy"), {})
    dl = first(s.get("storage_blob_dead_letter_destination"))
    rp = first(s.get("retry_policy"))
    check("policy event subscription dead-letters to the dead-letter container (topic identity) with a retry policy",
          dl.get("storage_blob_container_name") == "${azurerm_storage_container.dead_letters.name}"
          and first(s.get("dead_letter_identity")).get("type") == "SystemAssigned"
          and "max_delivery_attempts" in rp and "event_time_to_live" in rp)

    # Event Grid: policy blob subscription -> sweep queue.
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
          and nends.get("key") == "subject" and nends.get("values") == ["/tagwarden-status.json"])
    sq = first(pes.get("storage_queue_endpoint"))
    check("policy BlobCreated goes to the sweep storage queue (runtime account), not into a function delivery",
          "azure_function_endpoint" not in pes and "webhook_endpoint" not in pes
          and sq.get("storage_account_id") == "${azurerm_storage_account.runtime.id}"
          and sq.get("queue_name") == "${azurerm_storage_queue.sweep.name}"
          and first(pes.get("delivery_identity")).get("type") == "SystemAssigned")
    q = R.get(("azurerm_storage_queue", "sweep"), {})
    pq = R.get(("azurerm_storage_queue", "sweep_poison"), {})
    check("queue named by var.sweep_queue_name (default tagwarden-sweep) in the runtime account, poison queue beside it",
          var_default(V, "sweep_queue_name") == "tagwarden-sweep" and L.get("sweep_queue_name") == "${var.sweep_queue_name}"
          and q.get("name") == "${local.sweep_queue_name}" and q.get("storage_account_id") == "${azurerm_storage_account.runtime.id}"
          and pq.get("name") == "${local.sweep_queue_name}-poison")
    plat = L.get("platform_app_settings", {})
    check("app setting TAGWARDEN_SWEEP_QUEUE = the queue's name (sweep-queue/function.json %TAGWARDEN_SWEEP_QUEUE%)",
          isinstance(plat, dict) and plat.get("TAGWARDEN_SWEEP_QUEUE") == "${azurerm_storage_queue.sweep.name}"
          and "local.platform_app_settings" in str(L.get("app_settings"))
          and plat.get("AzureWebJobsStorage__clientId") == "${azurerm_user_assigned_identity.platform.client_id}")

    # Role assignments.
    role_ids = L.get("role_ids", {})
    check("role id table matches the built-in role ids",
          role_ids == {"reader": ROLE_IDS["Reader"],
                       "storage_blob_data_reader": ROLE_IDS["Storage Blob Data Reader"],
                       "storage_blob_data_contributor": ROLE_IDS["Storage Blob Data Contributor"],
                       "monitoring_metrics_publisher": ROLE_IDS["Monitoring Metrics Publisher"],
                       "storage_queue_data_reader": ROLE_IDS["Storage Queue Data Reader"],
                       "storage_queue_data_processor": ROLE_IDS["Storage Queue Data Message Processor"],
                       "storage_queue_data_sender": ROLE_IDS["Storage Queue Data Message Sender"],
                       "storage_queue_data_contributor": ROLE_IDS["Storage Queue Data Contributor"]}, f"got {role_ids}")
    ra = {n: b for (t, n), b in R.items() if t == "azurerm_role_assignment"}
    expect = {
        # name: (role key, scope expression, principal expression)
        "tag_contributor": ("azurerm_role_definition.tag_writer", "${each.value}", "${local.code_principal_id}"),
        "reader": ("reader", "${each.value}", "${local.code_principal_id}"),
        "policy_reader": ("storage_blob_data_reader", "${local.policy_container_scope}", "${local.code_principal_id}"),
        "status_report_writer": ("azurerm_role_definition.blob_writer", "${local.policy_container_scope}", "${local.code_principal_id}"),
        "cluster_publishers": ("azurerm_role_definition.blob_writer", "${local.policy_container_scope}", "${each.value}"),
        "metrics_publisher": ("monitoring_metrics_publisher", "${azurerm_function_app_flex_consumption.this.id}", "${local.code_principal_id}"),
        "dead_letter_writer": ("storage_blob_data_contributor", "${local.dead_letter_container_scope}", "${each.value}"),
        "runtime_storage": ("storage_blob_data_contributor", "${azurerm_storage_account.runtime.id}", "${azurerm_user_assigned_identity.platform.principal_id}"),
        # The queue trigger reads through AzureWebJobsStorage (platform identity); Event Grid
        # delivers with the policy topic's identity.
        "sweep_queue_reader": ("storage_queue_data_reader", "${local.sweep_queue_scope}", "${azurerm_user_assigned_identity.platform.principal_id}"),
        "sweep_queue_processor": ("storage_queue_data_processor", "${local.sweep_queue_scope}", "${azurerm_user_assigned_identity.platform.principal_id}"),
        "sweep_poison_queue": ("storage_queue_data_contributor", "${local.sweep_poison_queue_scope}", "${azurerm_user_assigned_identity.platform.principal_id}"),
        "sweep_queue_sender": ("storage_queue_data_sender", "${local.sweep_queue_scope}", "${azurerm_eventgrid_system_topic.policy.identity[0].principal_id}"),
        # The timer's per-subscription parts, through sweep/function.json's queue
        # output on the same connection (platform identity): add messages, on the one queue.
        "sweep_queue_parts_sender": ("storage_queue_data_sender", "${local.sweep_queue_scope}", "${azurerm_user_assigned_identity.platform.principal_id}"),
    }
    for name, (role, scope, principal) in expect.items():
        b = ra.get(name, {})
        rd = str(b.get("role_definition_id", ""))
        ok = (role in rd or role_ids.get(role, "?") in rd) and b.get("scope") == scope and (principal is None or b.get("principal_id") == principal)
        check(f"role assignment {name}: {role} at {scope}", ok, f"got role={rd} scope={b.get('scope')} principal={b.get('principal_id')}")
    check("Tag Contributor and Reader for_each the enforcement scopes",
          ra.get("tag_contributor", {}).get("for_each") == "${local.enforcement_scopes}"
          and ra.get("reader", {}).get("for_each") == "${local.enforcement_scopes}")
    # Never the subscription by default. Never a guessed "<infra_id>-rg"
    # either: the scopes are required, and the examples take the resource group the cluster reports.
    es_local = str(L.get("enforcement_scopes"))
    es_valid = json.dumps(first(V.get("enforcement_scopes", {}).get("validation")))
    check("enforcement_scopes required (no default, no <infra_id>-rg guess); empty list refused",
          "enforcement_scopes" in V and "default" not in V["enforcement_scopes"]
          and es_local == "${toset(var.enforcement_scopes)}" and "resourceGroups/${id}-rg" not in mod_text
          and "length(var.enforcement_scopes) > 0" in es_valid, f"local={es_local}")
    dl = ra.get("dead_letter_writer", {})
    check("dead-letter writer role for every ARM topic (created or existing) and the policy topic",
          "local.arm_topics" in str(dl.get("for_each")) and "azurerm_eventgrid_system_topic.policy" in str(dl.get("for_each")))
    ts = R.get(("time_sleep", "role_propagation"), {})
    trig = str(ts.get("triggers"))
    blobs_wait = all("${time_sleep.role_propagation}" in R.get(("azurerm_storage_blob", n), {}).get("depends_on", [])
                     for n in ("policy_document", "policy_layers"))
    check("policy upload and Event Grid subscriptions wait for role propagation (time_sleep, default 10m)",
          ts.get("create_duration") == "${var.role_assignment_propagation_wait}"
          and var_default(V, "role_assignment_propagation_wait") == "10m"
          and "azurerm_role_assignment.policy_writers" in trig and "azurerm_role_assignment.dead_letter_writer" in trig
          and "azurerm_role_assignment.sweep_queue_sender" in trig and blobs_wait
          and "${time_sleep.role_propagation}" in mod["module"].get("arm_event_subscriptions", {}).get("depends_on", [])
          and "${time_sleep.role_propagation}" in pes.get("depends_on", []))
    check("policy container scope is the container, not the account",
          str(L.get("policy_container_scope", "")).endswith("/blobServices/default/containers/${azurerm_storage_container.policy.name}"))
    sr = ra.get("status_report_writer", {})
    cond = str(resolve(sr.get("condition"), L))
    write_actions = ["blobs/write", "blobs/add/action", "blobs/delete", "blobs/move/action"]
    check("status report writer: ABAC condition 2.0 limits every blob change to the status blob path",
          sr.get("condition_version") == "2.0"
          and all(f"ActionMatches{{'Microsoft.Storage/storageAccounts/blobServices/containers/{a}'}}" in cond for a in write_actions)
          and """@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] ${local.cluster_set ? "StringLike" : "StringEquals"} '${local.status_blob}'""" in cond)
    # Custom roles with only what the code does; each publisher of a set writes
    # only its own folder (ABAC on the blob path).
    rdef = {n: b for (t, n), b in R.items() if t == "azurerm_role_definition"}
    tw = first(rdef.get("tag_writer", {}).get("permissions")) or {}
    check("tag writer role = resource reads + Microsoft.Resources/tags read and write (no deployments, no tag delete)",
          sorted(norm(tw.get("actions", []))) == sorted([
              "Microsoft.Resources/subscriptions/resourceGroups/read",
              "Microsoft.Resources/subscriptions/resourceGroups/resources/read",
              "Microsoft.Resources/subscriptions/resources/read",
              "Microsoft.Resources/tags/read", "Microsoft.Resources/tags/write"])
          and not tw.get("data_actions"), f"got {tw}")
    bw = first(rdef.get("blob_writer", {}).get("permissions")) or {}
    blob = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/"
    check("blob writer role = blob read, write, add data actions only (no delete, no container control plane)",
          sorted(norm(bw.get("data_actions", []))) == sorted([blob + "read", blob + "write", blob + "add/action"])
          and not norm(bw.get("actions", [])), f"got {bw}")
    cp = ra.get("cluster_publishers", {})
    pcond = str(L.get("cluster_publisher_condition"))
    check("each cluster publisher writes only <prefix><infraID>/ (ABAC 2.0, blobs:path StringStartsWith)",
          cp.get("for_each") == "${var.cluster_publisher_principal_ids}" and cp.get("condition_version") == "2.0"
          and cp.get("condition") == "${local.cluster_publisher_condition[each.key]}"
          and "@Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringStartsWith '${local.set_prefix}${id}/'" in pcond
          and all(f"ActionMatches{{'{blob}{a}'}}" in pcond for a in ("write", "add/action")), f"got {cp} {pcond}")
    every_ra_described = [n for n, b in ra.items() if not b.get("description")]
    check("every role assignment has a description", not every_ra_described, f"{every_ra_described}")
    all_text = mod_text + "".join(text_of(d) for d in EXAMPLES.values())
    bad = [r for r, gid in FORBIDDEN_ROLES.items()
           if gid in all_text or re.search(rf'role_definition_name\s*=\s*"{re.escape(r)}"', all_text)]
    check("no Owner / Contributor / User Access Administrator role anywhere", not bad, f"found: {bad}")
    check("no role_definition_name lookups (built-in ids only)", "role_definition_name" not in all_text)

    # One function for a management group and many subscriptions.
    check_management_groups(mod, V, L, R, ra, rdef)
    # Resource Notifications.
    check_resource_notifications(mod, V, L, R, ra, (MODULE / "README.md").read_text() if (MODULE / "README.md").exists() else "")

    # Monitoring.
    ai = R.get(("azurerm_application_insights", "this"), {})
    check("Application Insights is workspace-based", ai.get("workspace_id") == "${azurerm_log_analytics_workspace.this.id}")
    check("local.tagwarden_metrics lists all 11 metrics", L.get("tagwarden_metrics") == METRICS, f"got {L.get('tagwarden_metrics')}")
    wb = R.get(("azurerm_application_insights_workbook", "this"), {})
    wbl = json.dumps(L.get("workbook"))
    wbi = json.dumps(L.get("workbook_metric_items"))
    check("workbook: data_json renders local.workbook built from every metric + DeadLetteredCount",
          wb.get("data_json") == "${jsonencode(local.workbook)}" and "local.workbook_metric_items" in wbl
          and "local.tagwarden_metrics" in wbi and "DeadLetteredCount" in wbl and L.get("metric_namespace") == "TagWarden")
    check("workbook: metrics split by ResourceType (a set: by InfraID) and filtered on the deployment's InfraIDs",
          "local.workbook_split" in wbi and "local.workbook_infra_ids" in wbi
          and L.get("workbook_split") == '${local.cluster_set ? "InfraID" : "ResourceType"}')
    # One resource (azurerm_monitor_metric_alert.this) per entry of local.metric_alerts; an entry
    # without namespace/scope/aggregation/threshold takes the resource's defaults: a TagWarden
    # custom metric on the Function App, Total > 0, metric validation skipped.
    alerts = L.get("metric_alerts", {})
    alert = R.get(("azurerm_monitor_metric_alert", "this"), {})
    crit = first(alert.get("criteria"))
    custom = {k: a for k, a in alerts.items() if "namespace" not in a and "scope" not in a}
    check("alerts: WriteFailures > 0, Contested > 0, PolicyRejected > 0 and ListingFailures > 0 (custom metrics, TagWarden namespace)",
          {a.get("metric") for k, a in custom.items() if "threshold" not in a and "aggregation" not in a}
          == {"WriteFailures", "Contested", "PolicyRejected", "ListingFailures"}
          and alert.get("for_each") == "${local.metric_alerts}" and alert.get("name") == "${local.name}-${each.key}"
          and alert.get("scopes") == ["${try(each.value.scope, azurerm_function_app_flex_consumption.this.id)}"]
          and crit.get("operator") == "GreaterThan" and crit.get("threshold") == "${try(each.value.threshold, 0)}"
          and crit.get("aggregation") == '${try(each.value.aggregation, "Total")}'
          and crit.get("metric_namespace") == "${try(each.value.namespace, local.metric_namespace)}"
          and crit.get("skip_metric_validation") == "${try(each.value.namespace, local.metric_namespace) == local.metric_namespace}",
          f"alerts {sorted(alerts)}")
    fe = alerts.get("function-errors", {})
    lag = alerts.get("compliance-lag", {})
    dlc = first(R.get(("azurerm_monitor_metric_alert", "dead_letters"), {}).get("criteria"))
    check("alerts: function errors (Application Insights requests/failed, Count > 0), compliance lag (ComplianceLag Maximum > "
          "var.compliance_lag_threshold_ms, custom metric) and dead-lettered events",
          fe.get("metric") == "requests/failed" and fe.get("namespace") == "microsoft.insights/components"
          and fe.get("scope") == "${azurerm_application_insights.this.id}" and fe.get("aggregation") == "Count"
          and "threshold" not in fe and fe.get("infra_ids") is None
          and lag.get("metric") == "ComplianceLag" and lag.get("aggregation") == "Maximum"
          and lag.get("threshold") == "${var.compliance_lag_threshold_ms}" and "namespace" not in lag and "scope" not in lag
          and dlc.get("metric_name") == "DeadLetteredCount", f"function-errors {fe}, compliance-lag {lag}")
    # The rules that were resources of their own keep their state (moved blocks, one per instance).
    moved = {(m.get("from"), m.get("to")) for m in mod.get("moved", [])}
    was_custom = ["write-failures", "contested", "policy-rejected", "listing-failures"]
    old = [f"custom[\"{k}\"]" for k in was_custom] + ["compliance_lag", "function_errors"]
    new = [f"this[\"{k}\"]" for k in was_custom] + ['this["compliance-lag"]', 'this["function-errors"]']
    want_moved = {(f"${{azurerm_monitor_metric_alert.{o}}}", f"${{azurerm_monitor_metric_alert.{n}}}") for o, n in zip(old, new)}
    check("the former alert resources (custom[*], compliance_lag, function_errors) move into azurerm_monitor_metric_alert.this",
          want_moved <= moved, f"missing moved {sorted(want_moved - moved)}; have {sorted(moved)}")
    # Compliance from day one, audit or enforce. The workbook's panels: compliance
    # % per cluster (a grid) and hourly, would-be writes per cluster (KQL over the records the
    # handler logs, counted as Metrics::observe counts them), and the function's own
    # ResourcesInLine / ResourcesDrifted / WouldWrite metrics. The statuses the KQL names are the
    # Rust Status::as_str values; the metric names are the ones crates/azure/src/metrics.rs sends.
    items = L.get("compliance_items") or []
    by_name = {i.get("name"): i for i in items if isinstance(i, dict)}
    kql = str(L.get("compliance_records_kql", ""))
    grid = str(by_name.get("compliance-per-cluster", {}).get("content", {}).get("query", ""))
    hourly = str(by_name.get("compliance-over-time", {}).get("content", {}).get("query", ""))
    would = str(by_name.get("would-write-over-time", {}).get("content", {}).get("query", ""))
    mtile = json.dumps(by_name.get("metric-inline-drifted", {}))
    # The core's report module (crates/core/src/report/: the records and the metrics table).
    report_rs = "\n".join(p.read_text() for p in sorted((ROOT / "crates/core/src/report").glob("*.rs")))
    metrics_rs = (ROOT / "crates/azure/src/metrics.rs").read_text()
    rust_status = set(re.findall(r'Status::[A-Za-z]+ => "([a-z-]+)"', report_rs))
    kql_status = set(re.findall(r"'([a-z]+(?:-[a-z]+)*)'", kql.split("| extend InLine", 1)[-1]))
    check("the workbook opens with the compliance panels (after the header), and the header names the mode",
          "local.compliance_items" in wbl and wbl.index("local.compliance_items") < wbl.index("local.workbook_metric_items")
          and "var.mode" in wbl and "Mode **audit**" in wbl,
          f"workbook {wbl[:300]}")
    check("panels compliance-per-cluster (grid), compliance-over-time, would-write-over-time (timecharts), metric-inline-drifted",
          list(by_name) == ["compliance-per-cluster", "compliance-over-time", "would-write-over-time", "metric-inline-drifted"]
          and by_name["compliance-per-cluster"]["content"].get("visualization") == "table"
          and by_name["compliance-over-time"]["content"].get("visualization") == "timechart"
          and by_name["would-write-over-time"]["content"].get("visualization") == "timechart",
          f"items {list(by_name)}")
    check("compliance % = 100 x in line / (in line + drifted) per cluster, each resource's latest record (grid and hourly)",
          "100.0 * ['In line'] / (['In line'] + Drifted)" in grid and "arg_max(timestamp, InLine, Drifted, Audited) by Cluster, Resource" in grid
          and "by Cluster" in grid and "100.0 * InLine / (InLine + Drifted)" in hourly and "bin(timestamp, 1h)" in hourly
          and all(q.startswith("${trimspace(local.compliance_records_kql)}") or "local.compliance_records_kql" in q for q in (grid, hourly, would)),
          f"grid {grid!r}")
    check("would-be writes = resources with an audited change, per cluster, hourly",
          "| where Audited > 0" in would and "dcount(Resource) by bin(timestamp, 1h), Cluster" in would, would)
    check("the KQL reads the function app's records and classifies them with the statuses report/record.rs writes "
          "(in line: unchanged, or applied with nothing held back; drifted: held back or a failed write that carried a change)",
          "cloud_RoleName =~ '${local.function_app_name}'" in kql and '{"record":' in kql
          and "coalesce(tostring(r.infraID), '${local.deployment_infra_id}')" in kql
          and "InLine = Status == 'unchanged' or (Status == 'applied' and Audited == 0 and Contested == 0)" in kql
          and {"applied", "would-apply", "limit-exceeded", "contested", "failed", "unchanged"} <= kql_status <= rust_status
          and '"infraID"' in report_rs and "pub audited: Vec<ChangeRecord>" in report_rs and "pub contested: Vec<String>" in report_rs,
          f"KQL statuses {sorted(kql_status)}, Rust {sorted(rust_status)}")
    # The names come from the one metrics table both clouds' encoders read (report/metrics.rs), which
    # metrics.rs sends; metrics.rs's own test lists them as sent.
    check("the metric tile draws ResourcesInLine, ResourcesDrifted and WouldWrite (the names metrics.rs sends) by ResourceType",
          all(f"--{m}" in mtile and f'metric("{m}",' in report_rs and f'"{m}",' in metrics_rs
              for m in ("ResourcesInLine", "ResourcesDrifted", "WouldWrite"))
          and '"dimension": "ResourceType"' in mtile and "local.clusters" in mtile, mtile)
    # The alerts on failures fire in audit mode too: nothing in them depends on the mode.
    alert_text = json.dumps([L.get("metric_alerts"), L.get("dead_letter_topics")] +
                            [b for (t, _), b in R.items() if t in ("azurerm_monitor_metric_alert", "azurerm_monitor_action_group")])
    check("every alert and the action group are independent of var.mode (they fire in audit as in enforce)",
          "mode" not in alert_text.replace("monitoring", "") and
          {n for (t, n) in R if t == "azurerm_monitor_metric_alert"} >= {"this", "dead_letters"}
          and {"write-failures", "contested", "policy-rejected", "listing-failures", "compliance-lag", "function-errors"} <= set(alerts),
          f"alerts {sorted(n for (t, n) in R if t == 'azurerm_monitor_metric_alert')}")
    ag = R.get(("azurerm_monitor_action_group", "this"), {})
    check("action group only when an email or webhook is given",
          "var.alert_emails" in str(ag.get("count")) and "var.alert_webhook_url" in str(ag.get("count")))

    # One deployment for a cluster set.
    check("infra_id or infra_ids, exactly one (a validation reading both), infra_ids distinct and validated",
          V.get("infra_id", {}).get("default", "x") is None and V.get("infra_ids", {}).get("default", "x") is None
          and "(var.infra_id == null) != (var.infra_ids == null)" in json.dumps(V.get("infra_id", {}).get("validation"))
          and "distinct(var.infra_ids)" in json.dumps(V.get("infra_ids", {}).get("validation")))
    check("clusters = infra_ids, or [infra_id]; a set's name has no infraID",
          L.get("clusters") == "${local.cluster_set ? var.infra_ids : compact([var.infra_id])}"
          and L.get("name") == '${local.cluster_set ? var.name : "${var.name}-${var.infra_id}"}')
    check("a set's TAGWARDEN_POLICY ends in */ under its prefix (default clusters/)",
          '"${local.set_prefix}*/"' in str(L.get("policy_url")) and 'coalesce(var.policy_prefix, "clusters/")' in str(L.get("set_prefix")))
    cp = R.get(("azurerm_storage_blob", "cluster_policy"), {})
    check("cluster_policy_documents become <prefix><infraID>/10-cluster.yaml, after role propagation",
          "var.cluster_policy_documents" in str(cp.get("for_each")) and cp.get("name") == "${local.set_prefix}${each.key}/10-cluster.yaml"
          and "${time_sleep.role_propagation}" in cp.get("depends_on", []))
    check("policy-change events cover the set's prefix",
          "local.cluster_set ? local.set_prefix" in str(L.get("policy_subject_prefix")))
    check("write-failure and lag alerts monitor each cluster's InfraID; policy-rejected and listing-failures the deployment's ('all' in a set)",
          alerts.get("write-failures", {}).get("infra_ids") == "${local.clusters}"
          and alerts.get("policy-rejected", {}).get("infra_ids") == ["${local.deployment_infra_id}"]
          and alerts.get("listing-failures", {}).get("infra_ids") == ["${local.deployment_infra_id}"]
          and alerts.get("compliance-lag", {}).get("infra_ids") == "${local.clusters}"
          and (dim := first(crit.get("dynamic")).get("dimension", {})).get("for_each") == "${each.value.infra_ids == null ? [] : [each.value.infra_ids]}"
          and first(dim.get("content")).get("name") == "InfraID" and first(dim.get("content")).get("values") == "${dimension.value}"
          and L.get("deployment_infra_id") == '${local.cluster_set ? "all" : var.infra_id}')
    fn_pre = json.dumps(R.get(("azurerm_function_app_flex_consumption", "this"), {}).get("lifecycle"))
    check("a set refuses the single-policy inputs and documents of unlisted clusters (preconditions)",
          "cluster_policy_documents needs infra_ids" in fn_pre and "A cluster set (infra_ids) keeps one policy per cluster" in fn_pre)
    _, cx = parse_dir(CLUSTERS_EXAMPLE)
    cm = cx["module"].get("tagwarden", {})
    check_variables("azure-clusters", cx["variable"])
    check("example azure-clusters: one module call with infra_ids, each cluster's resource group given, no default clusters",
          cm.get("source") == "../../azure" and cm.get("infra_ids") == "${keys(var.clusters)}"
          and "infra_id" not in cm and "default" not in cx["variable"].get("clusters", {})
          and "c.resource_group" in str(cm.get("enforcement_scopes"))
          and cm.get("cluster_policy_documents") == "${var.initial_policies}"
          and not [k for k in cm if k not in V and k not in ("source", "version", "providers", "count", "for_each", "depends_on")])

    # The management-group example: one or more subscriptions (any
    # number; tests/terraform/azure/examples/ runs its validation), the group as the one
    # enforcement scope, one topic per listed subscription, publishers limited to their prefix.
    _, mx = parse_dir(MG_EXAMPLE)
    mm = mx["module"].get("tagwarden", {})
    check_variables("azure-management-group", mx["variable"])
    sub_valid = json.dumps(mx["variable"].get("subscription_ids", {}).get("validation"))
    mprov = mx["provider"]
    check("example azure-management-group: the management group is the enforcement scope, any number (>= 1) of subscriptions feed events, "
          "clusters by infraID with their publishers, only module variables",
          mm.get("source") == "../../azure"
          and mm.get("enforcement_scopes") == [MG_PREFIX + "${var.management_group_id}"]
          and mm.get("event_source_subscription_ids") == "${var.subscription_ids}"
          and "length(var.subscription_ids) >= 1" in sub_valid and "== 3" not in sub_valid
          and "default" not in mx["variable"].get("subscription_ids", {})
          and "default" not in mx["variable"].get("management_group_id", {})
          and mm.get("infra_ids") == "${keys(var.clusters)}" and "default" not in mx["variable"].get("clusters", {})
          and "var.clusters" in str(mm.get("cluster_publisher_principal_ids"))
          and mm.get("existing_system_topics") == "${var.existing_system_topics}"
          and not [k for k in mm if k not in V and k not in ("source", "version", "providers", "count", "for_each", "depends_on")]
          and "features" in mprov.get("azurerm", {}) and mprov.get("azurerm", {}).get("storage_use_azuread") is True
          and "azapi" in mprov,
          f"{mm}")
    mg_rx = hcl_regexes(" ".join(str(v.get("condition", "")) for v in mx["variable"].get("management_group_id", {}).get("validation", [])))
    check("example azure-management-group: the management group id is validated as the module does (1-90 of letters, digits, -_().; not ending in '.')",
          bool(mg_rx) and accepts(mg_rx, "platform-lz") and accepts(mg_rx, "a" * 90) and not accepts(mg_rx, "a" * 91)
          and not accepts(mg_rx, "platform.") and not accepts(mg_rx, "a/b"), f"{mg_rx}")

    # One owner per thing. No example invents tags (no user_tags input, no policy
    # template, no default that becomes a policy); the azure-basic scope is the resource group the
    # cluster reports; initial policy blobs are written once and after their change subscription.
    for label, d in EXAMPLES.items():
        _, e = parse_dir(d)
        defaults = {n: b.get("default") for n, b in e["variable"].items() if "default" in b}
        check(f"{label}: no user_tags input, no policy template, initial policies default to nothing",
              "user_tags" not in e["variable"] and not os.path.exists(os.path.join(d, "policy"))
              and defaults.get("initial_policy") is None and defaults.get("initial_policies", {}) == {},
              f"variables {sorted(e['variable'])}, defaults {defaults}")
    bm = ex["module"].get("tagwarden", {})
    rg_valid = json.dumps(ex["variable"].get("resource_group", {}).get("validation"))
    check("azure-basic: enforcement scope from var.resource_group (status.platformStatus.azure.resourceGroupName), "
          "required unless the subscription is the scope",
          "var.resource_group" in str(bm.get("enforcement_scopes")) and "-rg" not in str(bm.get("enforcement_scopes"))
          and "var.resource_group == null ? var.enforcement_scope == \\\"subscription\\\"" in rg_valid
          and "resourceGroupName" in str(ex["variable"].get("resource_group", {}).get("description")), rg_valid)
    # ARO's managed resource group refuses role assignments (its deny assignment exempts
    # tag writes only), so azure-basic takes the subscription as the scope on request, and its
    # comment gives that reason, not a refusal of tag writes.
    basic_main = (EXAMPLE / "main.tf").read_text()
    scope_var = ex["variable"].get("enforcement_scope", {})
    check("azure-basic: enforcement_scope = \"subscription\" makes the subscription the one scope (ARO), resource_groups the default; "
          "the comment says the deny assignment refuses role assignments, not tag writes",
          '${var.enforcement_scope == "subscription" ? ["/subscriptions/${var.subscription_id}"]' in str(bm.get("enforcement_scopes"))
          and scope_var.get("default") == "resource_groups" and "subscription" in json.dumps(scope_var.get("validation"))
          and "refuses tag writes" not in basic_main and "roleAssignments/write" in basic_main, f"{bm.get('enforcement_scopes')}")
    # The set examples pass each cluster's kind (a CAPZ cluster's name is admitted with it).
    for label, e_mod, e_var in (("azure-clusters", cm, cx["variable"]), ("azure-management-group", mm, mx["variable"])):
        check(f"{label}: cluster_kinds from each cluster's optional kind",
              e_mod.get("cluster_kinds") == "${{for id, c in var.clusters : id => c.kind if c.kind != null}}"
              and "kind" in str(e_var.get("clusters", {}).get("type")), f"{e_mod.get('cluster_kinds')}")
    # The module: cluster_kinds as the AWS module's, infra_ids admitting CAPZ names.
    ck = V.get("cluster_kinds", {})
    ids_rx = hcl_regexes(json.dumps(V.get("infra_ids", {}).get("validation")).replace('\\\\', '\\'))
    check("infra/azure: cluster_kinds (OpenShift, HyperShift, ClusterAPI) and infra_ids admitting CAPZ names (DNS-1123 subdomain, '.')",
          all(k in json.dumps(ck.get("validation")) for k in ("OpenShift", "HyperShift", "ClusterAPI", "512"))
          and "length(id) <= 63" in json.dumps(V.get("infra_ids", {}).get("validation")), f"{ids_rx}")
    for n in ("policy_document", "cluster_policy"):
        b = R.get(("azurerm_storage_blob", n), {})
        check(f"blob {n} written once (ignore_changes = all) after the policy-change subscription",
              "all" in json.dumps(first(b.get("lifecycle")).get("ignore_changes"))
              and "${azurerm_eventgrid_system_topic_event_subscription.policy}" in b.get("depends_on", []))
    pkg_gate = json.dumps(R.get(("terraform_data", "package"), {}).get("lifecycle"))
    check("the package is published only with its manifest, matching sha256, built for x86_64-unknown-linux-gnu",
          "scripts/package-azure-function" in pkg_gate and "local.function_manifest.sha256" in pkg_gate
          and "x86_64-unknown-linux-gnu" in pkg_gate and "filesha256(var.function_zip)" in str(L.get("function_zip_sha256")))

    # The Flex app converges. The provider drops `AzureWebJobsStorage` from
    # app_settings on read and writes a keyless connection string on every create/update unless
    # app_settings sets the key (terraform-provider-azurerm#33211), so app_settings must not name it
    # (else the second plan re-sends it), and the complete settings with `AzureWebJobsStorage = ""`
    # are written after every write of the app (azapi_resource_action, PUT config/appsettings).
    parts = re.findall(r"local\.([a-z_]+)", str(L.get("app_settings", "")))
    rendered = {}
    for part in parts:
        m_ = resolve("${local.%s}" % part, L)
        rendered.update(m_ if isinstance(m_, dict) else {})
    rendered_keys = set(rendered) | {k for part in parts for k in re.findall(r"([A-Za-z_]+)\s*=", str(L.get(part, "")))}
    check("the app's app_settings (local.app_settings, rendered from its maps) never name AzureWebJobsStorage",
          parts == ["platform_app_settings", "app_insights_auth_settings", "contract_app_settings", "yield_settings"]
          and "AzureWebJobsStorage" not in rendered_keys and "AzureWebJobsStorage__accountName" in rendered_keys,
          f"maps {parts}, keys {sorted(rendered_keys)}")
    fix = R.get(("azapi_resource_action", "app_settings"), {})
    body = str(first(fix.get("body")).get("properties") if isinstance(fix.get("body"), list) else (fix.get("body") or {}).get("properties"))
    check("azapi_resource_action PUTs the app's complete settings with AzureWebJobsStorage = \"\" after every write of the app",
          str(fix.get("type", "")).startswith("Microsoft.Web/sites/config@") and fix.get("method") == "PUT"
          and fix.get("resource_id") == "${azurerm_function_app_flex_consumption.this.id}/config/appsettings"
          and body.startswith("${merge(local.app_settings, {") and 'AzureWebJobsStorage = ""' in body
          and "APPLICATIONINSIGHTS_CONNECTION_STRING = azurerm_application_insights.this.connection_string" in body
          and first(fix.get("lifecycle")).get("replace_triggered_by") == ["${azurerm_function_app_flex_consumption.this}"],
          f"{fix}")
    sc = first(fa.get("site_config"))
    check("the provider adds no other setting the PUT would drop (no health check, instrumentation key or key-based deployment storage)",
          "health_check_path" not in sc and "application_insights_key" not in sc
          and sc.get("application_insights_connection_string") == "${azurerm_application_insights.this.connection_string}"
          and fa.get("storage_authentication_type") != "StorageAccountConnectionString")
    # The publish waits for the platform identity's roles and the corrected settings.
    ts_trig = str(R.get(("time_sleep", "role_propagation"), {}).get("triggers"))
    check("the package publish waits for role propagation, which includes the platform identity's roles",
          all(f"azurerm_role_assignment.{r}.id" in ts_trig for r in ("runtime_storage", "sweep_queue_reader", "sweep_queue_processor", "sweep_poison_queue"))
          and set(pkg.get("depends_on", [])) >= {"${time_sleep.role_propagation}", "${azapi_resource_action.app_settings}"},
          f"depends_on {pkg.get('depends_on')}")
    check("no stale zip_deploy_file claim (the package is not pushed while the app is created)",
          "pushed while the app\n#             is created (zip_deploy_file)" not in mod_text)

    # "all" is the InfraID of a set's deployment-wide metrics; those three metrics
    # (no ResourceType, only under the deployment's InfraID) draw that one series; the examples ask
    # for the Terraform the module needs.
    check("infra_id and infra_ids refuse \"all\"",
          'var.infra_id != "all"' in str(V.get("infra_id", {}).get("validation"))
          and '!contains(var.infra_ids, "all")' in str(V.get("infra_ids", {}).get("validation")))
    check("the workbook draws EventsReceived, EventsIgnored, PolicyRejected, ListingFailures as the deployment's one series",
          L.get("deployment_metrics") == ["EventsReceived", "EventsIgnored", "PolicyRejected", "ListingFailures"]
          and "contains(local.deployment_metrics, m) ? [local.deployment_infra_id] : local.workbook_infra_ids" in wbi
          and "contains(local.deployment_metrics, m) ? [] :" in wbi, wbi[:200])
    def required_version(d):
        for f in sorted(d.glob("*.tf")):
            for t in norm(hcl2.load(f.open())).get("terraform", []):
                if "required_version" in t:
                    return t["required_version"]
        return None
    rv = {str(d.relative_to(ROOT)): required_version(d) for d in (MODULE, *EXAMPLES.values())}
    check("the examples' required_version is the module's", len(set(rv.values())) == 1 and None not in rv.values(), f"{rv}")

    # Outputs.
    want = ["function_app_id", "function_app_name", "principal_id", "policy_container_url", "event_subscription_ids", "workbook_id"]
    missing = [o for o in want if o not in mod["output"]]
    check("outputs: function app id/name, principal id, policy container URL, event subscription ids, workbook id", not missing, f"missing: {missing}")

    # Provider lower bound that accepts runtime_name = "custom" and the module's defaults.
    def lower_bound(files_dir):
        for f in sorted(files_dir.glob("*.tf")):
            doc = norm(hcl2.load(f.open()))
            for t in doc.get("terraform", []):
                for rp in t.get("required_providers", []):
                    c = str(rp.get("azurerm", {}).get("version", ""))
                    m_ = re.search(r">=\s*(\d+)\.(\d+)", c)
                    if m_:
                        return (int(m_.group(1)), int(m_.group(2))), rp
        return None, {}
    for label, d in (("infra/azure", MODULE), *EXAMPLES.items()):
        lb, rp = lower_bound(d)
        check(f"{label} pins azurerm >= 4.78 (custom runtime since 4.21, maximum_instance_count < 40 since 4.58, local_authentication_enabled since 4.78) and declares hashicorp/time",
              lb is not None and lb >= AZURERM_MIN and "time" in rp, f"lower bound {lb}")
    mic = var_default(V, "maximum_instance_count")
    check("maximum_instance_count default needs the 4.58 lower bound (< 40) or is >= 40",
          mic is not None and (mic >= 40 or (lower_bound(MODULE)[0] or (0, 0)) >= (4, 58)))

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
          "## Handler contract" in readme and all(k in readme for k in CONTRACT_KEYS + ["APPLICATIONINSIGHTS_CONNECTION_STRING", "TAGWARDEN_SWEEP_QUEUE"]))
    # The README says what a platform team needs for a management group.
    mg_doc = readme.split("## Management groups and several subscriptions")[1].split("\n## ")[0] if "## Management groups and several subscriptions" in readme else ""
    check("README 'Management groups and several subscriptions': what is granted where, which topics, one topic per source, "
          "what to do per new subscription (unlisted: events not received, the sweep still covers it)",
          all(x in mg_doc for x in ("**What is granted where.**", "**Which topics are created.**", "**One topic per source.**",
                                    "**Once per new subscription.**", "Events from a subscription that is not listed are not received",
                                    "the sweep still covers it", "event_source_subscription_ids", "existing_system_topics",
                                    "assignable_scopes", "cluster_publisher_principal_ids")))
    # The single command sequence that deploys a working function.
    check("README gives the single deploy sequence (az login, terraform init, terraform apply; function_zip in terraform.tfvars, no -var)",
          "## Deploy: one command sequence" in readme and "az login" in readme and "terraform -chdir=infra/examples/azure-basic init" in readme
          and 'function_zip    = "$zip"' in readme and "terraform -chdir=infra/examples/azure-basic apply" in readme
          and "-var " not in readme.split("## Deploy: one command sequence")[1].split("\n## ")[0]
          and "zip_deploy_file" not in readme.split("## Deploy: one command sequence")[1].split("\n## ")[0])

    for ok, name, detail in results:
        print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok or not detail else f"\n     {detail}"))
    failed = sum(1 for ok, _, _ in results if not ok)
    print(f"{len(results) - failed}/{len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
