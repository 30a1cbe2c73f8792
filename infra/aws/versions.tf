terraform {
  required_version = ">= 1.9" # validations that read another variable (infra_id / infra_ids)

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 6.0"
    }
  }
}
