terraform {
  required_version = ">= 1.9" # as the module (validations that read another variable)

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.1, < 9.0" # as infra/gcp/versions.tf
    }
  }
}
