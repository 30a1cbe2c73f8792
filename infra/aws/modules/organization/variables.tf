variable "name" {
  description = "Name prefix of everything the hub adds: queues `<name>-shards`, `<name>-member-events`, bus `<name>-hub`, bucket `<name>-<hub account>-org`, StackSet `<name>-member`. Use the tagwarden module's `name`."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,39}$", var.name))
    error_message = "name must be 1-40 characters of lowercase letters, digits and '-'."
  }
}

variable "organization_id" {
  description = "The AWS Organization's id (o-…): only its accounts may publish policies and send events to the hub (aws:PrincipalOrgID), and only its roles are assumed (aws:ResourceOrgID)."
  type        = string

  validation {
    condition     = can(regex("^o-[a-z0-9]{10,32}$", var.organization_id))
    error_message = "organization_id must be an Organizations id, o- followed by 10-32 lowercase letters or digits (aws organizations describe-organization)."
  }
}

variable "member_role_name" {
  description = "The role every member account holds for the hub (the StackSet and modules/member create it): the hub's function assumes `arn:aws:iam::<account>:role/<member_role_name>`."
  type        = string
  default     = "tagwarden-member"

  validation {
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", var.member_role_name))
    error_message = "member_role_name must be an IAM role name: 1-64 of A-Z a-z 0-9 +=,.@_-."
  }
}

variable "member_regions" {
  description = "The regions the member accounts' resources are in: a spoke in each (EventBridge rules) and a sweep shard per account and region. Include us-east-1 for IAM and Route 53 (their events come from there only)."
  type        = list(string)

  validation {
    condition     = length(var.member_regions) > 0 && alltrue([for r in var.member_regions : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]$", r))])
    error_message = "member_regions must list at least one region name, e.g. [\"us-east-1\", \"eu-west-1\"]."
  }
}

variable "member_organizational_unit_ids" {
  description = "The OUs (or the root, r-…) the StackSet deploys the spokes to; every account added to them later gets its spoke with no apply (auto-deployment). Empty: no StackSet (deploy modules/member per account instead)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for ou in var.member_organizational_unit_ids : can(regex("^(ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}|r-[a-z0-9]{4,32})$", ou))])
    error_message = "member_organizational_unit_ids must be OU ids (ou-xxxx-xxxxxxxx) or the root id (r-xxxx)."
  }
}

variable "stack_set_call_as" {
  description = "Whether the StackSet is managed from the management account (SELF) or a delegated administrator account (DELEGATED_ADMIN), as CloudFormation's CallAs."
  type        = string
  default     = "SELF"

  validation {
    condition     = contains(["SELF", "DELEGATED_ADMIN"], var.stack_set_call_as)
    error_message = "stack_set_call_as must be SELF or DELEGATED_ADMIN."
  }
}

variable "clusters" {
  description = "The clusters the hub enforces: `<account>/<infraID>`, or `<account>/*` for every cluster that account publishes under its folder (the account is then the trust boundary). Sets the function's TAGWARDEN_CLUSTERS."
  type        = list(string)

  validation {
    condition     = length(var.clusters) > 0 && alltrue([for c in var.clusters : can(regex("^[0-9]{12}/([A-Za-z0-9][A-Za-z0-9_.-]{0,62}|\\*)$", c))])
    error_message = "clusters must list <12-digit account>/<infraID> or <account>/*, e.g. [\"111122223333/prod-7xk2p\", \"444455556666/*\"]."
  }

  validation {
    # Lambda: "The total size of the set [of environment variables] does not exceed 4 KB" (Lambda
    # Developer Guide, quotas). The other variables take about 600 bytes.
    condition     = length(join(",", var.clusters)) <= 3000
    error_message = "clusters is longer than 3,000 characters together: the function's environment holds at most 4 KB. Name whole accounts as <account>/* instead of their clusters one by one."
  }
}

variable "account_clusters" {
  description = "The clusters of each account listed as `<account>/*` in `clusters`, by account: the function finds such an account's clusters in its folder, but its member roles may write only on what these own (IAM names every ownership key). Accounts whose clusters `clusters` names one by one need no entry."
  type        = map(list(string))
  default     = {}

  validation {
    condition = alltrue([for a, ids in var.account_clusters : can(regex("^[0-9]{12}$", a)) && length(ids) > 0 &&
    alltrue([for id in ids : can(regex("^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", id))])])
    error_message = "account_clusters must map 12-digit accounts to non-empty lists of infraIDs (or Cluster API cluster names), e.g. { \"444455556666\" = [\"prod-7xk2p\", \"dev-9qz1a\"] }."
  }
}

variable "cluster_kinds" {
  description = "What provisioned each cluster that is not an OpenShift installer cluster, by infraID: `ClusterAPI` (a CAPA cluster: its member role may also write under `sigs.k8s.io/cluster-api-provider-aws/cluster/<name>`), `HyperShift` or `OpenShift` (the default)."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in values(var.cluster_kinds) : contains(["OpenShift", "HyperShift", "ClusterAPI"], k)])
    error_message = "cluster_kinds values must be OpenShift, HyperShift or ClusterAPI."
  }
}

variable "contest_operators" {
  description = "IAM principal ARNs that may lift a contest (`tagwarden status --lift`): beside the hub function, the only writers of the contest state under `_organization/contests/`. Each lift is recorded with who made it."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.contest_operators : can(regex("^arn:aws[a-z-]*:(iam|sts)::[0-9]{12}:.+$", p))])
    error_message = "contest_operators must list IAM role or user ARNs, e.g. [\"arn:aws:iam::123456789012:role/platform-oncall\"]."
  }
}

variable "auditor_principals" {
  description = "IAM principal ARNs (people's roles in the hub account) that may assume the read-only `<member_role_name>-auditor` role every spoke then holds, to preview the hub's sweep (`tagwarden organization sweep --dry-run --member-role <member_role_name>-auditor`). The role reads tags and writes nothing. Empty: no auditor role."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.auditor_principals : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/.+$", p))])
    error_message = "auditor_principals must list IAM role or user ARNs, e.g. [\"arn:aws:iam::123456789012:role/platform-auditor\"]."
  }
}

variable "function_role_name" {
  description = "The hub function's role name: the tagwarden module's `role_name`."
  type        = string
}

variable "function_role_arn" {
  description = "The hub function's role ARN: the tagwarden module's `role_arn`. The member roles trust it alone."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", var.function_role_arn))
    error_message = "function_role_arn must be an IAM role ARN."
  }
}

variable "function_arn" {
  description = "The hub function's ARN: the tagwarden module's `function_arn`. It consumes the shard and member-event queues."
  type        = string
}

variable "reserved_tag_key_patterns" {
  description = "The tag key patterns no write may carry: the tagwarden module's `reserved_tag_key_patterns` (one source for the hub's and the members' DenyReservedTagKeys)."
  type        = list(string)

  validation {
    condition     = length(var.reserved_tag_key_patterns) > 0
    error_message = "reserved_tag_key_patterns must not be empty: pass the tagwarden module's output."
  }
}

variable "function_timeout_seconds" {
  description = "The hub function's timeout: the tagwarden module's `timeout`. The queues' visibility timeout is six times it (Lambda Developer Guide, \"Using Lambda with Amazon SQS\": at least six times the function's timeout)."
  type        = number
  default     = 300

  validation {
    condition     = var.function_timeout_seconds >= 10 && var.function_timeout_seconds <= 900
    error_message = "function_timeout_seconds must be 10-900, as Lambda's timeout."
  }
}

variable "max_receive_count" {
  description = "Deliveries of a shard or member event before it goes to the dead-letter queue."
  type        = number
  default     = 3

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "max_receive_count must be 1-1000."
  }
}

variable "shard_maximum_concurrency" {
  description = "Shards swept at once across the organization (the SQS event source's MaximumConcurrency, 2-1000). The shard queue is FIFO with one message group per account-region, so an account-region's shards never run at once whatever this is; it bounds the hub's Lambda concurrency."
  type        = number
  default     = 20

  validation {
    condition     = var.shard_maximum_concurrency >= 2 && var.shard_maximum_concurrency <= 1000
    error_message = "shard_maximum_concurrency must be 2-1000 (Lambda's SQS MaximumConcurrency)."
  }
}

variable "alarm_sns_topic_arn" {
  description = "SNS topic the dead-letter alarms notify (the tagwarden module's sns_topic_arn output); null for none."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags added to every taggable resource."
  type        = map(string)
  default     = {}
}
