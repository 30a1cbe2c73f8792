# Plan-time checks of infra/aws/modules/iam_event_forwarding with a mocked provider (issue 17 item
# 12). scripts/test-terraform copies this file into a scratch copy of the module's tests/ directory.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { name = "us-east-1" }
  }
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
  # The event target validates these as ARNs at apply.
  mock_resource "aws_iam_role" {
    defaults = { arn = "arn:aws:iam::123456789012:role/tagwarden-mycluster-7xk2p-iam-forward" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:us-east-1:123456789012:tagwarden-mycluster-7xk2p-iam-forward-dlq" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:us-east-1:123456789012:rule/tagwarden-mycluster-7xk2p-iam-forward" }
  }
}

variables {
  name                 = "tagwarden-mycluster-7xk2p"
  event_pattern        = "{\"source\":[\"aws.iam\"]}"
  target_event_bus_arn = "arn:aws:events:eu-west-1:123456789012:event-bus/default"
}

run "aws_partition_forwards_with_retries_and_dlq" {
  command = apply # mocked: the queue ARN is only known after apply

  assert {
    condition = (length(aws_cloudwatch_event_target.this.dead_letter_config) == 1 &&
    aws_cloudwatch_event_target.this.dead_letter_config[0].arn == aws_sqs_queue.dlq.arn)
    error_message = "the forwarding target needs a dead-letter queue"
  }
  assert {
    condition = (aws_cloudwatch_event_target.this.retry_policy[0].maximum_retry_attempts == 185 &&
    aws_cloudwatch_event_target.this.retry_policy[0].maximum_event_age_in_seconds == 86400)
    error_message = "the forwarding target needs a retry policy (185 attempts, 24 h)"
  }
  assert {
    condition     = aws_sqs_queue.dlq.sqs_managed_sse_enabled == true
    error_message = "the forwarding DLQ must be encrypted"
  }
}

run "china_partition_refused" {
  command = plan
  override_data {
    target = data.aws_partition.current
    values = { partition = "aws-cn" }
  }
  expect_failures = [aws_cloudwatch_event_rule.this]
}

run "govcloud_partition_refused" {
  command = plan
  override_data {
    target = data.aws_partition.current
    values = { partition = "aws-us-gov" }
  }
  expect_failures = [aws_cloudwatch_event_rule.this]
}

run "outside_us_east_1_refused" {
  command = plan
  override_data {
    target = data.aws_region.current
    values = { name = "eu-west-1" }
  }
  variables {
    target_event_bus_arn = "arn:aws:events:eu-central-1:123456789012:event-bus/default"
  }
  expect_failures = [aws_cloudwatch_event_rule.this]
}
