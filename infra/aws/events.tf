# EventBridge: which events reach the function and how.
#
#   resource events (CloudTrail, aws.tag) --rule--> SQS buffer (queues.tf) --mapping--> Lambda
#   sweep schedule                         --rule--> Lambda  (input {"tagwarden": "sweep"})
#   SSM policy change                      --rule--> Lambda  (S3 policy changes: policy_store.tf)
#
# Every event pattern is defined once, in local.event_patterns, and rendered into the rules and the
# `event_patterns` output.

locals {
  # Event names per service: exactly the events the function handles, by
  # CloudTrail eventSource, from the service descriptors (local.generated, main.tf). The key is the
  # service: the pattern below matches source aws.<key> and detail.eventSource <key>.amazonaws.com.
  # Classic ELB shares the elasticloadbalancing source and names with ELBv2 (apiVersion tells them
  # apart in the function). Route 53 is global, its events arrive in us-east-1 only, like IAM's (see
  # modules/global_event_forwarding).
  cloudtrail_event_names = local.generated.cloudtrail_event_names

  # Services whose CloudTrail events are delivered only to the us-east-1 default bus (in the aws
  # partition); outside us-east-1 their rules see only what modules/global_event_forwarding sends.
  global_services = ["iam", "route53"]

  # Every pattern matches `account` = this account. The default bus also receives events
  # that other accounts put on it when its resource policy lets them (cross-account event buses,
  # organization-wide rules); "account" is the top-level field naming "The 12-digit number
  # identifying an AWS account" the event is from (EventBridge User Guide, "AWS service event
  # metadata"), and only this account's resources are the function's to enforce.

  # Calls made by the function's own role are dropped here (loop safety: the function never reacts to its own writes). A bare
  # nested anything-but would also drop every caller without sessionContext.sessionIssuer.arn (IAM
  # users, root, AWS services); the $or keeps them (verified in moto).
  not_self = {
    "$or" = [
      { userIdentity = { sessionContext = { sessionIssuer = { arn = [{ "anything-but" = aws_iam_role.lambda.arn }] } } } },
      { userIdentity = { sessionContext = { sessionIssuer = { arn = [{ exists = false }] } } } },
    ]
  }

  cloudtrail_patterns = {
    for svc, names in local.cloudtrail_event_names : svc => {
      source        = ["aws.${svc}"]
      account       = [local.account_id]
      "detail-type" = ["AWS API Call via CloudTrail"]
      detail = merge({
        eventSource = ["${svc}.amazonaws.com"]
        eventName   = names
        errorCode   = [{ exists = false }] # failed calls changed nothing
      }, local.not_self)
    }
  }

  # Every service is handled (native path or the Tagging API), so the rule is not limited
  # to a list of services (detail.service); the ownership filter alone selects what reaches the
  # function.
  # Only owned resources may invoke the function. A `Tag Change on Resource` event
  # carries the resource's complete tag set after the change in `detail.tags` (EventBridge User
  # Guide, "Amazon EventBridge events for tag changes"), so the ownership tag
  # can be matched in the pattern: detail.tags."kubernetes.io/cluster/<infraID>" = "owned". Built
  # from a list of infraIDs so that several clusters are one list change: one cluster is a plain
  # field match, several are an `$or` of such matches (fields in a pattern are ANDed, `$or` ORs
  # sub-patterns; EventBridge User Guide, "Content filtering in Amazon EventBridge event patterns").
  # A change that removes the ownership tag no longer matches, and nothing needs enforcing then; a
  # DeleteBucketTagging still reaches the function through the s3 CloudTrail rule.
  # Every ownership key of every cluster (a Cluster API cluster has two; main.tf).
  owned_tag_clauses = [
    for u in local.ownership_units : { tags = { (u.key) = [local.ownership_tag_value] } }
  ]

  event_patterns = merge(local.cloudtrail_patterns, {
    # Emitted by the tagging service itself; carries no caller, so only idempotence protects here.
    tag_change = {
      source        = ["aws.tag"]
      account       = [local.account_id]
      "detail-type" = ["Tag Change on Resource"]
      detail = merge(concat(
        [for c in local.owned_tag_clauses : c if length(local.owned_tag_clauses) == 1],
        [for _ in range(1) : { "$or" = local.owned_tag_clauses } if length(local.owned_tag_clauses) > 1],
      )...)
    }
  })

  # Rules that feed the buffer queue. None in an organization hub (main.tf): the hub account's own
  # events reach the hub bus through its spoke, as every member's do, and a rule here would deliver
  # each of them a second time.
  enabled_event_rules = {
    for k, v in local.event_patterns : k => v
    if !local.organization && (k != "iam" || var.enable_iam_events) && (k != "route53" || var.enable_route53_events) && (k != "tag_change" || var.enable_tag_change_events)
  }

  # Rule names: <name>-<infra_id>-<suffix>, the suffix the service's key unless named here. The
  # elasticloadbalancing rule keeps its name "elbv2" (an existing rule is updated in place, not
  # replaced), though it carries Classic ELB events too.
  rule_suffix = {
    ec2                  = "ec2"
    s3                   = "s3"
    elasticloadbalancing = "elbv2"
    iam                  = "iam"
    route53              = "route53"
    elasticfilesystem    = "efs"
    tag_change           = "tag-change"
  }

  # The enabled rules of the global services, for modules/global_event_forwarding (us-east-1).
  global_event_patterns = {
    for k in local.global_services : k => local.rendered_event_patterns[k] if contains(keys(local.enabled_event_rules), k)
  }

  rendered_event_patterns = { for k, v in local.event_patterns : k => jsonencode(v) }

  ssm_change_pattern = local.use_ssm ? jsonencode({
    source        = ["aws.ssm"]
    account       = [local.account_id]
    "detail-type" = ["Parameter Store Change"]
    detail = {
      # A cluster set: every parameter under the set's path (its status reports are outside it).
      # (Through JSON: the two filters have different types, which a conditional cannot return.)
      name      = jsondecode(local.ssm_set ? jsonencode([{ prefix = local.ssm_path }]) : jsonencode([local.ssm_parameter_name]))
      operation = ["Create", "Update"]
      # A failed create/update is also a "Parameter Store Change" event, with the
      # reason in detail.exception ("If an operation fails, the notification includes an error
      # message", Systems Manager User Guide, "Native parameter support for Amazon Machine Image
      # IDs", parameter-store-ec2-aliases). Nothing changed then: no sweep.
      exception = [{ exists = false }]
    }
  }) : null

  sweep_input = jsonencode({ tagwarden = "sweep" })
}

################################################################################
# Resource events -> buffer queue
################################################################################

resource "aws_cloudwatch_event_rule" "resource_events" {
  for_each = local.enabled_event_rules

  name          = "${local.name}-${lookup(local.rule_suffix, each.key, each.key)}"
  description   = "tagwarden ${local.label}: ${each.key == "tag_change" ? "Tag Change on Resource" : "${each.key} CloudTrail calls"} -> ${local.name}-events queue"
  event_pattern = local.rendered_event_patterns[each.key]
  tags          = local.tags
}

resource "aws_cloudwatch_event_target" "resource_events" {
  for_each = local.enabled_event_rules

  rule      = aws_cloudwatch_event_rule.resource_events[each.key].name
  target_id = "buffer-queue"
  arn       = module.events_queue.arn

  retry_policy {
    maximum_event_age_in_seconds = 86400
    maximum_retry_attempts       = 185
  }

  dead_letter_config {
    arn = module.events_queue.dlq_arn
  }
}

################################################################################
# Scheduled sweep -> function
################################################################################

resource "aws_cloudwatch_event_rule" "sweep" {
  name                = "${local.name}-sweep"
  description         = "tagwarden ${local.label}: scheduled sweep of every owned resource"
  schedule_expression = var.sweep_schedule
  tags                = local.tags
}

resource "aws_cloudwatch_event_target" "sweep" {
  rule      = aws_cloudwatch_event_rule.sweep.name
  target_id = "tagwarden"
  arn       = aws_lambda_function.this.arn
  input     = local.sweep_input

  retry_policy {
    maximum_event_age_in_seconds = 3600
    maximum_retry_attempts       = 3
  }

  dead_letter_config {
    arn = module.events_queue.dlq_arn
  }
}

resource "aws_lambda_permission" "sweep" {
  statement_id   = "AllowSweepSchedule"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.this.function_name
  principal      = "events.amazonaws.com"
  source_arn     = aws_cloudwatch_event_rule.sweep.arn
  source_account = local.account_id
}

################################################################################
# SSM policy change -> function (sweep with the new policy)
################################################################################

resource "aws_cloudwatch_event_rule" "policy_change" {
  count = local.use_ssm ? 1 : 0

  name          = "${local.name}-policy-change"
  description   = "tagwarden ${local.label}: policy parameter changed -> sweep${local.ssm_set ? " of its cluster" : ""}"
  event_pattern = local.ssm_change_pattern
  tags          = local.tags
}

resource "aws_cloudwatch_event_target" "policy_change" {
  count = local.use_ssm ? 1 : 0

  rule      = aws_cloudwatch_event_rule.policy_change[0].name
  target_id = "tagwarden"
  arn       = aws_lambda_function.this.arn

  retry_policy {
    maximum_event_age_in_seconds = 3600
    maximum_retry_attempts       = 3
  }

  dead_letter_config {
    arn = module.events_queue.dlq_arn
  }
}

resource "aws_lambda_permission" "policy_change" {
  count = local.use_ssm ? 1 : 0

  statement_id   = "AllowPolicyParameterChange"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.this.function_name
  principal      = "events.amazonaws.com"
  source_arn     = aws_cloudwatch_event_rule.policy_change[0].arn
  source_account = local.account_id
}
