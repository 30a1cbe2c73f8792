output "service_name" {
  description = "Name of the Cloud Run service."
  value       = google_cloud_run_v2_service.this.name
}

output "service_uri" {
  description = "URL of the Cloud Run service (internal ingress: reachable by the push subscription, not from the internet)."
  value       = google_cloud_run_v2_service.this.uri
}

output "function_service_account" {
  description = "Email of the service account the function acts as (TAGWARDEN_SELF_PRINCIPAL; holds the custom role at the scope)."
  value       = google_service_account.function.email
}

output "invoker_service_account" {
  description = "Email of the service account Pub/Sub signs its pushes as (roles/run.invoker on the service, nothing else)."
  value       = google_service_account.invoker.email
}

output "function_role" {
  description = "Full name of the function's custom role (`organizations/<id>/roles/<role>` or `projects/<id>/roles/<role>`), granted at the scope."
  value       = local.function_role
}

output "function_permissions" {
  description = "The permissions of the function's custom role (none deletes anything)."
  value       = local.function_permissions
}

output "scope" {
  description = "The scope as Google names it (`organizations/<id>`, `folders/<id>` or `projects/<id>`): where the sink routes from, the role is granted and the sweep searches."
  value       = local.scope_resource
}

output "events_topic" {
  description = "The Pub/Sub topic the audit-log sink and the sweep schedule publish to."
  value       = google_pubsub_topic.events.id
}

output "events_subscription" {
  description = "The push subscription that delivers to the service."
  value       = google_pubsub_subscription.events.id
}

output "dead_letter_topic" {
  description = "Where messages go after `max_delivery_attempts` failed deliveries."
  value       = google_pubsub_topic.dead_letters.id
}

output "dead_letter_subscription" {
  description = "The pull subscription that keeps dead-lettered messages for 7 days (inspect or replay them from here)."
  value       = google_pubsub_subscription.dead_letters.id
}

output "sink_writer_identity" {
  description = "The audit-log sink's writer identity (roles/pubsub.publisher on the events topic only)."
  value       = local.sink_writer_identity
}

output "audit_log_filter" {
  description = "The sink's filter: Admin Activity audit-log entries that create an enforced resource or change its labels or tags."
  value       = local.audit_filter
}

output "policy_bucket" {
  description = "Name of the policy bucket."
  value       = google_storage_bucket.policy.name
}

output "policy_url" {
  description = "TAGWARDEN_POLICY: `gs://<bucket>/<policy_prefix>*/`, each cluster's policy layers under `<policy_prefix><infraID>/`."
  value       = local.policy_url
}

output "cluster_policy_prefixes" {
  description = "Per cluster, the `gs://` prefix its publisher writes to (and nothing else)."
  value       = { for id in local.clusters : id => "gs://${local.policy_bucket_name}/${var.policy_prefix}${id}/" }
}

output "sweep_job" {
  description = "The Cloud Scheduler job that publishes the sweep message."
  value       = google_cloud_scheduler_job.sweep.id
}

output "environment" {
  description = "The function's environment (its contract: policy, mode, clusters, sweep scope, its own identity, metrics project, log level)."
  value       = local.environment
}

output "dashboard_id" {
  description = "The Cloud Monitoring dashboard."
  value       = google_monitoring_dashboard.this.id
}

output "mode" {
  description = "TAGWARDEN_MODE of the deployment: `audit` (writes nothing) or `enforce`."
  value       = var.mode
}
