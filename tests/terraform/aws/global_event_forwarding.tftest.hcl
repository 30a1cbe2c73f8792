# Plan-time checks of infra/aws/modules/global_event_forwarding with a mocked provider (IAM and
# Route 53 events). scripts/test-terraform copies this file into a scratch copy of the
# module's tests/ directory.

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
    defaults = { arn = "arn:aws:iam::123456789012:role/tagwarden-mycluster-7xk2p-forward" }
  }
  mock_resource "aws_sqs_queue" {
    defaults = { arn = "arn:aws:sqs:us-east-1:123456789012:tagwarden-mycluster-7xk2p-forward-dlq" }
  }
  mock_resource "aws_cloudwatch_event_rule" {
    defaults = { arn = "arn:aws:events:us-east-1:123456789012:rule/tagwarden-mycluster-7xk2p-iam-forward" }
  }
}

variables {
  name = "tagwarden-mycluster-7xk2p"
  event_patterns = {
    iam     = "{\"source\":[\"aws.iam\"]}"
    route53 = "{\"source\":[\"aws.route53\"]}"
  }
  target_event_bus_arn = "arn:aws:events:eu-west-1:123456789012:event-bus/default"
}

run "aws_partition_forwards_with_retries_and_dlq" {
  command = apply # mocked: the queue ARN is only known after apply

  # One rule per global service, IAM's keeping its former name.
  assert {
    condition = ({ for k, r in aws_cloudwatch_event_rule.this : k => [r.name, r.event_pattern] } == {
      iam     = ["tagwarden-mycluster-7xk2p-iam-forward", "{\"source\":[\"aws.iam\"]}"]
      route53 = ["tagwarden-mycluster-7xk2p-route53-forward", "{\"source\":[\"aws.route53\"]}"]
    })
    error_message = "one forwarding rule per pattern: ${jsonencode({ for k, r in aws_cloudwatch_event_rule.this : k => r.name })}"
  }
  assert {
    condition = alltrue([for t in aws_cloudwatch_event_target.this :
      length(t.dead_letter_config) == 1 && t.dead_letter_config[0].arn == module.dead_letter_queue.arn &&
    t.arn == "arn:aws:events:eu-west-1:123456789012:event-bus/default" && t.role_arn == module.forward_role.arn]) && length(aws_cloudwatch_event_target.this) == 2
    error_message = "every forwarding target needs the bus, the role and the dead-letter queue"
  }
  assert {
    condition = alltrue([for t in aws_cloudwatch_event_target.this :
      t.retry_policy[0].maximum_retry_attempts == 185 && t.retry_policy[0].maximum_event_age_in_seconds == 86400
    ])
    error_message = "the forwarding targets need a retry policy (185 attempts, 24 h)"
  }
  assert {
    condition     = module.dead_letter_queue.sqs_managed_sse_enabled == true
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

run "no_patterns_refused" {
  command = plan
  variables {
    event_patterns = {}
  }
  expect_failures = [var.event_patterns]
}

run "rule_name_over_64_characters_refused" {
  command = plan
  variables {
    name = "tagwarden-a-very-long-cluster-name-for-rules-x1234"
  }
  expect_failures = [aws_cloudwatch_event_rule.this]
}

# The forwarding dead-letter queue is alarmed, in us-east-1, and the alarm reaches the
# subscribers through a topic of its own region.
run "dead_letter_queue_alarmed" {
  command = plan
  variables {
    alarm_subscriptions = [{ protocol = "email", endpoint = "ops@example.com" }]
  }
  assert {
    condition     = aws_cloudwatch_metric_alarm.dlq_not_empty.metric_name == "ApproximateNumberOfMessagesVisible" && aws_cloudwatch_metric_alarm.dlq_not_empty.dimensions["QueueName"] == "tagwarden-mycluster-7xk2p-forward-dlq"
    error_message = "the forwarding DLQ's alarm watches the queue's visible messages"
  }
  assert {
    condition     = length(aws_sns_topic.alarms) == 1 && length(aws_sns_topic_subscription.alarms) == 1
    error_message = "a us-east-1 topic with the subscription"
  }
}

run "dead_letter_queue_alarmed_without_subscribers" {
  command = plan
  assert {
    condition     = length(aws_sns_topic.alarms) == 0 && length(aws_cloudwatch_metric_alarm.dlq_not_empty.alarm_actions) == 0
    error_message = "no subscribers: the alarm exists (console, API) without a topic"
  }
}
