variable "project_id" {
  description = "The cluster's project: the scope, and where the deployment lives (`gcloud config get-value project`, or the install-config's `platform.gcp.projectID`)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID: 6-30 lowercase letters, digits and '-', starting with a letter and not ending with '-'."
  }
}

variable "region" {
  description = "Region of the Cloud Run service, the scheduler job and the policy bucket."
  type        = string
  default     = "europe-west1"
}

variable "infra_id" {
  description = "The cluster's infraID: `oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", var.infra_id))
    error_message = "infra_id must be an OpenShift infraID: 1-27 lowercase letters, digits and '-', starting and ending with a letter or digit."
  }
}

variable "image" {
  description = "The tagwarden function's container image in Artifact Registry or Container Registry, with a tag or a digest (no default)."
  type        = string
}

variable "mode" {
  description = "`audit` (the default: write nothing, report what would be written) or `enforce`."
  type        = string
  default     = "audit"
}

variable "publishers" {
  description = "IAM principals that publish the cluster's policy (e.g. `serviceAccount:tagwarden-publisher@<project>.iam.gserviceaccount.com`): they may write under `clusters/<infraID>/` only."
  type        = list(string)
  default     = []
}

variable "tag_keys" {
  description = "The Resource Manager tag keys the cluster's policy names, as tagKeys/<id>: the function may bind and unbind values of these keys only. Empty: labels alone are enforced."
  type        = list(string)
  default     = []
}

variable "alert_emails" {
  description = "Email addresses the alert policies notify."
  type        = list(string)
  default     = []
}

variable "labels" {
  description = "Labels for every labelled resource the module creates."
  type        = map(string)
  default     = {}
}
