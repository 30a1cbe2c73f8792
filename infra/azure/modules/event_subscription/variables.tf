variable "subscriptions" {
  description = "The event subscriptions, by the caller's key (infra/azure keys each by its source). Each names itself (`name`), its system topic (`topic_name` and `topic_resource_group_name` for azurerm, `topic_id` for azapi), whether that topic is in another subscription than the azurerm provider's (`in_other_subscription`: azapi, by the topic's id), its `included_event_types`, and its filter: `advanced_filter` (StringNotBeginsWith and StringNotIn values by key; null for none) or `subject_begins_with` (compared without case; null for none)."
  type = map(object({
    name                      = string
    topic_name                = string
    topic_resource_group_name = string
    topic_id                  = string
    in_other_subscription     = bool
    included_event_types      = list(string)
    advanced_filter = optional(object({
      string_not_begins_with = map(list(string))
      string_not_in          = map(list(string))
    }))
    subject_begins_with = optional(string)
  }))
  nullable = false

  validation {
    # Azure's naming rules for Microsoft.EventGrid/systemTopics/eventSubscriptions (Learn,
    # azure-resource-manager, "Naming rules and restrictions for Azure resources"): 3-64 letters,
    # digits and '-'.
    condition     = alltrue([for s in values(var.subscriptions) : can(regex("^[A-Za-z0-9-]{3,64}$", s.name))])
    error_message = "An event subscription's name must be 3-64 letters, digits and '-' (Azure's event subscription names)."
  }

  validation {
    condition     = alltrue([for s in values(var.subscriptions) : length(s.included_event_types) > 0])
    error_message = "Each event subscription names at least one event type (included_event_types)."
  }
}

variable "function_id" {
  description = "The resource id of the Azure Function every subscription delivers to (`<function app id>/functions/<name>`)."
  type        = string

  validation {
    # A function's resource id is its app's followed by /functions/<name> (Microsoft.Web/sites/functions).
    condition     = can(regex("/functions/[^/]+$", var.function_id))
    error_message = "function_id must be a function's resource id: <function app id>/functions/<name>."
  }
}

variable "max_delivery_attempts" {
  description = "Event Grid's delivery attempts per event before it dead-letters it."
  type        = number

  validation {
    # EventGrid.json RetryPolicy.maxDeliveryAttempts: 1-30.
    condition     = var.max_delivery_attempts >= 1 && var.max_delivery_attempts <= 30
    error_message = "max_delivery_attempts must be 1-30 (Event Grid's retry policy)."
  }
}

variable "event_time_to_live_minutes" {
  description = "How long Event Grid keeps retrying an event, in minutes, before it dead-letters it."
  type        = number

  validation {
    # EventGrid.json RetryPolicy.eventTimeToLiveInMinutes: 1-1440.
    condition     = var.event_time_to_live_minutes >= 1 && var.event_time_to_live_minutes <= 1440
    error_message = "event_time_to_live_minutes must be 1-1440 (Event Grid's retry policy)."
  }
}

variable "dead_letter_storage_account_id" {
  description = "The storage account of the dead-letter container (written with each topic's system-assigned identity, which the caller grants Storage Blob Data Contributor there)."
  type        = string
}

variable "dead_letter_container_name" {
  description = "The blob container dead letters go to."
  type        = string
}
