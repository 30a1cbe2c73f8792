# The function's execution role: exactly the calls the code makes (local.code_actions) plus what
# the Lambda service does on its behalf (local.platform_actions). Writes are conditioned on the
# ownership tag wherever the service evaluates aws:ResourceTag for that action; never Delete*,
# Untag* or RemoveTags.

locals {
  # Every AWS API action the tagwarden code calls, per service. This is the one list to compare
  # with the Rust code (output `iam_actions`); the statements below only pick from it.
  code_actions = {
    ec2 = {
      tag_read  = ["ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeVolumes"]
      tag_write = ["ec2:CreateTags"]
    }
    s3 = {
      tag_read     = ["s3:GetBucketTagging"]
      tag_write    = ["s3:PutBucketTagging"]
      policy_read  = ["s3:GetObject", "s3:ListBucket"]
      status_write = ["s3:PutObject"]
    }
    elasticloadbalancing = {
      tag_read  = ["elasticloadbalancing:DescribeTags"]
      tag_write = ["elasticloadbalancing:AddTags"]
    }
    iam = {
      tag_list = [
        "iam:ListInstanceProfiles", "iam:ListOpenIDConnectProviders", "iam:ListPolicies", "iam:ListRoles", "iam:ListUsers",
      ]
      tag_read = [
        "iam:ListInstanceProfileTags", "iam:ListOpenIDConnectProviderTags", "iam:ListPolicyTags",
        "iam:ListRoleTags", "iam:ListUserTags",
      ]
      tag_write = [
        "iam:TagInstanceProfile", "iam:TagOpenIDConnectProvider", "iam:TagPolicy", "iam:TagRole", "iam:TagUser",
      ]
    }
    tag = {
      tag_read = ["tag:GetResources"]
    }
    ssm = {
      policy_read  = ["ssm:GetParameter"]
      status_write = ["ssm:PutParameter"]
    }
  }

  # Not called by the code: the Lambda service uses these for logging, the queue mapping and the
  # asynchronous-invocation dead-letter queue (and KMS when a key is configured).
  platform_actions = {
    logs = ["logs:CreateLogStream", "logs:PutLogEvents"]
    sqs  = ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:SendMessage"]
    kms  = var.kms_key_arn == null ? [] : ["kms:Decrypt", "kms:GenerateDataKey"]
  }

  # Ownership condition (DESIGN.md §9) and a guard that the function never writes reserved keys
  # (ownership tags, Name, kubernetes.io/ and openshift.io/ namespaces; DESIGN.md §3-4). aws:TagKeys
  # only lists the keys being written, so it suits the additive APIs; S3's replace-style
  # PutBucketTagging sends the ownership tag back and cannot use it.
  reserved_key_patterns = ["kubernetes.io/*", "*.kubernetes.io/*", "openshift.io/*", "*.openshift.io/*"]

  arn_prefix = "arn:${local.partition}"

  ec2_resource_arns = [
    "${local.arn_prefix}:ec2:${local.region}:${local.account_id}:*",
    "${local.arn_prefix}:ec2:${local.region}::image/*", # AMI and snapshot ARNs have no account
    "${local.arn_prefix}:ec2:${local.region}::snapshot/*",
  ]
  elbv2_resource_arns = [
    "${local.arn_prefix}:elasticloadbalancing:${local.region}:${local.account_id}:loadbalancer/*",
    "${local.arn_prefix}:elasticloadbalancing:${local.region}:${local.account_id}:targetgroup/*",
  ]
  iam_resource_arns = [
    for t in ["role", "user", "instance-profile", "policy", "oidc-provider"] : "${local.arn_prefix}:iam::${local.account_id}:${t}/*"
  ]
  s3_bucket_arns = [for p in var.s3_bucket_name_patterns : "${local.arn_prefix}:s3:::${p}"]
}

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "lambda" {
  name               = local.name
  description        = "tagwarden function for cluster ${var.infra_id}"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "lambda" {

  # --- Lambda platform ---------------------------------------------------------------------------

  statement {
    sid       = "OwnLogGroup"
    actions   = local.platform_actions.logs
    resources = ["${aws_cloudwatch_log_group.lambda.arn}:*"]
  }

  statement {
    sid       = "ReceiveEventsQueue"
    actions   = ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"]
    resources = [aws_sqs_queue.events.arn]
  }

  statement {
    sid       = "AsyncDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.dlq.arn]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]
    content {
      sid       = "ModuleKey"
      actions   = local.platform_actions.kms
      resources = [statement.value]
    }
  }

  # --- Reads ---------------------------------------------------------------------------------------

  # Unconditioned and "*": EC2 and ELBv2 Describe* and the account-wide listings support no
  # resource-level permissions; the function must read a resource's tags to learn whether it is
  # owned, so reads cannot be conditioned on ownership.
  statement {
    sid = "ReadWithoutResourceType"
    actions = concat(
      local.code_actions.ec2.tag_read,
      local.code_actions.elasticloadbalancing.tag_read,
      local.code_actions.iam.tag_list,
      local.code_actions.tag.tag_read,
    )
    resources = ["*"]
  }

  # Unconditioned for the same reason (ownership is learned by reading), but limited to this account.
  statement {
    sid       = "ReadIamTags"
    actions   = local.code_actions.iam.tag_read
    resources = local.iam_resource_arns
  }

  statement {
    sid       = "ReadBucketTags"
    actions   = local.code_actions.s3.tag_read
    resources = local.s3_bucket_arns
  }

  # --- Tag writes, conditioned on the ownership tag --------------------------------------------------

  statement {
    sid       = "WriteOwnedEc2Tags"
    actions   = local.code_actions.ec2.tag_write
    resources = local.ec2_resource_arns

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/${local.ownership_tag_key}"
      values   = [local.ownership_tag_value]
    }
    condition {
      test     = "ForAllValues:StringNotLike"
      variable = "aws:TagKeys"
      values   = local.reserved_key_patterns
    }
    condition {
      test     = "ForAllValues:StringNotEqualsIgnoreCase"
      variable = "aws:TagKeys"
      values   = ["Name"]
    }
  }

  statement {
    sid       = "WriteOwnedElbv2Tags"
    actions   = local.code_actions.elasticloadbalancing.tag_write
    resources = local.elbv2_resource_arns

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/${local.ownership_tag_key}"
      values   = [local.ownership_tag_value]
    }
    condition {
      test     = "ForAllValues:StringNotLike"
      variable = "aws:TagKeys"
      values   = local.reserved_key_patterns
    }
    condition {
      test     = "ForAllValues:StringNotEqualsIgnoreCase"
      variable = "aws:TagKeys"
      values   = ["Name"]
    }
  }

  # IAM evaluates aws:ResourceTag for roles, users, instance profiles, customer managed policies
  # and OIDC providers (IAM User Guide, "Controlling access to IAM resources").
  statement {
    sid       = "WriteOwnedIamTags"
    actions   = local.code_actions.iam.tag_write
    resources = local.iam_resource_arns

    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/${local.ownership_tag_key}"
      values   = [local.ownership_tag_value]
    }
    condition {
      test     = "ForAllValues:StringNotLike"
      variable = "aws:TagKeys"
      values   = local.reserved_key_patterns
    }
    condition {
      test     = "ForAllValues:StringNotEqualsIgnoreCase"
      variable = "aws:TagKeys"
      values   = ["Name"]
    }
  }

  # Not conditioned on ownership: S3 does not evaluate aws:ResourceTag for PutBucketTagging on
  # general purpose buckets. Bucket-tag ABAC exists only for buckets with ABAC enabled, and those
  # reject PutBucketTagging altogether (tags go through s3:TagResource there). The limits are the
  # bucket name patterns (var.s3_bucket_name_patterns) and the code's ownership check.
  statement {
    sid       = "WriteBucketTags"
    actions   = local.code_actions.s3.tag_write
    resources = local.s3_bucket_arns
  }

  # --- Policy source and status report -------------------------------------------------------------

  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "ReadPolicyObjects"
      actions   = ["s3:GetObject"]
      resources = [local.s3_layered ? "${local.bucket_arn}/${var.policy_prefix}*" : "${local.bucket_arn}/${local.s3_key}"]
    }
  }

  # ListBucket turns a missing key into NoSuchKey (not AccessDenied) and lists the layers.
  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "ListPolicyObjects"
      actions   = ["s3:ListBucket"]
      resources = [local.bucket_arn]

      condition {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = [local.s3_layered ? "${var.policy_prefix}*" : local.s3_key]
      }
    }
  }

  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "WriteStatusReport"
      actions   = local.code_actions.s3.status_write
      resources = ["${local.bucket_arn}/${local.status_key}"]
    }
  }

  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "ReadPolicyParameter"
      actions   = local.code_actions.ssm.policy_read
      resources = [local.parameter_arn]
    }
  }

  # The status report: a sibling "<name>-status" parameter, the only one the function writes.
  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "WriteStatusParameter"
      actions   = local.code_actions.ssm.status_write
      resources = ["${local.parameter_arn}-status"]
    }
  }
}

resource "aws_iam_role_policy" "lambda" {
  name   = "tagwarden"
  role   = aws_iam_role.lambda.id
  policy = data.aws_iam_policy_document.lambda.json
}
