output "rule_arns" {
  description = "ARNs of the forwarding rules in us-east-1, by pattern key (iam, route53)."
  value       = { for k, r in aws_cloudwatch_event_rule.this : k => r.arn }
}

output "role_arn" {
  description = "ARN of the role EventBridge uses to put events on the target bus."
  value       = module.forward_role.arn
}

output "dlq_arn" {
  description = "ARN of the us-east-1 dead-letter queue of events the target bus did not accept."
  value       = module.dead_letter_queue.arn
}

output "dlq_url" {
  description = "URL of that dead-letter queue."
  value       = module.dead_letter_queue.id
}

output "dlq_alarm_arn" {
  description = "The alarm on the forwarding dead-letter queue (us-east-1)."
  value       = aws_cloudwatch_metric_alarm.dlq_not_empty.arn
}

output "alarm_topic_arn" {
  description = "The us-east-1 SNS topic the dead-letter queue's alarm notifies (given or created), else null."
  value       = local.alarm_topic
}
