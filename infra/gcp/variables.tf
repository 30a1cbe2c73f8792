################################################################################
# Placement, scope, clusters
################################################################################

variable "project_id" {
  description = "The project the deployment lives in: the Cloud Run service, the Pub/Sub topics, the policy bucket, the scheduler job, the service accounts and the monitoring. It need not be inside `scope`."
  type        = string

  validation {
    # Project IDs: 6 to 30 lowercase letters, digits and hyphens, starting with a letter, not
    # ending with a hyphen (Resource Manager, "Creating and managing projects", Project ID).
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID: 6-30 lowercase letters, digits and '-', starting with a letter and not ending with '-'."
  }
}

variable "region" {
  description = "Region of the Cloud Run service and the Cloud Scheduler job (e.g. `europe-west1`); the policy bucket's location unless `policy_bucket_location` is set."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region name such as \"europe-west1\" or \"us-central1\"."
  }
}

variable "scope" {
  description = "Where tagwarden enforces: `{ type = \"organization\", id = \"<numeric organization ID>\" }`, `{ type = \"folder\", id = \"<numeric folder ID>\" }` or `{ type = \"project\", id = \"<project ID>\" }`. The Cloud Audit Logs sink is created there (aggregated, with every child, for an organization or a folder), and the function's custom role is granted there, nowhere else."
  type = object({
    type = string
    id   = string
  })

  validation {
    condition     = contains(["organization", "folder", "project"], var.scope.type)
    error_message = "scope.type must be \"organization\", \"folder\" or \"project\"."
  }

  validation {
    # Organization and folder IDs are decimal numbers (Resource Manager v3 `Organization.name`
    # "organizations/{organization_id}", `Folder.name` "folders/{folder_id}"); a project is named
    # by its project ID here, as the sink and the IAM resources take it.
    condition     = var.scope.type == "project" ? can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.scope.id)) : can(regex("^[1-9][0-9]{0,31}$", var.scope.id))
    error_message = "scope.id must be the numeric ID of the organization or folder (without \"organizations/\" or \"folders/\"), or the project ID of a project scope."
  }
}

variable "organization_id" {
  description = "Numeric ID of the organization that holds a folder scope: custom roles exist only on an organization or a project (IAM, \"Understanding roles\", custom roles), so a folder scope's role is defined on its organization and granted on the folder. Required for a folder scope; must equal `scope.id` or be null for an organization scope; unused for a project scope."
  type        = string
  default     = null

  validation {
    condition = (var.scope.type == "folder" ? var.organization_id != null :
    var.scope.type == "organization" ? (var.organization_id == null || var.organization_id == var.scope.id) : true)
    error_message = "organization_id is required for a folder scope (its custom role is defined on the organization), and for an organization scope it must be null or equal scope.id."
  }

  validation {
    condition     = var.organization_id == null ? true : can(regex("^[1-9][0-9]{0,31}$", var.organization_id))
    error_message = "organization_id must be a numeric organization ID (without \"organizations/\")."
  }
}

variable "infra_ids" {
  description = "The clusters this deployment enforces: OpenShift infraIDs (`status.infrastructureName`). A resource is written only when it carries one of their ownership labels (`kubernetes-io-cluster-<infraID>: owned`). Each cluster publishes its policy under `<policy_prefix><infraID>/` in the policy bucket. Adding a cluster is one list entry and one apply."
  type        = list(string)

  validation {
    # OpenShift's infraID: the cluster name cut to 21 characters, '-', 5 random characters. The
    # ownership label key kubernetes-io-cluster-<infraID> (22 + 27 characters) is then a valid
    # label key (at most 63; the core's gcp module, ownership_label_key).
    condition     = length(var.infra_ids) > 0 && length(distinct(var.infra_ids)) == length(var.infra_ids) && alltrue([for id in var.infra_ids : can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", id))])
    error_message = "infra_ids must be a non-empty list of distinct OpenShift infraIDs: 1-27 lowercase letters, digits and '-', starting and ending with a letter or digit."
  }

  # "all" is the InfraID of a deployment's own metrics (the core's report module, ALL_CLUSTERS):
  # a cluster of that name would share, and hide in, that series.
  validation {
    condition     = !contains(var.infra_ids, "all")
    error_message = "infra_ids must not list \"all\": that is the InfraID of the deployment-wide metrics."
  }
}

variable "name" {
  description = "Name prefix of every resource the module creates (service accounts, topics, the service, the sink, the job, the custom roles)."
  type        = string
  default     = "tagwarden"

  validation {
    # Service account IDs are 6-30 characters ([a-z]([-a-z0-9]*[a-z0-9])): the shortest is
    # "<name>-fn", the longest "<name>-invoker", so name is 3 to 20 characters.
    condition     = can(regex("^[a-z][a-z0-9-]{1,18}[a-z0-9]$", var.name))
    error_message = "name must be 3-20 characters of lowercase letters, digits and '-', starting with a letter and ending with a letter or digit."
  }
}

variable "labels" {
  description = "Labels added to every labelled resource the module creates (the service, the topics, the subscriptions, the bucket)."
  type        = map(string)
  default     = {}

  validation {
    # Google's label rules (the core's gcp module, Rules::Google), ASCII: keys start with a
    # lowercase letter, keys and values up to 63 lowercase letters, digits, '_' and '-'; at most 64
    # labels a resource, of which the module sets two itself.
    condition     = length(var.labels) <= 62 && alltrue([for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && can(regex("^[a-z0-9_-]{0,63}$", v))])
    error_message = "labels must have at most 62 entries; keys 1-63 lowercase letters, digits, '_' and '-' starting with a letter; values up to 63 of the same."
  }
}

variable "enable_apis" {
  description = "Enable the APIs the deployment uses in `project_id` (Cloud Run, Pub/Sub, Logging, Cloud Scheduler, Monitoring, Cloud Asset, IAM, Cloud Storage, Resource Manager). They are never disabled on destroy."
  type        = bool
  default     = true
}

################################################################################
# Function (Cloud Run)
################################################################################

variable "image" {
  description = "The function's container image, in Artifact Registry (`<region>-docker.pkg.dev/<project>/<repository>/<image>`) or Container Registry (`[<region>.]gcr.io/<project>/<image>`), with a tag or a `@sha256:` digest. No default: the image is built by the release, and a digest pins what runs."
  type        = string

  validation {
    condition = (
      can(regex("^[a-z0-9-]+-docker\\.pkg\\.dev/[a-z][a-z0-9.:-]{4,61}[a-z0-9]/[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$", var.image)) ||
      can(regex("^((us|eu|asia)\\.)?gcr\\.io/[a-z][a-z0-9.:-]{4,61}[a-z0-9](/[a-z0-9][a-z0-9._-]*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$", var.image))
    )
    error_message = "image must be an Artifact Registry (<location>-docker.pkg.dev/<project>/<repository>/<image>) or Container Registry ([us.|eu.|asia.]gcr.io/<project>/<image>) reference with a :tag or an @sha256: digest."
  }
}

variable "mode" {
  description = "TAGWARDEN_MODE: `audit` evaluates everything exactly as `enforce` would (audit-log events, sweeps, policy changes) and writes no label and no tag binding anywhere: the status report and the metrics show what would be written. `enforce` writes, except for clusters whose policy says `enforce: false` and keys in a policy's `auditKeys`, which stay audited. A new deployment starts in audit; switch to `enforce` once the report shows what you expect."
  type        = string
  default     = "audit"

  validation {
    condition     = contains(["audit", "enforce"], var.mode)
    error_message = "mode must be \"audit\" (report what would be written, write nothing) or \"enforce\"."
  }
}

variable "log_level" {
  description = "Value of RUST_LOG (a tracing-subscriber EnvFilter directive, e.g. `info` or `info,tagwarden=debug`)."
  type        = string
  default     = "info"

  validation {
    condition     = can(regex("^[A-Za-z0-9_:=,.\\-]+$", var.log_level))
    error_message = "log_level must be an EnvFilter directive such as \"info\" or \"info,tagwarden=debug\"."
  }
}

variable "max_instance_count" {
  description = "Upper bound of Cloud Run instances: backpressure on the label and tag APIs. Pub/Sub holds and retries (with backoff) what cannot be delivered. The lower bound is always 0: nothing runs between events."
  type        = number
  default     = 10

  validation {
    condition     = var.max_instance_count >= 1 && var.max_instance_count <= 100 && floor(var.max_instance_count) == var.max_instance_count
    error_message = "max_instance_count must be a whole number between 1 and 100."
  }
}

variable "concurrency" {
  description = "Requests one instance serves at once (Cloud Run `max_instance_request_concurrency`)."
  type        = number
  default     = 10

  validation {
    condition     = var.concurrency >= 1 && var.concurrency <= 1000 && floor(var.concurrency) == var.concurrency
    error_message = "concurrency must be a whole number between 1 and 1000."
  }
}

variable "memory" {
  description = "Memory limit of an instance (Cloud Run `resources.limits.memory`, e.g. `512Mi`)."
  type        = string
  default     = "512Mi"

  validation {
    condition     = can(regex("^[1-9][0-9]*(Mi|Gi)$", var.memory))
    error_message = "memory must be a quantity in Mi or Gi, such as \"512Mi\" or \"1Gi\"."
  }
}

variable "request_timeout_seconds" {
  description = "How long one request (one Pub/Sub push: an audit-log entry or a sweep) may run. A push is acknowledged by the response, so the subscription's ack deadline is at least this (`ack_deadline_seconds`)."
  type        = number
  default     = 300

  validation {
    condition     = var.request_timeout_seconds >= 10 && var.request_timeout_seconds <= 600 && floor(var.request_timeout_seconds) == var.request_timeout_seconds
    error_message = "request_timeout_seconds must be a whole number between 10 and 600 (the longest ack deadline Pub/Sub allows)."
  }
}

variable "deletion_protection" {
  description = "Refuse `terraform destroy` of the Cloud Run service (the provider's `deletion_protection`). Default false: the uninstall is one destroy, as on the other clouds."
  type        = bool
  default     = false
}

################################################################################
# Policy bucket
################################################################################

variable "policy_prefix" {
  description = "Object prefix of the clusters' policies, ending in `/`: each cluster's layers under `<policy_prefix><infraID>/`, its status report at `<policy_prefix><infraID>/tagwarden-status.json`."
  type        = string
  default     = "clusters/"

  validation {
    condition     = can(regex("^([A-Za-z0-9_.-]+/)+$", var.policy_prefix))
    error_message = "policy_prefix must be one or more path segments of letters, digits, '_', '.' and '-', ending in '/' (e.g. \"clusters/\")."
  }
}

variable "policy_bucket_name" {
  description = "Name of the policy bucket to create. Default: `<name>-policy-<hash of project and name>`."
  type        = string
  default     = null

  validation {
    # Bucket names without dots: 3-63 lowercase letters, digits, '-' and '_', starting and ending
    # with a letter or digit, never starting with "goog" (Cloud Storage, "Bucket naming").
    condition     = var.policy_bucket_name == null ? true : (can(regex("^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$", var.policy_bucket_name)) && !startswith(var.policy_bucket_name, "goog"))
    error_message = "policy_bucket_name must be 3-63 lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, and not start with \"goog\"."
  }
}

variable "policy_bucket_location" {
  description = "Location of the policy bucket (a region, dual-region or multi-region such as `EU`). Default: `region`."
  type        = string
  default     = null
}

variable "policy_bucket_force_destroy" {
  description = "Allow `terraform destroy` to delete the policy bucket with its objects (the policies, every noncurrent version, the status reports). Default false: empty it first."
  type        = bool
  default     = false
}

variable "policy_noncurrent_version_days" {
  description = "Days a replaced policy version is kept (versioning is on) before Cloud Storage removes it."
  type        = number
  default     = 90

  validation {
    condition     = var.policy_noncurrent_version_days >= 1 && floor(var.policy_noncurrent_version_days) == var.policy_noncurrent_version_days
    error_message = "policy_noncurrent_version_days must be a whole number of at least 1."
  }
}

variable "cluster_publishers" {
  description = "Who publishes each cluster's policy: infraID => IAM principals (`serviceAccount:...`, `principal://...` or `principalSet://...` of workload identity federation, `group:`, `user:`). Each may create, read and replace objects under `<policy_prefix><infraID>/` only: an IAM Condition on the object name (`resource.name.startsWith(\"projects/_/buckets/<bucket>/objects/<prefix><infraID>/\")`)."
  type        = map(list(string))
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for id in keys(var.cluster_publishers) : contains(var.infra_ids, id)])
    error_message = "cluster_publishers names a cluster that is not in infra_ids: list it there too."
  }

  validation {
    condition     = alltrue([for m in flatten(values(var.cluster_publishers)) : can(regex("^(serviceAccount|user|group):[^ ]+@[^ ]+$|^principal(Set)?://iam\\.googleapis\\.com/[^ ]+$", m))])
    error_message = "cluster_publishers members must be IAM principals: serviceAccount:, user: or group: with an email address, or a principal:// or principalSet:// workload identity federation identifier."
  }
}

################################################################################
# Events and sweeps
################################################################################

variable "sweep_schedule" {
  description = "Cloud Scheduler cron schedule (unix-cron, five fields) of the full sweep, published to the events topic."
  type        = string
  default     = "0 * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.sweep_schedule))) == 5
    error_message = "sweep_schedule must be a unix-cron expression of five fields, such as \"0 * * * *\"."
  }
}

variable "sweep_time_zone" {
  description = "Time zone of `sweep_schedule` (tz database name)."
  type        = string
  default     = "Etc/UTC"
}

variable "ack_deadline_seconds" {
  description = "The push subscription's acknowledgement deadline: how long Pub/Sub waits for the service's response before it redelivers. Pub/Sub allows 10-600 seconds."
  type        = number
  default     = 300

  validation {
    condition     = var.ack_deadline_seconds >= 10 && var.ack_deadline_seconds <= 600 && floor(var.ack_deadline_seconds) == var.ack_deadline_seconds
    error_message = "ack_deadline_seconds must be a whole number between 10 and 600."
  }

  # A push is acknowledged by the response: a deadline shorter than a request may run would have
  # Pub/Sub deliver the same message again while the first delivery still works on it.
  validation {
    condition     = var.ack_deadline_seconds >= var.request_timeout_seconds
    error_message = "ack_deadline_seconds must be at least request_timeout_seconds."
  }
}

variable "max_delivery_attempts" {
  description = "Deliveries of one message before Pub/Sub moves it to the dead-letter topic (Pub/Sub allows 5-100)."
  type        = number
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100 && floor(var.max_delivery_attempts) == var.max_delivery_attempts
    error_message = "max_delivery_attempts must be a whole number between 5 and 100."
  }
}

variable "retry_minimum_backoff_seconds" {
  description = "The subscription's retry policy: the shortest wait before a failed push is retried (0-600)."
  type        = number
  default     = 10

  validation {
    condition     = var.retry_minimum_backoff_seconds >= 0 && var.retry_minimum_backoff_seconds <= 600
    error_message = "retry_minimum_backoff_seconds must be between 0 and 600."
  }
}

variable "retry_maximum_backoff_seconds" {
  description = "The subscription's retry policy: the longest wait before a failed push is retried (0-600, at least the minimum)."
  type        = number
  default     = 600

  validation {
    condition     = var.retry_maximum_backoff_seconds >= var.retry_minimum_backoff_seconds && var.retry_maximum_backoff_seconds <= 600
    error_message = "retry_maximum_backoff_seconds must be between retry_minimum_backoff_seconds and 600."
  }
}

variable "tag_keys" {
  description = "The Resource Manager tag keys the clusters' policies name, as tagKeys/<id> (gcloud resource-manager tags keys describe <parentID>/<key>). The function is made Tag User on these keys and on no other: it binds their existing values, and unbinds a wrong value of one of them to replace it. Empty: a policy's tags are refused as denied, and labels alone are enforced."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for k in var.tag_keys : can(regex("^tagKeys/[0-9]+$", k))])
    error_message = "tag_keys: each must be a tag key's resource name, tagKeys/<numeric id> (not its namespaced name <parentID>/<key>); find it with gcloud resource-manager tags keys describe <parentID>/<key>."
  }
}

variable "exclude_self_in_sink_filter" {
  description = "Leave the function's own writes out of the audit-log sink (its setLabels and tag bindings would otherwise come back as events: loop safety at the source; the function also knows itself by TAGWARDEN_SELF_PRINCIPAL)."
  type        = bool
  default     = true
}

################################################################################
# Monitoring
################################################################################

variable "alert_emails" {
  description = "Email addresses the alert policies notify (one email notification channel each)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for e in var.alert_emails : can(regex("^[^@ ]+@[^@ ]+\\.[^@ ]+$", e))])
    error_message = "alert_emails must be email addresses."
  }
}

variable "notification_channels" {
  description = "Existing Cloud Monitoring notification channels (`projects/<project>/notificationChannels/<id>`) the alert policies notify, beside `alert_emails`."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[0-9]+$", c))])
    error_message = "notification_channels must be notification channel names: projects/<project>/notificationChannels/<id>."
  }
}

variable "alert_window_seconds" {
  description = "Alignment period of the alert policies: the custom-metric counts are summed over this window."
  type        = number
  default     = 300

  validation {
    condition     = var.alert_window_seconds >= 60 && var.alert_window_seconds <= 86400 && floor(var.alert_window_seconds) == var.alert_window_seconds
    error_message = "alert_window_seconds must be a whole number between 60 and 86400."
  }
}

variable "compliance_lag_threshold_ms" {
  description = "Alert when the 99th percentile of ComplianceLag (milliseconds from the event's own time to the correcting write, or the decision that none was needed) exceeds this."
  type        = number
  default     = 300000

  validation {
    condition     = var.compliance_lag_threshold_ms >= 1000 && var.compliance_lag_threshold_ms <= 86400000
    error_message = "compliance_lag_threshold_ms must be between 1000 (1 s) and 86400000 (1 day)."
  }
}
