# Event Grid: which events reach the function and how.
#
#   ARM writes in each enforcement scope and each subscription of event_source_subscription_ids (one
#   system topic per source, global, in the source's own subscription)
#                                        --ResourceWriteSuccess--> function `drift` (eventGridTrigger)
#   resource_notifications = true: resource creates/updates in each subscription
#   of those sources (one Microsoft.ResourceNotifications.Resources system topic per subscription)
#                                        --Resources.CreatedOrUpdated--> function `drift`
#   policy blob created (policy account topic)
#                                        --BlobCreated---> storage queue TAGWARDEN_SWEEP_QUEUE
#                                                          --> function `sweep-queue` (queueTrigger)
#   timer (sweep/function.json, TAGWARDEN_SWEEP_SCHEDULE)  --> function `sweep`
#
# ARM events are delivered in the Event Grid schema to the `drift` function (the Functions host
# answers the validation handshake), one event per batch, retried with Event Grid's backoff and
# dead-lettered into the `dead-letters` container with the topic's identity. Policy changes are not:
# a sweep takes longer than Event Grid waits for an answer (below), so they go to a queue.

locals {
  drift_function_id = "${azurerm_function_app_flex_consumption.this.id}/functions/${local.function_drift_name}"

  # ARM event filters, one map so the README, the output and the tests see the same thing. Each
  # scope has its own topic, so no subject filter is needed to stay inside the scopes.
  arm_filter = {
    included_event_types   = ["Microsoft.Resources.ResourceWriteSuccess"]
    string_not_begins_with = { "data.operationName" = var.ignored_operation_prefixes }
    string_not_in = var.exclude_self_in_event_filter ? {
      "data.authorization.evidence.principalId" = [azurerm_user_assigned_identity.function.principal_id]
      "data.claims.appid"                       = [azurerm_user_assigned_identity.function.client_id]
    } : {}
  }
  # Event Grid allows at most 25 advanced-filter values per event subscription:
  # modules/event_subscription checks it.

  # "Only one Azure Event Grid system topic is allowed per source (like
  # subscription, resource group, etc.)" (azure-docs, event-grid/system-topics.md). A topic on the
  # whole subscription collides with the portal's, Defender's or another deployment's. So: one
  # topic per source (a resource group topic for a resource group scope: the cluster's own source,
  # nobody else's), and for a source that already has a topic (existing_system_topics) only the
  # event subscription. This is also the shape of the one-deployment-per-subscription design of
  # N clusters are N resource-group scopes, N topics, one function; a subscription scope
  # is one topic per subscription, created once or passed in as existing.
  #
  # The sources are the subscription and resource group scopes and the
  # subscriptions of event_source_subscription_ids (local.arm_sources, main.tf), in any subscription. A
  # topic lives in its source's subscription ("It's not possible to create a system topic in an
  # Azure subscription that's different from the event source's Azure subscription", ibid.): in the
  # deployment's subscription azurerm creates it in the module's resource group (as before); in
  # another subscription azapi creates it by parent id in that subscription's
  # event_topic_resource_group_name group (azurerm acts in the provider's one subscription; the
  # module cannot configure a provider per subscription). The variable validations keep one topic
  # per source (variables.tf).
  arm_topic_type = {
    for s in local.arm_sources : s => (
      strcontains(lower(s), "/resourcegroups/") ? "Microsoft.Resources.ResourceGroups" : "Microsoft.Resources.Subscriptions"
    )
  }
  # Existing topics by source (keys compared without case: a listed subscription is keyed
  # /subscriptions/<lowercase guid>); the validation of existing_system_topics refuses a key that is
  # no source.
  existing_topic_of = {
    for s in local.arm_sources : s => one([for k, t in var.existing_system_topics : t if lower(k) == lower(s)])
    if contains([for k in keys(var.existing_system_topics) : lower(k)], lower(s))
  }
  # Sources in another subscription without an existing topic: created there by azapi.
  created_foreign_topic_sources = toset([for s in local.foreign_sources : s if !contains(keys(local.existing_topic_of), s)])
  # The resource group of the module's topics in each other subscription that gets one (an ARM
  # topic or a Resource Notifications topic).
  foreign_topic_subscriptions = toset(concat(
    [for s in local.created_foreign_topic_sources : local.source_subscription[s]],
    [for s in local.created_foreign_rn_topic_sources : split("/", s)[2]],
  ))
  event_resource_group_name = coalesce(var.event_topic_resource_group_name, "${local.name}-events")
  event_resource_group_id = {
    for sub in local.foreign_topic_subscriptions : sub => (
      var.event_topic_resource_group_name == null ? azapi_resource.event_resource_group[sub].id : "/subscriptions/${sub}/resourceGroups/${var.event_topic_resource_group_name}"
    )
  }

  # One topic per source: created (azurerm here, azapi in another subscription) or existing
  # (existing_system_topics: read and checked), modules/system_topic either way.
  arm_topic_specs = {
    for s in local.arm_sources : s => {
      source_resource_id  = s
      topic_type          = local.arm_topic_type[s]
      create              = !contains(keys(local.existing_topic_of), s)
      name                = try(local.existing_topic_of[s].name, "${local.name}-arm-${local.arm_scope_key[s]}")
      resource_group_name = try(local.existing_topic_of[s].resource_group_name, contains(local.foreign_sources, s) ? local.event_resource_group_name : local.resource_group_name)
      subscription_id     = contains(local.foreign_sources, s) ? local.source_subscription[s] : null
      resource_group_id   = contains(local.created_foreign_topic_sources, s) ? local.event_resource_group_id[local.source_subscription[s]] : null
    }
  }
  arm_topics = module.arm_topics.topics

  # The subscriptions deliver to the `drift` function and Azure refuses an
  # azure_function_endpoint whose function does not exist yet, so they wait for a published package.
  # Topics in the deployment's subscription take azurerm's event subscription; topics in another
  # subscription azapi's (the same filter, destination, retry and dead-lettering):
  # modules/event_subscription, by in_other_subscription.
  arm_subscriptions = { for s, t in local.arm_topics : s => t if local.package_published }

  # Short, stable keys for names and alerts ("rg-<hash>" / "sub-<hash>" of the source id).
  arm_scope_key = {
    for s in local.arm_sources : s => "${strcontains(lower(s), "/resourcegroups/") ? "rg" : "sub"}-${substr(sha1(lower(s)), 0, 8)}"
  }

  # Blob events for the policy: created/overwritten blobs under the policy blob, prefix or set (the
  # function sweeps only the clusters whose folder a change is in).
  policy_subject_prefix = "/blobServices/default/containers/${local.policy_container}/blobs/${local.cluster_set ? local.set_prefix : local.layered ? var.policy_prefix : local.policy_blob}"
}

################################################################################
# ARM resource writes
################################################################################

# One topic per source; a source that has one already (existing_system_topics: the portal's,
# Defender's, another deployment's) gets only the event subscription.
module "arm_topics" {
  source = "./modules/system_topic"

  topics                 = local.arm_topic_specs
  existing_variable_name = "existing_system_topics"
  tags                   = local.tags
}

# The topics were this module's own resources before modules/system_topic: an upgrade moves them
# (same keys, same arguments), destroying nothing.
moved {
  from = azurerm_eventgrid_system_topic.arm
  to   = module.arm_topics.azurerm_eventgrid_system_topic.this
}

moved {
  from = azapi_resource.arm_topic
  to   = module.arm_topics.azapi_resource.this
}

################################################################################
# ARM resource writes in other subscriptions
################################################################################
#
# azapi creates a resource wherever its parent id points ("parent_id: The ID of the azure resource
# in which this resource is created": azapi_resource's schema, Azure/azapi 2.13 as the
# cdktn-provider-azapi 1.0.0 package carries it), with the caller's
# credentials: the Terraform caller needs, in each such subscription, the rights to create a
# resource group (unless event_topic_resource_group_name names one), system topics and event
# subscriptions. API version 2022-06-15 is the Event Grid version azurerm 4.x uses
# (azure-rest-api-specs, specification/eventgrid/resource-manager/Microsoft.EventGrid/stable/
# 2022-06-15/EventGrid.json: SystemTopicProperties source/topicType, EventSubscriptionProperties).

# The resource group of the module's topics in each other subscription (as `<name>-events`), unless
# event_topic_resource_group_name names an existing one.
resource "azapi_resource" "event_resource_group" {
  for_each = var.event_topic_resource_group_name == null ? local.foreign_topic_subscriptions : toset([])

  type      = "Microsoft.Resources/resourceGroups@2021-04-01"
  name      = local.event_resource_group_name
  parent_id = "/subscriptions/${each.key}"
  location  = var.location
  tags      = local.tags
}

# The event subscriptions, one per ARM source, by modules/event_subscription: azurerm's for a topic
# in the deployment's subscription, azapi's (the REST shape) for a topic in another. The function
# and the dead-letter container stay in the deployment's subscription: Event Grid takes both by
# resource id, and Microsoft's own example puts them in another subscription than the topic
# (azure-rest-api-specs, .../2022-06-15/examples/
# EventSubscriptions_CreateOrUpdateForCustomTopic_AzureFunctionDestination.json: topic in
# 5b4b650e-..., function and dead-letter account in 55f3dcd4-...). Inferred, not run here: that a
# system topic's subscription delivers across subscriptions as that custom topic's does (the
# EventSubscription schema is the same).
#
# Only successful writes (deletes and failed/cancelled writes never need a tag write), less what the
# handler would ignore anyway: deployments (the real resources raise their own events), role
# assignments, policy, ... (ignored_operation_prefixes; Microsoft.Resources/tags/write is
# deliberately *not* dropped: an external tag edit is drift). Loop safety, first guard: the
# function's own writes (its identity as RBAC principal and as token appid); second guard: the
# handler checks the same ids and reconcile is idempotent.
module "arm_event_subscriptions" {
  source = "./modules/event_subscription"

  subscriptions = {
    for s, t in local.arm_subscriptions : s => {
      name                      = "${local.name}-drift"
      topic_name                = t.name
      topic_resource_group_name = t.resource_group_name
      topic_id                  = t.id
      in_other_subscription     = contains(local.foreign_sources, s)
      included_event_types      = local.arm_filter.included_event_types
      advanced_filter = {
        string_not_begins_with = local.arm_filter.string_not_begins_with
        string_not_in          = local.arm_filter.string_not_in
      }
    }
  }
  function_id                    = local.drift_function_id
  max_delivery_attempts          = var.max_delivery_attempts
  event_time_to_live_minutes     = var.event_time_to_live_minutes
  dead_letter_storage_account_id = azurerm_storage_account.policy.id
  dead_letter_container_name     = azurerm_storage_container.dead_letters.name

  # The package first (the `drift` function must exist), and the topic's dead-letter role in effect.
  depends_on = [terraform_data.package, time_sleep.role_propagation]
}

# The event subscriptions were this module's own resources before modules/event_subscription: an
# upgrade moves them (same keys, same arguments), destroying nothing.
moved {
  from = azurerm_eventgrid_system_topic_event_subscription.arm
  to   = module.arm_event_subscriptions.azurerm_eventgrid_system_topic_event_subscription.this
}

moved {
  from = azapi_resource.arm_event_subscription
  to   = module.arm_event_subscriptions.azapi_resource.this
}

################################################################################
# Azure Resource Notifications
################################################################################
#
# A `Microsoft.ResourceNotifications.Resources.CreatedOrUpdated` event carries the resource as
# Resource Graph holds it, its tags at `data.resourceInfo.tags` (azure-rest-api-specs,
# specification/eventgrid/data-plane/Microsoft.ResourceNotifications/stable/2018-01-01/examples/
# event-grid-schema/Resources_CreatedOrUpdated.json), so the function can decide without reading the
# resource when the tags show it in line or owned by no cluster (crates/core/src/events/
# event_grid.rs). The topic type is `Microsoft.ResourceNotifications.Resources`, its source
# `/subscriptions/<id>`, its location Global (azure-docs, event-grid/
# subscribe-to-resource-notifications-resources-events.md: `az eventgrid system-topic create
# --source /subscriptions/AZURESUBSCRIPTIONID --topic-type microsoft.resourcenotifications.resources
# --location Global`, and `-location global` in the PowerShell tab: ARM location names compare
# without case, and the module's other global topics are written `global`). "Currently, these events
# are exclusively emitted at the Azure subscription scope" (azure-docs, event-grid/
# event-schema-resources.md, "Role-based access control"): there is no resource group topic of this
# type, so a resource group scope takes the topic of its subscription and an event subscription
# filtered by subject to "<resource group id>/" (the subject is the resource id; "Subject begins with
# = /subscriptions/{subscription-id}/resourceGroups/{resourceGroup-id}" is the documented filter,
# subscribe-to-resource-notifications-resources-events.md, "Filtering examples"). A subscription
# source is filtered the same way by "<subscription id>/", which every resource id of it begins
# with: one shape for every source. The subject filter compares without case unless told otherwise
# (EventSubscriptionFilter.isSubjectCaseSensitive, azure-rest-api-specs eventgrid 2022-06-15
# EventGrid.json; "If not specified, subject will be compared in a case insensitive manner", Az.EventGrid
# New-AzEventGridSystemTopicEventSubscription -SubjectCaseSensitive), as ARM compares resource group
# names. The topic type is in preview (every one of those pages is titled "(Preview)").
#
# What it covers: the resource types of Resource Graph's `resources` table, "doesn't yet support all
# the resource types" of it (event-schema-resources.md), no list of the exceptions published. So the
# ARM subscriptions above stay as they are, for every type: for a covered type the function gets both
# events, the ResourceWriteSuccess costing what it did before (README, "Resource Notifications").
#
# One topic per source. "Azure Event Grid allows only one system topic per source (such as a
# subscription or resource group)" (azure-docs, event-grid/system-topics.md, 2026-06 revision; the
# 2023 revision: "Only one Azure Event Grid system topic is allowed per source"), and Azure refuses a
# second with "There is an existing tracked system topic for the given source /subscriptions/<id>.
# Only one system topic is allowed per source." (quoted in MicrosoftDocs/azure-docs#97986). The
# documented rule names the source only, not the topic type. Inferred, not run here: that the key is
# the source *and* the topic type, so that a Resource Notifications topic can sit beside a
# Microsoft.Resources.Subscriptions topic on the same subscription. For it: Microsoft documents
# several topic types whose source is the same `/subscriptions/<id>` (Microsoft.Resources.
# Subscriptions, Microsoft.PolicyInsights.PolicyStates, Microsoft.ResourceNotifications.Resources and
# .HealthResources) with no word that one excludes another, Azure Resource Notifications is presented
# as "dedicated system topics" offering "datasets that may not be accessible through standard system
# topics" (event-grid/event-schema-resource-notifications.md), and two vendors state the limit per
# type ("only one System Topic of type: Microsoft.ResourceNotifications.Resources can exist per
# scoped Subscription", zscaler/terraform-azurerm-cloud-connector-modules,
# modules/terraform-zscc-ztags-azure/README.md; "only one Event Grid system topic of type
# Microsoft.Resources.Subscriptions can be created per subscription", port-labs/port-docs,
# docs/build-your-software-catalog/sync-data-to-catalog/cloud-providers/azure/installation.md). If
# Azure refuses it, the first apply fails on this topic with the message above, and
# resource_notifications must stay off for that subscription. What is certain: at most one
# Resource Notifications topic per subscription, so the module makes one per subscription whatever
# the number of sources in it, and takes an existing one from existing_resource_notifications_topics
# (the existing_system_topics pattern: read, checked, only the event subscriptions added). A second
# tagwarden deployment in the same subscription must pass the first one's topic there.
locals {
  rn_topic_type = "Microsoft.ResourceNotifications.Resources"
  # The filter of the Resource Notifications subscriptions, one map as arm_filter is: the created or
  # updated event only (a deletion never needs a tag write), each source's resources by subject. No
  # advanced filter: the event names no caller (no claims, no authorization: Resources_CreatedOrUpdated.json),
  # so the function's own writes cannot be dropped here; their echo shows the resource in line and
  # costs the function no read.
  rn_filter = {
    included_event_types = ["Microsoft.ResourceNotifications.Resources.CreatedOrUpdated"]
    subject_begins_with  = { for s in local.arm_sources : s => "${s}/" }
  }

  # The topic sources: the subscription (lowercase GUID) of every ARM source, once.
  rn_sources = var.resource_notifications ? toset([for s in local.arm_sources : "/subscriptions/${local.source_subscription[s]}"]) : toset([])
  # The Resource Notifications topic of each ARM source.
  rn_source_of = { for s in local.arm_sources : s => "/subscriptions/${local.source_subscription[s]}" }
  # Existing topics by subscription (keys compared without case; the validation refuses a key that is
  # no source's subscription).
  rn_existing_topic_of = {
    for s in local.rn_sources : s => one([for k, t in var.existing_resource_notifications_topics : t if lower(k) == s])
    if contains([for k in keys(var.existing_resource_notifications_topics) : lower(k)], s)
  }
  rn_foreign_sources               = toset([for s in local.rn_sources : s if split("/", s)[2] != local.home_subscription])
  created_foreign_rn_topic_sources = toset([for s in local.rn_foreign_sources : s if !contains(keys(local.rn_existing_topic_of), s)])
  # Short, stable keys for names and alerts ("rn-<hash>" of the subscription id).
  rn_topic_key = { for s in local.rn_sources : s => "rn-${substr(sha1(s), 0, 8)}" }

  # One topic per subscription: created or existing, at home or elsewhere (modules/system_topic).
  rn_topic_specs = {
    for s in local.rn_sources : s => {
      source_resource_id  = s
      topic_type          = local.rn_topic_type
      create              = !contains(keys(local.rn_existing_topic_of), s)
      name                = try(local.rn_existing_topic_of[s].name, "${local.name}-${local.rn_topic_key[s]}")
      resource_group_name = try(local.rn_existing_topic_of[s].resource_group_name, contains(local.rn_foreign_sources, s) ? local.event_resource_group_name : local.resource_group_name)
      subscription_id     = contains(local.rn_foreign_sources, s) ? split("/", s)[2] : null
      resource_group_id   = contains(local.created_foreign_rn_topic_sources, s) ? local.event_resource_group_id[split("/", s)[2]] : null
    }
  }
  rn_topics = module.resource_notifications_topics.topics
  # TAGWARDEN_EVENT_TOPICS (function.tf): the sources of these topics not already listed as an ARM
  # topic's source (a subscription scope or listed subscription is both; a resource group scope's
  # subscription is new there). The function compares without case.
  rn_event_topic_sources = [for s in keys(local.rn_topics) : s if !contains([for k in keys(local.arm_topics) : lower(k)], s)]

  # One event subscription per ARM source, on its subscription's topic, once the package is published
  # (the azure_function_endpoint must exist, as for the ARM subscriptions). Home and foreign as the
  # ARM subscriptions: by the source's subscription (in_other_subscription).
  rn_subscriptions = {
    for s in local.arm_sources : s => local.rn_topics[local.rn_source_of[s]]
    if var.resource_notifications && local.package_published
  }
}

# One Resource Notifications topic per subscription, in the deployment's subscription in the module's
# resource group (as the ARM topics), in another by parent id in its events group. The topic type
# is a string the service checks, not the API version: zscaler's module above creates this type
# with Microsoft.EventGrid/systemTopics@2021-12-01. Existing ones are checked for source, type
# (without case: the documented CLI creates it as `microsoft.resourcenotifications.resources`) and
# identity.
module "resource_notifications_topics" {
  source = "./modules/system_topic"

  topics                 = local.rn_topic_specs
  existing_variable_name = "existing_resource_notifications_topics"
  tags                   = local.tags
}

moved {
  from = azurerm_eventgrid_system_topic.resource_notifications
  to   = module.resource_notifications_topics.azurerm_eventgrid_system_topic.this
}

moved {
  from = azapi_resource.resource_notifications_topic
  to   = module.resource_notifications_topics.azapi_resource.this
}

# The event subscriptions, one per ARM source (modules/event_subscription): the same function,
# delivery schema, batch, retry policy and dead-lettering as the ARM subscriptions; the Resource
# Notifications event type and the source's subject prefix instead of the ARM advanced filters.
# Event Grid allows 500 event subscriptions per topic (Learn, event-grid/quotas-limits), far above
# the resource group scopes one deployment lists in a subscription.
module "resource_notifications_event_subscriptions" {
  source = "./modules/event_subscription"

  subscriptions = {
    for s, t in local.rn_subscriptions : s => {
      # One topic may carry several (one per resource group scope of its subscription): named by source.
      name                      = "${local.name}-${local.arm_scope_key[s]}"
      topic_name                = t.name
      topic_resource_group_name = t.resource_group_name
      topic_id                  = t.id
      in_other_subscription     = contains(local.foreign_sources, s)
      included_event_types      = local.rn_filter.included_event_types
      subject_begins_with       = local.rn_filter.subject_begins_with[s]
    }
  }
  function_id                    = local.drift_function_id
  max_delivery_attempts          = var.max_delivery_attempts
  event_time_to_live_minutes     = var.event_time_to_live_minutes
  dead_letter_storage_account_id = azurerm_storage_account.policy.id
  dead_letter_container_name     = azurerm_storage_container.dead_letters.name

  # As the ARM subscriptions: the package first, the topic's dead-letter role in effect.
  depends_on = [terraform_data.package, time_sleep.role_propagation]
}

moved {
  from = azurerm_eventgrid_system_topic_event_subscription.resource_notifications
  to   = module.resource_notifications_event_subscriptions.azurerm_eventgrid_system_topic_event_subscription.this
}

moved {
  from = azapi_resource.resource_notifications_event_subscription
  to   = module.resource_notifications_event_subscriptions.azapi_resource.this
}

################################################################################
# Policy changes -> sweep queue
################################################################################

resource "azurerm_eventgrid_system_topic" "policy" {
  name                = "${local.name}-policy"
  resource_group_name = local.resource_group_name
  location            = var.location # a storage system topic lives in the account's region
  source_resource_id  = azurerm_storage_account.policy.id
  topic_type          = "Microsoft.Storage.StorageAccounts"

  identity {
    type = "SystemAssigned"
  }

  tags = local.tags
}

# A policy change starts a sweep of every owned resource, which takes far longer
# than Event Grid waits for a webhook/function answer (30 s, then retries; azure-docs,
# event-grid/delivery-and-retry.md), so the sweep must not run inside the delivery. The BlobCreated
# events go to a storage queue ("Use Queue Storage to receive events that need to be pulled. You
# might use Queue storage when you have a long running process that takes too long to respond",
# azure-docs, event-grid/handler-storage-queues.md) and the `sweep-queue` queueTrigger function
# sweeps from there, with the queue's own visibility timeout, retries and poison queue. Delivered
# with the topic's managed identity (the runtime account has shared keys disabled), which holds
# Storage Queue Data Message Sender on this one queue (rbac.tf).
resource "azurerm_eventgrid_system_topic_event_subscription" "policy" {
  name                  = "${local.name}-policy-sweep"
  system_topic          = azurerm_eventgrid_system_topic.policy.name
  resource_group_name   = local.resource_group_name
  event_delivery_schema = "EventGridSchema"

  included_event_types = ["Microsoft.Storage.BlobCreated"]

  delivery_identity {
    type = "SystemAssigned"
  }

  storage_queue_endpoint {
    storage_account_id                    = azurerm_storage_account.runtime.id
    queue_name                            = azurerm_storage_queue.sweep.name
    queue_message_time_to_live_in_seconds = 86400 # a sweep request older than a day is superseded by the timer sweep
  }

  # Single-document mode: exactly the policy blob. Layered mode: everything under the prefix.
  subject_filter {
    subject_begins_with = local.policy_subject_prefix
    case_sensitive      = true
  }

  advanced_filter {
    # The function's own status report lives next to the policy; writing it must not trigger a
    # sweep (in layered mode it is under the prefix).
    string_not_ends_with {
      key    = "subject"
      values = ["/tagwarden-status.json"]
    }
  }

  retry_policy {
    max_delivery_attempts = var.max_delivery_attempts
    event_time_to_live    = var.event_time_to_live_minutes
  }

  dead_letter_identity {
    type = "SystemAssigned"
  }

  storage_blob_dead_letter_destination {
    storage_account_id          = azurerm_storage_account.policy.id
    storage_blob_container_name = azurerm_storage_container.dead_letters.name
  }

  # The topic's queue-sender and dead-letter roles in effect before the first delivery.
  depends_on = [time_sleep.role_propagation]
}
