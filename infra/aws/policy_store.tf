# Where the desired-tag policy lives: an S3 bucket (one document or layers under a prefix) or an
# SSM String parameter. A policy change triggers a sweep: S3 -> bucket notification -> function;
# SSM -> EventBridge rule (events.tf) -> function.

################################################################################
# S3
################################################################################

module "policy_bucket" {
  source = "./modules/private_bucket"
  count  = local.use_s3 ? 1 : 0

  name          = local.bucket_name
  force_destroy = var.policy_bucket_force_destroy
  tags          = local.tags
  kms_key_arn   = var.kms_key_arn
  lifecycle_rule = {
    id              = "expire-superseded-policy-versions"
    noncurrent_days = var.policy_noncurrent_version_expiration_days
  }
  policy_documents = [data.aws_iam_policy_document.policy_bucket[0].json]
}

data "aws_iam_policy_document" "policy_bucket" {
  count = local.use_s3 ? 1 : 0

  # The contest state (`_tagwarden/contests/<infraID>.json`: which keys tagwarden holds back, and
  # the lifts) is the function's to write, and the contest operators' to lift: no publisher's grant
  # reaches it, and this Deny keeps any other principal of the account from forging a contest,
  # whatever it is granted elsewhere.
  statement {
    sid       = "DenyContestStateToOthers"
    effect    = "Deny"
    actions   = ["s3:PutObject"]
    resources = ["${local.bucket_arn}/${local.contests_folder}*"]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "ArnNotEquals"
      variable = "aws:PrincipalArn"
      values   = concat([aws_iam_role.lambda.arn], var.contest_operators)
    }
  }
}

# The bucket of one version before the private_bucket module: its resources, moved into it.
moved {
  from = aws_s3_bucket.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket.this
}

moved {
  from = aws_s3_bucket_ownership_controls.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket_ownership_controls.this
}

moved {
  from = aws_s3_bucket_public_access_block.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket_public_access_block.this
}

moved {
  from = aws_s3_bucket_versioning.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket_versioning.this
}

moved {
  from = aws_s3_bucket_server_side_encryption_configuration.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket_server_side_encryption_configuration.this
}

moved {
  from = aws_s3_bucket_lifecycle_configuration.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket_lifecycle_configuration.this
}

moved {
  from = aws_s3_bucket_policy.policy[0]
  to   = module.policy_bucket[0].aws_s3_bucket_policy.this
}

# Optional initial content: created once, then never compared again (one owner per
# thing). The policy belongs to whoever publishes it afterwards — the cluster's publisher
# (`tagwarden publish --from-cluster --watch`) or an operator's `tagwarden publish`: a later apply
# must not put Terraform's copy back (and force a sweep with it) over what they published, so
# every argument is ignored after creation ("ignore_changes = all": Terraform "will never update
# the object", Terraform language docs, "The lifecycle Meta-Argument"). Changing the input later
# changes nothing; publish the new policy instead. If the object is deleted, the next apply creates
# it again from the input.
#
# depends_on the notification: the first version's Object Created event must find the
# notification in place, so that it starts a sweep right after the deploy and the first
# corrections do not wait for the schedule.
resource "aws_s3_object" "policy" {
  count = local.s3_key != null && var.policy_document != null ? 1 : 0

  bucket       = module.policy_bucket[0].id
  key          = local.s3_key
  content      = var.policy_document
  content_type = endswith(local.s3_key, ".json") ? "application/json" : "application/yaml"

  lifecycle {
    ignore_changes = all
  }

  depends_on = [module.policy_bucket, aws_s3_bucket_notification.policy]
}

# Layers are Terraform's own objects (e.g. a `00-defaults.yaml` kept in code): Terraform updates
# them. The publisher's layer (10-cluster.yaml) is refused as a name here (variables.tf), so no
# object has two owners.
resource "aws_s3_object" "policy_layer" {
  for_each = local.s3_layered ? var.policy_layers : {}

  bucket       = module.policy_bucket[0].id
  key          = "${var.policy_prefix}${each.key}"
  content      = each.value
  content_type = endswith(each.key, ".json") ? "application/json" : "application/yaml"
  tags         = local.tags

  depends_on = [module.policy_bucket, aws_s3_bucket_notification.policy]
}

# A cluster set's initial policies, one folder per cluster, at the key `tagwarden publish` writes:
# the cluster's publisher owns them after creation (as aws_s3_object.policy above).
resource "aws_s3_object" "cluster_policy" {
  for_each = local.s3_set ? var.cluster_policy_documents : {}

  bucket       = module.policy_bucket[0].id
  key          = "${local.s3_prefix}${each.key}/10-cluster.yaml"
  content      = each.value
  content_type = "application/yaml"

  lifecycle {
    ignore_changes = all
  }

  depends_on = [module.policy_bucket, aws_s3_bucket_notification.policy]
}

# Policy change -> sweep. Single document: the filter is the exact key, so the status report next
# to it never triggers the function. Layered and cluster set: only policy documents
# under the prefix trigger a sweep, so that any other object written there (`x.txt`) does not. A
# filter holds at most one prefix and one suffix rule ("The same type of filter rule cannot be used
# more than once. For example, you cannot specify two prefix rules", S3KeyFilter; "Configuring
# event notifications using object key name filtering", Amazon S3 User Guide), so each suffix the
# function reads as a policy document (.yaml, .yml, .json) is a configuration of its own; their
# suffixes do not overlap, as S3 requires of configurations for the same event type. The status
# report `tagwarden-status.json` ends in .json too, and a filter cannot exclude one name: its
# notification still reaches the function, which ignores it. A cluster set: the function sweeps
# only the clusters whose folder the written keys are in.
locals {
  policy_suffixes = [".yaml", ".yml", ".json"]
  policy_notification_filters = !local.use_s3 ? {} : local.s3_set || local.s3_layered ? {
    for sfx in local.policy_suffixes : "tagwarden-policy-change${replace(sfx, ".", "-")}" => { prefix = local.s3_prefix, suffix = sfx }
  } : { "tagwarden-policy-change" = { prefix = local.s3_key, suffix = null } }
}

resource "aws_s3_bucket_notification" "policy" {
  count = local.use_s3 ? 1 : 0

  bucket = module.policy_bucket[0].id

  dynamic "lambda_function" {
    for_each = local.policy_notification_filters
    content {
      id                  = lambda_function.key
      lambda_function_arn = aws_lambda_function.this.arn
      events              = ["s3:ObjectCreated:*"]
      filter_prefix       = lambda_function.value.prefix
      filter_suffix       = lambda_function.value.suffix
    }
  }

  depends_on = [aws_lambda_permission.policy_bucket]
}

resource "aws_lambda_permission" "policy_bucket" {
  count = local.use_s3 ? 1 : 0

  statement_id   = "AllowPolicyBucketNotification"
  action         = "lambda:InvokeFunction"
  function_name  = aws_lambda_function.this.function_name
  principal      = "s3.amazonaws.com"
  source_arn     = module.policy_bucket[0].arn
  source_account = local.account_id
}

################################################################################
# SSM
################################################################################

resource "aws_ssm_parameter" "policy" {
  #checkov:skip=CKV2_AWS_34: a String parameter by contract (TAGWARDEN_POLICY=ssm:...): nothing in a policy is secret, so SecureString would only add a KMS dependency.
  count = local.use_ssm && !local.ssm_set ? 1 : 0

  name        = local.ssm_parameter_name
  description = "tagwarden desired-tag policy for cluster ${var.infra_id}"
  type        = "String"
  tier        = "Standard"
  value       = coalesce(var.policy_document, "-")
  tags        = local.tags

  # The initial value only; the publisher owns it afterwards (see aws_s3_object.policy).
  # The change rule exists first, so the first version starts a sweep.
  depends_on = [aws_cloudwatch_event_target.policy_change, aws_lambda_permission.policy_change]

  lifecycle {
    ignore_changes = [value, description, tier, type]
    precondition {
      condition     = var.policy_document != null
      error_message = "policy_source = \"ssm\" needs policy_document: an SSM parameter cannot be created empty."
    }
  }
}

# A cluster set's initial policies, one parameter per cluster under the set's path.
resource "aws_ssm_parameter" "cluster_policy" {
  #checkov:skip=CKV2_AWS_34: a String parameter by contract (TAGWARDEN_POLICY=ssm:...): nothing in a policy is secret, so SecureString would only add a KMS dependency.
  for_each = local.ssm_set ? var.cluster_policy_documents : {}

  name        = "${local.ssm_path}${each.key}"
  description = "tagwarden desired-tag policy for cluster ${each.key}"
  type        = "String"
  tier        = "Standard"
  value       = each.value
  tags        = local.tags

  # The initial value only; the cluster's publisher owns it afterwards.
  depends_on = [aws_cloudwatch_event_target.policy_change, aws_lambda_permission.policy_change]

  lifecycle {
    ignore_changes = [value, description, tier, type]
  }
}
