# One member account and region's spoke, for teams that deploy per account rather than through the
# organization module's StackSet: the same role and rules, from the hub's outputs (never by hand).
# The rules forward to the hub's bus across accounts and Regions, which needs a role on the target
# (EventBridge User Guide, "Sending and receiving events between AWS accounts"; the hub bus policy
# admits the organization's accounts).

data "aws_region" "current" {}

locals {
  global_services = ["iam", "route53"]
  patterns = { for k, p in var.event_patterns : k => p
  if !contains(local.global_services, k) || data.aws_region.current.name == "us-east-1" }
}

# The account's member roles, as the organization module rendered them for it: each writes tags
# only on what its clusters own (its policy's DenyUnowned).
resource "aws_iam_role" "member" {
  for_each = var.create_member_role ? { for r in var.member_roles : r.name => r } : {}

  name               = each.key
  description        = "tagwarden hub: reads tags, writes them on what ${length(each.value.clusters)} cluster(s) own"
  assume_role_policy = var.member_trust_policy_json
  tags               = var.tags
}

resource "aws_iam_role_policy" "member" {
  for_each = aws_iam_role.member

  name   = "tag-enforcement"
  role   = each.value.id
  policy = var.member_roles[index(var.member_roles[*].name, each.key)].policy_json
}

# A person's preview of the hub's sweep: tag reads, no write, trusted by the auditor principals.
resource "aws_iam_role" "auditor" {
  count = var.create_member_role && var.auditor_role != null ? 1 : 0

  name               = var.auditor_role.name
  description        = "tagwarden auditor: reads tags for a person's preview of the hub's sweep; writes nothing"
  assume_role_policy = var.auditor_role.trust_policy_json
  tags               = var.tags
}

resource "aws_iam_role_policy" "auditor" {
  count = length(aws_iam_role.auditor)

  name   = "read-tags"
  role   = aws_iam_role.auditor[0].id
  policy = var.auditor_role.policy_json
}

# The role the rules' targets carry to put events on the hub's bus (its name is the one the hub bus
# policy admits: `<member_role_name>-forward-<region>`).
module "forward_role" {
  source = "../forwarding_role"

  name                 = "${var.member_role_name}-forward-${data.aws_region.current.name}"
  description          = "tagwarden: EventBridge forwards this account's events to ${var.hub_event_bus_arn}"
  target_event_bus_arn = var.hub_event_bus_arn
  tags                 = var.tags
}

# The role and its policy were this module's own before ../forwarding_role: moved (an upgrade
# destroys nothing).
moved {
  from = aws_iam_role.forward
  to   = module.forward_role.aws_iam_role.this
}

moved {
  from = aws_iam_role_policy.forward
  to   = module.forward_role.aws_iam_role_policy.this
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
  role_arn = module.forward_role.arn
}

# One role became a role per share of the account's clusters (the default name's).
moved {
  from = aws_iam_role.member[0]
  to   = aws_iam_role.member["tagwarden-member"]
}

moved {
  from = aws_iam_role_policy.member[0]
  to   = aws_iam_role_policy.member["tagwarden-member"]
}
