# infra/examples/azure-management-group's variables, evaluated by Terraform itself: the
# example's variables.tf alone beside this file, `terraform test` (see azure-basic/scope.tftest.hcl).
# Any number of subscriptions, one or more; clusters of every kind (ARO and self-managed OpenShift
# without one, a CAPZ cluster as ClusterAPI).

variables {
  subscription_id     = "11111111-2222-3333-4444-555555555555"
  management_group_id = "platform"
  clusters = {
    "aro-a1b2c"                = {}
    "ocp-d3e4f"                = { publisher_principal_id = "99999999-8888-7777-6666-555555555555" }
    "capz-workload.westeurope" = { kind = "ClusterAPI" }
  }
}

# --- accepted -------------------------------------------------------------------------------------

run "one_subscription" {
  command = plan
  variables {
    subscription_ids = ["11111111-2222-3333-4444-555555555555"]
  }
}

run "twelve_subscriptions" {
  command = plan
  variables {
    subscription_ids = [for i in range(12) : format("%08d-2222-3333-4444-555555555555", i)]
  }
}

run "three_subscriptions" {
  command = plan
  variables {
    subscription_ids = ["11111111-2222-3333-4444-555555555555", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "99999999-8888-7777-6666-555555555555"]
  }
}

# --- refused --------------------------------------------------------------------------------------

run "no_subscription" {
  command = plan
  variables {
    subscription_ids = []
  }
  expect_failures = [var.subscription_ids]
}

run "a_subscription_twice_in_other_case" {
  command = plan
  variables {
    subscription_ids = ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"]
  }
  expect_failures = [var.subscription_ids]
}

run "a_subscription_id_not_a_guid" {
  command = plan
  variables {
    subscription_ids = ["/subscriptions/11111111-2222-3333-4444-555555555555"]
  }
  expect_failures = [var.subscription_ids]
}
