variable "name" {
  description = "Name prefix: rules `<name>-<key>-forward` (e.g. `<name>-iam-forward`, `<name>-route53-forward`), role `<name>-forward`, dead-letter queue `<name>-forward-dlq`. Use the tagwarden module's `<name>-<infra_id>`."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,49}$", var.name))
    error_message = "name must be 1-50 characters of lowercase letters, digits and '-'."
  }
}

variable "event_patterns" {
  description = "EventBridge patterns selecting the events to forward, by key (one rule each): the tagwarden module's `global_event_patterns` (`iam`, `route53`)."
  type        = map(string)

  validation {
    condition = length(var.event_patterns) > 0 && alltrue([
      for k, p in var.event_patterns :
      can(regex("^[a-z0-9]{1,20}$", k)) && can(jsondecode(p).source) && length(p) <= 4096
    ])
    error_message = "event_patterns must map short keys (lowercase letters and digits, e.g. iam, route53) to JSON EventBridge patterns with a source field, at most 4096 characters each, and must not be empty."
  }
}

variable "target_event_bus_arn" {
  description = "Event bus in the function's region that receives the events: the tagwarden module's `event_bus_arn`."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9._\\-/]+$", var.target_event_bus_arn))
    error_message = "target_event_bus_arn must be an EventBridge event bus ARN."
  }
}

variable "tags" {
  description = "Tags added to every taggable resource."
  type        = map(string)
  default     = {}
}

variable "maximum_event_age_in_seconds" {
  description = "How long EventBridge keeps retrying an event the target bus did not accept before it goes to the dead-letter queue (60-86400)."
  type        = number
  default     = 86400

  validation {
    condition     = var.maximum_event_age_in_seconds >= 60 && var.maximum_event_age_in_seconds <= 86400 && floor(var.maximum_event_age_in_seconds) == var.maximum_event_age_in_seconds
    error_message = "maximum_event_age_in_seconds must be a whole number between 60 and 86400."
  }
}

variable "maximum_retry_attempts" {
  description = "Delivery retries before an event goes to the dead-letter queue (0-185)."
  type        = number
  default     = 185

  validation {
    condition     = var.maximum_retry_attempts >= 0 && var.maximum_retry_attempts <= 185 && floor(var.maximum_retry_attempts) == var.maximum_retry_attempts
    error_message = "maximum_retry_attempts must be a whole number between 0 and 185."
  }
}

# The forwarding dead-letter queue is alarmed too. A CloudWatch alarm notifies SNS topics
# of its own Region (the alarm lives in us-east-1, beside the queue), so this module creates its
# own topic for the subscriptions, or takes one that exists in us-east-1.
variable "alarm_sns_topic_arn" {
  description = "Existing SNS topic in us-east-1 that receives the dead-letter queue's alarm. null: a topic `<name>-forward-alarms` is created when `alarm_subscriptions` is not empty."
  type        = string
  default     = null

  validation {
    condition     = var.alarm_sns_topic_arn == null ? true : can(regex("^arn:aws[a-z-]*:sns:us-east-1:[0-9]{12}:[A-Za-z0-9_-]{1,256}$", var.alarm_sns_topic_arn))
    error_message = "alarm_sns_topic_arn must be an SNS topic ARN in us-east-1."
  }
}

variable "alarm_subscriptions" {
  description = "Who receives the dead-letter queue's alarm (e-mail or HTTPS), as the tagwarden module's `alarm_subscriptions`: pass the same list."
  type = list(object({
    protocol = string
    endpoint = string
  }))
  default  = []
  nullable = false

  validation {
    condition     = alltrue([for s in var.alarm_subscriptions : contains(["email", "https"], s.protocol)])
    error_message = "alarm_subscriptions: protocol \"email\" or \"https\"."
  }
}
