variable "member_role_name" {
  description = "The member role's name in every account."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{1,64}$", var.member_role_name))
    error_message = "member_role_name must be an IAM role name: 1-64 of A-Z a-z 0-9 +=,.@_-."
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
