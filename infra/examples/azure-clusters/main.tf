# tagwarden for every OpenShift cluster of one Azure subscription: one deployment, three clusters.
# Each cluster's resource group is an enforcement scope (Tag Contributor and Reader
# there, one Event Grid topic each); each cluster keeps its policy under clusters/<infraID>/ in the
# policy container. Adding a cluster is one entry in var.clusters (its infraID and resource group) and one apply.

provider "azurerm" {
  features {}

  subscription_id = var.subscription_id
  # The module's storage accounts have shared keys disabled: the provider must use Entra ID for
  # blob data (the initial policy uploads).
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

  infra_ids = keys(var.clusters)
  # A CAPZ cluster's name (up to 63 characters, '.') is admitted with its kind.
  cluster_kinds = { for id, c in var.clusters : id => c.kind if c.kind != null }
  location      = var.location
  function_zip  = var.function_zip
  # Only for publishing outside Terraform (CI): see the azure-basic README.
  package_published = var.package_published

  # Each cluster's resource group(s) as the cluster reports them (no guessed names).
  enforcement_scopes = flatten([for id, c in var.clusters : [
    for rg in compact([c.resource_group, c.network_resource_group]) : "/subscriptions/${var.subscription_id}/resourceGroups/${rg}"
  ]])

  # Each cluster publishes its own policy (no tags invented here); initial_policies
  # writes a first version once, for the clusters it names.
  cluster_policy_documents = var.initial_policies
  # The caller of `terraform apply` uploads the policies: it needs blob write on the policy container.
  policy_writer_principal_ids = [data.azurerm_client_config.current.object_id]
  # Each cluster's publisher writes its own folder only.
  cluster_publisher_principal_ids = { for id, c in var.clusters : id => c.publisher_principal_id if c.publisher_principal_id != null }

  sweep_schedule = "0 0 * * * *" # hourly
  alert_emails   = var.alert_emails

  tags = var.tags
}
