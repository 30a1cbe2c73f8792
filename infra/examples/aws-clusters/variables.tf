variable "region" {
  description = "Region of the clusters and of the function."
  type        = string
  default     = "eu-west-1"
}

variable "clusters" {
  description = "The account's clusters: infraID (`oc get infrastructure cluster -o jsonpath='{.status.infrastructureName}'`) => its user tags, as its Infrastructure object publishes them."
  type        = map(map(string))
  default = {
    "dev-a1b2c"   = { team = "platform", environment = "dev" }
    "stage-d3e4f" = { team = "platform", environment = "stage" }
    "prod-g5h6i"  = { team = "platform", environment = "prod", cost-center = "4711" }
  }
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
