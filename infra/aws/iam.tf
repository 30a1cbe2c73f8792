# The function's execution role: exactly the calls the code makes (local.code_actions), the
# services' own tag actions that tag:TagResources needs (local.generic_tag_actions,
# var.extra_tag_actions), plus what the Lambda service does on its behalf (local.platform_actions).
# Writes are conditioned on the ownership tag wherever the service evaluates aws:ResourceTag for
# that action; never Delete*, Untag* or RemoveTags (Route 53's ChangeTagsForResource, which adds
# and removes in one action, is the one tag write IAM cannot split).

locals {
  # Every AWS API action the tagwarden code calls, per service. This is the one list to compare
  # with the Rust code (output `iam_actions`); the statements below only pick from it.
  code_actions = {
    ec2 = {
      tag_read  = ["ec2:DescribeInstances", "ec2:DescribeTags", "ec2:DescribeVolumes"]
      tag_write = ["ec2:CreateTags"]
    }
    s3 = {
      tag_read     = ["s3:GetBucketTagging"]
      tag_write    = ["s3:PutBucketTagging"]
      policy_read  = ["s3:GetObject", "s3:ListBucket"]
      status_write = ["s3:PutObject"]
    }
    # ELBv2 and the Classic ELB API (2012-06-01) share these action names, so one grant serves both.
    # ELBv2 and Classic load balancers share the action names; the listings find the listeners and
    # rules of owned load balancers (the emulator's GetResources does not list them).
    elasticloadbalancing = {
      tag_read  = ["elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeRules", "elasticloadbalancing:DescribeTags"]
      tag_write = ["elasticloadbalancing:AddTags"]
    }
    # Route 53 is global: hosted zones and health checks are listed, then read 10 at a time.
    route53 = {
      tag_list  = ["route53:ListHealthChecks", "route53:ListHostedZones"]
      tag_read  = ["route53:ListTagsForResource", "route53:ListTagsForResources"]
      tag_write = ["route53:ChangeTagsForResource"]
    }
    iam = {
      # GetAccountAuthorizationDetails lists roles and users with their tags, 1000 a page (the
      # sweep's one IAM read per entity otherwise); it also returns their policy documents.
      tag_list = [
        "iam:GetAccountAuthorizationDetails", "iam:ListInstanceProfiles", "iam:ListOpenIDConnectProviders",
        "iam:ListPolicies",
      ]
      # Roles and users: GetRole/GetUser return the ARN (with its path) and the tags in one call.
      tag_read = [
        "iam:ListInstanceProfileTags", "iam:ListOpenIDConnectProviderTags", "iam:ListPolicyTags",
        "iam:GetRole", "iam:GetUser",
      ]
      tag_write = [
        "iam:TagInstanceProfile", "iam:TagOpenIDConnectProvider", "iam:TagPolicy", "iam:TagRole", "iam:TagUser",
      ]
    }
    # KMS keys (crates/core/src/services.rs, kms:key): the key's own tags. A key policy must delegate to IAM, as
    # the default key policy's "Enable IAM User Permissions" statement does (AWS KMS Developer Guide,
    # "Default key policy"), for these grants to count.
    kms = {
      tag_read  = ["kms:ListResourceTags"]
      tag_write = ["kms:TagResource"]
    }
    # The generic path for every other service. TagResources also needs each resource's own
    # service action: local.generic_tag_actions, below, not part of this list.
    tag = {
      tag_read  = ["tag:GetResources"]
      tag_write = ["tag:TagResources"]
    }
    ssm = {
      policy_read  = ["ssm:GetParameter"]
      policy_list  = ["ssm:GetParametersByPath"] # a cluster set: every cluster's parameter in one call
      status_write = ["ssm:PutParameter"]
    }
  }

  # Not called by the code: the Lambda service uses these for logging, the queue mapping and the
  # asynchronous-invocation dead-letter queue (and KMS when a key is configured).
  platform_actions = {
    logs = ["logs:CreateLogStream", "logs:PutLogEvents"]
    sqs  = ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:SendMessage"]
    kms  = var.kms_key_arn == null ? [] : ["kms:Decrypt", "kms:GenerateDataKey"]
  }

  # tag:TagResources is authorized twice. The Tagging API action itself has no resource type and no
  # condition key (Service Authorization Reference, "Actions, resources, and condition keys for
  # Amazon Resource Group Tagging API"), so it is granted on "*"; and for every ARN in the call the
  # caller also needs the owning service's own tag permission ("you must have [...] permission to
  # call the tagging action of the service that owns the resource", Resource Groups Tagging API
  # Reference, TagResources; e.g. elasticfilesystem:TagResource). Those service actions are kept
  # here, apart from code_actions (which lists exactly what the code calls), and are granted under
  # the ownership condition and the aws:TagKeys guard, so TagResources can only tag owned resources.
  # EFS evaluates aws:ResourceTag on file systems and access points and aws:TagKeys for TagResource
  # (Service Authorization Reference, "Actions, resources, and condition keys for Amazon Elastic
  # File System"). Other services: var.extra_tag_actions.
  generic_tag_actions = {
    elasticfilesystem = {
      actions = ["elasticfilesystem:TagResource"]
      resources = [
        for t in ["file-system", "access-point"] : "${local.arn_prefix}:elasticfilesystem:${local.region}:${local.account_id}:${t}/*"
      ]
    }
  }
  generic_tag_action_list = distinct(concat(flatten([for s in local.generic_tag_actions : s.actions]), var.extra_tag_actions))

  # Ownership condition (DESIGN.md §9) and a guard that the function never writes reserved keys
  # (ownership tags, Name, the kubernetes.io/, openshift.io/ and k8s.io/ namespaces; DESIGN.md §3-4).
  #
  # Issue 35: the guard is case-blind. IAM compares condition key names without regard to case
  # ("Condition key names are not case-sensitive", IAM User Guide, "IAM JSON policy elements:
  # Condition"), so a tag `Kubernetes.io/cluster/<id>` satisfies another policy's
  # `aws:ResourceTag/kubernetes.io/cluster/<id>`, and IAM's own tag keys are case-insensitive (a
  # role cannot carry both `Team` and `team`; "Tag naming rules", IAM User Guide, "Tags for AWS
  # Identity and Access Management resources"): writing the variant overwrites the real key. But
  # StringLike/StringNotLike are case-sensitive and IAM has no case-insensitive wildcard operator
  # (StringEqualsIgnoreCase / StringNotEqualsIgnoreCase take no wildcards; IAM User Guide, "IAM
  # JSON policy elements: Condition operators", String condition operators). A wildcard covers
  # every case of a letter only as `?`, which also admits any other character; enumerating both
  # cases of every letter would take 2^10 patterns for "kubernetes" alone. So each reserved domain
  # is matched with its first three letters in both cases (8 patterns) and `?` for its other
  # letters: exact on case (no variant escapes) and wider only by keys whose domain starts with
  # the same three letters, has the same length and layout, and is not the reserved one (e.g.
  # `kubxxxxxxx.io/`): such a key is refused too, and reported as AccessDenied. Each domain also
  # as a subdomain (`*.<domain>/`). k8s.io covers Cluster API's `sigs.k8s.io/cluster-api-provider-aws/`
  # ownership keys; HyperShift uses `kubernetes.io/cluster/<infraID>` like OpenShift.
  # The patterns sit in one explicit Deny (DenyReservedTagKeys, ForAnyValue:StringLike): an
  # explicit Deny wins over every Allow of the role ("Policy evaluation logic", IAM User Guide).
  reserved_domains = ["kubernetes.io", "openshift.io", "k8s.io"]
  # Per domain, the positions of its first three letters (the ones spelled out in both cases).
  reserved_spelled = { for d in local.reserved_domains : d => slice([for i, c in split("", d) : i if lower(c) != upper(c)], 0, 3) }
  reserved_key_patterns = flatten([for d in local.reserved_domains : [
    for cases in setproduct([0, 1], [0, 1], [0, 1]) : [
      for form in ["%s/*", "*.%s/*"] : format(form, join("", [
        for i, c in split("", d) : (
          lower(c) == upper(c) ? c : # not a letter: literal
          !contains(local.reserved_spelled[d], i) ? "?" :
          cases[index(local.reserved_spelled[d], i)] == 1 ? upper(c) : lower(c)
        )
      ]))
    ]
  ]])
  # Every tag write whose service puts aws:TagKeys in the request context (the Allows below carry
  # Null aws:TagKeys=false, so none is granted without it). Not S3's PutBucketTagging, Route 53's
  # ChangeTagsForResource or tag:TagResources: none of them evaluates aws:TagKeys (Service
  # Authorization Reference), a Deny on it would never apply.
  guarded_tag_write_actions = distinct(concat(
    local.code_actions.ec2.tag_write, local.code_actions.elasticloadbalancing.tag_write,
    local.code_actions.iam.tag_write, local.code_actions.kms.tag_write, local.generic_tag_action_list,
  ))

  # Issue 17 item 7: the guard must fail closed. "The ForAllValues set operator also returns true if
  # there are no context keys in the request. You can prevent missing context keys [...] from
  # evaluating to true by including a Null condition operator in your policy with a value of false"
  # (IAM User Guide, "Multivalued context key examples", reference_policies_condition_examples-
  # multi-valued-context-keys). Every tag-write Allow below therefore carries two conditions on
  # aws:TagKeys: Null=false (a service that puts no tag keys in the request gets no write) and
  # ForAllValues:StringNotEqualsIgnoreCase Name (case-blind, exact). The reserved namespaces are
  # refused by DenyReservedTagKeys (inline policy). Checked by tests/terraform/moto/check_aws_basic.py.
  tag_keys_guard = [
    { test = "Null", values = ["false"] },
    { test = "ForAllValues:StringNotEqualsIgnoreCase", values = ["Name"] },
  ]

  # The tag-write statements under the ownership condition, by Sid (rendered in iam.tf's policy).
  owned_tag_writes = merge(
    {
      WriteOwnedEc2Tags = { actions = local.code_actions.ec2.tag_write, resources = local.ec2_resource_arns }
      WriteOwnedElbTags = { actions = local.code_actions.elasticloadbalancing.tag_write, resources = local.elb_resource_arns }
      WriteOwnedIamTags = { actions = local.code_actions.iam.tag_write, resources = local.iam_resource_arns }
      WriteOwnedKmsTags = { actions = local.code_actions.kms.tag_write, resources = local.kms_resource_arns }
      WriteOwnedTagsViaTaggingApi = {
        actions   = flatten([for s in local.generic_tag_actions : s.actions])
        resources = flatten([for s in local.generic_tag_actions : s.resources])
      }
    },
    length(var.extra_tag_actions) > 0 ? { WriteOwnedTagsExtraServices = { actions = var.extra_tag_actions, resources = ["*"] } } : {},
  )

  # Issue 24 item 4: the ownership-conditioned writes, packed into as few managed policies as the
  # quotas allow (IAM User Guide, "IAM and AWS STS quotas": "Managed policy size: 6,144 characters",
  # "Managed policies attached to an IAM role: 10" by default, adjustable to 20; "IAM doesn't count
  # white space"). Measured by scripts/test-terraform against moto: one cluster's five statements
  # 2,868 characters, a policy of two 5,693, the largest of the 20-cluster plan 5,778 (issue 26 added
  # the KMS statement: about 430 a cluster); three would be ~8,600. So two clusters to a policy, and
  # 20 clusters need 10 policies, the default quota. A further native service's statement would not
  # fit two clusters: it belongs in an existing statement or needs one cluster per policy.
  # var.extra_tag_actions adds a sixth statement per cluster (~600 characters and the actions), which
  # two clusters may not fit: then one cluster per policy, and more than
  # var.managed_policies_per_role_quota clusters are refused at plan (aws_iam_role.lambda). Each
  # policy's rendered size is checked at plan too (aws_iam_policy.owned_tag_writes). A set's groups
  # are keyed by position ("01", "02", ...), so a cluster added or removed anywhere in the list
  # updates policies in place (new policy versions) and adds or removes only the last: the
  # attachments never outnumber the groups during an apply. One cluster keeps the key and the
  # policy it always had (<name>-<infraID>-tag-writes).
  tag_write_clusters_per_policy = length(var.extra_tag_actions) > 0 ? 1 : 2
  tag_write_groups = { for i, ids in chunklist(local.clusters, local.tag_write_clusters_per_policy) :
  (local.cluster_set ? format("%02d", i + 1) : ids[0]) => ids }
  # Statement ids must be unique within a policy and alphanumeric (IAM JSON policy reference, "Sid"):
  # a group of two numbers its clusters' statements 1 and 2.
  owned_tag_write_statements = { for k, ids in local.tag_write_groups : k => flatten([
    for i, id in ids : [for sid, st in local.owned_tag_writes : {
      sid           = length(ids) > 1 ? "${sid}${i + 1}" : sid
      actions       = st.actions
      resources     = st.resources
      ownership_key = local.ownership_tag_keys[id]
    }]
  ]) }

  arn_prefix = "arn:${local.partition}"
  # A cluster set's parameter path as an ARN, without its trailing '/'.
  ssm_path_arn = local.ssm_set ? "${local.arn_prefix}:ssm:${local.region}:${local.account_id}:parameter${trimsuffix(local.ssm_path, "/")}" : null

  ec2_resource_arns = [
    "${local.arn_prefix}:ec2:${local.region}:${local.account_id}:*",
    "${local.arn_prefix}:ec2:${local.region}::image/*", # AMI and snapshot ARNs have no account
    "${local.arn_prefix}:ec2:${local.region}::snapshot/*",
  ]
  # Issue 17 item 8: listeners and listener rules are owned ELBv2 resources too (the installer tags
  # them). AddTags authorizes them as their own resource types, listener/{app,net,gwy}/... and
  # listener-rule/{app,net}/..., each with aws:ResourceTag/${TagKey} (Service Authorization
  # Reference, "Actions, resources, and condition keys for Elastic Load Balancing V2"), so they are
  # granted here under the same ownership condition. DescribeTags has no resource type ("*", in
  # ReadWithoutResourceType below).
  # Issue 11: Classic load balancers (OpenShift's default ingress) are tagged with the Classic ELB
  # API's AddTags, the same action name, on loadbalancer/<name>; Classic ELB evaluates
  # aws:ResourceTag and aws:TagKeys for it too (Service Authorization Reference, "Actions,
  # resources, and condition keys for Elastic Load Balancing"). loadbalancer/* covers both the
  # ELBv2 loadbalancer/{app,net,gwy}/<name>/<id> and the Classic loadbalancer/<name> ARNs; a
  # Classic name has no '/', so listing loadbalancer/* once is exact, not wider.
  elb_resource_arns = [
    for t in ["loadbalancer", "targetgroup", "listener", "listener-rule"] :
    "${local.arn_prefix}:elasticloadbalancing:${local.region}:${local.account_id}:${t}/*"
  ]
  # Route 53 ARNs carry neither region nor account (arn:aws:route53:::hostedzone/Z...); an identity
  # policy only ever reaches this account's zones and health checks. Reads cover every zone and
  # health check (ownership is learned by reading their tags); writes only those listed in
  # var.route53_writable_resources (issue 35): Route 53 evaluates no tag condition key, so the id
  # is the only limit IAM can draw.
  route53_resource_arns = [for t in ["hostedzone", "healthcheck"] : "${local.arn_prefix}:route53:::${t}/*"]
  route53_writable_arns = distinct(flatten([for id, r in var.route53_writable_resources : concat(
    [for z in r.hosted_zone_ids : "${local.arn_prefix}:route53:::hostedzone/${z}"],
    [for h in r.health_check_ids : "${local.arn_prefix}:route53:::healthcheck/${h}"],
  )]))
  # KMS evaluates aws:ResourceTag/${TagKey} and aws:TagKeys for TagResource on the key resource
  # type, and authorizes ListResourceTags on it (Service Authorization Reference, "Actions,
  # resources, and condition keys for AWS Key Management Service").
  kms_resource_arns = ["${local.arn_prefix}:kms:${local.region}:${local.account_id}:key/*"]
  iam_resource_arns = [
    for t in ["role", "user", "instance-profile", "policy", "oidc-provider"] : "${local.arn_prefix}:iam::${local.account_id}:${t}/*"
  ]
  # Issue 17 item 6: default to the cluster's own bucket names, never every bucket in the account.
  s3_bucket_name_patterns = coalesce(var.s3_bucket_name_patterns, [for id in local.clusters : "${id}-*"])
  s3_bucket_arns          = [for p in local.s3_bucket_name_patterns : "${local.arn_prefix}:s3:::${p}"]
}

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "lambda" {
  name               = local.name
  description        = "tagwarden function for ${local.subject}"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = local.tags

  lifecycle {
    # Issue 24 item 4: refuse at plan what IAM would refuse at the 11th attachment, after the
    # policies were created (a partial apply leaves them behind, unattached).
    precondition {
      condition     = length(local.tag_write_groups) <= var.managed_policies_per_role_quota
      error_message = "The role would need ${length(local.tag_write_groups)} tag-write managed policies (${length(local.clusters)} clusters, ${local.tag_write_clusters_per_policy} per policy), over managed_policies_per_role_quota = ${var.managed_policies_per_role_quota} (\"Managed policies attached to an IAM role\": 10 by default, adjustable to 20). Raise the account's quota and set managed_policies_per_role_quota, or split the clusters over two deployments with different names."
    }
  }
}

data "aws_iam_policy_document" "lambda" {

  # --- Lambda platform ---------------------------------------------------------------------------

  statement {
    sid       = "OwnLogGroup"
    actions   = local.platform_actions.logs
    resources = ["${aws_cloudwatch_log_group.lambda.arn}:*"]
  }

  statement {
    sid       = "ReceiveEventsQueue"
    actions   = ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"]
    resources = [aws_sqs_queue.events.arn]
  }

  statement {
    sid       = "AsyncDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.dlq.arn]
  }

  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]
    content {
      sid       = "ModuleKey"
      actions   = local.platform_actions.kms
      resources = [statement.value]
    }
  }

  # --- Reads ---------------------------------------------------------------------------------------

  # Unconditioned and "*": EC2 and ELBv2 Describe* and the account-wide listings support no
  # resource-level permissions; the function must read a resource's tags to learn whether it is
  # owned, so reads cannot be conditioned on ownership.
  statement {
    sid = "ReadWithoutResourceType"
    actions = concat(
      local.code_actions.ec2.tag_read,
      local.code_actions.elasticloadbalancing.tag_read,
      local.code_actions.iam.tag_list,
      local.code_actions.route53.tag_list,
      local.code_actions.tag.tag_read,
    )
    resources = ["*"]
  }

  # Route 53 authorizes ListTagsForResource and ListTagsForResources on the hostedzone and
  # healthcheck resource types (Service Authorization Reference, "Actions, resources, and condition
  # keys for Amazon Route 53"): scoped to those types, the only ones that carry tags there.
  statement {
    sid       = "ReadRoute53Tags"
    actions   = local.code_actions.route53.tag_read
    resources = local.route53_resource_arns
  }

  # Unconditioned for the same reason (ownership is learned by reading), but limited to this account.
  statement {
    sid       = "ReadIamTags"
    actions   = local.code_actions.iam.tag_read
    resources = local.iam_resource_arns
  }

  statement {
    sid       = "ReadKmsKeyTags"
    actions   = local.code_actions.kms.tag_read
    resources = local.kms_resource_arns
  }

  statement {
    sid       = "ReadBucketTags"
    actions   = local.code_actions.s3.tag_read
    resources = local.s3_bucket_arns
  }

  # --- Tag writes, conditioned on the ownership tag --------------------------------------------------

  # The tag writes conditioned on ownership are in one managed policy per cluster, below.

  # Not conditioned on ownership: Route 53 does not evaluate aws:ResourceTag. Its Service
  # Authorization Reference entry lists no condition key at all for ChangeTagsForResource (resource
  # types hostedzone* and healthcheck*, no aws:ResourceTag, aws:RequestTag or aws:TagKeys; "you can
  # tag Amazon Route 53 hosted zones [...] but you can't restrict access to those resources with
  # tags", AWS re:Post Knowledge Center, "authorization-iam-tags"). An ownership condition would
  # never match, so the only limit IAM can draw is the resource: issue 35, the hosted zones and
  # health checks listed per cluster in var.route53_writable_resources, and none by default (then
  # the function reports each owned zone's drift as a write failure, AccessDenied, naming the
  # grant). ChangeTagsForResource can also remove tags; IAM cannot separate the two, and the code
  # only ever sends AddTags.
  dynamic "statement" {
    for_each = length(local.route53_writable_arns) > 0 ? [1] : []
    content {
      sid       = "WriteListedRoute53Tags"
      actions   = local.code_actions.route53.tag_write
      resources = local.route53_writable_arns
    }
  }

  # The generic path (Resource Groups Tagging API). TagResources has no resource type or condition
  # key, so it is "*" here and writes nothing on its own: each ARN also needs the owning service's
  # tag action, granted in the next statements under the ownership condition.
  statement {
    sid       = "TagResourcesViaTaggingApi"
    actions   = local.code_actions.tag.tag_write
    resources = ["*"]
  }

  # Not conditioned on ownership: S3 does not evaluate aws:ResourceTag for PutBucketTagging on
  # general purpose buckets. Bucket-tag ABAC exists only for buckets with ABAC enabled, and those
  # reject PutBucketTagging altogether (tags go through s3:TagResource there). The limits are the
  # bucket name patterns (var.s3_bucket_name_patterns), the account, and the code's ownership check.
  # Issue 35: a bucket ARN names no account, so a bucket of that name in another account that
  # grants this role would match the pattern; s3:ResourceAccount ("Filters access by the resource
  # owner AWS account ID", one of the keys the Service Authorization Reference lists for
  # PutBucketTagging: s3:authType, s3:ResourceAccount, s3:signatureAge, s3:signatureversion,
  # s3:TlsVersion, s3:x-amz-content-sha256) pins it to this account. That list has no aws:TagKeys
  # and no aws:RequestTag: S3 puts neither in PutBucketTagging's request context (inferred from
  # the reference; parliament's copy of it agrees), so no tag-key guard can be written for this
  # replace-style call: an Allow conditioned on them would refuse every bucket, a Deny would never
  # apply. The code guards the keys of a bucket write (and verifies the write).
  statement {
    sid       = "WriteBucketTags"
    actions   = local.code_actions.s3.tag_write
    resources = local.s3_bucket_arns

    condition {
      test     = "StringEquals"
      variable = "s3:ResourceAccount"
      values   = [local.account_id]
    }
  }

  # Issue 35: the reserved namespaces in every case (local.reserved_key_patterns), refused for every
  # tag write that carries aws:TagKeys, whichever Allow would grant it.
  statement {
    sid       = "DenyReservedTagKeys"
    effect    = "Deny"
    actions   = local.guarded_tag_write_actions
    resources = ["*"]

    condition {
      test     = "ForAnyValue:StringLike"
      variable = "aws:TagKeys"
      values   = local.reserved_key_patterns
    }
  }

  # --- Policy source and status report -------------------------------------------------------------

  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "ReadPolicyObjects"
      actions   = ["s3:GetObject"]
      resources = [local.s3_set || local.s3_layered ? "${local.bucket_arn}/${local.s3_prefix}*" : "${local.bucket_arn}/${local.s3_key}"]
    }
  }

  # Issue 17 item 13: a missing policy object must read as "no policy". S3 GetObject: "If the object
  # you request doesn't exist, the error that Amazon S3 returns depends on whether you also have the
  # s3:ListBucket permission. If you have the s3:ListBucket permission on the bucket, Amazon S3
  # returns an HTTP status code 404 Not Found error. If you don't have the s3:ListBucket permission,
  # Amazon S3 returns an HTTP status code 403 Access Denied error." (Amazon S3 API Reference,
  # GetObject, "Permissions"). That implicit ListBucket check is not documented to carry an
  # s3:prefix context key (GetObject sends no prefix), so a grant conditioned on s3:prefix cannot be
  # relied on to turn the 403 into a 404. The grant is therefore unconditioned, on the policy bucket only: the bucket
  # is this module's and holds nothing but the policy, its layers and the status report. Layered
  # mode lists the layers with the same grant (ListObjectsV2 with the prefix). The function treats
  # 404 NoSuchKey and, should the grant ever be missing, 403 AccessDenied on the policy key alike.
  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "ListPolicyBucket"
      actions   = ["s3:ListBucket"]
      resources = [local.bucket_arn]
    }
  }

  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "WriteStatusReport"
      actions   = local.code_actions.s3.status_write
      resources = ["${local.bucket_arn}/${local.status_key}"]
    }
  }

  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "ReadPolicyParameter"
      actions   = local.code_actions.ssm.policy_read
      resources = [local.ssm_set ? "${local.ssm_path_arn}/*" : local.parameter_arn]
    }
  }

  # "GetParametersByPath [...] authorizes against the path in the request rather than against the
  # parameters it returns" (Systems Manager User Guide, "How Parameter Store authorizes parameter
  # retrieval"); the function asks for the set's path without its trailing '/'.
  dynamic "statement" {
    for_each = local.ssm_set ? [1] : []
    content {
      sid       = "ListPolicyParameters"
      actions   = local.code_actions.ssm.policy_list
      resources = [local.ssm_path_arn]
    }
  }

  # The status report: a sibling "<name>-status" parameter, the only one the function writes; in
  # a cluster set, one per cluster under the sibling path "<path>-status/".
  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "WriteStatusParameter"
      actions   = local.code_actions.ssm.status_write
      resources = [local.ssm_set ? "${local.ssm_path_arn}-status/*" : "${local.parameter_arn}-status"]
    }
  }
}

# --- Tag writes, conditioned on the ownership tag: managed policies of up to two clusters --------

# A statement can require one ownership tag only: the tag's key names the cluster
# (aws:ResourceTag/kubernetes.io/cluster/<infraID>), and IAM has no wildcard in condition key
# names, so each cluster needs its own statements (~2,430 characters). All inline policies of a
# role share "Role policy size: 10,240 characters" (IAM User Guide, "IAM and AWS STS quotas"), of
# which the rest of the role takes ~2,550: inline, a fourth cluster would not fit. So the clusters'
# statements are customer managed policies (6,144 characters each), two clusters to a policy
# (local.tag_write_groups).
data "aws_iam_policy_document" "owned_tag_writes" {
  for_each = local.tag_write_groups

  # One statement per family, each under the ownership condition and the fail-closed tag-key guard:
  # EC2; ELBv2 and Classic ELB; IAM (it evaluates aws:ResourceTag for roles, users, instance
  # profiles, customer managed policies and OIDC providers: IAM User Guide, "Controlling access to
  # IAM resources"); the generic path's service actions; and var.extra_tag_actions, other services'
  # own tag actions on any resource of the account. A service that does not evaluate aws:ResourceTag
  # or aws:TagKeys for its tag action refuses the write (AccessDenied, reported by the function):
  # this fails closed, never open.
  dynamic "statement" {
    for_each = local.owned_tag_write_statements[each.key]
    content {
      sid       = statement.value.sid
      actions   = statement.value.actions
      resources = statement.value.resources

      condition {
        test     = "StringEquals"
        variable = "aws:ResourceTag/${statement.value.ownership_key}"
        values   = [local.ownership_tag_value]
      }
      dynamic "condition" {
        for_each = local.tag_keys_guard
        content {
          test     = condition.value.test
          variable = "aws:TagKeys"
          values   = condition.value.values
        }
      }
    }
  }
}

resource "aws_iam_policy" "owned_tag_writes" {
  for_each = local.tag_write_groups

  name = local.cluster_set ? "${var.name}-tag-writes-${each.key}" : "${var.name}-${each.key}-tag-writes"
  # A policy's description cannot change in place (the provider replaces the policy and its
  # attachment), so it names no member of a set's group: the members move when clusters are added.
  description = local.cluster_set ? "tagwarden (${local.name}): add tags to resources owned by the clusters of tag-write group ${each.key} (output tag_write_policy_arns)" : "tagwarden (${local.name}): add tags to resources owned by cluster ${each.key}"
  policy      = data.aws_iam_policy_document.owned_tag_writes[each.key].json
  tags        = local.tags

  lifecycle {
    # "Managed policy size: 6,144 characters"; "IAM doesn't count white space when calculating the
    # size of a policy against this limit" (IAM User Guide, "IAM and AWS STS quotas").
    precondition {
      condition     = length(replace(data.aws_iam_policy_document.owned_tag_writes[each.key].json, "/\\s/", "")) <= 6144
      error_message = "The tag-write policy of ${join(", ", each.value)} has ${length(replace(data.aws_iam_policy_document.owned_tag_writes[each.key].json, "/\\s/", ""))} characters without white space; IAM allows 6,144 per managed policy. Fewer extra_tag_actions, or report this: the module's packing is wrong."
    }
  }
}

resource "aws_iam_role_policy_attachment" "owned_tag_writes" {
  for_each = local.tag_write_groups

  role       = aws_iam_role.lambda.name
  policy_arn = aws_iam_policy.owned_tag_writes[each.key].arn
}

resource "aws_iam_role_policy" "lambda" {
  name   = "tagwarden"
  role   = aws_iam_role.lambda.id
  policy = data.aws_iam_policy_document.lambda.json
}
