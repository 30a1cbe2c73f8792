variable "topics" {
  description = "The Event Grid system topics, by the caller's key (infra/azure keys each by its source). Each names its source (`source_resource_id`), its `topic_type`, its `name` and `resource_group_name`, and whether it is created here (`create = true`) or already exists and is only read and checked (`create = false`). `subscription_id` null: the topic is in the azurerm provider's subscription (azurerm); else it is in that subscription, created or read by id with azapi, a created one under `resource_group_id` (that group's id in that subscription)."
  type = map(object({
    source_resource_id  = string
    topic_type          = string
    name                = string
    resource_group_name = string
    create              = bool
    location            = optional(string, "global")
    subscription_id     = optional(string)
    resource_group_id   = optional(string)
  }))
  nullable = false

  validation {
    # Azure's naming rules for Microsoft.EventGrid/systemTopics (Learn, azure-resource-manager,
    # "Naming rules and restrictions for Azure resources"): 3-128 letters, digits and '-'. Only
    # the names given to topics created here: an existing topic keeps the name it has.
    condition     = alltrue([for t in values(var.topics) : !t.create || can(regex("^[A-Za-z0-9-]{3,128}$", t.name))])
    error_message = "A created topic's name must be 3-128 letters, digits and '-' (Azure's system topic names)."
  }

  validation {
    # azapi creates a topic outside the provider's subscription by its parent id: the group the
    # topic goes in, in that subscription.
    condition     = alltrue([for t in values(var.topics) : t.subscription_id == null || !t.create || t.resource_group_id != null])
    error_message = "A topic created in another subscription (subscription_id set, create = true) needs resource_group_id, the id of its resource group in that subscription."
  }
}

variable "existing_variable_name" {
  description = "The caller's input that names the existing topics (`create = false`), for the error messages of the checks on them, e.g. `existing_system_topics`."
  type        = string
  default     = "existing topics"
  nullable    = false
}

variable "tags" {
  description = "Tags of the topics created here (an existing topic's tags are left as they are)."
  type        = map(string)
  default     = {}
  nullable    = false
}
