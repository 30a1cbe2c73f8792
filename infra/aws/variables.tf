################################################################################
# Identity and naming
################################################################################

variable "infra_id" {
  description = "One cluster: its infrastructure name (OpenShift `status.infrastructureName`, e.g. `mycluster-7xk2p`). Only resources tagged `kubernetes.io/cluster/<infra_id>=owned` are ever written. Set this or `infra_ids`, not both."
  type        = string
  default     = null

  validation {
    # OpenShift: cluster name truncated to 21 characters + '-' + 5 random characters.
    condition     = var.infra_id == null ? true : can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", var.infra_id))
    error_message = "infra_id must be 1-27 characters of lowercase letters, digits and '-', starting and ending with a letter or digit (an OpenShift infraID)."
  }

  # "all" is the InfraID under which a cluster set reports what no single cluster
  # owns (crates/core/src/report/metrics.rs, ALL_CLUSTERS: events received and ignored, policies rejected); a cluster of
  # that name would share, and hide in, that series.
  validation {
    condition     = var.infra_id != "all"
    error_message = "infra_id must not be \"all\": that is the InfraID of a cluster set's deployment-wide metrics."
  }

  validation {
    condition     = (var.infra_id == null) != (var.infra_ids == null)
    error_message = "Set infra_id (one cluster) or infra_ids (a cluster set, one deployment for every cluster of the account), exactly one of them."
  }

  # An organization hub has no cluster of its own (infra_ids, below).
  validation {
    condition     = var.infra_id == null || var.organization == null
    error_message = "An AWS Organization hub takes infra_ids = [], not infra_id: list the hub account's own clusters in the organization module's clusters (\"<hub account>/<infraID>\") and deploy modules/member in the hub account, as for any member."
  }
}

variable "infra_ids" {
  description = "A cluster set: every cluster of the account this one deployment enforces; `[]` for an AWS Organization hub, which enforces the clusters the organization module lists. OpenShift infraIDs (up to 27 characters), or a Cluster API cluster's name (up to 63, named in `cluster_kinds`). Each cluster publishes its own policy under the set (`<policy_prefix><infraID>/` in S3, `<policy_parameter_path><infraID>` in SSM), and the function applies to each resource the policy of the cluster whose `kubernetes.io/cluster/<infraID>=owned` tag it carries. Adding a cluster is one list entry and one apply. Set this or `infra_id`, not both."
  type        = list(string)
  default     = null

  validation {
    condition = var.infra_ids == null ? true : (
      (length(var.infra_ids) > 0 || var.organization != null) &&
      length(distinct(var.infra_ids)) == length(var.infra_ids) &&
      # Up to 63 characters here, for Cluster API names; OpenShift's 27 are held by the
      # function's precondition (main.tf), which can read cluster_kinds (this validation cannot:
      # cluster_kinds' own validation reads infra_ids).
      alltrue([for id in var.infra_ids : can(regex("^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$", id))])
    )
    error_message = "infra_ids must be a non-empty list of distinct infraIDs (OpenShift: 1-27 lowercase letters, digits and '-'; a Cluster API cluster's name, with cluster_kinds: up to 63, also '.' and '_' (an EKS cluster's default name is <namespace>_<name>); starting and ending with a letter or digit); [] only for an AWS Organization hub (organization = module.organization.hub)."
  }

  # An organization hub enforces every account, its own too, through that account's
  # member role and spoke (modules/member in the hub account), under the session policies of
  # crates/aws/src/organization/mod.rs. A cluster listed here as well would get this module's
  # single-account grants and rules beside them: every event of it handled twice, and writes outside
  # the session policies.
  validation {
    condition     = var.infra_ids == null || var.organization == null ? true : length(var.infra_ids) == 0
    error_message = "An AWS Organization hub takes infra_ids = []: list the hub account's own clusters in the organization module's clusters (\"<hub account>/<infraID>\") and deploy modules/member in the hub account, as for any member."
  }

  # The ownership-conditioned tag writes are customer managed policies of two clusters each (one
  # with extra_tag_actions; iam.tf); "Managed policies attached to an IAM role" is
  # 10 by default, adjustable to 20 (IAM User Guide, "IAM and AWS STS quotas"), so 20 clusters fit
  # the default quota. More would need more policies than a role can ever take with extra_tag_actions.
  validation {
    condition     = var.infra_ids == null ? true : length(var.infra_ids) <= 20
    error_message = "infra_ids can list at most 20 clusters (their tag-write managed policies, two clusters each, one each with extra_tag_actions, must stay within the 20 managed policies a role can take). Split the clusters over two deployments with different `name`s."
  }

  # "all" is the InfraID under which a cluster set reports what no single cluster
  # owns (crates/core/src/report/metrics.rs, ALL_CLUSTERS: events received and ignored, policies rejected); a cluster of
  # that name would share, and hide in, that series.
  validation {
    condition     = var.infra_ids == null ? true : !contains(var.infra_ids, "all")
    error_message = "infra_ids must not list \"all\": that is the InfraID of a cluster set's deployment-wide metrics."
  }
}

variable "cluster_kinds" {
  description = "What provisioned each cluster that is not an OpenShift installer cluster, by infraID. `ClusterAPI`: a Cluster API (CAPA) workload cluster, named by its `Cluster`'s name, which owns by `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>=owned` (what CAPA creates) or `kubernetes.io/cluster/<name>=owned` (what its cloud provider creates): the role may write under either, and its tag-write statements count twice in the packing. `HyperShift` and `OpenShift` (the default) own by `kubernetes.io/cluster/<infraID>`. Must agree with the `clusterKind` of each cluster's published policy (`tagwarden publish --from-cluster --cluster-set` writes it)."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in values(var.cluster_kinds) : contains(["OpenShift", "HyperShift", "ClusterAPI"], k)])
    error_message = "cluster_kinds values must be OpenShift, HyperShift or ClusterAPI."
  }

  # Terraform 1.9+ lets a validation read other variables.
  validation {
    condition     = alltrue([for id in keys(var.cluster_kinds) : contains(coalesce(var.infra_ids, compact([var.infra_id])), id)])
    error_message = "cluster_kinds names a cluster that is neither infra_id nor in infra_ids: list it there too."
  }
}

variable "managed_policies_per_role_quota" {
  description = "The account's \"Managed policies attached to an IAM role\" quota (IAM User Guide, \"IAM and AWS STS quotas\": 10 by default, adjustable to 20 in Service Quotas). The role's ownership-conditioned tag writes are managed policies of two clusters each (one each with `extra_tag_actions`); a plan that would attach more than this is refused, before anything is created. Set it only after the quota is raised."
  type        = number
  default     = 10

  validation {
    condition     = var.managed_policies_per_role_quota >= 10 && var.managed_policies_per_role_quota <= 20 && floor(var.managed_policies_per_role_quota) == var.managed_policies_per_role_quota
    error_message = "managed_policies_per_role_quota must be a whole number between 10 (the default quota) and 20 (the most IAM allows)."
  }
}

variable "name" {
  description = "Name prefix for every resource. Resources are named `<name>-<infra_id>[-suffix]` for one cluster and `<name>[-suffix]` for a cluster set (`infra_ids`)."
  type        = string
  default     = "tagwarden"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}[a-z0-9]$", var.name))
    error_message = "name must be 2-20 characters of lowercase letters, digits and '-', starting with a letter and ending with a letter or digit."
  }
}

variable "tags" {
  description = "Tags added to every taggable resource this module creates."
  type        = map(string)
  default     = {}
}

################################################################################
# Lambda function
################################################################################

variable "lambda_zip" {
  description = "Path to the packaged Lambda zip containing the `bootstrap` executable for `provided.al2023`, as `scripts/package-lambda` writes it, with its manifest beside it (`<zip>.json`)."
  type        = string

  validation {
    condition     = endswith(var.lambda_zip, ".zip")
    error_message = "lambda_zip must be the path of a .zip file."
  }
}

# The architecture comes from the artifact. A zip built for x86_64 deployed as arm64 (the
# old defaults of scripts/package-lambda and of this module) is a function that never starts.
variable "lambda_manifest" {
  description = "Path to the zip's manifest (JSON: name, version, git_commit, architecture, rust_target, rustc_version, sha256), written by `scripts/package-lambda` beside the zip. Default (null): `<lambda_zip>.json`. The function's architecture is the manifest's; a missing manifest, or one whose sha256 is not the zip's, is refused at plan."
  type        = string
  default     = null
}

variable "architecture" {
  description = "Optional check of the manifest's architecture (`arm64` or `x86_64`): the plan is refused unless the manifest says the same. Default (null): the function runs on the manifest's architecture."
  type        = string
  default     = null

  validation {
    condition     = var.architecture == null ? true : contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be null (the manifest's), \"arm64\" or \"x86_64\"."
  }
}

variable "memory_size" {
  description = "Lambda memory in MB."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240 && floor(var.memory_size) == var.memory_size
    error_message = "memory_size must be a whole number between 128 and 10240."
  }
}

variable "timeout" {
  description = "Lambda timeout in seconds. A sweep lists every owned resource, so leave room. The event queue's visibility timeout is derived from it (6x + batching window)."
  type        = number
  default     = 300

  validation {
    condition     = var.timeout >= 10 && var.timeout <= 900 && floor(var.timeout) == var.timeout
    error_message = "timeout must be a whole number of seconds between 10 and 900."
  }
}

# Reserved by default, so that a storm of policy writes (each an asynchronous
# invocation) cannot run more instances than the documented EC2 write bound counts.
variable "reserved_concurrent_executions" {
  description = "Reserved concurrency for the function. Default (null): `sqs_maximum_concurrency` + 1 (3 with the defaults): the queue mapping's invocations plus one sweep or policy-change invocation, so every invocation together makes at most `ec2_writes_per_second` x this EC2 CreateTags a second (2 x 3 = 6/s, against the account's CreateTags refill of 10/s that the cluster's controllers share; output `ec2_writes_per_second_bound.all_invocations`). Invocations beyond it are throttled: Lambda retries asynchronous ones (sweep, policy change) and the queue redelivers events. -1 leaves the function unreserved (then nothing bounds a burst of policy-change invocations). A number must be at least `sqs_maximum_concurrency`; 0 (never run) is refused at plan."
  type        = number
  default     = null

  validation {
    condition     = var.reserved_concurrent_executions == null ? true : var.reserved_concurrent_executions >= -1 && floor(var.reserved_concurrent_executions) == var.reserved_concurrent_executions
    error_message = "reserved_concurrent_executions must be null (sqs_maximum_concurrency + 1), -1 (unreserved) or a non-negative whole number."
  }
}

variable "log_level" {
  description = "Value of RUST_LOG (a tracing-subscriber EnvFilter directive, e.g. `info` or `info,tagwarden=debug`)."
  type        = string
  default     = "info"

  validation {
    condition     = can(regex("^[A-Za-z0-9_:=,.\\-]+$", var.log_level))
    error_message = "log_level must be an EnvFilter directive such as \"info\" or \"info,tagwarden=debug\"."
  }
}

variable "policy_ttl_seconds" {
  description = "POLICY_TTL: how often (seconds) a warm function re-checks the policy source for a new version."
  type        = number
  default     = 60

  validation {
    condition     = var.policy_ttl_seconds >= 0 && var.policy_ttl_seconds <= 86400 && floor(var.policy_ttl_seconds) == var.policy_ttl_seconds
    error_message = "policy_ttl_seconds must be a whole number between 0 and 86400."
  }
}

variable "code_signing_config_arn" {
  description = "Optional Lambda code signing configuration ARN."
  type        = string
  default     = null
}

################################################################################
# Policy source
################################################################################

variable "policy_source" {
  description = "Where the desired-tag policy lives: `s3` (a bucket this module creates) or `ssm` (a String parameter this module creates)."
  type        = string
  default     = "s3"

  validation {
    condition     = contains(["s3", "ssm"], var.policy_source)
    error_message = "policy_source must be \"s3\" or \"ssm\"."
  }
}

variable "policy_key" {
  description = "S3 mode, single document: object key of the policy (default `tagwarden/policy.yaml` when `policy_prefix` is not set). The status report is written to `<dir of key>/tagwarden-status.json`."
  type        = string
  default     = null

  validation {
    condition = var.policy_key == null ? true : (
      can(regex("^[A-Za-z0-9!_.*'()/-]+$", var.policy_key)) && length(var.policy_key) <= 1024 &&
      !startswith(var.policy_key, "/") && !endswith(var.policy_key, "/") &&
      !endswith(var.policy_key, "tagwarden-status.json")
    )
    error_message = "policy_key must be an S3 key of safe characters that does not start or end with '/' and is not the status report name tagwarden-status.json."
  }
}

variable "policy_prefix" {
  description = "S3 mode, layered documents: key prefix ending in `/`; every object under it is a policy layer, merged in key order. The status report is written to `<prefix>tagwarden-status.json` (the function skips that key). Mutually exclusive with `policy_key`. For a cluster set (`infra_ids`): the set's prefix (default `clusters/`), each cluster's layers under `<prefix><infraID>/` and its status report at `<prefix><infraID>/tagwarden-status.json`."
  type        = string
  default     = null

  validation {
    condition = var.policy_prefix == null ? true : (
      can(regex("^[A-Za-z0-9!_.*'()/-]+/$", var.policy_prefix)) && length(var.policy_prefix) <= 1000 && !startswith(var.policy_prefix, "/")
    )
    error_message = "policy_prefix must be an S3 key prefix of safe characters that ends with '/' and does not start with '/'."
  }
}

variable "policy_document" {
  description = "Optional initial policy content, written once: S3 single-document mode to `policy_key`, SSM mode as the parameter's first value (required there, since a parameter cannot be empty). Afterwards the policy belongs to its publisher (`tagwarden publish`, the cluster's publisher): a later apply never writes it again, and changing this input changes nothing. Default (null, S3): no policy object until the cluster publishes one (the function enforces nothing until then). Nothing in a policy is secret."
  type        = string
  default     = null

  validation {
    condition     = var.policy_document == null ? true : length(var.policy_document) > 0 && length(var.policy_document) <= 4096
    error_message = "policy_document must be 1-4096 characters (the SSM Standard tier limit)."
  }
}

variable "policy_layers" {
  description = "Optional policy layers for S3 layered mode: object name (relative to `policy_prefix`) => content, e.g. `{ \"00-defaults.yaml\" = file(...) }`."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.policy_layers) : can(regex("^[A-Za-z0-9!_.*'()-]{1,255}$", k)) && k != "tagwarden-status.json"])
    error_message = "policy_layers keys must be plain object names (no '/') and must not be tagwarden-status.json."
  }

  # One owner per object: 10-cluster.yaml is the layer the cluster's publisher writes.
  validation {
    condition     = !contains(keys(var.policy_layers), "10-cluster.yaml")
    error_message = "policy_layers must not contain 10-cluster.yaml: that is the layer the cluster's publisher (tagwarden publish) writes and owns. Name Terraform's layers otherwise, e.g. 00-defaults.yaml or 20-overrides.yaml."
  }
}

variable "cluster_policy_documents" {
  description = "Cluster set (`infra_ids`) only, optional: initial policy per cluster, infraID => content, written once. S3: `<policy_prefix><infraID>/10-cluster.yaml`; SSM: the parameter `<policy_parameter_path><infraID>`. Afterwards each belongs to its cluster's publisher (`tagwarden publish`): a later apply never writes it again. Usually each cluster publishes its own from the start; a cluster without a policy is not enforced, and its events are counted as ignored."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for d in values(var.cluster_policy_documents) : length(d) > 0 && length(d) <= 4096])
    error_message = "cluster_policy_documents values must be 1-4096 characters (the SSM Standard tier limit)."
  }
}

variable "policy_bucket_name" {
  description = "Name of the policy bucket to create (S3 mode). Default: `<name>-<infra_id>-<account id>`."
  type        = string
  default     = null

  validation {
    condition     = var.policy_bucket_name == null ? true : can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.policy_bucket_name))
    error_message = "policy_bucket_name must be a valid S3 bucket name (3-63 lowercase letters, digits, '.' and '-')."
  }
}

variable "policy_bucket_force_destroy" {
  description = "Allow `terraform destroy` to delete the policy bucket with all policy versions in it."
  type        = bool
  default     = false
}

variable "policy_noncurrent_version_expiration_days" {
  description = "Days after which superseded policy object versions are deleted from the policy bucket."
  type        = number
  default     = 90

  validation {
    condition     = var.policy_noncurrent_version_expiration_days >= 1 && floor(var.policy_noncurrent_version_expiration_days) == var.policy_noncurrent_version_expiration_days
    error_message = "policy_noncurrent_version_expiration_days must be a whole number >= 1."
  }
}

variable "policy_parameter_name" {
  description = "SSM mode: name of the String parameter holding the policy. Default: `/<name>/<infra_id>/policy`."
  type        = string
  default     = null

  validation {
    condition     = var.policy_parameter_name == null ? true : can(regex("^/[A-Za-z0-9_./-]+$", var.policy_parameter_name)) && length(var.policy_parameter_name) <= 1011 && !endswith(var.policy_parameter_name, "/")
    error_message = "policy_parameter_name must be a fully qualified SSM parameter name such as /tagwarden/mycluster-7xk2p/policy."
  }
}

variable "policy_parameter_path" {
  description = "SSM mode, cluster set (`infra_ids`): the parameter path of the set, ending in `/`; each cluster's policy is the String parameter `<path><infraID>` and its status report `<path without the trailing />-status/<infraID>`. Default: `/<name>/clusters/`."
  type        = string
  default     = null

  validation {
    condition     = var.policy_parameter_path == null ? true : can(regex("^/[A-Za-z0-9_./-]+/$", var.policy_parameter_path)) && length(var.policy_parameter_path) <= 980
    error_message = "policy_parameter_path must be an SSM parameter path that starts and ends with '/', such as /tagwarden/clusters/."
  }
}

variable "kms_key_arn" {
  description = "Optional customer managed KMS key for the policy bucket (SSE-KMS), the queues, the log group, the SNS topic and the function's environment. Its key policy must allow logs.<region>.amazonaws.com, events.amazonaws.com, cloudwatch.amazonaws.com and s3.amazonaws.com to use it. When null: SSE-S3, SQS-managed SSE, and AWS-owned keys."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_arn == null ? true : can(regex("^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$", var.kms_key_arn))
    error_message = "kms_key_arn must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)."
  }
}

################################################################################
# What the function may write (see iam.tf)
################################################################################

variable "s3_bucket_name_patterns" {
  description = "Bucket name patterns (IAM wildcards) whose tags the function may read and write. S3 cannot condition PutBucketTagging on the ownership tag, so this is the only IAM-side limit for buckets. Default (null): `[\"<infra_id>-*\"]`, the cluster's own buckets (OpenShift's image-registry bucket is `<infra_id>-image-registry-...`). Every pattern needs a literal prefix of at least 3 characters: `*` (every bucket in the account) is refused."
  type        = list(string)
  default     = null

  # PutBucketTagging has no ownership condition ("Actions, resources, and condition
  # keys for Amazon S3": no aws:ResourceTag for it), so the bucket name is the only IAM-side limit;
  # a bare wildcard would let the role replace the tags of every bucket in the account.
  validation {
    condition = var.s3_bucket_name_patterns == null ? true : (
      length(var.s3_bucket_name_patterns) > 0 && alltrue([for p in var.s3_bucket_name_patterns : can(regex("^[a-z0-9][a-z0-9.-]{2,}[a-z0-9.*?-]*$", p)) && length(p) <= 63])
    )
    error_message = "s3_bucket_name_patterns must be null (default: [\"<infra_id>-*\"]) or a non-empty list of bucket names or IAM wildcard patterns of lowercase letters, digits, '.', '-', '*', '?' that start with at least 3 literal characters (\"*\" alone would cover every bucket in the account)."
  }
}

# Route 53's ChangeTagsForResource evaluates no tag condition key (Service Authorization
# Reference, "Actions, resources, and condition keys for Amazon Route 53"), so without ids the role
# could rewrite the tags of every hosted zone and health check of the account.
variable "route53_writable_resources" {
  description = "Route 53 hosted zones and health checks whose tags the function may write, per cluster (infraID => ids), e.g. `{ \"mycluster-7xk2p\" = { hosted_zone_ids = [\"Z0123456789ABCDEFGHIJ\"] } }` (the cluster's private zone: `aws route53 list-hosted-zones-by-name --dns-name <cluster domain>`). Route 53 cannot condition a tag write on the ownership tag, so the role gets ChangeTagsForResource only on these ids. Default `{}`: no Route 53 tag write at all; the function still reads every zone's and health check's tags, and reports each owned one that drifts as a write failure (AccessDenied, naming the grant) in the status report and the WriteFailures metric."
  type = map(object({
    hosted_zone_ids  = optional(list(string), [])
    health_check_ids = optional(list(string), [])
  }))
  default  = {}
  nullable = false

  validation {
    condition     = alltrue([for id in keys(var.route53_writable_resources) : contains(coalesce(var.infra_ids, compact([var.infra_id])), id)])
    error_message = "route53_writable_resources is keyed by infraID: every key must be infra_id or listed in infra_ids."
  }

  # Hosted zone ids: "Z" and up to 32 upper-case letters and digits; health check ids are UUIDs
  # (Route 53 API Reference, GetHostedZone Id and GetHealthCheck HealthCheckId, "Length
  # Constraints: Maximum length of 32" and "64"). Without the "/hostedzone/" prefix.
  validation {
    condition = alltrue(flatten([for r in values(var.route53_writable_resources) : concat(
      [for z in r.hosted_zone_ids : can(regex("^Z[A-Z0-9]{1,31}$", z))],
      [for h in r.health_check_ids : can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", h))],
    )]))
    error_message = "route53_writable_resources: hosted_zone_ids are ids such as \"Z0123456789ABCDEFGHIJ\" (no \"/hostedzone/\" prefix), health_check_ids are UUIDs."
  }
}

variable "extra_tag_actions" {
  description = "Tag actions of further services for the generic write path (Resource Groups Tagging API `TagResources`, which needs the resource's own service action too), e.g. `[\"sqs:TagQueue\", \"rds:AddTagsToResource\"]`. Granted on `*` but only for resources carrying the cluster's ownership tag and never for reserved keys; a service that does not evaluate `aws:ResourceTag` for its tag action refuses the write (reported as a write failure). EFS (`elasticfilesystem:TagResource`) is always granted."
  type        = list(string)
  default     = []

  # Tag-adding actions only: a wildcard or an untag/delete action would let the role do more than
  # add tags on owned resources.
  validation {
    condition = alltrue([
      for a in var.extra_tag_actions :
      can(regex("^[a-z0-9-]+:[A-Za-z0-9]*Tag[A-Za-z0-9]*$", a)) && !can(regex("(?i)(untag|delete|remove)", a))
    ])
    error_message = "extra_tag_actions must be service tag actions such as \"sqs:TagQueue\": \"service:Action\" without wildcards, naming Tag, and not an Untag*, Delete* or Remove* action."
  }
}

################################################################################
# Events and delivery
################################################################################

variable "enable_iam_events" {
  description = "Create the IAM CloudTrail rule on this region's default bus. IAM events are only emitted in us-east-1: outside us-east-1 the rule only receives events forwarded by the `modules/global_event_forwarding` submodule deployed in us-east-1."
  type        = bool
  default     = true
}

variable "enable_route53_events" {
  description = "Create the Route 53 CloudTrail rule (hosted zones, health checks) on this region's default bus. Route 53 is global: its events are only emitted in us-east-1, so outside us-east-1 the rule only receives events forwarded by the `modules/global_event_forwarding` submodule deployed in us-east-1."
  type        = bool
  default     = true
}

variable "enable_tag_change_events" {
  description = "Create the `Tag Change on Resource` (source aws.tag) rule."
  type        = bool
  default     = true
}

variable "sweep_schedule" {
  description = "EventBridge schedule expression for the full sweep."
  type        = string
  default     = "rate(1 hour)"

  validation {
    condition     = can(regex("^(rate\\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\\)|cron\\([^)]+\\))$", var.sweep_schedule))
    error_message = "sweep_schedule must be an EventBridge schedule expression such as \"rate(1 hour)\" or \"cron(0 * * * ? *)\"."
  }
}

# The function reads every resource a batch's events name in shared calls and writes
# identical deltas in one CreateTags, so a larger batch costs fewer EC2 calls per resource; the
# window is what a batch waits to fill. Limits: "Amazon Simple Queue Service – Default 10. For
# standard queues the max is 10,000" and "When you set BatchSize to a value greater than 10, you
# must set MaximumBatchingWindowInSeconds to at least 1" (Lambda API Reference,
# CreateEventSourceMapping: BatchSize, MaximumBatchingWindowInSeconds: 0-300; the provider's
# aws_lambda_event_source_mapping documents the same ranges). The queue this module creates is a
# standard queue.
variable "sqs_batch_size" {
  description = "Most queued events per invocation (Lambda's BatchSize; 1-10000 for a standard queue). The function reads the resources of a whole batch in shared calls (EC2 DescribeTags for up to 200 ids) and writes identical deltas in one CreateTags (up to 1000 ids), so a larger batch costs fewer API calls per resource. Above 10, Lambda requires `sqs_batching_window_seconds` >= 1. See infra/aws/README.md, \"Batching and the account's API budget\"."
  type        = number
  default     = 100

  validation {
    condition     = var.sqs_batch_size >= 1 && var.sqs_batch_size <= 10000 && floor(var.sqs_batch_size) == var.sqs_batch_size
    error_message = "sqs_batch_size must be a whole number between 1 and 10000 (Lambda's BatchSize range for a standard SQS queue)."
  }

  validation {
    condition     = var.sqs_batch_size <= 10 || var.sqs_batching_window_seconds >= 1
    error_message = "sqs_batch_size > 10 needs sqs_batching_window_seconds >= 1: Lambda refuses a BatchSize above 10 without a batching window (CreateEventSourceMapping, MaximumBatchingWindowInSeconds). For the lowest lag use sqs_batch_size <= 10 with sqs_batching_window_seconds = 0."
  }
}

variable "sqs_batching_window_seconds" {
  description = "How long the queue mapping gathers events before invoking (Lambda's MaximumBatchingWindowInSeconds, 0-300). Adds up to this many seconds to every event's compliance lag; 0 invokes as soon as events arrive (then `sqs_batch_size` must be <= 10). AWS documents that with a window and very low traffic Lambda may wait up to 20 s. The event queue's visibility timeout is 6x `timeout` + this."
  type        = number
  default     = 2

  validation {
    condition     = var.sqs_batching_window_seconds >= 0 && var.sqs_batching_window_seconds <= 300 && floor(var.sqs_batching_window_seconds) == var.sqs_batching_window_seconds
    error_message = "sqs_batching_window_seconds must be a whole number between 0 and 300."
  }
}

# "Minimum: 2, Maximum: 1000" (Lambda API Reference, ScalingConfig, MaximumConcurrency).
variable "sqs_maximum_concurrency" {
  description = "Most concurrent invocations the queue mapping starts (ScalingConfig MaximumConcurrency, 2-1000; 2 is the least AWS allows). Each invocation paces its own EC2 CreateTags at `ec2_writes_per_second`, so the event path writes at most `ec2_writes_per_second` x this a second, account-wide (default 2 x 2 = 4/s, under half of CreateTags' refill of 10/s that the cluster's controllers share). A running sweep or policy-change invocation adds one `ec2_writes_per_second` each; `reserved_concurrent_executions` caps every invocation."
  type        = number
  default     = 2

  validation {
    condition     = var.sqs_maximum_concurrency >= 2 && var.sqs_maximum_concurrency <= 1000 && floor(var.sqs_maximum_concurrency) == var.sqs_maximum_concurrency
    error_message = "sqs_maximum_concurrency must be a whole number between 2 and 1000 (Lambda's MaximumConcurrency range)."
  }
}

# EC2 throttles per account and region with token buckets shared by every caller: CreateTags
# holds 100 tokens refilled at 10 a second ("Request throttling for the Amazon EC2 API", EC2
# Developer Guide), and the cluster's own controllers draw on the same bucket.
variable "ec2_writes_per_second" {
  description = "TAGWARDEN_EC2_WRITES_PER_SECOND: EC2 CreateTags calls a second at most, per running function instance (evenly spaced, so the bound holds in every 1-second window; 1-100). The account-wide bound of the event path is this x `sqs_maximum_concurrency` (default 2 x 2 = 4/s), against CreateTags' account refill of 10/s shared with the cluster. One CreateTags covers up to 1000 resources with an identical delta, so the pace binds only when many resources need different tags."
  type        = number
  default     = 2

  validation {
    condition     = var.ec2_writes_per_second >= 1 && var.ec2_writes_per_second <= 100 && floor(var.ec2_writes_per_second) == var.ec2_writes_per_second
    error_message = "ec2_writes_per_second must be a whole number between 1 and 100 (the account's CreateTags bucket holds 100 tokens, refilled at 10 a second)."
  }
}

# The events queue denies sqs:SendMessage to everyone but the module's EventBridge rules.
variable "events_queue_redrive_principal_arns" {
  description = "IAM roles or users (ARNs) that may still send to the events queue besides the module's EventBridge rules: whoever redrives the dead-letter queue into it after a fix (SQS StartMessageMoveTask sends with the caller's permissions). Every other principal, in this account or any other, is refused sqs:SendMessage by an explicit Deny in the queue policy, so nothing can inject events the rules did not match."
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition     = alltrue([for a in var.events_queue_redrive_principal_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$", a))])
    error_message = "events_queue_redrive_principal_arns must be IAM role or user ARNs (arn:aws:iam::<account>:role/<name>)."
  }
}

variable "max_receive_count" {
  description = "Deliveries of one event before it moves to the dead-letter queue."
  type        = number
  default     = 5

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number between 1 and 1000."
  }
}

################################################################################
# Monitoring
################################################################################

variable "log_retention_days" {
  description = "Retention of the function's log group."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be a CloudWatch Logs retention value (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288 or 3653)."
  }
}

variable "create_sns_topic" {
  description = "Create an SNS topic for the alarms. Ignored when `alarm_sns_topic_arn` is set."
  type        = bool
  default     = false
}

variable "alarm_sns_topic_arn" {
  description = "Existing SNS topic that receives alarm and OK notifications."
  type        = string
  default     = null

  validation {
    condition     = var.alarm_sns_topic_arn == null ? true : can(regex("^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$", var.alarm_sns_topic_arn))
    error_message = "alarm_sns_topic_arn must be an SNS topic ARN."
  }
}

# Alarms that reach nobody are no alarms.
variable "alarm_subscriptions" {
  description = "Who receives the alarms: subscriptions to the alarm topic (the one this module creates, `create_sns_topic`, or `alarm_sns_topic_arn`), e.g. `[{ protocol = \"email\", endpoint = \"ops@example.com\" }]` or `[{ protocol = \"https\", endpoint = \"https://events.example.com/aws-sns\" }]`. An e-mail subscription waits for its recipient to follow the link in AWS's confirmation mail; an HTTPS endpoint must confirm the SubscriptionConfirmation message it is sent (SNS Developer Guide, \"Fanout to HTTP/S endpoints\")."
  type = list(object({
    protocol = string
    endpoint = string
  }))
  default  = []
  nullable = false

  validation {
    condition = alltrue([for s in var.alarm_subscriptions : (
      (s.protocol == "email" && can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", s.endpoint))) ||
      (s.protocol == "https" && startswith(s.endpoint, "https://"))
    )])
    error_message = "alarm_subscriptions: protocol \"email\" with an e-mail address, or \"https\" with an https:// URL."
  }
}

variable "alarm_period_seconds" {
  description = "Evaluation period of the alarms."
  type        = number
  default     = 300

  validation {
    condition     = contains([60, 300, 900, 3600], var.alarm_period_seconds)
    error_message = "alarm_period_seconds must be 60, 300, 900 or 3600."
  }
}

variable "compliance_lag_p99_threshold_ms" {
  description = "Alarm when the p99 of ComplianceLag (milliseconds from a change's event time to tagwarden's correcting write, or to its finding that none was needed) over an alarm period exceeds this. The default, 5 minutes, is far above the seconds an event normally takes and catches a stalled queue or sustained throttling."
  type        = number
  default     = 300000

  validation {
    condition     = var.compliance_lag_p99_threshold_ms >= 1000 && var.compliance_lag_p99_threshold_ms <= 86400000
    error_message = "compliance_lag_p99_threshold_ms must be between 1000 (1 s) and 86400000 (1 day)."
  }
}

# Alarms that notice silence. Every other alarm treats missing data as fine, so a
# deployment that receives nothing (no trail, a rule that matches nothing, a broken forwarder)
# would look healthy for ever.
variable "no_events_alarm_hours" {
  description = "Alarm when the function has received no event at all (metric EventsReceived, the deployment's InfraID) for this many hours: no trail, a rule that matches nothing, events dropped before the queue. Missing data counts as breaching. null turns it off (an account where the cluster's resources may rightly stay unchanged for longer). Evaluated in 1-hour periods (CloudWatch allows at most 7 days of periods of an hour: PutMetricAlarm, Period)."
  type        = number
  default     = 24

  validation {
    condition     = var.no_events_alarm_hours == null ? true : var.no_events_alarm_hours >= 1 && var.no_events_alarm_hours <= 168 && floor(var.no_events_alarm_hours) == var.no_events_alarm_hours
    error_message = "no_events_alarm_hours must be null (off) or a whole number of hours from 1 to 168 (CloudWatch's 7-day evaluation limit)."
  }
}

variable "sweep_alarm" {
  description = "Alarm when no sweep completed within twice the sweep schedule's interval, rounded up to whole hours (metric SweepsCompleted, the deployment's InfraID; missing data counts as breaching). With a cron() schedule set `sweep_alarm_after_hours`."
  type        = bool
  default     = true
  nullable    = false
}

variable "sweep_alarm_after_hours" {
  description = "Hours without a completed sweep before the sweep alarm fires. Default (null): twice the `rate()` of `sweep_schedule`, rounded up to whole hours (2 for the default rate(1 hour)); required with a cron() schedule."
  type        = number
  default     = null

  validation {
    condition     = var.sweep_alarm_after_hours == null ? true : var.sweep_alarm_after_hours >= 1 && var.sweep_alarm_after_hours <= 168 && floor(var.sweep_alarm_after_hours) == var.sweep_alarm_after_hours
    error_message = "sweep_alarm_after_hours must be null or a whole number of hours from 1 to 168."
  }
}

################################################################################
# CloudTrail
################################################################################

variable "create_trail" {
  description = "Create a multi-Region CloudTrail trail of management events (read and write), with its own encrypted, versioned, TLS-only bucket `<name>-trail-<account>`. Without a trail recording management events the function receives no creation events at all (only the sweep corrects). Leave false when the account already has one (`aws cloudtrail describe-trails`, then `aws cloudtrail get-event-selectors --trail-name <name>`: docs/src/guides/aws-account.md, \"Is a trail recording?\"); a second trail of management events costs money (the first copy of management events is free, further copies are charged: AWS CloudTrail pricing)."
  type        = bool
  default     = false
  nullable    = false
}

variable "trail_organization_id" {
  description = "With create_trail, an organization trail: the organization's id. CloudTrail then creates the trail in every member account (\"a trail with the name that you give it is created in every AWS account that belongs to your organization\", CloudTrail User Guide, \"Creating a trail for an organization\"), which is what makes each member's EventBridge receive its `AWS API Call via CloudTrail` events for its spoke to forward. Apply from the management account: the bucket policy's aws:SourceArn names the trail in the applying account, and a trail a delegated administrator creates is the management account's. Leave null where the organization already has one (AWS Control Tower creates one)."
  type        = string
  default     = null

  validation {
    condition     = var.trail_organization_id == null || can(regex("^o-[a-z0-9]{10,32}$", coalesce(var.trail_organization_id, "o-x")))
    error_message = "trail_organization_id must be an organization id, o- and 10-32 lowercase letters or digits (aws organizations describe-organization --query Organization.Id)."
  }
}

variable "trail_bucket_name" {
  description = "Name of the trail's bucket (create_trail). Default: `<name>-trail-<account id>`."
  type        = string
  default     = null

  validation {
    condition     = var.trail_bucket_name == null ? true : can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.trail_bucket_name))
    error_message = "trail_bucket_name must be a valid S3 bucket name (3-63 lowercase letters, digits, '.' and '-')."
  }
}

variable "trail_log_retention_days" {
  description = "Days the trail's log files are kept in its bucket (create_trail)."
  type        = number
  default     = 365

  validation {
    condition     = var.trail_log_retention_days >= 1 && floor(var.trail_log_retention_days) == var.trail_log_retention_days
    error_message = "trail_log_retention_days must be a whole number >= 1."
  }
}

variable "trail_bucket_force_destroy" {
  description = "Allow `terraform destroy` to delete the trail's bucket with its log files in it (create_trail). Default false: the logs are an audit record; empty the bucket before destroying (docs/src/operations/uninstall.md)."
  type        = bool
  default     = false
  nullable    = false
}

variable "organization" {
  description = "An AWS Organization hub: modules/organization's `hub` output (where the members publish, the member role, the regions, the clusters and the shard queue). With `infra_ids = []` (docs/src/guides/aws-organization.md). null: this account's own clusters."
  type = object({
    uri             = string
    member_role     = string
    member_regions  = list(string)
    clusters        = list(string)
    shard_queue_url = string
  })
  default = null

  validation {
    condition = var.organization == null ? true : (
      can(regex("^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/", var.organization.uri)) &&
      can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", var.organization.member_role)) &&
      length(var.organization.member_regions) > 0 &&
      alltrue([for r in var.organization.member_regions : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", r))]) &&
      length(var.organization.clusters) > 0 &&
      alltrue([for c in var.organization.clusters : can(regex("^[0-9]{12}/([A-Za-z0-9][A-Za-z0-9_.-]{0,62}|\\*)$", c))]) &&
      startswith(var.organization.shard_queue_url, "https://")
    )
    error_message = "organization takes modules/organization's hub output: uri s3://<bucket>/<prefix>, member_role an IAM role name, member_regions at least one region, clusters \"<account>/<infraID>\" or \"<account>/*\", shard_queue_url the shard queue's https URL."
  }

  # One input for the hub's settings: none of them again in extra_environment (which refuses
  # TAGWARDEN_ORGANIZATION in any case, below).
  validation {
    condition     = var.organization == null || length(setintersection(keys(var.extra_environment), ["TAGWARDEN_MEMBER_ROLE", "TAGWARDEN_MEMBER_REGIONS", "TAGWARDEN_CLUSTERS", "TAGWARDEN_SHARD_QUEUE_URL"])) == 0
    error_message = "Set organization = module.organization.hub, and drop module.organization.environment from extra_environment: the hub's settings come from one input."
  }
}

variable "extra_environment" {
  description = "Settings laid over the function's environment (TAGWARDEN_* only, not TAGWARDEN_ORGANIZATION: an AWS Organization hub is `organization = module.organization.hub`)."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.extra_environment) : can(regex("^TAGWARDEN_[A-Z_]+$", k))])
    error_message = "extra_environment may only set TAGWARDEN_* variables (an organization hub: organization = module.organization.hub)."
  }

  # An AWS Organization hub is switched on by one input, `organization`, which also sets
  # TAGWARDEN_ORGANIZATION for the function (main.tf). The earlier wiring, modules/organization's
  # `environment` here, would give the function a hub's environment without this module's hub
  # layout (no tag-write policy of its own, the organization-wide alarms): refused, with the fix.
  validation {
    condition     = !contains(keys(var.extra_environment), "TAGWARDEN_ORGANIZATION")
    error_message = "extra_environment must not set TAGWARDEN_ORGANIZATION: an AWS Organization hub is switched on by the organization input. Use organization = module.organization.hub (with infra_ids = []) and drop module.organization.environment from extra_environment."
  }
}

variable "yield_to" {
  description = "The controllers tagwarden yields a key to when they keep changing it (a contest: the key is held back for an hour, doubling to a day, then corrected again), as IAM principal ARN patterns with `*` and `?`. Any other writer's change is drift, corrected every time. null: the code's defaults (the AWS Load Balancer Controller and CAPA's controllers, by role name). `[]`: never yield."
  type        = list(string)
  default     = null

  validation {
    condition     = var.yield_to == null || alltrue([for p in coalesce(var.yield_to, []) : can(regex("^arn:aws[a-z-]*:(iam|sts)::[0-9*?]+:[A-Za-z0-9+=,.@_/*?-]+$", p))])
    error_message = "yield_to must list IAM principal ARN patterns, e.g. [\"arn:aws:sts::*:assumed-role/*aws-load-balancer-controller*/*\"]."
  }
}

variable "contest_operators" {
  description = "IAM principal ARNs that may lift a contest (`tagwarden status --lift`): beside the function, the only writers of the contest state (`_tagwarden/contests/` in the policy bucket). Each lift is recorded with who made it."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.contest_operators : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$", p))])
    error_message = "contest_operators must list IAM role or user ARNs, e.g. [\"arn:aws:iam::123456789012:role/platform-oncall\"]."
  }
}

variable "mode" {
  description = "TAGWARDEN_MODE: `audit` evaluates everything exactly as `enforce` would (events, sweeps, policy changes, organization shards) and writes no tag anywhere: the status report and the metrics show what would be written. `enforce` writes, except for clusters whose policy says `enforce: false` and keys in a policy's `auditKeys`, which stay audited. A new deployment starts in audit; switch to `enforce` once the report shows what you expect."
  type        = string
  default     = "audit"

  validation {
    condition     = contains(["audit", "enforce"], var.mode)
    error_message = "mode must be \"audit\" (report what would be written, write nothing) or \"enforce\"."
  }
}
