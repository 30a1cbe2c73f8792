output "hub" {
  description = "The hub's settings: pass as the tagwarden module's `organization` (with `infra_ids = []`)."
  value = {
    uri             = "s3://${module.organization_bucket.name}/${local.prefix}"
    member_role     = var.member_role_name
    member_regions  = var.member_regions
    clusters        = var.clusters
    shard_queue_url = module.shards_queue.url
  }
}

output "environment" {
  description = "The same settings as the function's environment variables, to read (the tagwarden module sets them itself from `organization = hub`, and refuses TAGWARDEN_ORGANIZATION in `extra_environment`)."
  value = {
    TAGWARDEN_ORGANIZATION    = "s3://${module.organization_bucket.name}/${local.prefix}"
    TAGWARDEN_MEMBER_ROLE     = var.member_role_name
    TAGWARDEN_MEMBER_REGIONS  = join(",", var.member_regions)
    TAGWARDEN_CLUSTERS        = join(",", var.clusters)
    TAGWARDEN_SHARD_QUEUE_URL = module.shards_queue.url
  }
}

output "organization_uri" {
  description = "Where member accounts publish: s3://<bucket>/accounts/<their account>/<infraID>/ (tagwarden publish --to)."
  value       = "s3://${module.organization_bucket.name}/${local.prefix}"
}

output "organization_bucket_name" {
  description = "The members' policy bucket."
  value       = module.organization_bucket.name
}

output "hub_event_bus_arn" {
  description = "The bus the spokes forward to (modules/member `hub_event_bus_arn`)."
  value       = aws_cloudwatch_event_bus.hub.arn
}

output "shard_queue_url" {
  description = "The sweep shards' queue."
  value       = module.shards_queue.url
}

output "shards_dlq_url" {
  description = "Where shards that kept failing are kept (FIFO; their bodies name the account and region)."
  value       = module.shards_queue.dlq_url
}

output "dlq_url" {
  description = "Where member events that kept failing are kept (shards: shards_dlq_url)."
  value       = module.member_events_queue.dlq_url
}

output "member_roles" {
  description = "Each account's member roles, by account: name, the clusters each writes for, its policy (modules/member `member_roles`; the account's StackSet carries the same)."
  value       = module.member_definition.member_roles
}

output "member_trust_policy_json" {
  description = "The member roles' trust policy: the hub function's role alone."
  value       = module.member_definition.member_trust_policy_json
}

output "member_event_patterns" {
  description = "The member rules' patterns by key (modules/member `event_patterns`)."
  value       = module.member_definition.member_event_patterns
}

output "member_template_json" {
  description = "The spoke's shared CloudFormation template (rules and their forwarding role), as the StackSet deploys it to every account of the OUs."
  value       = module.member_definition.member_template_json
}

output "stack_set_name" {
  description = "The StackSet's name (null without member_organizational_unit_ids)."
  value       = try(aws_cloudformation_stack_set.member[0].name, null)
}

output "member_role_templates_json" {
  description = "Each account's member roles as a CloudFormation template, by account (its StackSet's)."
  value       = module.member_definition.member_role_templates_json
}

output "auditor_role" {
  description = "The read-only auditor role every spoke holds (modules/member `auditor_role`): name, policy, trust; null without auditor_principals."
  value       = module.member_definition.auditor_role
}
