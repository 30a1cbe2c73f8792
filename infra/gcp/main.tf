# tagwarden for Google Cloud: one deployment in one project (project_id) enforcing the clusters in
# infra_ids across one scope (an organization, a folder or a project). The service accounts, the
# APIs and the values the other files share live here. Cloud Run: function.tf. Pub/Sub, the audit
# log sink and the sweep schedule: events.tf. Policy bucket: storage.tf. The function's custom role
# and its grants: iam.tf. Metric descriptors, alert policies and the dashboard: monitoring.tf.
#
# The function itself (a Rust binary in a container on Cloud Run) is not released yet: this is the
# infrastructure it will run on, and the environment below is the contract it will read.

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  name     = var.name
  clusters = var.infra_ids
  labels   = merge(var.labels, { "managed-by" = "tagwarden", "tagwarden-deployment" = var.name })

  project_number = data.google_project.this.number

  # The scope as Google names it ("organizations/123", "folders/456", "projects/my-project"): the
  # sink's parent, the sweep's Cloud Asset Inventory scope (searchAllResources takes exactly these
  # three forms), the IAM resource the custom role is granted on.
  scope_resource = "${var.scope.type == "organization" ? "organizations" : var.scope.type == "folder" ? "folders" : "projects"}/${var.scope.id}"
  # Custom roles exist on organizations and projects only: a folder scope's role is the
  # organization's (var.organization_id, required then by its validation).
  role_organization = var.scope.type == "organization" ? var.scope.id : var.organization_id

  # Stable suffix for the globally unique bucket name.
  suffix             = substr(sha1("${var.project_id}/${var.name}"), 0, 8)
  policy_bucket_name = coalesce(var.policy_bucket_name, "${var.name}-policy-${local.suffix}")

  # TAGWARDEN_POLICY, the function's contract: the bucket and the prefix under which every
  # cluster has a folder of policy layers, '*' standing for the infraID (as on Azure:
  # ".../clusters/*/").
  policy_url = "gs://${local.policy_bucket_name}/${var.policy_prefix}*/"

  # Google-managed service agents of the deployment project (IAM, "Service agents").
  pubsub_agent = "serviceAccount:service-${local.project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"

  apis = toset([
    "run.googleapis.com",
    "pubsub.googleapis.com",
    "logging.googleapis.com",
    "cloudscheduler.googleapis.com",
    "monitoring.googleapis.com",
    "cloudasset.googleapis.com",
    "iam.googleapis.com",
    "storage.googleapis.com",
    "cloudresourcemanager.googleapis.com",
  ])
}

resource "google_project_service" "this" {
  for_each = var.enable_apis ? local.apis : toset([])

  project = var.project_id
  service = each.value
  # Other workloads of the project may use them too: an uninstall never turns an API off.
  disable_on_destroy = false
}

# Two identities, as on the other clouds' Pub/Sub-like wiring:
#   function  what the tagwarden code acts as: the custom role at the scope (labels, tag bindings,
#             Cloud Asset searches), reading the policy bucket, writing its status reports and
#             contest records, writing its metrics. Nothing else.
#   invoker   what Pub/Sub signs its push requests as (an OIDC token for the service's URL): it may
#             invoke the service and do nothing else, and the function holds no run.invoker.
resource "google_service_account" "function" {
  project      = var.project_id
  account_id   = "${local.name}-fn"
  display_name = "tagwarden function (${local.name})"
  description  = "The identity the tagwarden function acts as: labels and tag bindings at ${local.scope_resource}, never a delete."

  depends_on = [google_project_service.this]
}

resource "google_service_account" "invoker" {
  project      = var.project_id
  account_id   = "${local.name}-invoker"
  display_name = "tagwarden push invoker (${local.name})"
  description  = "Pub/Sub signs its pushes to the tagwarden service as this account; it may invoke the service, nothing else."

  depends_on = [google_project_service.this]
}
