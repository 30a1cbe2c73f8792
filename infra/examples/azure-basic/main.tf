# tagwarden for one OpenShift cluster in one Azure subscription: the cluster's resource group is the
# enforcement scope, the policy is the cluster's Infrastructure object in the policy container.

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

  infra_id     = var.infra_id
  location     = var.location
  function_zip = var.function_zip
  # Only for publishing outside Terraform (CI): see README.
  package_published = var.package_published

  # OpenShift IPI puts the cluster's resources in "<infra_id>-rg" (plus the network resource group
  # when the VNet is pre-existing). Only these scopes get Tag Contributor and Reader.
  enforcement_scopes = concat(
    ["/subscriptions/${var.subscription_id}/resourceGroups/${var.infra_id}-rg"],
    [for rg in var.extra_resource_groups : "/subscriptions/${var.subscription_id}/resourceGroups/${rg}"],
  )

  policy_blob = "tagwarden/infrastructure.yaml"
  policy_document = templatefile("${path.module}/policy/infrastructure.yaml.tftpl", {
    infra_id  = var.infra_id
    location  = var.location
    user_tags = var.user_tags
  })
  # The caller of `terraform apply` uploads the policy: it needs blob write on the policy container.
  policy_writer_principal_ids = [data.azurerm_client_config.current.object_id]

  sweep_schedule = "0 0 * * * *" # hourly
  alert_emails   = var.alert_emails

  tags = var.tags
}
