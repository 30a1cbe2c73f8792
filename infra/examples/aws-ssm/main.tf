# tagwarden with the policy in an SSM String parameter, single region. IAM and Route 53 events are
# only delivered in us-east-1: this example enables those rules only there (see aws-basic for
# forwarding them to another region); elsewhere the sweep covers IAM and Route 53.

provider "aws" {
  region = var.region
}

module "tagwarden" {
  source = "../../aws"

  infra_id     = var.infra_id
  lambda_zip   = var.lambda_zip
  architecture = var.architecture

  policy_source = "ssm"
  policy_document = templatefile("${path.module}/policy/infrastructure.yaml.tftpl", {
    infra_id  = var.infra_id
    region    = var.region
    user_tags = var.user_tags
  })
  policy_ttl_seconds = 300

  enable_iam_events     = var.region == "us-east-1"
  enable_route53_events = var.region == "us-east-1"
  sweep_schedule        = "cron(15 */6 * * ? *)"
  alarm_sns_topic_arn   = var.alarm_sns_topic_arn
  log_retention_days    = 90

  tags = var.tags
}
