# tagwarden for one OpenShift cluster in one Azure subscription: the cluster's resource group (or,
# on Azure Red Hat OpenShift, the subscription) is the enforcement scope, the policy is the
# cluster's Infrastructure object in the policy container.

provider "azurerm" {
  features {}

  subscription_id = var.subscription_id
  # The module's storage accounts have shared keys disabled: the provider must use Entra ID for
  # blob data (the initial policy upload).
  storage_use_azuread = true
}

# The module writes the Function App's settings once more through ARM (azapi_resource_action,
# infra/azure/function.tf: AzureWebJobsStorage without a perpetual diff).
provider "azapi" {
  subscription_id = var.subscription_id
}

data "azurerm_client_config" "current" {}

module "tagwarden" {
  source = "../../azure"

  # Audit first (the default): everything is evaluated and reported, no tag is written, until
  # mode = "enforce".
  mode = var.mode

  infra_id     = var.infra_id
  location     = var.location
  function_zip = var.function_zip
  # Only for publishing outside Terraform (CI): see README.
  package_published = var.package_published

  # The cluster's resource group as the cluster reports it (not a guessed
  # "<infra_id>-rg"): `oc get infrastructure cluster -o jsonpath='{.status.platformStatus.azure.resourceGroupName}'`,
  # plus the network resource group when the VNet is pre-existing. Only these scopes get the tag
  # writer role and Reader. On ARO that resource group is the managed one (`aro-…`), whose deny
  # assignment lets tag writes through (Microsoft.Resources/tags/* is one of its exceptions) but
  # refuses everything else that writes there, the role assignments this module would create at
  # that scope included (Microsoft.Authorization/roleAssignments/write): so on ARO the scope is the
  # subscription (enforcement_scope = "subscription"), whose assignments the managed resource
  # group inherits; the ownership tag still decides what is written (README, "Azure Red Hat
  # OpenShift").
  enforcement_scopes = var.enforcement_scope == "subscription" ? ["/subscriptions/${var.subscription_id}"] : [
    for rg in concat([var.resource_group], var.extra_resource_groups) : "/subscriptions/${var.subscription_id}/resourceGroups/${rg}"
  ]

  # The policy is the cluster's own (no tags invented here): nothing is written unless
  # initial_policy is given, then only once; afterwards `tagwarden publish` owns the blob.
  policy_blob     = "tagwarden/infrastructure.yaml"
  policy_document = var.initial_policy
  # The caller of `terraform apply` uploads the policy: it needs blob write on the policy container.
  policy_writer_principal_ids = [data.azurerm_client_config.current.object_id]

  sweep_schedule = "0 0 * * * *" # hourly
  alert_emails   = var.alert_emails

  tags = var.tags
}
