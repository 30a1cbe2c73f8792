terraform {
  required_version = ">= 1.9" # validations that read another variable (infra_id / infra_ids)

  required_providers {
    azurerm = {
      source = "hashicorp/azurerm"
      # From the provider's source and CHANGELOG-v4.md:
      #   4.21.0  azurerm_function_app_flex_consumption added; runtime_name accepts "custom" from
      #           the start (validation lists webapps.RuntimeNameCustom, PR #28199)
      #   4.31.0  https_only (PR #29024)
      #   4.58.0  maximum_instance_count accepts 1-1000 (PR #31392); before it 40-1000, so the
      #           module's default of 10 is refused at plan by 4.21-4.57
      #   4.78.0  azurerm_application_insights.local_authentication_enabled (monitoring.tf); 4.77.0
      #           has only local_authentication_disabled (the provider schema in
      #           cdktn-provider-azurerm 16.5.0 / 16.6.0, tests/terraform/azure/schema/)
      # < 5.0: 5.0 removes azurerm_storage_blob.storage_account_name and storage_container_name
      # (storage.tf); scripts/test-terraform-azure checks both ends and that 5.0.1 refuses the module.
      version = ">= 4.78, < 5.0"
    }
    time = {
      source  = "hashicorp/time"
      version = ">= 0.9, < 1.0" # time_sleep with triggers (rbac.tf)
    }
    azapi = {
      source = "Azure/azapi"
      # azapi_resource_action with method = "PUT" (function.tf). 2.13.0 is the
      # only release whose schema can be checked offline (cdktn-provider-azapi 1.0.0, the one
      # package that carries azapi), so it is the floor: scripts/test-terraform-azure checks it.
      version = ">= 2.13, < 3.0"
    }
  }
}
