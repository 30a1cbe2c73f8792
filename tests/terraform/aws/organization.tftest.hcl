# Plan-time checks of infra/aws/modules/organization with a mocked provider: the hub's
# bus, queues, bucket and function grants, and the StackSet of spokes. scripts/test-terraform copies
# this file into a scratch copy of the module's tests/ directory; it renders the spoke's template
# alone and lints it with cfn-lint, and its role policy with parliament.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "999988887777" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { name = "eu-west-1" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
  mock_resource "aws_cloudwatch_event_bus" {
    defaults = { arn = "arn:aws:events:eu-west-1:999988887777:event-bus/tagwarden-hub" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:eu-west-1:999988887777:tagwarden-shards", url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards" }
  }
  mock_resource "aws_s3_bucket" {
    defaults = { arn = "arn:aws:s3:::tagwarden-999988887777-org" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:eu-west-1:999988887777:rule/tagwarden-hub/tagwarden-member-events" }
  }
}

variables {
  name                           = "tagwarden"
  organization_id                = "o-a1b2c3d4e5"
  member_regions                 = ["eu-west-1", "us-east-1"]
  member_organizational_unit_ids = ["ou-ab12-cd34ef56"]
  clusters                       = ["111122223333/prod-7xk2p", "444455556666/*"]
  account_clusters               = { "444455556666" = ["shop-3kd9s", "capi-east"] }
  cluster_kinds                  = { "capi-east" = "ClusterAPI" }
  function_role_name             = "tagwarden-lambda"
  function_role_arn              = "arn:aws:iam::999988887777:role/tagwarden-lambda"
  function_arn                   = "arn:aws:lambda:eu-west-1:999988887777:function:tagwarden"
  reserved_tag_key_patterns      = ["kubernetes.io/*", "*.kubernetes.io/*"]
}

run "a_hub_with_a_stack_set_of_spokes" {
  command = apply # mocked: ARNs are known after apply

  assert {
    condition = output.environment == {
      TAGWARDEN_ORGANIZATION    = "s3://tagwarden-999988887777-org/accounts/"
      TAGWARDEN_MEMBER_ROLE     = "tagwarden-member"
      TAGWARDEN_MEMBER_REGIONS  = "eu-west-1,us-east-1"
      TAGWARDEN_CLUSTERS        = "111122223333/prod-7xk2p,444455556666/*"
      TAGWARDEN_SHARD_QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards"
    }
    error_message = "the function's organization settings: ${jsonencode(output.environment)}"
  }
  assert {
    condition = jsonencode(output.hub) == jsonencode({
      uri             = "s3://tagwarden-999988887777-org/accounts/"
      member_role     = "tagwarden-member"
      member_regions  = ["eu-west-1", "us-east-1"]
      clusters        = ["111122223333/prod-7xk2p", "444455556666/*"]
      shard_queue_url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards"
    })
    error_message = "the hub's settings for the tagwarden module's organization input: ${jsonencode(output.hub)}"
  }

  # Spokes that deploy themselves: service-managed, auto-deployed to the OUs, in every member region.
  assert {
    condition = (aws_cloudformation_stack_set.member[0].permission_model == "SERVICE_MANAGED" &&
      aws_cloudformation_stack_set.member[0].auto_deployment[0].enabled &&
      contains(aws_cloudformation_stack_set.member[0].capabilities, "CAPABILITY_NAMED_IAM") &&
    toset(keys(aws_cloudformation_stack_set_instance.member)) == toset(["eu-west-1", "us-east-1"]))
    error_message = "a service-managed StackSet with auto-deployment, an instance per member region"
  }
  assert {
    condition = alltrue([for i in aws_cloudformation_stack_set_instance.member :
    i.deployment_targets[0].organizational_unit_ids == toset(["ou-ab12-cd34ef56"])])
    error_message = "the StackSet targets the OUs"
  }

  # One definition: the shared template's rules are the member patterns, IAM's and Route 53's rules
  # only where their events are delivered; each account's roles in a StackSet of its own, deployed
  # to that account alone, once (IAM is global).
  assert {
    condition = (!can(jsondecode(aws_cloudformation_stack_set.member[0].template_body).Resources.MemberRole) &&
      jsondecode(aws_cloudformation_stack_set.member_roles["444455556666"].template_body).Resources.MemberRole0.Condition == "IsRoleRegion" &&
      jsondecode(aws_cloudformation_stack_set.member_roles["444455556666"].template_body).Conditions.IsRoleRegion["Fn::Equals"][1] == "us-east-1" &&
      toset(keys(aws_cloudformation_stack_set.member_roles)) == toset(["111122223333", "444455556666"]) &&
      aws_cloudformation_stack_set_instance.member_roles["444455556666"].deployment_targets[0].account_filter_type == "INTERSECTION" &&
      aws_cloudformation_stack_set_instance.member_roles["444455556666"].deployment_targets[0].accounts == toset(["444455556666"]) &&
      aws_cloudformation_stack_set_instance.member_roles["444455556666"].region == "us-east-1" &&
      jsondecode(aws_cloudformation_stack_set.member[0].template_body).Resources.RuleIam.Condition == "IsGlobalRegion" &&
      jsondecode(aws_cloudformation_stack_set.member[0].template_body).Resources.RuleRoute53.Condition == "IsGlobalRegion" &&
    !can(jsondecode(aws_cloudformation_stack_set.member[0].template_body).Resources.RuleEc2.Condition))
    error_message = "each account's roles once, in us-east-1, in that account alone; global services' rules only there"
  }
  assert {
    condition = (length([for k, r in jsondecode(aws_cloudformation_stack_set.member[0].template_body).Resources : k if startswith(k, "Rule")]) == length(output.member_event_patterns) &&
    alltrue([for k, r in jsondecode(aws_cloudformation_stack_set.member[0].template_body).Resources : r.Properties.Targets[0].Arn == "arn:aws:events:eu-west-1:999988887777:event-bus/tagwarden-hub" if startswith(k, "Rule")]))
    error_message = "one rule per member pattern, each to the hub bus"
  }
  assert {
    condition     = jsondecode(output.member_trust_policy_json).Statement[0].Principal.AWS == "arn:aws:iam::999988887777:role/tagwarden-lambda"
    error_message = "the member role trusts the hub function's role alone"
  }
  # Each member role bounds its writes to its clusters' ownership keys, within IAM's 10,240
  # characters; the reserved keys denied (tests/iam evaluates them request by request).
  assert {
    condition = (alltrue([for a, roles in output.member_roles : alltrue([for r in roles : length(r.policy_json) < 10240])]) &&
      keys(one([for s in jsondecode(output.member_roles["444455556666"][0].policy_json).Statement : s.Condition.StringNotEquals if s.Sid == "DenyUnowned"])) == [
        "aws:ResourceTag/kubernetes.io/cluster/capi-east",
        "aws:ResourceTag/kubernetes.io/cluster/shop-3kd9s",
        "aws:ResourceTag/sigs.k8s.io/cluster-api-provider-aws/cluster/capi-east",
      ] &&
    [for s in jsondecode(output.member_roles["111122223333"][0].policy_json).Statement : s.Effect if s.Sid == "DenyReservedTagKeys"] == ["Deny"])
    error_message = "member roles: each within IAM's 10,240 characters, writes bounded to its clusters' ownership keys, reserved keys denied"
  }
  # Loop safety: the member role's own calls are dropped at every CloudTrail rule.
  assert {
    condition     = alltrue([for k, p in output.member_event_patterns : strcontains(p, ":role/tagwarden-member") if k != "tag_change"])
    error_message = "every CloudTrail rule drops the member role's own calls"
  }

  # A cluster's publisher writes only its own folder; the organization alone reaches the bus.
  assert {
    condition = (toset(data.aws_iam_policy_document.organization_bucket.statement[0].resources) == toset(["arn:aws:s3:::tagwarden-999988887777-org/accounts/$${aws:PrincipalAccount}/$${aws:PrincipalTag/tagwarden-cluster}/*"]) &&
    anytrue([for c in data.aws_iam_policy_document.organization_bucket.statement[0].condition : c.variable == "aws:PrincipalOrgID" && toset(c.values) == toset(["o-a1b2c3d4e5"])]))
    error_message = "members write under their own account's folder only, within the organization"
  }
  assert {
    condition     = anytrue([for c in data.aws_iam_policy_document.hub_bus.statement[0].condition : c.variable == "aws:PrincipalOrgID" && toset(c.values) == toset(["o-a1b2c3d4e5"])])
    error_message = "only the organization's accounts put events on the hub bus"
  }
  assert {
    condition = (toset(data.aws_iam_policy_document.function.statement[0].resources) == toset(["arn:aws:iam::*:role/tagwarden-member", "arn:aws:iam::*:role/tagwarden-member-*"]) &&
    anytrue([for c in data.aws_iam_policy_document.function.statement[0].condition : c.variable == "aws:ResourceOrgID" && toset(c.values) == toset(["o-a1b2c3d4e5"])]))
    error_message = "the function assumes the member role only, only in the organization"
  }
  assert {
    condition = (aws_lambda_event_source_mapping.shards.batch_size == 1 &&
      aws_lambda_event_source_mapping.shards.scaling_config[0].maximum_concurrency == 20 &&
      module.shards_queue.fifo_queue && module.shards_queue.name == "tagwarden-shards.fifo" &&
      module.shards_queue.dlq_name == "tagwarden-shards-dlq.fifo" && length(aws_cloudwatch_metric_alarm.dead_letters) == 2 &&
    toset([for a in aws_cloudwatch_metric_alarm.members : a.metric_name]) == toset(["MemberRefused", "MemberOverCap", "MemberNotReached", "MemberSweepStale"]))
    error_message = "one shard an invocation, at most 20 at once, from a FIFO queue (one message group per account-region) with its FIFO dead-letter queue and both alarmed; the members' alarms"
  }
}

run "without_organizational_units_no_stack_set" {
  command = plan

  variables {
    member_organizational_unit_ids = []
  }

  assert {
    condition     = length(aws_cloudformation_stack_set.member) == 0 && length(aws_cloudformation_stack_set_instance.member) == 0
    error_message = "no StackSet without OUs (modules/member per account instead)"
  }
}

# A thousand clusters named one by one do not fit Lambda's 4 KB environment; an account's every
# cluster (`<account>/*`) does, at any number.
run "a_thousand_named_clusters_are_refused_with_the_fix" {
  command = plan

  variables {
    clusters = [for i in range(1000) : format("111122223333/cluster-%04d-7xk2p", i)]
  }

  expect_failures = [var.clusters]
}

# An account listed whole must name its clusters: its member roles' ownership bound lists them.
run "an_account_listed_whole_without_its_clusters_is_refused" {
  command = plan

  variables {
    account_clusters = {}
  }

  expect_failures = [aws_s3_object.member_roles]
}

run "an_invalid_organization_id_is_refused" {
  command = plan

  variables {
    organization_id = "123456789012"
  }

  expect_failures = [var.organization_id]
}
