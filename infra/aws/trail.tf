# The function sees creations only through CloudTrail ("AWS API Call via CloudTrail"
# events reach EventBridge only for what a trail records: EventBridge User Guide, "Events from AWS
# services"), and nothing else tells a deployment that no trail exists. An account that has a
# trail recording management events needs none of this (check it:
# docs/src/guides/aws-account.md, "Is a trail recording?"); one that has none sets
# create_trail = true and gets a multi-Region trail of management events (read and write) with
# its own encrypted bucket.
#
# The bucket policy is the one the CloudTrail User Guide requires ("Amazon S3 bucket policy for
# CloudTrail"): s3:GetBucketAcl on the bucket and s3:PutObject on AWSLogs/<account>/* with
# s3:x-amz-acl = bucket-owner-full-control, for the service principal cloudtrail.amazonaws.com,
# each conditioned on aws:SourceArn = the trail's ARN (the guide's "security best practice"). The
# ARN is built from the name (not read from the trail): CloudTrail checks the policy when the trail
# is created, so the policy exists first.

locals {
  trail_name   = "${local.name}-trail"
  trail_arn    = "arn:${local.partition}:cloudtrail:${local.region}:${local.account_id}:trail/${local.trail_name}"
  trail_bucket = coalesce(var.trail_bucket_name, "${local.name}-trail-${local.account_id}")
  # Known before the bucket exists, so its policy can be rendered beside it.
  trail_bucket_arn = "arn:${local.partition}:s3:::${local.trail_bucket}"
}

module "trail_bucket" {
  source = "./modules/private_bucket"
  count  = var.create_trail ? 1 : 0

  name          = local.trail_bucket
  force_destroy = var.trail_bucket_force_destroy
  tags          = local.tags
  kms_key_arn   = var.kms_key_arn
  lifecycle_rule = {
    id              = "expire-trail-logs"
    noncurrent_days = 1
    expiration_days = var.trail_log_retention_days
  }
  policy_documents = [data.aws_iam_policy_document.trail_bucket[0].json]
}

data "aws_iam_policy_document" "trail_bucket" {
  count = var.create_trail ? 1 : 0

  statement {
    sid       = "AWSCloudTrailAclCheck"
    actions   = ["s3:GetBucketAcl"]
    resources = [local.trail_bucket_arn]
    principals {
      type        = "Service"
      identifiers = ["cloudtrail.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceArn"
      values   = [local.trail_arn]
    }
  }

  statement {
    sid     = "AWSCloudTrailWrite"
    actions = ["s3:PutObject"]
    # An organization trail also writes each member account's files under the organization's
    # id (CloudTrail User Guide, "Amazon S3 bucket policy for CloudTrail", organization trails).
    resources = concat(["${local.trail_bucket_arn}/AWSLogs/${local.account_id}/*"],
    var.trail_organization_id == null ? [] : ["${local.trail_bucket_arn}/AWSLogs/${var.trail_organization_id}/*"])
    principals {
      type        = "Service"
      identifiers = ["cloudtrail.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "s3:x-amz-acl"
      values   = ["bucket-owner-full-control"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceArn"
      values   = [local.trail_arn]
    }
  }
}

moved {
  from = aws_s3_bucket.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket.this
}

moved {
  from = aws_s3_bucket_ownership_controls.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket_ownership_controls.this
}

moved {
  from = aws_s3_bucket_public_access_block.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket_public_access_block.this
}

moved {
  from = aws_s3_bucket_versioning.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket_versioning.this
}

moved {
  from = aws_s3_bucket_server_side_encryption_configuration.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket_server_side_encryption_configuration.this
}

moved {
  from = aws_s3_bucket_lifecycle_configuration.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket_lifecycle_configuration.this
}

moved {
  from = aws_s3_bucket_policy.trail[0]
  to   = module.trail_bucket[0].aws_s3_bucket_policy.this
}

resource "aws_cloudtrail" "this" {
  #checkov:skip=CKV_AWS_252: no SNS notification per log file: tagwarden reads the events from EventBridge.
  #checkov:skip=CKV2_AWS_10: no CloudWatch Logs copy: the events reach the function through EventBridge, the files are the archive.
  #checkov:skip=CKV_AWS_35: the log files are encrypted at rest by the bucket (SSE-S3, or SSE-KMS with kms_key_arn, whose key policy must then allow cloudtrail.amazonaws.com).
  count = var.create_trail ? 1 : 0

  name                          = local.trail_name
  s3_bucket_name                = module.trail_bucket[0].id
  is_multi_region_trail         = true
  is_organization_trail         = var.trail_organization_id != null
  include_global_service_events = true
  enable_log_file_validation    = true
  enable_logging                = true
  kms_key_id                    = var.kms_key_arn

  # Management events, read and write: the creations and tag changes the rules match are write
  # events; data events (object-level S3) are not needed and cost extra.
  event_selector {
    read_write_type           = "All"
    include_management_events = true
  }

  tags = local.tags

  depends_on = [module.trail_bucket]
}
