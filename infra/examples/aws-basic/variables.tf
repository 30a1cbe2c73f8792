variable "region" {
  description = "Region of the cluster and of the function."
  type        = string
  default     = "eu-west-1"
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

variable "extra_tag_actions" {
  description = "Tag actions of further services the function may use on owned resources through the Tagging API (e.g. `[\"sns:TagResource\"]`); EFS is always included. See the module's `extra_tag_actions`."
  type        = list(string)
  default     = []
}

variable "route53_hosted_zone_ids" {
  description = "The cluster's own Route 53 hosted zones (its private zone, `aws route53 list-hosted-zones-by-name --dns-name <cluster domain>`) whose tags the function may write; none by default (the module's `route53_writable_resources`)."
  type        = list(string)
  default     = []
}

variable "route53_health_check_ids" {
  description = "The cluster's own Route 53 health checks whose tags the function may write; none by default (the module's `route53_writable_resources`)."
  type        = list(string)
  default     = []
}
