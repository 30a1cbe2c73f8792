# The validations of resource_notifications and existing_resource_notifications_topics
# (infra/azure/variables.tf), evaluated by Terraform itself as scopes.tftest.hcl explains: a run with
# expect_failures passes only when that variable's validation refuses the values.

variables {
  location  = "westeurope"
  infra_ids = ["dev-a1b2c", "prod-g5h6i"]
}

# --- accepted -------------------------------------------------------------------------------------

run "resource_notifications_with_resource_group_scopes" {
  command = plan
  variables {
    enforcement_scopes     = ["/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/dev-a1b2c-rg", "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/prod-g5h6i-rg"]
    resource_notifications = true
  }
}

# A resource group scope's subscription may name an existing topic (its source is the subscription).
run "existing_topic_on_a_resource_group_scopes_subscription_any_case" {
  command = plan
  variables {
    enforcement_scopes                     = ["/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/dev-a1b2c-rg"]
    resource_notifications                 = true
    existing_resource_notifications_topics = { "/subscriptions/AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE" = { name = "zs-system-topic", resource_group_name = "zs-tagging" } }
  }
}

run "existing_topic_of_a_listed_subscription" {
  command = plan
  variables {
    enforcement_scopes                     = ["/providers/Microsoft.Management/managementGroups/platform"]
    event_source_subscription_ids          = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "11111111-2222-3333-4444-555555555555"]
    resource_notifications                 = true
    existing_resource_notifications_topics = { "/subscriptions/11111111-2222-3333-4444-555555555555" = { name = "arn-topic", resource_group_name = "events" } }
  }
}

# --- refused --------------------------------------------------------------------------------------

run "existing_topic_without_resource_notifications" {
  command = plan
  variables {
    enforcement_scopes                     = ["/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/rg"]
    existing_resource_notifications_topics = { "/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" = { name = "arn-topic", resource_group_name = "events" } }
  }
  expect_failures = [var.existing_resource_notifications_topics]
}

run "existing_topic_keyed_by_a_resource_group" {
  command = plan
  variables {
    enforcement_scopes                     = ["/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/rg"]
    resource_notifications                 = true
    existing_resource_notifications_topics = { "/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/rg" = { name = "arn-topic", resource_group_name = "events" } }
  }
  expect_failures = [var.existing_resource_notifications_topics]
}

run "existing_topic_of_no_sources_subscription" {
  command = plan
  variables {
    enforcement_scopes                     = ["/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/rg"]
    resource_notifications                 = true
    existing_resource_notifications_topics = { "/subscriptions/11111111-2222-3333-4444-555555555555" = { name = "arn-topic", resource_group_name = "events" } }
  }
  expect_failures = [var.existing_resource_notifications_topics]
}

run "existing_topic_of_one_subscription_twice_in_other_case" {
  command = plan
  variables {
    enforcement_scopes     = ["/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/rg"]
    resource_notifications = true
    existing_resource_notifications_topics = {
      "/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" = { name = "arn-topic", resource_group_name = "events" }
      "/subscriptions/AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE" = { name = "arn-topic-2", resource_group_name = "events" }
    }
  }
  expect_failures = [var.existing_resource_notifications_topics]
}

run "existing_topic_resource_group_ending_in_a_period" {
  command = plan
  variables {
    enforcement_scopes                     = ["/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/resourceGroups/rg"]
    resource_notifications                 = true
    existing_resource_notifications_topics = { "/subscriptions/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" = { name = "arn-topic", resource_group_name = "events." } }
  }
  expect_failures = [var.existing_resource_notifications_topics]
}
