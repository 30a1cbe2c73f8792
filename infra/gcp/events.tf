# Events: Cloud Audit Logs (Admin Activity) -> aggregated log sink -> Pub/Sub topic -> push
# subscription (OIDC) -> the Cloud Run service; the scheduler's sweep goes through the same topic.
#
#   audit log sink (organization, folder or project)  --> topic <name>-events
#   Cloud Scheduler <name>-sweep (attribute tagwarden=sweep) --> topic <name>-events
#   topic <name>-events --> subscription <name>-events (push, OIDC as <name>-invoker) --> Cloud Run
#   after max_delivery_attempts --> topic <name>-dead-letters --> subscription <name>-dead-letters (pull, kept 7 days)

locals {
  # The audit-log entries that mean "a resource tagwarden enforces was created, or its labels or
  # tags changed". Fields of LogEntry and of its AuditLog payload (Cloud Logging, "LogEntry" and
  # "Audit log entry structure"; Cloud Audit Logs, "AuditLog"):
  #   logName                 "<parent>/logs/cloudaudit.googleapis.com%2Factivity" for Admin Activity
  #                           audit logs ("cloudaudit.googleapis.com/activity", URL-encoded), at
  #                           any parent (projects/, folders/, organizations/): matched with the
  #                           has-operator (:) on the log ID. Admin Activity logs are always written
  #                           and cannot be turned off; every method below is ADMIN_WRITE.
  #   protoPayload.serviceName the API: compute.googleapis.com, storage.googleapis.com,
  #                           dns.googleapis.com, cloudresourcemanager.googleapis.com
  #   protoPayload.methodName the method: Compute's are "<version>.compute.<collection>.<method>"
  #                           (v1., beta., alpha.; Compute Engine, "Compute Engine audit logging",
  #                           Methods by permission type), so one regular expression (=~, RE2)
  #                           takes every version; Storage's "storage.buckets.create" and
  #                           "storage.buckets.update" (a labels patch is an update); Cloud DNS's
  #                           "dns.managedZones.create", ".patch" and ".update"; Resource
  #                           Manager's tag bindings end in "TagBindings.CreateTagBinding" and
  #                           "TagBindings.DeleteTagBinding" (matched on that ending: a binding
  #                           removed by someone else is drift to correct, never a delete of ours).
  #   operation.last          long-running operations write two entries, one when they start and one
  #                           when they end (Cloud Audit Logs, "Audit logs for long-running
  #                           operations"; LogEntryOperation.first / .last): only the end, when the
  #                           resource exists, or an entry with no operation at all.
  #   protoPayload.status     the outcome (google.rpc.Status in AuditLog.status): a failed call has
  #                           a non-zero code, changed nothing and needs nothing done.
  #   protoPayload.authenticationInfo.principalEmail  the caller: the function's own writes are left
  #                           out (exclude_self_in_sink_filter), loop safety at the source.
  compute_collections = ["instances", "disks", "images", "snapshots", "addresses", "globalAddresses", "forwardingRules", "globalForwardingRules"]
  compute_methods     = ["insert", "setLabels"]
  audit_filter = join("\n", compact([
    "logName:\"cloudaudit.googleapis.com%2Factivity\"",
    "protoPayload.@type=\"type.googleapis.com/google.cloud.audit.AuditLog\"",
    "(NOT protoPayload.status.code:* OR protoPayload.status.code=0)",
    "(NOT operation.id:* OR operation.last=true)",
    join("\n", [
      "(",
      "  (protoPayload.serviceName=\"compute.googleapis.com\" AND protoPayload.methodName=~\"^(v1|beta|alpha)\\.compute\\.(${join("|", local.compute_collections)})\\.(${join("|", local.compute_methods)})$\")",
      "  OR (protoPayload.serviceName=\"storage.googleapis.com\" AND protoPayload.methodName=(\"storage.buckets.create\" OR \"storage.buckets.update\"))",
      "  OR (protoPayload.serviceName=\"dns.googleapis.com\" AND protoPayload.methodName=(\"dns.managedZones.create\" OR \"dns.managedZones.patch\" OR \"dns.managedZones.update\"))",
      "  OR (protoPayload.serviceName=\"cloudresourcemanager.googleapis.com\" AND protoPayload.methodName=~\"TagBindings\\.(CreateTagBinding|DeleteTagBinding)$\")",
      ")",
    ]),
    var.exclude_self_in_sink_filter ? "NOT protoPayload.authenticationInfo.principalEmail=\"${google_service_account.function.email}\"" : "",
  ]))

  sink_destination = "pubsub.googleapis.com/${google_pubsub_topic.events.id}"
  sink_description = "tagwarden ${local.name}: Admin Activity audit logs of created resources and label or tag changes, to Pub/Sub"
  # The writer identity of whichever sink the scope created.
  sink_writer_identity = one(concat(
    google_logging_organization_sink.events[*].writer_identity,
    google_logging_folder_sink.events[*].writer_identity,
    google_logging_project_sink.events[*].writer_identity,
  ))

  # The sweep message: the attribute tells it from an audit-log entry; the body is the same JSON the
  # other clouds' schedules send.
  sweep_message = jsonencode({ tagwarden = "sweep" })
}

resource "google_pubsub_topic" "events" {
  #checkov:skip=CKV_GCP_83: Google-managed encryption at rest; the messages are audit-log entries about resource metadata and the sweep trigger, no secret, kept 7 days at most.
  project = var.project_id
  name    = "${local.name}-events"
  labels  = local.labels
  # Unacknowledged messages are kept 7 days by the subscription; the topic itself keeps none.

  depends_on = [google_project_service.this]
}

resource "google_pubsub_topic" "dead_letters" {
  #checkov:skip=CKV_GCP_83: Google-managed encryption at rest; the same messages as the events topic, which failed delivery, no secret.
  project = var.project_id
  name    = "${local.name}-dead-letters"
  labels  = local.labels

  depends_on = [google_project_service.this]
}

# Aggregated sinks: an organization's or a folder's with include_children route the entries of
# every folder and project below it (Cloud Logging, "Aggregated sinks"); a project's routes its own.
resource "google_logging_organization_sink" "events" {
  count = var.scope.type == "organization" ? 1 : 0

  name             = "${local.name}-events"
  org_id           = var.scope.id
  description      = local.sink_description
  destination      = local.sink_destination
  filter           = local.audit_filter
  include_children = true
}

resource "google_logging_folder_sink" "events" {
  count = var.scope.type == "folder" ? 1 : 0

  name             = "${local.name}-events"
  folder           = var.scope.id
  description      = local.sink_description
  destination      = local.sink_destination
  filter           = local.audit_filter
  include_children = true
}

resource "google_logging_project_sink" "events" {
  count = var.scope.type == "project" ? 1 : 0

  name        = "${local.name}-events"
  project     = var.scope.id
  description = local.sink_description
  destination = local.sink_destination
  filter      = local.audit_filter
  # Its own service account, granted on this topic only.
  unique_writer_identity = true
}

# The sink writes as its writer identity, which may publish to the events topic and nothing else.
resource "google_pubsub_topic_iam_member" "sink_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.events.name
  role    = "roles/pubsub.publisher"
  member  = local.sink_writer_identity
}

resource "google_pubsub_subscription" "events" {
  project = var.project_id
  name    = "${local.name}-events"
  topic   = google_pubsub_topic.events.id
  labels  = local.labels

  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = "604800s" # 7 days, the most Pub/Sub keeps on a subscription
  # Never expire for inactivity: a quiet scope has no events for long.
  expiration_policy {
    ttl = ""
  }

  retry_policy {
    minimum_backoff = "${var.retry_minimum_backoff_seconds}s"
    maximum_backoff = "${var.retry_maximum_backoff_seconds}s"
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letters.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  push_config {
    push_endpoint = google_cloud_run_v2_service.this.uri
    # Pub/Sub signs each push with an OIDC token of the invoker account for the service's URL,
    # which Cloud Run checks (roles/run.invoker, function.tf).
    oidc_token {
      service_account_email = google_service_account.invoker.email
      audience              = google_cloud_run_v2_service.this.uri
    }
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.invoker,
    google_pubsub_topic_iam_member.dead_letter_publisher,
  ]
}

# Dead letters are kept for inspection and replay: a pull subscription nobody consumes.
resource "google_pubsub_subscription" "dead_letters" {
  project = var.project_id
  name    = "${local.name}-dead-letters"
  topic   = google_pubsub_topic.dead_letters.id
  labels  = local.labels

  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
  expiration_policy {
    ttl = ""
  }
}

# Dead-lettering is done by the Pub/Sub service agent: it publishes to the dead-letter topic and
# acknowledges on the source subscription (Pub/Sub, "Dead-letter topics", Grant forwarding roles).
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  project = var.project_id
  topic   = google_pubsub_topic.dead_letters.name
  role    = "roles/pubsub.publisher"
  member  = local.pubsub_agent

  depends_on = [google_project_service.this]
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  project      = var.project_id
  subscription = google_pubsub_subscription.events.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}

# Pub/Sub mints the push's OIDC token as the invoker account. Projects created before 2021-04-08
# need their Pub/Sub service agent to hold Service Account Token Creator for it (Pub/Sub,
# "Authenticate push subscriptions"); granted on this one account only, harmless elsewhere.
resource "google_service_account_iam_member" "pubsub_token_creator" {
  service_account_id = google_service_account.invoker.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent

  depends_on = [google_project_service.this]
}

# The scheduled sweep: a message on the same topic, so it reaches the function the same way, with
# the same retries and dead-lettering. Cloud Scheduler publishes as its service agent.
resource "google_cloud_scheduler_job" "sweep" {
  project     = var.project_id
  region      = var.region
  name        = "${local.name}-sweep"
  description = "tagwarden ${local.name}: scheduled sweep of every owned resource in ${local.scope_resource}"
  schedule    = var.sweep_schedule
  time_zone   = var.sweep_time_zone

  pubsub_target {
    topic_name = google_pubsub_topic.events.id
    data       = base64encode(local.sweep_message)
    attributes = {
      tagwarden = "sweep"
    }
  }

  depends_on = [google_project_service.this]
}
