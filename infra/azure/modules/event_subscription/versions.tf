terraform {
  required_version = ">= 1.9"

  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 4.78, < 5.0" # the calling module's bounds (infra/azure/versions.tf)
    }
    azapi = {
      source  = "Azure/azapi"
      version = ">= 2.13, < 3.0" # the calling module's bounds (infra/azure/versions.tf)
    }
  }
}
