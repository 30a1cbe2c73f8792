# Event Grid event subscriptions that deliver to one Azure Function, each on a system topic: by
# azurerm when the topic is in the azurerm provider's subscription, by azapi (the REST shape,
# Microsoft.EventGrid/systemTopics/eventSubscriptions@2022-06-15, EventGrid.json of
# azure-rest-api-specs: AzureFunctionEventSubscriptionDestination, AdvancedFilter operatorType
# StringNotBeginsWith / StringNotIn, RetryPolicy, DeadLetterWithResourceIdentity) when it is in
# another (azurerm acts in its provider's one subscription; azapi creates a resource wherever its
# parent id points). Both forms carry the same delivery: the Event Grid schema, one event per batch
# to the function, the caller's retry policy, and dead letters written with the topic's
# system-assigned identity into one blob container. What differs per subscription is its filter:
# event types, and advanced filters or a subject prefix.

locals {
  home    = { for k, s in var.subscriptions : k => s if !s.in_other_subscription }
  foreign = { for k, s in var.subscriptions : k => s if s.in_other_subscription }
  # Event Grid allows at most 25 advanced-filter values per event subscription (Learn,
  # event-grid/event-filtering, "Limitations").
  advanced_filter_value_count = {
    for k, s in var.subscriptions : k => s.advanced_filter == null ? 0 : (
      length(flatten(values(s.advanced_filter.string_not_begins_with))) + length(flatten(values(s.advanced_filter.string_not_in)))
    )
  }
}

resource "azurerm_eventgrid_system_topic_event_subscription" "this" {
  for_each = local.home

  name                  = each.value.name
  system_topic          = each.value.topic_name
  resource_group_name   = each.value.topic_resource_group_name
  event_delivery_schema = "EventGridSchema"
  included_event_types  = each.value.included_event_types

  azure_function_endpoint {
    function_id                       = var.function_id
    max_events_per_batch              = 1
    preferred_batch_size_in_kilobytes = 64
  }

  # All filters are ANDed; values within one are ORed, negated operators AND their values; string
  # comparisons are case-insensitive.
  dynamic "advanced_filter" {
    for_each = each.value.advanced_filter == null ? [] : [each.value.advanced_filter]
    content {
      dynamic "string_not_begins_with" {
        for_each = advanced_filter.value.string_not_begins_with
        content {
          key    = string_not_begins_with.key
          values = string_not_begins_with.value
        }
      }

      dynamic "string_not_in" {
        for_each = advanced_filter.value.string_not_in
        content {
          key    = string_not_in.key
          values = string_not_in.value
        }
      }
    }
  }

  dynamic "subject_filter" {
    for_each = each.value.subject_begins_with == null ? [] : [each.value.subject_begins_with]
    content {
      subject_begins_with = subject_filter.value
      case_sensitive      = false
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
    storage_account_id          = var.dead_letter_storage_account_id
    storage_blob_container_name = var.dead_letter_container_name
  }

  lifecycle {
    precondition {
      condition     = local.advanced_filter_value_count[each.key] <= 25
      error_message = "The event subscription ${each.value.name} would need ${local.advanced_filter_value_count[each.key]} advanced-filter values; Event Grid takes 25 (for the ARM subscriptions: ignored_operation_prefixes + 2 self ids)."
    }
  }
}

resource "azapi_resource" "this" {
  for_each = local.foreign

  type      = "Microsoft.EventGrid/systemTopics/eventSubscriptions@2022-06-15"
  name      = each.value.name
  parent_id = each.value.topic_id

  body = {
    properties = {
      eventDeliverySchema = "EventGridSchema"
      destination = {
        endpointType = "AzureFunction"
        properties = {
          resourceId                    = var.function_id
          maxEventsPerBatch             = 1
          preferredBatchSizeInKilobytes = 64
        }
      }
      # The filter in the REST shape, with only the members the subscription uses (an absent
      # member, not a null one: the body is compared as written).
      filter = merge(concat(
        [{ includedEventTypes = each.value.included_event_types }],
        [for f in [each.value.advanced_filter] : {
          advancedFilters = concat(
            [for key, values in f.string_not_begins_with : { operatorType = "StringNotBeginsWith", key = key, values = values }],
            [for key, values in f.string_not_in : { operatorType = "StringNotIn", key = key, values = values }],
          )
        } if f != null],
        [for s in [each.value.subject_begins_with] : { subjectBeginsWith = s, isSubjectCaseSensitive = false } if s != null],
      )...)
      retryPolicy = {
        maxDeliveryAttempts      = var.max_delivery_attempts
        eventTimeToLiveInMinutes = var.event_time_to_live_minutes
      }
      deadLetterWithResourceIdentity = {
        identity = { type = "SystemAssigned" }
        deadLetterDestination = {
          endpointType = "StorageBlob"
          properties = {
            resourceId        = var.dead_letter_storage_account_id
            blobContainerName = var.dead_letter_container_name
          }
        }
      }
    }
  }

  lifecycle {
    precondition {
      condition     = local.advanced_filter_value_count[each.key] <= 25
      error_message = "The event subscription ${each.value.name} would need ${local.advanced_filter_value_count[each.key]} advanced-filter values; Event Grid takes 25 (for the ARM subscriptions: ignored_operation_prefixes + 2 self ids)."
    }
  }
}
