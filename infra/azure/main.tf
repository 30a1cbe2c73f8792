# tagwarden for one Azure subscription and one cluster (infra_id) or a set of clusters (infra_ids): the resource group, the
# identities and the values the other files share. Function App: function.tf. Storage and policy:
# storage.tf. Event Grid: events.tf. Role assignments: rbac.tf. Monitoring: monitoring.tf.

data "azurerm_client_config" "current" {}

data "azurerm_subscription" "current" {}

data "azurerm_resource_group" "existing" {
  count = var.create_resource_group ? 0 : 1

  name = var.resource_group_name
}

locals {
  # One cluster (infra_id) or a cluster set (infra_ids).
  cluster_set = var.infra_ids != null
  clusters    = local.cluster_set ? var.infra_ids : compact([var.infra_id])
  # How descriptions name what the deployment serves (a list of infraIDs would not fit them).
  label = local.cluster_set ? "cluster set ${var.name}" : var.infra_id

  name = local.cluster_set ? var.name : "${var.name}-${var.infra_id}"
  tags = var.tags

  subscription_id = data.azurerm_subscription.current.id # "/subscriptions/<guid>"

  resource_group_name = var.create_resource_group ? azurerm_resource_group.this[0].name : data.azurerm_resource_group.existing[0].name
  resource_group_id   = var.create_resource_group ? azurerm_resource_group.this[0].id : data.azurerm_resource_group.existing[0].id

  # Stable 6-character suffix for globally unique names (storage accounts, the app's host name).
  suffix = substr(sha1(local.cluster_set ? "${local.subscription_id}/${var.name}/*" : "${local.subscription_id}/${var.name}/${var.infra_id}"), 0, 6)
  # Storage account names: 3-24 lowercase letters and digits.
  storage_base        = substr(replace(local.name, "-", ""), 0, 16)
  runtime_sa_name     = "${local.storage_base}${local.suffix}r"
  policy_sa_name      = "${local.storage_base}${local.suffix}p"
  function_app_name   = "${local.name}-${local.suffix}"
  function_drift_name = "drift" # drift/function.json (eventGridTrigger)
  function_sweep_name = "sweep" # sweep/function.json (timerTrigger)

  # Policy location: one blob (policy_blob), layers under policy_prefix, or a cluster set under
  # policy_prefix (default clusters/), one folder of layers per cluster.
  set_prefix  = local.cluster_set ? coalesce(var.policy_prefix, "clusters/") : null
  layered     = !local.cluster_set && var.policy_prefix != null
  policy_blob = local.layered || local.cluster_set ? null : coalesce(var.policy_blob, "tagwarden/infrastructure.yaml")
  # Directory of the single blob ("" when the name has no '/'), the layer prefix, or the set's.
  policy_dir = (local.cluster_set ? local.set_prefix : local.layered ? var.policy_prefix :
  (strcontains(local.policy_blob, "/") ? "${join("/", slice(split("/", local.policy_blob), 0, length(split("/", local.policy_blob)) - 1))}/" : ""))
  # The status report beside the policy; in a set, one per cluster beside its policy ('*': any infraID).
  contests_blobs = "_tagwarden/contests/*"
  status_blob    = local.cluster_set ? "${local.set_prefix}*/tagwarden-status.json" : "${local.policy_dir}tagwarden-status.json"

  policy_container      = "policy"
  dead_letter_container = "dead-letters"
  deployment_container  = "app-package"

  policy_container_url = "${azurerm_storage_account.policy.primary_blob_endpoint}${local.policy_container}"
  # TAGWARDEN_POLICY, the function's contract: the blob URL, the prefix URL ending in '/', or a
  # cluster set's URL ending in '*/'.
  policy_url = "${local.policy_container_url}/${local.cluster_set ? "${local.set_prefix}*/" : local.layered ? var.policy_prefix : local.policy_blob}"
  status_url = "${local.policy_container_url}/${local.status_blob}"

  # Scopes for the tag writer role + Reader and for the ARM event topics, as narrow as
  # possible: never silently the whole
  # subscription. And never a guessed name either ("<infra_id>-rg" is only IPI's default;
  # an install-config resourceGroupName or ARO's managed resource group are named otherwise): the
  # caller passes the cluster's resource group as the cluster reports it (the Infrastructure
  # object's status.platformStatus.azure.resourceGroupName).
  #
  # A scope may also be a management group (one function for many subscriptions)
  # and a subscription or resource group outside the deployment's subscription. A management group
  # is a scope for the roles (granted once there, inherited by every subscription below) and for the
  # sweep (Resource Graph's `managementGroups` request field), never an Event Grid source: the
  # sources Event Grid creates system topics on are services, "Azure resource groups" and "Azure
  # subscriptions", no management group (azure-docs, event-grid/includes/
  # event-sources-system-topics.md, the list in event-grid/system-topics.md), so the events of a
  # management group's subscriptions come from one subscription topic each
  # (event_source_subscription_ids).
  enforcement_scopes = toset(var.enforcement_scopes)
  mg_scope_prefix    = "/providers/Microsoft.Management/managementGroups/"
  mg_scopes          = [for s in local.enforcement_scopes : s if startswith(s, local.mg_scope_prefix)]
  # Subscription and resource-group scopes: each is an Event Grid source as well as a role scope.
  arm_scopes = [for s in local.enforcement_scopes : s if !startswith(s, local.mg_scope_prefix)]
  # The subscriptions under a management group scope whose ARM events must reach the function (the
  # GUIDs lowercased: the source ids are map keys, and the variable's validations compare without case).
  event_source_subscriptions = [for g in var.event_source_subscription_ids : "/subscriptions/${lower(g)}"]
  # Every Event Grid source, one system topic each (one topic per source, events.tf). The variable
  # validations keep a source from appearing twice (a subscription both listed and a scope, a
  # resource group inside a listed subscription).
  arm_sources         = toset(concat(local.arm_scopes, local.event_source_subscriptions))
  home_subscription   = lower(data.azurerm_subscription.current.subscription_id)
  source_subscription = { for s in local.arm_sources : s => lower(split("/", s)[2]) }
  # Sources in another subscription than the deployment's: "It's not possible to create a system
  # topic in an Azure subscription that's different from the event source's" (azure-docs,
  # event-grid/system-topics.md), so their topics live in their own subscription, created through
  # azapi by parent id (events.tf).
  foreign_sources = toset([for s in local.arm_sources : s if local.source_subscription[s] != local.home_subscription])

  # The policy-change sweep queue and the deployment gate.
  sweep_queue_name  = var.sweep_queue_name
  package_published = var.function_zip != null || var.package_published

  # The package's manifest (scripts/package-azure-function), read leniently: the
  # package's preconditions (function.tf) say what is wrong and how to fix it.
  function_manifest   = var.function_zip == null ? null : (fileexists("${var.function_zip}.json") ? try(jsondecode(file("${var.function_zip}.json")), {}) : null)
  function_zip_sha256 = var.function_zip == null ? "" : filesha256(var.function_zip)
}

resource "azurerm_resource_group" "this" {
  count = var.create_resource_group ? 1 : 0

  name     = coalesce(var.resource_group_name, "${local.name}-rg")
  location = var.location
  tags     = local.tags
}

# The Function App's managed identities. Both are user-assigned, not system-assigned, because a
# system-assigned identity exists only once the app exists, and two things need an identity before:
#
#   function  the identity the tagwarden code acts as (tag writes, policy reads, status report,
#             metrics). The contract puts its ids *inside the app's own settings*
#             (TAGWARDEN_SELF_PRINCIPAL_ID / _CLIENT_ID, loop safety): with a system-assigned
#             identity that is a Terraform cycle. The handler requests its tokens with
#             client_id = TAGWARDEN_SELF_CLIENT_ID.
#   platform  host storage and the Flex deployment container. The package is published after the
#             app exists (terraform_data.package, One Deploy; the provider's zip_deploy_file posts to
#             /api/zipdeploy, which Flex does not implement), and waits until this identity's roles
#             are in effect (time_sleep.role_propagation, rbac.tf).
#
# Both exist before the app, their role assignments are in place before the first instance starts,
# and they survive a re-created app (no role churn). Keeping them apart means the code cannot
# rewrite its own package, and the platform identity holds no tag or policy rights.
resource "azurerm_user_assigned_identity" "function" {
  name                = "${local.name}-id"
  resource_group_name = local.resource_group_name
  location            = var.location
  tags                = local.tags
}

resource "azurerm_user_assigned_identity" "platform" {
  name                = "${local.name}-platform-id"
  resource_group_name = local.resource_group_name
  location            = var.location
  tags                = local.tags
}
