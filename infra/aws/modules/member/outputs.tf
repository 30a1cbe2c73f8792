output "member_role_arn" {
  description = "The member role (null where create_member_role is false)."
  value       = try(aws_iam_role.member[0].arn, null)
}

output "rule_arns" {
  description = "The forwarding rules by key."
  value       = { for k, r in aws_cloudwatch_event_rule.hub : k => r.arn }
}
