# Cloud Monitoring: the function's custom metrics declared, alert policies on them and on the
# platform's own metrics, and a dashboard.
#
# The metrics are the ones every tagwarden function emits, named once in the core's metrics table
# (the core's report module: EVENT_COUNTS, TYPE_COUNTS, COMPLIANCE_COUNTS, COMPLIANCE_LAG,
# RECONCILE_LATENCY), with the same names and meanings as CloudWatch's TagWarden namespace on AWS and
# Azure Monitor's on Azure; here as custom.googleapis.com/tagwarden/<name>. CallsPerCorrection is
# CloudWatch's only. Their labels are the other clouds' dimensions in the form custom metric labels
# take (lowercase, '_'): cloud, resource_type, infra_id.
#
# Each is declared (google_monitoring_metric_descriptor) before any point is written, so the alert
# policies and the dashboard name metrics that exist from the first apply, and the kinds are fixed:
# the counts are INT64 gauges, the two latencies DISTRIBUTION gauges in milliseconds (custom metrics
# take no DELTA kind). A point holds what happened since its series' previous point, so the charts
# and alerts sum them (ALIGN_SUM) or take their percentiles. The function (tagwarden-gcp's metrics
# module) writes them against a generic_task (custom metrics take no cloud_run_revision): job the
# Cloud Run service, task one instance, so instances never share a series; points of one series are
# at least 10 seconds apart, as Cloud Monitoring requires, an invocation too soon after the last
# point adding its counts to the next. WouldWrite, ResourcesInLine and ResourcesDrifted are written
# per resource type only: a cluster's compliance is their sum by infra_id.

locals {
  metric_prefix = "custom.googleapis.com/tagwarden/"

  # name => what it measures (the core's report module, the metrics table).
  count_metrics = {
    EventsReceived     = "events that reached the function"
    EventsIgnored      = "events of no listed cluster, or not a write"
    PolicyRejected     = "policy versions rejected (the last good one stays)"
    ListingFailures    = "a sweep's listings that failed (the rest was swept)"
    ListingFallbacks   = "scopes listed a dearer way because the cheaper one was refused"
    SweepsCompleted    = "sweeps that ran to their end"
    WorkDeferred       = "work handed back before the invocation's deadline (retried)"
    NoValidPolicy      = "invocations that wrote nothing: no valid policy (fail closed)"
    SweepsRefused      = "sweeps with nowhere to list, or a part of it refused"
    MembersUnavailable = "member accounts not had: not listed, unreadable, their role refused"
    InputsUnreadable   = "payloads, events or deliveries tagwarden does not read"
    ResourcesEvaluated = "resources read and planned"
    DriftDetected      = "resources out of line when read"
    TagsWritten        = "tags written"
    WriteFailures      = "failed writes (in audit: writes that would fail)"
    TagLimitExceeded   = "resources the write would push past their tag limit"
    Conflicts          = "resources owned by two listed clusters, or changed by another writer"
    Unsupported        = "owned resources of a type no API takes"
    Contested          = "resources with a key held back because it is contested"
    WouldWrite         = "resources with an audited change: what an enforce would write"
    ResourcesInLine    = "owned resources in line after the run"
    ResourcesDrifted   = "owned resources out of line after the run"
  }
  distribution_metrics = {
    ComplianceLag    = "milliseconds from the event's own time to the correcting write (or the decision that none was needed)"
    ReconcileLatency = "milliseconds per reconcile"
  }
  metric_labels = {
    cloud         = "the cloud the function runs on: gcp"
    resource_type = "the resource type (per-type metrics only)"
    infra_id      = "the cluster's infraID; \"all\" for what no single cluster owns (events received and ignored, policies rejected, listings)"
  }

  # The deployment's own series carry infra_id "all" (the core's report module, ALL_CLUSTERS); the
  # rest are per cluster and per resource type.
  deployment_metrics = [
    "EventsReceived", "EventsIgnored", "PolicyRejected", "ListingFailures", "ListingFallbacks", "SweepsCompleted",
    "WorkDeferred", "NoValidPolicy", "SweepsRefused", "MembersUnavailable", "InputsUnreadable",
  ]

  # Alerts on counts: any in the window fires, per cluster (grouped by infra_id).
  count_alerts = {
    WriteFailures   = "Writes failed (in audit: writes that would fail). The function's logs name each resource and the API's answer."
    Contested       = "Another writer keeps changing a key tagwarden corrects: the key is held back (an hour, doubling to a day). The status report names the resource and the writer."
    PolicyRejected  = "A published policy version was rejected; the last good one stays in force. The status report says why."
    ListingFailures = "A sweep could not list part of the scope (Cloud Asset Inventory refused or failed); the rest was swept."
  }

  # Every custom metric, declared once: the counts are INT64 gauges, the latencies DISTRIBUTION
  # gauges in milliseconds.
  metrics = merge(
    { for m, description in local.count_metrics : m => { description = description, value_type = "INT64", unit = "1" } },
    { for m, description in local.distribution_metrics : m => { description = description, value_type = "DISTRIBUTION", unit = "ms" } },
  )

  # Every alert policy, one threshold condition each (above `threshold` in the alert window):
  # reducer and group_by null where the series are not combined or not grouped.
  count_alert_policies = { for m, doc in local.count_alerts : m => {
    title         = m
    condition     = "${m} > 0 in ${local.window}, per cluster"
    filter        = "metric.type=\"${google_monitoring_metric_descriptor.this[m].type}\""
    threshold     = 0
    aligner       = "ALIGN_SUM"
    reducer       = "REDUCE_SUM"
    group_by      = ["metric.label.infra_id"]
    documentation = "${doc} Metric ${local.metric_prefix}${m}: ${local.count_metrics[m]}."
  } }
  platform_alert_policies = {
    compliance_lag = {
      title         = "ComplianceLag p99 above ${var.compliance_lag_threshold_ms} ms"
      condition     = "ComplianceLag p99 > ${var.compliance_lag_threshold_ms} ms, per cluster"
      filter        = "metric.type=\"${google_monitoring_metric_descriptor.this["ComplianceLag"].type}\""
      threshold     = var.compliance_lag_threshold_ms
      aligner       = "ALIGN_PERCENTILE_99"
      reducer       = "REDUCE_MAX"
      group_by      = ["metric.label.infra_id"]
      documentation = "Resources take long to come into line after they change: ${local.distribution_metrics["ComplianceLag"]}."
    }
    # Messages Pub/Sub gave up on after max_delivery_attempts (the function failed them each time).
    dead_letters = {
      title         = "dead-lettered messages"
      condition     = "dead_letter_message_count > 0 on ${google_pubsub_subscription.events.name}"
      filter        = "resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=\"${google_pubsub_subscription.events.name}\" AND metric.type=\"pubsub.googleapis.com/subscription/dead_letter_message_count\""
      threshold     = 0
      aligner       = "ALIGN_SUM"
      reducer       = null
      group_by      = null
      documentation = "Pub/Sub moved events or sweeps the function failed ${var.max_delivery_attempts} times to ${google_pubsub_topic.dead_letters.id}; they wait in subscription ${google_pubsub_subscription.dead_letters.name} for 7 days."
    }
    # The service answering with server errors (each is retried by Pub/Sub, then dead-lettered).
    function_errors = {
      title         = "Cloud Run 5xx responses"
      condition     = "5xx responses of ${google_cloud_run_v2_service.this.name} > 0"
      filter        = "resource.type=\"cloud_run_revision\" AND resource.label.service_name=\"${google_cloud_run_v2_service.this.name}\" AND metric.type=\"run.googleapis.com/request_count\" AND metric.label.response_code_class=\"5xx\""
      threshold     = 0
      aligner       = "ALIGN_SUM"
      reducer       = "REDUCE_SUM"
      group_by      = null
      documentation = "The tagwarden service answered pushes with server errors; Pub/Sub retries them with backoff, then dead-letters them."
    }
  }
  alerts = merge(local.count_alert_policies, local.platform_alert_policies)

  notification_channels = concat([for c in google_monitoring_notification_channel.email : c.name], var.notification_channels)
  window                = "${var.alert_window_seconds}s"
  mode_note = (var.mode == "audit" ?
    "Mode **audit**: tagwarden writes no label and no tag binding; WouldWrite and the compliance charts show what `enforce` would write. Every alert stays armed." :
  "Mode **enforce**: tagwarden writes labels and binds tag values on the clusters' resources (except clusters whose policy says `enforce: false` and keys in `auditKeys`).")
}

resource "google_monitoring_metric_descriptor" "this" {
  for_each = local.metrics

  project      = var.project_id
  type         = "${local.metric_prefix}${each.key}"
  display_name = "tagwarden ${each.key}"
  description  = each.value.description
  metric_kind  = "GAUGE"
  value_type   = each.value.value_type
  unit         = each.value.unit

  dynamic "labels" {
    for_each = local.metric_labels
    content {
      key         = labels.key
      value_type  = "STRING"
      description = labels.value
    }
  }

  depends_on = [google_project_service.this]
}

resource "google_monitoring_notification_channel" "email" {
  for_each = toset(var.alert_emails)

  project      = var.project_id
  display_name = "tagwarden ${local.name}: ${each.value}"
  type         = "email"
  labels = {
    email_address = each.value
  }

  depends_on = [google_project_service.this]
}

resource "google_monitoring_alert_policy" "this" {
  for_each = local.alerts

  project               = var.project_id
  display_name          = "tagwarden ${local.name}: ${each.value.title}"
  combiner              = "OR"
  notification_channels = local.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = each.value.condition
    condition_threshold {
      filter          = each.value.filter
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.threshold
      duration        = "0s"
      aggregations {
        alignment_period     = local.window
        per_series_aligner   = each.value.aligner
        cross_series_reducer = each.value.reducer
        group_by_fields      = each.value.group_by
      }
      trigger {
        count = 1
      }
    }
  }

  documentation {
    content   = each.value.documentation
    mime_type = "text/markdown"
  }
}

locals {
  # One chart per metric: counts summed per window, by resource type (one line per cluster for the
  # deployment-wide ones); the latencies as their 99th percentile. Three to a row below the note.
  metric_charts = [for i, m in concat(keys(local.count_metrics), keys(local.distribution_metrics)) : {
    xPos     = (i % 3) * 16
    yPos     = 8 + floor(i / 3) * 12
    width    = 16
    title    = contains(keys(local.distribution_metrics), m) ? "${m} (ms, p99)" : (contains(local.deployment_metrics, m) ? "${m} by cluster" : "${m} by resource type")
    plotType = "LINE"
    filter   = "metric.type=\"${local.metric_prefix}${m}\""
    aggregation = {
      alignmentPeriod    = "300s"
      perSeriesAligner   = contains(keys(local.distribution_metrics), m) ? "ALIGN_PERCENTILE_99" : "ALIGN_SUM"
      crossSeriesReducer = contains(keys(local.distribution_metrics), m) ? "REDUCE_MAX" : "REDUCE_SUM"
      groupByFields      = [contains(local.deployment_metrics, m) || contains(keys(local.distribution_metrics), m) ? "metric.label.infra_id" : "metric.label.resource_type"]
    }
  }]

  # The platform's own metrics, two to a row below the metric charts.
  platform_row = 8 + ceil(length(local.metric_charts) / 3) * 12
  platform_charts = [
    {
      xPos     = 0
      yPos     = local.platform_row
      width    = 24
      title    = "Cloud Run requests by response class"
      plotType = "STACKED_BAR"
      filter   = "resource.type=\"cloud_run_revision\" AND resource.label.service_name=\"${local.name}\" AND metric.type=\"run.googleapis.com/request_count\""
      aggregation = {
        alignmentPeriod    = "300s"
        perSeriesAligner   = "ALIGN_SUM"
        crossSeriesReducer = "REDUCE_SUM"
        groupByFields      = ["metric.label.response_code_class"]
      }
    },
    {
      xPos     = 24
      yPos     = local.platform_row
      width    = 24
      title    = "Dead-lettered messages (${local.name}-events)"
      plotType = "STACKED_BAR"
      filter   = "resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=\"${local.name}-events\" AND metric.type=\"pubsub.googleapis.com/subscription/dead_letter_message_count\""
      aggregation = {
        alignmentPeriod  = "300s"
        perSeriesAligner = "ALIGN_SUM"
      }
    },
  ]

  # Every chart as a dashboard tile: one time series, 12 high.
  chart_tiles = [for c in concat(local.metric_charts, local.platform_charts) : {
    xPos   = c.xPos
    yPos   = c.yPos
    width  = c.width
    height = 12
    widget = {
      title = c.title
      xyChart = {
        dataSets = [{
          plotType = c.plotType
          timeSeriesQuery = {
            timeSeriesFilter = {
              filter      = c.filter
              aggregation = c.aggregation
            }
          }
        }]
      }
    }
  }]

  dashboard = {
    displayName = "tagwarden ${local.name}"
    mosaicLayout = {
      columns = 48
      tiles = concat([{
        xPos   = 0
        yPos   = 0
        width  = 48
        height = 8
        widget = {
          title = "tagwarden ${local.name}"
          text = {
            format  = "MARKDOWN"
            content = "${local.mode_note}\n\nScope `${local.scope_resource}`, clusters ${join(", ", [for c in local.clusters : "`${c}`"])}. Metrics `${local.metric_prefix}<name>`; compliance = ResourcesInLine / (ResourcesInLine + ResourcesDrifted)."
          }
        }
      }], local.chart_tiles)
    }
  }
}

resource "google_monitoring_dashboard" "this" {
  project        = var.project_id
  dashboard_json = jsonencode(local.dashboard)

  depends_on = [google_monitoring_metric_descriptor.this]
}
