output "function_name" {
  description = "The tagwarden function."
  value       = module.tagwarden.function_name
}

output "policy_uri" {
  description = "Where the function reads its policy."
  value       = module.tagwarden.policy_uri
}

output "status_report_uri" {
  description = "Where the function writes its status report."
  value       = module.tagwarden.status_report_uri
}

output "event_patterns" {
  description = "The EventBridge patterns in force."
  value       = module.tagwarden.event_patterns
}

output "dashboard_name" {
  description = "CloudWatch dashboard."
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

output "global_forwarding_rule_arns" {
  description = "The us-east-1 rules forwarding IAM and Route 53 events, by key (null when the region is us-east-1)."
  value       = one(module.global_event_forwarding[*].rule_arns)
}

output "global_forwarding_dlq_arn" {
  description = "The us-east-1 dead-letter queue of IAM and Route 53 events the function's bus did not accept (null when the region is us-east-1)."
  value       = one(module.global_event_forwarding[*].dlq_arn)
}

output "global_forwarding_dlq_url" {
  description = "The URL of that dead-letter queue, for `aws sqs receive-message --region us-east-1` (null when the region is us-east-1)."
  value       = one(module.global_event_forwarding[*].dlq_url)
}
