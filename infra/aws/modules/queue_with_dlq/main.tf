# An SQS queue and its dead-letter queue, as every queue pair of tagwarden's is: encrypted at rest
# (SSE-SQS, or SSE-KMS with the caller's key), failed messages moved to the dead-letter queue after
# max_receive_count receives and kept there 14 days, and a policy on each queue that refuses
# requests without TLS beside the caller's own statements. FIFO when the caller asks ("The
# dead-letter queue of a FIFO queue must also be a FIFO queue", SQS Developer Guide, "Using
# dead-letter queues in Amazon SQS").
#
# create_dlq = false: the queue alone, for a queue that is itself a dead-letter queue of a service
# that dead-letters straight into SQS (an EventBridge target's), as terraform-aws-modules/sqs's
# create_dlq does.

resource "aws_sqs_queue" "dlq" {
  count = var.create_dlq ? 1 : 0

  name                              = var.dlq_name
  fifo_queue                        = var.fifo_queue
  message_retention_seconds         = 1209600 # 14 days, SQS's maximum: time to look at what failed and redrive it
  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600
  tags                              = var.tags
}

resource "aws_sqs_queue" "this" {
  name                              = var.name
  fifo_queue                        = var.fifo_queue
  deduplication_scope               = var.fifo_queue && var.fifo_high_throughput ? "messageGroup" : null
  fifo_throughput_limit             = var.fifo_queue && var.fifo_high_throughput ? "perMessageGroupId" : null
  visibility_timeout_seconds        = var.visibility_timeout_seconds
  message_retention_seconds         = var.message_retention_seconds
  receive_wait_time_seconds         = var.receive_wait_time_seconds
  sqs_managed_sse_enabled           = var.kms_key_arn == null ? true : null
  kms_master_key_id                 = var.kms_key_arn
  kms_data_key_reuse_period_seconds = var.kms_key_arn == null ? null : 3600

  redrive_policy = var.create_dlq ? jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dlq[0].arn
    maxReceiveCount     = var.max_receive_count
  }) : null

  tags = var.tags
}

# Each queue's policy, the queue's and the dead-letter queue's alike: first the EventBridge rules
# that may send to it (a rule's target, or a target's dead-letter queue: events.amazonaws.com on
# behalf of those rules only, "Permissions for Amazon SQS", EventBridge User Guide, "Using
# resource-based policies for Amazon EventBridge"), then the caller's statements, then the Deny of
# requests without TLS. In that order each policy lists its statements as the callers wrote them
# before the rules were an input.
locals {
  queue_policies = merge(
    { this = { arn = aws_sqs_queue.this.arn, eventbridge_rules = var.eventbridge_rules, policy_documents = var.policy_documents } },
    var.create_dlq ? { dlq = { arn = aws_sqs_queue.dlq[0].arn, eventbridge_rules = var.dlq_eventbridge_rules, policy_documents = var.dlq_policy_documents } } : {},
  )
}

data "aws_iam_policy_document" "eventbridge_rules" {
  for_each = { for k, q in local.queue_policies : k => q if q.eventbridge_rules != null }

  statement {
    sid       = each.value.eventbridge_rules.sid
    actions   = ["sqs:SendMessage"]
    resources = [each.value.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = each.value.eventbridge_rules.rule_arns
    }
  }
}

data "aws_iam_policy_document" "queue" {
  for_each = local.queue_policies

  source_policy_documents = concat([for k, d in data.aws_iam_policy_document.eventbridge_rules : d.json if k == each.key], each.value.policy_documents)

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["sqs:*"]
    resources = [each.value.arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_sqs_queue_policy" "this" {
  queue_url = aws_sqs_queue.this.id
  policy    = data.aws_iam_policy_document.queue["this"].json
}

resource "aws_sqs_queue_policy" "dlq" {
  count = var.create_dlq ? 1 : 0

  queue_url = aws_sqs_queue.dlq[0].id
  policy    = data.aws_iam_policy_document.queue["dlq"].json
}

# The dead-letter queue was one resource before create_dlq: the same queue, moved (an upgrade
# destroys nothing).
moved {
  from = aws_sqs_queue.dlq
  to   = aws_sqs_queue.dlq[0]
}

moved {
  from = aws_sqs_queue_policy.dlq
  to   = aws_sqs_queue_policy.dlq[0]
}
