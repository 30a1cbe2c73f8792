variable "region" {
  description = "The hub's region: the function, its queues and the members' policy bucket."
  type        = string
  default     = "eu-west-1"
}

variable "organization_id" {
  description = "The organization's id (`aws organizations describe-organization --query Organization.Id`)."
  type        = string
}

variable "member_regions" {
  description = "The regions the member accounts' clusters run in (include us-east-1 for IAM and Route 53 events)."
  type        = list(string)
}

variable "member_organizational_unit_ids" {
  description = "The OUs whose accounts get a spoke (`aws organizations list-organizational-units-for-parent`); empty to deploy modules/member per account instead."
  type        = list(string)
  default     = []
}

variable "clusters" {
  description = "The member clusters the hub enforces: `<account>/<infraID>`, or `<account>/*` for every cluster an account publishes."
  type        = list(string)
}

variable "hub_infra_ids" {
  description = "The hub account's own clusters (infraIDs), which the tagwarden module requires; list them in `clusters` too (`<hub account>/<infraID>`) to enforce them."
  type        = list(string)
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
