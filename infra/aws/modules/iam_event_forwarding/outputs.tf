output "rule_arn" {
  description = "ARN of the forwarding rule in us-east-1."
  value       = aws_cloudwatch_event_rule.this.arn
}

output "role_arn" {
  description = "ARN of the role EventBridge uses to put events on the target bus."
  value       = aws_iam_role.this.arn
}
