# One member account and region's spoke, for teams that deploy per account rather than through the
# organization module's StackSet: the same role and rules, from the hub's outputs (never by hand).
# The rules forward to the hub's bus across accounts and Regions, which needs a role on the target
# (EventBridge User Guide, "Sending and receiving events between AWS accounts"; the hub bus policy
# admits the organization's accounts).

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}

locals {
  global_services = ["iam", "route53"]
  patterns = { for k, p in var.event_patterns : k => p
  if !contains(local.global_services, k) || data.aws_region.current.name == "us-east-1" }
}

resource "aws_iam_role" "member" {
  count = var.create_member_role ? 1 : 0

  name               = var.member_role_name
  description        = "tagwarden hub: reads tags, writes them on what a session's clusters own"
  assume_role_policy = var.member_trust_policy_json
  tags               = var.tags
}

resource "aws_iam_role_policy" "member" {
  count = var.create_member_role ? 1 : 0

  name   = "tag-enforcement"
  role   = aws_iam_role.member[0].id
  policy = var.member_role_policy_json
}

data "aws_iam_policy_document" "forward_assume" {
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

resource "aws_iam_role" "forward" {
  name               = "${var.name}-forward-${data.aws_region.current.name}"
  description        = "tagwarden: EventBridge forwards this account's events to ${var.hub_event_bus_arn}"
  assume_role_policy = data.aws_iam_policy_document.forward_assume.json
  tags               = var.tags
}

data "aws_iam_policy_document" "forward" {
  statement {
    actions   = ["events:PutEvents"]
    resources = [var.hub_event_bus_arn]
  }
}

resource "aws_iam_role_policy" "forward" {
  name   = "put-events"
  role   = aws_iam_role.forward.id
  policy = data.aws_iam_policy_document.forward.json
}

resource "aws_cloudwatch_event_rule" "hub" {
  for_each = local.patterns

  name          = "${var.name}-${replace(each.key, "_", "-")}-hub"
  description   = "tagwarden: forward ${each.key} events to the hub"
  event_pattern = each.value
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "hub" {
  for_each = local.patterns

  rule     = aws_cloudwatch_event_rule.hub[each.key].name
  arn      = var.hub_event_bus_arn
  role_arn = aws_iam_role.forward.arn
}
