output "function_app_name" {
  description = "The tagwarden Function App (one for the management group)."
  value       = module.tagwarden.function_app_name
}

output "principal_id" {
  description = "The identity that holds the tag writer role and Reader at the management group."
  value       = module.tagwarden.principal_id
}

output "enforcement_scopes" {
  description = "The management group, as TAGWARDEN_SWEEP_SCOPES carries it."
  value       = module.tagwarden.enforcement_scopes
}

output "system_topic_ids" {
  description = "The ARM system topics by source (one per listed subscription, in that subscription) and the policy topic."
  value       = module.tagwarden.system_topic_ids
}

output "policy_url" {
  description = "Where the function reads the cluster set (…/policy/clusters/*/)."
  value       = module.tagwarden.policy_url
}

output "infra_ids" {
  description = "The clusters enforced."
  value       = module.tagwarden.infra_ids
}

output "workbook_id" {
  description = "The tagwarden workbook (one series per cluster in each tile)."
  value       = module.tagwarden.workbook_id
}
