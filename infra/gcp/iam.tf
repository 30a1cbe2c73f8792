# The function's rights at the scope: one custom role, least privilege, granted on the scope and
# nowhere else. It reads and labels the enforced resource types, binds existing tag values, and
# searches Cloud Asset Inventory for the sweep. No permission in it deletes anything: not a
# resource, not a label (setLabels replaces the set, and the function always sends the current set
# with its fingerprint plus its corrections), not a tag binding (no tagValueBindings.delete).
#
# Custom roles exist on an organization or a project only (IAM, "Understanding roles"): an
# organization or folder scope's role is defined on the organization (role_organization), a
# project scope's on that project.

locals {
  function_permissions = sort(concat(
    # Compute Engine: read (the sweep lists, an event gets) and setLabels, per enforced type
    # (Compute Engine IAM permissions; setLabels takes the current labelFingerprint, so a stale
    # read is refused, never overwritten).
    flatten([for c in local.compute_collections : ["compute.${c}.get", "compute.${c}.list", "compute.${c}.setLabels"]]),
    [
      # Cloud Storage bucket labels: buckets.patch needs storage.buckets.update.
      "storage.buckets.get",
      "storage.buckets.update",
      # Cloud DNS managed zone labels: managedZones.patch needs dns.managedZones.update.
      "dns.managedZones.get",
      "dns.managedZones.list",
      "dns.managedZones.update",
      # Resource Manager tags: bind an existing value (tagwarden never creates a key or a value,
      # as OpenShift), read values to resolve namespaced names.
      "resourcemanager.tagValueBindings.create",
      "resourcemanager.tagValues.get",
      "resourcemanager.tagValues.list",
      # The sweep: searchAllResources at the scope, with label queries.
      "cloudasset.assets.searchAllResources",
    ],
  ))

  role_id          = "${replace(local.name, "-", "_")}_function"
  role_title       = "tagwarden ${local.name} function"
  role_description = "tagwarden: read and label the enforced resource types, bind existing tag values, search Cloud Asset Inventory. No delete permission."

  # The role's full name, "organizations/<id>/roles/<role>" or "projects/<id>/roles/<role>".
  function_role = one(concat(
    google_organization_iam_custom_role.function[*].name,
    google_project_iam_custom_role.function[*].name,
  ))
}

resource "google_organization_iam_custom_role" "function" {
  count = var.scope.type == "project" ? 0 : 1

  org_id      = local.role_organization
  role_id     = local.role_id
  title       = local.role_title
  description = local.role_description
  permissions = local.function_permissions
  stage       = "GA"
}

resource "google_project_iam_custom_role" "function" {
  count = var.scope.type == "project" ? 1 : 0

  project     = var.scope.id
  role_id     = local.role_id
  title       = local.role_title
  description = local.role_description
  permissions = local.function_permissions
  stage       = "GA"
}

resource "google_organization_iam_member" "function" {
  count = var.scope.type == "organization" ? 1 : 0

  org_id = var.scope.id
  role   = local.function_role
  member = google_service_account.function.member
}

resource "google_folder_iam_member" "function" {
  count = var.scope.type == "folder" ? 1 : 0

  folder = "folders/${var.scope.id}"
  role   = local.function_role
  member = google_service_account.function.member
}

resource "google_project_iam_member" "function" {
  count = var.scope.type == "project" ? 1 : 0

  project = var.scope.id
  role    = local.function_role
  member  = google_service_account.function.member
}

# The custom metrics (monitoring.tf) are written to the deployment project.
resource "google_project_iam_member" "metric_writer" {
  project = var.project_id
  role    = "roles/monitoring.metricWriter"
  member  = google_service_account.function.member
}
