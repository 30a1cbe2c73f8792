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

variable "architecture" {
  description = "Architecture the zip was built for (arm64 or x86_64)."
  type        = string
  default     = "arm64"
}

variable "alarm_sns_topic_arn" {
  description = "Existing SNS topic for the alarms (null: alarms without notifications)."
  type        = string
  default     = null
}

variable "user_tags" {
  description = "The cluster's user tags, as the Infrastructure object publishes them (`status.platformStatus.aws.resourceTags`)."
  type        = map(string)
  default = {
    cost-center = "4711"
    team        = "platform"
  }
}

variable "tags" {
  description = "Tags for the tagwarden resources themselves."
  type        = map(string)
  default = {
    app = "tagwarden"
  }
}
