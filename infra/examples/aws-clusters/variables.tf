variable "region" {
  description = "Region of the clusters and of the function."
  type        = string
  default     = "eu-west-1"
}

variable "infra_ids" {
  description = "The account's clusters: each one's infraID (`oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'` in each)."
  type        = list(string)
}

variable "initial_policies" {
  description = "Optional first policies, infraID => that cluster's Infrastructure object (`oc get infrastructure cluster -o yaml`), each written once to `clusters/<infraID>/10-cluster.yaml`; afterwards each cluster's publisher owns its own."
  type        = map(string)
  default     = {}
}

variable "alarm_emails" {
  description = "Who receives the alarms (e-mail; each address confirms AWS's subscription mail once)."
  type        = list(string)
  default     = []
}

variable "lambda_zip" {
  description = "Path to the packaged tagwarden Lambda zip (`bootstrap` inside)."
  type        = string
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

variable "mode" {
  description = "`audit` (the default: report what would be written, write nothing) or `enforce`."
  type        = string
  default     = "audit"
}

variable "cluster_kinds" {
  description = "What provisioned each cluster that is not an OpenShift installer cluster, by infraID: `ClusterAPI` (a CAPA workload cluster, named by its `Cluster`'s name) or `HyperShift`. Must agree with the `clusterKind` each cluster's policy publishes."
  type        = map(string)
  default     = {}
}
