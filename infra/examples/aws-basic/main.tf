# tagwarden for one cluster in one region, policy in S3, IAM and Route 53 events forwarded from
# us-east-1.

provider "aws" {
  region = var.region
}

# IAM and Route 53 events are only delivered in us-east-1 (see modules/global_event_forwarding).
provider "aws" {
  alias  = "us_east_1"
  region = "us-east-1"
}

module "tagwarden" {
  source = "../../aws"

  # Audit first (the default): everything is evaluated and reported, no tag is written, until
  # mode = "enforce".
  mode = var.mode

  infra_id = var.infra_id
  # The function's architecture is the package's: scripts/package-lambda writes <zip>.json beside it.
  lambda_zip = var.lambda_zip

  # The policy is the cluster's own (no tags invented here). Nothing is written unless
  # initial_policy is given; then only once: afterwards `tagwarden publish` (from the cluster, or
  # the in-cluster publisher) owns the object.
  policy_source   = "s3"
  policy_key      = "tagwarden/infrastructure.yaml"
  policy_document = var.initial_policy

  # s3_bucket_name_patterns defaults to ["<infra_id>-*"]: OpenShift's only cluster bucket (the image
  # registry's) is named "<infra_id>-image-registry-...".

  # Services beyond the built-in paths (EC2, S3, ELB, Route 53, IAM, EFS) that the cluster owns
  # resources of, written through the Tagging API under the ownership condition.
  extra_tag_actions = var.extra_tag_actions

  # Route 53 cannot condition a tag write on the ownership tag: only the zones named here are
  # writable (none by default; an owned zone's drift is then reported as AccessDenied).
  route53_writable_resources = length(concat(var.route53_hosted_zone_ids, var.route53_health_check_ids)) == 0 ? {} : {
    (var.infra_id) = { hosted_zone_ids = var.route53_hosted_zone_ids, health_check_ids = var.route53_health_check_ids }
  }

  sweep_schedule      = "rate(1 hour)"
  create_sns_topic    = true
  alarm_subscriptions = [for e in var.alarm_emails : { protocol = "email", endpoint = e }]
  create_trail        = var.create_trail

  tags = var.tags
}

module "global_event_forwarding" {
  source = "../../aws/modules/global_event_forwarding"
  count  = var.region == "us-east-1" ? 0 : 1

  providers = {
    aws = aws.us_east_1
  }

  name                 = "tagwarden-${var.infra_id}"
  event_patterns       = module.tagwarden.global_event_patterns
  target_event_bus_arn = module.tagwarden.event_bus_arn
  alarm_subscriptions  = [for e in var.alarm_emails : { protocol = "email", endpoint = e }]
  tags                 = var.tags
}

# This module was called iam_event_forwarding and forwarded IAM events only.
moved {
  from = module.iam_event_forwarding
  to   = module.global_event_forwarding
}
