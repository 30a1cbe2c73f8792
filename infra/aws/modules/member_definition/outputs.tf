output "member_role_policy_json" {
  description = "The member role's policy."
  value       = jsonencode(local.member_role_policy)
}

output "member_trust_policy_json" {
  description = "The member role's trust policy: the hub function's role alone."
  value       = jsonencode(local.member_trust_policy)
}

output "member_event_patterns" {
  description = "The member rules' patterns by key."
  value       = local.member_event_patterns
}

output "member_template_json" {
  description = "The spoke as a CloudFormation template (the StackSet's)."
  value       = jsonencode(local.member_template)
}
