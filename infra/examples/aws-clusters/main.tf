# tagwarden for every cluster of one account and region: one deployment, three clusters
# (a cluster set). Each cluster keeps its own policy under clusters/<infraID>/ in the policy bucket; the
# function applies to each resource the policy of the cluster that owns it. Adding a cluster is one
# entry in var.infra_ids and one apply.

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

  infra_ids     = var.infra_ids
  cluster_kinds = var.cluster_kinds
  lambda_zip    = var.lambda_zip

  # Each cluster publishes its own policy (no tags invented here); initial_policies
  # writes a first version once, for the clusters it names.
  policy_source            = "s3"
  cluster_policy_documents = var.initial_policies

  # s3_bucket_name_patterns defaults to ["<infraID>-*"] for each cluster.
  extra_tag_actions = var.extra_tag_actions

  sweep_schedule      = "rate(1 hour)"
  create_sns_topic    = true
  alarm_subscriptions = [for e in var.alarm_emails : { protocol = "email", endpoint = e }]

  tags = var.tags
}

module "global_event_forwarding" {
  source = "../../aws/modules/global_event_forwarding"
  count  = var.region == "us-east-1" ? 0 : 1

  providers = {
    aws = aws.us_east_1
  }

  name                 = "tagwarden"
  event_patterns       = module.tagwarden.global_event_patterns
  target_event_bus_arn = module.tagwarden.event_bus_arn
  alarm_subscriptions  = [for e in var.alarm_emails : { protocol = "email", endpoint = e }]
  tags                 = var.tags
}
