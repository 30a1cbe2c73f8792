# tagwarden for one AWS account and one cluster (infra_id) or a set of clusters (infra_ids): the
# Lambda function and the values the other files share. Events and delivery: events.tf, queues.tf. Policy storage: policy_store.tf.
# Permissions: iam.tf. Dashboard and alarms: monitoring.tf.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  # One cluster (infra_id) or a cluster set (infra_ids): the clusters whose ownership tag
  # the role may write under and whose policies the function applies.
  cluster_set = var.infra_ids != null
  clusters    = local.cluster_set ? var.infra_ids : compact([var.infra_id])
  # An AWS Organization hub (organization = modules/organization's `hub`, with infra_ids = []; the
  # one switch: extra_environment refuses TAGWARDEN_ORGANIZATION). Every account, the hub's
  # too, is enforced through its member role and spoke, so this module grants no tag write, adds no rule for the hub account's own events, and
  # draws and alarms on the whole organization's metrics rather than per listed cluster.
  organization = var.organization != null
  # The hub's settings as the function reads them (crates/aws/src/organization/config.rs).
  organization_environment = var.organization == null ? {} : {
    TAGWARDEN_ORGANIZATION    = var.organization.uri
    TAGWARDEN_MEMBER_ROLE     = var.organization.member_role
    TAGWARDEN_MEMBER_REGIONS  = join(",", var.organization.member_regions)
    TAGWARDEN_CLUSTERS        = join(",", var.organization.clusters)
    TAGWARDEN_SHARD_QUEUE_URL = var.organization.shard_queue_url
  }
  # Names in infra_ids not shaped as OpenShift's infraIDs, though their kind says OpenShift.
  long_openshift_ids = [for id in local.clusters : id if
  lookup(var.cluster_kinds, id, "OpenShift") != "ClusterAPI" && !can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", id))]

  name = local.cluster_set ? var.name : "${var.name}-${var.infra_id}"
  # How descriptions name what the deployment serves (a list of 20 infraIDs would not fit them).
  subject = local.organization ? "an AWS Organization" : local.cluster_set ? "a set of ${length(local.clusters)} clusters" : "cluster ${var.infra_id}"
  label   = local.organization ? "organization hub ${var.name}" : local.cluster_set ? "cluster set ${var.name}" : var.infra_id

  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition
  region     = data.aws_region.current.name
  tags       = var.tags

  # The tags that mark a resource as belonging to a cluster (docs/src/concepts/ownership.md), by the cluster's kind
  # (crates/core/src/cloud.rs, ClusterKind): an OpenShift or HyperShift cluster owns by
  # kubernetes.io/cluster/<infraID>; a Cluster API (CAPA) cluster by CAPA's own key on what CAPA
  # creates (api/v1beta2/tags.go, NameAWSProviderOwned) or by the cloud provider's on what the
  # workload cluster's cloud provider and CSI driver create, so either grants the write.
  ownership_tag_keys = { for id in local.clusters : id => (
    lookup(var.cluster_kinds, id, "OpenShift") == "ClusterAPI"
    ? ["sigs.k8s.io/cluster-api-provider-aws/cluster/${id}", "kubernetes.io/cluster/${id}"]
    : ["kubernetes.io/cluster/${id}"]
  ) }
  # Each (cluster, ownership key): one set of conditioned tag-write statements each (iam.tf).
  ownership_units     = flatten([for id in local.clusters : [for key in local.ownership_tag_keys[id] : { id = id, key = key }]])
  ownership_tag_value = "owned"

  # The services the function reads and writes natively: the CloudTrail events it handles
  # (events.tf) and what their calls need of the role (iam.tf). Generated from the service
  # descriptors (crates/core/src/services/catalogue.rs) by tests/iam_policy.rs, which fails while it is stale.
  generated = jsondecode(file("${path.module}/generated/services.json"))

  use_s3  = var.policy_source == "s3"
  use_ssm = var.policy_source == "ssm"

  # S3 mode: a single document (policy_key), layered documents under policy_prefix, or a cluster
  # set under policy_prefix (default clusters/), one folder of layers per cluster.
  s3_set     = local.use_s3 && local.cluster_set
  s3_prefix  = local.s3_set ? coalesce(var.policy_prefix, "clusters/") : var.policy_prefix
  s3_layered = local.use_s3 && !local.s3_set && var.policy_prefix != null
  s3_key     = local.use_s3 && !local.s3_set && !local.s3_layered ? coalesce(var.policy_key, "tagwarden/policy.yaml") : null
  # Directory of the single key ("" when the key has no '/'), or the layer prefix.
  s3_dir = (!local.use_s3 || local.s3_set ? null : local.s3_layered ? var.policy_prefix :
  (strcontains(local.s3_key, "/") ? "${join("/", slice(split("/", local.s3_key), 0, length(split("/", local.s3_key)) - 1))}/" : ""))
  # The status report beside the policy; in a set, one per cluster, beside its policy.
  status_key = !local.use_s3 ? null : local.s3_set ? "${local.s3_prefix}*/tagwarden-status.json" : "${local.s3_dir}tagwarden-status.json"
  # The contest state, apart from every publisher's folder (crates/aws/src/policy_store.rs).
  contests_folder = "_tagwarden/contests/"
  bucket_name     = local.use_s3 ? coalesce(var.policy_bucket_name, "${local.name}-${local.account_id}") : null
  bucket_arn      = local.use_s3 ? "arn:${local.partition}:s3:::${local.bucket_name}" : null

  # SSM mode: one parameter, or a cluster set: one parameter per cluster under a path, and the
  # status reports under the sibling path "<path>-status/", outside the set (GetParametersByPath
  # on the set never returns them, and the change rule never fires for them).
  ssm_set  = local.use_ssm && local.cluster_set
  ssm_path = local.ssm_set ? coalesce(var.policy_parameter_path, "/${var.name}/clusters/") : null
  # Computed, not read from the parameter: the parameter is created after the change
  # rule and the function (so its first value starts a sweep), which name it.
  ssm_parameter_name = local.use_ssm && !local.ssm_set ? coalesce(var.policy_parameter_name, "/${var.name}/${var.infra_id}/policy") : null
  parameter_arn      = local.use_ssm && !local.ssm_set ? "arn:${local.partition}:ssm:${local.region}:${local.account_id}:parameter${local.ssm_parameter_name}" : null

  # TAGWARDEN_POLICY, the function's contract: s3://bucket/key | s3://bucket/prefix/ | ssm:/name,
  # and for a cluster set s3://bucket/prefix/*/ | ssm:/path/*.
  policy_uri = (local.ssm_set ? "ssm:${local.ssm_path}*" : local.use_ssm ? "ssm:${local.ssm_parameter_name}" :
  "s3://${local.bucket_name}/${local.s3_set ? "${local.s3_prefix}*/" : local.s3_layered ? var.policy_prefix : local.s3_key}")

  # Reserved by default, one above the queue mapping's maximum (variables.tf).
  reserved_concurrency = coalesce(var.reserved_concurrent_executions, var.sqs_maximum_concurrency + 1)

  # The package's manifest (scripts/package-lambda, `cargo xtask manifest`).
  # Read leniently here: the function's preconditions say what is wrong with it and how to fix it.
  lambda_manifest_path = coalesce(var.lambda_manifest, "${var.lambda_zip}.json")
  lambda_manifest      = fileexists(local.lambda_manifest_path) ? try(jsondecode(file(local.lambda_manifest_path)), {}) : null
  lambda_zip_sha256    = filesha256(var.lambda_zip)
  # The manifest's architecture; a placeholder only while a precondition refuses the plan anyway.
  lambda_architecture = try(local.lambda_manifest.architecture, "arm64")

  sns_topic_arn = var.alarm_sns_topic_arn != null ? var.alarm_sns_topic_arn : (var.create_sns_topic ? aws_sns_topic.alarms[0].arn : null)
}

################################################################################
# Function
################################################################################

resource "aws_cloudwatch_log_group" "lambda" {
  #checkov:skip=CKV_AWS_338: retention is a variable (default 30 days); metrics and the status report are the durable record, not the logs.
  name              = "/aws/lambda/${local.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = local.tags
}

resource "aws_lambda_function" "this" {
  #checkov:skip=CKV_AWS_50: the Rust binary is not instrumented for X-Ray; reconcile latency is reported as the ReconcileLatency EMF metric.
  #checkov:skip=CKV_AWS_117: the function only calls public AWS APIs (EC2, S3, ELB, Route 53, IAM, Tagging, SSM); a VPC would need a NAT and interface endpoints for each of them, for no gain.
  function_name                  = local.name
  description                    = "tagwarden: keeps the tags of the resources owned by ${local.subject}"
  role                           = aws_iam_role.lambda.arn
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [local.lambda_architecture]
  filename                       = var.lambda_zip
  source_code_hash               = filebase64sha256(var.lambda_zip)
  memory_size                    = var.memory_size
  timeout                        = var.timeout
  reserved_concurrent_executions = local.reserved_concurrency
  kms_key_arn                    = var.kms_key_arn
  code_signing_config_arn        = var.code_signing_config_arn

  environment {
    variables = merge({
      TAGWARDEN_POLICY        = local.policy_uri
      TAGWARDEN_SELF_ROLE_ARN = aws_iam_role.lambda.arn
      POLICY_TTL              = tostring(var.policy_ttl_seconds)
      RUST_LOG                = var.log_level
      # The pace of the function's own EC2 CreateTags, per running instance.
      TAGWARDEN_EC2_WRITES_PER_SECOND = tostring(var.ec2_writes_per_second)
      # The infraIDs this deployment enforces; the function enforces no other folder or
      # parameter of the set, and a set deployment without it enforces nothing (fails closed).
      TAGWARDEN_CLUSTERS = join(",", local.clusters)
      # Audit (the default): evaluate and report, write nothing; enforce: write.
      TAGWARDEN_MODE = var.mode
      }, local.organization && local.sweep_interval_seconds != null ? {
      # An organization hub rotates the accounts' order and counts stale accounts by the schedule.
      TAGWARDEN_SWEEP_SCHEDULE_SECONDS = tostring(local.sweep_interval_seconds)
      } : {}, var.yield_to == null ? {} : {
      # The controllers whose changes may hold a key back (a contest); every other writer's change
      # is corrected every time. Unset: the code's defaults (the load balancer controller, CAPA).
      TAGWARDEN_YIELD_TO = length(var.yield_to) == 0 ? "none" : join(",", var.yield_to)
    }, local.organization_environment, var.extra_environment)
  }

  # Failed asynchronous invocations (sweep schedule, policy-change notifications) are kept, not dropped.
  dead_letter_config {
    target_arn = module.events_queue.dlq_arn
  }

  tags = local.tags

  depends_on = [
    aws_cloudwatch_log_group.lambda,
    aws_iam_role_policy.lambda,
    aws_iam_role_policy_attachment.owned_tag_writes,
  ]

  lifecycle {
    # The package and its manifest belong together (scripts/package-lambda writes both).
    precondition {
      condition     = local.lambda_manifest != null
      error_message = "No manifest beside ${var.lambda_zip}: expected ${local.lambda_manifest_path}. Build the package with scripts/package-lambda (it writes <zip>.json: architecture, sha256, version), or set lambda_manifest to its path."
    }
    precondition {
      condition     = try(local.lambda_manifest.sha256, "") == local.lambda_zip_sha256
      error_message = "The manifest ${local.lambda_manifest_path} is not the manifest of ${var.lambda_zip}: its sha256 is ${try(local.lambda_manifest.sha256, "missing")}, the zip's is ${local.lambda_zip_sha256}. Rebuild both with scripts/package-lambda."
    }
    precondition {
      condition     = contains(["arm64", "x86_64"], try(local.lambda_manifest.architecture, ""))
      error_message = "The manifest ${local.lambda_manifest_path} names no Lambda architecture (arm64 or x86_64): ${jsonencode(try(local.lambda_manifest.architecture, null))}. Rebuild the package with scripts/package-lambda."
    }
    precondition {
      condition     = var.architecture == null || var.architecture == try(local.lambda_manifest.architecture, "")
      error_message = "architecture = \"${coalesce(var.architecture, "-")}\" but ${var.lambda_zip} was built for ${try(local.lambda_manifest.architecture, "an unknown architecture")} (its manifest): a function on the wrong architecture never starts. Drop architecture (the manifest decides), or rebuild with ARCH=${coalesce(var.architecture, "-")} scripts/package-lambda."
    }
    # Reserved concurrency 0 throttles every invocation ("setting reserved
    # concurrency to zero [...] stops all invocations", Lambda Developer Guide, "Configuring reserved
    # concurrency"); below the queue mapping's maximum concurrency the mapping's own invocations are
    # throttled and messages cycle back into the queue ("make sure the maximum concurrency is not
    # greater than the function's reserved concurrency", Lambda Developer Guide, "Configuring
    # maximum concurrency for Amazon SQS event sources").
    precondition {
      condition     = local.reserved_concurrency != 0
      error_message = "reserved_concurrent_executions = 0 throttles every invocation: the function would never run. Use -1 (unreserved) or a number >= sqs_maximum_concurrency."
    }
    precondition {
      condition     = local.reserved_concurrency == -1 || local.reserved_concurrency >= var.sqs_maximum_concurrency
      error_message = "reserved_concurrent_executions must be -1 (unreserved) or at least sqs_maximum_concurrency (the queue mapping's maximum concurrency); below that Lambda throttles the queue mapping's invocations. Leave room above it for the sweep and policy-change invocations."
    }
    precondition {
      condition     = !local.cluster_set || (var.policy_key == null && var.policy_document == null && var.policy_parameter_name == null && length(var.policy_layers) == 0)
      error_message = "A cluster set (infra_ids) keeps one policy per cluster: use cluster_policy_documents (and policy_prefix or policy_parameter_path for its location), not policy_key, policy_document, policy_layers or policy_parameter_name."
    }
    precondition {
      condition     = length(setsubtract(keys(var.cluster_policy_documents), local.clusters)) == 0 && (local.cluster_set || length(var.cluster_policy_documents) == 0)
      error_message = "cluster_policy_documents needs infra_ids, and its keys must be listed in infra_ids: ${join(", ", setsubtract(keys(var.cluster_policy_documents), local.clusters))}."
    }
    # An OpenShift or HyperShift infraID is at most 27 characters (the cluster name cut
    # to 21, '-', 5 random); only a Cluster API cluster, named by its Cluster object, is longer
    # (variables.tf, infra_ids).
    precondition {
      condition     = length(local.long_openshift_ids) == 0
      error_message = "infra_ids: ${join(", ", local.long_openshift_ids)} is longer than an OpenShift infraID (27 characters, lowercase letters, digits and '-'). A Cluster API cluster's name may be up to 63: name its kind in cluster_kinds (\"<name>\" = \"ClusterAPI\")."
    }
    precondition {
      condition     = !(var.policy_key != null && var.policy_prefix != null)
      error_message = "Set policy_key (one document) or policy_prefix (layers), not both."
    }
    precondition {
      condition     = length(var.policy_layers) == 0 || local.s3_layered
      error_message = "policy_layers needs policy_source = \"s3\" and policy_prefix."
    }
  }
}

# Events from the buffer queue. Partial batch failures: the function returns the ids of the records
# it could not handle, only those are retried, and after max_receive_count they go to the DLQ.
# Batch size and window trade lag for API calls (infra/aws/README.md, "Batching and the
# account's API budget"); their limits are checked on the variables. maximum_concurrency bounds the event path's
# EC2 writes account-wide at ec2_writes_per_second x sqs_maximum_concurrency.
resource "aws_lambda_event_source_mapping" "events" {
  event_source_arn                   = module.events_queue.arn
  function_name                      = aws_lambda_function.this.arn
  batch_size                         = var.sqs_batch_size
  maximum_batching_window_in_seconds = var.sqs_batching_window_seconds
  function_response_types            = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.sqs_maximum_concurrency
  }
}
