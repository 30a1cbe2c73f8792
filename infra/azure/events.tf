# Event Grid: which events reach the function and how.
#
#   ARM writes in each enforcement scope (one system topic per scope, global)
#                                        --ResourceWriteSuccess--> function `drift` (eventGridTrigger)
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
  # Event Grid allows at most 25 advanced-filter values per event subscription.
  arm_filter_value_count = (length(flatten(values(local.arm_filter.string_not_begins_with))) +
  length(flatten(values(local.arm_filter.string_not_in))))

  # Issue 17 item 1: "Only one Azure Event Grid system topic is allowed per source (like
  # subscription, resource group, etc.)" (azure-docs, event-grid/system-topics.md). A topic on the
  # whole subscription collides with the portal's, Defender's or another deployment's. So: one
  # topic per enforcement scope (a resource group topic for a resource group scope: the cluster's
  # own source, nobody else's), and for a scope that already has a topic (existing_system_topics)
  # only the event subscription. This is also the shape of the one-deployment-per-subscription
  # design of issue 12: N clusters are N resource-group scopes, N topics, one function; a
  # subscription scope is one topic per subscription, created once or passed in as existing.
  arm_topic_type = {
    for s in local.enforcement_scopes : s => (
      strcontains(lower(s), "/resourcegroups/") ? "Microsoft.Resources.ResourceGroups" : "Microsoft.Resources.Subscriptions"
    )
  }
  created_arm_topic_scopes = toset([for s in local.enforcement_scopes : s if !contains(keys(var.existing_system_topics), s)])

  arm_topics = merge(
    {
      for s, t in azurerm_eventgrid_system_topic.arm : s => {
        id                  = t.id
        name                = t.name
        resource_group_name = t.resource_group_name
        principal_id        = t.identity[0].principal_id
      }
    },
    {
      for s, t in data.azurerm_eventgrid_system_topic.existing : s => {
        id                  = t.id
        name                = t.name
        resource_group_name = t.resource_group_name
        principal_id        = t.identity[0].principal_id
      }
    },
  )

  # Issue 17 item 3: the subscriptions deliver to the `drift` function and Azure refuses an
  # azure_function_endpoint whose function does not exist yet, so they wait for a published package.
  arm_subscriptions = { for s, t in local.arm_topics : s => t if local.package_published }

  # Short, stable keys for names and alerts ("rg-<hash>" / "sub-<hash>" of the scope id).
  arm_scope_key = {
    for s in local.enforcement_scopes : s => "${strcontains(lower(s), "/resourcegroups/") ? "rg" : "sub"}-${substr(sha1(lower(s)), 0, 8)}"
  }

  # Blob events for the policy: created/overwritten blobs under the policy blob, prefix or set (the
  # function sweeps only the clusters whose folder a change is in).
  policy_subject_prefix = "/blobServices/default/containers/${local.policy_container}/blobs/${local.cluster_set ? local.set_prefix : local.layered ? var.policy_prefix : local.policy_blob}"
}

################################################################################
# ARM resource writes
################################################################################

resource "azurerm_eventgrid_system_topic" "arm" {
  for_each = local.created_arm_topic_scopes

  name                = "${local.name}-arm-${local.arm_scope_key[each.key]}"
  resource_group_name = local.resource_group_name
  location            = "global" # required for Microsoft.Resources.Subscriptions and .ResourceGroups
  source_resource_id  = each.key
  topic_type          = local.arm_topic_type[each.key]

  identity {
    type = "SystemAssigned" # dead-lettering without storage keys (rbac.tf)
  }

  tags = local.tags

  lifecycle {
    # "It's not possible to create a system topic in an Azure subscription that's different from
    # the event source's" (azure-docs, event-grid/system-topics.md).
    precondition {
      condition     = length(local.foreign_scopes) == 0
      error_message = "Every enforcement scope must be in the deployment's subscription (Event Grid creates a system topic only in its source's subscription): deploy tagwarden once per subscription. Foreign: ${join(", ", local.foreign_scopes)}."
    }
    precondition {
      condition     = length(local.nested_rg_scopes) == 0
      error_message = "Resource groups inside a listed subscription scope would deliver every event twice; list the subscription or its resource groups, not both: ${join(", ", local.nested_rg_scopes)}."
    }
  }
}

# Topics that already exist for a scope (the portal's, Defender's, another deployment's): only the
# event subscription is ours.
data "azurerm_eventgrid_system_topic" "existing" {
  for_each = var.existing_system_topics

  name                = each.value.name
  resource_group_name = each.value.resource_group_name

  lifecycle {
    postcondition {
      condition     = lower(self.source_resource_id) == lower(each.key) && self.topic_type == (strcontains(lower(each.key), "/resourcegroups/") ? "Microsoft.Resources.ResourceGroups" : "Microsoft.Resources.Subscriptions")
      error_message = "existing_system_topics[\"${each.key}\"] (${each.value.name}) is a ${self.topic_type} topic on ${self.source_resource_id}, not a topic on that scope."
    }
    postcondition {
      condition     = length(self.identity) > 0 && strcontains(self.identity[0].type, "SystemAssigned")
      error_message = "existing_system_topics[\"${each.key}\"] (${each.value.name}) has no system-assigned identity; dead-lettering without storage keys needs one: az eventgrid system-topic update -g ${each.value.resource_group_name} -n ${each.value.name} --identity systemassigned."
    }
    postcondition {
      condition     = contains(local.enforcement_scopes, each.key)
      error_message = "existing_system_topics[\"${each.key}\"] is not one of the enforcement scopes."
    }
  }
}

resource "azurerm_eventgrid_system_topic_event_subscription" "arm" {
  for_each = local.arm_subscriptions

  name                  = "${local.name}-drift"
  system_topic          = each.value.name
  resource_group_name   = each.value.resource_group_name
  event_delivery_schema = "EventGridSchema"

  # Only successful writes. Deletes and failed/cancelled writes never need a tag write.
  included_event_types = local.arm_filter.included_event_types

  azure_function_endpoint {
    function_id                       = local.drift_function_id
    max_events_per_batch              = 1
    preferred_batch_size_in_kilobytes = 64
  }

  # Drop what the handler would ignore anyway (all filters are ANDed; values within one are ORed,
  # negated operators AND their values; string comparisons are case-insensitive).
  advanced_filter {
    # Deployments (the real resources raise their own events), role assignments, policy, ...
    # Microsoft.Resources/tags/write is deliberately *not* dropped: an external tag edit is drift.
    dynamic "string_not_begins_with" {
      for_each = local.arm_filter.string_not_begins_with
      content {
        key    = string_not_begins_with.key
        values = string_not_begins_with.value
      }
    }

    # Loop safety, first guard: the function's own writes (its identity as RBAC principal and as
    # token appid). Second guard: the handler checks the same ids and reconcile is idempotent.
    dynamic "string_not_in" {
      for_each = local.arm_filter.string_not_in
      content {
        key    = string_not_in.key
        values = string_not_in.value
      }
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

  # The package first (the `drift` function must exist), and the topic's dead-letter role in effect.
  depends_on = [terraform_data.package, time_sleep.role_propagation]

  lifecycle {
    precondition {
      condition     = local.arm_filter_value_count <= 25
      error_message = "The ARM event subscription would need more than 25 advanced-filter values (ignored_operation_prefixes + 2 self ids); Event Grid rejects that."
    }
  }
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

# Issue 17 item 2: a policy change starts a sweep of every owned resource, which takes far longer
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
