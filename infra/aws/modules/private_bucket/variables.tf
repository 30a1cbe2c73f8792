variable "name" {
  description = "The bucket's name."
  type        = string

  validation {
    # S3 User Guide, "General purpose bucket naming rules": 3 to 63 characters, lowercase letters,
    # digits, '.' and '-', beginning and ending with a letter or digit.
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.name))
    error_message = "The bucket name must be 3-63 lowercase letters, digits, '.' and '-' (S3's naming rules): shorten the caller's name or set its bucket name input."
  }
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete the bucket with its objects and their versions."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags of the bucket."
  type        = map(string)
  default     = {}
}

variable "kms_key_arn" {
  description = "A customer-managed KMS key for SSE-KMS (with an S3 Bucket Key); null for SSE-S3 (AES-256)."
  type        = string
  default     = null
}

variable "lifecycle_rule" {
  description = "The bucket's one lifecycle rule: its id, the days a superseded version is kept, and (optionally) the days a current object lives. Incomplete multipart uploads are aborted after 7 days."
  type = object({
    id              = string
    noncurrent_days = number
    expiration_days = optional(number)
  })

  validation {
    condition     = var.lifecycle_rule.noncurrent_days >= 1 && (var.lifecycle_rule.expiration_days == null ? true : var.lifecycle_rule.expiration_days >= 1)
    error_message = "lifecycle_rule: noncurrent_days and expiration_days are whole days, at least 1."
  }
}

variable "policy_documents" {
  description = "The caller's bucket policy statements (JSON policy documents, as aws_iam_policy_document renders them); the module adds the Deny of requests without TLS."
  type        = list(string)
  default     = []
}
