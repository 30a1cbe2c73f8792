variable "subscription_id" {
  description = "The platform subscription that holds tagwarden itself (the Function App, its storage and monitoring). Usually one of `subscription_ids`, but need not be."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", var.subscription_id))
    error_message = "subscription_id must be a subscription GUID."
  }
}

variable "management_group_id" {
  description = "The management group (its id, not its display name: `az account management-group list --query '[].name'`) whose subscriptions run the clusters. tagwarden's identity gets the tag writer role and Reader there, once."
  type        = string

  validation {
    condition     = can(regex("^[-A-Za-z0-9_.()]{0,89}[-A-Za-z0-9_()]$", var.management_group_id))
    error_message = "management_group_id must be a management group id: 1-90 letters, digits, -, _, (, ), ., not ending in a period."
  }
}

variable "subscription_ids" {
  description = "The management group's subscriptions whose resource writes must reach the function, one or more (every subscription that runs a cluster): one Event Grid system topic each. `az account management-group subscription show-sub-under-mg --name <group> --query '[].name'` lists those directly under it."
  type        = list(string)

  validation {
    condition = length(var.subscription_ids) >= 1 && alltrue([for s in var.subscription_ids : can(regex("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", s))]) && (
      length(distinct([for s in var.subscription_ids : lower(s)])) == length(var.subscription_ids)
    )
    error_message = "subscription_ids must list one or more distinct subscription GUIDs (each subscription whose clusters' resource writes must reach the function)."
  }
}

variable "existing_system_topics" {
  description = "Subscriptions of `subscription_ids` that already have a `Microsoft.Resources.Subscriptions` system topic (Event Grid allows one per source: the portal's, Defender's): `{ \"/subscriptions/<guid>\" = { name = \"...\", resource_group_name = \"...\" } }`. The module then adds only its event subscription to that topic."
  type = map(object({
    name                = string
    resource_group_name = string
  }))
  default = {}
}

variable "clusters" {
  description = "The clusters in the group's subscriptions: infraID (`oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`; for a Cluster API (CAPZ) cluster its `Cluster`'s name) => the object id of that cluster's policy publisher (the managed identity ccoctl creates from its CredentialsRequest, or a set publisher's; null until it exists) and, for a cluster not made by the OpenShift installer, its `kind`: `ClusterAPI` (a CAPZ cluster, name up to 63 characters, '.' allowed), `HyperShift`; ARO and self-managed OpenShift take none."
  type = map(object({
    publisher_principal_id = optional(string)
    kind                   = optional(string)
  }))
}

variable "initial_policies" {
  description = "Optional first policies, infraID => that cluster's Infrastructure object (`oc get infrastructure cluster -o yaml`), each written once to `clusters/<infraID>/10-cluster.yaml`; afterwards each cluster's publisher owns its own."
  type        = map(string)
  default     = {}
}

variable "name" {
  description = "Name of the deployment (prefix of every resource; `<name>-events` is the resource group of the system topics in the other subscriptions)."
  type        = string
  default     = "tagwarden"
}

variable "location" {
  description = "Region of the function (must offer Flex Consumption); also of the `<name>-events` resource groups."
  type        = string
  default     = "westeurope"
}

variable "function_zip" {
  description = "Path to the packaged function, published during apply with the Azure CLI (One Deploy). null: publish it yourself, then apply again with `package_published = true`."
  type        = string
  default     = null
}

variable "package_published" {
  description = "Set true after publishing the package outside Terraform, so that the ARM event subscriptions (which need the `drift` function) are created."
  type        = bool
  default     = false
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
