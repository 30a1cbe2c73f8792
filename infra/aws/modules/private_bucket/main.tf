# A private, versioned, encrypted S3 bucket, as every bucket of tagwarden's is: objects owned by the
# bucket's account (ACLs disabled), every public access blocked, one lifecycle rule, and a policy
# that refuses requests without TLS beside the caller's own statements.

resource "aws_s3_bucket" "this" {
  #checkov:skip=CKV_AWS_18: server access logging needs a second, log-receiving bucket; the writes to tagwarden's buckets are few and CloudTrail records their management calls.
  #checkov:skip=CKV_AWS_144: cross-region replication is out of scope: a policy is re-publishable from its cluster, a trail's archive is the organisation's decision; the bucket is versioned.
  #checkov:skip=CKV_AWS_145: SSE-KMS with kms_key_arn, SSE-S3 (AES-256) without one: the caller decides (a bucket that every member account writes cannot take a customer key without a grant per account).
  #checkov:skip=CKV2_AWS_62: the event notification is the caller's (the policy and organization buckets notify the function; the trail's files need none).
  bucket        = var.name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_versioning" "this" {
  bucket = aws_s3_bucket.this.id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    id     = var.lifecycle_rule.id
    status = "Enabled"

    filter {}

    dynamic "expiration" {
      for_each = var.lifecycle_rule.expiration_days == null ? [] : [var.lifecycle_rule.expiration_days]
      content {
        days = expiration.value
      }
    }

    noncurrent_version_expiration {
      noncurrent_days = var.lifecycle_rule.noncurrent_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 7
    }
  }

  # S3 User Guide, "Lifecycle and versioning": a rule on noncurrent versions needs versioning on.
  depends_on = [aws_s3_bucket_versioning.this]
}

data "aws_iam_policy_document" "this" {
  source_policy_documents = var.policy_documents

  statement {
    sid       = "DenyInsecureTransport"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.this.arn, "${aws_s3_bucket.this.arn}/*"]

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

resource "aws_s3_bucket_policy" "this" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.this.json

  # S3 rejects bucket policies while the public access block is still being applied.
  depends_on = [aws_s3_bucket_public_access_block.this]
}
