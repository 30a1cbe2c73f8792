output "function_name" {
  description = "The tagwarden function (one for every cluster)."
  value       = module.tagwarden.function_name
}

output "policy_uri" {
  description = "Where the function reads the cluster set (s3://bucket/clusters/*/)."
  value       = module.tagwarden.policy_uri
}

output "status_report_uri" {
  description = "Where the function writes each cluster's status report (`*` = the infraID)."
  value       = module.tagwarden.status_report_uri
}

output "tag_write_policy_arns" {
  description = "The role's tag-write policies, one per cluster, by infraID."
  value       = module.tagwarden.tag_write_policy_arns
}

output "dashboard_name" {
  description = "CloudWatch dashboard (one line per cluster in each widget)."
  value       = module.tagwarden.dashboard_name
}

output "alarm_topic_arn" {
  description = "Subscribe to this SNS topic for alarms."
  value       = module.tagwarden.sns_topic_arn
}

output "tagwarden" {
  description = "All outputs of the tagwarden module."
  value       = module.tagwarden
}
