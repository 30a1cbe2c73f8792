terraform {
  required_version = ">= 1.9" # validations that read another variable (scope, organization_id, cluster_publishers)

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.1, < 9.0"
    }
  }
}
