# The hub of an AWS Organization: what the tagwarden module's function needs beside it to
# enforce every member account's clusters from the hub account.
#
#   member account, each region: CloudTrail / aws.tag events --spoke rule--> hub bus (<name>-hub)
#   hub bus --rule--> <name>-member-events (SQS) --mapping--> function (each event in its own account)
#   schedule --> function --SendMessageBatch--> <name>-shards (SQS) --mapping, batch 1--> function
#   member publishers --PutObject accounts/<own account>/<infraID>/...--> <name>-<hub>-org (S3)
#
# The spokes (an IAM role trusted by the function's role alone, and EventBridge rules forwarding to
# the hub bus) come from one definition here, rendered twice: a service-managed StackSet with
# auto-deployment to the chosen OUs (member_template_json), and the inputs of modules/member for
# teams who deploy per account (member_role_policy_json, member_event_patterns). The event names
# and actions come from the service descriptors (../../generated/services.json), as the hub's own.
#
# Limits relied on (each cited where used): EventBridge bus-to-bus delivery across accounts and
# Regions with a role on the target; a bus policy with aws:PrincipalOrgID; Lambda's SQS event
# source (batch size 1 for shards, MaximumConcurrency); S3 policy variables in a bucket policy.

data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  account_id = data.aws_caller_identity.current.account_id
  region     = data.aws_region.current.name
  partition  = data.aws_partition.current.partition

  bucket_name = "${var.name}-${local.account_id}-org"
  bucket_arn  = "arn:${local.partition}:s3:::${local.bucket_name}"
  prefix      = "accounts/"
  # The function's own folder in the bucket: shard outcomes, the contest state. Never an
  # account's: accounts are 12 digits.
  own = "${local.prefix}_organization/"
  # What Terraform writes for the function: the member roles' table and the roles' templates,
  # outside every account's folder and the function's own (which denies other writers).
  deployed = "_tagwarden/"

  # Each account's clusters, for its member roles: the ones `clusters` names, and `account_clusters`
  # for an account listed whole (`<account>/*`).
  named             = [for c in var.clusters : split("/", c) if !endswith(c, "/*")]
  wildcard_accounts = [for c in var.clusters : split("/", c)[0] if endswith(c, "/*")]
  all_clusters = { for a in distinct(concat([for c in local.named : c[0]], local.wildcard_accounts)) : a =>
    distinct(concat([for c in local.named : c[1] if c[0] == a], lookup(var.account_clusters, a, [])))
  }
  account_clusters = { for a, ids in local.all_clusters : a => ids if length(ids) > 0 }
  unbounded        = [for a in local.wildcard_accounts : a if length(lookup(var.account_clusters, a, [])) == 0]
}

module "member_definition" {
  source = "../member_definition"

  member_role_name          = var.member_role_name
  function_role_arn         = var.function_role_arn
  hub_event_bus_arn         = aws_cloudwatch_event_bus.hub.arn
  member_regions            = var.member_regions
  reserved_tag_key_patterns = var.reserved_tag_key_patterns
  account_clusters          = local.account_clusters
  cluster_kinds             = var.cluster_kinds
  auditor_principals        = var.auditor_principals
  partition                 = local.partition
  tags                      = var.tags
}

# Which member role writes each cluster's resources, by account and cluster: the function reads
# it to assume the right one (an account with more clusters than one role holds has several).
resource "aws_s3_object" "member_roles" {
  bucket       = module.organization_bucket.id
  key          = "${local.deployed}member-roles.json"
  content      = jsonencode(module.member_definition.member_role_of_cluster)
  content_type = "application/json"
  tags         = var.tags

  lifecycle {
    precondition {
      condition     = length(local.unbounded) == 0
      error_message = "clusters lists ${join(", ", formatlist("%s/*", local.unbounded))} without naming its clusters: its member roles may write only on what named clusters own. Add account_clusters = { \"${try(local.unbounded[0], "")}\" = [\"<infraID>\", ...] }."
    }
    precondition {
      # IAM and AWS STS quotas: a role's inline policies hold 10,240 characters (white space aside).
      condition     = alltrue([for a, roles in module.member_definition.member_roles : alltrue([for r in roles : length(r.policy_json) <= 10240])])
      error_message = "A member role's policy is over IAM's 10,240 characters: lower role_key_budget in modules/member_definition."
    }
  }
}

# --- the hub bus: what the spokes forward ------------------------------------------------------------

resource "aws_cloudwatch_event_bus" "hub" {
  name = "${var.name}-hub"
  tags = var.tags
}

# Only the spokes' forwarding roles, in the organization's accounts, may put events here, and only
# the events the spokes' rules forward ("principal `*` with an org-ID condition",
# AWS::Events::EventBusPolicy; EventBridge User Guide, "Permissions for event buses"; events:source
# and events:detail-type are PutEvents' condition keys, Service Authorization Reference). A rule
# whose target carries a role puts the events as that role, so aws:PrincipalArn is the spoke's
# `<member_role_name>-forward-<region>` (inferred from "Sending and receiving events between AWS
# accounts": an organization-wide grant needs the role on the target). EventBridge refuses an
# `aws.` source from any other caller's PutEvents (NotAuthorizedForSourceException, observed), so
# an `aws.*` event here is one a spoke's rule matched in its own account.
data "aws_iam_policy_document" "hub_bus" {
  statement {
    sid       = "SpokesForwardTheirEvents"
    actions   = ["events:PutEvents"]
    resources = [aws_cloudwatch_event_bus.hub.arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:PrincipalOrgID"
      values   = [var.organization_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:PrincipalArn"
      values   = ["arn:${local.partition}:iam::*:role/${var.member_role_name}-forward-*"]
    }

    condition {
      test     = "StringLike"
      variable = "events:source"
      values   = ["aws.*"]
    }

    condition {
      test     = "StringEquals"
      variable = "events:detail-type"
      values   = ["AWS API Call via CloudTrail", "Tag Change on Resource"]
    }
  }
}

resource "aws_cloudwatch_event_bus_policy" "hub" {
  event_bus_name = aws_cloudwatch_event_bus.hub.name
  policy         = data.aws_iam_policy_document.hub_bus.json
}

resource "aws_cloudwatch_event_rule" "member_events" {
  name           = "${var.name}-member-events"
  description    = "tagwarden: the members' forwarded events to the hub's queue"
  event_bus_name = aws_cloudwatch_event_bus.hub.name
  event_pattern  = jsonencode({ source = [{ prefix = "aws." }] })
  tags           = var.tags
}

resource "aws_cloudwatch_event_target" "member_events" {
  rule           = aws_cloudwatch_event_rule.member_events.name
  event_bus_name = aws_cloudwatch_event_bus.hub.name
  arn            = module.member_events_queue.arn
}

# --- queues --------------------------------------------------------------------------------------------

# The members' events and their dead-letter queue (../queue_with_dlq: SSE-SQS, the redrive policy,
# the Deny of requests without TLS); the queue's policy admits the hub bus's rule alone (below).
module "member_events_queue" {
  source = "../queue_with_dlq"

  name                       = "${var.name}-member-events"
  dlq_name                   = "${var.name}-org-dlq"
  visibility_timeout_seconds = 6 * var.function_timeout_seconds
  max_receive_count          = var.max_receive_count
  eventbridge_rules          = { sid = "HubBusRule", rule_arns = [aws_cloudwatch_event_rule.member_events.arn] }
  policy_documents           = [data.aws_iam_policy_document.member_events_queue.json]
  tags                       = var.tags
}

# One message per account × region (× cluster group) of a sweep; a failed shard is redelivered
# max_receive_count times, then dead-lettered with its body naming the account and region.
# FIFO, each message in its account-region's message group (crates/aws/src/organization/shards.rs,
# enqueue): the cluster groups of one account-region share its API budget, and Lambda invokes at
# most one message group at a time ("concurrent invocations are capped at the number of message
# group IDs or the maximum concurrency setting, whichever is lower", Lambda Developer Guide,
# "Configuring scaling behavior for SQS event source mappings"), so they run one after another
# while other account-regions run beside them. High-throughput FIFO (deduplication and the
# throughput limit per message group; SQS Developer Guide, "High throughput for FIFO queues").
# Its dead-letter queue is FIFO too, as SQS requires.
module "shards_queue" {
  source = "../queue_with_dlq"

  name                       = "${var.name}-shards.fifo"
  dlq_name                   = "${var.name}-shards-dlq.fifo"
  fifo_queue                 = true
  fifo_high_throughput       = true
  visibility_timeout_seconds = 6 * var.function_timeout_seconds
  max_receive_count          = var.max_receive_count
  tags                       = var.tags
}

# Something dead-lettered is something not enforced: an alarm on each dead-letter queue, to the
# tagwarden module's topic (its sns_topic_arn output) when given.
resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  for_each = { member_events = module.member_events_queue.dlq_name, shards = module.shards_queue.dlq_name }

  alarm_name          = "${var.name}-org-${replace(each.key, "_", "-")}-dead-letters"
  alarm_description   = "tagwarden organization: ${each.key == "shards" ? "sweep shards (their bodies name the account and region)" : "member events"} kept failing and are in ${each.value}; the function's logs say why. Inspect, then redrive."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = each.value }
  statistic           = "Maximum"
  period              = 300
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = compact([var.alarm_sns_topic_arn])
  ok_actions          = compact([var.alarm_sns_topic_arn])
  tags                = var.tags
}

# The members the hub could not sweep, from the function's EMF metrics (namespace TagWarden,
# dimension Cloud = aws: the organization's totals, emitted every scheduled run): a member role
# refused or missing (a deleted or edited spoke is otherwise silent), an account over the folder
# cap, an account the run's deadline did not reach, and accounts whose last sweep is older than
# twice the schedule. Each alarm's description names the metric with the Account dimension that
# says which account.
locals {
  member_alarms = {
    member-refused     = { metric = "MemberRefused", what = "a member role was refused or is missing (AssumeRole failed): that account is not enforced. `tagwarden status --organization` names it and the fix; the metric's Account dimension says which. An SCP that denies changing the member roles to all but the StackSet's execution role keeps them from being removed." }
    member-over-cap    = { metric = "MemberOverCap", what = "an account's folder holds more folders than the cap (TAGWARDEN_MEMBER_FOLDERS_MAX): its clusters are not swept. The metric's Account dimension says which; remove the folders that are not a cluster's or raise the cap." }
    member-not-reached = { metric = "MemberNotReached", what = "the scheduled run's deadline came before some accounts were sent: they are taken first by the next run. Persisting: raise the function's timeout or memory." }
    member-sweep-stale = { metric = "MemberSweepStale", what = "some accounts' last completed sweep is older than twice the schedule (MemberSweepAge by Account says which)." }
  }
}

resource "aws_cloudwatch_metric_alarm" "members" {
  for_each = local.member_alarms

  alarm_name          = "${var.name}-org-${each.key}"
  alarm_description   = "tagwarden organization: ${each.value.what}"
  namespace           = "TagWarden"
  metric_name         = each.value.metric
  dimensions          = { Cloud = "aws" }
  statistic           = "Maximum"
  period              = 3600
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  evaluation_periods  = 1
  treat_missing_data  = "notBreaching"
  alarm_actions       = compact([var.alarm_sns_topic_arn])
  ok_actions          = compact([var.alarm_sns_topic_arn])
  tags                = var.tags
}

data "aws_iam_policy_document" "member_events_queue" {
  # The hub bus's rule may send (the module's eventbridge_rules); nobody else, whatever their own grants: an event here names a member account and makes the
  # function read (and maybe write) there. aws:SourceArn is in the request only when a service
  # sends on a resource's behalf (global condition keys), so every other sender is refused.
  statement {
    sid       = "OnlyTheHubBusRule"
    effect    = "Deny"
    actions   = ["sqs:SendMessage"]
    resources = [module.member_events_queue.arn]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.member_events.arn]
    }
  }
}

resource "aws_lambda_event_source_mapping" "member_events" {
  event_source_arn = module.member_events_queue.arn
  function_name    = var.function_arn
  # As the tagwarden module's events mapping (sqs_batch_size, sqs_batching_window_seconds): a
  # scale-up's events share their reads and writes.
  batch_size                         = 100
  maximum_batching_window_in_seconds = 2
  function_response_types            = ["ReportBatchItemFailures"]
}

# Batch size 1: an invocation sweeps one shard, well inside Lambda's 15 minutes.
resource "aws_lambda_event_source_mapping" "shards" {
  event_source_arn        = module.shards_queue.arn
  function_name           = var.function_arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.shard_maximum_concurrency
  }
}

# --- the members' policy folders -----------------------------------------------------------------------

module "organization_bucket" {
  source = "../private_bucket"

  name = local.bucket_name
  tags = var.tags
  lifecycle_rule = {
    id              = "expire-superseded-policy-versions"
    noncurrent_days = 30
  }
  policy_documents = [data.aws_iam_policy_document.organization_bucket.json]
}

# The bucket of one version before the private_bucket module: its resources, moved into it.
moved {
  from = aws_s3_bucket.organization
  to   = module.organization_bucket.aws_s3_bucket.this
}

moved {
  from = aws_s3_bucket_public_access_block.organization
  to   = module.organization_bucket.aws_s3_bucket_public_access_block.this
}

moved {
  from = aws_s3_bucket_versioning.organization
  to   = module.organization_bucket.aws_s3_bucket_versioning.this
}

moved {
  from = aws_s3_bucket_server_side_encryption_configuration.organization
  to   = module.organization_bucket.aws_s3_bucket_server_side_encryption_configuration.this
}

moved {
  from = aws_s3_bucket_lifecycle_configuration.organization
  to   = module.organization_bucket.aws_s3_bucket_lifecycle_configuration.this
}

moved {
  from = aws_s3_bucket_policy.organization
  to   = module.organization_bucket.aws_s3_bucket_policy.this
}

# A member's policy written: the function sends that account's shards for the clusters written (a
# policy document only: the status reports and shard outcomes it writes itself are .json and
# filtered out by the function at no call; YAML documents trigger here, a .json policy is swept by
# the next scheduled sweep).
resource "aws_s3_bucket_notification" "organization" {
  bucket = module.organization_bucket.id

  dynamic "lambda_function" {
    for_each = toset([".yaml", ".yml"])
    content {
      id                  = "tagwarden-member-policy${replace(lambda_function.key, ".", "-")}"
      lambda_function_arn = var.function_arn
      events              = ["s3:ObjectCreated:*"]
      filter_prefix       = local.prefix
      filter_suffix       = lambda_function.key
    }
  }

  depends_on = [aws_lambda_permission.organization_bucket]
}

resource "aws_lambda_permission" "organization_bucket" {
  statement_id   = "AllowOrganizationBucketNotification"
  action         = "lambda:InvokeFunction"
  function_name  = var.function_arn
  principal      = "s3.amazonaws.com"
  source_arn     = local.bucket_arn
  source_account = local.account_id
}

# Who writes what in the bucket, held by the bucket policy for every principal, the hub account's
# own too (a same-account grant needs no identity policy, and a same-account identity policy needs
# no bucket grant: so the Denies, not only the Allows).
# - A cluster's publisher writes only its own folder, `accounts/<its account>/<its infraID>/`:
#   the principal is tagged `tagwarden-cluster = <infraID>`, and the policy variables
#   ${aws:PrincipalAccount} and ${aws:PrincipalTag/tagwarden-cluster} name the folder (IAM User
#   Guide, "IAM policy elements: Variables and tags": variables in a resource policy's `Resource`,
#   "only in the resource portion of the ARN"; any single-valued key, which both are; a variable
#   whose key is absent matches nothing). A publisher of a cluster set (HyperShift, Cluster API)
#   writes many clusters' folders: tagged `tagwarden-publisher = cluster-set`, it may write any
#   folder of its own account.
# - The function writes the clusters' status reports and its own folder; `contest_operators`
#   write the contest state beside it (a lift); nobody else writes there.
locals {
  cluster_tag   = "tagwarden-cluster"
  publisher_tag = "tagwarden-publisher"
  own_folder    = "${local.bucket_arn}/${local.own}*"
}

data "aws_iam_policy_document" "organization_bucket" {
  statement {
    sid       = "PublishOwnCluster"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${local.bucket_arn}/${local.prefix}$${aws:PrincipalAccount}/$${aws:PrincipalTag/${local.cluster_tag}}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:PrincipalOrgID"
      values   = [var.organization_id]
    }
  }

  statement {
    sid       = "PublishClusterSet"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${local.bucket_arn}/${local.prefix}$${aws:PrincipalAccount}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:PrincipalOrgID"
      values   = [var.organization_id]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:PrincipalTag/${local.publisher_tag}"
      values   = ["cluster-set"]
    }
  }

  # An untagged principal writes no policy, whatever it is granted elsewhere.
  statement {
    sid       = "DenyUntaggedPublishers"
    effect    = "Deny"
    actions   = ["s3:PutObject"]
    resources = ["${local.bucket_arn}/${local.prefix}*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotEquals"
      variable = "aws:PrincipalArn"
      values   = concat([var.function_role_arn], var.contest_operators)
    }

    condition {
      test     = "Null"
      variable = "aws:PrincipalTag/${local.cluster_tag}"
      values   = ["true"]
    }

    condition {
      test     = "StringNotEquals"
      variable = "aws:PrincipalTag/${local.publisher_tag}"
      values   = ["cluster-set"]
    }
  }

  # A cluster's publisher writes its own folder only, whatever it is granted elsewhere.
  statement {
    sid           = "DenyOtherClustersFolders"
    effect        = "Deny"
    actions       = ["s3:PutObject"]
    not_resources = ["${local.bucket_arn}/${local.prefix}$${aws:PrincipalAccount}/$${aws:PrincipalTag/${local.cluster_tag}}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotEquals"
      variable = "aws:PrincipalArn"
      values   = concat([var.function_role_arn], var.contest_operators)
    }

    condition {
      test     = "Null"
      variable = "aws:PrincipalTag/${local.cluster_tag}"
      values   = ["false"]
    }

    condition {
      test     = "StringNotEquals"
      variable = "aws:PrincipalTag/${local.publisher_tag}"
      values   = ["cluster-set"]
    }
  }

  # The function's folder (shard outcomes, the contest state): written by the function alone, and
  # the contest operators for the contest state. Deleting stays an administrator's grant (an
  # uninstall empties the bucket): a deleted contest state lifts its contests, so grant
  # s3:DeleteObject on this bucket to administrators only.
  statement {
    sid       = "DenyOwnFolderToOthers"
    effect    = "Deny"
    actions   = ["s3:PutObject"]
    resources = [local.own_folder]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotEquals"
      variable = "aws:PrincipalArn"
      values   = concat([var.function_role_arn], var.contest_operators)
    }
  }

  dynamic "statement" {
    for_each = length(var.contest_operators) > 0 ? [1] : []
    content {
      sid       = "ContestOperatorsLift"
      actions   = ["s3:GetObject", "s3:PutObject"]
      resources = ["${local.bucket_arn}/${local.own}contests/*"]

      principals {
        type        = "AWS"
        identifiers = var.contest_operators
      }
    }
  }

  dynamic "statement" {
    for_each = length(var.contest_operators) > 0 ? [1] : []
    content {
      sid           = "ContestOperatorsWriteContestsOnly"
      effect        = "Deny"
      actions       = ["s3:PutObject"]
      not_resources = ["${local.bucket_arn}/${local.own}contests/*"]

      principals {
        type        = "*"
        identifiers = ["*"]
      }

      condition {
        test     = "ArnEquals"
        variable = "aws:PrincipalArn"
        values   = var.contest_operators
      }
    }
  }
}

# --- what the hub's function may do beside its own account ---------------------------------------------

data "aws_iam_policy_document" "function" {
  # Only the member roles, and only in the organization's accounts: aws:ResourceOrgID is the
  # organization of the account that owns the role assumed. The global condition keys page lists
  # the actions that do not support it (EBS, some EC2 actions, EventBridge, some Route 53 actions)
  # and STS is not among them; AWS's announcement of the resource keys (What's New, April 2022,
  # "control access based on the account, OU or organization that contains your resources") gives
  # this very use, denying sts:AssumeRole unless aws:ResourceAccount matches, and AWS's data
  # perimeter examples apply aws:ResourceOrgID to every action. StringEquals fails closed: a role
  # in an account outside any organization has no such key and is not matched.
  statement {
    sid       = "AssumeMemberRoles"
    actions   = ["sts:AssumeRole"]
    resources = ["arn:${local.partition}:iam::*:role/${var.member_role_name}", "arn:${local.partition}:iam::*:role/${var.member_role_name}-*"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceOrgID"
      values   = [var.organization_id]
    }
  }

  statement {
    sid       = "SendShards"
    actions   = ["sqs:SendMessage"]
    resources = [module.shards_queue.arn]
  }

  statement {
    sid       = "ConsumeQueues"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
    resources = [module.shards_queue.arn, module.member_events_queue.arn]
  }

  statement {
    sid       = "ListPolicies"
    actions   = ["s3:ListBucket"]
    resources = [local.bucket_arn]
  }

  statement {
    sid       = "ReadPolicies"
    actions   = ["s3:GetObject"]
    resources = ["${local.bucket_arn}/${local.prefix}*", "${local.bucket_arn}/${local.deployed}member-roles.json"]
  }

  # The clusters' status reports beside their policies, and its own folder: never a policy.
  statement {
    sid       = "WriteReports"
    actions   = ["s3:PutObject"]
    resources = ["${local.bucket_arn}/${local.prefix}*/tagwarden-status.json", local.own_folder]
  }
}

resource "aws_iam_role_policy" "function" {
  name   = "organization"
  role   = var.function_role_name
  policy = data.aws_iam_policy_document.function.json
}

# --- the spokes, deployed by CloudFormation to every account of the OUs --------------------------------

# Service-managed, with auto-deployment: an account added to a target OU gets its spoke with no
# apply, and one removed loses it (CloudFormation User Guide, "StackSets with service-managed
# permissions"). The management account itself is never a target of a service-managed StackSet:
# deploy modules/member there if it holds clusters.
resource "aws_cloudformation_stack_set" "member" {
  count = length(var.member_organizational_unit_ids) > 0 ? 1 : 0

  name             = "${var.name}-member"
  description      = "tagwarden spokes: the member role and the event rules forwarding to ${aws_cloudwatch_event_bus.hub.arn}"
  permission_model = "SERVICE_MANAGED"
  call_as          = var.stack_set_call_as
  capabilities     = ["CAPABILITY_NAMED_IAM"]
  template_body    = module.member_definition.member_template_json
  tags             = var.tags

  auto_deployment {
    enabled                          = true
    retain_stacks_on_account_removal = false
  }

  operation_preferences {
    failure_tolerance_percentage = 10
    max_concurrent_percentage    = 25
    region_concurrency_type      = "PARALLEL"
  }

  lifecycle {
    # Set by CloudFormation for service-managed StackSets (hashicorp/terraform-provider-aws#23464).
    ignore_changes = [administration_role_arn]
  }
}

resource "aws_cloudformation_stack_set_instance" "member" {
  for_each = length(var.member_organizational_unit_ids) > 0 ? toset(var.member_regions) : toset([])

  stack_set_name = aws_cloudformation_stack_set.member[0].name
  region         = each.key
  call_as        = var.stack_set_call_as

  deployment_targets {
    organizational_unit_ids = var.member_organizational_unit_ids
  }
}

# Each member account's roles, rendered for that account from its clusters: a StackSet of its own
# deployed to that account alone (the OUs intersected with the account: CloudFormation's
# DeploymentTargets AccountFilterType INTERSECTION), in the region that holds the global roles.
# The hub's own account is never a service-managed target: its roles come from modules/member
# (`hub_spoke` in the example). A template over the 51,200 bytes CloudFormation takes inline is
# read from the bucket (up to 1 MB: CloudFormation quotas).
locals {
  role_accounts  = length(var.member_organizational_unit_ids) > 0 ? { for a, t in module.member_definition.member_role_templates_json : a => t if a != local.account_id } : {}
  inline_max     = 51200
  role_region    = contains(var.member_regions, "us-east-1") ? "us-east-1" : var.member_regions[0]
  large_template = { for a, t in local.role_accounts : a => t if length(t) > local.inline_max }
}

resource "aws_s3_object" "member_role_template" {
  for_each = local.large_template

  bucket       = module.organization_bucket.id
  key          = "${local.deployed}templates/member-roles-${each.key}.json"
  content      = each.value
  content_type = "application/json"
  tags         = var.tags
}

resource "aws_cloudformation_stack_set" "member_roles" {
  for_each = local.role_accounts

  name             = "${var.name}-member-roles-${each.key}"
  description      = "tagwarden member roles of account ${each.key}: each writes tags only on what its clusters own"
  permission_model = "SERVICE_MANAGED"
  call_as          = var.stack_set_call_as
  capabilities     = ["CAPABILITY_NAMED_IAM"]
  template_body    = contains(keys(local.large_template), each.key) ? null : each.value
  template_url     = contains(keys(local.large_template), each.key) ? "https://${module.organization_bucket.bucket_regional_domain_name}/${aws_s3_object.member_role_template[each.key].key}?versionId=${aws_s3_object.member_role_template[each.key].version_id}" : null
  tags             = var.tags

  auto_deployment {
    enabled                          = false
    retain_stacks_on_account_removal = false
  }

  lifecycle {
    ignore_changes = [administration_role_arn]
  }
}

resource "aws_cloudformation_stack_set_instance" "member_roles" {
  for_each = local.role_accounts

  stack_set_name = aws_cloudformation_stack_set.member_roles[each.key].name
  region         = local.role_region
  call_as        = var.stack_set_call_as

  deployment_targets {
    organizational_unit_ids = var.member_organizational_unit_ids
    accounts                = [each.key]
    account_filter_type     = "INTERSECTION"
  }

  # The spoke's shared part first: an upgrade removes the role from it before this creates it.
  depends_on = [aws_cloudformation_stack_set_instance.member]
}

# The queues of one version before ../queue_with_dlq, moved into it.

moved {
  from = aws_sqs_queue.member_events
  to   = module.member_events_queue.aws_sqs_queue.this
}

moved {
  from = aws_sqs_queue.dlq
  to   = module.member_events_queue.aws_sqs_queue.dlq
}

moved {
  from = aws_sqs_queue_policy.member_events
  to   = module.member_events_queue.aws_sqs_queue_policy.this
}

moved {
  from = aws_sqs_queue.shards
  to   = module.shards_queue.aws_sqs_queue.this
}

moved {
  from = aws_sqs_queue.shards_dlq
  to   = module.shards_queue.aws_sqs_queue.dlq
}
