variable "subscription_id" {
  description = "The Azure subscription of the clusters (and of tagwarden)."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-fA-F-]{36}$", var.subscription_id))
    error_message = "subscription_id must be a subscription GUID."
  }
}

variable "location" {
  description = "Region of the function (must offer Flex Consumption)."
  type        = string
  default     = "westeurope"
}

variable "clusters" {
  description = "The subscription's clusters: infraID (`oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`; for a Cluster API (CAPZ) cluster its `Cluster`'s name) => its resource group (`{.status.platformStatus.azure.resourceGroupName}`; a CAPZ cluster's `AzureCluster` `spec.resourceGroup`) and, when the VNet is elsewhere, its network resource group (`{.status.platformStatus.azure.networkResourceGroupName}`), and for a cluster not made by the OpenShift installer its `kind`: `ClusterAPI` (CAPZ: name up to 63 characters, '.' allowed) or `HyperShift`. An ARO cluster's managed resource group refuses role assignments: deploy ARO with `infra/examples/azure-basic`'s `enforcement_scope = \"subscription\"`, or the module with the subscription as its scope. `publisher_principal_id`: the object id of the cluster's policy publisher (the managed identity ccoctl creates from its CredentialsRequest; null until it exists), which may then write that cluster's folder `clusters/<infraID>/` and no other."
  type = map(object({
    resource_group         = string
    network_resource_group = optional(string)
    kind                   = optional(string)
    publisher_principal_id = optional(string)
  }))
}

variable "initial_policies" {
  description = "Optional first policies, infraID => that cluster's Infrastructure object (`oc get infrastructure cluster -o yaml`), each written once to `clusters/<infraID>/10-cluster.yaml`; afterwards each cluster's publisher owns its own."
  type        = map(string)
  default     = {}
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
