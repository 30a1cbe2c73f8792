# The policy bucket: where each cluster publishes its policy (`tagwarden publish`) under
# <policy_prefix><infraID>/, where the function reads it and writes that cluster's status report
# beside it, and its contest records under _tagwarden/contests/.
#
# Uniform bucket-level access (IAM only, no object ACLs: IAM Conditions on a bucket need it),
# public access prevention enforced, every version kept for policy_noncurrent_version_days.

locals {
  # Object names as IAM Conditions see them: "projects/_/buckets/<bucket>/objects/<object>"
  # (Cloud Storage, "IAM Conditions": resource.name for objects).
  object_name_prefix = "projects/_/buckets/${local.policy_bucket_name}/objects/"

  # One grant per (cluster, principal): each principal writes under its cluster's folder only.
  publisher_grants = { for pair in flatten([for id, members in var.cluster_publishers : [for m in members : { id = id, member = m }]]) :
    "${pair.id} ${pair.member}" => pair
  }
}

resource "google_storage_bucket" "policy" {
  #checkov:skip=CKV_GCP_62: No usage-log bucket: writes to it are IAM-conditioned per cluster prefix and every version is kept; Cloud Audit Logs (Data Access for Cloud Storage, when the organization enables it) record who read or wrote which object.
  project  = var.project_id
  name     = local.policy_bucket_name
  location = coalesce(var.policy_bucket_location, var.region)
  labels   = local.labels

  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.policy_bucket_force_destroy

  versioning {
    enabled = true
  }

  # Replaced policy versions go after policy_noncurrent_version_days; the live ones stay.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.policy_noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.this]
}

# What a publisher may do with policy objects, and the function with its status reports and contest
# records: create, read, and replace (Cloud Storage: overwriting an object needs
# storage.objects.delete beside storage.objects.create). Defined in the deployment project, granted
# on the bucket under IAM Conditions only.
resource "google_project_iam_custom_role" "object_writer" {
  project     = var.project_id
  role_id     = "${replace(local.name, "-", "_")}_object_writer"
  title       = "tagwarden ${local.name} object writer"
  description = "Create, read and replace objects; granted on the tagwarden policy bucket under an object-name condition only."
  permissions = [
    "storage.objects.create",
    "storage.objects.delete",
    "storage.objects.get",
  ]
}

# Each cluster's publishers: objects under <policy_prefix><infraID>/ only.
resource "google_storage_bucket_iam_member" "publisher" {
  for_each = local.publisher_grants

  bucket = google_storage_bucket.policy.name
  role   = google_project_iam_custom_role.object_writer.name
  member = each.value.member

  condition {
    title       = "tagwarden-publish-${each.value.id}"
    description = "Publish the policy of cluster ${each.value.id} only"
    expression  = "resource.name.startsWith(\"${local.object_name_prefix}${var.policy_prefix}${each.value.id}/\")"
  }
}

# The function reads every cluster's policy (and lists the layers of each folder).
resource "google_storage_bucket_iam_member" "function_read" {
  bucket = google_storage_bucket.policy.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.function.member
}

# ...and writes only the status reports (<prefix><infraID>/tagwarden-status.json) and its contest
# records (_tagwarden/contests/), never a policy.
resource "google_storage_bucket_iam_member" "function_status" {
  bucket = google_storage_bucket.policy.name
  role   = google_project_iam_custom_role.object_writer.name
  member = google_service_account.function.member

  condition {
    title       = "tagwarden-status-reports"
    description = "Status reports and contest records only"
    expression = join(" || ", [
      "resource.name.startsWith(\"${local.object_name_prefix}_tagwarden/contests/\")",
      "(resource.name.startsWith(\"${local.object_name_prefix}${var.policy_prefix}\") && resource.name.endsWith(\"/tagwarden-status.json\"))",
    ])
  }
}

# A policy change reaches the function at once: Cloud Storage notifies the events topic of every
# object finalized in the bucket (Pub/Sub notifications for Cloud Storage: attributes `eventType`
# `OBJECT_FINALIZE`, `bucketId`, `objectId`), which the function answers with a sweep of the
# clusters that object's folder covers; its own status reports are recognised and ignored.
# The bucket's service agent publishes them, so it needs the publisher role on the topic.
data "google_storage_project_service_account" "this" {
  project = var.project_id
}

resource "google_pubsub_topic_iam_member" "policy_notifications" {
  project = var.project_id
  topic   = google_pubsub_topic.events.name
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${data.google_storage_project_service_account.this.email_address}"
}

resource "google_storage_notification" "policy" {
  bucket         = google_storage_bucket.policy.name
  topic          = google_pubsub_topic.events.id
  payload_format = "JSON_API_V1"
  event_types    = ["OBJECT_FINALIZE"]
  # Only the policy folders: not the function's own contest records under _tagwarden/.
  object_name_prefix = var.policy_prefix

  depends_on = [google_pubsub_topic_iam_member.policy_notifications]
}
