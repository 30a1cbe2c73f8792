terraform {
  required_version = ">= 1.9" # as the module (validations that read another variable)

  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 4.78, < 5.0" # as infra/azure/versions.tf
    }
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0"
    }
    azapi = {
      source  = "Azure/azapi"
      version = ">= 2.13, < 3.0" # as infra/azure/versions.tf
    }
  }
}
