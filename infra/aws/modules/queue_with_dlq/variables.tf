variable "name" {
  description = "The queue's name (ending in `.fifo` when `fifo_queue`)."
  type        = string

  validation {
    # SQS Developer Guide, "Amazon SQS queue quotas": up to 80 characters, alphanumerics, '-' and
    # '_'; a FIFO queue's name ends in ".fifo" (counted).
    condition     = can(regex("^[A-Za-z0-9_-]{1,75}(\\.fifo)?$", var.name)) && length(var.name) <= 80
    error_message = "The queue name must be up to 80 letters, digits, '-' and '_' (a FIFO queue's ending in .fifo): shorten the caller's name."
  }
}

variable "create_dlq" {
  description = "Create the dead-letter queue (and the queue's redrive policy to it). false: the queue alone, for a queue that is itself the dead-letter queue of a service that dead-letters into SQS directly (an EventBridge target's)."
  type        = bool
  default     = true
  nullable    = false
}

variable "dlq_name" {
  description = "The dead-letter queue's name (ending in `.fifo` when `fifo_queue`); null without `create_dlq`."
  type        = string
  default     = null

  validation {
    condition     = var.dlq_name == null ? !var.create_dlq : can(regex("^[A-Za-z0-9_-]{1,75}(\\.fifo)?$", var.dlq_name)) && length(var.dlq_name) <= 80 && var.create_dlq
    error_message = "With create_dlq the dead-letter queue needs a name of up to 80 letters, digits, '-' and '_' (a FIFO queue's ending in .fifo: shorten the caller's name); without it, no name."
  }
}

variable "fifo_queue" {
  description = "Both queues FIFO (their names end in `.fifo`)."
  type        = bool
  default     = false
  nullable    = false

  validation {
    # SQS: a FIFO queue's name ends in ".fifo", a standard queue's does not; a FIFO queue's
    # dead-letter queue is FIFO too.
    condition     = endswith(var.name, ".fifo") == var.fifo_queue && (var.dlq_name == null || endswith(coalesce(var.dlq_name, "-"), ".fifo") == var.fifo_queue)
    error_message = "With fifo_queue both names end in .fifo; without it neither does."
  }
}

variable "fifo_high_throughput" {
  description = "With `fifo_queue`: high-throughput FIFO on the queue (deduplication and the throughput limit per message group)."
  type        = bool
  default     = false
  nullable    = false
}

variable "visibility_timeout_seconds" {
  description = "The queue's visibility timeout; null for SQS's default (30 s)."
  type        = number
  default     = null
}

variable "message_retention_seconds" {
  description = "How long the queue keeps a message; null for SQS's default (4 days). The dead-letter queue keeps its messages 14 days, the maximum."
  type        = number
  default     = null
}

variable "receive_wait_time_seconds" {
  description = "The queue's long-polling wait; null for SQS's default (0)."
  type        = number
  default     = null
}

variable "max_receive_count" {
  description = "Receives of a message before SQS moves it to the dead-letter queue; null without `create_dlq`."
  type        = number
  default     = null

  validation {
    condition     = var.max_receive_count == null ? !var.create_dlq : var.max_receive_count >= 1 && var.max_receive_count <= 1000
    error_message = "With create_dlq, max_receive_count must be 1-1000 (SQS's redrive policy); without it, null."
  }
}

variable "kms_key_arn" {
  description = "A customer-managed KMS key for SSE-KMS on both queues (data keys reused for an hour); null for SSE-SQS."
  type        = string
  default     = null
}

variable "policy_documents" {
  description = "The caller's statements for the queue's policy (JSON policy documents, as aws_iam_policy_document renders them); the module adds the Deny of requests without TLS."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "eventbridge_rules" {
  description = "EventBridge rules that target the queue (or name it as their targets' dead-letter queue): an Allow of sqs:SendMessage by events.amazonaws.com on behalf of rule_arns, under the statement id sid, first in the queue's policy. null: no such statement."
  type = object({
    sid       = string
    rule_arns = list(string)
  })
  default = null

  validation {
    # Terraform's || evaluates both sides (no short circuit): hence the conditional.
    # IAM JSON policy elements: Sid takes ASCII letters and digits; SQS's policy grammar takes no
    # empty value list, so a statement needs at least one rule.
    condition     = var.eventbridge_rules == null ? true : (can(regex("^[A-Za-z0-9]+$", var.eventbridge_rules.sid)) && length(var.eventbridge_rules.rule_arns) > 0)
    error_message = "eventbridge_rules needs a sid of letters and digits and at least one rule ARN (null for no statement)."
  }
}

variable "dlq_eventbridge_rules" {
  description = "EventBridge rules that name the dead-letter queue as their targets' dead-letter queue (with `create_dlq`): as `eventbridge_rules`, on the dead-letter queue's policy."
  type = object({
    sid       = string
    rule_arns = list(string)
  })
  default = null

  validation {
    condition     = var.dlq_eventbridge_rules == null ? true : (can(regex("^[A-Za-z0-9]+$", var.dlq_eventbridge_rules.sid)) && length(var.dlq_eventbridge_rules.rule_arns) > 0 && var.create_dlq)
    error_message = "dlq_eventbridge_rules needs create_dlq, a sid of letters and digits and at least one rule ARN (null for no statement)."
  }
}

variable "dlq_policy_documents" {
  description = "The caller's statements for the dead-letter queue's policy (with `create_dlq`); the module adds the Deny of requests without TLS."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "tags" {
  description = "Tags of both queues."
  type        = map(string)
  default     = {}
}
