output "function_name" {
  description = "Name of the tagwarden Lambda function."
  value       = aws_lambda_function.this.function_name
}

output "function_arn" {
  description = "ARN of the tagwarden Lambda function."
  value       = aws_lambda_function.this.arn
}

output "role_arn" {
  description = "ARN of the function's execution role (TAGWARDEN_SELF_ROLE_ARN; excluded from the event patterns)."
  value       = aws_iam_role.lambda.arn
}

output "role_name" {
  description = "Name of the function's execution role."
  value       = aws_iam_role.lambda.name
}

output "log_group_name" {
  description = "The function's CloudWatch log group."
  value       = aws_cloudwatch_log_group.lambda.name
}

output "policy_uri" {
  description = "TAGWARDEN_POLICY: s3://bucket/key, s3://bucket/prefix/ or ssm:/parameter/name; for a cluster set s3://bucket/prefix/*/ or ssm:/path/*."
  value       = local.policy_uri
}

output "policy_bucket_name" {
  description = "Policy bucket (S3 mode), else null."
  value       = local.use_s3 ? module.policy_bucket[0].id : null
}

output "policy_bucket_arn" {
  description = "Policy bucket ARN (S3 mode), else null."
  value       = local.use_s3 ? module.policy_bucket[0].arn : null
}

output "status_report_uri" {
  description = "Where the function writes its status report (S3 mode; in a cluster set, `*` stands for each infraID), else null."
  value       = local.use_s3 ? "s3://${local.bucket_name}/${local.status_key}" : null
}

output "policy_parameter_name" {
  description = "Policy SSM parameter (SSM mode, one cluster), else null."
  value       = local.use_ssm && !local.ssm_set ? aws_ssm_parameter.policy[0].name : null
}

output "policy_parameter_path" {
  description = "The cluster set's parameter path (SSM mode, cluster set): each cluster's policy is `<path><infraID>`; else null."
  value       = local.ssm_path
}

output "policy_parameter_arn" {
  description = "Policy SSM parameter ARN (SSM mode, one cluster), else null."
  value       = local.parameter_arn
}

output "events_queue_arn" {
  description = "ARN of the SQS buffer queue between EventBridge and the function."
  value       = module.events_queue.arn
}

output "events_queue_url" {
  description = "URL of the SQS buffer queue."
  value       = module.events_queue.id
}

output "dlq_arn" {
  description = "ARN of the dead-letter queue (failed events, failed asynchronous invocations, undeliverable EventBridge targets)."
  value       = module.events_queue.dlq_arn
}

output "dlq_url" {
  description = "URL of the dead-letter queue."
  value       = module.events_queue.dlq_id
}

output "event_patterns" {
  description = "Rendered EventBridge patterns by rule key (ec2, s3, elasticloadbalancing, iam, route53, elasticfilesystem, tag_change), including rules that are disabled."
  value       = local.rendered_event_patterns
}

output "global_event_patterns" {
  description = "Rendered patterns of the enabled global-service rules (iam, route53), whose events arrive only in us-east-1: the `event_patterns` input of modules/global_event_forwarding."
  value       = local.global_event_patterns
}

output "event_rule_arns" {
  description = "ARNs of the enabled resource-event rules, by rule key."
  value       = { for k, r in aws_cloudwatch_event_rule.resource_events : k => r.arn }
}

output "sweep_rule_arn" {
  description = "ARN of the scheduled sweep rule."
  value       = aws_cloudwatch_event_rule.sweep.arn
}

output "event_bus_arn" {
  description = "ARN of this region's default event bus: the target for IAM and Route 53 events forwarded from us-east-1."
  value       = "arn:${local.partition}:events:${local.region}:${local.account_id}:event-bus/default"
}

output "iam_actions" {
  description = "The actions granted to the function: `code` (per service and purpose; the calls the code makes, including both policy sources), `generic_tag` (the services' own tag actions that `tag:TagResources` needs, including `extra_tag_actions`) and `platform` (used by the Lambda service on its behalf)."
  value = {
    code        = local.code_actions
    generic_tag = local.generic_tag_action_list
    platform    = local.platform_actions
  }
}

output "iam_policy_json" {
  description = "The function role's inline policy (reads, the policy source, and the writes IAM cannot condition on ownership)."
  value       = data.aws_iam_policy_document.lambda.json
}

output "tag_write_policy_arns" {
  description = "The managed policies attached to the role that add tags to owned resources, by infraID: the policy that holds that cluster's statements, each conditioned on its ownership tag (two clusters to a policy, one with `extra_tag_actions`)."
  value       = merge([for k, ids in local.tag_write_groups : { for id in ids : id => aws_iam_policy.owned_tag_writes[k].arn }]...)
}

output "infra_ids" {
  description = "The clusters this deployment enforces (`[infra_id]` for one cluster)."
  value       = local.clusters
}

output "dashboard_name" {
  description = "CloudWatch dashboard name."
  value       = aws_cloudwatch_dashboard.this.dashboard_name
}

output "alarm_arns" {
  description = "CloudWatch alarm ARNs by purpose."
  value = merge(
    { for k, a in aws_cloudwatch_metric_alarm.insights : k => a.arn },
    { for k, a in aws_cloudwatch_metric_alarm.compliance_lag : (local.cluster_set ? "${k}/compliance_lag" : "compliance_lag") => a.arn },
    {
      lambda_errors = aws_cloudwatch_metric_alarm.lambda_errors.arn
      dlq_not_empty = aws_cloudwatch_metric_alarm.dlq_not_empty.arn
    },
  )
}

output "sns_topic_arn" {
  description = "SNS topic the alarms notify (given or created), else null."
  value       = local.sns_topic_arn
}

output "ec2_writes_per_second_bound" {
  description = "EC2 CreateTags calls a second the function makes at most: `per_invocation` (`ec2_writes_per_second`, TAGWARDEN_EC2_WRITES_PER_SECOND), `event_path` (x `sqs_maximum_concurrency`: the queue mapping's invocations together, account-wide) and `all_invocations` (x the reserved concurrency, by default `sqs_maximum_concurrency` + 1; null when `reserved_concurrent_executions` = -1: each sweep or policy-change invocation running beside the event path adds `per_invocation`). Compare with the account's CreateTags refill (10/s by default), which the cluster's controllers share."
  value = {
    per_invocation  = var.ec2_writes_per_second
    event_path      = var.ec2_writes_per_second * var.sqs_maximum_concurrency
    all_invocations = local.reserved_concurrency == -1 ? null : var.ec2_writes_per_second * local.reserved_concurrency
  }
}

output "trail_arn" {
  description = "The CloudTrail trail this module created (create_trail), else null."
  value       = one(aws_cloudtrail.this[*].arn)
}

output "trail_bucket_name" {
  description = "The trail's log bucket (create_trail), else null."
  value       = one(module.trail_bucket[*].id)
}

output "reserved_tag_key_patterns" {
  description = "The tag key patterns the role denies writing (DenyReservedTagKeys): the organization module's `reserved_tag_key_patterns`, so the member roles deny the same."
  value       = local.reserved_key_patterns
}
