variable "member_role_name" {
  description = "The member role's name in every account."
  type        = string

  validation {
    # 64 characters with `-forward-<region>` (the forwarding roles) or `-<n>` (further roles).
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{1,40}$", var.member_role_name))
    error_message = "member_role_name must be an IAM role name of 1-40 of A-Z a-z 0-9 +=,.@_- (the forwarding roles add -forward-<region>)."
  }
}

variable "function_role_arn" {
  description = "The hub function's role, the only principal the member role trusts."
  type        = string
}

variable "hub_event_bus_arn" {
  description = "The hub bus the rules forward to."
  type        = string
}

variable "member_regions" {
  description = "The regions the spokes cover; the member role is created in us-east-1 if listed, else the first."
  type        = list(string)

  validation {
    condition     = length(var.member_regions) > 0
    error_message = "member_regions must not be empty."
  }
}

variable "reserved_tag_key_patterns" {
  description = "The tag key patterns no write may carry (the tagwarden module's `reserved_tag_key_patterns`)."
  type        = list(string)
}

variable "partition" {
  description = "The AWS partition (aws, aws-cn, aws-us-gov)."
  type        = string
  default     = "aws"
}

variable "tags" {
  description = "Tags on the member role."
  type        = map(string)
  default     = {}
}

variable "account_clusters" {
  description = "Each member account's clusters, by account: its member roles write tags only on what these own."
  type        = map(list(string))
  default     = {}
}

variable "cluster_kinds" {
  description = "What provisioned each cluster that is not an OpenShift installer cluster, by cluster (`ClusterAPI` adds CAPA's ownership key)."
  type        = map(string)
  default     = {}
}

variable "role_key_budget" {
  description = "Characters of one member role's inline policy given to its clusters' ownership keys and bucket patterns: IAM allows 10,240 per role (IAM and AWS STS quotas), the rest of the policy takes about 2,000."
  type        = number
  default     = 7800

  validation {
    condition     = var.role_key_budget >= 500 && var.role_key_budget <= 8000
    error_message = "role_key_budget must be 500-8000 (a role's inline policies hold 10,240 characters in all)."
  }
}

variable "auditor_principals" {
  description = "IAM principal ARNs (people's roles in the hub account) that may assume `<member_role_name>-auditor` in every member account: tag reads, no write, for a person's preview of the hub's sweep. Empty: no auditor role."
  type        = list(string)
  default     = []
}
