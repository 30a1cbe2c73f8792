# Plan-time checks of infra/examples/aws-organization with a mocked provider: the hub may
# be applied from the organization's management account (stack_set_call_as = "SELF", the default)
# or from a member account registered as a StackSets delegated administrator ("DELEGATED_ADMIN"),
# and the StackSets and their stack instances are called as that (CloudFormation's CallAs).
# scripts/test-terraform copies this file into a scratch copy of the example's tests/ directory and
# runs `terraform test -var lambda_zip=<placeholder zip>` there. Resources inside a child module
# cannot be asserted on from the example, so the last runs plan the organization module itself
# (`module { source }`) with what the example passes.

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
  # ARNs the provider validates (as in organization.tftest.hcl).
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

# The role's real ARN, at plan (mocked resources know their computed values only after apply): the
# example's check "function_role_arn" holds the ARN it spells from the role's name to it.
override_resource {
  target          = module.tagwarden.aws_iam_role.lambda
  override_during = plan
  values          = { arn = "arn:aws:iam::999988887777:role/tagwarden" }
}

variables {
  region                         = "eu-west-1"
  organization_id                = "o-a1b2c3d4e5"
  member_regions                 = ["eu-west-1", "us-east-1"]
  member_organizational_unit_ids = ["ou-ab12-cd34ef56"]
  clusters                       = ["111122223333/prod-7xk2p", "444455556666/*"]
  account_clusters               = { "444455556666" = ["shop-3kd9s"] }
}

# --- the example ----------------------------------------------------------------------------------

run "example_from_the_management_account_by_default" {
  command = plan

  assert {
    condition     = var.stack_set_call_as == "SELF"
    error_message = "the example's default must be SELF (applied from the management account)"
  }
}

run "example_from_a_delegated_administrator" {
  command = plan
  variables {
    stack_set_call_as = "DELEGATED_ADMIN"
  }

  # The example hands the value to the organization module (whose StackSets the runs below check).
  assert {
    condition     = can(regex("(?m)^\\s*stack_set_call_as\\s*=\\s*var\\.stack_set_call_as\\s*$", file("${path.module}/main.tf")))
    error_message = "infra/examples/aws-organization/main.tf does not pass stack_set_call_as = var.stack_set_call_as to the organization module"
  }
}

run "example_refuses_another_caller" {
  command = plan
  variables {
    stack_set_call_as = "MANAGEMENT"
  }
  expect_failures = [var.stack_set_call_as]
}

# --- the organization module, as the example calls it ------------------------------------------------

run "module_stack_sets_called_as_the_delegated_administrator" {
  command = apply # mocked: the StackSet names the instances use are known after apply
  module {
    source = "../../aws/modules/organization"
  }
  variables {
    name                      = "tagwarden"
    stack_set_call_as         = "DELEGATED_ADMIN"
    function_role_name        = "tagwarden-lambda"
    function_role_arn         = "arn:aws:iam::999988887777:role/tagwarden-lambda"
    function_arn              = "arn:aws:lambda:eu-west-1:999988887777:function:tagwarden"
    reserved_tag_key_patterns = ["kubernetes.io/*", "*.kubernetes.io/*"]
  }

  assert {
    condition = alltrue(concat(
      [for s in aws_cloudformation_stack_set.member : s.call_as == "DELEGATED_ADMIN"],
      [for s in values(aws_cloudformation_stack_set.member_roles) : s.call_as == "DELEGATED_ADMIN"],
      [for i in values(aws_cloudformation_stack_set_instance.member) : i.call_as == "DELEGATED_ADMIN"],
      [for i in values(aws_cloudformation_stack_set_instance.member_roles) : i.call_as == "DELEGATED_ADMIN"],
    )) && length(aws_cloudformation_stack_set.member) == 1 && length(aws_cloudformation_stack_set_instance.member) == 2 && length(aws_cloudformation_stack_set.member_roles) == 2
    error_message = "every StackSet and stack instance must be called as DELEGATED_ADMIN"
  }
}

run "module_stack_sets_called_as_the_management_account" {
  command = apply
  module {
    source = "../../aws/modules/organization"
  }
  variables {
    name                      = "tagwarden"
    stack_set_call_as         = "SELF"
    function_role_name        = "tagwarden-lambda"
    function_role_arn         = "arn:aws:iam::999988887777:role/tagwarden-lambda"
    function_arn              = "arn:aws:lambda:eu-west-1:999988887777:function:tagwarden"
    reserved_tag_key_patterns = ["kubernetes.io/*", "*.kubernetes.io/*"]
  }

  assert {
    condition = alltrue(concat(
      [for s in aws_cloudformation_stack_set.member : s.call_as == "SELF"],
      [for i in values(aws_cloudformation_stack_set_instance.member_roles) : i.call_as == "SELF"],
    ))
    error_message = "the StackSets must be called as SELF"
  }
}
