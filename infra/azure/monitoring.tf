# Log Analytics + workspace-based Application Insights, a workbook over the TagWarden custom metrics
# (docs/src/lookup/metrics.md) and the dead-letter counts, metric alerts and an optional action group.
#
# The function publishes its metrics to Azure Monitor's custom-metrics store against its own app
# (TAGWARDEN_METRICS_RESOURCE_ID): namespace TagWarden, dimensions Cloud, ResourceType, InfraID.

locals {
  metric_namespace = "TagWarden"

  tagwarden_metrics = [
    "EventsReceived", "EventsIgnored", "ResourcesEvaluated", "DriftDetected", "TagsWritten",
    "WriteFailures", "TagLimitExceeded", "PolicyRejected", "Conflicts", "ReconcileLatency",
    "ListingFailures",
  ]
  metric_dimensions = ["Cloud", "ResourceType", "InfraID"]

  # The InfraID value of the deployment's own metrics (events received and ignored, policies
  # rejected): the cluster's for one cluster, "all" for a cluster set (crates/core/src/report/metrics.rs, by_cluster),
  # whose resource metrics carry each cluster's own InfraID.
  deployment_infra_id = local.cluster_set ? "all" : var.infra_id
  # These exist only under the deployment's InfraID, with dimensions Cloud and
  # InfraID and no ResourceType (crates/azure/src/metrics.rs; crates/core/src/report/metrics.rs, by_cluster): their tiles show
  # that one series, neither per-cluster nor per-ResourceType lines that stay empty.
  # ListingFailures too (sweep listings that failed; their records name no cluster).
  deployment_metrics = ["EventsReceived", "EventsIgnored", "PolicyRejected", "ListingFailures"]
  # What the workbook shows: one cluster by ResourceType; a set by cluster (and "all").
  workbook_infra_ids = distinct(concat(local.clusters, [local.deployment_infra_id]))
  workbook_split     = local.cluster_set ? "InfraID" : "ResourceType"

  # Workbook metric ids are "<namespace, lowercase>--<metric>"; aggregation 1 = Sum, 4 = Average.
  workbook_metric_items = [for m in local.tagwarden_metrics : {
    type = 10
    name = "metric-${lower(m)}"
    content = {
      chartId      = "workbook-tagwarden-${lower(m)}"
      version      = "MetricsItem/2.0"
      size         = 0
      chartType    = 2
      resourceType = "microsoft.web/sites"
      metricScope  = 0
      resourceIds  = [lower(azurerm_function_app_flex_consumption.this.id)]
      timeContext  = { durationMs = 86400000 }
      metrics = [{
        namespace   = lower(local.metric_namespace)
        metric      = "${lower(local.metric_namespace)}--${m}"
        aggregation = m == "ReconcileLatency" ? 4 : 1
      }]
      filters = [{ key = "InfraID", operator = 0, values = contains(local.deployment_metrics, m) ? [local.deployment_infra_id] : local.workbook_infra_ids }]
      title = (m == "ReconcileLatency" ? "ReconcileLatency (ms, average) by ${local.workbook_split}" :
      contains(local.deployment_metrics, m) ? "${m} (deployment-wide${local.cluster_set ? ", InfraID all" : ""})" : "${m} by ${local.workbook_split}")
      gridSettings = {
        rowLimit = 10000
      }
      splitBy = contains(local.deployment_metrics, m) ? [] : [{ dimension = local.workbook_split, sort = 2, limit = local.cluster_set ? 50 : 10 }]
    }
    customWidth = "33"
  }]

  # Compliance from day one, in audit as in enforce. The function logs one JSON
  # record per resource it evaluated (crates/core/src/report/record.rs, Record; the handler's Logs, which
  # the Functions host writes to Application Insights' traces) and publishes WouldWrite,
  # ResourcesInLine and ResourcesDrifted (crates/azure/src/metrics.rs). Azure Monitor metric
  # charts do no arithmetic, so the compliance % is KQL over the records, counted as the metrics
  # count them (Metrics::observe): in line = unchanged, or written with nothing held back;
  # drifted = a change held back (audited, over the tag limit, contested) or a failed write that
  # carried one. Per resource its latest record in the period: the current state, not the sum of
  # every event and sweep that saw it.
  compliance_records_kql = <<-KQL
    let records = traces
    | where cloud_RoleName =~ '${local.function_app_name}'
    | where message has '{"record":'
    | extend r = parse_json(substring(message, indexof(message, '{"record":')))
    | where isnotempty(tostring(r.resource))
    | extend Cluster = coalesce(tostring(r.infraID), '${local.deployment_infra_id}'), Resource = tostring(r.resource), Status = tostring(r.status),
        Audited = coalesce(array_length(r.audited), 0), Contested = coalesce(array_length(r.contested), 0), Changes = coalesce(array_length(r.changes), 0)
    | extend InLine = Status == 'unchanged' or (Status == 'applied' and Audited == 0 and Contested == 0)
    | extend Drifted = not(InLine) and (Status in ('applied', 'would-apply', 'limit-exceeded', 'contested') or (Status == 'failed' and (Changes > 0 or Audited > 0)));
  KQL

  compliance_items = [
    {
      type = 3
      name = "compliance-per-cluster"
      content = {
        version = "KqlItem/1.0"
        query = join("\n", [trimspace(local.compliance_records_kql),
          "records",
          "| summarize arg_max(timestamp, InLine, Drifted, Audited) by Cluster, Resource",
          "| summarize ['In line'] = countif(InLine), Drifted = countif(Drifted), ['Would write'] = countif(Audited > 0) by Cluster",
          "| extend ['Compliance %'] = iff(['In line'] + Drifted > 0, round(100.0 * ['In line'] / (['In line'] + Drifted), 1), real(null))",
          "| project Cluster, ['Compliance %'], ['In line'], Drifted, ['Would write']",
          "| order by ['Compliance %'] asc",
        ])
        size          = 0
        title         = "Compliance % per cluster: owned resources in line / (in line + drifted), each resource's latest record"
        queryType     = 0
        resourceType  = "microsoft.insights/components"
        visualization = "table"
        timeContext   = { durationMs = 86400000 }
        crossComponentResources = [
          lower(azurerm_application_insights.this.id),
        ]
      }
      customWidth = "50"
    },
    {
      type = 3
      name = "compliance-over-time"
      content = {
        version = "KqlItem/1.0"
        query = join("\n", [trimspace(local.compliance_records_kql),
          "records",
          "| summarize arg_max(timestamp, InLine, Drifted) by Hour = bin(timestamp, 1h), Cluster, Resource",
          "| summarize InLine = countif(InLine), Drifted = countif(Drifted) by Hour, Cluster",
          "| where InLine + Drifted > 0",
          "| project timestamp = Hour, Cluster, ['Compliance %'] = round(100.0 * InLine / (InLine + Drifted), 1)",
          "| order by timestamp asc",
        ])
        size          = 0
        title         = "Compliance % per cluster, hourly"
        queryType     = 0
        resourceType  = "microsoft.insights/components"
        visualization = "timechart"
        timeContext   = { durationMs = 604800000 }
        crossComponentResources = [
          lower(azurerm_application_insights.this.id),
        ]
      }
      customWidth = "50"
    },
    {
      type = 3
      name = "would-write-over-time"
      content = {
        version = "KqlItem/1.0"
        query = join("\n", [trimspace(local.compliance_records_kql),
          "records",
          "| where Audited > 0",
          "| summarize ['Would-be writes'] = dcount(Resource) by bin(timestamp, 1h), Cluster",
          "| order by timestamp asc",
        ])
        size          = 0
        title         = "Would-be writes per cluster, hourly: resources with a change held back (${var.mode == "audit" ? "audit: every write enforce would make" : "audited clusters and keys"})"
        queryType     = 0
        resourceType  = "microsoft.insights/components"
        visualization = "timechart"
        timeContext   = { durationMs = 604800000 }
        crossComponentResources = [
          lower(azurerm_application_insights.this.id),
        ]
      }
      customWidth = "50"
    },
    {
      # The function's own counts (custom metrics), by ResourceType: a resource type's series is
      # exact (the cluster-wide copy of these three carries no ResourceType).
      type = 10
      name = "metric-inline-drifted"
      content = {
        chartId      = "workbook-tagwarden-inline-drifted"
        version      = "MetricsItem/2.0"
        size         = 0
        chartType    = 2
        resourceType = "microsoft.web/sites"
        metricScope  = 0
        resourceIds  = [lower(azurerm_function_app_flex_consumption.this.id)]
        timeContext  = { durationMs = 86400000 }
        metrics = [
          { namespace = lower(local.metric_namespace), metric = "${lower(local.metric_namespace)}--ResourcesInLine", aggregation = 1 },
          { namespace = lower(local.metric_namespace), metric = "${lower(local.metric_namespace)}--ResourcesDrifted", aggregation = 1 },
          { namespace = lower(local.metric_namespace), metric = "${lower(local.metric_namespace)}--WouldWrite", aggregation = 1 },
        ]
        filters = [{ key = "InfraID", operator = 0, values = local.clusters }]
        title   = "ResourcesInLine / ResourcesDrifted / WouldWrite by ResourceType (custom metrics)"
        splitBy = [{ dimension = "ResourceType", sort = 2, limit = 10 }]
      }
      customWidth = "50"
    },
  ]

  workbook = {
    version = "Notebook/1.0"
    items = concat(
      [{
        type = 1
        name = "header"
        content = {
          json = join("\n", [
            local.cluster_set ? "## tagwarden — cluster set `${var.name}`: ${join(", ", [for id in local.clusters : "`${id}`"])}" : "## tagwarden — cluster `${var.infra_id}`",
            "Function App `${local.function_app_name}` · policy `${local.policy_url}` · status report `${local.status_url}`.",
            "Custom metrics: namespace `${local.metric_namespace}` on the Function App, dimensions ${join(", ", local.metric_dimensions)}. Dead-lettered events land in container `${local.dead_letter_container}` of `${local.policy_sa_name}`.",
            "",
            var.mode == "audit" ? "Mode **audit**: tagwarden writes no tag; the compliance and would-be-write panels show what `enforce` would write. Every alert stays armed: function errors, dead letters, a rejected policy and a failed listing fire as in enforce (a write failure needs a write)." : "Mode **enforce**: would-be writes are only what stays audited (a cluster whose policy says `enforce: false`, keys in a policy's `auditKeys`).",
          ])
        }
      }],
      local.compliance_items,
      local.workbook_metric_items,
      [
        {
          # Event-level metric (dimensions Cloud, InfraID). Custom metrics keep min/max/sum/count
          # per minute, not percentiles: the tile shows the maximum and the average.
          type = 10
          name = "metric-compliancelag"
          content = {
            chartId      = "workbook-tagwarden-compliancelag"
            version      = "MetricsItem/2.0"
            size         = 0
            chartType    = 2
            resourceType = "microsoft.web/sites"
            metricScope  = 0
            resourceIds  = [lower(azurerm_function_app_flex_consumption.this.id)]
            timeContext  = { durationMs = 86400000 }
            metrics = [
              { namespace = lower(local.metric_namespace), metric = "${lower(local.metric_namespace)}--ComplianceLag", aggregation = 3 },
              { namespace = lower(local.metric_namespace), metric = "${lower(local.metric_namespace)}--ComplianceLag", aggregation = 4 },
            ]
            filters = [{ key = "InfraID", operator = 0, values = local.clusters }]
            title   = "ComplianceLag (ms): event time to correction, max / average${local.cluster_set ? " by InfraID" : ""}"
            splitBy = local.cluster_set ? [{ dimension = "InfraID", sort = 2, limit = 50 }] : []
          }
          customWidth = "33"
        },
      ],
      [
        {
          type = 10
          name = "dead-letters"
          content = {
            chartId      = "workbook-tagwarden-deadletters"
            version      = "MetricsItem/2.0"
            size         = 0
            chartType    = 2
            resourceType = "microsoft.eventgrid/systemtopics"
            metricScope  = 0
            resourceIds = concat(
              [for t in values(local.arm_topics) : lower(t.id)],
              [for t in values(local.rn_topics) : lower(t.id)],
              [lower(azurerm_eventgrid_system_topic.policy.id)],
            )
            timeContext = { durationMs = 86400000 }
            metrics = [
              { namespace = "microsoft.eventgrid/systemtopics", metric = "microsoft.eventgrid/systemtopics--DeadLetteredCount", aggregation = 1 },
              { namespace = "microsoft.eventgrid/systemtopics", metric = "microsoft.eventgrid/systemtopics--DeliveryAttemptFailCount", aggregation = 1 },
              { namespace = "microsoft.eventgrid/systemtopics", metric = "microsoft.eventgrid/systemtopics--MatchedEventCount", aggregation = 1 },
            ]
            title = "Event Grid: dead-lettered / failed deliveries / matched events"
          }
          customWidth = "50"
        },
        {
          type = 3
          name = "function-failures"
          content = {
            version       = "KqlItem/1.0"
            query         = "requests\n| where cloud_RoleName =~ '${local.function_app_name}'\n| summarize Invocations = count(), Failures = countif(success == false) by bin(timestamp, 15m), operation_Name\n| order by timestamp asc"
            size          = 0
            title         = "Function invocations and failures (Application Insights)"
            queryType     = 0
            resourceType  = "microsoft.insights/components"
            visualization = "timechart"
            crossComponentResources = [
              lower(azurerm_application_insights.this.id),
            ]
          }
          customWidth = "50"
        },
      ],
    )
    fallbackResourceIds = [lower(azurerm_application_insights.this.id)]
    "$schema"           = "https://github.com/Microsoft/Application-Insights-Workbooks/blob/master/schema/workbook.json"
  }

  alert_action_group_ids = length(azurerm_monitor_action_group.this) > 0 ? [azurerm_monitor_action_group.this[0].id] : []

  # The metric alerts, one rule each (azurerm_monitor_metric_alert.this), by the suffix of their
  # name. An entry names its metric, the InfraIDs it watches, severity and description; unless it
  # says otherwise it watches a TagWarden custom metric on the Function App, Total > 0.
  #
  # Custom-metric alerts skip metric validation: the metric does not exist until the function first
  # publishes it. One rule per purpose, whatever the number of clusters: a rule whose dimension
  # lists several values monitors each value's time series on its own and fires per InfraID
  # ("Monitor multiple time series", learn.microsoft.com, "Metric alerts"), so a cluster set's
  # write failures and lag alert per cluster, and a rejected policy is the deployment's ("all").
  metric_alerts = {
    write-failures = {
      metric      = "WriteFailures"
      infra_ids   = local.clusters
      severity    = 2
      description = "tagwarden ${local.label}: tag writes failed (see the status report ${local.status_url} and the function's logs)."
    }
    # Another controller keeps changing a key tagwarden writes, so tagwarden stopped
    # writing it (crates/core/src/contest/mod.rs).
    contested = {
      metric      = "Contested"
      infra_ids   = local.clusters
      severity    = 2
      description = "tagwarden ${local.label}: another writer keeps changing a tag tagwarden writes, so tagwarden stopped writing it on that resource (see the status report ${local.status_url}: the resource, the key and the writer; then tagwarden status --lift)."
    }
    policy-rejected = {
      metric      = "PolicyRejected"
      infra_ids   = [local.deployment_infra_id]
      severity    = 1
      description = "tagwarden ${local.label}: a new policy version was rejected; the last known good version stays in force."
    }
    # A sweep listing failed (e.g. a scope the identity may not read); the sweep went on
    # and the resources that listing would have named were not swept.
    listing-failures = {
      metric      = "ListingFailures"
      infra_ids   = [local.deployment_infra_id]
      severity    = 2
      description = "tagwarden ${local.label}: a sweep listing failed; the resources it would have named were not swept (see the status report ${local.status_url} and the function's logs for the call and the fix)."
    }
    # Azure Monitor custom metrics are pre-aggregated to min/max/sum/count per minute and have no
    # percentiles (learn.microsoft.com, "Custom metrics in Azure Monitor"), so the AWS module's p99
    # alarm becomes an alert on the Maximum: stricter, it fires on one slow correction.
    compliance-lag = {
      metric      = "ComplianceLag"
      aggregation = "Maximum"
      threshold   = var.compliance_lag_threshold_ms
      infra_ids   = local.clusters
      severity    = 2
      description = "tagwarden ${local.label}: a resource stayed out of line longer than ${var.compliance_lag_threshold_ms} ms (ComplianceLag maximum): check Event Grid delivery, throttling and the function's errors."
    }
    # Function errors: failed invocations as Application Insights records them (requests/failed);
    # a platform metric, no InfraID dimension.
    function-errors = {
      namespace   = "microsoft.insights/components"
      scope       = azurerm_application_insights.this.id
      metric      = "requests/failed"
      aggregation = "Count"
      infra_ids   = null
      severity    = 2
      description = "tagwarden ${local.label}: function invocations failed (Event Grid retries them, then dead-letters)."
    }
  }

  dead_letter_topics = merge(
    { for s, t in local.arm_topics : "arm-${local.arm_scope_key[s]}" => t.id },
    { for s, t in local.rn_topics : local.rn_topic_key[s] => t.id },
    { policy = azurerm_eventgrid_system_topic.policy.id },
  )
}

resource "azurerm_log_analytics_workspace" "this" {
  name                = "${local.name}-logs"
  resource_group_name = local.resource_group_name
  location            = var.location
  sku                 = "PerGB2018"
  retention_in_days   = var.log_retention_days
  tags                = local.tags
}

resource "azurerm_application_insights" "this" {
  name                         = "${local.name}-ai"
  resource_group_name          = local.resource_group_name
  location                     = var.location
  application_type             = "other"
  workspace_id                 = azurerm_log_analytics_workspace.this.id
  local_authentication_enabled = var.application_insights_local_auth_enabled
  tags                         = local.tags
}

resource "azurerm_application_insights_workbook" "this" {
  name                = uuidv5("url", "https://tagwarden/${local.subscription_id}/${local.name}/workbook")
  resource_group_name = local.resource_group_name
  location            = var.location
  display_name        = "tagwarden ${local.label}"
  source_id           = lower(azurerm_application_insights.this.id)
  category            = "workbook"
  data_json           = jsonencode(local.workbook)
  tags                = local.tags
}

resource "azurerm_monitor_action_group" "this" {
  count = length(var.alert_emails) > 0 || var.alert_webhook_url != null ? 1 : 0

  name                = "${local.name}-alerts"
  resource_group_name = local.resource_group_name
  short_name          = "tagwarden"

  dynamic "email_receiver" {
    for_each = var.alert_emails
    content {
      name                    = "email-${email_receiver.key}"
      email_address           = email_receiver.value
      use_common_alert_schema = true
    }
  }

  dynamic "webhook_receiver" {
    for_each = var.alert_webhook_url == null ? [] : [var.alert_webhook_url]
    content {
      name                    = "webhook"
      service_uri             = webhook_receiver.value
      use_common_alert_schema = true
    }
  }

  tags = local.tags
}

resource "azurerm_monitor_metric_alert" "this" {
  for_each = local.metric_alerts

  name                = "${local.name}-${each.key}"
  resource_group_name = local.resource_group_name
  scopes              = [try(each.value.scope, azurerm_function_app_flex_consumption.this.id)]
  description         = each.value.description
  severity            = each.value.severity
  frequency           = "PT5M"
  window_size         = var.alert_window
  auto_mitigate       = true

  criteria {
    metric_namespace       = try(each.value.namespace, local.metric_namespace)
    metric_name            = each.value.metric
    aggregation            = try(each.value.aggregation, "Total")
    operator               = "GreaterThan"
    threshold              = try(each.value.threshold, 0)
    skip_metric_validation = try(each.value.namespace, local.metric_namespace) == local.metric_namespace

    dynamic "dimension" {
      for_each = each.value.infra_ids == null ? [] : [each.value.infra_ids]
      content {
        name     = "InfraID"
        operator = "Include"
        values   = dimension.value
      }
    }
  }

  dynamic "action" {
    for_each = local.alert_action_group_ids
    content {
      action_group_id = action.value
    }
  }

  tags = local.tags
}

# The alerts were three resources; their instances keep their rules (same names).
moved {
  from = azurerm_monitor_metric_alert.custom["write-failures"]
  to   = azurerm_monitor_metric_alert.this["write-failures"]
}

moved {
  from = azurerm_monitor_metric_alert.custom["contested"]
  to   = azurerm_monitor_metric_alert.this["contested"]
}

moved {
  from = azurerm_monitor_metric_alert.custom["policy-rejected"]
  to   = azurerm_monitor_metric_alert.this["policy-rejected"]
}

moved {
  from = azurerm_monitor_metric_alert.custom["listing-failures"]
  to   = azurerm_monitor_metric_alert.this["listing-failures"]
}

moved {
  from = azurerm_monitor_metric_alert.compliance_lag
  to   = azurerm_monitor_metric_alert.this["compliance-lag"]
}

moved {
  from = azurerm_monitor_metric_alert.function_errors
  to   = azurerm_monitor_metric_alert.this["function-errors"]
}

# Dead-lettered events, one alert per system topic (a metric alert's scopes must share a region;
# the ARM topic is `global`, the storage topic regional). A topic in another
# subscription is watched from here too: the rule and its action group stay in the deployment's
# subscription ("action groups selected must be in the alert rule's subscription", Azure Monitor's
# portal note quoted in MicrosoftDocs/azure-docs#7548), its one scope is the topic's id. Not run
# here: a single-resource rule on a resource of another subscription of the tenant (the caller
# needs read on that topic, which creating it implies).
resource "azurerm_monitor_metric_alert" "dead_letters" {
  for_each = local.dead_letter_topics

  name                = "${local.name}-dead-letters-${each.key}"
  resource_group_name = local.resource_group_name
  scopes              = [each.value]
  description         = "tagwarden ${local.label}: ${each.key} events were dead-lettered into ${local.dead_letter_container}; inspect, fix, re-deliver (or rely on the next sweep)."
  severity            = 2
  frequency           = "PT5M"
  window_size         = var.alert_window
  auto_mitigate       = true

  criteria {
    metric_namespace = "Microsoft.EventGrid/systemTopics"
    metric_name      = "DeadLetteredCount"
    aggregation      = "Total"
    operator         = "GreaterThan"
    threshold        = 0
  }

  dynamic "action" {
    for_each = local.alert_action_group_ids
    content {
      action_group_id = action.value
    }
  }

  tags = local.tags
}
