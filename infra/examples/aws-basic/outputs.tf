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

output "global_event_pattern" {
  description = "The IAM and Route 53 pattern forwarded from us-east-1."
  value       = module.tagwarden.global_event_pattern
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

output "iam_forwarding_rule_arn" {
  description = "The us-east-1 rule forwarding IAM events (null when the region is us-east-1)."
  value       = one(module.iam_event_forwarding[*].rule_arn)
}

output "iam_forwarding_dlq_arn" {
  description = "The us-east-1 dead-letter queue of IAM events the function's bus did not accept (null when the region is us-east-1)."
  value       = one(module.iam_event_forwarding[*].dlq_arn)
}
