# infra_ids and cluster_kinds of infra/azure/variables.tf, evaluated by Terraform itself
# (scripts/test-terraform-azure copies variables.tf alone beside this file; see scopes.tftest.hcl).
# A CAPZ cluster is named by its Cluster object: a DNS-1123 subdomain of up to 63 characters, '.'
# allowed; its ownership tag name sigs.k8s.io_cluster-api-provider-azure_cluster_<name> stays within
# Azure's 512 characters and holds none of < > % & \ ? /.

variables {
  location           = "westeurope"
  enforcement_scopes = ["/subscriptions/11111111-2222-3333-4444-555555555555"]
}

# --- accepted -------------------------------------------------------------------------------------

run "openshift_infra_ids_without_kinds" {
  command = plan
  variables {
    infra_ids = ["dev-a1b2c", "prod-g5h6i"]
  }
}

run "capz_name_of_63_characters_with_dots" {
  command = plan
  variables {
    infra_ids     = ["prod-g5h6i", "capz.${join("", [for i in range(54) : "w"])}.eu1"]
    cluster_kinds = { "capz.${join("", [for i in range(54) : "w"])}.eu1" = "ClusterAPI" }
  }
}

run "capz_name_longer_than_27" {
  command = plan
  variables {
    infra_ids     = ["workload-cluster-westeurope-prod-01"]
    cluster_kinds = { "workload-cluster-westeurope-prod-01" = "ClusterAPI" }
  }
}

run "every_kind" {
  command = plan
  variables {
    infra_ids     = ["ipi-a1b2c", "hosted-b2c3d", "capz-1"]
    cluster_kinds = { "ipi-a1b2c" = "OpenShift", "hosted-b2c3d" = "HyperShift", "capz-1" = "ClusterAPI" }
  }
}

# --- refused --------------------------------------------------------------------------------------

run "capz_name_longer_than_27_without_its_kind" {
  command = plan
  variables {
    infra_ids = ["workload-cluster-westeurope-prod-01"]
  }
  expect_failures = [var.cluster_kinds]
}

run "capz_name_with_a_dot_without_its_kind" {
  command = plan
  variables {
    infra_ids = ["capz.eu1"]
  }
  expect_failures = [var.cluster_kinds]
}

run "openshift_kind_with_a_dot" {
  command = plan
  variables {
    infra_ids     = ["capz.eu1"]
    cluster_kinds = { "capz.eu1" = "OpenShift" }
  }
  expect_failures = [var.cluster_kinds]
}

run "name_of_64_characters" {
  command = plan
  variables {
    infra_ids     = [join("", [for i in range(64) : "w"])]
    cluster_kinds = { (join("", [for i in range(64) : "w"])) = "ClusterAPI" }
  }
  expect_failures = [var.infra_ids]
}

run "name_not_a_dns_subdomain" {
  command = plan
  variables {
    infra_ids     = ["capz..eu1", "Capz-1", "capz-.eu1", "capz_1"]
    cluster_kinds = { "capz..eu1" = "ClusterAPI", "Capz-1" = "ClusterAPI", "capz-.eu1" = "ClusterAPI", "capz_1" = "ClusterAPI" }
  }
  expect_failures = [var.infra_ids]
}

run "unknown_kind" {
  command = plan
  variables {
    infra_ids     = ["capz-1"]
    cluster_kinds = { "capz-1" = "CAPZ" }
  }
  expect_failures = [var.cluster_kinds]
}

run "kind_of_an_unlisted_cluster" {
  command = plan
  variables {
    infra_ids     = ["dev-a1b2c"]
    cluster_kinds = { "capz-1" = "ClusterAPI" }
  }
  expect_failures = [var.cluster_kinds]
}
