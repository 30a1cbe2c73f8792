# The role an EventBridge rule's target carries to put events on another bus: trusted by
# events.amazonaws.com for this account's rules only (aws:SourceAccount, the confused-deputy guard
# of "Using IAM roles with EventBridge", EventBridge User Guide), allowed events:PutEvents on the
# target bus alone. A target on a bus in another account or Region needs such a role ("Sending and
# receiving events between AWS accounts" and "... between AWS Regions", EventBridge User Guide).

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
  name               = var.name
  description        = var.description
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
