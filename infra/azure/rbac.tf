# Role assignments, each as narrow as Azure RBAC allows. Built-in roles by id (a custom role that
# happens to share a built-in's name cannot be picked up by mistake):
#
#   who                         role                           scope
#   code identity (UAI)         tagwarden tag writer (custom)  each enforcement scope (the management group
#                                                              once, or each subscription / resource group)
#   code identity               Reader                         each enforcement scope
#   code identity               Storage Blob Data Reader       policy container
#   code identity               tagwarden blob writer (custom) policy container, ABAC: status blob only
#   code identity               Monitoring Metrics Publisher   the Function App (custom metrics)
#   code identity               Monitoring Metrics Publisher   Application Insights (Entra ingestion)
#   platform identity (UAI)     Storage Blob Data Contributor  runtime account (host state + package)
#   platform identity           Storage Queue Data Reader      sweep queue (queueTrigger via AzureWebJobsStorage)
#   platform identity           Storage Queue Data Message Processor  sweep queue
#   platform identity           Storage Queue Data Message Sender     sweep queue (the timer's per-subscription parts)
#   platform identity           Storage Queue Data Contributor <sweep queue>-poison only
#   policy topic identity       Storage Queue Data Message Sender     sweep queue (Event Grid delivery)
#   each system topic identity  Storage Blob Data Contributor  dead-letter container
#   policy_writer_principal_ids Storage Blob Data Contributor  policy container
#   cluster_publisher_principal_ids  tagwarden blob writer (custom)  policy container, ABAC: <prefix><infraID>/ only
#
# No Owner, Contributor or User Access Administrator anywhere. At management-group scope only the
# tag writer and Reader, and only when enforcement_scopes names the group.

locals {
  role_ids = {
    reader                         = "acdd72a7-3385-48ef-bd42-f606fba81ae7" # Reader
    storage_blob_data_reader       = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1" # Storage Blob Data Reader
    storage_blob_data_contributor  = "ba92f5b4-2d11-453d-a403-e96b0029c9fe" # Storage Blob Data Contributor
    monitoring_metrics_publisher   = "3913510d-42f4-4e42-8a64-420c390055eb" # Monitoring Metrics Publisher
    storage_queue_data_reader      = "19e7f393-937e-4f77-808e-94535e297925" # Storage Queue Data Reader
    storage_queue_data_processor   = "8a0f0c08-91a1-4084-bc3d-661d67233fed" # Storage Queue Data Message Processor
    storage_queue_data_sender      = "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a" # Storage Queue Data Message Sender
    storage_queue_data_contributor = "974c5e8b-45b9-4653-ba55-5f855dd0fb88" # Storage Queue Data Contributor
  }

  # Role definition id as ARM expects it for an assignment in subscription `sub` ("/subscriptions/<guid>").
  role_def = { for k, id in local.role_ids : k => "${local.subscription_id}/providers/Microsoft.Authorization/roleDefinitions/${id}" }

  # The role definition id of an assignment at each enforcement scope, spelled as ARM returns it for
  # that scope, so that the next plan reads back what it wrote (role_definition_id forces a new
  # assignment on any difference but case, hashicorp/terraform-provider-azurerm
  # internal/services/authorization/role_assignment_resource.go). At a subscription or resource
  # group, ARM answers with the assignment's own subscription, whatever subscription the request
  # named ("the role definition id is constructed using the sub2 as the subscription component",
  # hashicorp/terraform-provider-azurerm#8558, Azure/azure-rest-api-specs#10939). At a management
  # group it answers without a subscription, /providers/Microsoft.Authorization/roleDefinitions/<id>
  # ("The role definition id returned does not contain scope when the role definition was on tenant
  # level (management group or tenant)", the same file; hashicorp/pandora#3257), the form azurerm's
  # own management-group test assigns (role_assignment_resource_test.go, managementGroupConfig).
  # Inferred from those, not run here: that a custom role defined in the deployment's subscription
  # reads back in the management-group form too.
  role_definition_base = {
    for s in local.enforcement_scopes : s => (
      startswith(s, local.mg_scope_prefix) ? "/providers/Microsoft.Authorization/roleDefinitions" : "/subscriptions/${split("/", s)[2]}/providers/Microsoft.Authorization/roleDefinitions"
    )
  }

  # Where the tag writer role may be assigned: the deployment's subscription (as before), the
  # management group scope, and every other subscription a scope is in. "To create a custom role,
  # you must have the Microsoft.Authorization/roleDefinitions/write permission on all
  # AssignableScopes" and "You can define only one management group in AssignableScopes" (Microsoft
  # Learn, "Azure custom roles"; the second is validated on enforcement_scopes); "Management group
  # and a subscription" is one of the documented AssignableScopes shapes ("Azure role definitions",
  # AssignableScopes). Custom roles with DataActions can't be assigned at management group scope
  # (ibid.): the tag writer has none; the blob writer (DataActions) stays assignable in this
  # subscription only.
  tag_writer_assignable_scopes = distinct(concat(
    [local.subscription_id],
    local.mg_scopes,
    sort([for s in local.arm_scopes : "/subscriptions/${lower(split("/", s)[2])}" if lower(split("/", s)[2]) != local.home_subscription]),
  ))

  policy_container_scope      = "${azurerm_storage_account.policy.id}/blobServices/default/containers/${azurerm_storage_container.policy.name}"
  dead_letter_container_scope = "${azurerm_storage_account.policy.id}/blobServices/default/containers/${azurerm_storage_container.dead_letters.name}"
  sweep_queue_scope           = "${azurerm_storage_account.runtime.id}/queueServices/default/queues/${azurerm_storage_queue.sweep.name}"
  sweep_poison_queue_scope    = "${azurerm_storage_account.runtime.id}/queueServices/default/queues/${azurerm_storage_queue.sweep_poison.name}"

  code_principal_id = azurerm_user_assigned_identity.function.principal_id

  # ABAC (condition version 2.0): every data action of Storage Blob Data Contributor that changes a
  # blob is allowed only on the status report blob. Azure RBAC cannot scope an assignment to a single
  # blob; the narrowest scope is the container, and the condition narrows it to one blob path.
  # The contest state (which keys tagwarden holds back, and the lifts) beside it, outside every
  # publisher's folder: `_tagwarden/contests/<infraID>.json` (crates/azure/src/blob_store.rs).
  # Reads stay unconditioned (Storage Blob Data Reader grants them anyway). A cluster set has one
  # report per cluster, <prefix><infraID>/tagwarden-status.json: StringLike with '*' for the infraID
  # (Azure ABAC "Conditions format": StringLike, '*' matches any sequence of characters).
  status_report_condition = <<-EOT
    (
     (
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/delete'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/move/action'})
     )
     OR
     (
      @Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] ${local.cluster_set ? "StringLike" : "StringEquals"} '${local.status_blob}'
      OR
      @Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringLike '${local.contests_blobs}'
     )
    )
  EOT
}

# Custom roles in place of Tag Contributor and Storage Blob Data Contributor, each with
# only what the code does. Tag Contributor (4a9ae827-...) holds Microsoft.Resources/tags/* and also
# Microsoft.Resources/deployments/* (create and run ARM deployments), Microsoft.Insights/alertRules/*,
# Microsoft.Support/* and Microsoft.Authorization/*/read (azure-docs, role-based-access-control/
# built-in-roles/management-and-governance.md, "Tag Contributor"). The code (crates/azure/src/arm.rs) reads
# and merges tags through Microsoft.Resources/tags/default (GET, PATCH Merge: "To apply tags, you
# must have write access to the Microsoft.Resources/tags resource type", azure-resource-manager/
# management/tag-resources.md) and lists a scope's resources (GET .../resources?$filter=tagName):
# Microsoft.Resources/tags/read and /write (no tags/delete), and the resource-group and resource
# reads (operation names from azure-docs, role-based-access-control/permissions/
# management-and-governance.md, "Microsoft.Resources").
#
# The definition stays in the deployment's subscription (`scope` forces a new role,
# and a role with assignments cannot be deleted); assignable_scopes grows in place with the
# management group and the other subscriptions it is assigned in (local.tag_writer_assignable_scopes).
resource "azurerm_role_definition" "tag_writer" {
  name        = "tagwarden tag writer (${local.name}-${local.suffix})"
  scope       = local.subscription_id
  description = "tagwarden ${local.label}: read resources and their tags, merge tags (Microsoft.Resources/tags read and write only; no deployments, no tag delete)."

  permissions {
    actions = [
      "Microsoft.Resources/subscriptions/resourceGroups/read",
      "Microsoft.Resources/subscriptions/resourceGroups/resources/read",
      "Microsoft.Resources/subscriptions/resources/read",
      "Microsoft.Resources/tags/read",
      "Microsoft.Resources/tags/write",
    ]
    not_actions = []
  }

  assignable_scopes = local.tag_writer_assignable_scopes
}

# Storage Blob Data Contributor (ba92f5b4-...) also carries the control-plane actions
# Microsoft.Storage/storageAccounts/blobServices/containers/delete, /read and /write (azure-docs,
# built-in-roles/storage.md): whoever holds it on the container can delete the policy container.
# This role has only blob data actions: read, write (create or overwrite) and add (append), no
# delete, and no control-plane action. Assigned at the container, under an ABAC condition each time.
resource "azurerm_role_definition" "blob_writer" {
  name        = "tagwarden blob writer (${local.name}-${local.suffix})"
  scope       = local.subscription_id
  description = "tagwarden ${local.label}: read and write blobs (data actions only: no delete, no container management); assigned with an ABAC condition on the blob path."

  permissions {
    actions = []
    data_actions = [
      "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read",
      "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write",
      "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action",
    ]
  }

  assignable_scopes = [local.subscription_id]
}

# The tag writer (custom, above; formerly Tag Contributor): write access to Microsoft.Resources/tags
# (the PATCH .../tags/default Merge the code makes) without any access to the resources themselves. Scoped to the enforcement scopes
# only; the ownership tag is checked in code because Azure RBAC conditions cannot read resource
# tags for ARM control-plane writes. With a management group scope it is
# assigned once there (azurerm_role_assignment's `scope` accepts a management group id: its
# ValidateFunc includes commonids.ValidateManagementGroupID, internal/services/authorization/
# role_assignment_resource.go) and inherited by every subscription below it; with subscription
# scopes, once per subscription.
resource "azurerm_role_assignment" "tag_contributor" {
  for_each = local.enforcement_scopes

  scope              = each.value
  role_definition_id = "${local.role_definition_base[each.value]}/${azurerm_role_definition.tag_writer.role_definition_id}"
  principal_id       = local.code_principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: write tags on owned resources (Microsoft.Resources/tags read and write, custom role)."
}

# Reader: the sweep lists resources (Resource Graph / resources?$filter=tagName) and the event path
# reads the current tags and the resource type. Tag Contributor alone includes no resource reads
# outside Microsoft.Resources/tags. Same scopes as Tag Contributor, nothing wider.
resource "azurerm_role_assignment" "reader" {
  for_each = local.enforcement_scopes

  scope              = each.value
  role_definition_id = "${local.role_definition_base[each.value]}/${local.role_ids.reader}"
  principal_id       = local.code_principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: read resources and their tags to plan writes."
}

# Storage Blob Data Reader on the policy container only (not the account: the dead-letter container
# is next door): GET/list of the policy blob(s) with ETag.
resource "azurerm_role_assignment" "policy_reader" {
  scope              = local.policy_container_scope
  role_definition_id = local.role_def.storage_blob_data_reader
  principal_id       = local.code_principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: read the policy."
}

# The blob writer (custom, data actions only) on the policy container, conditioned (ABAC) to the
# status report blob: the function can write tagwarden-status.json and nothing else — never the policy itself.
resource "azurerm_role_assignment" "status_report_writer" {
  scope              = local.policy_container_scope
  role_definition_id = azurerm_role_definition.blob_writer.role_definition_resource_id
  principal_id       = local.code_principal_id
  principal_type     = "ServicePrincipal"
  condition_version  = "2.0"
  condition          = local.status_report_condition
  description        = "tagwarden ${local.label}: write only ${local.status_blob} and ${local.contests_blobs} (ABAC condition on the blob path)."
}

# Each cluster's publisher writes only its own folder of the set. "@Resource[Microsoft.
# Storage/storageAccounts/blobServices/containers/blobs:path]" is the blob's path within its container
# (no container name), and StringStartsWith compares its beginning (azure-docs, role-based-access-
# control/conditions-format.md and storage/blobs/storage-auth-abac-attributes.md, "Blob path";
# condition version 2.0). The condition applies to the writes (write, add); the publisher still reads
# and lists the container (List Blobs carries no blob path, a path condition on reads would refuse
# it; reading another folder reveals a policy, never changes one).
locals {
  cluster_publisher_condition = { for id in keys(var.cluster_publisher_principal_ids) : id => <<-EOT
    (
     (
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write'})
      AND
      !(ActionMatches{'Microsoft.Storage/storageAccounts/blobServices/containers/blobs/add/action'})
     )
     OR
     (
      @Resource[Microsoft.Storage/storageAccounts/blobServices/containers/blobs:path] StringStartsWith '${local.set_prefix}${id}/'
     )
    )
  EOT
  }
}

resource "azurerm_role_assignment" "cluster_publishers" {
  for_each = var.cluster_publisher_principal_ids

  scope              = local.policy_container_scope
  role_definition_id = azurerm_role_definition.blob_writer.role_definition_resource_id
  principal_id       = each.value
  condition_version  = "2.0"
  condition          = local.cluster_publisher_condition[each.key]
  description        = "tagwarden ${local.label}: cluster ${each.key} publishes its policy, only under ${local.set_prefix}${each.key}/ (ABAC condition on the blob path)."
}

# Monitoring Metrics Publisher on the Function App: the custom metrics REST API only accepts metrics
# about a resource the caller may publish to; the function publishes against its own app's id
# (TAGWARDEN_METRICS_RESOURCE_ID).
resource "azurerm_role_assignment" "metrics_publisher" {
  scope              = azurerm_function_app_flex_consumption.this.id
  role_definition_id = local.role_def.monitoring_metrics_publisher
  principal_id       = local.code_principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: publish TagWarden custom metrics on the Function App."
}

# Monitoring Metrics Publisher on Application Insights, only when local auth is off: Entra-ID
# ingestion of the host's (and handler's) telemetry requires it ("publishes all telemetry").
resource "azurerm_role_assignment" "app_insights_publisher" {
  count = var.application_insights_local_auth_enabled ? 0 : 1

  scope              = azurerm_application_insights.this.id
  role_definition_id = local.role_def.monitoring_metrics_publisher
  principal_id       = local.code_principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: send telemetry to Application Insights with Entra ID."
}

# Platform identity: host state (AzureWebJobsStorage__credential=managedidentity:
# leases for the timer singleton, host keys) and the Flex deployment package. Blob data only, on the
# runtime account, which holds nothing else. Microsoft documents Storage Blob Data Owner for host
# storage; Contributor covers what Event Grid and timer triggers need (blob read/write/lease) without
# ACL management.
resource "azurerm_role_assignment" "runtime_storage" {
  scope              = azurerm_storage_account.runtime.id
  role_definition_id = local.role_def.storage_blob_data_contributor
  principal_id       = azurerm_user_assigned_identity.platform.principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: Functions host state and deployment package."
}

# The `sweep-queue` function reads the sweep queue through the AzureWebJobsStorage
# connection, i.e. the platform identity (AzureWebJobsStorage__clientId). A queue trigger with an
# identity connection needs "Storage Queue Data Reader, Storage Queue Data Message Processor"
# (azure-docs, azure-functions/functions-bindings-storage-queue-trigger.md, "Identity-based
# connections"), scoped here to the one queue.
resource "azurerm_role_assignment" "sweep_queue_reader" {
  scope              = local.sweep_queue_scope
  role_definition_id = local.role_def.storage_queue_data_reader
  principal_id       = azurerm_user_assigned_identity.platform.principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: sweep-queue trigger reads the policy-change queue."
}

resource "azurerm_role_assignment" "sweep_queue_processor" {
  scope              = local.sweep_queue_scope
  role_definition_id = local.role_def.storage_queue_data_processor
  principal_id       = azurerm_user_assigned_identity.platform.principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: sweep-queue trigger dequeues and deletes policy-change messages."
}

# The timer sends a sweep of several subscriptions on as one message per
# subscription through the `sweep` function's queue output binding, on the same AzureWebJobsStorage
# connection. An output binding with an identity connection needs "Storage Queue Data Contributor"
# or "Storage Queue Data Message Sender" (azure-docs, azure-functions/functions-bindings-storage-queue.md,
# "Identity-based connections"): the sender, which can only add messages, on the one queue.
resource "azurerm_role_assignment" "sweep_queue_parts_sender" {
  scope              = local.sweep_queue_scope
  role_definition_id = local.role_def.storage_queue_data_sender
  principal_id       = azurerm_user_assigned_identity.platform.principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: the sweep timer sends one message per subscription to the sweep queue."
}

# The host moves a message that keeps failing to "<queue>-poison" (create-if-not-exists + add):
# Storage Queue Data Contributor on that queue only.
resource "azurerm_role_assignment" "sweep_poison_queue" {
  scope              = local.sweep_poison_queue_scope
  role_definition_id = local.role_def.storage_queue_data_contributor
  principal_id       = azurerm_user_assigned_identity.platform.principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: sweep-queue trigger moves failing messages to the poison queue."
}

# Event Grid delivers the policy BlobCreated events with the policy topic's identity: "Azure Queue
# storage | Storage Queue Data Message Sender" (azure-docs, event-grid/add-identity-roles.md).
resource "azurerm_role_assignment" "sweep_queue_sender" {
  scope              = local.sweep_queue_scope
  role_definition_id = local.role_def.storage_queue_data_sender
  principal_id       = azurerm_eventgrid_system_topic.policy.identity[0].principal_id
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: Event Grid delivers policy changes to the sweep queue."
}

# Event Grid dead-lettering with the system topics' identities (shared keys are disabled): write
# into the dead-letter container only. One per ARM topic (created or existing), per Resource
# Notifications topic (created or existing) plus the policy topic.
resource "azurerm_role_assignment" "dead_letter_writer" {
  for_each = merge(
    { for s, t in local.arm_topics : "arm-${local.arm_scope_key[s]}" => t.principal_id },
    { for s, t in local.rn_topics : local.rn_topic_key[s] => t.principal_id },
    { policy = azurerm_eventgrid_system_topic.policy.identity[0].principal_id },
  )

  scope              = local.dead_letter_container_scope
  role_definition_id = local.role_def.storage_blob_data_contributor
  principal_id       = each.value
  principal_type     = "ServicePrincipal"
  description        = "tagwarden ${local.label}: Event Grid dead-letters (${each.key} events)."
}

# Whoever publishes the policy (pipeline, operators, the Terraform caller when it uploads
# policy_document/policy_layers). Container scope only.
resource "azurerm_role_assignment" "policy_writers" {
  for_each = toset(var.policy_writer_principal_ids)

  scope              = local.policy_container_scope
  role_definition_id = local.role_def.storage_blob_data_contributor
  principal_id       = each.value
  description        = "tagwarden ${local.label}: publish policy documents."
}

# "When you assign roles or remove role assignments, it can take up to 10 minutes
# for changes to take effect" (azure-docs, storage/blobs/authorize-access-azure-active-directory.md,
# "Role assignment propagation delays for blob data access"; the same for queues). The policy
# upload right after assigning the caller's writer role was refused with 403, and Event Grid
# dead-lettering and queue delivery use roles created in the same apply. So does
# the package publish (terraform_data.package, function.tf), seconds after the platform identity's
# roles on the runtime account and the sweep queues were created. Everything that uses those roles
# waits here once; a later apply that adds a role waits again (triggers). "0s" when the roles were
# assigned beforehand.
resource "time_sleep" "role_propagation" {
  create_duration = var.role_assignment_propagation_wait

  triggers = {
    policy_writers     = join(",", sort([for r in azurerm_role_assignment.policy_writers : r.id]))
    dead_letter_writer = join(",", sort([for r in azurerm_role_assignment.dead_letter_writer : r.id]))
    sweep_queue_sender = azurerm_role_assignment.sweep_queue_sender.id
    # The platform identity (Flex deployment storage, host storage, the sweep-queue trigger).
    platform = join(",", [
      azurerm_role_assignment.runtime_storage.id,
      azurerm_role_assignment.sweep_queue_reader.id,
      azurerm_role_assignment.sweep_queue_processor.id,
      azurerm_role_assignment.sweep_queue_parts_sender.id,
      azurerm_role_assignment.sweep_poison_queue.id,
    ])
  }
}
