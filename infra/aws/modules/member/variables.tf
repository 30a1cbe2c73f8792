variable "name" {
  description = "Name prefix of the rules, `<name>-<key>-hub` (the forwarding role is `<member_role_name>-forward-<region>`, the name the hub bus admits)."
  type        = string
  default     = "tagwarden"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,39}$", var.name))
    error_message = "name must be 1-40 characters of lowercase letters, digits and '-'."
  }
}

variable "hub_event_bus_arn" {
  description = "The hub's bus: the organization module's `hub_event_bus_arn`."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9._\\-/]+$", var.hub_event_bus_arn))
    error_message = "hub_event_bus_arn must be an EventBridge event bus ARN."
  }
}

variable "member_role_name" {
  description = "The role the hub assumes: the organization module's `member_role_name` (default tagwarden-member)."
  type        = string
  default     = "tagwarden-member"

  validation {
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{1,40}$", var.member_role_name))
    error_message = "member_role_name must be an IAM role name of 1-40 of A-Z a-z 0-9 +=,.@_- (the forwarding role adds -forward-<region>)."
  }
}

variable "member_roles" {
  description = "This account's member roles: the organization module's `member_roles[\"<this account>\"]` (never written by hand). Each writes tags only on what its clusters own."
  type = list(object({
    name        = string
    clusters    = list(string)
    policy_json = string
  }))
  default = []

  validation {
    condition     = alltrue([for r in var.member_roles : can(jsondecode(r.policy_json).Statement)])
    error_message = "member_roles must be the organization module's output for this account."
  }
}

variable "member_trust_policy_json" {
  description = "The member role's trust policy: the organization module's `member_trust_policy_json`."
  type        = string

  validation {
    condition     = can(jsondecode(var.member_trust_policy_json).Statement)
    error_message = "member_trust_policy_json must be an IAM policy document: pass the organization module's output."
  }
}

variable "event_patterns" {
  description = "The rules' patterns by key: the organization module's `member_event_patterns`. `iam` and `route53` are deployed in us-east-1 only (their events are delivered there alone)."
  type        = map(string)

  validation {
    condition     = length(var.event_patterns) > 0 && alltrue([for k, p in var.event_patterns : can(jsondecode(p).source)])
    error_message = "event_patterns must map keys to EventBridge patterns: pass the organization module's output."
  }
}

variable "create_member_role" {
  description = "Create the member role (IAM is global): true in one region of the account, false in the others."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags added to every taggable resource."
  type        = map(string)
  default     = {}
}

variable "auditor_role" {
  description = "The read-only auditor role: the organization module's `auditor_role` (null: none)."
  type = object({
    name              = string
    policy_json       = string
    trust_policy_json = string
  })
  default = null
}
