# The function's rights at the scope: one custom role, least privilege, granted on the scope and
# nowhere else. It reads and labels the enforced resource types, reads their tags in effect and
# takes part in their tag bindings, and searches Cloud Asset Inventory for the sweep. No permission
# in it deletes a resource or a label (setLabels replaces the set, and the function always sends the
# current set with its fingerprint plus its corrections).
#
# A tag binding needs a permission on both ends (Resource Manager, "Creating and managing tags":
# `<type>.createTagBinding`/`deleteTagBinding` on the resource, `resourcemanager.tagValueBindings.
# create`/`delete` on the value): the resource end is in the role, the value end is granted on the
# tag keys in var.tag_keys only (Tag User, below). So the function binds and unbinds values of the
# clusters' own keys and of no other; unbinding is how a wrong value of such a key is replaced
# ("Exactly one value can be attached to a resource for a given key").
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
    # Their tags: what is in effect (listEffectiveTags), and the resource end of a binding.
    flatten([for c in concat([for c in local.compute_collections : "compute.${c}"], ["storage.buckets"]) :
    ["${c}.listEffectiveTags", "${c}.createTagBinding", "${c}.deleteTagBinding"]]),
    [
      # Cloud Storage bucket labels: buckets.patch needs storage.buckets.update.
      "storage.buckets.get",
      "storage.buckets.update",
      # Cloud DNS managed zone labels: managedZones.patch needs dns.managedZones.update.
      "dns.managedZones.get",
      "dns.managedZones.list",
      "dns.managedZones.update",
      # Resource Manager tags: read values to resolve namespaced names (tagwarden never creates a
      # key or a value, as OpenShift; the value end of a binding is var.tag_keys').
      "resourcemanager.tagValues.get",
      "resourcemanager.tagValues.list",
      # The sweep: searchAllResources at the scope, with label queries.
      "cloudasset.assets.searchAllResources",
    ],
  ))

  role_id          = "${replace(local.name, "-", "_")}_function"
  role_title       = "tagwarden ${local.name} function"
  role_description = "tagwarden: read and label the enforced resource types, the resource end of their tag bindings, search Cloud Asset Inventory. Deletes no resource and no label."

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

# The value end of tag bindings, on the clusters' tag keys only (roles/resourcemanager.tagUser:
# tagValueBindings.create and .delete on the key's values).
resource "google_tags_tag_key_iam_member" "function" {
  for_each = toset(var.tag_keys)

  tag_key = each.value
  role    = "roles/resourcemanager.tagUser"
  member  = google_service_account.function.member
}

# The custom metrics (monitoring.tf) are written to the deployment project.
resource "google_project_iam_member" "metric_writer" {
  project = var.project_id
  role    = "roles/monitoring.metricWriter"
  member  = google_service_account.function.member
}
