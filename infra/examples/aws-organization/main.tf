# tagwarden for a whole AWS Organization from one hub account: the tagwarden function in
# the hub, the organization module beside it (hub bus, shard and member-event queues, the members'
# policy bucket, the function's grants to assume the member role), and a StackSet that gives every
# account of the chosen OUs its spoke (the member role and the rules forwarding to the hub), now and
# whenever an account joins. Apply from the management account (stack_set_call_as = "SELF") or a
# member account registered as a delegated administrator of CloudFormation StackSets
# (stack_set_call_as = "DELEGATED_ADMIN"; README.md says how to register it).
#
# Each member cluster publishes under its own account's folder:
#   tagwarden publish --from-cluster --to s3://<organization_bucket>/accounts/<its account>/<infraID>/

provider "aws" {
  region = var.region
}

module "tagwarden" {
  source = "../../aws"

  # Audit first (the default): everything is evaluated and reported, no tag is written, until
  # mode = "enforce".
  mode = var.mode

  # An organization hub: no cluster of its own here. Every account, the hub's too, is enforced
  # through its member role and spoke; the hub's own clusters are listed in `clusters` as
  # `<hub account>/<infraID>` with `hub_spoke = true` below.
  infra_ids  = []
  lambda_zip = var.lambda_zip

  policy_source    = "s3"
  organization     = module.organization.hub
  sweep_schedule   = "rate(1 hour)"
  create_sns_topic = true

  # Every member account must record its management events for its spoke to forward them: an
  # organization trail does that for all of them (AWS Control Tower's counts; then leave this off).
  create_trail          = var.create_organization_trail
  trail_organization_id = var.create_organization_trail ? var.organization_id : null

  tags = var.tags
}

module "organization" {
  source = "../../aws/modules/organization"

  name                           = "tagwarden"
  organization_id                = var.organization_id
  member_regions                 = var.member_regions
  member_organizational_unit_ids = var.member_organizational_unit_ids
  stack_set_call_as              = var.stack_set_call_as
  clusters                       = var.clusters
  account_clusters               = var.account_clusters
  cluster_kinds                  = var.cluster_kinds
  contest_operators              = var.contest_operators
  auditor_principals             = var.auditor_principals

  function_role_name = module.tagwarden.role_name
  # The role's ARN spelt from its name, known at plan: the member roles' templates embed it, and the
  # module decides from their length which go through the bucket (a for_each), which Terraform
  # refuses to plan on module.tagwarden.role_arn, known only after the role exists ("Invalid
  # for_each argument" on the first apply). check "function_role_arn" below holds it to the role.
  function_role_arn         = local.function_role_arn
  function_arn              = module.tagwarden.function_arn
  function_timeout_seconds  = 300 # the tagwarden module's timeout (its default)
  reserved_tag_key_patterns = module.tagwarden.reserved_tag_key_patterns
  alarm_sns_topic_arn       = module.tagwarden.sns_topic_arn

  tags = var.tags
}

data "aws_partition" "current" {}

locals {
  function_role_arn = "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:role/${module.tagwarden.role_name}"
}

check "function_role_arn" {
  assert {
    condition     = local.function_role_arn == module.tagwarden.role_arn
    error_message = "The organization module was given ${local.function_role_arn} as the function's role, but the role is ${module.tagwarden.role_arn}."
  }
}

# The hub account's own spoke, in the hub's region, when the hub runs clusters too: a
# service-managed StackSet never deploys to the management account, nor to an account outside its
# OUs. Its other regions take the same module under a provider for each (create_member_role =
# false there: the role is global).
data "aws_caller_identity" "current" {}

module "hub_spoke" {
  source = "../../aws/modules/member"
  count  = var.hub_spoke ? 1 : 0

  hub_event_bus_arn        = module.organization.hub_event_bus_arn
  member_roles             = module.organization.member_roles[data.aws_caller_identity.current.account_id]
  auditor_role             = module.organization.auditor_role
  member_trust_policy_json = module.organization.member_trust_policy_json
  event_patterns           = module.organization.member_event_patterns
  create_member_role       = true

  tags = var.tags
}
