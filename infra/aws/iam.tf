# The function's execution role: exactly the calls the code makes — the services' reads and writes
# from their descriptors (local.grants) and the policy source's (local.policy_store_actions) — the
# services' own tag actions that tag:TagResources needs (the descriptors' owned_via_tagging_api
# grants, var.extra_tag_actions), plus what the Lambda service does on its behalf
# (local.platform_actions). Writes are conditioned on the ownership tag wherever the service
# evaluates aws:ResourceTag for that action; never Delete*, Untag* or RemoveTags (Route 53's
# ChangeTagsForResource, which adds and removes in one action, is the one tag write IAM cannot split).

locals {
  # Per IAM service prefix, from the service descriptors (local.generated, main.tf; each descriptor
  # cites the Service Authorization Reference for its resource types and condition keys): the reads
  # that have no resource type (read_anywhere, granted on "*"), the reads granted on its resources
  # (read), its write, the resource ARN patterns, and what limits the write (guard):
  #   owned                  aws:ResourceTag and aws:TagKeys: the write under each cluster's
  #                          ownership condition (owned_tag_writes) and the reserved-key Deny;
  #   owned_via_tagging_api  the same, for the service's own action that TagResources needs;
  #   listed                 Route 53: only var.route53_writable_resources;
  #   bucket                 S3: the bucket name patterns, in this account;
  #   anywhere               tag:TagResources, on "*".
  # A new service whose write is `owned` needs no edit here.
  grants = [for g in local.generated.services : merge(g, {
    resources = [for p in g.resources : replace(replace(replace(p, "{partition}", local.partition), "{region}", local.region), "{account}", local.account_id)]
  })]
  grant = { for g in local.grants : g.service => g }

  # What the code calls for the policy source and its status report (both sources' actions: the
  # statements below grant the configured one's).
  policy_store_actions = {
    # The status report is read back too: it keeps the contested keys (crates/core/src/contest/mod.rs),
    # and each write of it is laid over the one there.
    s3 = {
      policy_read  = ["s3:GetObject", "s3:ListBucket"]
      status_read  = ["s3:GetObject"]
      status_write = ["s3:PutObject"]
    }
    ssm = {
      policy_read  = ["ssm:GetParameter"]
      policy_list  = ["ssm:GetParametersByPath"] # a cluster set: every cluster's parameter in one call
      status_read  = ["ssm:GetParameter"]
      status_write = ["ssm:PutParameter"]
    }
  }

  # Every action the code calls, per service and purpose (output iam_actions): the descriptors' reads
  # and writes (not the actions TagResources needs, which the code does not call) and the policy
  # source's.
  tag_actions = { for g in local.grants : g.service => { tag_read = concat(g.read_anywhere, g.read), tag_write = g.write }
  if g.guard != "owned_via_tagging_api" }
  code_actions = { for svc in distinct(concat(keys(local.tag_actions), keys(local.policy_store_actions))) :
  svc => merge(try(local.tag_actions[svc], {}), try(local.policy_store_actions[svc], {})) }

  # Not called by the code: the Lambda service uses these for logging, the queue mapping and the
  # asynchronous-invocation dead-letter queue (and KMS when a key is configured).
  platform_actions = {
    logs = ["logs:CreateLogStream", "logs:PutLogEvents"]
    sqs  = ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage", "sqs:SendMessage"]
    kms  = var.kms_key_arn == null ? [] : ["kms:Decrypt", "kms:GenerateDataKey"]
  }

  # tag:TagResources is authorized twice. The Tagging API action itself has no resource type and no
  # condition key (the `anywhere` grant), so it is granted on "*"; and for every ARN in the call the
  # caller also needs the owning service's own tag permission ("you must have [...] permission to
  # call the tagging action of the service that owns the resource", Resource Groups Tagging API
  # Reference, TagResources; e.g. elasticfilesystem:TagResource). Those service actions (the
  # `owned_via_tagging_api` grants; other services: var.extra_tag_actions) are granted under the
  # ownership condition and the aws:TagKeys guard, so TagResources can only tag owned resources.
  generic_tag_action_list = distinct(concat(flatten([for g in local.via_grants : g.write]), var.extra_tag_actions))

  # Ownership condition (docs/src/security/trust-model.md) and a guard that the function never writes reserved keys
  # (ownership tags, Name, the kubernetes.io/, openshift.io/ and k8s.io/ namespaces).
  #
  # The guard is case-blind. IAM compares condition key names without regard to case
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
  guarded_tag_write_actions = distinct(concat(flatten([for g in local.grants : g.write if g.guard == "owned"]), local.generic_tag_action_list))

  # The guard must fail closed. "The ForAllValues set operator also returns true if
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

  # Statement ids. The services granted before the descriptors drove this file keep the Sids they
  # had (a rename would update every deployed policy); a scoped read is otherwise Read<Service>Tags.
  read_sids = { kms = "ReadKmsKeyTags" }
  # The tag-write statements under the ownership condition, by Sid (rendered in iam.tf's policy).
  # Those services keep a statement each, and the actions TagResources needs theirs; the writes of
  # every other `owned` service share one, WriteOwnedTags (absent while there is none): a statement
  # costs ~450 characters a cluster, an action and a resource pattern more in it ~60 (packing below).
  own_statement_sids = { ec2 = "WriteOwnedEc2Tags", elasticloadbalancing = "WriteOwnedElbTags", iam = "WriteOwnedIamTags", kms = "WriteOwnedKmsTags" }
  via_grants         = [for g in local.grants : g if g.guard == "owned_via_tagging_api"]
  other_owned_grants = [for g in local.grants : g if g.guard == "owned" && !contains(keys(local.own_statement_sids), g.service)]
  owned_tag_writes = merge(
    { for g in local.grants : local.own_statement_sids[g.service] => { actions = g.write, resources = g.resources } if g.guard == "owned" && contains(keys(local.own_statement_sids), g.service) },
    {
      WriteOwnedTagsViaTaggingApi = {
        actions   = flatten([for g in local.via_grants : g.write])
        resources = flatten([for g in local.via_grants : g.resources])
      }
    },
    length(local.other_owned_grants) > 0 ? {
      WriteOwnedTags = {
        actions   = flatten([for g in local.other_owned_grants : g.write])
        resources = flatten([for g in local.other_owned_grants : g.resources])
      }
    } : {},
    length(var.extra_tag_actions) > 0 ? { WriteOwnedTagsExtraServices = { actions = var.extra_tag_actions, resources = ["*"] } } : {},
  )

  # The ownership-conditioned writes, packed into as few managed policies as the
  # quotas allow (IAM User Guide, "IAM and AWS STS quotas": "Managed policy size: 6,144 characters",
  # "Managed policies attached to an IAM role: 10" by default, adjustable to 20; "IAM doesn't count
  # white space"). Measured by scripts/test-terraform against moto: one cluster's five statements
  # 2,868 characters, a policy of two 5,693, the largest of the 20-cluster plan 5,778 (the KMS statement
  # adds about 430 a cluster); three would be ~8,600. So two clusters to a policy, and
  # 20 clusters need 10 policies, the default quota. Further native services share one statement
  # (WriteOwnedTags, in owned_tag_writes) rather than add one each.
  # var.extra_tag_actions adds a sixth statement per cluster (~600 characters and the actions), which
  # two clusters may not fit: then one cluster per policy, and more than
  # var.managed_policies_per_role_quota clusters are refused at plan (aws_iam_role.lambda). Each
  # policy's rendered size is checked at plan too (aws_iam_policy.owned_tag_writes). A set's groups
  # are keyed by position ("01", "02", ...), so a cluster added or removed anywhere in the list
  # updates policies in place (new policy versions) and adds or removes only the last: the
  # attachments never outnumber the groups during an apply. One cluster keeps the key and the
  # policy it always had (<name>-<infraID>-tag-writes).
  # What is packed is an ownership key's statements: one per OpenShift or HyperShift cluster, two
  # per Cluster API cluster (local.ownership_units), so a Cluster API cluster counts twice.
  tag_write_clusters_per_policy = length(var.extra_tag_actions) > 0 ? 1 : 2
  tag_write_unit_groups         = chunklist(local.ownership_units, local.tag_write_clusters_per_policy)
  # A single cluster keeps the key it always had; a single Cluster API cluster whose two keys need
  # two policies (with extra_tag_actions) names the second `<infraID>-2`.
  tag_write_group_keys = [for i, units in local.tag_write_unit_groups :
  local.cluster_set ? format("%02d", i + 1) : i == 0 ? units[0].id : format("%s-%d", units[0].id, i + 1)]
  tag_write_groups = { for i, units in local.tag_write_unit_groups : local.tag_write_group_keys[i] => distinct([for u in units : u.id]) }
  # Statement ids must be unique within a policy and alphanumeric (IAM JSON policy reference, "Sid"):
  # a group of two numbers its keys' statements 1 and 2.
  owned_tag_write_statements = { for i, units in local.tag_write_unit_groups : local.tag_write_group_keys[i] => flatten([
    for j, u in units : [for sid, st in local.owned_tag_writes : {
      sid           = length(units) > 1 ? "${sid}${j + 1}" : sid
      actions       = st.actions
      resources     = st.resources
      ownership_key = u.key
    }]
  ]) }

  arn_prefix = "arn:${local.partition}"
  # A cluster set's parameter path as an ARN, without its trailing '/'.
  ssm_path_arn = local.ssm_set ? "${local.arn_prefix}:ssm:${local.region}:${local.account_id}:parameter${trimsuffix(local.ssm_path, "/")}" : null

  # Route 53 evaluates no tag condition key (its descriptor), so writes go only to the
  # hosted zones and health checks listed in var.route53_writable_resources: the id is the only
  # limit IAM can draw. Its ARNs carry neither region nor account; an identity policy only ever
  # reaches this account's zones and health checks.
  route53_writable_arns = distinct(flatten([for id, r in var.route53_writable_resources : concat(
    [for z in r.hosted_zone_ids : "${local.arn_prefix}:route53:::hostedzone/${z}"],
    [for h in r.health_check_ids : "${local.arn_prefix}:route53:::healthcheck/${h}"],
  )]))
  # Default to the cluster's own bucket names, never every bucket in the account.
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
    # Refuse at plan what IAM would refuse at the 11th attachment, after the
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
    resources = [module.events_queue.arn]
  }

  statement {
    sid       = "AsyncDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [module.events_queue.dlq_arn]
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
    sid       = "ReadWithoutResourceType"
    actions   = flatten([for g in local.grants : g.read_anywhere])
    resources = ["*"]
  }

  # Unconditioned for the same reason (ownership is learned by reading), but scoped to each
  # service's resource types in this account (Route 53's hostedzone and healthcheck, the only ones
  # that carry tags there). S3's are the bucket patterns, below.
  dynamic "statement" {
    for_each = [for g in local.grants : g if length(g.read) > 0 && g.guard != "bucket"]
    content {
      sid       = lookup(local.read_sids, statement.value.service, "Read${title(statement.value.service)}Tags")
      actions   = statement.value.read
      resources = statement.value.resources
    }
  }

  # None in an organization hub (no cluster of its own: main.tf); IAM refuses a statement without
  # resources ("MalformedPolicyDocument: Policy statement must contain resources").
  dynamic "statement" {
    for_each = length(local.s3_bucket_arns) > 0 ? [1] : []
    content {
      sid       = "ReadBucketTags"
      actions   = local.grant.s3.read
      resources = local.s3_bucket_arns
    }
  }

  # --- Tag writes, conditioned on the ownership tag --------------------------------------------------

  # The tag writes conditioned on ownership are in one managed policy per cluster, below.

  # Not conditioned on ownership: Route 53 does not evaluate aws:ResourceTag. Its Service
  # Authorization Reference entry lists no condition key at all for ChangeTagsForResource (resource
  # types hostedzone* and healthcheck*, no aws:ResourceTag, aws:RequestTag or aws:TagKeys; "you can
  # tag Amazon Route 53 hosted zones [...] but you can't restrict access to those resources with
  # tags", AWS re:Post Knowledge Center, "authorization-iam-tags"). An ownership condition would
  # never match, so the only limit IAM can draw is the resource: the hosted zones and
  # health checks listed per cluster in var.route53_writable_resources, and none by default (then
  # the function reports each owned zone's drift as a write failure, AccessDenied, naming the
  # grant). ChangeTagsForResource can also remove tags; IAM cannot separate the two, and the code
  # only ever sends AddTags.
  dynamic "statement" {
    for_each = length(local.route53_writable_arns) > 0 ? [1] : []
    content {
      sid       = "WriteListedRoute53Tags"
      actions   = local.grant.route53.write
      resources = local.route53_writable_arns
    }
  }

  # The generic path (Resource Groups Tagging API). TagResources has no resource type or condition
  # key, so it is "*" here and writes nothing on its own: each ARN also needs the owning service's
  # tag action, granted in the next statements under the ownership condition.
  statement {
    sid       = "TagResourcesViaTaggingApi"
    actions   = local.grant.tag.write
    resources = ["*"]
  }

  # Not conditioned on ownership: S3 does not evaluate aws:ResourceTag for PutBucketTagging on
  # general purpose buckets. Bucket-tag ABAC exists only for buckets with ABAC enabled, and those
  # reject PutBucketTagging altogether (tags go through s3:TagResource there). The limits are the
  # bucket name patterns (var.s3_bucket_name_patterns), the account, and the code's ownership check.
  # A bucket ARN names no account, so a bucket of that name in another account that
  # grants this role would match the pattern; s3:ResourceAccount ("Filters access by the resource
  # owner AWS account ID", one of the keys the Service Authorization Reference lists for
  # PutBucketTagging: s3:authType, s3:ResourceAccount, s3:signatureAge, s3:signatureversion,
  # s3:TlsVersion, s3:x-amz-content-sha256) pins it to this account. That list has no aws:TagKeys
  # and no aws:RequestTag: S3 puts neither in PutBucketTagging's request context (inferred from
  # the reference; parliament's copy of it agrees), so no tag-key guard can be written for this
  # replace-style call: an Allow conditioned on them would refuse every bucket, a Deny would never
  # apply. The code guards the keys of a bucket write (and verifies the write).
  # None in an organization hub, as ReadBucketTags.
  dynamic "statement" {
    for_each = length(local.s3_bucket_arns) > 0 ? [1] : []
    content {
      sid       = "WriteBucketTags"
      actions   = local.grant.s3.write
      resources = local.s3_bucket_arns

      condition {
        test     = "StringEquals"
        variable = "s3:ResourceAccount"
        values   = [local.account_id]
      }
    }
  }

  # The reserved namespaces in every case (local.reserved_key_patterns), refused for every
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

  # A missing policy object must read as "no policy". S3 GetObject: "If the object
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
      actions   = concat(local.policy_store_actions.s3.status_read, local.policy_store_actions.s3.status_write)
      resources = ["${local.bucket_arn}/${local.status_key}"]
    }
  }

  # The contest state: read and written by the function alone (the bucket policy denies others).
  dynamic "statement" {
    for_each = local.use_s3 ? [1] : []
    content {
      sid       = "WriteContestState"
      actions   = concat(local.policy_store_actions.s3.status_read, local.policy_store_actions.s3.status_write)
      resources = ["${local.bucket_arn}/${local.contests_folder}*"]
    }
  }

  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "WriteContestParameters"
      actions   = concat(local.policy_store_actions.ssm.status_read, local.policy_store_actions.ssm.status_write)
      resources = ["arn:${local.partition}:ssm:${local.region}:${local.account_id}:parameter/_tagwarden/contests/*"]
    }
  }

  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "ReadPolicyParameter"
      actions   = local.policy_store_actions.ssm.policy_read
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
      actions   = local.policy_store_actions.ssm.policy_list
      resources = [local.ssm_path_arn]
    }
  }

  # The status report: a sibling "<name>-status" parameter, the only one the function writes; in
  # a cluster set, one per cluster under the sibling path "<path>-status/".
  dynamic "statement" {
    for_each = local.use_ssm ? [1] : []
    content {
      sid       = "WriteStatusParameter"
      actions   = concat(local.policy_store_actions.ssm.status_read, local.policy_store_actions.ssm.status_write)
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

  # The statements of local.owned_tag_writes, each under the ownership condition and the fail-closed
  # tag-key guard: EC2; ELBv2 and Classic ELB; IAM; KMS; the other services' own tag actions (the
  # descriptors', each citing where its service evaluates aws:ResourceTag and aws:TagKeys); and
  # var.extra_tag_actions, other services' own tag actions on any resource of the account. A
  # service that does not evaluate aws:ResourceTag or aws:TagKeys for its tag action refuses the
  # write (AccessDenied, reported by the function): this fails closed, never open.
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
