variable "subscription_id" {
  description = "The Azure subscription of the cluster (and of tagwarden)."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-fA-F-]{36}$", var.subscription_id))
    error_message = "subscription_id must be a subscription GUID."
  }
}

variable "location" {
  description = "Region of the cluster and of the function (must offer Flex Consumption)."
  type        = string
  default     = "westeurope"
}

variable "infra_id" {
  description = "The cluster's infraID (`oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`)."
  type        = string
}

variable "function_zip" {
  description = "Path to the packaged function (`host.json`, `drift/`, `sweep/`, `sweep-queue/`, `tagwarden-azure-function`), published during apply with the Azure CLI (One Deploy). null: publish it yourself, then apply again with `package_published = true`."
  type        = string
  default     = null
}

variable "package_published" {
  description = "Set true after publishing the package outside Terraform, so that the ARM event subscriptions (which need the `drift` function) are created."
  type        = bool
  default     = false
}

variable "extra_resource_groups" {
  description = "Further resource groups owned by the cluster (e.g. the network resource group of a pre-existing VNet)."
  type        = list(string)
  default     = []
}

variable "user_tags" {
  description = "The cluster's user tags, as the Infrastructure object publishes them (`status.platformStatus.azure.resourceTags`)."
  type        = map(string)
  default = {
    cost-center = "4711"
    team        = "platform"
  }
}

variable "alert_emails" {
  description = "Who receives the alerts."
  type        = list(string)
  default     = []
}

variable "tags" {
  description = "Tags for the tagwarden resources themselves."
  type        = map(string)
  default = {
    app = "tagwarden"
  }
}
