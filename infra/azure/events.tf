# Event Grid: which events reach the function and how.
#
#   ARM writes (subscription system topic, global) --ResourceWriteSuccess--> function `drift`
#   policy blob created (policy account topic)      --BlobCreated---------> function `drift` (sweep)
#   timer (sweep/function.json, TAGWARDEN_SWEEP_SCHEDULE)                 -> function `sweep`
#
# Both subscriptions deliver in the Event Grid schema to the `drift` eventGridTrigger function
# (the Functions host answers the validation handshake), one event per batch, retry with Event
# Grid's backoff, and dead-letter into the `dead-letters` container with the topic's identity.

locals {
  drift_function_id = "${azurerm_function_app_flex_consumption.this.id}/functions/${local.function_drift_name}"

  # ARM event filters, one list so the README, the output and the tests see the same thing.
  arm_filter = {
    included_event_types   = ["Microsoft.Resources.ResourceWriteSuccess"]
    string_not_begins_with = { "data.operationName" = var.ignored_operation_prefixes }
    string_begins_with     = length(local.rg_scopes) > 0 ? { "subject" = local.rg_scopes } : {}
    string_not_in = var.exclude_self_in_event_filter ? {
      "data.authorization.evidence.principalId" = [azurerm_user_assigned_identity.function.principal_id]
      "data.claims.appid"                       = [azurerm_user_assigned_identity.function.client_id]
    } : {}
  }
  # Event Grid allows at most 25 advanced-filter values per event subscription.
  arm_filter_value_count = (length(flatten(values(local.arm_filter.string_not_begins_with))) +
    length(flatten(values(local.arm_filter.string_begins_with))) +
  length(flatten(values(local.arm_filter.string_not_in))))

  # Blob events for the policy: created/overwritten blobs under the policy blob or prefix.
  policy_subject_prefix = "/blobServices/default/containers/${local.policy_container}/blobs/${local.layered ? var.policy_prefix : local.policy_blob}"
}

################################################################################
# ARM resource writes
################################################################################

resource "azurerm_eventgrid_system_topic" "arm" {
  name                = "${local.name}-arm"
  resource_group_name = local.resource_group_name
  location            = "global" # required for Microsoft.Resources.Subscriptions
  source_resource_id  = local.subscription_id
  topic_type          = "Microsoft.Resources.Subscriptions"

  identity {
    type = "SystemAssigned" # dead-lettering without storage keys (rbac.tf)
  }

  tags = local.tags
}

resource "azurerm_eventgrid_system_topic_event_subscription" "arm" {
  name                  = "${local.name}-drift"
  system_topic          = azurerm_eventgrid_system_topic.arm.name
  resource_group_name   = local.resource_group_name
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

    # Resource-group enforcement scopes: only resources inside them (subject = resource id).
    dynamic "string_begins_with" {
      for_each = local.arm_filter.string_begins_with
      content {
        key    = string_begins_with.key
        values = string_begins_with.value
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

  depends_on = [azurerm_role_assignment.dead_letter_writer]

  lifecycle {
    precondition {
      condition     = local.arm_filter_value_count <= 25
      error_message = "The ARM event subscription would need more than 25 advanced-filter values (ignored_operation_prefixes + resource-group enforcement_scopes + 2 self ids); Event Grid rejects that."
    }
  }
}

################################################################################
# Policy changes -> sweep
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

resource "azurerm_eventgrid_system_topic_event_subscription" "policy" {
  name                  = "${local.name}-policy-sweep"
  system_topic          = azurerm_eventgrid_system_topic.policy.name
  resource_group_name   = local.resource_group_name
  event_delivery_schema = "EventGridSchema"

  included_event_types = ["Microsoft.Storage.BlobCreated"]

  # The same function: the handler routes Microsoft.Storage.BlobCreated to a sweep.
  azure_function_endpoint {
    function_id          = local.drift_function_id
    max_events_per_batch = 1
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

  depends_on = [azurerm_role_assignment.dead_letter_writer]
}
