# CloudWatch dashboard and alarms over the function's EMF metrics (namespace TagWarden; the
# metrics reference, docs/src/lookup/metrics.md), the Lambda service metrics and the dead-letter queue.
#
# The function publishes with dimensions Cloud, ResourceType and InfraID. ResourceType values are
# open-ended, so widgets use SEARCH and alarms use Metrics Insights over the whole namespace
# filtered on InfraID: a resource type the module has never heard of still shows and still alarms.
# A cluster set gets one line per cluster in each widget and its own alarms per cluster.

locals {
  metric_namespace = "TagWarden"

  tagwarden_metrics = [
    "EventsReceived", "EventsIgnored", "ResourcesEvaluated", "DriftDetected", "TagsWritten",
    "WriteFailures", "TagLimitExceeded", "PolicyRejected", "Conflicts", "ReconcileLatency",
    "ListingFailures",
  ]

  # The InfraID value of the deployment's own metrics (events received and ignored, policies
  # rejected): the cluster's for one cluster, "all" for a cluster set (crates/core/src/report/metrics.rs, by_cluster),
  # whose resource metrics carry each cluster's own InfraID.
  deployment_infra_id = local.cluster_set ? "all" : var.infra_id
  # These exist only under the deployment's InfraID (dimensions Cloud, InfraID:
  # crates/aws/src/emf.rs, lines; crates/core/src/report/metrics.rs, by_cluster), never under a cluster's, so a set draws them as the
  # one "all" line, not as per-cluster lines that stay empty. So do ListingFailures (a
  # failed sweep listing's record names no cluster: crates/core/src/report/record.rs, Record::listing_failed) and
  # CallsPerCorrection (the invocation's API calls per resource corrected, drawn beside the lag).
  deployment_metrics = ["EventsReceived", "EventsIgnored", "PolicyRejected", "ListingFailures"]

  # SEARCH over every dimension combination (each ResourceType) that carries one InfraID.
  search_of = { for m in local.tagwarden_metrics : m => { for id in distinct(concat(local.clusters, [local.deployment_infra_id])) :
    id => "SEARCH('Namespace=\"${local.metric_namespace}\" MetricName=\"${m}\" InfraID=\"${id}\"', '${m == "ReconcileLatency" ? "Average" : "Sum"}', 300)"
  } }

  # One cluster: every ResourceType's line. A cluster set: one line per cluster (and "all"), summed
  # over resource types; SUM/AVG of a SEARCH is one time series (CloudWatch User Guide, "Use search
  # expressions in graphs" and "Using metric math"), so N clusters stay N lines.
  #
  # An organization hub lists no cluster (main.tf), and its clusters are any number in
  # any account, past what a SEARCH returns (500 time series; CloudWatch User Guide, "CloudWatch
  # search expression syntax"). Its lines are Metrics Insights queries over the namespace, which
  # aggregate every series of a metric into one (up to 10,000 metrics a query; "Metrics Insights
  # quotas"). The namespace is shared by every tagwarden deployment of the account and region, so
  # the hub account runs no other (docs/src/guides/aws-organization.md).
  insights_of = { for m in local.tagwarden_metrics : m => "SELECT ${m == "ReconcileLatency" ? "AVG" : "SUM"}(${m}) FROM \"${local.metric_namespace}\"" }
  search_lines = { for m in local.tagwarden_metrics : m => local.organization ? [
    [{ expression = local.insights_of[m], id = "q1", label = "organization" }]
    ] : local.cluster_set ? [
    for i, id in(contains(local.deployment_metrics, m) ? [local.deployment_infra_id] : concat(local.clusters, [local.deployment_infra_id])) :
    [{ expression = "${m == "ReconcileLatency" ? "AVG" : "SUM"}(${local.search_of[m][id]})", id = "e${i}", label = id }]
  ] : [[{ expression = local.search_of[m][var.infra_id], id = "e1", label = "" }]] }

  search_widget = { for m in local.tagwarden_metrics : m => {
    type   = "metric"
    width  = 8
    height = 6
    properties = {
      title = (m == "ReconcileLatency" ? "ReconcileLatency (ms, average)" :
      local.cluster_set && contains(local.deployment_metrics, m) ? "${m} (deployment-wide, InfraID all)" : m)
      region  = local.region
      view    = "timeSeries"
      stacked = false
      period  = 300
      metrics = local.search_lines[m]
    }
  } }

  # Compliance from day one, in audit as in enforce. The function emits
  # WouldWrite (resources with a change it would write but holds back: everything in audit mode;
  # in enforce, what a cluster's `enforce: false` or a policy's auditKeys keeps audited),
  # ResourcesInLine and ResourcesDrifted, all three together whenever an owned resource was
  # evaluated, per cluster with dimensions Cloud, InfraID (and again per ResourceType:
  # crates/aws/src/emf.rs, lines). A cluster's own series are exact metrics; the per-type
  # copies are left out of every sum here (SEARCH and Metrics Insights bound to the schema
  # {Cloud, InfraID}), so nothing is counted twice.
  #
  # Compliance % = 100 x in line / (in line + drifted), over the resources evaluated in a period:
  # the period is the sweep's interval (at least an hour), so a full sweep sets the figure and
  # the few resources an event evaluates in between do not swing it.
  compliance_period = local.sweep_interval_seconds == null ? 3600 : max(3600, local.sweep_interval_seconds)
  # One cluster's exact series (dimensions Cloud, InfraID), summed over the period.
  compliance_metric = { for m in ["WouldWrite", "ResourcesInLine", "ResourcesDrifted"] : m => { for id in local.clusters :
    id => [local.metric_namespace, m, "Cloud", "aws", "InfraID", id]
  } }
  # An organization hub lists no cluster. A widget may hold one Metrics Insights query only (one
  # GetMetricData call per widget; "Metrics Insights quotas", CloudWatch User Guide), so its two
  # terms are SUMs of SEARCHes bound to the schema {Cloud, InfraID} (exact up to the 500 clusters
  # a SEARCH returns: past that, the figure of 500 of them), and the one query of the would-be
  # writes widget ranks the clusters (GROUP BY InfraID, top 20).
  compliance_search = { for m in ["WouldWrite", "ResourcesInLine", "ResourcesDrifted"] :
    m => "SUM(SEARCH('{${local.metric_namespace},Cloud,InfraID} MetricName=\"${m}\"', 'Sum', ${local.compliance_period}))"
  }

  # Lines of the compliance widgets, as JSON (expression and metric lines have different types).
  # Per cluster its two counts (hidden) and the percentage; an organization's, its totals.
  compliance_pct_lines = local.organization ? jsonencode([
    [{ expression = local.compliance_search["ResourcesInLine"], id = "i0", label = "in line", visible = false }],
    [{ expression = local.compliance_search["ResourcesDrifted"], id = "d0", label = "drifted", visible = false }],
    [{ expression = "100 * i0 / (i0 + d0)", id = "c0", label = "organization" }],
    ]) : "[${join(",", [for i, id in local.clusters : join(",", [
      jsonencode(concat(local.compliance_metric["ResourcesInLine"][id], [{ id = "i${i}", stat = "Sum", visible = false }])),
      jsonencode(concat(local.compliance_metric["ResourcesDrifted"][id], [{ id = "d${i}", stat = "Sum", visible = false }])),
      jsonencode([{ expression = "100 * i${i} / (i${i} + d${i})", id = "c${i}", label = id }]),
  ])])}]"
  would_write_lines = local.organization ? jsonencode([
    [{ expression = "SELECT SUM(WouldWrite) FROM SCHEMA(\"${local.metric_namespace}\", Cloud, InfraID) GROUP BY InfraID ORDER BY SUM() DESC LIMIT 20", id = "q1" }],
    ]) : local.cluster_set ? jsonencode([
    for id in local.clusters : concat(local.compliance_metric["WouldWrite"][id], [{ stat = "Sum", label = id }])
    ]) : jsonencode([
    concat(local.compliance_metric["WouldWrite"][var.infra_id], [{ stat = "Sum", label = "all resource types" }]),
    [{ expression = "SEARCH('{${local.metric_namespace},Cloud,InfraID,ResourceType} MetricName=\"WouldWrite\" InfraID=\"${var.infra_id}\"', 'Sum', ${local.compliance_period})", id = "e1", label = "" }],
  ])
  in_line_drifted_lines = local.organization ? jsonencode([
    [{ expression = local.compliance_search["ResourcesInLine"], id = "e1", label = "in line (organization)" }],
    [{ expression = local.compliance_search["ResourcesDrifted"], id = "e2", label = "drifted (organization)" }],
    ]) : "[${join(",", [for id in local.clusters : join(",", [
      jsonencode(concat(local.compliance_metric["ResourcesInLine"][id], [{ stat = "Sum", label = local.cluster_set ? "${id} in line" : "in line" }])),
      jsonencode(concat(local.compliance_metric["ResourcesDrifted"][id], [{ stat = "Sum", label = local.cluster_set ? "${id} drifted" : "drifted" }])),
  ])])}]"
  mode_note = (var.mode == "audit" ?
    "Mode **audit**: tagwarden writes no tag; WouldWrite and the compliance widgets show what `enforce` would write. Every alarm stays armed: errors, dead letters, a rejected policy, a failed listing and silence fire as in enforce (a write failure needs a write)." :
  "Mode **enforce**: WouldWrite counts only what stays audited (a cluster whose policy says `enforce: false`, keys in a policy's `auditKeys`).")

  compliance_widgets = [
    {
      type   = "metric"
      width  = 24
      height = 3
      properties = {
        # (An organization's SEARCHes carry their own period: its figure is the latest period's.)
        title                = local.organization ? "Compliance % of the organization in the latest ${local.compliance_period / 3600} h: resources in line / evaluated" : "Compliance % over the dashboard's time range: resources in line / evaluated${local.cluster_set ? ", per cluster" : ""}"
        region               = local.region
        view                 = "singleValue"
        setPeriodToTimeRange = !local.organization
        sparkline            = false
        metrics              = jsondecode(local.compliance_pct_lines)
      }
    },
    {
      type   = "metric"
      width  = 8
      height = 6
      properties = {
        title   = "Compliance % (in line / (in line + drifted))${local.organization ? ", organization-wide" : local.cluster_set ? " per cluster" : ""}"
        region  = local.region
        view    = "timeSeries"
        stacked = false
        period  = local.compliance_period
        metrics = jsondecode(local.compliance_pct_lines)
        yAxis   = { left = { min = 0, max = 100, label = "%", showUnits = false } }
      }
    },
    {
      type   = "metric"
      width  = 8
      height = 6
      properties = {
        title   = "WouldWrite: resources with a write held back${var.mode == "audit" ? " (audit: every would-be write)" : " (audited clusters and keys)"}${local.organization ? ", top 20 clusters" : local.cluster_set ? " per cluster" : " by ResourceType"}"
        region  = local.region
        view    = "timeSeries"
        stacked = false
        period  = local.compliance_period
        metrics = jsondecode(local.would_write_lines)
      }
    },
    {
      type   = "metric"
      width  = 8
      height = 6
      properties = {
        title   = "Resources in line vs drifted${local.organization ? " (organization)" : local.cluster_set ? " per cluster" : ""}"
        region  = local.region
        view    = "timeSeries"
        stacked = !local.cluster_set && !local.organization
        period  = local.compliance_period
        metrics = jsondecode(local.in_line_drifted_lines)
      }
    },
  ]

  dashboard_body = {
    widgets = concat(
      [{
        type   = "text"
        width  = 24
        height = 3
        properties = {
          markdown = "## tagwarden — ${local.organization ? "AWS Organization hub `${var.name}`: every cluster of the organization module's `clusters` (tagwarden status --organization)" : local.cluster_set ? "cluster set `${var.name}`: ${join(", ", [for id in local.clusters : "`${id}`"])}" : "cluster `${var.infra_id}`"}\nFunction `${local.name}` · policy `${local.policy_uri}` · metrics namespace `${local.metric_namespace}` (per ResourceType). Failed events are in `${module.events_queue.dlq_name}`.\n\n${local.mode_note}"
        }
      }],
      local.compliance_widgets,
      [for m in local.tagwarden_metrics : local.search_widget[m] if m != "ListingFailures"],
      [
        {
          # Event-level metric (dimensions Cloud, InfraID): EMF keeps every value, so the
          # percentiles are exact.
          type   = "metric"
          width  = 8
          height = 6
          properties = {
            title = (local.organization ? "ComplianceLag (ms): event time to correction, the slowest in the organization" :
            local.cluster_set ? "ComplianceLag (ms): event time to correction, p99 per cluster" : "ComplianceLag (ms): event time to correction, p50 / p99")
            region = local.region
            view   = "timeSeries"
            period = 300
            # (Through JSON: a query line and metric lines have different types.)
            metrics = jsondecode(local.organization ? jsonencode([
              [{ expression = "SELECT MAX(ComplianceLag) FROM \"${local.metric_namespace}\"", id = "q1", label = "maximum" }]
              ]) : local.cluster_set ? jsonencode([
              for id in local.clusters : [local.metric_namespace, "ComplianceLag", "Cloud", "aws", "InfraID", id, { stat = "p99", label = "${id} p99" }]
              ]) : jsonencode([
              [local.metric_namespace, "ComplianceLag", "Cloud", "aws", "InfraID", var.infra_id, { stat = "p50", label = "p50" }],
              [local.metric_namespace, "ComplianceLag", "Cloud", "aws", "InfraID", var.infra_id, { stat = "p99", label = "p99" }],
            ]))
            annotations = { horizontal = [{ label = local.organization ? "alarm (maximum)" : "alarm (p99)", value = var.compliance_lag_p99_threshold_ms }] }
          }
        },
        {
          # What a correction cost, beside how long it took. Emitted once per invocation
          # that corrected anything (unit None): its AWS API calls / the resources it wrote into
          # line. Batching lowers it (on moto, tests/aws/aws_scale_up.rs, 200 instances: 1.67 one
          # event per invocation, 0.031 in batches of 100).
          type   = "metric"
          width  = 8
          height = 6
          properties = {
            title  = "CallsPerCorrection: API calls per resource corrected, per invocation${local.cluster_set ? " (deployment-wide, InfraID all)" : ""}"
            region = local.region
            view   = "timeSeries"
            period = 300
            metrics = [
              [local.metric_namespace, "CallsPerCorrection", "Cloud", "aws", "InfraID", local.deployment_infra_id, { stat = "Average", label = "average" }],
              [local.metric_namespace, "CallsPerCorrection", "Cloud", "aws", "InfraID", local.deployment_infra_id, { stat = "Maximum", label = "maximum" }],
            ]
          }
        },
        # Sweep listings that failed (e.g. a guardrail denying iam:GetAccountAuthorizationDetails):
        # the sweep goes on with the rest, and what the listing would have named is not swept.
        local.search_widget["ListingFailures"],
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
              ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", module.events_queue.dlq_name],
              ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", module.events_queue.name],
              ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", module.events_queue.name, { yAxis = "right" }],
            ]
          }
        },
      ],
    )
  }

  alarm_actions = local.sns_topic_arn == null ? [] : [local.sns_topic_arn]

  # Metrics Insights alarms: one time series summed over every dimension set of one InfraID. Write
  # failures are a cluster's (one alarm each in a set); a rejected policy and a failed sweep
  # listing are the deployment's.
  # Keys and names of one cluster are as before sets existed ("write_failures", <name>-<id>-...).
  insights_alarms = merge(
    { for id in local.clusters : (local.cluster_set ? "${id}/write_failures" : "write_failures") => {
      name        = "${var.name}-${id}-write-failures"
      metric      = "WriteFailures"
      infra_id    = id
      description = "tagwarden ${id}: tag writes failed (see the status report and the function's logs)."
    } },
    # Another controller keeps changing a key tagwarden writes, so tagwarden stopped
    # writing it (crates/core/src/contest/mod.rs): a fight to settle, not a fault to retry.
    { for id in local.clusters : (local.cluster_set ? "${id}/contested" : "contested") => {
      name        = "${var.name}-${id}-contested"
      metric      = "Contested"
      infra_id    = id
      description = "tagwarden ${id}: a controller the deployment yields to (yield_to) keeps changing a tag tagwarden writes, so tagwarden holds that key back on that resource for a while (an hour, doubling to a day), then corrects it again. Contributor Insights rule ${local.name}-contests lists each resource, key and writer; tagwarden status names them too. Settle which of the two owns the key (the policy, or the other controller's configuration), or lift it (tagwarden status --lift, by a contest operator)."
    } },
    # An organization hub's clusters are not listed here; one alarm each over them all
    # (no InfraID filter), `tagwarden status --organization` naming the cluster and resource. The
    # lag is the slowest correction, not a p99: Metrics Insights aggregates with AVG, COUNT, MAX,
    # MIN and SUM only (CloudWatch User Guide, "Metrics Insights query components and syntax").
    { for k, a in {
      write_failures = { metric = "WriteFailures", aggregate = "SUM", threshold = 0, what = "tag writes failed somewhere in the organization (tagwarden status --organization names the account and cluster; the function's logs the resource)." }
      contested      = { metric = "Contested", aggregate = "SUM", threshold = 0, what = "a controller the deployment yields to keeps changing a tag tagwarden writes, so tagwarden holds that key back on that resource for a while, then corrects it again. Contributor Insights rule ${local.name}-contests lists each resource, key and writer; tagwarden status --organization names the cluster." }
      compliance_lag = { metric = "ComplianceLag", aggregate = "MAX", threshold = var.compliance_lag_p99_threshold_ms, what = "the slowest correction (event time to the corrected write) took over ${var.compliance_lag_p99_threshold_ms} ms; check the queues' age, throttling and the function's errors." }
      } : k => merge(a, {
        name        = "${local.name}-${replace(k, "_", "-")}"
        infra_id    = null
        description = "tagwarden ${local.label}: ${a.what}"
    }) if local.organization },
    {
      policy_rejected = {
        name        = "${local.name}-policy-rejected"
        metric      = "PolicyRejected"
        infra_id    = local.deployment_infra_id
        description = "tagwarden ${local.label}: a new policy version was rejected; the last known good version stays in force."
      }
      # A sweep listing failed (the deployment's: a listing's record names no cluster).
      # The sweep went on; what that listing names is not enforced until it works again.
      listing_failures = {
        name        = "${local.name}-listing-failures"
        metric      = "ListingFailures"
        infra_id    = local.deployment_infra_id
        description = "tagwarden ${local.label}: a sweep listing failed (e.g. a guardrail denying iam:GetAccountAuthorizationDetails); the resources it would have named were not swept. The status report and the function's logs name the call and the fix."
      }
    },
  )

  # The p99 compliance lag per cluster; one cluster's alarm keeps its key through `moved` below.
  lag_alarms = { for id in local.clusters : (local.cluster_set ? id : "cluster") => id }
}

resource "aws_sns_topic" "alarms" {
  count = var.alarm_sns_topic_arn == null && var.create_sns_topic ? 1 : 0

  name              = "${local.name}-alarms"
  kms_master_key_id = var.kms_key_arn
  tags              = local.tags
}

resource "aws_sns_topic_subscription" "alarms" {
  for_each = { for s in var.alarm_subscriptions : "${s.protocol}:${s.endpoint}" => s }

  topic_arn = local.sns_topic_arn
  protocol  = each.value.protocol
  endpoint  = each.value.endpoint
  # HTTPS: SNS wraps the alarm in its JSON envelope; the endpoint confirms the subscription once.
  endpoint_auto_confirms = false

  lifecycle {
    precondition {
      condition     = local.sns_topic_arn != null
      error_message = "alarm_subscriptions needs an alarm topic: set create_sns_topic = true, or alarm_sns_topic_arn."
    }
  }
}

resource "aws_cloudwatch_dashboard" "this" {
  dashboard_name = local.name
  dashboard_body = jsonencode(local.dashboard_body)
}

resource "aws_cloudwatch_metric_alarm" "insights" {
  for_each = local.insights_alarms

  alarm_name          = each.value.name
  alarm_description   = each.value.description
  comparison_operator = "GreaterThanThreshold"
  threshold           = lookup(each.value, "threshold", 0)
  evaluation_periods  = 1
  datapoints_to_alarm = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions

  metric_query {
    id          = "q1"
    expression  = "SELECT ${lookup(each.value, "aggregate", "SUM")}(${each.value.metric}) FROM \"${local.metric_namespace}\"${each.value.infra_id == null ? "" : " WHERE InfraID = '${each.value.infra_id}'"}"
    period      = var.alarm_period_seconds
    return_data = true
  }

  tags = local.tags
}

# How long resources stay out of line, as an auditor asks: the p99 of the event-to-correction lag.
resource "aws_cloudwatch_metric_alarm" "compliance_lag" {
  for_each = local.lag_alarms

  alarm_name          = "${var.name}-${each.value}-compliance-lag-p99"
  alarm_description   = "tagwarden ${each.value}: p99 of ComplianceLag (event time to the corrected write) is above ${var.compliance_lag_p99_threshold_ms} ms; check the queue's age, throttling and the function's errors."
  namespace           = local.metric_namespace
  metric_name         = "ComplianceLag"
  dimensions          = { Cloud = "aws", InfraID = each.value }
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

moved {
  from = aws_cloudwatch_metric_alarm.compliance_lag
  to   = aws_cloudwatch_metric_alarm.compliance_lag["cluster"]
}

resource "aws_cloudwatch_metric_alarm" "lambda_errors" {
  alarm_name          = "${local.name}-lambda-errors"
  alarm_description   = "tagwarden ${local.label}: the function returned errors (failed invocations; queued events are retried, then dead-lettered)."
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
  alarm_description   = "tagwarden ${local.label}: events or invocations in ${module.events_queue.dlq_name} could not be processed; inspect and redrive."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = module.events_queue.dlq_name }
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

# Silence. Both alarms read one time series of the deployment's InfraID (dimensions
# Cloud, InfraID: crates/aws/src/emf.rs, lines) in 1-hour periods, and count missing data as breaching:
# the failure they look for is that nothing arrives at all.
locals {
  # rate(N minute(s)|hour(s)|day(s)) in seconds; null for a cron() schedule.
  sweep_rate = regex("^(?:rate\\(([0-9]+) (minute|minutes|hour|hours|day|days)\\))?", var.sweep_schedule)
  sweep_interval_seconds = local.sweep_rate[0] == null ? null : tonumber(local.sweep_rate[0]) * lookup(
    { minute = 60, minutes = 60, hour = 3600, hours = 3600, day = 86400, days = 86400 }, local.sweep_rate[1]
  )
  sweep_alarm_hours = var.sweep_alarm_after_hours != null ? var.sweep_alarm_after_hours : (
  local.sweep_interval_seconds == null ? null : max(1, ceil(2 * local.sweep_interval_seconds / 3600)))
}

resource "aws_cloudwatch_metric_alarm" "no_events" {
  count = var.no_events_alarm_hours == null ? 0 : 1

  alarm_name          = "${local.name}-no-events"
  alarm_description   = "tagwarden ${local.label}: no event reached the function for ${var.no_events_alarm_hours} h. Check that a CloudTrail trail records management events (aws cloudtrail describe-trails; get-event-selectors), that the rules are enabled, the events queue's age, and the forwarding dead-letter queue in us-east-1 (README, Troubleshooting). Turn off with no_events_alarm_hours = null where the cluster's resources may rightly stay unchanged that long."
  namespace           = local.metric_namespace
  metric_name         = "EventsReceived"
  dimensions          = { Cloud = "aws", InfraID = local.deployment_infra_id }
  statistic           = "Sum"
  period              = 3600
  evaluation_periods  = var.no_events_alarm_hours
  datapoints_to_alarm = var.no_events_alarm_hours
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

# SweepsCompleted: 1 per sweep (scheduled or policy change) that ran to its end, emitted by the
# function as an EMF metric (namespace TagWarden, dimensions Cloud, InfraID = the deployment's).
resource "aws_cloudwatch_metric_alarm" "no_sweep" {
  count = var.sweep_alarm ? 1 : 0

  alarm_name          = "${local.name}-no-sweep"
  alarm_description   = "tagwarden ${local.label}: no sweep completed for ${coalesce(local.sweep_alarm_hours, 0)} h (schedule ${var.sweep_schedule}). Check the function's errors and duration (a sweep that times out never completes), the sweep rule, and the dead-letter queue ${module.events_queue.dlq_name} (README, Troubleshooting)."
  namespace           = local.metric_namespace
  metric_name         = "SweepsCompleted"
  dimensions          = { Cloud = "aws", InfraID = local.deployment_infra_id }
  statistic           = "Sum"
  period              = 3600
  evaluation_periods  = coalesce(local.sweep_alarm_hours, 1)
  datapoints_to_alarm = coalesce(local.sweep_alarm_hours, 1)
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags

  lifecycle {
    precondition {
      condition     = local.sweep_alarm_hours != null
      error_message = "sweep_schedule ${var.sweep_schedule} is not a rate(): set sweep_alarm_after_hours (hours without a completed sweep before the alarm), or sweep_alarm = false."
    }
    precondition {
      condition     = coalesce(local.sweep_alarm_hours, 1) <= 168
      error_message = "The sweep alarm would wait ${coalesce(local.sweep_alarm_hours, 1)} h (twice ${var.sweep_schedule}); CloudWatch evaluates at most 168 one-hour periods. Set sweep_alarm_after_hours <= 168, or sweep_alarm = false."
    }
  }
}

# Who contests which key on which resource: a Contributor Insights rule over the function's log
# lines at the moment a contest starts (the engine logs cluster, resource, key, writer and
# hold_until, as JSON under `fields`), each (resource, key, writer) a contributor; the Contested
# alarms point here. A rule's keys are at most four JSON paths (CloudWatch User Guide,
# "Contributor Insights rule syntax").
resource "aws_cloudwatch_contributor_insight_rule" "contests" {
  rule_name  = "${local.name}-contests"
  rule_state = "ENABLED"
  rule_definition = jsonencode({
    Schema        = { Name = "CloudWatchLogRule", Version = 1 }
    LogGroupNames = [aws_cloudwatch_log_group.lambda.name]
    LogFormat     = "JSON"
    Contribution = {
      Keys    = ["$.fields.resource", "$.fields.key", "$.fields.writer", "$.fields.cluster"]
      Filters = [{ Match = "$.fields.message", StartsWith = ["contest started"] }]
    }
    AggregateOn = "Count"
  })
  tags = var.tags
}
