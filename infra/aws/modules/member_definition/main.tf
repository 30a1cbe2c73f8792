# The spoke of every member account, defined once (issue 31 item 2): the member role's policy and
# trust, the rules' patterns, and the same as a CloudFormation template. No resources and no
# provider: modules/organization renders it for its StackSet and its outputs (modules/member's
# inputs), and scripts/test-terraform renders it alone to lint the template (cfn-lint) and the
# policies (parliament). The event names and actions come from the service descriptors
# (../../generated/services.json), as the hub's own role and rules do.

locals {
  generated = jsondecode(file("${path.module}/../../generated/services.json"))
  services  = local.generated.services

  # --- the member role: the same in every account ------------------------------------------------
  # Reads as the hub's own role has them; every tag write on any resource of the account with the
  # hub's aws:TagKeys guard and reserved-key Deny. Which resources a session may write is the
  # session policy's (crates/aws/src/organization.rs `session_policy`): each write only where one of
  # that session's clusters' ownership keys is `owned`, buckets by the clusters' name patterns.
  # The role's size never grows with the clusters (1 or 1,000 per account: README "Organization").
  # Route 53 writes are not granted (no tag condition key: only a listed zone could be, which a
  # StackSet cannot know).
  # Each service's ARN patterns in any account and region of the partition (one policy for all).
  # S3 has no account in its ARNs (its descriptor names none): every bucket, narrowed by the session.
  arns = { for g in local.services : g.service => g.guard == "bucket" ? ["arn:${var.partition}:s3:::*"] : [
  for p in g.resources : replace(replace(replace(p, "{partition}", var.partition), "{region}", "*"), "{account}", "*")] }
  member_reads_any     = sort(distinct(flatten([for g in local.services : g.read_anywhere])))
  member_reads         = sort(distinct(flatten([for g in local.services : g.read])))
  read_arns            = sort(distinct(flatten([for g in local.services : local.arns[g.service] if length(g.read) > 0])))
  owned                = [for g in local.services : g if contains(["owned", "owned_via_tagging_api"], g.guard)]
  member_owned_writes  = sort(distinct(flatten([for g in local.owned : g.write])))
  owned_arns           = sort(distinct(flatten([for g in local.owned : local.arns[g.service]])))
  member_anywhere      = sort(distinct(flatten([for g in local.services : g.write if g.guard == "anywhere"])))
  member_bucket_writes = sort(distinct(flatten([for g in local.services : g.write if g.guard == "bucket"])))
  member_role_policy = {
    Version = "2012-10-17"
    Statement = [
      { Sid = "ReadTagsAnywhere", Effect = "Allow", Action = local.member_reads_any, Resource = "*" },
      { Sid = "ReadTags", Effect = "Allow", Action = local.member_reads, Resource = local.read_arns },
      {
        Sid      = "WriteTags"
        Effect   = "Allow"
        Action   = local.member_owned_writes
        Resource = local.owned_arns
        # As the hub's tag_keys_guard (infra/aws/iam.tf): fail closed without aws:TagKeys, never Name.
        Condition = {
          Null                                     = { "aws:TagKeys" = "false" }
          "ForAllValues:StringNotEqualsIgnoreCase" = { "aws:TagKeys" = ["Name"] }
        }
      },
      { Sid = "TagResources", Effect = "Allow", Action = local.member_anywhere, Resource = "*" },
      { Sid = "WriteBucketTags", Effect = "Allow", Action = local.member_bucket_writes, Resource = local.arns["s3"] },
      {
        Sid       = "DenyReservedTagKeys"
        Effect    = "Deny"
        Action    = local.member_owned_writes
        Resource  = "*"
        Condition = { "ForAnyValue:StringLike" = { "aws:TagKeys" = var.reserved_tag_key_patterns } }
      },
    ]
  }
  member_trust_policy = {
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { AWS = var.function_role_arn }
      Action    = "sts:AssumeRole"
    }]
  }

  # --- the member rules: the hub's patterns, less what names the hub's account or clusters -------
  # The spoke's own calls are dropped at the rule (loop safety): the member role's, in any account,
  # by the suffix of its ARN ("anything-but" with "suffix", EventBridge User Guide, "Content
  # filtering"). A StackSet cannot know an account's clusters, so tag changes are not filtered on
  # the ownership tag here: the function drops those of no enforced cluster from the tags the event
  # carries, without a call.
  not_member_role = {
    "$or" = [
      { userIdentity = { sessionContext = { sessionIssuer = { arn = [{ "anything-but" = { suffix = ":role/${var.member_role_name}" } }] } } } },
      { userIdentity = { sessionContext = { sessionIssuer = { arn = [{ exists = false }] } } } },
    ]
  }
  member_event_patterns = merge(
    { for svc, names in local.generated.cloudtrail_event_names : svc => jsonencode({
      source        = ["aws.${svc}"]
      "detail-type" = ["AWS API Call via CloudTrail"]
      detail = merge({
        eventSource = ["${svc}.amazonaws.com"]
        eventName   = names
        errorCode   = [{ exists = false }]
      }, local.not_member_role)
    }) },
    { tag_change = jsonencode({ source = ["aws.tag"], "detail-type" = ["Tag Change on Resource"] }) },
  )
  # IAM's and Route 53's events are delivered in us-east-1 only (reference/aws.md): their rules
  # exist there alone.
  global_services = ["iam", "route53"]
  # The member role is global: one region's stack creates it.
  role_region = contains(var.member_regions, "us-east-1") ? "us-east-1" : var.member_regions[0]

  # --- the StackSet's template: the same definition in CloudFormation ----------------------------
  logical_id = { for k in keys(local.member_event_patterns) : k => "Rule${join("", [for w in split("_", k) : title(w)])}" }
  member_template = {
    AWSTemplateFormatVersion = "2010-09-09"
    Description              = "tagwarden member account: the role the hub's function assumes, and the rules that forward this account's tag-relevant events to the hub bus"
    Conditions = {
      IsRoleRegion   = { "Fn::Equals" = [{ Ref = "AWS::Region" }, local.role_region] }
      IsGlobalRegion = { "Fn::Equals" = [{ Ref = "AWS::Region" }, "us-east-1"] }
    }
    Resources = merge(
      {
        MemberRole = {
          Type      = "AWS::IAM::Role"
          Condition = "IsRoleRegion"
          Properties = {
            RoleName                 = var.member_role_name
            Description              = "tagwarden hub ${var.function_role_arn}: reads tags, writes them on what a session's clusters own"
            AssumeRolePolicyDocument = local.member_trust_policy
            Policies                 = [{ PolicyName = "tag-enforcement", PolicyDocument = local.member_role_policy }]
            Tags                     = [for k, v in var.tags : { Key = k, Value = v }]
          }
        }
        ForwardRole = {
          Type = "AWS::IAM::Role"
          Properties = {
            Description = "tagwarden: EventBridge forwards this account's events to the hub bus"
            AssumeRolePolicyDocument = {
              Version = "2012-10-17"
              Statement = [{
                Effect    = "Allow"
                Principal = { Service = "events.amazonaws.com" }
                Action    = "sts:AssumeRole"
                Condition = { StringEquals = { "aws:SourceAccount" = { Ref = "AWS::AccountId" } } }
              }]
            }
            Policies = [{
              PolicyName     = "put-events"
              PolicyDocument = { Version = "2012-10-17", Statement = [{ Effect = "Allow", Action = "events:PutEvents", Resource = var.hub_event_bus_arn }] }
            }]
          }
        }
      },
      { for k, p in local.member_event_patterns : local.logical_id[k] => merge(
        contains(local.global_services, k) ? { Condition = "IsGlobalRegion" } : {},
        {
          Type = "AWS::Events::Rule"
          Properties = {
            Description  = "tagwarden: forward ${k} events to the hub"
            EventPattern = jsondecode(p)
            State        = "ENABLED"
            Targets      = [{ Id = "hub", Arn = var.hub_event_bus_arn, RoleArn = { "Fn::GetAtt" = ["ForwardRole", "Arn"] } }]
          }
        },
      ) },
    )
  }
}
