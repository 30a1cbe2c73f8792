# infra/examples/gcp-basic's variables, evaluated by Terraform itself: scripts/test-terraform-gcp
# copies the example's variables.tf alone beside this file (no resource, no provider) and runs
# `terraform test`; a run with expect_failures passes only when that variable's validation refuses
# the values.

variables {
  project_id = "cluster-project-1"
  infra_id   = "mycluster-7xk2p"
  image      = "europe-west1-docker.pkg.dev/cluster-project-1/tagwarden/gcp-function:0.9.0"
}

run "defaults_audit_in_europe_west1" {
  command = plan
  assert {
    condition     = var.mode == "audit" && var.region == "europe-west1"
    error_message = "the example starts in audit"
  }
}

run "project_number_instead_of_id" {
  command = plan
  variables {
    project_id = "123456789012"
  }
  expect_failures = [var.project_id]
}

run "infra_id_with_uppercase" {
  command = plan
  variables {
    infra_id = "MyCluster-7xk2p"
  }
  expect_failures = [var.infra_id]
}
