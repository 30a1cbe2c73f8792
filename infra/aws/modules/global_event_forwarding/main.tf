# IAM and Route 53 are global services: their CloudTrail events are only delivered to the default
# bus in us-east-1. This module, deployed with a us-east-1 provider, forwards the events that match
# the tagwarden patterns of those services (one rule per pattern) to the default bus of the
# function's region, where the module's own iam and route53 rules send them to the event queue.
# Same-account cross-region delivery only needs a role that may events:PutEvents on the target bus.

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

# The role the rules' targets carry to put events on the target bus (../forwarding_role).
module "forward_role" {
  source = "../forwarding_role"

  name                 = "${var.name}-forward"
  description          = "Forwards tagwarden global-service events (IAM, Route 53) from us-east-1 to ${var.target_event_bus_arn}"
  target_event_bus_arn = var.target_event_bus_arn
  tags                 = var.tags
}

# The role and its policy were this module's own before ../forwarding_role: moved (an upgrade
# destroys nothing).
moved {
  from = aws_iam_role.this
  to   = module.forward_role.aws_iam_role.this
}

moved {
  from = aws_iam_role_policy.this
  to   = module.forward_role.aws_iam_role_policy.this
}

# One rule per pattern (iam, route53). The IAM rule keeps the name and address it had in the former
# iam_event_forwarding module (moved block below), so an upgrade updates it in place.
resource "aws_cloudwatch_event_rule" "this" {
  for_each = var.event_patterns

  name          = "${var.name}-${each.key}-forward"
  description   = "tagwarden: forward ${each.key} CloudTrail events to ${var.target_event_bus_arn}"
  event_pattern = each.value
  tags          = var.tags

  lifecycle {
    # Only the `aws` partition. "The default event bus for the us-east-1 Region
    # receives all events that the global services generate" is a statement about the commercial
    # partition (AWS re:Post Knowledge Center, "eventbridge-rule-triggers-iam-single-region"): China
    # and GovCloud have no us-east-1, their IAM events arrive in their own home Region, and which
    # cross-Region bus targets they offer differs (EventBridge User Guide, "Sending and receiving
    # events between AWS Regions"; AWS GovCloud (US) User Guide, "Amazon EventBridge"). Refuse
    # rather than deploy a rule that never matches; infra/aws/README.md, "Other partitions",
    # says what to do.
    precondition {
      condition     = data.aws_partition.current.partition == "aws"
      error_message = "global_event_forwarding supports the aws partition only: in aws-cn and aws-us-gov global-service (IAM, Route 53) events are not delivered to us-east-1. Deploy the tagwarden module in the partition's home region with enable_iam_events and enable_route53_events = true instead (see infra/aws/README.md, \"Other partitions\")."
    }
    precondition {
      condition     = data.aws_region.current.name == "us-east-1"
      error_message = "global_event_forwarding must be deployed with a us-east-1 provider: IAM and Route 53 events are only delivered there."
    }
    precondition {
      condition     = !endswith(split(":event-bus/", var.target_event_bus_arn)[0], ":us-east-1:${data.aws_caller_identity.current.account_id}")
      error_message = "The target bus is in us-east-1 already; IAM and Route 53 events arrive there without forwarding."
    }
    precondition {
      condition     = length("${var.name}-${each.key}-forward") <= 64
      error_message = "The rule name ${var.name}-${each.key}-forward is longer than EventBridge's 64 characters: shorten name."
    }
  }
}

moved {
  from = aws_cloudwatch_event_rule.this
  to   = aws_cloudwatch_event_rule.this["iam"]
}

# An event the target bus does not accept (throttling, a missing role permission)
# is retried and then kept, not dropped. EventBridge retries a failed delivery with backoff for up to
# 24 hours and 185 times by default, and sends what it gives up on to the target's dead-letter
# queue, a standard SQS queue in the rule's account and Region (EventBridge User Guide, "Using
# dead-letter queues to process undelivered events").
# queue_with_dlq without its own dead-letter queue: this queue is the dead-letter queue, SSE-SQS,
# kept 14 days (the maximum), TLS-only beside the statement that lets the rules send to it.
module "dead_letter_queue" {
  source = "../queue_with_dlq"

  name                      = "${var.name}-forward-dlq"
  create_dlq                = false
  message_retention_seconds = 1209600 # 14 days, the maximum
  eventbridge_rules         = { sid = "ForwardingRuleDeadLetters", rule_arns = [for r in aws_cloudwatch_event_rule.this : r.arn] }
  tags                      = var.tags
}

# The queue and its policy were this module's own resources before queue_with_dlq: moved (an
# upgrade destroys nothing).
moved {
  from = aws_sqs_queue.dlq
  to   = module.dead_letter_queue.aws_sqs_queue.this
}

moved {
  from = aws_sqs_queue_policy.dlq
  to   = module.dead_letter_queue.aws_sqs_queue_policy.this
}

resource "aws_cloudwatch_event_target" "this" {
  for_each = aws_cloudwatch_event_rule.this

  rule      = each.value.name
  target_id = "tagwarden-region-bus"
  arn       = var.target_event_bus_arn
  role_arn  = module.forward_role.arn

  retry_policy {
    maximum_event_age_in_seconds = var.maximum_event_age_in_seconds
    maximum_retry_attempts       = var.maximum_retry_attempts
  }

  dead_letter_config {
    arn = module.dead_letter_queue.arn
  }
}

moved {
  from = aws_cloudwatch_event_target.this
  to   = aws_cloudwatch_event_target.this["iam"]
}

################################################################################
# The dead-letter queue's alarm
################################################################################

locals {
  create_topic  = var.alarm_sns_topic_arn == null && length(var.alarm_subscriptions) > 0
  alarm_topic   = var.alarm_sns_topic_arn != null ? var.alarm_sns_topic_arn : (local.create_topic ? aws_sns_topic.alarms[0].arn : null)
  alarm_actions = local.alarm_topic == null ? [] : [local.alarm_topic]
}

resource "aws_sns_topic" "alarms" {
  count = local.create_topic ? 1 : 0

  name              = "${var.name}-forward-alarms"
  kms_master_key_id = "alias/aws/sns"
  tags              = var.tags
}

resource "aws_sns_topic_subscription" "alarms" {
  for_each = { for s in var.alarm_subscriptions : "${s.protocol}:${s.endpoint}" => s }

  topic_arn = local.alarm_topic
  protocol  = each.value.protocol
  endpoint  = each.value.endpoint
}

resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  alarm_name          = "${var.name}-forward-dlq-not-empty"
  alarm_description   = "tagwarden: IAM or Route 53 events in ${module.dead_letter_queue.name} (us-east-1) could not be forwarded to ${var.target_event_bus_arn}; those resources wait for the next sweep. Inspect the messages, fix the target bus's policy or the forwarding role, then send them on (docs/src/operations/logs.md, \"Redrive the dead-letter queue\")."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = module.dead_letter_queue.name }
  statistic           = "Maximum"
  period              = 300
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}
