# The variable validations of infra/gcp/variables.tf, evaluated by Terraform itself: scripts/
# test-terraform-gcp copies variables.tf alone (no resource, no provider: nothing to fetch) next to
# this file and runs `terraform test`. Every run is a plan of that file; a run with expect_failures
# passes only when that variable's validation refuses the values. This is not `terraform test` of the
# module (that needs the google provider, which is not available here).

variables {
  project_id = "tagwarden-host"
  region     = "europe-west1"
  scope      = { type = "project", id = "cluster-project-1" }
  infra_ids  = ["dev-a1b2c", "prod-g5h6i"]
  image      = "europe-west1-docker.pkg.dev/tagwarden-host/tagwarden/gcp-function:0.9.0"
}

# --- accepted -------------------------------------------------------------------------------------

run "project_scope_defaults_to_audit" {
  command = plan
  assert {
    condition     = var.mode == "audit"
    error_message = "a new deployment must start in audit"
  }
}

run "organization_scope" {
  command = plan
  variables {
    scope = { type = "organization", id = "123456789012" }
  }
}

run "organization_scope_with_its_own_id_repeated" {
  command = plan
  variables {
    scope           = { type = "organization", id = "123456789012" }
    organization_id = "123456789012"
  }
}

run "folder_scope_with_its_organization" {
  command = plan
  variables {
    scope           = { type = "folder", id = "345678901234" }
    organization_id = "123456789012"
  }
}

run "enforce" {
  command = plan
  variables {
    mode = "enforce"
  }
}

run "image_by_digest_and_in_container_registry" {
  command = plan
  variables {
    image = "eu.gcr.io/tagwarden-host/tagwarden@sha256:${join("", [for i in range(64) : "a"])}"
  }
}

run "publishers_of_listed_clusters" {
  command = plan
  variables {
    cluster_publishers = {
      "dev-a1b2c"  = ["serviceAccount:publisher@dev-project.iam.gserviceaccount.com"]
      "prod-g5h6i" = ["principal://iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/ocp/subject/system:serviceaccount:tagwarden:publisher"]
    }
  }
}

# --- refused --------------------------------------------------------------------------------------

run "unknown_scope_type" {
  command = plan
  variables {
    scope = { type = "billing-account", id = "123456789012" }
  }
  expect_failures = [var.scope]
}

run "folder_named_with_its_prefix" {
  command = plan
  variables {
    scope           = { type = "folder", id = "folders/345678901234" }
    organization_id = "123456789012"
  }
  expect_failures = [var.scope]
}

run "folder_scope_without_its_organization" {
  command = plan
  variables {
    scope = { type = "folder", id = "345678901234" }
  }
  expect_failures = [var.organization_id]
}

run "organization_scope_with_another_organization" {
  command = plan
  variables {
    scope           = { type = "organization", id = "123456789012" }
    organization_id = "999999999999"
  }
  expect_failures = [var.organization_id]
}

run "project_scope_by_number" {
  command = plan
  variables {
    scope = { type = "project", id = "123456789012" }
  }
  expect_failures = [var.scope]
}

run "mode_other_than_audit_or_enforce" {
  command = plan
  variables {
    mode = "dry-run"
  }
  expect_failures = [var.mode]
}

run "image_from_docker_hub" {
  command = plan
  variables {
    image = "docker.io/library/tagwarden:latest"
  }
  expect_failures = [var.image]
}

run "image_without_tag_or_digest" {
  command = plan
  variables {
    image = "europe-west1-docker.pkg.dev/tagwarden-host/tagwarden/gcp-function"
  }
  expect_failures = [var.image]
}

run "infra_id_too_long" {
  command = plan
  variables {
    infra_ids = ["a-cluster-name-of-21-c-abcde"]
  }
  expect_failures = [var.infra_ids]
}

run "infra_id_all" {
  command = plan
  variables {
    infra_ids = ["all"]
  }
  expect_failures = [var.infra_ids]
}

run "publisher_of_an_unlisted_cluster" {
  command = plan
  variables {
    cluster_publishers = { "stage-d3e4f" = ["serviceAccount:publisher@stage.iam.gserviceaccount.com"] }
  }
  expect_failures = [var.cluster_publishers]
}

run "publisher_not_an_iam_principal" {
  command = plan
  variables {
    cluster_publishers = { "dev-a1b2c" = ["publisher@dev-project.iam.gserviceaccount.com"] }
  }
  expect_failures = [var.cluster_publishers]
}

run "ack_deadline_shorter_than_a_request" {
  command = plan
  variables {
    request_timeout_seconds = 300
    ack_deadline_seconds    = 60
  }
  expect_failures = [var.ack_deadline_seconds]
}

run "too_few_delivery_attempts" {
  command = plan
  variables {
    max_delivery_attempts = 3
  }
  expect_failures = [var.max_delivery_attempts]
}

run "name_too_short_for_a_service_account" {
  command = plan
  variables {
    name = "tw"
  }
  expect_failures = [var.name]
}

run "label_key_with_uppercase" {
  command = plan
  variables {
    labels = { "CostCenter" = "x" }
  }
  expect_failures = [var.labels]
}

run "tag_key_by_its_namespaced_name" {
  command = plan
  variables {
    tag_keys = ["123456789012/environment"]
  }
  expect_failures = [var.tag_keys]
}

run "tag_keys_by_id" {
  command = plan
  variables {
    tag_keys = ["tagKeys/281478395625645"]
  }
}
