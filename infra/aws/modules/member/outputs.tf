output "member_role_arn" {
  description = "The first member role (null where create_member_role is false); member_role_arns has them all."
  value       = try(aws_iam_role.member[var.member_roles[0].name].arn, null)
}

output "rule_arns" {
  description = "The forwarding rules by key."
  value       = { for k, r in aws_cloudwatch_event_rule.hub : k => r.arn }
}

output "member_role_arns" {
  description = "Every member role of the account, by name."
  value       = { for n, r in aws_iam_role.member : n => r.arn }
}
