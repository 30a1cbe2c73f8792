variable "region" {
  description = "Region of the cluster and of the function."
  type        = string
  default     = "us-east-1"
}

variable "infra_id" {
  description = "The cluster's infraID (`oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`)."
  type        = string
}

variable "lambda_zip" {
  description = "Path to the packaged tagwarden Lambda zip (`bootstrap` inside)."
  type        = string
}

variable "alarm_sns_topic_arn" {
  description = "Existing SNS topic for the alarms (null: alarms without notifications)."
  type        = string
  default     = null
}

variable "initial_policy" {
  description = "The cluster's Infrastructure object, the parameter's first value (written once): `-var initial_policy=\"$(oc get infrastructure cluster -o yaml)\"`. Required: an SSM parameter cannot be empty."
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
