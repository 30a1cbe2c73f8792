# The hub of an AWS Organization (issue 31): what the tagwarden module's function needs beside it to
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
  prefix      = "accounts/"
}

module "member_definition" {
  source = "../member_definition"

  member_role_name          = var.member_role_name
  function_role_arn         = var.function_role_arn
  hub_event_bus_arn         = aws_cloudwatch_event_bus.hub.arn
  member_regions            = var.member_regions
  reserved_tag_key_patterns = var.reserved_tag_key_patterns
  partition                 = local.partition
  tags                      = var.tags
}

# --- the hub bus: what the spokes forward ------------------------------------------------------------

resource "aws_cloudwatch_event_bus" "hub" {
  name = "${var.name}-hub"
  tags = var.tags
}

# Only the organization's accounts may put events here ("principal `*` with an org-ID condition",
# AWS::Events::EventBusPolicy; EventBridge User Guide, "Permissions for event buses").
data "aws_iam_policy_document" "hub_bus" {
  statement {
    sid       = "OrganizationMembersPutEvents"
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
  arn            = aws_sqs_queue.member_events.arn
}

# --- queues --------------------------------------------------------------------------------------------

resource "aws_sqs_queue" "dlq" {
  name                      = "${var.name}-org-dlq"
  message_retention_seconds = 1209600 # 14 days, SQS's maximum: time to look at what failed
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue" "member_events" {
  name                       = "${var.name}-member-events"
  visibility_timeout_seconds = 6 * var.function_timeout_seconds
  sqs_managed_sse_enabled    = true
  redrive_policy             = jsonencode({ deadLetterTargetArn = aws_sqs_queue.dlq.arn, maxReceiveCount = var.max_receive_count })
  tags                       = var.tags
}

# One message per account × region (× cluster group) of a sweep; a failed shard is redelivered
# max_receive_count times, then dead-lettered with its body naming the account and region.
# FIFO, each message in its account-region's message group (crates/aws/src/organization.rs,
# enqueue): the cluster groups of one account-region share its API budget, and Lambda invokes at
# most one message group at a time ("concurrent invocations are capped at the number of message
# group IDs or the maximum concurrency setting, whichever is lower", Lambda Developer Guide,
# "Configuring scaling behavior for SQS event source mappings"), so they run one after another
# while other account-regions run beside them. High-throughput FIFO (deduplication and the
# throughput limit per message group; SQS Developer Guide, "High throughput for FIFO queues").
resource "aws_sqs_queue" "shards" {
  name                       = "${var.name}-shards.fifo"
  fifo_queue                 = true
  deduplication_scope        = "messageGroup"
  fifo_throughput_limit      = "perMessageGroupId"
  visibility_timeout_seconds = 6 * var.function_timeout_seconds
  sqs_managed_sse_enabled    = true
  redrive_policy             = jsonencode({ deadLetterTargetArn = aws_sqs_queue.shards_dlq.arn, maxReceiveCount = var.max_receive_count })
  tags                       = var.tags
}

# "The dead-letter queue of a FIFO queue must also be a FIFO queue" (SQS Developer Guide, "Using
# dead-letter queues in Amazon SQS").
resource "aws_sqs_queue" "shards_dlq" {
  name                      = "${var.name}-shards-dlq.fifo"
  fifo_queue                = true
  message_retention_seconds = 1209600 # 14 days, SQS's maximum
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

# Something dead-lettered is something not enforced: an alarm on each dead-letter queue, to the
# tagwarden module's topic (its sns_topic_arn output) when given.
resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  for_each = { member_events = aws_sqs_queue.dlq.name, shards = aws_sqs_queue.shards_dlq.name }

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

data "aws_iam_policy_document" "member_events_queue" {
  statement {
    sid       = "HubBusRule"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.member_events.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.member_events.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "member_events" {
  queue_url = aws_sqs_queue.member_events.id
  policy    = data.aws_iam_policy_document.member_events_queue.json
}

resource "aws_lambda_event_source_mapping" "member_events" {
  event_source_arn = aws_sqs_queue.member_events.arn
  function_name    = var.function_arn
  # As the tagwarden module's events mapping (sqs_batch_size, sqs_batching_window_seconds): a
  # scale-up's events share their reads and writes.
  batch_size                         = 100
  maximum_batching_window_in_seconds = 2
  function_response_types            = ["ReportBatchItemFailures"]
}

# Batch size 1: an invocation sweeps one shard, well inside Lambda's 15 minutes.
resource "aws_lambda_event_source_mapping" "shards" {
  event_source_arn        = aws_sqs_queue.shards.arn
  function_name           = var.function_arn
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.shard_maximum_concurrency
  }
}

# --- the members' policy folders -----------------------------------------------------------------------

resource "aws_s3_bucket" "organization" {
  #checkov:skip=CKV_AWS_18: server access logging needs a second, log-receiving bucket; policy writes are few and visible in each member's CloudTrail.
  #checkov:skip=CKV_AWS_144: cross-region replication is out of scope: every policy is re-publishable from its cluster, and the bucket is versioned.
  #checkov:skip=CKV_AWS_145: SSE-S3, not KMS: every member account's publishers write here, and a customer key would need a grant for each account in its key policy.
  bucket = local.bucket_name
  tags   = var.tags
}

resource "aws_s3_bucket_lifecycle_configuration" "organization" {
  bucket = aws_s3_bucket.organization.id

  rule {
    id     = "expire-superseded-policy-versions"
    status = "Enabled"

    filter {}

    noncurrent_version_expiration {
      noncurrent_days = 30
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }
}

# A member's policy written: the function sends that account's shards for the clusters written (a
# policy document only: the status reports and shard outcomes it writes itself are .json and
# filtered out by the function at no call; YAML documents trigger here, a .json policy is swept by
# the next scheduled sweep).
resource "aws_s3_bucket_notification" "organization" {
  bucket = aws_s3_bucket.organization.id

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
  source_arn     = aws_s3_bucket.organization.arn
  source_account = local.account_id
}

resource "aws_s3_bucket_versioning" "organization" {
  bucket = aws_s3_bucket.organization.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_public_access_block" "organization" {
  bucket                  = aws_s3_bucket.organization.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "organization" {
  bucket = aws_s3_bucket.organization.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

# A member account's publishers write and read only under their own account's folder: the policy
# variable ${aws:PrincipalAccount} in the resource with the organization's id in the condition. IAM
# User Guide, "IAM policy elements: Variables and tags": variables work in resource policies, "You
# can use any single-valued condition key as a variable", and in `Resource` "only in the resource
# portion of the ARN" (after the fifth colon, as here); aws:PrincipalAccount is single-valued and
# "included in the request context for all requests" (global condition context keys). Variables
# need Version 2012-10-17, which aws_iam_policy_document writes. So an account can never publish
# a policy the hub enforces in another account.
data "aws_iam_policy_document" "organization_bucket" {
  statement {
    sid       = "MembersOwnFolder"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.organization.arn}/${local.prefix}$${aws:PrincipalAccount}/*"]

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
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.organization.arn, "${aws_s3_bucket.organization.arn}/*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "organization" {
  bucket = aws_s3_bucket.organization.id
  policy = data.aws_iam_policy_document.organization_bucket.json

  depends_on = [aws_s3_bucket_public_access_block.organization]
}

# --- what the hub's function may do beside its own account ---------------------------------------------

data "aws_iam_policy_document" "function" {
  # Only the member role, and only in the organization's accounts (aws:ResourceOrgID, the account
  # of the role assumed). The key is "included in the request context only if the account that
  # owns the resource is a member of an organization", and STS is not among the actions the global
  # condition keys page says it does not support; that it holds for sts:AssumeRole is inferred
  # from that list (AWS's data perimeter examples apply it to every action of an identity).
  statement {
    sid       = "AssumeMemberRoles"
    actions   = ["sts:AssumeRole"]
    resources = ["arn:${local.partition}:iam::*:role/${var.member_role_name}"]

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceOrgID"
      values   = [var.organization_id]
    }
  }

  statement {
    sid       = "SendShards"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.shards.arn]
  }

  statement {
    sid       = "ConsumeQueues"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
    resources = [aws_sqs_queue.shards.arn, aws_sqs_queue.member_events.arn]
  }

  statement {
    sid       = "ReadPolicies"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.organization.arn]
  }

  # The policies, the clusters' status reports beside them, the shards' outcomes.
  statement {
    sid       = "ReadPoliciesWriteReports"
    actions   = ["s3:GetObject", "s3:PutObject"]
    resources = ["${aws_s3_bucket.organization.arn}/${local.prefix}*"]
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
