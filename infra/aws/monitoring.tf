# CloudWatch dashboard and alarms over the function's EMF metrics (namespace TagWarden, DESIGN.md
# §8), the Lambda service metrics and the dead-letter queue.
#
# The function publishes with dimensions Cloud, ResourceType and InfraID. ResourceType values are
# open-ended, so widgets use SEARCH and alarms use Metrics Insights over the whole namespace
# filtered on InfraID: a resource type the module has never heard of still shows and still alarms.

locals {
  metric_namespace = "TagWarden"

  tagwarden_metrics = [
    "EventsReceived", "EventsIgnored", "ResourcesEvaluated", "DriftDetected", "TagsWritten",
    "WriteFailures", "TagLimitExceeded", "PolicyRejected", "Conflicts", "ReconcileLatency",
  ]

  # SEARCH over every dimension combination that carries this cluster's InfraID.
  search = { for m in local.tagwarden_metrics : m => "SEARCH('Namespace=\"${local.metric_namespace}\" MetricName=\"${m}\" InfraID=\"${var.infra_id}\"', '${m == "ReconcileLatency" ? "Average" : "Sum"}', 300)" }

  search_widget = { for m in local.tagwarden_metrics : m => {
    type   = "metric"
    width  = 8
    height = 6
    properties = {
      title   = m == "ReconcileLatency" ? "ReconcileLatency (ms, average)" : m
      region  = local.region
      view    = "timeSeries"
      stacked = false
      period  = 300
      metrics = [[{ expression = local.search[m], id = "e1", label = "" }]]
    }
  } }

  dashboard_body = {
    widgets = concat(
      [{
        type   = "text"
        width  = 24
        height = 2
        properties = {
          markdown = "## tagwarden — cluster `${var.infra_id}`\nFunction `${local.name}` · policy `${local.policy_uri}` · metrics namespace `${local.metric_namespace}` (per ResourceType). Failed events are in `${aws_sqs_queue.dlq.name}`."
        }
      }],
      [for m in local.tagwarden_metrics : local.search_widget[m]],
      [
        {
          # Event-level metric (dimensions Cloud, InfraID): EMF keeps every value, so the
          # percentiles are exact.
          type   = "metric"
          width  = 8
          height = 6
          properties = {
            title  = "ComplianceLag (ms): event time to correction, p50 / p99"
            region = local.region
            view   = "timeSeries"
            period = 300
            metrics = [
              [local.metric_namespace, "ComplianceLag", "Cloud", "aws", "InfraID", var.infra_id, { stat = "p50", label = "p50" }],
              [local.metric_namespace, "ComplianceLag", "Cloud", "aws", "InfraID", var.infra_id, { stat = "p99", label = "p99" }],
            ]
            annotations = { horizontal = [{ label = "alarm (p99)", value = var.compliance_lag_p99_threshold_ms }] }
          }
        },
      ],
      [
        {
          type   = "metric"
          width  = 8
          height = 6
          properties = {
            title  = "Lambda errors and throttles"
            region = local.region
            view   = "timeSeries"
            period = 300
            stat   = "Sum"
            metrics = [
              ["AWS/Lambda", "Errors", "FunctionName", aws_lambda_function.this.function_name],
              ["AWS/Lambda", "Throttles", "FunctionName", aws_lambda_function.this.function_name],
              ["AWS/Lambda", "Invocations", "FunctionName", aws_lambda_function.this.function_name],
            ]
          }
        },
        {
          type   = "metric"
          width  = 8
          height = 6
          properties = {
            title  = "Lambda duration (ms)"
            region = local.region
            view   = "timeSeries"
            period = 300
            metrics = [
              ["AWS/Lambda", "Duration", "FunctionName", aws_lambda_function.this.function_name, { stat = "Average" }],
              ["AWS/Lambda", "Duration", "FunctionName", aws_lambda_function.this.function_name, { stat = "Maximum" }],
            ]
          }
        },
        {
          type   = "metric"
          width  = 8
          height = 6
          properties = {
            title  = "Queues: events waiting / dead letters"
            region = local.region
            view   = "timeSeries"
            period = 300
            stat   = "Maximum"
            metrics = [
              ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.dlq.name],
              ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", aws_sqs_queue.events.name],
              ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", aws_sqs_queue.events.name, { yAxis = "right" }],
            ]
          }
        },
      ],
    )
  }

  alarm_actions = local.sns_topic_arn == null ? [] : [local.sns_topic_arn]

  # Metrics Insights alarms: one time series summed over every dimension set of this InfraID.
  insights_alarms = {
    write_failures = {
      metric      = "WriteFailures"
      description = "tagwarden ${var.infra_id}: tag writes failed (see the status report and the function's logs)."
    }
    policy_rejected = {
      metric      = "PolicyRejected"
      description = "tagwarden ${var.infra_id}: a new policy version was rejected; the last known good version stays in force."
    }
  }
}

resource "aws_sns_topic" "alarms" {
  count = var.alarm_sns_topic_arn == null && var.create_sns_topic ? 1 : 0

  name              = "${local.name}-alarms"
  kms_master_key_id = var.kms_key_arn
  tags              = local.tags
}

resource "aws_cloudwatch_dashboard" "this" {
  dashboard_name = local.name
  dashboard_body = jsonencode(local.dashboard_body)
}

resource "aws_cloudwatch_metric_alarm" "insights" {
  for_each = local.insights_alarms

  alarm_name          = "${local.name}-${replace(each.key, "_", "-")}"
  alarm_description   = each.value.description
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions

  metric_query {
    id          = "q1"
    expression  = "SELECT SUM(${each.value.metric}) FROM \"${local.metric_namespace}\" WHERE InfraID = '${var.infra_id}'"
    period      = var.alarm_period_seconds
    return_data = true
  }

  tags = local.tags
}

# How long resources stay out of line, as an auditor asks: the p99 of the event-to-correction lag.
resource "aws_cloudwatch_metric_alarm" "compliance_lag" {
  alarm_name          = "${local.name}-compliance-lag-p99"
  alarm_description   = "tagwarden ${var.infra_id}: p99 of ComplianceLag (event time to the corrected write) is above ${var.compliance_lag_p99_threshold_ms} ms; check the queue's age, throttling and the function's errors."
  namespace           = local.metric_namespace
  metric_name         = "ComplianceLag"
  dimensions          = { Cloud = "aws", InfraID = var.infra_id }
  extended_statistic  = "p99"
  period              = var.alarm_period_seconds
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.compliance_lag_p99_threshold_ms
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "lambda_errors" {
  alarm_name          = "${local.name}-lambda-errors"
  alarm_description   = "tagwarden ${var.infra_id}: the function returned errors (failed invocations; queued events are retried, then dead-lettered)."
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.this.function_name }
  statistic           = "Sum"
  period              = var.alarm_period_seconds
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  alarm_name          = "${local.name}-dlq-not-empty"
  alarm_description   = "tagwarden ${var.infra_id}: events or invocations in ${aws_sqs_queue.dlq.name} could not be processed; inspect and redrive."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.dlq.name }
  statistic           = "Maximum"
  period              = var.alarm_period_seconds
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}
