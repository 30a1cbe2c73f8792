# tagwarden for a management group of any number of subscriptions: one deployment, one
# Function App, one identity, in the platform subscription `subscription_id`. The identity gets the
# tag writer role and Reader once, at the management group; the sweep covers the whole group
# (TAGWARDEN_SWEEP_SCOPES is the management group id); each subscription of var.subscription_ids
# has one Event Grid system topic in that subscription (the module creates it through azapi, or
# reuses the one named in var.existing_system_topics) delivering to the one function. The clusters,
# in any of those subscriptions, keep their policies in the one policy container, each publisher
# writing only its own cluster's folder.

provider "azurerm" {
  features {}

  subscription_id = var.subscription_id
  # The module's storage accounts have shared keys disabled: the provider must use Entra ID for
  # blob data (the initial policy uploads).
  storage_use_azuread = true
}

# The module writes the Function App's settings once more through ARM (infra/azure/function.tf) and
# creates the system topics of the other subscriptions by parent id (infra/azure/events.tf): azapi
# acts in whichever subscription a parent id names, with this login.
provider "azapi" {
  subscription_id = var.subscription_id
}

data "azurerm_client_config" "current" {}

module "tagwarden" {
  source = "../../azure"

  # Audit first (the default): everything is evaluated and reported, no tag is written, until
  # mode = "enforce".
  mode = var.mode

  name      = var.name
  infra_ids = keys(var.clusters)
  # A CAPZ cluster's name (up to 63 characters, '.') is admitted with its kind.
  cluster_kinds = { for id, c in var.clusters : id => c.kind if c.kind != null }
  location      = var.location
  function_zip  = var.function_zip
  # Only for publishing outside Terraform (CI): see the azure-basic README.
  package_published = var.package_published

  # The management group: the roles once there, the sweep over every subscription below it.
  enforcement_scopes = ["/providers/Microsoft.Management/managementGroups/${var.management_group_id}"]
  # The subscriptions whose resource writes reach the function (one system topic each). A
  # subscription of the group not listed here is swept, but its events are not received.
  event_source_subscription_ids = var.subscription_ids
  existing_system_topics        = var.existing_system_topics

  # Each cluster publishes its own policy (no tags invented here), and only under
  # clusters/<infraID>/ (ABAC on the blob path), whichever subscription it runs in.
  cluster_publisher_principal_ids = { for id, c in var.clusters : id => c.publisher_principal_id if c.publisher_principal_id != null }
  cluster_policy_documents        = var.initial_policies
  # The caller of `terraform apply` uploads the initial policies: it needs blob write on the policy
  # container (only when there are any).
  policy_writer_principal_ids = length(var.initial_policies) > 0 ? [data.azurerm_client_config.current.object_id] : []

  sweep_schedule = "0 0 * * * *" # hourly
  alert_emails   = var.alert_emails

  tags = var.tags
}
