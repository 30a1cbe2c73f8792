# IAM is a global service: its CloudTrail events are only delivered to the default bus in
# us-east-1. This module, deployed with a us-east-1 provider, forwards the events that match the
# tagwarden IAM pattern to the default bus of the function's region, where the module's own IAM
# rule sends them to the event queue. Same-account cross-region delivery only needs a role that may
# events:PutEvents on the target bus.

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

resource "aws_iam_role" "this" {
  name               = "${var.name}-iam-forward"
  description        = "Forwards tagwarden IAM events from us-east-1 to ${var.target_event_bus_arn}"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

data "aws_iam_policy_document" "put_events" {
  statement {
    actions   = ["events:PutEvents"]
    resources = [var.target_event_bus_arn]
  }
}

resource "aws_iam_role_policy" "this" {
  name   = "put-events"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.put_events.json
}

resource "aws_cloudwatch_event_rule" "this" {
  name          = "${var.name}-iam-forward"
  description   = "tagwarden: forward IAM CloudTrail events to ${var.target_event_bus_arn}"
  event_pattern = var.event_pattern
  tags          = var.tags

  lifecycle {
    precondition {
      condition     = data.aws_region.current.name == "us-east-1"
      error_message = "iam_event_forwarding must be deployed with a us-east-1 provider: IAM events are only delivered there."
    }
    precondition {
      condition     = !endswith(split(":event-bus/", var.target_event_bus_arn)[0], ":us-east-1:${data.aws_caller_identity.current.account_id}")
      error_message = "The target bus is in us-east-1 already; IAM events arrive there without forwarding."
    }
  }
}

resource "aws_cloudwatch_event_target" "this" {
  rule      = aws_cloudwatch_event_rule.this.name
  target_id = "tagwarden-region-bus"
  arn       = var.target_event_bus_arn
  role_arn  = aws_iam_role.this.arn
}
