output "function_app_name" {
  description = "The tagwarden Function App (one for every cluster)."
  value       = module.tagwarden.function_app_name
}

output "policy_url" {
  description = "Where the function reads the cluster set (…/policy/clusters/*/)."
  value       = module.tagwarden.policy_url
}

output "status_report_url" {
  description = "Where the function writes each cluster's status report (`*` = the infraID)."
  value       = module.tagwarden.status_report_url
}

output "infra_ids" {
  description = "The clusters enforced."
  value       = module.tagwarden.infra_ids
}

output "workbook_id" {
  description = "The tagwarden workbook (one series per cluster in each tile)."
  value       = module.tagwarden.workbook_id
}
