# tagwarden with the policy in an SSM String parameter, single region. IAM and Route 53 events are
# only delivered in us-east-1: this example enables those rules only there (see aws-basic for
# forwarding them to another region); elsewhere the sweep covers IAM and Route 53.

provider "aws" {
  region = var.region
}

module "tagwarden" {
  source = "../../aws"

  # Audit first (the default): everything is evaluated and reported, no tag is written, until
  # mode = "enforce".
  mode = var.mode

  infra_id   = var.infra_id
  lambda_zip = var.lambda_zip

  # An SSM parameter cannot be created empty: the first value is the cluster's own Infrastructure
  # object, given explicitly (no tags invented here), written once; afterwards the
  # publisher owns the parameter.
  policy_source      = "ssm"
  policy_document    = var.initial_policy
  policy_ttl_seconds = 300

  enable_iam_events     = var.region == "us-east-1"
  enable_route53_events = var.region == "us-east-1"
  sweep_schedule        = "cron(15 */6 * * ? *)"
  # Twice the 6-hour schedule: a cron() has no interval the module could read.
  sweep_alarm_after_hours = 12
  alarm_sns_topic_arn     = var.alarm_sns_topic_arn
  log_retention_days      = 90

  tags = var.tags
}
