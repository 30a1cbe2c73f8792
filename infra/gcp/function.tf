# The function: a Cloud Run (v2) service running the tagwarden container as its own service
# account, reachable from inside Google Cloud only, scaled to zero between events.
#
# Every request is a Pub/Sub push (events.tf): an audit-log entry routed by the sink, or the
# scheduler's sweep message (attribute `tagwarden = sweep`). Pub/Sub pushes to an internal-only
# service: Cloud Run counts requests from Pub/Sub in the same project as internal (Cloud Run,
# "Restrict network ingress": internal traffic includes Pub/Sub, Eventarc, Cloud Scheduler,
# Cloud Tasks and Workflows in the same project or VPC Service Controls perimeter), so the push
# subscription lives in the service's project.

locals {
  # The environment is the function's contract (the same names as on AWS and Azure where they mean
  # the same; the GCP ones are new).
  environment = {
    TAGWARDEN_POLICY = local.policy_url
    TAGWARDEN_MODE   = var.mode
    # The clusters this deployment enforces (ownership label kubernetes-io-cluster-<infraID>).
    TAGWARDEN_CLUSTERS = join(",", local.clusters)
    # The sweep's Cloud Asset Inventory scope (searchAllResources: "projects/{PROJECT_ID}",
    # "folders/{FOLDER_NUMBER}" or "organizations/{ORGANIZATION_NUMBER}").
    TAGWARDEN_SWEEP_SCOPES = local.scope_resource
    # Loop safety: the function's own writes, as audit logs name their caller
    # (protoPayload.authenticationInfo.principalEmail).
    TAGWARDEN_SELF_PRINCIPAL = google_service_account.function.email
    # Where the custom metrics are written (custom.googleapis.com/tagwarden/<name>, monitoring.tf).
    TAGWARDEN_METRICS_PROJECT = var.project_id
    # The generic_task location of those series: the service's region.
    TAGWARDEN_METRICS_LOCATION = var.region
    RUST_LOG                   = var.log_level
  }
}

resource "google_cloud_run_v2_service" "this" {
  project     = var.project_id
  name        = local.name
  location    = var.region
  description = "tagwarden: corrects label and tag drift on the clusters' resources in ${local.scope_resource}; never deletes a label or a tag"
  labels      = local.labels

  # Internal only: the one caller is the push subscription (see above).
  ingress             = "INGRESS_TRAFFIC_INTERNAL_ONLY"
  deletion_protection = var.deletion_protection

  template {
    service_account                  = google_service_account.function.email
    timeout                          = "${var.request_timeout_seconds}s"
    max_instance_request_concurrency = var.concurrency

    scaling {
      min_instance_count = 0
      max_instance_count = var.max_instance_count
    }

    containers {
      image = var.image

      resources {
        limits = {
          cpu    = "1"
          memory = var.memory
        }
        # CPU only while a request is served: the function does nothing between pushes.
        cpu_idle = true
      }

      dynamic "env" {
        for_each = local.environment
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  # The identity's grants are in place before the first instance starts.
  depends_on = [
    google_project_service.this,
    google_storage_bucket_iam_member.function_read,
    google_storage_bucket_iam_member.function_status,
    google_project_iam_member.metric_writer,
    google_organization_iam_member.function,
    google_folder_iam_member.function,
    google_project_iam_member.function,
  ]
}

# Only the invoker account may call the service (Pub/Sub's OIDC token carries its identity).
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_service.this.name
  role     = "roles/run.invoker"
  member   = google_service_account.invoker.member
}
