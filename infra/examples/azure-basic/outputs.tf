output "function_app_name" {
  description = "The tagwarden Function App."
  value       = module.tagwarden.function_app_name
}

output "principal_id" {
  description = "The identity tagwarden writes tags as (excluded from the event filter)."
  value       = module.tagwarden.principal_id
}

output "policy_url" {
  description = "Where the function reads its policy."
  value       = module.tagwarden.policy_url
}

output "status_report_url" {
  description = "Where the function writes its status report."
  value       = module.tagwarden.status_report_url
}

output "event_subscription_ids" {
  description = "The Event Grid subscriptions feeding the function."
  value       = module.tagwarden.event_subscription_ids
}

output "workbook_id" {
  description = "The tagwarden workbook (Azure Monitor > Workbooks)."
  value       = module.tagwarden.workbook_id
}

output "tagwarden" {
  description = "All outputs of the tagwarden module."
  value       = module.tagwarden
}
