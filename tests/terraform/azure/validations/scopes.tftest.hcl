# The variable validations of infra/azure/variables.tf, evaluated by Terraform itself: scripts/
# test-terraform-azure copies variables.tf alone (no resource, no provider: nothing to fetch) next to
# this file and runs `terraform test`. Every run is a plan of that file; a run with expect_failures
# passes only when that variable's validation refuses the values. This is not `terraform test` of the
# module (that needs the azurerm provider, which is not available here).

variables {
  location  = "westeurope"
  infra_ids = ["dev-a1b2c", "prod-g5h6i"]
}

# --- accepted -------------------------------------------------------------------------------------

run "management_group_with_three_subscriptions" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform-lz_(eu).1"]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "99999999-8888-7777-6666-555555555555"]
  }
}

run "management_group_id_of_90_characters" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/${join("", [for i in range(90) : "a"])}"]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
}

run "resource_groups_in_other_subscriptions" {
  command = plan
  variables {
    enforcement_scopes = ["/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/dev-a1b2c-rg", "/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/prod-g5h6i-rg"]
  }
}

run "existing_topic_of_a_listed_subscription_any_case" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform"]
    event_source_subscription_ids = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]
    existing_system_topics        = { "/subscriptions/AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE" = { name = "defender-sub-topic", resource_group_name = "Default-EventGrid" } }
  }
}

# --- refused --------------------------------------------------------------------------------------

run "management_group_id_ending_in_a_period" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform."]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.enforcement_scopes]
}

run "management_group_id_of_91_characters" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/${join("", [for i in range(91) : "a"])}"]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.enforcement_scopes]
}

run "management_group_not_spelled_as_azure_returns_it" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/microsoft.management/managementgroups/platform"]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.enforcement_scopes]
}

run "management_group_id_with_a_slash" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform/subscriptions/11111111-2222-3333-4444-555555555555"]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.enforcement_scopes]
}

run "two_management_groups" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/a", "/providers/Microsoft.Management/managementGroups/b"]
    event_source_subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.enforcement_scopes]
}

run "resource_group_inside_a_listed_subscription" {
  command = plan
  variables {
    enforcement_scopes = ["/subscriptions/11111111-2222-3333-4444-555555555555", "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg"]
  }
  expect_failures = [var.enforcement_scopes]
}

run "management_group_without_event_subscriptions" {
  command = plan
  variables {
    enforcement_scopes = ["/providers/Microsoft.Management/managementGroups/platform"]
  }
  expect_failures = [var.event_source_subscription_ids]
}

run "event_subscriptions_without_management_group" {
  command = plan
  variables {
    enforcement_scopes            = ["/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg"]
    event_source_subscription_ids = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]
  }
  expect_failures = [var.event_source_subscription_ids]
}

run "event_subscription_not_a_guid" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform"]
    event_source_subscription_ids = ["/subscriptions/11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.event_source_subscription_ids]
}

run "event_subscription_listed_twice_in_other_case" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform"]
    event_source_subscription_ids = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"]
  }
  expect_failures = [var.event_source_subscription_ids]
}

run "event_subscription_holding_a_resource_group_scope" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform", "/subscriptions/AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE/resourceGroups/rg"]
    event_source_subscription_ids = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]
  }
  expect_failures = [var.event_source_subscription_ids]
}

run "existing_topic_on_no_source" {
  command = plan
  variables {
    enforcement_scopes            = ["/providers/Microsoft.Management/managementGroups/platform"]
    event_source_subscription_ids = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]
    existing_system_topics        = { "/subscriptions/11111111-2222-3333-4444-555555555555" = { name = "defender-sub-topic", resource_group_name = "Default-EventGrid" } }
  }
  expect_failures = [var.existing_system_topics]
}

run "event_topic_resource_group_name_ending_in_a_period" {
  command = plan
  variables {
    enforcement_scopes              = ["/providers/Microsoft.Management/managementGroups/platform"]
    event_source_subscription_ids   = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]
    event_topic_resource_group_name = "events."
  }
  expect_failures = [var.event_topic_resource_group_name]
}

# TAGWARDEN_CONCURRENCY: the function refuses to start outside 1-64 (tagwarden_engine::config::concurrency).
run "concurrency_within_the_functions_range" {
  command = plan
  variables {
    enforcement_scopes = ["/subscriptions/11111111-2222-3333-4444-555555555555"]
    concurrency        = 64
  }
}

run "concurrency_above_the_functions_range" {
  command = plan
  variables {
    enforcement_scopes = ["/subscriptions/11111111-2222-3333-4444-555555555555"]
    concurrency        = 65
  }
  expect_failures = [var.concurrency]
}
