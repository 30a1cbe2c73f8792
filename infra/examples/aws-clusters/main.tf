# tagwarden for every cluster of one account and region: one deployment, three clusters (issue
# 12). Each cluster keeps its own policy under clusters/<infraID>/ in the policy bucket; the
# function applies to each resource the policy of the cluster that owns it. Adding a cluster is one
# entry in var.clusters and one apply.

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

  infra_ids    = keys(var.clusters)
  lambda_zip   = var.lambda_zip
  architecture = var.architecture

  policy_source = "s3"
  # Each cluster's first policy; later, each cluster publishes its own (`tagwarden publish`).
  cluster_policy_documents = {
    for id, user_tags in var.clusters : id => templatefile("${path.module}/policy/infrastructure.yaml.tftpl", {
      infra_id  = id
      region    = var.region
      user_tags = user_tags
    })
  }

  # s3_bucket_name_patterns defaults to ["<infraID>-*"] for each cluster.
  extra_tag_actions = var.extra_tag_actions

  sweep_schedule   = "rate(1 hour)"
  create_sns_topic = true

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
  tags                 = var.tags
}
