# Plan-time checks of infra/aws with a mocked provider (no AWS, no moto): defaults, validations and
# preconditions that must refuse at plan what AWS would refuse at apply or do wrong at run time.
# scripts/test-terraform copies this file into a scratch copy of infra/aws/tests/ and
# runs `terraform test -var lambda_zip=<placeholder zip>` there. Rendered IAM JSON cannot be checked
# here (aws_iam_policy_document is mocked): tests/terraform/moto/check_aws_basic.py does that
# against the moto apply.

mock_provider "aws" {
  mock_data "aws_caller_identity" {
    defaults = { account_id = "123456789012" }
  }
  mock_data "aws_partition" {
    defaults = { partition = "aws" }
  }
  mock_data "aws_region" {
    defaults = { name = "eu-west-1" }
  }
  # The role and bucket policies are validated as JSON by the provider even when mocked.
  mock_data "aws_iam_policy_document" {
    defaults = { json = "{\"Version\":\"2012-10-17\",\"Statement\":[]}" }
  }
}

variables {
  infra_id = "mycluster-7xk2p"
}

run "defaults" {
  command = plan

  # Bucket tag writes default to the cluster's buckets, not "*".
  assert {
    condition     = local.s3_bucket_arns == ["arn:aws:s3:::mycluster-7xk2p-*"]
    error_message = "s3_bucket_name_patterns must default to [\"<infra_id>-*\"], got ${jsonencode(local.s3_bucket_arns)}"
  }

  # ELBv2 listeners and listener rules are in the AddTags grant. The loadbalancer/*
  # ARN also covers Classic load balancers (loadbalancer/<name>).
  assert {
    condition = toset(local.grant.elasticloadbalancing.resources) == toset([
      for t in ["loadbalancer", "targetgroup", "listener", "listener-rule"] :
      "arn:aws:elasticloadbalancing:eu-west-1:123456789012:${t}/*"
    ])
    error_message = "ELB AddTags resources: ${jsonencode(local.grant.elasticloadbalancing.resources)}"
  }

  # Route 53 tag reads and writes on hosted zones and health checks (no tag conditions
  # exist there); the generic path needs tag:TagResources plus EFS's own action.
  assert {
    condition     = local.grant.route53.resources == ["arn:aws:route53:::hostedzone/*", "arn:aws:route53:::healthcheck/*"]
    error_message = "Route 53 resources: ${jsonencode(local.grant.route53.resources)}"
  }
  assert {
    condition     = local.code_actions.tag.tag_write == ["tag:TagResources"] && local.code_actions.route53.tag_write == ["route53:ChangeTagsForResource"]
    error_message = "code_actions must grant tag:TagResources and route53:ChangeTagsForResource"
  }
  assert {
    condition     = local.generic_tag_action_list == tolist(["elasticfilesystem:TagResource"])
    error_message = "generic tag actions by default: ${jsonencode(local.generic_tag_action_list)}"
  }
  assert {
    condition = toset(local.grant.elasticfilesystem.resources) == toset([
      "arn:aws:elasticfilesystem:eu-west-1:123456789012:file-system/*",
      "arn:aws:elasticfilesystem:eu-west-1:123456789012:access-point/*",
    ])
    error_message = "EFS TagResource resources: ${jsonencode(local.grant.elasticfilesystem.resources)}"
  }
  assert {
    condition     = !contains([for st in data.aws_iam_policy_document.owned_tag_writes["mycluster-7xk2p"].statement : st.sid], "WriteOwnedTagsExtraServices")
    error_message = "no extra-services statement without extra_tag_actions"
  }

  # The tag-key guard fails closed (Null aws:TagKeys = false next to the ForAllValues tests).
  assert {
    condition     = local.tag_keys_guard[0] == { test = "Null", values = ["false"] }
    error_message = "the aws:TagKeys guard must start with Null = false"
  }

  # Only owned resources' tag changes, filter built from the list of infraIDs,
  # of every service (no detail.service list).
  assert {
    condition = jsondecode(local.rendered_event_patterns["tag_change"]).detail == {
      tags = { "kubernetes.io/cluster/mycluster-7xk2p" = ["owned"] }
    }
    error_message = "tag_change pattern: ${local.rendered_event_patterns["tag_change"]}"
  }

  # Route 53 and EFS rules with their own source and eventSource; ELBv2 listeners/rules.
  assert {
    condition = alltrue([
      for svc in ["route53", "elasticfilesystem", "elasticloadbalancing"] :
      local.cloudtrail_patterns[svc].source == ["aws.${svc}"] &&
      local.cloudtrail_patterns[svc]["detail-type"] == ["AWS API Call via CloudTrail"] &&
      local.cloudtrail_patterns[svc].detail.eventSource == ["${svc}.amazonaws.com"] &&
      local.cloudtrail_patterns[svc].detail.eventName == local.cloudtrail_event_names[svc]
    ])
    error_message = "route53/elasticfilesystem/elasticloadbalancing patterns: source, detail-type, eventSource or eventName wrong"
  }
  assert {
    condition     = local.cloudtrail_event_names.route53 == ["ChangeTagsForResource", "CreateHealthCheck", "CreateHostedZone"]
    error_message = "route53 event names: ${jsonencode(local.cloudtrail_event_names.route53)}"
  }
  assert {
    condition     = toset(keys(aws_cloudwatch_event_rule.resource_events)) == toset(concat(keys(local.generated.cloudtrail_event_names), ["tag_change"]))
    error_message = "resource-event rules: ${jsonencode(keys(aws_cloudwatch_event_rule.resource_events))}"
  }
  assert {
    condition     = aws_cloudwatch_event_rule.resource_events["route53"].name == "tagwarden-mycluster-7xk2p-route53" && aws_cloudwatch_event_rule.resource_events["elasticfilesystem"].name == "tagwarden-mycluster-7xk2p-efs"
    error_message = "rule names for route53 and elasticfilesystem"
  }
  assert {
    condition     = keys(local.global_event_patterns) == ["iam", "route53"]
    error_message = "global_event_patterns: ${jsonencode(keys(local.global_event_patterns))}"
  }
  assert {
    condition     = jsonencode(local.owned_tag_clauses) == jsonencode([{ tags = { "kubernetes.io/cluster/mycluster-7xk2p" = ["owned"] } }])
    error_message = "the Tag Change filter must be built from the cluster's ownership key: ${jsonencode(local.owned_tag_clauses)}"
  }

  # ListBucket (404 for a missing policy object) is part of the code's S3 policy reads.
  assert {
    condition     = contains(local.code_actions.s3.policy_read, "s3:ListBucket")
    error_message = "s3:ListBucket missing from code_actions.s3.policy_read"
  }
}

# A bare wildcard would let the role replace the tags of every bucket in the account.
run "bucket_pattern_star_refused" {
  command = plan
  variables {
    s3_bucket_name_patterns = ["*"]
  }
  expect_failures = [var.s3_bucket_name_patterns]
}

run "bucket_pattern_short_prefix_refused" {
  command = plan
  variables {
    s3_bucket_name_patterns = ["a*"]
  }
  expect_failures = [var.s3_bucket_name_patterns]
}

run "bucket_pattern_explicit_ok" {
  command = plan
  variables {
    s3_bucket_name_patterns = ["mycluster-7xk2p-image-registry-*", "shared-logs-bucket"]
  }
  assert {
    condition     = length(local.s3_bucket_arns) == 2
    error_message = "explicit patterns must be used as given"
  }
}

# The queue mapping's defaults (batch 100, window 2 s, at most 2 invocations), the
# partial batch failure reporting kept, the function's write pace in its environment, the queue's
# visibility timeout (6x the function timeout + the window) and the bound the outputs report.
run "batching_defaults" {
  command = plan

  assert {
    condition = (aws_lambda_event_source_mapping.events.batch_size == 100 &&
      aws_lambda_event_source_mapping.events.maximum_batching_window_in_seconds == 2 &&
    aws_lambda_event_source_mapping.events.scaling_config[0].maximum_concurrency == 2)
    error_message = "queue mapping: batch ${aws_lambda_event_source_mapping.events.batch_size}, window ${aws_lambda_event_source_mapping.events.maximum_batching_window_in_seconds}, scaling ${jsonencode(aws_lambda_event_source_mapping.events.scaling_config)}"
  }
  assert {
    condition     = aws_lambda_event_source_mapping.events.function_response_types == toset(["ReportBatchItemFailures"])
    error_message = "the queue mapping must report partial batch failures"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_EC2_WRITES_PER_SECOND"] == "2"
    error_message = "TAGWARDEN_EC2_WRITES_PER_SECOND: ${jsonencode(aws_lambda_function.this.environment[0].variables)}"
  }
  assert {
    condition     = module.events_queue.visibility_timeout_seconds == 6 * 300 + 2
    error_message = "visibility timeout ${module.events_queue.visibility_timeout_seconds}, want 6 x timeout + window = 1802"
  }
  assert {
    condition     = output.ec2_writes_per_second_bound.per_invocation == 2 && output.ec2_writes_per_second_bound.event_path == 4 && output.ec2_writes_per_second_bound.all_invocations == 6
    error_message = "ec2_writes_per_second_bound: ${jsonencode(output.ec2_writes_per_second_bound)}"
  }
  # Reserved concurrency by default (sqs_maximum_concurrency + 1 = 3), so the
  # documented bound (2 x 3 = 6 CreateTags a second) holds under a storm of policy writes.
  assert {
    condition     = aws_lambda_function.this.reserved_concurrent_executions == 3
    error_message = "reserved concurrency by default: ${aws_lambda_function.this.reserved_concurrent_executions}, want 3"
  }
  # The function enforces the infraIDs its deployment lists.
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_CLUSTERS"] == "mycluster-7xk2p"
    error_message = "TAGWARDEN_CLUSTERS: ${jsonencode(aws_lambda_function.this.environment[0].variables)}"
  }
  # No Route 53 tag write unless zones or health checks are listed.
  assert {
    condition     = length(local.route53_writable_arns) == 0
    error_message = "Route 53 writes by default: ${jsonencode(local.route53_writable_arns)}"
  }
  # Every rule pattern names this account.
  assert {
    condition     = alltrue([for k, p in local.event_patterns : p.account == ["123456789012"]]) && length(local.event_patterns) == length(local.generated.cloudtrail_event_names) + 1
    error_message = "every event pattern must match account = [this account]"
  }
  # The reserved namespaces in both cases of their first three letters, `?` for
  # the other letters (exact on case), as a key and as a subdomain: 3 domains x 8 x 2.
  assert {
    condition = (length(local.reserved_key_patterns) == 48 &&
      contains(local.reserved_key_patterns, "kub???????.??/*") && contains(local.reserved_key_patterns, "*.KuB???????.??/*") &&
    contains(local.reserved_key_patterns, "OPe??????.??/*") && contains(local.reserved_key_patterns, "*.K8s.I?/*"))
    error_message = "reserved_key_patterns: ${jsonencode(local.reserved_key_patterns)}"
  }
  # A single document's notification is its exact key (nothing else triggers).
  assert {
    condition     = join(",", keys(local.policy_notification_filters)) == "tagwarden-policy-change" && local.policy_notification_filters["tagwarden-policy-change"].prefix == "tagwarden/policy.yaml"
    error_message = "notification filters: ${jsonencode(local.policy_notification_filters)}"
  }
  # CallsPerCorrection beside ComplianceLag (widgets 15 and 16, after the
  # header, the four compliance widgets and ten searches), then ListingFailures; the
  # listing-failures alarm.
  assert {
    condition = (
      startswith(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[15].properties.title, "ComplianceLag") &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[16].properties.metrics == [
        ["TagWarden", "CallsPerCorrection", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { label = "average", stat = "Average" }],
        ["TagWarden", "CallsPerCorrection", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { label = "maximum", stat = "Maximum" }],
      ] &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[17].properties.metrics[0][0].expression == "SEARCH('Namespace=\"TagWarden\" MetricName=\"ListingFailures\" InfraID=\"mycluster-7xk2p\"', 'Sum', 300)"
    )
    error_message = "dashboard: ComplianceLag, CallsPerCorrection, then ListingFailures"
  }
  assert {
    condition     = one(aws_cloudwatch_metric_alarm.insights["listing_failures"].metric_query).expression == "SELECT SUM(ListingFailures) FROM \"TagWarden\" WHERE InfraID = 'mycluster-7xk2p'" && aws_cloudwatch_metric_alarm.insights["listing_failures"].alarm_name == "tagwarden-mycluster-7xk2p-listing-failures" && aws_cloudwatch_metric_alarm.insights["listing_failures"].threshold == 0
    error_message = "listing-failures alarm: ${jsonencode(aws_cloudwatch_metric_alarm.insights["listing_failures"].metric_query)}"
  }
}

# The dashboard is useful from day one in audit mode (the default): compliance
# % per cluster (metric math over the cluster's ResourcesInLine and ResourcesDrifted, dimensions
# Cloud, InfraID), the would-be writes, in line vs drifted; and every failure alarm exists in audit
# exactly as in enforce (nothing in monitoring.tf turns an alarm on or off by mode).
run "audit_mode_dashboard" {
  command = plan
  variables {
    mode = "audit"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_MODE"] == "audit"
    error_message = "mode audit reaches the function"
  }
  assert {
    condition     = strcontains(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[0].properties.markdown, "Mode **audit**: tagwarden writes no tag")
    error_message = "the header says the deployment audits: ${jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[0].properties.markdown}"
  }
  assert {
    condition = (
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[1].properties.view == "singleValue" &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[1].properties.setPeriodToTimeRange &&
      startswith(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[1].properties.title, "Compliance %") &&
      startswith(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.title, "Compliance %") &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.period == 3600 &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.yAxis.left.max == 100
    )
    error_message = "compliance widgets: ${jsonencode([for w in slice(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets, 1, 3) : w.properties.title])}"
  }
  assert {
    condition = (jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics == [
      ["TagWarden", "ResourcesInLine", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { id = "i0", stat = "Sum", visible = false }],
      ["TagWarden", "ResourcesDrifted", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { id = "d0", stat = "Sum", visible = false }],
      [{ expression = "100 * i0 / (i0 + d0)", id = "c0", label = "mycluster-7xk2p" }],
    ] && jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[1].properties.metrics == jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics)
    error_message = "compliance % lines: ${jsonencode(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics)}"
  }
  assert {
    condition = (
      startswith(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties.title, "WouldWrite: resources with a write held back (audit: every would-be write)") &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties.metrics[0] == ["TagWarden", "WouldWrite", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { label = "all resource types", stat = "Sum" }] &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties.metrics[1][0].expression == "SEARCH('{TagWarden,Cloud,InfraID,ResourceType} MetricName=\"WouldWrite\" InfraID=\"mycluster-7xk2p\"', 'Sum', 3600)"
    )
    error_message = "would-write widget: ${jsonencode(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties)}"
  }
  assert {
    condition = jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[4].properties.metrics == [
      ["TagWarden", "ResourcesInLine", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { label = "in line", stat = "Sum" }],
      ["TagWarden", "ResourcesDrifted", "Cloud", "aws", "InfraID", "mycluster-7xk2p", { label = "drifted", stat = "Sum" }],
    ]
    error_message = "in line vs drifted: ${jsonencode(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[4].properties.metrics)}"
  }
  # The existing widgets stay: every search, the lag, the cost, the Lambda and the queues.
  assert {
    condition = alltrue([for m in ["EventsReceived", "ResourcesEvaluated", "DriftDetected", "TagsWritten", "WriteFailures", "TagLimitExceeded", "PolicyRejected", "ListingFailures"] :
    strcontains(aws_cloudwatch_dashboard.this.dashboard_body, "MetricName=\\\"${m}\\\"")]) && length(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets) == 21
    error_message = "the dashboard keeps its widgets: ${length(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets)}"
  }
  # The failure alarms, in audit mode.
  assert {
    condition = (keys(aws_cloudwatch_metric_alarm.insights) == ["contested", "listing_failures", "policy_rejected", "write_failures"] &&
      keys(aws_cloudwatch_metric_alarm.compliance_lag) == ["cluster"] && aws_cloudwatch_metric_alarm.lambda_errors.metric_name == "Errors" &&
    aws_cloudwatch_metric_alarm.dlq_not_empty.threshold == 0 && length(aws_cloudwatch_metric_alarm.no_events) == 1 && length(aws_cloudwatch_metric_alarm.no_sweep) == 1)
    error_message = "alarms in audit mode: ${jsonencode(keys(aws_cloudwatch_metric_alarm.insights))}"
  }
  assert {
    condition = alltrue([for k, m in { write_failures = "WriteFailures", contested = "Contested", policy_rejected = "PolicyRejected", listing_failures = "ListingFailures" } :
      one(aws_cloudwatch_metric_alarm.insights[k].metric_query).expression == "SELECT SUM(${m}) FROM \"TagWarden\" WHERE InfraID = 'mycluster-7xk2p'" &&
    aws_cloudwatch_metric_alarm.insights[k].threshold == 0 && aws_cloudwatch_metric_alarm.insights[k].alarm_name == "tagwarden-mycluster-7xk2p-${replace(k, "_", "-")}"])
    error_message = "the failure alarms' names, thresholds and queries in audit mode"
  }
}

run "enforce_mode_same_alarms" {
  command = plan
  variables {
    mode = "enforce"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_MODE"] == "enforce" && strcontains(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[0].properties.markdown, "Mode **enforce**")
    error_message = "mode enforce: the function and the header"
  }
  assert {
    condition     = startswith(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties.title, "WouldWrite: resources with a write held back (audited clusters and keys)")
    error_message = "in enforce, WouldWrite is what stays audited"
  }
  # The same alarms, with the same queries, as in audit mode.
  assert {
    condition     = keys(output.alarm_arns) == keys(run.audit_mode_dashboard.alarm_arns) && length(aws_cloudwatch_metric_alarm.no_events) == 1 && length(aws_cloudwatch_metric_alarm.no_sweep) == 1
    error_message = "alarms differ by mode: ${jsonencode(keys(output.alarm_arns))} vs ${jsonencode(keys(run.audit_mode_dashboard.alarm_arns))}"
  }
  assert {
    condition = alltrue([for k, m in { write_failures = "WriteFailures", contested = "Contested", policy_rejected = "PolicyRejected", listing_failures = "ListingFailures" } :
      one(aws_cloudwatch_metric_alarm.insights[k].metric_query).expression == "SELECT SUM(${m}) FROM \"TagWarden\" WHERE InfraID = 'mycluster-7xk2p'" &&
    aws_cloudwatch_metric_alarm.insights[k].threshold == 0 && aws_cloudwatch_metric_alarm.insights[k].alarm_name == "tagwarden-mycluster-7xk2p-${replace(k, "_", "-")}"])
    error_message = "the failure alarms' names, thresholds and queries in enforce mode"
  }
}

run "batching_inputs_reach_the_mapping_and_the_function" {
  command = plan
  variables {
    sqs_batch_size                 = 10
    sqs_batching_window_seconds    = 0
    sqs_maximum_concurrency        = 3
    ec2_writes_per_second          = 1
    reserved_concurrent_executions = 4
    timeout                        = 60
  }
  assert {
    condition = (aws_lambda_event_source_mapping.events.batch_size == 10 &&
      aws_lambda_event_source_mapping.events.maximum_batching_window_in_seconds == 0 &&
    aws_lambda_event_source_mapping.events.scaling_config[0].maximum_concurrency == 3)
    error_message = "queue mapping: batch ${aws_lambda_event_source_mapping.events.batch_size}, window ${aws_lambda_event_source_mapping.events.maximum_batching_window_in_seconds}, scaling ${jsonencode(aws_lambda_event_source_mapping.events.scaling_config)}"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_EC2_WRITES_PER_SECOND"] == "1"
    error_message = "TAGWARDEN_EC2_WRITES_PER_SECOND: ${jsonencode(aws_lambda_function.this.environment[0].variables)}"
  }
  assert {
    condition     = module.events_queue.visibility_timeout_seconds == 360
    error_message = "visibility timeout ${module.events_queue.visibility_timeout_seconds}, want 6 x 60 + 0"
  }
  assert {
    condition     = output.ec2_writes_per_second_bound == { per_invocation = 1, event_path = 3, all_invocations = 4 }
    error_message = "ec2_writes_per_second_bound: ${jsonencode(output.ec2_writes_per_second_bound)}"
  }
}

# Lambda rejects BatchSize > 10 without a batching window at apply;
# refused at the input.
run "batch_over_10_without_window_refused" {
  command = plan
  variables {
    sqs_batch_size              = 11
    sqs_batching_window_seconds = 0
  }
  expect_failures = [var.sqs_batch_size]
}

run "batch_over_10_with_window_ok" {
  command = plan
  variables {
    sqs_batch_size              = 10000
    sqs_batching_window_seconds = 1
  }
}

run "batch_over_10000_refused" {
  command = plan
  variables {
    sqs_batch_size = 10001
  }
  expect_failures = [var.sqs_batch_size]
}

run "batch_zero_refused" {
  command = plan
  variables {
    sqs_batch_size = 0
  }
  expect_failures = [var.sqs_batch_size]
}

run "window_over_300_refused" {
  command = plan
  variables {
    sqs_batching_window_seconds = 301
  }
  expect_failures = [var.sqs_batching_window_seconds]
}

run "maximum_concurrency_below_2_refused" {
  command = plan
  variables {
    sqs_maximum_concurrency = 1
  }
  expect_failures = [var.sqs_maximum_concurrency]
}

run "ec2_writes_per_second_zero_refused" {
  command = plan
  variables {
    ec2_writes_per_second = 0
  }
  expect_failures = [var.ec2_writes_per_second]
}

run "ec2_writes_per_second_over_100_refused" {
  command = plan
  variables {
    ec2_writes_per_second = 101
  }
  expect_failures = [var.ec2_writes_per_second]
}

run "ec2_writes_per_second_fraction_refused" {
  command = plan
  variables {
    ec2_writes_per_second = 2.5
  }
  expect_failures = [var.ec2_writes_per_second]
}

# Reserved concurrency 0 never runs; below sqs_maximum_concurrency throttles the queue mapping.
run "reserved_concurrency_zero_refused" {
  command = plan
  variables {
    reserved_concurrent_executions = 0
  }
  expect_failures = [aws_lambda_function.this]
}

run "reserved_concurrency_below_max_concurrency_refused" {
  command = plan
  variables {
    reserved_concurrent_executions = 4
    sqs_maximum_concurrency        = 5
  }
  expect_failures = [aws_lambda_function.this]
}

run "reserved_concurrency_at_max_concurrency_ok" {
  command = plan
  variables {
    reserved_concurrent_executions = 6
    sqs_maximum_concurrency        = 5
  }
}

# A failed parameter update (detail.exception present) must not start a sweep.
run "ssm_policy_change_ignores_failed_updates" {
  command = plan
  variables {
    policy_source   = "ssm"
    policy_document = "apiVersion: config.openshift.io/v1"
  }
  assert {
    condition = jsondecode(aws_cloudwatch_event_rule.policy_change[0].event_pattern).detail == {
      name      = ["/tagwarden/mycluster-7xk2p/policy"]
      operation = ["Create", "Update"]
      exception = [{ exists = false }]
    }
    error_message = "SSM policy-change pattern: ${aws_cloudwatch_event_rule.policy_change[0].event_pattern}"
  }
}

# Further services for the generic path, conditioned like every other tag write.
run "extra_tag_actions_added_under_the_ownership_condition" {
  command = plan
  variables {
    extra_tag_actions = ["sqs:TagQueue", "rds:AddTagsToResource"]
  }
  assert {
    condition     = local.generic_tag_action_list == tolist(["elasticfilesystem:TagResource", "sqs:TagQueue", "rds:AddTagsToResource"])
    error_message = "generic tag actions: ${jsonencode(local.generic_tag_action_list)}"
  }
  assert {
    condition = one([
      for st in data.aws_iam_policy_document.owned_tag_writes["mycluster-7xk2p"].statement : {
        actions    = st.actions
        conditions = toset([for c in st.condition : "${c.test} ${c.variable}"])
      } if st.sid == "WriteOwnedTagsExtraServices"
      ]) == {
      actions = toset(["sqs:TagQueue", "rds:AddTagsToResource"])
      conditions = toset([
        "StringEquals aws:ResourceTag/kubernetes.io/cluster/mycluster-7xk2p",
        "Null aws:TagKeys",
        "ForAllValues:StringNotEqualsIgnoreCase aws:TagKeys",
      ])
    }
    error_message = "WriteOwnedTagsExtraServices must grant the extra actions under the ownership condition and the aws:TagKeys guard"
  }
  # The extra actions are under the case-blind reserved-key Deny too.
  assert {
    condition     = contains(local.guarded_tag_write_actions, "sqs:TagQueue") && contains(local.guarded_tag_write_actions, "rds:AddTagsToResource")
    error_message = "guarded_tag_write_actions: ${jsonencode(local.guarded_tag_write_actions)}"
  }
}

run "extra_tag_actions_wildcard_refused" {
  command = plan
  variables {
    extra_tag_actions = ["sqs:*"]
  }
  expect_failures = [var.extra_tag_actions]
}

run "extra_tag_actions_untag_refused" {
  command = plan
  variables {
    extra_tag_actions = ["sqs:UntagQueue"]
  }
  expect_failures = [var.extra_tag_actions]
}

run "extra_tag_actions_non_tag_action_refused" {
  command = plan
  variables {
    extra_tag_actions = ["sqs:SendMessage"]
  }
  expect_failures = [var.extra_tag_actions]
}

# The global-service rules can be left out; the forwarding patterns follow.
run "global_service_rules_disabled" {
  command = plan
  variables {
    enable_iam_events     = false
    enable_route53_events = false
  }
  assert {
    condition     = length(local.global_event_patterns) == 0 && !contains(keys(aws_cloudwatch_event_rule.resource_events), "route53")
    error_message = "disabled global rules must not be created nor forwarded"
  }
}

# One deployment, a cluster set. Everything per cluster is built from infra_ids: the
# ownership-conditioned writes (managed policies of two clusters each), the bucket patterns, the Tag Change
# filter, the initial policies, the write-failure and lag alarms; the policy URI names the set.
run "cluster_set_s3" {
  command = plan
  variables {
    infra_id                 = null
    infra_ids                = ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"]
    cluster_policy_documents = { "dev-a1b2c" = "apiVersion: config.openshift.io/v1", "prod-g5h6i" = "apiVersion: config.openshift.io/v1" }
  }
  # Compliance % per cluster (each its own two counts and percentage), would-be
  # writes and in line vs drifted per cluster.
  assert {
    condition = (length(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics) == 9 &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics[2] == [{ expression = "100 * i0 / (i0 + d0)", id = "c0", label = "dev-a1b2c" }] &&
      jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics[6] == ["TagWarden", "ResourcesInLine", "Cloud", "aws", "InfraID", "prod-g5h6i", { id = "i2", stat = "Sum", visible = false }] &&
    jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics[8] == [{ expression = "100 * i2 / (i2 + d2)", id = "c2", label = "prod-g5h6i" }])
    error_message = "compliance % per cluster: ${jsonencode(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics)}"
  }
  assert {
    condition = (jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties.metrics == [
      for id in ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"] : ["TagWarden", "WouldWrite", "Cloud", "aws", "InfraID", id, { label = id, stat = "Sum" }]
      ] && length(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[4].properties.metrics) == 6 &&
    jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[4].properties.metrics[3] == ["TagWarden", "ResourcesDrifted", "Cloud", "aws", "InfraID", "stage-d3e4f", { label = "stage-d3e4f drifted", stat = "Sum" }])
    error_message = "would-be writes and in line vs drifted per cluster: ${jsonencode(slice(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets, 3, 5))}"
  }
  assert {
    condition     = local.policy_uri == "s3://tagwarden-123456789012/clusters/*/" && aws_lambda_function.this.function_name == "tagwarden"
    error_message = "set policy URI ${local.policy_uri}, function ${aws_lambda_function.this.function_name}"
  }
  # Two clusters to a policy, keyed and named by position.
  assert {
    condition     = jsonencode(local.tag_write_groups) == jsonencode({ "01" = ["dev-a1b2c", "stage-d3e4f"], "02" = ["prod-g5h6i"] }) && length(aws_iam_role_policy_attachment.owned_tag_writes) == 2 && aws_iam_policy.owned_tag_writes["01"].name == "tagwarden-tag-writes-01"
    error_message = "tag-write policies of two clusters each: ${jsonencode(local.tag_write_groups)}"
  }
  assert {
    condition = alltrue([for id in ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"] : length([
      for k, d in data.aws_iam_policy_document.owned_tag_writes : [for st in d.statement : st.sid if contains([for c in st.condition : "${c.test} ${c.variable} ${jsonencode(c.values)}"], "StringEquals aws:ResourceTag/kubernetes.io/cluster/${id} [\"owned\"]")]
    if contains(local.tag_write_groups[k], id)][0]) == length(local.owned_tag_writes)])
    error_message = "each cluster's write statements (one per owned_tag_writes entry) must be conditioned on that cluster's ownership tag, in its group's policy"
  }
  assert {
    condition     = [for st in data.aws_iam_policy_document.owned_tag_writes["01"].statement : st.sid] == concat([for k in keys(local.owned_tag_writes) : "${k}1"], [for k in keys(local.owned_tag_writes) : "${k}2"]) && [for st in data.aws_iam_policy_document.owned_tag_writes["02"].statement : st.sid] == keys(local.owned_tag_writes)
    error_message = "Sids unique within each policy"
  }
  assert {
    condition     = toset(keys(output.tag_write_policy_arns)) == toset(["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"])
    error_message = "tag_write_policy_arns maps every cluster to its group's policy"
  }
  # Events received/ignored and policy rejections exist only under InfraID all.
  assert {
    condition     = [for l in local.search_lines["EventsReceived"] : l[0].label] == ["all"] && [for l in local.search_lines["PolicyRejected"] : l[0].label] == ["all"] && [for l in local.search_lines["DriftDetected"] : l[0].label] == ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i", "all"]
    error_message = "deployment-wide metrics draw the one 'all' line, resource metrics one per cluster"
  }
  assert {
    condition     = local.s3_bucket_arns == ["arn:aws:s3:::dev-a1b2c-*", "arn:aws:s3:::stage-d3e4f-*", "arn:aws:s3:::prod-g5h6i-*"]
    error_message = "bucket patterns per cluster: ${jsonencode(local.s3_bucket_arns)}"
  }
  assert {
    condition = jsondecode(aws_cloudwatch_event_rule.resource_events["tag_change"].event_pattern).detail == {
      "$or" = [for id in ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"] : { tags = { "kubernetes.io/cluster/${id}" = ["owned"] } }]
    }
    error_message = "Tag Change filter: ${aws_cloudwatch_event_rule.resource_events["tag_change"].event_pattern}"
  }
  assert {
    condition     = toset([for o in aws_s3_object.cluster_policy : o.key]) == toset(["clusters/dev-a1b2c/10-cluster.yaml", "clusters/prod-g5h6i/10-cluster.yaml"])
    error_message = "initial cluster policies: ${jsonencode([for o in aws_s3_object.cluster_policy : o.key])}"
  }
  assert {
    condition     = one([for st in data.aws_iam_policy_document.lambda.statement : st.resources if st.sid == "WriteStatusReport"]) == toset(["arn:aws:s3:::tagwarden-123456789012/clusters/*/tagwarden-status.json"]) && one([for st in data.aws_iam_policy_document.lambda.statement : st.resources if st.sid == "ReadPolicyObjects"]) == toset(["arn:aws:s3:::tagwarden-123456789012/clusters/*"])
    error_message = "status reports beside each cluster's policy, reads under the set's prefix"
  }
  assert {
    condition     = aws_s3_bucket_notification.policy[0].lambda_function[0].filter_prefix == "clusters/"
    error_message = "policy changes anywhere in the set notify the function"
  }
  assert {
    condition     = toset(keys(aws_cloudwatch_metric_alarm.insights)) == toset(["dev-a1b2c/write_failures", "stage-d3e4f/write_failures", "prod-g5h6i/write_failures", "dev-a1b2c/contested", "stage-d3e4f/contested", "prod-g5h6i/contested", "policy_rejected", "listing_failures"]) && toset([for a in aws_cloudwatch_metric_alarm.compliance_lag : a.alarm_name]) == toset([for id in ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"] : "tagwarden-${id}-compliance-lag-p99"])
    error_message = "alarms per cluster: ${jsonencode(keys(aws_cloudwatch_metric_alarm.insights))}"
  }
  assert {
    condition     = strcontains(one(aws_cloudwatch_metric_alarm.insights["policy_rejected"].metric_query).expression, "InfraID = 'all'") && strcontains(one(aws_cloudwatch_metric_alarm.insights["prod-g5h6i/write_failures"].metric_query).expression, "InfraID = 'prod-g5h6i'")
    error_message = "policy rejections are the deployment's (InfraID all), write failures each cluster's"
  }
  # Failed sweep listings and the calls per correction are the deployment's (InfraID all).
  assert {
    condition     = [for l in local.search_lines["ListingFailures"] : l[0].label] == ["all"] && one(aws_cloudwatch_metric_alarm.insights["listing_failures"].metric_query).expression == "SELECT SUM(ListingFailures) FROM \"TagWarden\" WHERE InfraID = 'all'" && aws_cloudwatch_metric_alarm.insights["listing_failures"].alarm_name == "tagwarden-listing-failures"
    error_message = "ListingFailures: one 'all' line and a deployment alarm"
  }
  assert {
    condition     = strcontains(aws_cloudwatch_dashboard.this.dashboard_body, jsonencode(["TagWarden", "CallsPerCorrection", "Cloud", "aws", "InfraID", "all", { label = "average", stat = "Average" }]))
    error_message = "CallsPerCorrection is drawn under InfraID all"
  }
}

# A Cluster API (CAPA) cluster owns by two keys, CAPA's and the cloud provider's: the role
# may write under either (its statements twice, packed as two), and the Tag Change filter matches
# either.
run "cluster_api_cluster_in_a_set" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = ["dev-a1b2c", "capa-w1"]
    cluster_kinds = { "capa-w1" = "ClusterAPI" }
  }
  assert {
    condition     = jsonencode(local.tag_write_groups) == jsonencode({ "01" = ["dev-a1b2c", "capa-w1"], "02" = ["capa-w1"] }) && length(aws_iam_role_policy_attachment.owned_tag_writes) == 2
    error_message = "the CAPA cluster's two keys pack as two: ${jsonencode(local.tag_write_groups)}"
  }
  assert {
    condition = alltrue([for key in ["sigs.k8s.io/cluster-api-provider-aws/cluster/capa-w1", "kubernetes.io/cluster/capa-w1", "kubernetes.io/cluster/dev-a1b2c"] : length(flatten([
      for k, d in data.aws_iam_policy_document.owned_tag_writes : [for st in d.statement : st.sid if contains([for c in st.condition : "${c.test} ${c.variable} ${jsonencode(c.values)}"], "StringEquals aws:ResourceTag/${key} [\"owned\"]")]
    ])) == length(local.owned_tag_writes)])
    error_message = "each ownership key's write statements, conditioned on that key"
  }
  assert {
    condition = jsondecode(aws_cloudwatch_event_rule.resource_events["tag_change"].event_pattern).detail == {
      "$or" = [for key in ["kubernetes.io/cluster/dev-a1b2c", "sigs.k8s.io/cluster-api-provider-aws/cluster/capa-w1", "kubernetes.io/cluster/capa-w1"] : { tags = { (key) = ["owned"] } }]
    }
    error_message = "Tag Change filter: ${aws_cloudwatch_event_rule.resource_events["tag_change"].event_pattern}"
  }
}

run "cluster_kinds_names_only_listed_clusters" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = ["dev-a1b2c"]
    cluster_kinds = { "capa-w1" = "ClusterAPI" }
  }
  expect_failures = [var.cluster_kinds]
}

run "cluster_kinds_are_known" {
  command = plan
  variables {
    cluster_kinds = { "mycluster-7xk2p" = "Kops" }
  }
  expect_failures = [var.cluster_kinds]
}

run "cluster_set_ssm" {
  command = plan
  variables {
    infra_id                 = null
    infra_ids                = ["dev-a1b2c", "prod-g5h6i"]
    policy_source            = "ssm"
    cluster_policy_documents = { "prod-g5h6i" = "apiVersion: config.openshift.io/v1" }
  }
  assert {
    condition     = local.policy_uri == "ssm:/tagwarden/clusters/*" && length(aws_ssm_parameter.policy) == 0 && [for p in aws_ssm_parameter.cluster_policy : p.name] == ["/tagwarden/clusters/prod-g5h6i"]
    error_message = "SSM set: ${local.policy_uri}"
  }
  assert {
    condition = { for st in data.aws_iam_policy_document.lambda.statement : st.sid => st.resources if startswith(st.sid, "ReadPolicyParam") || st.sid == "ListPolicyParameters" || st.sid == "WriteStatusParameter" } == {
      ReadPolicyParameter  = toset(["arn:aws:ssm:eu-west-1:123456789012:parameter/tagwarden/clusters/*"])
      ListPolicyParameters = toset(["arn:aws:ssm:eu-west-1:123456789012:parameter/tagwarden/clusters"])
      WriteStatusParameter = toset(["arn:aws:ssm:eu-west-1:123456789012:parameter/tagwarden/clusters-status/*"])
    }
    error_message = "SSM set grants: read the set, list its path, write only the status path"
  }
  assert {
    condition     = jsondecode(aws_cloudwatch_event_rule.policy_change[0].event_pattern).detail.name == [{ prefix = "/tagwarden/clusters/" }]
    error_message = "a change of any cluster's parameter triggers that cluster's sweep"
  }
}

run "infra_id_and_infra_ids_refused" {
  command = plan
  variables {
    infra_ids = ["dev-a1b2c"]
  }
  expect_failures = [var.infra_id]
}

run "neither_infra_id_nor_infra_ids_refused" {
  command = plan
  variables {
    infra_id = null
  }
  expect_failures = [var.infra_id]
}

run "infra_ids_duplicates_refused" {
  command = plan
  variables {
    infra_id  = null
    infra_ids = ["dev-a1b2c", "dev-a1b2c"]
  }
  expect_failures = [var.infra_ids]
}

run "cluster_policy_for_an_unlisted_cluster_refused" {
  command = plan
  variables {
    infra_id                 = null
    infra_ids                = ["dev-a1b2c"]
    cluster_policy_documents = { "prod-g5h6i" = "x" }
  }
  expect_failures = [aws_lambda_function.this]
}

run "single_policy_inputs_refused_for_a_set" {
  command = plan
  variables {
    infra_id        = null
    infra_ids       = ["dev-a1b2c"]
    policy_document = "x"
  }
  expect_failures = [aws_lambda_function.this]
}

# 20 clusters, the most a set takes, in 10 policies: the default "Managed policies
# attached to an IAM role" quota (IAM User Guide, "IAM and AWS STS quotas").
run "twenty_clusters_in_ten_policies" {
  command = plan
  variables {
    infra_id  = null
    infra_ids = [for i in range(20) : format("c%02d-a1b2c", i)]
  }
  assert {
    condition     = length(aws_iam_policy.owned_tag_writes) == 10 && length(aws_iam_role_policy_attachment.owned_tag_writes) == 10 && alltrue([for ids in values(local.tag_write_groups) : length(ids) == 2])
    error_message = "20 clusters must pack into 10 policies of two: ${jsonencode(local.tag_write_groups)}"
  }
}

# A fifth statement per cluster (extra_tag_actions) leaves one cluster per policy: 11 clusters need
# 11 policies, refused at plan at the default quota, accepted once the quota is stated raised.
run "eleven_policies_refused_at_the_default_quota" {
  command = plan
  variables {
    infra_id          = null
    infra_ids         = [for i in range(11) : format("c%02d-a1b2c", i)]
    extra_tag_actions = ["sqs:TagQueue"]
  }
  expect_failures = [aws_iam_role.lambda]
}

run "eleven_policies_with_a_raised_quota" {
  command = plan
  variables {
    infra_id                        = null
    infra_ids                       = [for i in range(11) : format("c%02d-a1b2c", i)]
    extra_tag_actions               = ["sqs:TagQueue"]
    managed_policies_per_role_quota = 20
  }
  assert {
    condition     = length(aws_iam_policy.owned_tag_writes) == 11
    error_message = "one policy per cluster with extra_tag_actions"
  }
}

run "more_than_twenty_clusters_refused" {
  command = plan
  variables {
    infra_id  = null
    infra_ids = [for i in range(21) : format("c%02d-a1b2c", i)]
  }
  expect_failures = [var.infra_ids]
}

# "all" is the InfraID of a set's deployment-wide metrics.
run "infra_id_all_refused" {
  command = plan
  variables {
    infra_id = "all"
  }
  expect_failures = [var.infra_id]
}

run "infra_ids_all_refused" {
  command = plan
  variables {
    infra_id  = null
    infra_ids = ["dev-a1b2c", "all"]
  }
  expect_failures = [var.infra_ids]
}

# Route 53 tag writes only on the zones and health checks listed per cluster.
run "route53_writes_only_listed_ids" {
  command = plan

  variables {
    route53_writable_resources = {
      "mycluster-7xk2p" = { hosted_zone_ids = ["Z0123456789ABCDEFGHIJ"], health_check_ids = ["0123abcd-0000-1111-2222-333344445555"] }
    }
  }

  assert {
    condition     = jsonencode(local.route53_writable_arns) == jsonencode(["arn:aws:route53:::hostedzone/Z0123456789ABCDEFGHIJ", "arn:aws:route53:::healthcheck/0123abcd-0000-1111-2222-333344445555"])
    error_message = "Route 53 writable ARNs: ${jsonencode(local.route53_writable_arns)}"
  }
}

run "route53_writes_keyed_by_a_listed_cluster" {
  command = plan

  variables {
    route53_writable_resources = { "other-abcde" = { hosted_zone_ids = ["Z0123456789ABCDEFGHIJ"] } }
  }

  expect_failures = [var.route53_writable_resources]
}

run "route53_zone_id_without_prefix" {
  command = plan

  variables {
    route53_writable_resources = { "mycluster-7xk2p" = { hosted_zone_ids = ["/hostedzone/Z0123456789ABCDEFGHIJ"] } }
  }

  expect_failures = [var.route53_writable_resources]
}

# A set's reserved concurrency follows the mapping's maximum; its
# TAGWARDEN_CLUSTERS lists every infraID; its notifications are one per policy suffix.
run "cluster_set_reserved_concurrency_clusters_and_notifications" {
  command = plan

  variables {
    infra_id                = null
    infra_ids               = ["dev-a1b2c", "prod-g5h6i"]
    sqs_maximum_concurrency = 5
  }

  assert {
    condition     = aws_lambda_function.this.reserved_concurrent_executions == 6 && output.ec2_writes_per_second_bound.all_invocations == 12
    error_message = "reserved concurrency ${aws_lambda_function.this.reserved_concurrent_executions}, bound ${jsonencode(output.ec2_writes_per_second_bound)}"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_CLUSTERS"] == "dev-a1b2c,prod-g5h6i"
    error_message = "TAGWARDEN_CLUSTERS: ${aws_lambda_function.this.environment[0].variables["TAGWARDEN_CLUSTERS"]}"
  }
  assert {
    condition = jsonencode(local.policy_notification_filters) == jsonencode({
      "tagwarden-policy-change-json" = { prefix = "clusters/", suffix = ".json" }
      "tagwarden-policy-change-yaml" = { prefix = "clusters/", suffix = ".yaml" }
      "tagwarden-policy-change-yml"  = { prefix = "clusters/", suffix = ".yml" }
    })
    error_message = "notification filters: ${jsonencode(local.policy_notification_filters)}"
  }
}

run "reserved_concurrency_unreserved_on_request" {
  command = plan

  variables {
    reserved_concurrent_executions = -1
  }

  assert {
    condition     = aws_lambda_function.this.reserved_concurrent_executions == -1 && output.ec2_writes_per_second_bound.all_invocations == null
    error_message = "-1 must leave the function unreserved"
  }
}

################################################################################
# From nothing to the first correction
################################################################################

# The architecture comes from the package's manifest (scripts/package-lambda writes <zip>.json);
# the fixtures are made by scripts/test-terraform (manifest_fixtures) in tests/fixtures/.
run "architecture_from_the_manifest_arm64" {
  command = plan
  variables {
    lambda_zip = "tests/fixtures/arm64.zip"
  }
  assert {
    condition     = aws_lambda_function.this.architectures == tolist(["arm64"])
    error_message = "architectures ${jsonencode(aws_lambda_function.this.architectures)}, the manifest says arm64"
  }
}

run "architecture_from_the_manifest_x86_64" {
  command = plan
  variables {
    lambda_zip = "tests/fixtures/x86_64.zip"
  }
  assert {
    condition     = aws_lambda_function.this.architectures == tolist(["x86_64"])
    error_message = "architectures ${jsonencode(aws_lambda_function.this.architectures)}, the manifest says x86_64"
  }
}

run "zip_without_manifest_refused" {
  command = plan
  variables {
    lambda_zip = "tests/fixtures/no-manifest.zip"
  }
  expect_failures = [aws_lambda_function.this]
}

run "manifest_of_another_zip_refused" {
  command = plan
  variables {
    lambda_zip = "tests/fixtures/stale.zip"
  }
  expect_failures = [aws_lambda_function.this]
}

run "architecture_disagreeing_with_the_manifest_refused" {
  command = plan
  variables {
    lambda_zip   = "tests/fixtures/x86_64.zip"
    architecture = "arm64"
  }
  expect_failures = [aws_lambda_function.this]
}

run "architecture_agreeing_with_the_manifest_ok" {
  command = plan
  variables {
    lambda_zip   = "tests/fixtures/arm64.zip"
    architecture = "arm64"
  }
}

run "manifest_given_by_path" {
  command = plan
  variables {
    lambda_zip      = "tests/fixtures/no-manifest.zip"
    lambda_manifest = "tests/fixtures/x86_64.zip.json"
  }
  assert {
    condition     = aws_lambda_function.this.architectures == tolist(["x86_64"])
    error_message = "architectures ${jsonencode(aws_lambda_function.this.architectures)}"
  }
}

# Alarms reach someone; silence is an alarm.
run "alarm_subscriptions_and_silence_alarms" {
  command = plan
  variables {
    create_sns_topic    = true
    alarm_subscriptions = [{ protocol = "email", endpoint = "ops@example.com" }, { protocol = "https", endpoint = "https://hooks.example.com/sns" }]
  }
  assert {
    condition     = length(aws_sns_topic_subscription.alarms) == 2 && aws_sns_topic_subscription.alarms["email:ops@example.com"].protocol == "email"
    error_message = "subscriptions ${jsonencode(keys(aws_sns_topic_subscription.alarms))}"
  }
  assert {
    condition = (aws_cloudwatch_metric_alarm.no_events[0].metric_name == "EventsReceived" && aws_cloudwatch_metric_alarm.no_events[0].evaluation_periods == 24 &&
    aws_cloudwatch_metric_alarm.no_events[0].treat_missing_data == "breaching" && aws_cloudwatch_metric_alarm.no_events[0].dimensions["InfraID"] == "mycluster-7xk2p")
    error_message = "no-events alarm: 24 one-hour periods of EventsReceived, missing data breaching"
  }
  assert {
    condition = (aws_cloudwatch_metric_alarm.no_sweep[0].metric_name == "SweepsCompleted" && aws_cloudwatch_metric_alarm.no_sweep[0].evaluation_periods == 2 &&
    aws_cloudwatch_metric_alarm.no_sweep[0].treat_missing_data == "breaching")
    error_message = "no-sweep alarm: twice rate(1 hour) = 2 one-hour periods of SweepsCompleted, missing data breaching"
  }
}

run "alarm_subscriptions_without_a_topic_refused" {
  command = plan
  variables {
    alarm_subscriptions = [{ protocol = "email", endpoint = "ops@example.com" }]
  }
  expect_failures = [aws_sns_topic_subscription.alarms]
}

run "alarm_subscription_of_another_protocol_refused" {
  command = plan
  variables {
    create_sns_topic    = true
    alarm_subscriptions = [{ protocol = "sms", endpoint = "+15555550100" }]
  }
  expect_failures = [var.alarm_subscriptions]
}

run "silence_alarms_follow_the_schedule_and_turn_off" {
  command = plan
  variables {
    sweep_schedule        = "rate(90 minutes)"
    no_events_alarm_hours = null
  }
  assert {
    condition     = length(aws_cloudwatch_metric_alarm.no_events) == 0 && aws_cloudwatch_metric_alarm.no_sweep[0].evaluation_periods == 3
    error_message = "no_events_alarm_hours = null turns the no-events alarm off; twice rate(90 minutes) is 3 h"
  }
  # The compliance widgets' period is the sweep's interval (at least an hour).
  assert {
    condition     = alltrue([for i in [2, 3, 4] : jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[i].properties.period == 5400])
    error_message = "compliance period for rate(90 minutes): ${jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.period}"
  }
}

run "sweep_alarm_with_a_cron_schedule_needs_hours" {
  command = plan
  variables {
    sweep_schedule = "cron(15 */6 * * ? *)"
  }
  expect_failures = [aws_cloudwatch_metric_alarm.no_sweep]
}

run "sweep_alarm_with_a_cron_schedule_and_hours" {
  command = plan
  variables {
    sweep_schedule          = "cron(15 */6 * * ? *)"
    sweep_alarm_after_hours = 12
  }
  assert {
    condition     = aws_cloudwatch_metric_alarm.no_sweep[0].evaluation_periods == 12
    error_message = "sweep_alarm_after_hours = 12: 12 one-hour periods"
  }
}

# One owner per thing: no policy object unless one is given; the publisher's layer is not
# Terraform's.
run "no_policy_object_by_default" {
  command = plan
  assert {
    condition     = length(aws_s3_object.policy) == 0 && length(aws_s3_object.policy_layer) == 0 && length(aws_s3_object.cluster_policy) == 0
    error_message = "without policy_document the module writes no policy"
  }
}

run "publisher_layer_refused_as_a_terraform_layer" {
  command = plan
  variables {
    policy_prefix = "tagwarden/"
    policy_layers = { "10-cluster.yaml" = "x: 1" }
  }
  expect_failures = [var.policy_layers]
}

# The trail, only on request.
run "no_trail_by_default" {
  command = plan
  assert {
    condition     = length(aws_cloudtrail.this) == 0 && length(module.trail_bucket) == 0
    error_message = "create_trail defaults to false"
  }
}

run "trail_on_request" {
  command = plan
  variables {
    create_trail = true
  }
  assert {
    condition = (aws_cloudtrail.this[0].is_multi_region_trail && aws_cloudtrail.this[0].include_global_service_events &&
      aws_cloudtrail.this[0].enable_log_file_validation && aws_cloudtrail.this[0].event_selector[0].include_management_events &&
    aws_cloudtrail.this[0].event_selector[0].read_write_type == "All" && module.trail_bucket[0].name == "tagwarden-mycluster-7xk2p-trail-123456789012")
    error_message = "the trail: multi-Region, global service events, validation, management events read and write, its own bucket"
  }
  assert {
    condition     = local.trail_arn == "arn:aws:cloudtrail:eu-west-1:123456789012:trail/tagwarden-mycluster-7xk2p-trail"
    error_message = "the bucket policy's aws:SourceArn must be the trail's ARN: ${local.trail_arn}"
  }
}

# A hub's trail is the organization's, so every member account records.
run "organization_trail_on_request" {
  command = plan
  variables {
    create_trail          = true
    trail_organization_id = "o-a1b2c3d4e5"
  }
  assert {
    condition     = aws_cloudtrail.this[0].is_organization_trail && aws_cloudtrail.this[0].is_multi_region_trail
    error_message = "trail_organization_id makes the trail an organization trail"
  }
}

run "a_bad_trail_organization_id_is_refused" {
  command = plan
  variables {
    create_trail          = true
    trail_organization_id = "123456789012"
  }
  expect_failures = [var.trail_organization_id]
}

# An AWS Organization hub (organization = modules/organization's hub) takes infra_ids = []. It
# grants no write of its own and adds no rule for the hub account's events (its spoke forwards
# them, as every member's); its alarms and dashboard cover every cluster of the organization.
run "organization_hub_without_clusters_of_its_own" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = []
    policy_source = "s3"
    organization = {
      uri             = "s3://hub-org/accounts/"
      member_role     = "tagwarden-member"
      member_regions  = ["eu-west-1", "us-east-1"]
      clusters        = ["111122223333/*"]
      shard_queue_url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards.fifo"
    }
  }
  # The organization's compliance %, its terms SUMs of SEARCHes bound to the schema
  # {Cloud, InfraID} (not the per-ResourceType copies); the would-be writes of the top 20 clusters,
  # the widget's one Metrics Insights query (a widget may hold one).
  assert {
    condition = jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics == [
      [{ expression = "SUM(SEARCH('{TagWarden,Cloud,InfraID} MetricName=\"ResourcesInLine\"', 'Sum', 3600))", id = "i0", label = "in line", visible = false }],
      [{ expression = "SUM(SEARCH('{TagWarden,Cloud,InfraID} MetricName=\"ResourcesDrifted\"', 'Sum', 3600))", id = "d0", label = "drifted", visible = false }],
      [{ expression = "100 * i0 / (i0 + d0)", id = "c0", label = "organization" }],
    ]
    error_message = "organization compliance %: ${jsonencode(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[2].properties.metrics)}"
  }
  assert {
    condition = (jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[3].properties.metrics == [
      [{ expression = "SELECT SUM(WouldWrite) FROM SCHEMA(\"TagWarden\", Cloud, InfraID) GROUP BY InfraID ORDER BY SUM() DESC LIMIT 20", id = "q1" }],
    ] && length(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets[4].properties.metrics) == 2)
    error_message = "organization would-be writes and in line vs drifted: ${jsonencode(slice(jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets, 3, 5))}"
  }
  # Every widget holds at most one Metrics Insights query (one GetMetricData call each).
  assert {
    condition     = alltrue([for w in jsondecode(aws_cloudwatch_dashboard.this.dashboard_body).widgets : length([for l in try(w.properties.metrics, []) : l if startswith(try(l[0].expression, ""), "SELECT")]) <= 1])
    error_message = "a widget with more than one Metrics Insights query"
  }
  assert {
    condition     = length(aws_cloudwatch_event_rule.resource_events) == 0 && length(aws_iam_policy.owned_tag_writes) == 0
    error_message = "an organization hub adds no event rule and no tag-write policy: ${jsonencode(keys(aws_cloudwatch_event_rule.resource_events))}"
  }
  assert {
    condition     = local.s3_bucket_arns == []
    error_message = "an organization hub writes no bucket's tags itself: ${jsonencode(local.s3_bucket_arns)}"
  }
  assert {
    condition = alltrue([for k in ["write_failures", "contested", "compliance_lag"] :
    !strcontains(one(aws_cloudwatch_metric_alarm.insights[k].metric_query).expression, "WHERE")])
    error_message = "an organization hub's alarms cover every cluster (no InfraID filter)"
  }
  assert {
    condition     = one(aws_cloudwatch_metric_alarm.insights["compliance_lag"].metric_query).expression == "SELECT MAX(ComplianceLag) FROM \"TagWarden\"" && length(aws_cloudwatch_metric_alarm.compliance_lag) == 0
    error_message = "an organization hub alarms on the slowest correction: ${one(aws_cloudwatch_metric_alarm.insights["compliance_lag"].metric_query).expression}"
  }
  assert {
    condition     = aws_lambda_function.this.environment[0].variables["TAGWARDEN_CLUSTERS"] == "111122223333/*"
    error_message = "the organization's cluster list wins over the module's own (empty) one"
  }
  assert {
    condition = { for k, v in aws_lambda_function.this.environment[0].variables : k => v if contains(["TAGWARDEN_ORGANIZATION", "TAGWARDEN_MEMBER_ROLE", "TAGWARDEN_MEMBER_REGIONS", "TAGWARDEN_SHARD_QUEUE_URL"], k) } == {
      TAGWARDEN_ORGANIZATION    = "s3://hub-org/accounts/"
      TAGWARDEN_MEMBER_ROLE     = "tagwarden-member"
      TAGWARDEN_MEMBER_REGIONS  = "eu-west-1,us-east-1"
      TAGWARDEN_SHARD_QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards.fifo"
    }
    error_message = "the hub's settings in the function's environment: ${jsonencode(aws_lambda_function.this.environment[0].variables)}"
  }
}

# The earlier wiring, modules/organization's environment in extra_environment, is refused: the hub
# is `organization` alone.
run "an_organization_hub_by_its_environment_is_refused" {
  command = plan
  variables {
    policy_source     = "s3"
    extra_environment = { TAGWARDEN_ORGANIZATION = "s3://hub-org/accounts/", TAGWARDEN_CLUSTERS = "111122223333/*" }
  }
  expect_failures = [var.extra_environment]
}

# One input for the hub's settings: not organization and the same settings in extra_environment.
run "an_organization_hub_set_twice_is_refused" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = []
    policy_source = "s3"
    organization = {
      uri             = "s3://hub-org/accounts/"
      member_role     = "tagwarden-member"
      member_regions  = ["eu-west-1", "us-east-1"]
      clusters        = ["111122223333/*"]
      shard_queue_url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards.fifo"
    }
    extra_environment = { TAGWARDEN_MEMBER_ROLE = "tagwarden-member" }
  }
  expect_failures = [var.organization]
}

run "an_organization_hub_without_regions_is_refused" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = []
    policy_source = "s3"
    organization = {
      uri             = "s3://hub-org/accounts/"
      member_role     = "tagwarden-member"
      member_regions  = []
      clusters        = ["111122223333/*"]
      shard_queue_url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards.fifo"
    }
  }
  expect_failures = [var.organization]
}

run "an_empty_cluster_set_outside_an_organization_is_refused" {
  command = plan
  variables {
    infra_id  = null
    infra_ids = []
  }
  expect_failures = [var.infra_ids]
}

run "an_organization_hub_with_one_cluster_of_its_own_is_refused" {
  command = plan
  variables {
    policy_source = "s3"
    organization = {
      uri             = "s3://hub-org/accounts/"
      member_role     = "tagwarden-member"
      member_regions  = ["eu-west-1", "us-east-1"]
      clusters        = ["111122223333/*"]
      shard_queue_url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards.fifo"
    }
  }
  expect_failures = [var.infra_id]
}

run "an_organization_hub_with_clusters_of_its_own_is_refused" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = ["hub-7xk2p"]
    policy_source = "s3"
    organization = {
      uri             = "s3://hub-org/accounts/"
      member_role     = "tagwarden-member"
      member_regions  = ["eu-west-1", "us-east-1"]
      clusters        = ["111122223333/*"]
      shard_queue_url = "https://sqs.eu-west-1.amazonaws.com/999988887777/tagwarden-shards.fifo"
    }
  }
  expect_failures = [var.infra_ids]
}

# A Cluster API cluster is named by its Cluster object, longer than OpenShift's 27.
run "a_long_cluster_api_name_in_a_set" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = ["dev-a1b2c", "workload-cluster-for-the-payments-team-eu-west-1.prod"]
    cluster_kinds = { "workload-cluster-for-the-payments-team-eu-west-1.prod" = "ClusterAPI" }
  }
  assert {
    condition     = contains(local.s3_bucket_arns, "arn:aws:s3:::workload-cluster-for-the-payments-team-eu-west-1.prod-*")
    error_message = "the long name's bucket pattern: ${jsonencode(local.s3_bucket_arns)}"
  }
}

run "a_long_name_that_is_not_cluster_api_is_refused" {
  command = plan
  variables {
    infra_id  = null
    infra_ids = ["workload-cluster-for-the-payments-team"]
  }
  expect_failures = [aws_lambda_function.this]
}

run "a_cluster_api_name_over_63_characters_is_refused" {
  command = plan
  variables {
    infra_id      = null
    infra_ids     = ["a234567890123456789012345678901234567890123456789012345678901234"]
    cluster_kinds = { "a234567890123456789012345678901234567890123456789012345678901234" = "ClusterAPI" }
  }
  expect_failures = [var.infra_ids]
}
