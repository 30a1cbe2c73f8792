variable "region" {
  description = "The hub's region: the function, its queues and the members' policy bucket."
  type        = string
  default     = "eu-west-1"
}

variable "organization_id" {
  description = "The organization's id (`aws organizations describe-organization --query Organization.Id`)."
  type        = string
}

variable "member_regions" {
  description = "The regions the member accounts' clusters run in (include us-east-1 for IAM and Route 53 events)."
  type        = list(string)
}

variable "member_organizational_unit_ids" {
  description = "The OUs whose accounts get a spoke (`aws organizations list-organizational-units-for-parent`); empty to deploy modules/member per account instead."
  type        = list(string)
  default     = []
}

variable "clusters" {
  description = "The member clusters the hub enforces: `<account>/<infraID>`, or `<account>/*` for every cluster an account publishes."
  type        = list(string)
}

variable "account_clusters" {
  description = "The clusters of each account listed whole (`<account>/*`), by account: that account's member roles write tags only on what these own."
  type        = map(list(string))
  default     = {}
}

variable "cluster_kinds" {
  description = "Clusters that are not OpenShift installer clusters, by infraID: `ClusterAPI` or `HyperShift`."
  type        = map(string)
  default     = {}
}

variable "contest_operators" {
  description = "IAM principal ARNs that may lift a contest (`tagwarden status --lift`), each lift recorded with who made it."
  type        = list(string)
  default     = []
}

variable "auditor_principals" {
  description = "People's roles in the hub account that may assume the read-only auditor role in every spoke, to preview the hub's sweep before it writes (`tagwarden organization sweep --dry-run --member-role tagwarden-member-auditor`)."
  type        = list(string)
  default     = []
}

variable "create_organization_trail" {
  description = "Create an organization trail of management events from the hub (when it is the management account). Without a trail in a member account its creations never reach EventBridge, and only the sweeps correct there. Leave false when the organization has one already (`aws cloudtrail describe-trails --query 'trailList[?IsOrganizationTrail]'`)."
  type        = bool
  default     = false
}

variable "stack_set_call_as" {
  description = "Where this hub is applied from, as CloudFormation's CallAs for the StackSets: `SELF` in the organization's management account, `DELEGATED_ADMIN` in a member account registered as a StackSets delegated administrator (README, \"The hub in a delegated administrator account\"). Service-managed StackSets can be created from nowhere else."
  type        = string
  default     = "SELF"
  nullable    = false

  validation {
    condition     = contains(["SELF", "DELEGATED_ADMIN"], var.stack_set_call_as)
    error_message = "stack_set_call_as must be SELF (the hub is the management account) or DELEGATED_ADMIN (the hub is a registered StackSets delegated administrator)."
  }
}

variable "hub_spoke" {
  description = "Whether the hub account runs clusters too (listed in `clusters` as `<hub account>/<infraID>`): then it gets its spoke, the member role and rules, in the hub's region."
  type        = bool
  default     = false
}

variable "lambda_zip" {
  description = "Path to the packaged tagwarden Lambda zip (`bootstrap` inside)."
  type        = string
}

variable "tags" {
  description = "Tags for the tagwarden resources themselves."
  type        = map(string)
  default = {
    app = "tagwarden"
  }
}

variable "mode" {
  description = "`audit` (the default: report what would be written, write nothing) or `enforce`."
  type        = string
  default     = "audit"
}
