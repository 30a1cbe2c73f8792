variable "name" {
  description = "The role's name."
  type        = string

  validation {
    # IAM User Guide, "IAM object quotas" and CreateRole: up to 64 characters of letters, digits
    # and +=,.@_-.
    condition     = can(regex("^[\\w+=,.@-]{1,64}$", var.name))
    error_message = "The role name must be 1-64 letters, digits and +=,.@_- (IAM's CreateRole): shorten the caller's name."
  }
}

variable "description" {
  description = "The role's description (what it forwards, to where)."
  type        = string

  validation {
    # CreateRole: a description of up to 1,000 characters.
    condition     = length(var.description) <= 1000
    error_message = "The role's description is over IAM's 1,000 characters."
  }
}

variable "target_event_bus_arn" {
  description = "The event bus the role may put events on (events:PutEvents on it alone)."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9._\\-/]+$", var.target_event_bus_arn))
    error_message = "target_event_bus_arn must be an event bus ARN (arn:<partition>:events:<region>:<account>:event-bus/<name>)."
  }
}

variable "tags" {
  description = "Tags of the role."
  type        = map(string)
  default     = {}
}
