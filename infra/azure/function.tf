# The Function App: Linux, Flex Consumption plan (FC1), custom handler runtime, and the package
# publication. See README "Hosting plan" for why Flex and not (Linux) Consumption, and "Deploying
# the package".

resource "azurerm_service_plan" "this" {
  #checkov:skip=CKV_AZURE_212: Flex Consumption (FC1) has no fixed worker count; instances scale from zero per trigger.
  #checkov:skip=CKV_AZURE_225: not needed for this workload: Event Grid retries delivery for up to event_time_to_live_minutes (24 h) and the hourly sweep catches whatever a zone outage misses.
  name                = "${local.name}-plan"
  resource_group_name = local.resource_group_name
  location            = var.location
  os_type             = "Linux"
  sku_name            = "FC1"
  tags                = local.tags
}

locals {
  # The handler's contract (README "Handler contract"). APPLICATIONINSIGHTS_CONNECTION_STRING is set
  # through site_config (the provider maps it to that app setting and would otherwise diff).
  # FUNCTIONS_WORKER_RUNTIME=custom is `runtime_name = "custom"` on Flex: Flex rejects the setting
  # itself (functionAppConfig.runtime replaces it).
  contract_app_settings = {
    TAGWARDEN_POLICY              = local.policy_url
    TAGWARDEN_ARM_ENDPOINT        = var.arm_endpoint
    POLICY_TTL                    = tostring(var.policy_ttl_seconds)
    TAGWARDEN_CONCURRENCY         = tostring(var.concurrency)
    TAGWARDEN_SELF_PRINCIPAL_ID   = azurerm_user_assigned_identity.function.principal_id
    TAGWARDEN_SELF_CLIENT_ID      = azurerm_user_assigned_identity.function.client_id
    TAGWARDEN_METRICS_RESOURCE_ID = local.function_app_id
    TAGWARDEN_METRICS_REGION      = var.location
    # The enforcement scopes as given. A management group id as-is
    # (/providers/Microsoft.Management/managementGroups/<id>): the function sweeps it through
    # Resource Graph's `managementGroups` request field, which covers every subscription below it,
    # listed in event_source_subscription_ids or not.
    TAGWARDEN_SWEEP_SCOPES = join(",", sort(tolist(local.enforcement_scopes)))
    # The infraIDs this deployment enforces (nothing else of the set), and the sources of
    # the Event Grid system topics whose deliveries the function accepts. Event Grid writes a system
    # topic's *source* into each event's `topic` ("Full resource path to the event source",
    # azure-docs event-grid/event-schema.md), not the topic's own id: the
    # ARM topics' sources, created or existing, keyed by source (the subscription and resource group
    # scopes and /subscriptions/<guid> of each event_source_subscription_ids entry, in
    # any subscription; never a management group, which is no source), and the policy storage
    # account (its BlobCreated events reach the sweep queue). With
    # resource_notifications, the sources of the Resource Notifications topics too,
    # /subscriptions/<guid> ("topic": "/subscriptions/{sub}" in azure-rest-api-specs' eventgrid
    # data-plane Microsoft.ResourceNotifications example Resources_CreatedOrUpdated.json): new in the
    # list for the subscription of a resource group scope, already there for a subscription source
    # (local.rn_event_topic_sources, events.tf, leaves those out; crates/azure/src/function/delivery.rs
    # `Topics` compares without case).
    TAGWARDEN_CLUSTERS     = join(",", local.clusters)
    TAGWARDEN_MODE         = var.mode
    TAGWARDEN_EVENT_TOPICS = join(",", sort(concat(keys(local.arm_topics), local.rn_event_topic_sources, [azurerm_storage_account.policy.id])))
    RUST_LOG               = var.log_level
  }

  # Not part of the contract, read by the host or by function.json.
  platform_app_settings = {
    # sweep/function.json: "schedule": "%TAGWARDEN_SWEEP_SCHEDULE%"
    TAGWARDEN_SWEEP_SCHEDULE = var.sweep_schedule
    # sweep-queue/function.json: queueTrigger, "queueName": "%TAGWARDEN_SWEEP_QUEUE%", connection
    # AzureWebJobsStorage (policy BlobCreated events, events.tf).
    TAGWARDEN_SWEEP_QUEUE = azurerm_storage_queue.sweep.name
    # Identity-based host storage with the platform identity (the __accountName/__credential/
    # __clientId form). `AzureWebJobsStorage` itself is not here: see azapi_resource_action.app_settings.
    AzureWebJobsStorage__accountName = azurerm_storage_account.runtime.name
    AzureWebJobsStorage__credential  = "managedidentity"
    AzureWebJobsStorage__clientId    = azurerm_user_assigned_identity.platform.client_id
  }

  # Application Insights with local (instrumentation-key) auth disabled: the host sends telemetry
  # with an Entra token of the code identity (Monitoring Metrics Publisher on the component, rbac.tf).
  app_insights_auth_settings = var.application_insights_local_auth_enabled ? {} : {
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING = "Authorization=AAD;ClientId=${azurerm_user_assigned_identity.function.client_id}"
  }

  # Every app setting the module owns, for the app (app_settings) and the settings fix below.
  # The controllers whose changes may hold a key back (a contest); every other writer's change is
  # corrected every time. Unset: the code's defaults.
  yield_settings = var.yield_to == null ? {} : { TAGWARDEN_YIELD_TO = length(var.yield_to) == 0 ? "none" : join(",", var.yield_to) }

  app_settings = merge(local.platform_app_settings, local.app_insights_auth_settings, local.contract_app_settings, local.yield_settings)

  # The app's resource id, known before the app exists (it is needed inside its own settings).
  function_app_id = "${local.resource_group_id}/providers/Microsoft.Web/sites/${local.function_app_name}"
}

resource "azurerm_function_app_flex_consumption" "this" {
  name                = local.function_app_name
  resource_group_name = local.resource_group_name
  location            = var.location
  service_plan_id     = azurerm_service_plan.this.id

  runtime_name    = "custom" # custom handler: FUNCTIONS_WORKER_RUNTIME=custom
  runtime_version = "1.0"

  # Flex deployment storage: the package lives in the runtime account's app-package container,
  # written and read with the platform identity.
  storage_container_type            = "blobContainer"
  storage_container_endpoint        = "${azurerm_storage_account.runtime.primary_blob_endpoint}${azurerm_storage_container.deployment.name}"
  storage_authentication_type       = "UserAssignedIdentity"
  storage_user_assigned_identity_id = azurerm_user_assigned_identity.platform.id

  instance_memory_in_mb  = var.instance_memory_in_mb
  maximum_instance_count = var.maximum_instance_count

  https_only                    = true
  public_network_access_enabled = true # Event Grid delivers to the public webhook endpoint.
  # No zip_deploy_file. The provider posts it to /api/zipdeploy, which Flex
  # Consumption does not implement (hashicorp/terraform-provider-azurerm#29630, open); the package
  # is published by terraform_data.package below with One Deploy and an Entra token, so basic-auth
  # publishing credentials stay off.
  webdeploy_publish_basic_authentication_enabled = false

  identity {
    type = "UserAssigned" # why not system-assigned: main.tf
    identity_ids = [
      azurerm_user_assigned_identity.function.id,
      azurerm_user_assigned_identity.platform.id,
    ]
  }

  site_config {
    application_insights_connection_string = azurerm_application_insights.this.connection_string
    minimum_tls_version                    = "1.2"
    http2_enabled                          = true
  }

  app_settings = local.app_settings

  tags = local.tags

  # Both identities can act as soon as the app is created and the first instance starts.
  depends_on = [
    azurerm_role_assignment.runtime_storage,
    azurerm_role_assignment.sweep_queue_reader,
    azurerm_role_assignment.sweep_queue_processor,
    azurerm_role_assignment.sweep_queue_parts_sender,
    azurerm_role_assignment.sweep_poison_queue,
    azurerm_role_assignment.tag_contributor,
    azurerm_role_assignment.reader,
    azurerm_role_assignment.policy_reader,
    azurerm_role_assignment.status_report_writer,
  ]

  lifecycle {
    precondition {
      condition     = !local.cluster_set || (var.policy_blob == null && var.policy_document == null && length(var.policy_layers) == 0)
      error_message = "A cluster set (infra_ids) keeps one policy per cluster: use cluster_policy_documents (and policy_prefix for the set's location), not policy_blob, policy_document or policy_layers."
    }
    precondition {
      condition     = length(setsubtract(keys(var.cluster_policy_documents), local.clusters)) == 0 && (local.cluster_set || length(var.cluster_policy_documents) == 0)
      error_message = "cluster_policy_documents needs infra_ids, and its keys must be listed in infra_ids: ${join(", ", setsubtract(keys(var.cluster_policy_documents), local.clusters))}."
    }
    precondition {
      condition     = !(var.policy_blob != null && var.policy_prefix != null)
      error_message = "Set policy_blob (one document) or policy_prefix (layers), not both."
    }
    precondition {
      condition     = length(var.policy_layers) == 0 || local.layered
      error_message = "policy_layers needs policy_prefix."
    }
    precondition {
      condition     = var.policy_document == null || !local.layered
      error_message = "policy_document is for single-document mode; use policy_layers with policy_prefix."
    }
  }
}

# Identity-based host storage without a perpetual diff. The provider writes an
# `AzureWebJobsStorage` connection string on every create and update of a Flex app, built from
# storage_container_endpoint with an empty AccountKey under identity auth, unless app_settings sets
# the key; and its Read drops `AzureWebJobsStorage` from app_settings (source:
# internal/services/appservice/function_app_flex_consumption_resource.go, Create/Update and
# unpackFunctionAppFlexConsumptionSettings). Set to "" in app_settings, the key is stripped on read
# and re-sent on every apply: the second plan is never empty and every apply restarts the app
# (hashicorp/terraform-provider-azurerm#33211, open; #29149). Left out, the host would take the
# keyless connection string instead of the AzureWebJobsStorage__* identity settings (a connection
# name that resolves to a single value is read as a connection string; only the `__` collection is
# identity-based: azure-docs, app-service/webjobs-sdk-how-to.md, "Host connections") and fail,
# shared keys being disabled.
#
# So app_settings leaves the key out (the provider's view converges), and this action writes the
# app's complete settings right after the provider did: the module's settings, the Application
# Insights connection string the provider adds from site_config, and `AzureWebJobsStorage = ""`.
# "Replaces the application settings of an app" (Web Apps REST API, WebApps - Update Application
# Settings: PUT .../sites/{name}/config/appsettings), so nothing else is kept or lost. The action
# runs once at create and again whenever the app is updated or replaced (replace_triggered_by: the
# provider has just re-written the connection string) or the settings change; an action has no
# remote state to diff, so the second plan stays empty.
resource "azapi_resource_action" "app_settings" {
  type        = "Microsoft.Web/sites/config@2024-04-01"
  resource_id = "${azurerm_function_app_flex_consumption.this.id}/config/appsettings"
  method      = "PUT"

  body = {
    properties = merge(local.app_settings, {
      APPLICATIONINSIGHTS_CONNECTION_STRING = azurerm_application_insights.this.connection_string
      AzureWebJobsStorage                   = ""
    })
  }

  lifecycle {
    replace_triggered_by = [azurerm_function_app_flex_consumption.this]
  }
}

# Publish the package with a step Flex Consumption supports, in the same apply.
# `az functionapp deployment source config-zip` on a Flex app posts to the app's One Deploy endpoint
# (/api/publish) with the caller's Entra token and waits for the deployment (azure-cli,
# appservice/custom.py, enable_zip_deploy_flex). "One deploy is the only deployment technology
# supported for apps on the Flex Consumption plan" and the Azure CLI is one way to use it (azure-docs,
# azure-functions/functions-deployment-technologies.md). The ARM event subscriptions (events.tf)
# depend on this resource, because Event Grid refuses an azure_function_endpoint whose function
# does not exist; so after publishing, wait until the host has indexed `drift`. Republished when
# the zip's content changes. Needs `az` on PATH, logged in (`az login`) with the rights Terraform
# has; the subscription is passed explicitly.
resource "terraform_data" "package" {
  count = var.function_zip == null ? 0 : 1

  # The package and its manifest belong together (scripts/package-azure-function writes
  # <zip>.json); Flex Consumption runs Linux on x86-64, so a package for another machine is refused
  # here instead of failing to start after the publish.
  lifecycle {
    precondition {
      condition     = local.function_manifest != null
      error_message = "No manifest beside ${coalesce(var.function_zip, "-")}: expected ${coalesce(var.function_zip, "-")}.json. Build the package with scripts/package-azure-function (it writes <zip>.json: architecture, sha256, version)."
    }
    precondition {
      condition     = try(local.function_manifest.sha256, "") == local.function_zip_sha256
      error_message = "The manifest ${coalesce(var.function_zip, "-")}.json is not the manifest of ${coalesce(var.function_zip, "-")} (sha256 ${try(local.function_manifest.sha256, "missing")}, the zip's ${local.function_zip_sha256}). Rebuild both with scripts/package-azure-function."
    }
    precondition {
      condition     = try(local.function_manifest.architecture, "") == "x86_64" && try(local.function_manifest.rust_target, "") == "x86_64-unknown-linux-gnu"
      error_message = "${coalesce(var.function_zip, "-")} was built for ${try(local.function_manifest.rust_target, "an unknown target")}; the Flex Consumption plan runs Linux on x86-64 (x86_64-unknown-linux-gnu). Rebuild with scripts/package-azure-function."
    }
  }

  triggers_replace = [
    azurerm_function_app_flex_consumption.this.id,
    filesha256(var.function_zip),
  ]

  provisioner "local-exec" {
    interpreter = ["bash", "-c"]
    command     = <<-EOT
      set -euo pipefail
      az functionapp deployment source config-zip --subscription "$SUBSCRIPTION" \
        --resource-group "$RESOURCE_GROUP" --name "$APP" --src "$PACKAGE" --timeout 900
      for _ in $(seq 1 60); do
        if az functionapp function show --subscription "$SUBSCRIPTION" --resource-group "$RESOURCE_GROUP" \
          --name "$APP" --function-name "$FUNCTION" --query name --output tsv >/dev/null 2>&1; then
          exit 0
        fi
        sleep 10
      done
      echo "tagwarden: function $FUNCTION did not appear in $APP within 10 minutes of publishing $PACKAGE" >&2
      exit 1
    EOT
    environment = {
      SUBSCRIPTION   = data.azurerm_subscription.current.subscription_id
      RESOURCE_GROUP = local.resource_group_name
      APP            = azurerm_function_app_flex_consumption.this.name
      PACKAGE        = abspath(var.function_zip)
      FUNCTION       = local.function_drift_name
    }
  }

  # One Deploy writes the package into the deployment container with the platform
  # identity, and the host starts on it at once (host storage, the sweep queue): the platform
  # identity's roles must be in effect, not just created, so the publish waits for the same
  # propagation as the blob uploads and event subscriptions (time_sleep.role_propagation, rbac.tf).
  # And the host must start with the corrected settings (azapi_resource_action.app_settings).
  depends_on = [time_sleep.role_propagation, azapi_resource_action.app_settings]
}
