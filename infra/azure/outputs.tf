output "function_app_id" {
  description = "Resource id of the Function App (TAGWARDEN_METRICS_RESOURCE_ID: the custom metrics are published against it)."
  value       = azurerm_function_app_flex_consumption.this.id
}

output "function_app_name" {
  description = "Name of the Function App."
  value       = azurerm_function_app_flex_consumption.this.name
}

output "function_app_hostname" {
  description = "Default host name of the Function App."
  value       = azurerm_function_app_flex_consumption.this.default_hostname
}

output "principal_id" {
  description = "Principal (object) id of the identity the tagwarden code acts as (TAGWARDEN_SELF_PRINCIPAL_ID; holds Tag Contributor and Reader)."
  value       = azurerm_user_assigned_identity.function.principal_id
}

output "client_id" {
  description = "Client (application) id of that identity (TAGWARDEN_SELF_CLIENT_ID; the handler requests its tokens with it)."
  value       = azurerm_user_assigned_identity.function.client_id
}

output "identity_id" {
  description = "Resource id of the user-assigned identity the code acts as."
  value       = azurerm_user_assigned_identity.function.id
}

output "platform_principal_id" {
  description = "Principal id of the platform identity (host storage and deployment package only)."
  value       = azurerm_user_assigned_identity.platform.principal_id
}

output "resource_group_name" {
  description = "Resource group holding the module's resources."
  value       = local.resource_group_name
}

output "policy_container_url" {
  description = "URL of the policy container."
  value       = local.policy_container_url
}

output "policy_url" {
  description = "TAGWARDEN_POLICY: the policy blob URL, the layer prefix URL ending in '/', or a cluster set's URL ending in '*/'."
  value       = local.policy_url
}

output "status_report_url" {
  description = "Where the function writes its status report, the only blob it may write (in a cluster set `*` stands for each infraID)."
  value       = local.status_url
}

output "policy_storage_account_id" {
  description = "Resource id of the policy storage account (policy and dead-letter containers)."
  value       = azurerm_storage_account.policy.id
}

output "dead_letter_container_url" {
  description = "URL of the container receiving dead-lettered Event Grid events."
  value       = "${azurerm_storage_account.policy.primary_blob_endpoint}${azurerm_storage_container.dead_letters.name}"
}

output "event_subscription_ids" {
  description = "Event Grid event subscription ids: `arm` (by source: each subscription or resource group scope and each `event_source_subscription_ids` subscription, in any subscription; ResourceWriteSuccess -> drift; empty until the package is published), `resource_notifications` (by the same sources, with `resource_notifications`; Resources.CreatedOrUpdated -> drift, a source's resources by subject; empty until the package is published) and `policy` (policy BlobCreated -> sweep queue)."
  value = {
    arm                    = module.arm_event_subscriptions.ids
    resource_notifications = module.resource_notifications_event_subscriptions.ids
    policy                 = azurerm_eventgrid_system_topic_event_subscription.policy.id
  }
}

output "system_topic_ids" {
  description = "Event Grid system topic ids: `arm` (by source: each subscription or resource group scope and each `event_source_subscription_ids` subscription, global, in the source's subscription; created by the module or taken from `existing_system_topics`), `resource_notifications` (with `resource_notifications`: by subscription `/subscriptions/<guid>`, one `Microsoft.ResourceNotifications.Resources` topic per subscription of those sources, global; created or taken from `existing_resource_notifications_topics`) and `policy` (policy storage account)."
  value = {
    arm                    = { for s, t in local.arm_topics : s => t.id }
    resource_notifications = { for s, t in local.rn_topics : s => t.id }
    policy                 = azurerm_eventgrid_system_topic.policy.id
  }
}

output "sweep_queue_name" {
  description = "The storage queue (runtime account) that receives policy BlobCreated events: TAGWARDEN_SWEEP_QUEUE, read by the `sweep-queue` queueTrigger function."
  value       = azurerm_storage_queue.sweep.name
}

output "package_published" {
  description = "Whether the ARM event subscriptions are created: `function_zip` was published in this apply, or `package_published` was set."
  value       = local.package_published
}

output "arm_event_filter" {
  description = "The filter of the ARM event subscription, as deployed (event types and advanced filters by operator and key)."
  value       = local.arm_filter
}

output "enforcement_scopes" {
  description = "Scopes where the code identity holds the tag writer role and Reader (a management group once, or subscriptions and resource groups), as TAGWARDEN_SWEEP_SCOPES lists them."
  value       = sort(tolist(local.enforcement_scopes))
}

output "role_assignment_ids" {
  description = "Role assignment ids by purpose."
  value = {
    tag_contributor      = { for k, r in azurerm_role_assignment.tag_contributor : k => r.id }
    reader               = { for k, r in azurerm_role_assignment.reader : k => r.id }
    policy_reader        = azurerm_role_assignment.policy_reader.id
    status_report_writer = azurerm_role_assignment.status_report_writer.id
    metrics_publisher    = azurerm_role_assignment.metrics_publisher.id
    runtime_storage      = azurerm_role_assignment.runtime_storage.id
    sweep_queue_reader   = azurerm_role_assignment.sweep_queue_reader.id
    sweep_queue_sender   = azurerm_role_assignment.sweep_queue_sender.id
    # The timer's per-subscription sweep parts.
    sweep_queue_parts_sender = azurerm_role_assignment.sweep_queue_parts_sender.id
  }
}

output "application_insights_id" {
  description = "Resource id of the Application Insights component."
  value       = azurerm_application_insights.this.id
}

output "workbook_id" {
  description = "Resource id of the tagwarden workbook."
  value       = azurerm_application_insights_workbook.this.id
}

output "metric_alert_ids" {
  description = "Metric alert ids by purpose."
  value = merge(
    { for k, a in azurerm_monitor_metric_alert.this : k => a.id },
    { for k, a in azurerm_monitor_metric_alert.dead_letters : "dead-letters-${k}" => a.id },
  )
}

output "action_group_id" {
  description = "Action group the alerts notify, or null when no email/webhook is configured."
  value       = one(azurerm_monitor_action_group.this[*].id)
}

output "infra_ids" {
  description = "The clusters this deployment enforces (`[infra_id]` for one cluster)."
  value       = local.clusters
}
