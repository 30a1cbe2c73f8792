# SQS: the buffer between EventBridge and the function, and the dead-letter queue.
#
# Why a queue rather than EventBridge -> Lambda directly (see infra/aws/README.md, "Delivery"): the queue retries
# each event independently with the function's own backoff (visibility timeout), the mapping reports
# partial batch failures so one bad resource does not replay a whole batch, the DLQ keeps the
# original EventBridge event as it was delivered, and maximum_concurrency gives backpressure
# against the tagging API rate limits instead of EventBridge's throttled async retries.

locals {
  # "set the source queue's visibility timeout to at least six times the configuration timeout on
  # your function. The extra time allows Lambda to retry if your function is throttled while
  # processing a previous batch" (Lambda Developer Guide, "Creating and configuring an Amazon SQS
  # event source mapping"). Plus the batching window, our own margin: a message received at the
  # start of a window is already invisible while the window fills.
  visibility_timeout_seconds = 6 * var.timeout + var.sqs_batching_window_seconds

  event_rule_arns = [for r in aws_cloudwatch_event_rule.resource_events : r.arn]
  # Every rule whose target names the DLQ as its dead-letter config.
  dlq_sender_rule_arns = concat(
    local.event_rule_arns,
    [aws_cloudwatch_event_rule.sweep.arn],
    [for r in aws_cloudwatch_event_rule.policy_change : r.arn],
  )
}

# The events queue and its dead-letter queue (modules/queue_with_dlq: SSE, the redrive policy, the
# Deny of requests without TLS, the Allow of the EventBridge rules that send to each); the
# statements below are the events queue's own.
module "events_queue" {
  source = "./modules/queue_with_dlq"

  name                       = "${local.name}-events"
  dlq_name                   = "${local.name}-dlq"
  visibility_timeout_seconds = local.visibility_timeout_seconds
  message_retention_seconds  = 345600 # 4 days
  receive_wait_time_seconds  = 20
  max_receive_count          = var.max_receive_count
  kms_key_arn                = var.kms_key_arn
  # An organization hub has no rule of its own (events.tf): then no Allow, and the Deny below
  # refuses every sender, with no empty value list (SQS's policy grammar takes none).
  eventbridge_rules     = length(local.event_rule_arns) > 0 ? { sid = "EventBridgeRules", rule_arns = local.event_rule_arns } : null
  policy_documents      = [data.aws_iam_policy_document.events_queue.json]
  dlq_eventbridge_rules = { sid = "EventBridgeTargetDeadLetters", rule_arns = local.dlq_sender_rule_arns }
  tags                  = local.tags
}

data "aws_iam_policy_document" "events_queue" {
  # The Allow of eventbridge_rules admits only the rules, but an identity policy elsewhere in the account
  # (sqs:SendMessage on "*") would still reach the queue and inject events that the function treats
  # as delivered by the rules. An explicit Deny wins over any Allow ("Policy evaluation logic", IAM
  # User Guide), for every principal of every account. aws:SourceArn is set only when a service
  # calls on a resource's behalf ("aws:SourceArn", IAM User Guide, "AWS global condition context
  # keys"); for any other caller the key is missing, and ArnNotEquals on a missing key is true
  # ("IAM JSON policy elements: Condition operators"), so the Deny applies. Nothing else sends to
  # this queue: the function only receives from it; the sweep schedule, the policy-change rule and
  # the S3 notification invoke the function directly; modules/global_event_forwarding puts events
  # on this region's bus, where the rules (their ARNs here) send them on; SQS itself moves failed
  # messages to the DLQ. A redrive from the DLQ runs with the caller's permissions: those callers
  # are var.events_queue_redrive_principal_arns.
  statement {
    sid       = "DenyAllButTheRules"
    effect    = "Deny"
    actions   = ["sqs:SendMessage"]
    resources = [module.events_queue.arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    dynamic "condition" {
      for_each = length(local.event_rule_arns) > 0 ? [1] : []
      content {
        test     = "ArnNotEquals"
        variable = "aws:SourceArn"
        values   = local.event_rule_arns
      }
    }

    dynamic "condition" {
      for_each = length(var.events_queue_redrive_principal_arns) > 0 ? [1] : []
      content {
        test     = "ArnNotEquals"
        variable = "aws:PrincipalArn"
        values   = var.events_queue_redrive_principal_arns
      }
    }
  }
}

# The queues of one version before modules/queue_with_dlq, moved into it.
moved {
  from = aws_sqs_queue.events
  to   = module.events_queue.aws_sqs_queue.this
}

moved {
  from = aws_sqs_queue.dlq
  to   = module.events_queue.aws_sqs_queue.dlq
}

moved {
  from = aws_sqs_queue_policy.events
  to   = module.events_queue.aws_sqs_queue_policy.this
}

moved {
  from = aws_sqs_queue_policy.dlq
  to   = module.events_queue.aws_sqs_queue_policy.dlq
}
