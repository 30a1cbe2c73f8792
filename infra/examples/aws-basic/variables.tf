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

variable "initial_policy" {
  description = "Optional: the cluster's Infrastructure object, written once as the first policy: `-var initial_policy=\"$(oc get infrastructure cluster -o yaml)\"`. Default (null): no policy until it is published (`tagwarden publish`, or the in-cluster publisher); the function enforces nothing before."
  type        = string
  default     = null
}

variable "alarm_emails" {
  description = "Who receives the alarms (e-mail; each address confirms AWS's subscription mail once). Also the forwarding dead-letter queue's alarm in us-east-1."
  type        = list(string)
  default     = []
}

variable "create_trail" {
  description = "Create a multi-Region management-events CloudTrail trail (the module's `create_trail`). Only when the account has none: `aws cloudtrail describe-trails`."
  type        = bool
  default     = false
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

variable "mode" {
  description = "`audit` (the default: report what would be written, write nothing) or `enforce`."
  type        = string
  default     = "audit"
}
