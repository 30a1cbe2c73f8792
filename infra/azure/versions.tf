terraform {
  required_version = ">= 1.5"

  required_providers {
    azurerm = {
      source = "hashicorp/azurerm"
      # 4.31: azurerm_function_app_flex_consumption with runtime_name "custom" and https_only.
      version = ">= 4.31, < 5.0"
    }
  }
}
