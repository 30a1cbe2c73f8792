output "member_roles" {
  description = "Each account's member roles: name, the clusters it writes for, and its policy (JSON)."
  value = { for a, roles in local.roles : a => [for r in roles : {
    name        = r.name
    clusters    = r.clusters
    policy_json = jsonencode(r.policy)
  }] }
}

output "member_role_of_cluster" {
  description = "The member role that writes each cluster's resources, by account and cluster (what the hub function assumes)."
  value       = { for a, roles in local.roles : a => merge([for r in roles : { for c in r.clusters : c => r.name }]...) }
}

output "member_trust_policy_json" {
  description = "The member roles' trust policy: the hub function's role alone."
  value       = jsonencode(local.member_trust_policy)
}

output "member_event_patterns" {
  description = "The member rules' patterns by key."
  value       = local.member_event_patterns
}

output "member_template_json" {
  description = "The spoke every account of the OUs gets, as a CloudFormation template: the rules and their forwarding role."
  value       = jsonencode(local.member_template)
}

output "member_role_templates_json" {
  description = "Each account's member roles as a CloudFormation template, by account."
  value       = { for a, t in local.role_templates : a => jsonencode(t) }
}

output "auditor_role" {
  description = "The auditor role every spoke holds when auditor_principals is set: name, policy and trust (JSON); null otherwise."
  value = length(var.auditor_principals) == 0 ? null : {
    name              = local.auditor_role_name
    policy_json       = jsonencode(local.auditor_policy)
    trust_policy_json = jsonencode(local.auditor_trust_policy)
  }
}
