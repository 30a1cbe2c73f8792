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

variable "enforcement_scope" {
  description = "Where tagwarden's identity gets the tag writer role and Reader, which resource writes reach it, and what its sweep covers: `resource_groups` (the default: `resource_group` and `extra_resource_groups`) or `subscription` (the whole of `subscription_id`). Azure Red Hat OpenShift needs `subscription`: its managed resource group carries a deny assignment that lets tag writes through but refuses the role assignments this module would create there; assigned at the subscription, they are inherited, and the ownership tag still decides what is written."
  type        = string
  default     = "resource_groups"
  nullable    = false

  validation {
    condition     = contains(["resource_groups", "subscription"], var.enforcement_scope)
    error_message = "enforcement_scope must be resource_groups (the cluster's resource groups) or subscription (the whole subscription: on Azure Red Hat OpenShift)."
  }
}

variable "resource_group" {
  description = "The cluster's resource group, as the cluster reports it: `oc get infrastructure cluster -o jsonpath='{.status.platformStatus.azure.resourceGroupName}'` (IPI: `<infraID>-rg` unless install-config named one). Required with `enforcement_scope = \"resource_groups\"`; not used with `subscription` (ARO, whose managed resource group `aro-…` refuses role assignments)."
  type        = string
  default     = null

  validation {
    condition     = var.resource_group == null ? var.enforcement_scope == "subscription" : can(regex("^[-A-Za-z0-9_.()]{1,90}$", var.resource_group))
    error_message = "resource_group must be a resource group name (1-90 letters, digits, '-', '_', '.', '(', ')'), as status.platformStatus.azure.resourceGroupName prints it; it is required unless enforcement_scope = \"subscription\"."
  }
}

variable "extra_resource_groups" {
  description = "Further resource groups owned by the cluster, e.g. the network resource group of a pre-existing VNet: `oc get infrastructure cluster -o jsonpath='{.status.platformStatus.azure.networkResourceGroupName}'` (when it differs from `resource_group`). With `enforcement_scope = \"subscription\"` the subscription covers them."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.extra_resource_groups) == 0 || var.enforcement_scope == "resource_groups"
    error_message = "extra_resource_groups is for enforcement_scope = \"resource_groups\": the subscription already covers them."
  }
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
