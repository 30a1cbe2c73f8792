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

variable "resource_group" {
  description = "The cluster's resource group, as the cluster reports it: `oc get infrastructure cluster -o jsonpath='{.status.platformStatus.azure.resourceGroupName}'` (IPI: `<infraID>-rg` unless install-config named one; ARO: the managed resource group, `aro-…`)."
  type        = string

  validation {
    condition     = can(regex("^[-A-Za-z0-9_.()]{1,90}$", var.resource_group))
    error_message = "resource_group must be a resource group name (1-90 letters, digits, '-', '_', '.', '(', ')'), as status.platformStatus.azure.resourceGroupName prints it."
  }
}

variable "extra_resource_groups" {
  description = "Further resource groups owned by the cluster, e.g. the network resource group of a pre-existing VNet: `oc get infrastructure cluster -o jsonpath='{.status.platformStatus.azure.networkResourceGroupName}'` (when it differs from `resource_group`)."
  type        = list(string)
  default     = []
}

variable "initial_policy" {
  description = "Optional: the cluster's Infrastructure object, written once as the first policy: `-var initial_policy=\"$(oc get infrastructure cluster -o yaml)\"`. Default (null): no policy until it is published (`tagwarden publish`, or the in-cluster publisher)."
  type        = string
  default     = null
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

variable "mode" {
  description = "`audit` (the default: report what would be written, write nothing) or `enforce`."
  type        = string
  default     = "audit"
}
