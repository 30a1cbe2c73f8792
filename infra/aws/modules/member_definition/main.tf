# The spoke of every member account, defined once: the member role's policy and
# trust, the rules' patterns, and the same as a CloudFormation template. No resources and no
# provider: modules/organization renders it for its StackSet and its outputs (modules/member's
# inputs), and scripts/test-terraform renders it alone to lint the template (cfn-lint) and the
# policies (parliament). The event names and actions come from the service descriptors
# (../../generated/services.json), as the hub's own role and rules do.

locals {
  generated = jsondecode(file("${path.module}/../../generated/services.json"))
  services  = local.generated.services

  # --- the member roles: reads everywhere, writes only on what the account's clusters own --------
  # The ownership bound is the role's own, not the session policy's a caller may leave out: a Deny
  # of every owned-resource tag write unless the resource carries one of the role's clusters'
  # ownership keys as `owned`. IAM has no wildcard in a condition key's name and substitutes no
  # policy variable there (IAM User Guide, "IAM policy elements: Variables and tags": variables go
  # in `Resource` and in condition *values*), so each key is named. One negated operator over
  # several keys matches only when every key differs ("all keys must match", Condition element;
  # a negated operator on a key absent from the request matches), which is the AND a Deny needs:
  # a single statement per role, about 75 characters per OpenShift cluster, against the role's
  # inline quota of 10,240 (IAM and AWS STS quotas; white space not counted). An account with more
  # clusters than one role holds gets several roles (`<member_role_name>-<n>`), each bounded to
  # its share: `roles` below, and the hub function picks a cluster's role from the table it is given.
  # Buckets: S3 evaluates no aws:ResourceTag on PutBucketTagging, so a role writes only its
  # clusters' bucket name patterns (`<infraID>-*`, the session policy's) in its own account
  # (aws:ResourceAccount, a global key S3 supports).
  # Route 53 writes are not granted (no tag condition key: only a listed zone could be).
  # Each service's ARN patterns in any account and region of the partition.
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

  # A cluster's ownership keys: `kubernetes.io/cluster/<id>` (OpenShift, HyperShift, and what a
  # Cluster API cluster's cloud provider creates), and CAPA's own key for a Cluster API cluster.
  ownership_keys = { for id in distinct(flatten(values(var.account_clusters))) : id => concat(
    ["kubernetes.io/cluster/${id}"],
    lookup(var.cluster_kinds, id, "OpenShift") == "ClusterAPI" ? ["sigs.k8s.io/cluster-api-provider-aws/cluster/${id}"] : [],
  ) }
  # What one cluster costs a role's inline policy, in characters: its keys in the Deny
  # (`"aws:ResourceTag/<key>":"owned",`) and its bucket pattern (`"arn:<p>:s3:::<id>-*",`).
  cluster_cost = { for id, keys in local.ownership_keys : id =>
    sum([for k in keys : length(k) + 27]) + length(id) + length(var.partition) + 16
  }
  # Clusters per role in each account: as many of its costliest as fit the budget.
  per_role = { for a, ids in var.account_clusters : a =>
    max(1, floor(var.role_key_budget / max(concat([1], [for id in ids : local.cluster_cost[id]])...)))
  }
  # Each account's roles: the sorted clusters, chunked; the first role keeps the plain name.
  roles = { for a, ids in var.account_clusters : a => [
    for n, chunk in chunklist(sort(distinct(ids)), local.per_role[a]) : {
      name     = n == 0 ? var.member_role_name : "${var.member_role_name}-${n}"
      clusters = chunk
      policy   = local.role_policy[a][n]
    }
  ] }
  role_policy = { for a, ids in var.account_clusters : a => [
    for chunk in chunklist(sort(distinct(ids)), local.per_role[a]) : {
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
        {
          Sid       = "WriteBucketTags"
          Effect    = "Allow"
          Action    = local.member_bucket_writes
          Resource  = [for id in chunk : "arn:${var.partition}:s3:::${id}-*"]
          Condition = { StringEquals = { "aws:ResourceAccount" = a } }
        },
        {
          Sid       = "DenyReservedTagKeys"
          Effect    = "Deny"
          Action    = local.member_owned_writes
          Resource  = "*"
          Condition = { "ForAnyValue:StringLike" = { "aws:TagKeys" = var.reserved_tag_key_patterns } }
        },
        {
          Sid       = "DenyUnowned"
          Effect    = "Deny"
          Action    = local.member_owned_writes
          Resource  = "*"
          Condition = { StringNotEquals = { for k in flatten([for id in chunk : local.ownership_keys[id]]) : "aws:ResourceTag/${k}" => "owned" } }
        },
      ]
    }
  ] }
  # The auditor role: what the member roles read, and no write at all, for a person's preview
  # (`tagwarden organization sweep --dry-run --member-role <member_role_name>-auditor`), trusted by
  # the principals `auditor_principals` names. Rendered once: it bounds nothing by cluster.
  auditor_policy = {
    Version = "2012-10-17"
    Statement = [
      { Sid = "ReadTagsAnywhere", Effect = "Allow", Action = local.member_reads_any, Resource = "*" },
      { Sid = "ReadTags", Effect = "Allow", Action = local.member_reads, Resource = local.read_arns },
    ]
  }
  auditor_trust_policy = {
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { AWS = length(var.auditor_principals) > 0 ? var.auditor_principals : ["arn:${var.partition}:iam::${split(":", var.function_role_arn)[4]}:root"] }
      Action    = "sts:AssumeRole"
    }]
  }
  auditor_role_name = "${var.member_role_name}-auditor"

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
  # filtering"). An account's further roles (`<member_role_name>-<n>`, past one role's clusters)
  # are not matched by it: their writes come back as events, each a read that finds nothing to do. A StackSet cannot know an account's clusters, so tag changes are not filtered on
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
  # IAM's and Route 53's events are delivered in us-east-1 only: their rules
  # exist there alone.
  global_services = ["iam", "route53"]
  # The member role is global: one region's stack creates it.
  role_region = contains(var.member_regions, "us-east-1") ? "us-east-1" : var.member_regions[0]

  # --- the StackSets' templates: the same definition in CloudFormation ---------------------------
  # Two kinds: the spoke every account of the OUs gets (the rules and the role they forward with),
  # and each account's member roles, rendered for that account alone from its clusters (a
  # template of its own: a StackSet cannot vary a policy's condition keys by account otherwise;
  # service-managed StackSets take no transform such as Fn::ForEach).
  logical_id = { for k in keys(local.member_event_patterns) : k => "Rule${join("", [for w in split("_", k) : title(w)])}" }
  role_templates = { for a, roles in local.roles : a => {
    AWSTemplateFormatVersion = "2010-09-09"
    Description              = "tagwarden member account ${a}: the roles the hub's function assumes, each writing tags only on what its clusters own"
    Conditions               = { IsRoleRegion = { "Fn::Equals" = [{ Ref = "AWS::Region" }, local.role_region] } }
    Resources = { for n, r in roles : "MemberRole${n}" => {
      Type      = "AWS::IAM::Role"
      Condition = "IsRoleRegion"
      Properties = {
        RoleName                 = r.name
        Description              = "tagwarden hub ${var.function_role_arn}: reads tags, writes them on what ${length(r.clusters)} cluster(s) own"
        AssumeRolePolicyDocument = local.member_trust_policy
        Policies                 = [{ PolicyName = "tag-enforcement", PolicyDocument = r.policy }]
        Tags                     = [for k, v in var.tags : { Key = k, Value = v }]
      }
    } }
  } }
  member_template = {
    AWSTemplateFormatVersion = "2010-09-09"
    Description              = "tagwarden member account: the rules that forward this account's tag-relevant events to the hub bus"
    Conditions = {
      IsGlobalRegion = { "Fn::Equals" = [{ Ref = "AWS::Region" }, "us-east-1"] }
      IsRoleRegion   = { "Fn::Equals" = [{ Ref = "AWS::Region" }, local.role_region] }
    }
    Resources = merge(
      length(var.auditor_principals) == 0 ? {} : {
        AuditorRole = {
          Type      = "AWS::IAM::Role"
          Condition = "IsRoleRegion"
          Properties = {
            RoleName                 = local.auditor_role_name
            Description              = "tagwarden auditor: reads tags for a person's preview of the hub's sweep; writes nothing"
            AssumeRolePolicyDocument = local.auditor_trust_policy
            Policies                 = [{ PolicyName = "read-tags", PolicyDocument = local.auditor_policy }]
            Tags                     = [for k, v in var.tags : { Key = k, Value = v }]
          }
        }
      },
      {
        ForwardRole = {
          Type = "AWS::IAM::Role"
          Properties = {
            # Named, so the hub bus admits these roles alone (aws:PrincipalArn in its policy).
            RoleName    = { "Fn::Sub" = "${var.member_role_name}-forward-$${AWS::Region}" }
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
