# tagwarden for a whole AWS Organization from one hub account (issue 31): the tagwarden function in
# the hub, the organization module beside it (hub bus, shard and member-event queues, the members'
# policy bucket, the function's grants to assume the member role), and a StackSet that gives every
# account of the chosen OUs its spoke (the member role and the rules forwarding to the hub), now and
# whenever an account joins. Apply from the management account or a delegated administrator of
# CloudFormation StackSets.
#
# Each member cluster publishes under its own account's folder:
#   tagwarden publish --from-cluster --to s3://<organization_bucket>/accounts/<its account>/<infraID>/

provider "aws" {
  region = var.region
}

module "tagwarden" {
  source = "../../aws"

  # The module requires the hub account's own clusters. In organization mode the function enforces
  # every account through its member role, the hub's too: list them in `clusters` as
  # `<hub account>/<infraID>` as well, and deploy modules/member in the hub account (a
  # service-managed StackSet never deploys to the management account). The single-account write
  # grants the module gives its role for these are then unused.
  infra_ids  = var.hub_infra_ids
  lambda_zip = var.lambda_zip

  policy_source     = "s3"
  extra_environment = module.organization.environment
  sweep_schedule    = "rate(1 hour)"
  create_sns_topic  = true

  tags = var.tags
}

module "organization" {
  source = "../../aws/modules/organization"

  name                           = "tagwarden"
  organization_id                = var.organization_id
  member_regions                 = var.member_regions
  member_organizational_unit_ids = var.member_organizational_unit_ids
  clusters                       = var.clusters

  function_role_name        = module.tagwarden.role_name
  function_role_arn         = module.tagwarden.role_arn
  function_arn              = module.tagwarden.function_arn
  function_timeout_seconds  = 300 # the tagwarden module's timeout (its default)
  reserved_tag_key_patterns = module.tagwarden.reserved_tag_key_patterns

  tags = var.tags
}
