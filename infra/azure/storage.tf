# Two storage accounts, both without shared keys (Entra ID only), TLS 1.2, no public blobs:
#
#   runtime  the Function App's own storage: host state (AzureWebJobsStorage: locks, keys, timer
#            schedule), the Flex Consumption deployment container and the policy-change sweep
#            queue (read through AzureWebJobsStorage). The platform identity needs broad blob
#            rights here, so nothing else lives in it.
#   policy   `policy` container (policy blob(s) + the status report) and `dead-letters` (Event Grid
#            dead-lettered events). The code identity gets narrow, per-container rights here.
#
# Keeping them apart is what lets the function read policy without being able to rewrite it.

################################################################################
# Runtime account
################################################################################

resource "azurerm_storage_account" "runtime" {
  #checkov:skip=CKV_AZURE_59: public network access is needed by the Functions host and the Flex deployment service over public endpoints: deny-by-default needs VNet integration and private endpoints, which this module does not build; no anonymous access, no shared keys (Entra ID only).
  #checkov:skip=CKV_AZURE_33: queue service logging: the one queue carries policy-change notifications (blob names, no data); Event Grid delivery metrics and the function's Application Insights requests record every message, and queue_properties would need shared-key data-plane access at apply.
  #checkov:skip=CKV2_AZURE_1: customer-managed keys are out of scope: the account holds host state, the function package and policy-change notifications, nothing confidential (Microsoft-managed encryption at rest).
  #checkov:skip=CKV2_AZURE_33: private endpoints need a VNet the module does not own (see CKV_AZURE_59).
  #checkov:skip=CKV_AZURE_206: host state and the package are recreated by a deploy; replication is `storage_replication_type` (default ZRS).
  #checkov:skip=CKV2_AZURE_38: soft delete on host state (leases, keys) has no recovery value; the package is re-deployable.
  name                             = local.runtime_sa_name
  resource_group_name              = local.resource_group_name
  location                         = var.location
  account_kind                     = "StorageV2"
  account_tier                     = "Standard"
  account_replication_type         = var.storage_replication_type
  min_tls_version                  = "TLS1_2"
  https_traffic_only_enabled       = true
  shared_access_key_enabled        = false
  default_to_oauth_authentication  = true
  allow_nested_items_to_be_public  = false
  cross_tenant_replication_enabled = false
  local_user_enabled               = false
  tags                             = local.tags
}

# Flex Consumption reads the package from here (functionAppConfig.deployment.storage).
resource "azurerm_storage_container" "deployment" {
  #checkov:skip=CKV2_AZURE_21: blob read logging here would only record the platform fetching the package.
  name                  = local.deployment_container
  storage_account_id    = azurerm_storage_account.runtime.id
  container_access_type = "private"
}

# Policy BlobCreated events land here (events.tf) and the `sweep-queue` function
# (queueTrigger, queueName %TAGWARDEN_SWEEP_QUEUE%, connection AzureWebJobsStorage) sweeps from it.
# Created through ARM (storage_account_id), so no shared key or data-plane role is needed at apply.
resource "azurerm_storage_queue" "sweep" {
  name               = local.sweep_queue_name
  storage_account_id = azurerm_storage_account.runtime.id
}

# After maxDequeueCount (host.json, default 5) failed runs the host moves a message to
# "<queue>-poison" ("Poison messages", Azure Queue storage trigger for Azure Functions). Created
# here so the platform identity needs no account-wide queue rights to create it.
resource "azurerm_storage_queue" "sweep_poison" {
  name               = "${local.sweep_queue_name}-poison"
  storage_account_id = azurerm_storage_account.runtime.id
}

################################################################################
# Policy account
################################################################################

resource "azurerm_storage_account" "policy" {
  #checkov:skip=CKV_AZURE_59: public network access is needed by Event Grid (blob events, dead-lettering) and the function over public endpoints: deny-by-default needs VNet integration and private endpoints; no anonymous access, no shared keys (Entra ID only).
  #checkov:skip=CKV_AZURE_33: queue service logging: the account has no queues.
  #checkov:skip=CKV2_AZURE_1: customer-managed keys are out of scope: nothing in a policy is secret; Microsoft-managed encryption at rest.
  #checkov:skip=CKV2_AZURE_33: private endpoints need a VNet the module does not own (see CKV_AZURE_59).
  #checkov:skip=CKV_AZURE_206: the policy is re-publishable from its source and versioned; replication is `storage_replication_type` (default ZRS).
  name                             = local.policy_sa_name
  resource_group_name              = local.resource_group_name
  location                         = var.location
  account_kind                     = "StorageV2"
  account_tier                     = "Standard"
  account_replication_type         = var.storage_replication_type
  min_tls_version                  = "TLS1_2"
  https_traffic_only_enabled       = true
  shared_access_key_enabled        = false
  default_to_oauth_authentication  = true
  allow_nested_items_to_be_public  = false
  cross_tenant_replication_enabled = false
  local_user_enabled               = false

  blob_properties {
    versioning_enabled = true # every policy version stays recoverable (the last known good one too)

    delete_retention_policy {
      days = var.blob_retention_days
    }

    container_delete_retention_policy {
      days = var.blob_retention_days
    }
  }

  tags = local.tags
}

resource "azurerm_storage_container" "policy" {
  #checkov:skip=CKV2_AZURE_21: read logging would record every POLICY_TTL poll of the function; policy writes trigger Event Grid events and are versioned.
  name                  = local.policy_container
  storage_account_id    = azurerm_storage_account.policy.id
  container_access_type = "private"
}

resource "azurerm_storage_container" "dead_letters" {
  #checkov:skip=CKV2_AZURE_21: only Event Grid writes here and operators read; the DeadLetteredCount alert is the signal, not read logs.
  name                  = local.dead_letter_container
  storage_account_id    = azurerm_storage_account.policy.id
  container_access_type = "private"
}

# Superseded policy versions and old dead letters expire.
resource "azurerm_storage_management_policy" "policy" {
  storage_account_id = azurerm_storage_account.policy.id

  rule {
    name    = "expire-old-policy-versions"
    enabled = true

    filters {
      blob_types   = ["blockBlob"]
      prefix_match = ["${local.policy_container}/"]
    }

    actions {
      version {
        delete_after_days_since_creation = var.blob_retention_days
      }
    }
  }

  rule {
    name    = "expire-dead-letters"
    enabled = true

    filters {
      blob_types   = ["blockBlob", "appendBlob"]
      prefix_match = ["${local.dead_letter_container}/"]
    }

    actions {
      base_blob {
        delete_after_days_since_creation_greater_than = 90
      }
    }
  }
}

# Optional initial policy content (data-plane writes: provider `storage_use_azuread = true`),
# written once (one owner per thing): afterwards the policy belongs to its publisher
# (`tagwarden publish`, the cluster's publisher), and a later apply never puts Terraform's copy
# back ("ignore_changes = all": Terraform never updates the object). It is written after the
# policy-change subscription exists, so its first version starts a sweep at once.
resource "azurerm_storage_blob" "policy_document" {
  count = var.policy_document != null && local.policy_blob != null ? 1 : 0

  name                   = local.policy_blob
  storage_account_name   = azurerm_storage_account.policy.name
  storage_container_name = azurerm_storage_container.policy.name
  type                   = "Block"
  content_type           = "application/yaml"
  source_content         = var.policy_document

  lifecycle {
    ignore_changes = all
  }

  # The writer role must be in effect, not just created (time_sleep, rbac.tf).
  depends_on = [time_sleep.role_propagation, azurerm_eventgrid_system_topic_event_subscription.policy]
}

# A cluster set's initial policies, one folder per cluster (the name `tagwarden publish` uses),
# written once: each cluster's publisher owns its own afterwards (as policy_document above).
resource "azurerm_storage_blob" "cluster_policy" {
  for_each = local.cluster_set ? var.cluster_policy_documents : {}

  name                   = "${local.set_prefix}${each.key}/10-cluster.yaml"
  storage_account_name   = azurerm_storage_account.policy.name
  storage_container_name = azurerm_storage_container.policy.name
  type                   = "Block"
  content_type           = "application/yaml"
  source_content         = each.value

  lifecycle {
    ignore_changes = all
  }

  # The writer role must be in effect, not just created (time_sleep, rbac.tf).
  depends_on = [time_sleep.role_propagation, azurerm_eventgrid_system_topic_event_subscription.policy]
}

resource "azurerm_storage_blob" "policy_layers" {
  for_each = local.layered ? var.policy_layers : {}

  name                   = "${var.policy_prefix}${each.key}"
  storage_account_name   = azurerm_storage_account.policy.name
  storage_container_name = azurerm_storage_container.policy.name
  type                   = "Block"
  content_type           = endswith(each.key, ".json") ? "application/json" : "application/yaml"
  source_content         = each.value

  # The writer role must be in effect, not just created (time_sleep, rbac.tf).
  depends_on = [time_sleep.role_propagation]
}
