# infra/examples/azure-basic's variables, evaluated by Terraform itself: scripts/
# test-terraform-azure copies the example's variables.tf alone beside this file (no resource, no
# provider) and runs `terraform test`; a run with expect_failures passes only when that variable's
# validation refuses the values. ARO needs the subscription as the scope: its managed resource
# group's deny assignment refuses the role assignments (not the tag writes).

variables {
  subscription_id = "11111111-2222-3333-4444-555555555555"
  infra_id        = "mycluster-7xk2p"
}

# --- accepted -------------------------------------------------------------------------------------

run "ipi_resource_groups" {
  command = plan
  variables {
    resource_group        = "mycluster-7xk2p-rg"
    extra_resource_groups = ["network-rg"]
  }
}

run "aro_subscription_without_a_resource_group" {
  command = plan
  variables {
    enforcement_scope = "subscription"
  }
}

run "aro_subscription_with_its_managed_resource_group_named" {
  command = plan
  variables {
    enforcement_scope = "subscription"
    resource_group    = "aro-abcd1234"
  }
}

# --- refused --------------------------------------------------------------------------------------

run "resource_groups_without_a_resource_group" {
  command         = plan
  expect_failures = [var.resource_group]
}

run "unknown_scope" {
  command = plan
  variables {
    enforcement_scope = "management_group"
    resource_group    = "mycluster-7xk2p-rg"
  }
  expect_failures = [var.enforcement_scope]
}

run "extra_resource_groups_with_the_subscription" {
  command = plan
  variables {
    enforcement_scope     = "subscription"
    extra_resource_groups = ["network-rg"]
  }
  expect_failures = [var.extra_resource_groups]
}
