output "policy_prefix" {
  description = "Where the cluster publishes its policy (`tagwarden publish`)."
  value       = module.tagwarden.cluster_policy_prefixes[var.infra_id]
}

output "service_uri" {
  description = "The Cloud Run service's URL (internal ingress)."
  value       = module.tagwarden.service_uri
}

output "function_service_account" {
  description = "The service account the function acts as."
  value       = module.tagwarden.function_service_account
}

output "dead_letter_subscription" {
  description = "Where failed events wait (7 days)."
  value       = module.tagwarden.dead_letter_subscription
}

output "mode" {
  description = "The deployment's mode."
  value       = module.tagwarden.mode
}
