# Plan-time checks of infra/aws/modules/member with a mocked provider: a spoke deployed
# per account, from the hub's outputs. scripts/test-terraform copies this file into a scratch copy
# of the module's tests/ directory.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "111122223333" }
  }
  mock_data "aws_region" {
    defaults = { name = "us-east-1" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::111122223333:role/tagwarden-member-forward-us-east-1" }
  }
}

variables {
  hub_event_bus_arn = "arn:aws:events:eu-west-1:999988887777:event-bus/tagwarden-hub"
  member_roles = [
    { name = "tagwarden-member", clusters = ["prod-7xk2p"], policy_json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" },
    { name = "tagwarden-member-1", clusters = ["dev-1a2b3"], policy_json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" },
  ]
  member_trust_policy_json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}"
  event_patterns = {
    ec2        = "{\"source\":[\"aws.ec2\"]}"
    iam        = "{\"source\":[\"aws.iam\"]}"
    route53    = "{\"source\":[\"aws.route53\"]}"
    tag_change = "{\"source\":[\"aws.tag\"]}"
  }
}

run "us_east_1_holds_the_role_and_every_rule" {
  command = apply

  assert {
    condition = (toset(keys(aws_cloudwatch_event_rule.hub)) == toset(["ec2", "iam", "route53", "tag_change"]) &&
      toset(keys(aws_iam_role.member)) == toset(["tagwarden-member", "tagwarden-member-1"]) &&
    module.forward_role.name == "tagwarden-member-forward-us-east-1")
    error_message = "every rule, the account's member roles and the forwarding role the hub bus admits, in us-east-1"
  }
  assert {
    condition = alltrue([for t in aws_cloudwatch_event_target.hub :
    t.arn == "arn:aws:events:eu-west-1:999988887777:event-bus/tagwarden-hub" && t.role_arn == module.forward_role.arn])
    error_message = "every rule forwards to the hub bus with the forwarding role"
  }
}

run "another_region_has_no_global_rules_and_no_second_role" {
  command = plan

  override_data {
    target = data.aws_region.current
    values = { name = "eu-west-1" }
  }

  variables {
    create_member_role = false
  }

  assert {
    condition     = toset(keys(aws_cloudwatch_event_rule.hub)) == toset(["ec2", "tag_change"]) && length(aws_iam_role.member) == 0
    error_message = "IAM's and Route 53's rules only in us-east-1; the role once per account"
  }
}
