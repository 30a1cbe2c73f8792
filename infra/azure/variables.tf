################################################################################
# Identity, naming, placement
################################################################################

variable "infra_id" {
  description = "One cluster: its infrastructure name (OpenShift `status.infrastructureName`, e.g. `mycluster-7xk2p`). Only resources tagged `kubernetes.io_cluster.<infra_id>=owned` are ever written. Set this or `infra_ids`, not both."
  type        = string
  default     = null

  validation {
    # OpenShift: cluster name truncated to 21 characters + '-' + 5 random characters.
    condition     = var.infra_id == null ? true : can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", var.infra_id))
    error_message = "infra_id must be 1-27 characters of lowercase letters, digits and '-', starting and ending with a letter or digit (an OpenShift infraID)."
  }

  # "all" is the InfraID under which a cluster set reports what no single cluster
  # owns (crates/core/src/report/metrics.rs, ALL_CLUSTERS: events received and ignored, policies rejected); a cluster of
  # that name would share, and hide in, that series.
  validation {
    condition     = var.infra_id != "all"
    error_message = "infra_id must not be \"all\": that is the InfraID of a cluster set's deployment-wide metrics."
  }

  validation {
    condition     = (var.infra_id == null) != (var.infra_ids == null)
    error_message = "Set infra_id (one cluster) or infra_ids (a cluster set, one deployment for every cluster of the subscription), exactly one of them."
  }
}

variable "infra_ids" {
  description = "A cluster set: every cluster of the subscription this one deployment enforces. OpenShift infraIDs (up to 27 characters), or a Cluster API (CAPZ) cluster's name (up to 63, a DNS-1123 subdomain, named in `cluster_kinds`). Each cluster publishes its own policy under `<policy_prefix><infraID>/` (default prefix `clusters/`), and the function applies to each resource the policy of the cluster whose ownership tag it carries (`kubernetes.io_cluster.<infraID>=owned`; for a Cluster API cluster `sigs.k8s.io_cluster-api-provider-azure_cluster_<name>` or `kubernetes.io_cluster_<name>`). Each cluster's resource group goes into `enforcement_scopes`. Adding a cluster is one list entry and one apply. Set this or `infra_id`, not both; a single Cluster API cluster is a set of one (`infra_id` names resources, and a CAPZ name may be too long or hold a '.')."
  type        = list(string)
  default     = null

  validation {
    condition = var.infra_ids == null ? true : (
      length(var.infra_ids) > 0 && length(distinct(var.infra_ids)) == length(var.infra_ids) &&
      # Up to 63 characters of a DNS-1123 subdomain here, for Cluster API (CAPZ) names
      # (a Cluster is a Kubernetes object: lowercase letters, digits, '-' and '.', each
      # '.'-separated part starting and ending with a letter or digit). OpenShift's 27 characters
      # without '.' are held by cluster_kinds' validation, which can read both (this one cannot
      # read cluster_kinds: that validation reads infra_ids).
      alltrue([for id in var.infra_ids : length(id) <= 63 && can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", id))])
    )
    error_message = "infra_ids must be a non-empty list of distinct cluster names: OpenShift infraIDs (1-27 lowercase letters, digits and '-', starting and ending with a letter or digit), or, named in cluster_kinds as ClusterAPI, Cluster API cluster names (a DNS-1123 subdomain of up to 63 characters: also '.')."
  }

  # "all" is the InfraID under which a cluster set reports what no single cluster
  # owns (crates/core/src/report/metrics.rs, ALL_CLUSTERS: events received and ignored, policies rejected); a cluster of
  # that name would share, and hide in, that series.
  validation {
    condition     = var.infra_ids == null ? true : !contains(var.infra_ids, "all")
    error_message = "infra_ids must not list \"all\": that is the InfraID of a cluster set's deployment-wide metrics."
  }
}

variable "cluster_kinds" {
  description = "What provisioned each cluster that is not an OpenShift installer cluster, by name in `infra_ids` (as the AWS module's). `ClusterAPI`: a Cluster API (CAPZ) workload cluster, named by its `Cluster`'s name (up to 63 characters, '.' allowed), which owns by `sigs.k8s.io_cluster-api-provider-azure_cluster_<name>=owned` (what CAPZ creates) or `kubernetes.io_cluster_<name>=owned` (what its cloud provider creates). `HyperShift` and `OpenShift` (the default) own by `kubernetes.io_cluster.<infraID>` and take OpenShift's infraIDs. Azure RBAC cannot be conditioned on a resource's tags, so the kind grants nothing different here: the function reads each cluster's kind from its published policy (`clusterKind`, which `tagwarden publish --from-cluster --cluster-set capz` writes) and writes only what that kind's keys mark as owned; this must agree with it."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for k in values(var.cluster_kinds) : contains(["OpenShift", "HyperShift", "ClusterAPI"], k)])
    error_message = "cluster_kinds values must be OpenShift, HyperShift or ClusterAPI."
  }

  # Terraform 1.9+ lets a validation read other variables.
  validation {
    condition     = alltrue([for id in keys(var.cluster_kinds) : contains(coalesce(var.infra_ids, compact([var.infra_id])), id)])
    error_message = "cluster_kinds names a cluster that is neither infra_id nor in infra_ids: list it there too."
  }

  # A name that is not a Cluster API cluster's must be shaped as OpenShift's infraIDs (cluster name
  # cut to 21 characters, '-', 5 random characters).
  validation {
    condition     = alltrue([for id in coalesce(var.infra_ids, []) : lookup(var.cluster_kinds, id, "OpenShift") == "ClusterAPI" || can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", id))])
    error_message = "infra_ids: ${join(", ", [for id in coalesce(var.infra_ids, []) : id if lookup(var.cluster_kinds, id, "OpenShift") != "ClusterAPI" && !can(regex("^[a-z0-9]([a-z0-9-]{0,25}[a-z0-9])?$", id))])} is not an OpenShift infraID (1-27 lowercase letters, digits and '-'). A Cluster API (CAPZ) cluster's name may be up to 63 characters with '.': name its kind in cluster_kinds (\"<name>\" = \"ClusterAPI\")."
  }

  # The ownership tag names the function compares are valid Azure tag names: at most 512 characters
  # and none of < > % & \ ? / (Microsoft Learn, "Use tags to organize your Azure resources",
  # Limitations; the Tags API: "A tag name can have a maximum of 512 characters"). CAPZ's key is 47
  # characters plus the name, at most 110 with a 63-character name:
  # always within the limit, checked here so that a wider name rule could not silently break it.
  validation {
    condition = alltrue([for id, k in var.cluster_kinds : k != "ClusterAPI" || (
      length("sigs.k8s.io_cluster-api-provider-azure_cluster_${id}") <= 512 &&
      !can(regex("[<>%&\\\\?/]", "sigs.k8s.io_cluster-api-provider-azure_cluster_${id}"))
    )])
    error_message = "A Cluster API cluster's ownership tag name (sigs.k8s.io_cluster-api-provider-azure_cluster_<name>) must be a valid Azure tag name: at most 512 characters, none of < > % & \\ ? /."
  }
}

variable "cluster_policy_documents" {
  description = "Cluster set (`infra_ids`) only, optional: initial policy per cluster, infraID => content, written to `<policy_prefix><infraID>/10-cluster.yaml` (the name `tagwarden publish` uses). Usually each cluster publishes its own; a cluster without a policy is not enforced, and its events are counted as ignored."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for d in values(var.cluster_policy_documents) : length(d) > 0])
    error_message = "cluster_policy_documents values must not be empty."
  }
}

variable "name" {
  description = "Name prefix for every resource. Resources are named `<name>-<infra_id>[-suffix]`, or `<name>[-suffix]` for a cluster set (storage accounts: the same without '-', shortened, plus a stable hash)."
  type        = string
  default     = "tagwarden"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}[a-z0-9]$", var.name))
    error_message = "name must be 2-20 characters of lowercase letters, digits and '-', starting with a letter and ending with a letter or digit."
  }
}

variable "location" {
  description = "Azure region of the Function App, storage, monitoring and the storage system topic (e.g. `westeurope`). Must offer the Flex Consumption plan. The ARM (subscription or resource group) system topics are always `global`."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9]{2,30}$", var.location))
    error_message = "location must be an Azure region name in its short form, such as \"westeurope\" or \"eastus2\"."
  }
}

variable "tags" {
  description = "Tags added to every taggable resource this module creates."
  type        = map(string)
  default     = {}

  validation {
    condition     = length(var.tags) <= 40 && alltrue([for k, v in var.tags : length(k) <= 512 && length(v) <= 256])
    error_message = "tags must have at most 40 entries (Azure allows 50 per resource; the module leaves room), keys up to 512 and values up to 256 characters."
  }
}

variable "resource_group_name" {
  description = "Name of the resource group that holds every resource of this module. Created when `create_resource_group` is true (default `<name>-<infra_id>-rg`), otherwise it must exist."
  type        = string
  default     = null

  validation {
    condition     = var.resource_group_name == null ? true : can(regex("^[-A-Za-z0-9_.()]{1,89}[-A-Za-z0-9_()]$", var.resource_group_name))
    error_message = "resource_group_name must be 1-90 characters of letters, digits, '-', '_', '.', '(' and ')', not ending in '.'."
  }
}

variable "create_resource_group" {
  description = "Create the resource group (true) or deploy into the existing group named by `resource_group_name` (false)."
  type        = bool
  default     = true
}

################################################################################
# Function
################################################################################

variable "function_zip" {
  description = "Path to the function package: a .zip with `host.json`, `drift/function.json` (eventGridTrigger), `sweep/function.json` (timerTrigger), `sweep-queue/function.json` (queueTrigger) and the `tagwarden-azure-function` binary (linux x86_64) at its root (the files are in `functions/azure-function/`; `scripts/package-azure-function` builds the zip and its manifest `<zip>.json`, which must be beside it: checked at plan). Published during apply with `az functionapp deployment source config-zip` (One Deploy, which Flex Consumption supports; needs the Azure CLI logged in on the machine running Terraform), republished when the file's hash changes; the ARM event subscriptions are created after the `drift` function exists. null: publish it yourself and set `package_published = true` (see infra/azure/README.md, \"Deploying the package\")."
  type        = string
  default     = null

  validation {
    condition     = var.function_zip == null ? true : endswith(var.function_zip, ".zip")
    error_message = "function_zip must be the path of a .zip file (or null)."
  }
}

variable "instance_memory_in_mb" {
  description = "Flex Consumption instance size in MB. 2048 is the default and the smallest size every region accepts."
  type        = number
  default     = 2048

  validation {
    condition     = contains([512, 2048, 4096], var.instance_memory_in_mb)
    error_message = "instance_memory_in_mb must be 512, 2048 or 4096."
  }
}

variable "maximum_instance_count" {
  description = "Upper bound of Flex Consumption instances: backpressure on the ARM tag API (each subscription has a write budget per hour). Event Grid holds and retries what cannot be delivered."
  type        = number
  default     = 10

  validation {
    condition     = var.maximum_instance_count >= 1 && var.maximum_instance_count <= 1000 && floor(var.maximum_instance_count) == var.maximum_instance_count
    error_message = "maximum_instance_count must be a whole number between 1 and 1000."
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

variable "policy_ttl_seconds" {
  description = "POLICY_TTL: how often (seconds) a warm function re-checks the policy blob(s) for a new version (ETag)."
  type        = number
  default     = 60

  validation {
    condition     = var.policy_ttl_seconds >= 0 && var.policy_ttl_seconds <= 86400 && floor(var.policy_ttl_seconds) == var.policy_ttl_seconds
    error_message = "policy_ttl_seconds must be a whole number between 0 and 86400."
  }
}

variable "concurrency" {
  description = "TAGWARDEN_CONCURRENCY: resources reconciled, and ARM calls in flight, at once in one invocation (1-64). Each subscription's tag writes stay paced at half of ARM's write budget whatever this is; raise it for sweeps of many subscriptions, where each subscription's pacing, not this, is the bound."
  type        = number
  default     = 8

  validation {
    condition     = var.concurrency >= 1 && var.concurrency <= 64 && floor(var.concurrency) == var.concurrency
    error_message = "concurrency must be a whole number from 1 to 64 (TAGWARDEN_CONCURRENCY)."
  }
}

variable "arm_endpoint" {
  description = "TAGWARDEN_ARM_ENDPOINT: the Azure Resource Manager endpoint the function calls (sovereign clouds: e.g. `https://management.usgovcloudapi.net`)."
  type        = string
  default     = "https://management.azure.com"

  validation {
    condition     = can(regex("^https://[a-z0-9.-]+[a-z0-9]$", var.arm_endpoint))
    error_message = "arm_endpoint must be an https:// URL without path or trailing '/', such as https://management.azure.com."
  }
}

variable "sweep_schedule" {
  description = "NCRONTAB expression (six fields, seconds first, UTC unless WEBSITE_TIME_ZONE is set) of the scheduled sweep. `sweep/function.json` reads it as `%TAGWARDEN_SWEEP_SCHEDULE%`. Default: hourly."
  type        = string
  default     = "0 0 * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.sweep_schedule))) == 6 && can(regex("^[0-9*/,A-Za-z -]+$", var.sweep_schedule))
    error_message = "sweep_schedule must be a six-field NCRONTAB expression such as \"0 0 * * * *\" (hourly)."
  }
}

################################################################################
# Policy
################################################################################

variable "policy_blob" {
  description = "Single-document mode: blob name of the policy in the policy container (default `tagwarden/infrastructure.yaml` when `policy_prefix` is not set). The status report is written to `<dir of blob>/tagwarden-status.json`."
  type        = string
  default     = null

  validation {
    condition = var.policy_blob == null ? true : (
      can(regex("^[A-Za-z0-9!_.*'()/-]+$", var.policy_blob)) && length(var.policy_blob) <= 1024 &&
      !startswith(var.policy_blob, "/") && !endswith(var.policy_blob, "/") &&
      !endswith(var.policy_blob, "tagwarden-status.json")
    )
    error_message = "policy_blob must be a blob name of safe characters that does not start or end with '/' and is not the status report name tagwarden-status.json."
  }
}

variable "policy_prefix" {
  description = "Layered mode: blob-name prefix ending in `/`; every blob under it is a policy layer, merged in name order. The status report is written to `<prefix>tagwarden-status.json` (the function skips it as a layer). Mutually exclusive with `policy_blob`."
  type        = string
  default     = null

  validation {
    condition = var.policy_prefix == null ? true : (
      can(regex("^[A-Za-z0-9!_.*'()/-]+/$", var.policy_prefix)) && length(var.policy_prefix) <= 1000 && !startswith(var.policy_prefix, "/")
    )
    error_message = "policy_prefix must be a blob-name prefix of safe characters that ends with '/' and does not start with '/'."
  }
}

variable "policy_document" {
  description = "Optional initial policy content for single-document mode, uploaded to `policy_blob`. Nothing in a policy is secret. Uploading needs the provider's `storage_use_azuread = true` (shared keys are disabled) and a data-plane role for the caller (see infra/azure/README.md, \"Notes\")."
  type        = string
  default     = null

  validation {
    condition     = var.policy_document == null ? true : length(var.policy_document) > 0
    error_message = "policy_document must not be empty (use null for none)."
  }
}

variable "policy_layers" {
  description = "Optional policy layers for layered mode: blob name relative to `policy_prefix` => content, e.g. `{ \"00-defaults.yaml\" = file(...) }`."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.policy_layers) : can(regex("^[A-Za-z0-9!_.*'()-]{1,255}$", k)) && k != "tagwarden-status.json" && k != "10-cluster.yaml"])
    error_message = "policy_layers keys must be plain blob names (no '/') and must not be tagwarden-status.json or 10-cluster.yaml (the layer the cluster's publisher writes and owns)."
  }
}

variable "storage_replication_type" {
  description = "Replication of both storage accounts (LRS, ZRS, GRS, RAGRS, GZRS, RAGZRS). The policy is re-publishable from its source and blob versioning keeps old versions, so ZRS is the default."
  type        = string
  default     = "ZRS"

  validation {
    condition     = contains(["LRS", "ZRS", "GRS", "RAGRS", "GZRS", "RAGZRS"], var.storage_replication_type)
    error_message = "storage_replication_type must be one of LRS, ZRS, GRS, RAGRS, GZRS, RAGZRS."
  }
}

variable "blob_retention_days" {
  description = "Days that deleted blobs, deleted containers and superseded blob versions are kept (soft delete / version retention) in the policy account."
  type        = number
  default     = 30

  validation {
    condition     = var.blob_retention_days >= 1 && var.blob_retention_days <= 365 && floor(var.blob_retention_days) == var.blob_retention_days
    error_message = "blob_retention_days must be a whole number between 1 and 365."
  }
}

# One cluster's publisher must not write another cluster's folder of the set.
variable "cluster_publisher_principal_ids" {
  description = "A cluster set's publishers: infraID => the object id of that cluster's publisher identity (the managed identity ccoctl creates from its CredentialsRequest). Each gets the blob writer role (blob read, write, add; no delete, no container management) on the policy container, with an ABAC condition that limits its writes to `<policy_prefix><infraID>/`. The default for a set; `policy_writer_principal_ids` writes the whole container."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    condition     = alltrue([for id, p in var.cluster_publisher_principal_ids : contains(coalesce(var.infra_ids, []), id) && can(regex("^[0-9a-fA-F-]{36}$", p))])
    error_message = "cluster_publisher_principal_ids needs infra_ids: its keys are infraIDs listed there, its values object ids (GUIDs)."
  }
}

variable "policy_writer_principal_ids" {
  description = "Object ids of principals (a pipeline, an operator group) that may write policy blobs: Storage Blob Data Contributor on the policy container. The Terraform caller needs this too when `policy_document`/`policy_layers` are set. The function itself never gets it unconditioned."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for p in var.policy_writer_principal_ids : can(regex("^[0-9a-fA-F-]{36}$", p))])
    error_message = "policy_writer_principal_ids must be object ids (GUIDs)."
  }
}

################################################################################
# What the function may write
################################################################################

variable "enforcement_scopes" {
  description = "ARM scopes where the function gets the tag writer role and Reader and which its sweep covers: resource group ids (`/subscriptions/<id>/resourceGroups/<name>`), or, deliberately, subscription ids (`/subscriptions/<id>`) or one management group (`/providers/Microsoft.Management/managementGroups/<id>`, spelled so). Subscriptions and resource groups may be outside the deployment's subscription. Required (no guessed `<infra_id>-rg`): each cluster's resource group as the cluster reports it, `oc get infrastructure cluster -o jsonpath='{.status.platformStatus.azure.resourceGroupName}'`, plus `networkResourceGroupName` when the VNet is elsewhere. On ARO the managed resource group's deny assignment lets tag writes through but refuses role assignments there: give the subscription (`/subscriptions/<id>`) as the scope (infra/examples/azure-basic: `enforcement_scope = \"subscription\"`). Each subscription or resource group scope gets its own Event Grid system topic (or uses one from `existing_system_topics`); a management group is no Event Grid source: its subscriptions' events come through `event_source_subscription_ids`."
  type        = list(string)
  nullable    = false

  # No silent whole-subscription default; an empty list would grant nothing and
  # receive nothing, so it is refused too. Or a management group. Its id is
  # 1-90 characters, "ASCII letter, digit, -, _, (, ), ." (azurerm's own check, internal/services/
  # managementgroup/validate/management_group_name.go, quoting the portal), and "Can't end with
  # period" (Microsoft Learn, "Naming rules and restrictions for Azure resources",
  # Microsoft.Management/managementGroups: 1-90, alphanumerics, hyphens, underscores, periods and
  # parentheses). The prefix is the canonical spelling (as Azure returns management group ids), so
  # the role assignment scope and the custom role's assignable scope read back unchanged.
  validation {
    condition = length(var.enforcement_scopes) > 0 && alltrue([for s in var.enforcement_scopes : can(regex(
      "^/subscriptions/[0-9a-fA-F-]{36}(/resourceGroups/[-A-Za-z0-9_.()]{1,90})?$", s
      )) || can(regex(
      "^/providers/Microsoft\\.Management/managementGroups/[-A-Za-z0-9_.()]{0,89}[-A-Za-z0-9_()]$", s
    ))])
    error_message = "enforcement_scopes must be a non-empty list of resource group ids (/subscriptions/<guid>/resourceGroups/<name>: the cluster's, from its Infrastructure object's status.platformStatus.azure.resourceGroupName), subscription ids (/subscriptions/<guid>) or a management group id (/providers/Microsoft.Management/managementGroups/<id>: 1-90 letters, digits, -, _, (, ), ., not ending in a period)."
  }

  # "You can define only one management group in AssignableScopes of a custom role" (Microsoft
  # Learn, "Azure custom roles" and "Azure role definitions", AssignableScopes), and the tag writer
  # role (rbac.tf) must be assignable at the management group it is assigned at.
  validation {
    condition     = length([for s in var.enforcement_scopes : s if startswith(s, "/providers/Microsoft.Management/managementGroups/")]) <= 1
    error_message = "enforcement_scopes may hold at most one management group (a custom role can name only one management group among its assignable scopes): deploy once per management group, or list the group above them."
  }

  # One topic per source: a resource group inside a listed subscription would deliver every event
  # twice (the subscription's topic and the group's).
  validation {
    condition = length([for s in var.enforcement_scopes : s if strcontains(lower(s), "/resourcegroups/") && contains(
      [for sub in var.enforcement_scopes : lower(sub) if startswith(lower(sub), "/subscriptions/") && !strcontains(lower(sub), "/resourcegroups/")],
      lower(join("/", slice(split("/", s), 0, 3)))
    )]) == 0
    error_message = "Resource groups inside a listed subscription scope would deliver every event twice; list the subscription or its resource groups, not both."
  }
}

# The subscriptions whose ARM events reach the function when the scope is a
# management group (a management group is no Event Grid source, main.tf).
variable "event_source_subscription_ids" {
  description = "With a management group in `enforcement_scopes`: the subscriptions (GUIDs) under it whose ARM write events must reach the function. Each gets one `Microsoft.Resources.Subscriptions` system topic (global) in that subscription, or uses the one named in `existing_system_topics` (key `/subscriptions/<guid>`): Event Grid allows one system topic per source. Events from a subscription not listed here are not received; the sweep still covers it through the management group. A topic outside the deployment's subscription lives in the resource group `event_topic_resource_group_name` of its subscription. Adding a subscription is one entry and one apply. (Not the output `event_subscription_ids`: those are the Event Grid event subscriptions.)"
  type        = list(string)
  default     = []
  nullable    = false

  validation {
    condition = alltrue([for g in var.event_source_subscription_ids : can(regex(
      "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", g
    ))]) && length(distinct([for g in var.event_source_subscription_ids : lower(g)])) == length(var.event_source_subscription_ids)
    error_message = "event_source_subscription_ids must be distinct subscription GUIDs (not /subscriptions/<guid>)."
  }

  # Listing subscriptions without a management group scope would deliver events of subscriptions the
  # identity holds no role in; a management group without listed subscriptions would receive no
  # event at all.
  validation {
    condition     = (length(var.event_source_subscription_ids) > 0) == (length([for s in var.enforcement_scopes : s if startswith(s, "/providers/Microsoft.Management/managementGroups/")]) > 0)
    error_message = "event_source_subscription_ids goes with a management group in enforcement_scopes, and a management group needs it (a management group is no Event Grid source: list the subscriptions under it whose events must reach the function)."
  }

  # One topic per source: a listed subscription must not also be a subscription scope (two topics on
  # one source) or hold a resource group scope (every event twice).
  validation {
    condition = length([for s in var.enforcement_scopes : s if startswith(lower(s), "/subscriptions/") && contains(
      [for g in var.event_source_subscription_ids : lower(g)], lower(split("/", s)[2])
    )]) == 0
    error_message = "A subscription in event_source_subscription_ids is also (or holds) a subscription or resource group scope in enforcement_scopes: its events would arrive twice. The management group already covers it: drop that scope."
  }
}

variable "event_topic_resource_group_name" {
  description = "Name of the resource group that holds the module's Event Grid system topics in each subscription other than the deployment's (`event_source_subscription_ids`, or scopes in other subscriptions): \"It's not possible to create a system topic in an Azure subscription that's different from the event source's\". null: the module creates `<name>-events` (in `location`) in each such subscription. Set it to use an existing group of that name in every such subscription (a landing zone that forbids creating groups)."
  type        = string
  default     = null

  validation {
    condition     = var.event_topic_resource_group_name == null ? true : can(regex("^[-A-Za-z0-9_.()]{0,89}[-A-Za-z0-9_()]$", var.event_topic_resource_group_name))
    error_message = "event_topic_resource_group_name must be a resource group name: 1-90 letters, digits, -, _, ., (, ), not ending in a period."
  }
}

################################################################################
# Events and delivery
################################################################################

variable "ignored_operation_prefixes" {
  description = "Event Grid drops ResourceWriteSuccess events whose `data.operationName` starts with one of these (case-insensitive): operations on things that carry no tags or that the handler ignores. Never add `Microsoft.Resources/tags/` — an external tag edit is exactly the drift to revert."
  type        = list(string)
  default = [
    "Microsoft.Resources/deployments/",
    "Microsoft.Authorization/",
    "Microsoft.Insights/diagnosticSettings/",
    "Microsoft.PolicyInsights/",
    "Microsoft.Security/",
  ]

  validation {
    condition = length(var.ignored_operation_prefixes) <= 10 && alltrue([
      for p in var.ignored_operation_prefixes : can(regex("^Microsoft\\.[A-Za-z]+/", p)) && !startswith(lower(p), "microsoft.resources/tags")
    ])
    error_message = "ignored_operation_prefixes: at most 10 prefixes of the form Microsoft.<Provider>/...; Microsoft.Resources/tags/ may not be ignored."
  }
}

variable "existing_system_topics" {
  description = "Event Grid system topics that already exist for an enforcement scope, by scope id: `{ \"/subscriptions/<id>\" = { name = \"...\", resource_group_name = \"...\" } }`. Azure allows one system topic per source (subscription, resource group), so when the portal, Defender or another deployment already made one, the module creates only its event subscription on it. The key is a subscription or resource group scope of `enforcement_scopes` or `/subscriptions/<guid>` of `event_source_subscription_ids`; the topic is in that source's subscription (where Event Grid keeps it), in `resource_group_name` there, and must have a system-assigned identity (dead-lettering; `az eventgrid system-topic update --identity systemassigned`)."
  type = map(object({
    name                = string
    resource_group_name = string
  }))
  default = {}

  validation {
    condition = alltrue([for scope, t in var.existing_system_topics : can(regex(
      "^/subscriptions/[0-9a-fA-F-]{36}(/resourceGroups/[-A-Za-z0-9_.()]{1,90})?$", scope
    )) && can(regex("^[-a-zA-Z0-9]{3,128}$", t.name))])
    error_message = "existing_system_topics keys must be subscription or resource group ids (as in enforcement_scopes) and names 3-128 letters, digits and '-'."
  }

  # Every existing topic is on one of the module's sources (compared without case: the module keys
  # a listed subscription as /subscriptions/<lowercase guid>).
  validation {
    condition = alltrue([for scope in keys(var.existing_system_topics) : contains(concat(
      [for s in var.enforcement_scopes : lower(s)], [for g in var.event_source_subscription_ids : "/subscriptions/${lower(g)}"]
    ), lower(scope))]) && length(distinct([for k in keys(var.existing_system_topics) : lower(k)])) == length(var.existing_system_topics)
    error_message = "Every existing_system_topics key must be a subscription or resource group scope of enforcement_scopes, or /subscriptions/<guid> of a subscription in event_source_subscription_ids, each once (compared without case)."
  }
}

# Azure Resource Notifications, the resource's tags in the event.
variable "resource_notifications" {
  description = "Also subscribe the `drift` function to Azure Resource Notifications (preview): for each subscription the module receives ARM events from (the subscriptions of the subscription and resource group scopes and of `event_source_subscription_ids`), one `Microsoft.ResourceNotifications.Resources` system topic (global) and one event subscription per source for `Microsoft.ResourceNotifications.Resources.CreatedOrUpdated` (a resource group scope filtered by subject to `<resource group id>/`). Those events carry the resource's tags (`data.resourceInfo.tags`), which spares the function a read when they show the resource in line or not owned. `ResourceWriteSuccess` stays subscribed for every type (Resource Notifications does not cover all). The deploying principal needs `Microsoft.ResourceNotifications/systemTopics/subscribeToResources/action` on each such subscription (infra/azure/README.md, \"Resource Notifications (preview)\"). Default false: the topic type is in preview."
  type        = bool
  default     = false
  nullable    = false
}

variable "existing_resource_notifications_topics" {
  description = "With `resource_notifications`: `Microsoft.ResourceNotifications.Resources` system topics that already exist, by subscription: `{ \"/subscriptions/<guid>\" = { name = \"...\", resource_group_name = \"...\" } }`. Event Grid allows one system topic per source, and this topic's source is the whole subscription, so when another deployment (a second tagwarden deployment in the subscription, a vendor integration) already made one, the module creates only its event subscriptions on it. The key is the subscription of a subscription or resource group scope of `enforcement_scopes` or of an `event_source_subscription_ids` entry (compared without case); the topic is in that subscription, in `resource_group_name` there, and must have a system-assigned identity (dead-lettering)."
  type = map(object({
    name                = string
    resource_group_name = string
  }))
  default  = {}
  nullable = false

  validation {
    condition = alltrue([for sub, t in var.existing_resource_notifications_topics : can(regex(
      "^/subscriptions/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$", sub
    )) && can(regex("^[-a-zA-Z0-9]{3,128}$", t.name)) && can(regex("^[-A-Za-z0-9_.()]{0,89}[-A-Za-z0-9_()]$", t.resource_group_name))])
    error_message = "existing_resource_notifications_topics keys must be subscription ids (/subscriptions/<guid>: a Resource Notifications topic's source is a subscription), names 3-128 letters, digits and '-', resource group names 1-90 letters, digits, -, _, ., (, ), not ending in a period."
  }

  # Every key is the subscription of one of the module's sources (the subscription of a subscription
  # or resource group scope, or a listed subscription), each once, compared without case.
  validation {
    condition = alltrue([for sub in keys(var.existing_resource_notifications_topics) : contains(concat(
      [for s in var.enforcement_scopes : lower(split("/", s)[2]) if startswith(lower(s), "/subscriptions/")],
      [for g in var.event_source_subscription_ids : lower(g)]
    ), lower(split("/", sub)[2]))]) && length(distinct([for k in keys(var.existing_resource_notifications_topics) : lower(k)])) == length(var.existing_resource_notifications_topics)
    error_message = "Every existing_resource_notifications_topics key must be /subscriptions/<guid> of a subscription the module receives events from (the subscription of a subscription or resource group scope in enforcement_scopes, or an event_source_subscription_ids entry), each once (compared without case)."
  }

  validation {
    condition     = var.resource_notifications || length(var.existing_resource_notifications_topics) == 0
    error_message = "existing_resource_notifications_topics needs resource_notifications = true (without it no Resource Notifications event subscription is made)."
  }
}

variable "sweep_queue_name" {
  description = "Storage queue (in the Function App's runtime storage account) that receives the policy container's BlobCreated events; the `sweep-queue` function (queueTrigger, `%TAGWARDEN_SWEEP_QUEUE%`, connection AzureWebJobsStorage) sweeps from it, outside the Event Grid delivery. Poison messages go to `<name>-poison`."
  type        = string
  default     = "tagwarden-sweep"

  # Queue names: 3-63 lowercase letters, digits and single hyphens, starting and ending with a letter
  # or digit (Azure Storage, "Naming queues and metadata"); "-poison" must still fit.
  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9]|-[a-z0-9]){2,55}$", var.sweep_queue_name)) && length(var.sweep_queue_name) <= 56
    error_message = "sweep_queue_name must be 3-56 lowercase letters, digits and single hyphens, starting and ending with a letter or digit (the host adds -poison, and queue names end at 63)."
  }
}

variable "package_published" {
  description = "Set to true when the function package was published outside Terraform (CI with `az functionapp deployment source config-zip`, One Deploy). The ARM event subscriptions deliver to the `drift` function and Azure refuses them until it exists, so without `function_zip` they are only created once this is true."
  type        = bool
  default     = false
}

variable "role_assignment_propagation_wait" {
  description = "How long the first apply waits after creating role assignments before using them (policy upload with `policy_writer_principal_ids`, Event Grid dead-lettering and queue delivery). Azure Storage: \"it can take up to 10 minutes for changes to take effect\". Set \"0s\" when every role was assigned before this apply."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^[0-9]+(s|m)$", var.role_assignment_propagation_wait))
    error_message = "role_assignment_propagation_wait must be a duration in seconds or minutes, such as \"600s\" or \"10m\"."
  }
}

variable "exclude_self_in_event_filter" {
  description = "Add advanced filters that drop events caused by the function's own identity (`data.authorization.evidence.principalId` and `data.claims.appid`). The handler checks the same ids and reconcile is idempotent, so this only saves invocations."
  type        = bool
  default     = true
}

variable "max_delivery_attempts" {
  description = "Event Grid delivery attempts per event before it is dead-lettered (Event Grid's backoff: 10 s, 30 s, 1 min, 5 min, 10 min, 30 min, 1 h, ...)."
  type        = number
  default     = 10

  validation {
    condition     = var.max_delivery_attempts >= 1 && var.max_delivery_attempts <= 30 && floor(var.max_delivery_attempts) == var.max_delivery_attempts
    error_message = "max_delivery_attempts must be a whole number between 1 and 30."
  }
}

variable "event_time_to_live_minutes" {
  description = "Minutes Event Grid keeps retrying an event before it is dead-lettered."
  type        = number
  default     = 1440

  validation {
    condition     = var.event_time_to_live_minutes >= 1 && var.event_time_to_live_minutes <= 1440 && floor(var.event_time_to_live_minutes) == var.event_time_to_live_minutes
    error_message = "event_time_to_live_minutes must be a whole number between 1 and 1440."
  }
}

################################################################################
# Monitoring
################################################################################

variable "log_retention_days" {
  description = "Retention of the Log Analytics workspace behind Application Insights."
  type        = number
  default     = 30

  validation {
    condition     = var.log_retention_days >= 30 && var.log_retention_days <= 730 && floor(var.log_retention_days) == var.log_retention_days
    error_message = "log_retention_days must be a whole number between 30 and 730."
  }
}

variable "alert_emails" {
  description = "Email addresses that receive the metric alerts. With neither emails nor `alert_webhook_url` no action group is created and the alerts only show in the portal."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for e in var.alert_emails : can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", e))])
    error_message = "alert_emails must be email addresses."
  }
}

variable "alert_webhook_url" {
  description = "Optional https webhook that receives the metric alerts (common alert schema)."
  type        = string
  default     = null
  sensitive   = true

  validation {
    condition     = var.alert_webhook_url == null ? true : startswith(var.alert_webhook_url, "https://")
    error_message = "alert_webhook_url must be an https:// URL."
  }
}

variable "alert_window" {
  description = "Aggregation window of the metric alerts (ISO 8601 duration)."
  type        = string
  default     = "PT15M"

  validation {
    condition     = contains(["PT5M", "PT15M", "PT30M", "PT1H"], var.alert_window)
    error_message = "alert_window must be PT5M, PT15M, PT30M or PT1H."
  }
}

variable "application_insights_local_auth_enabled" {
  description = "Allow instrumentation-key ingestion into Application Insights. false (default): Entra ID only — the host authenticates with the code identity (APPLICATIONINSIGHTS_AUTHENTICATION_STRING), and a handler that sends telemetry itself must use a token for `https://monitor.azure.com/`."
  type        = bool
  default     = false
}

variable "compliance_lag_threshold_ms" {
  description = "Alert when the maximum ComplianceLag (milliseconds from a change's event time to tagwarden's correcting write, or to its finding that none was needed) in the alert window exceeds this. Azure custom metrics have no percentiles, so this is a maximum, not the AWS module's p99."
  type        = number
  default     = 300000

  validation {
    condition     = var.compliance_lag_threshold_ms >= 1000 && var.compliance_lag_threshold_ms <= 86400000
    error_message = "compliance_lag_threshold_ms must be between 1000 (1 s) and 86400000 (1 day)."
  }
}

variable "yield_to" {
  description = "The controllers tagwarden yields a key to when they keep changing it (a contest: held back an hour, doubling to a day, then corrected again), as the writers Azure's events name (a principal's object id or an application's client id, `*` and `?` allowed). Any other writer's change is drift, corrected every time. null: the code's defaults; `[]`: never yield."
  type        = list(string)
  default     = null
}

variable "mode" {
  description = "TAGWARDEN_MODE: `audit` evaluates everything exactly as `enforce` would (events, sweeps, management-group parts) and writes no tag anywhere: the status report and the metrics show what would be written. `enforce` writes, except clusters whose policy says `enforce: false` and keys in a policy's `auditKeys`. A new deployment starts in audit."
  type        = string
  default     = "audit"

  validation {
    condition     = contains(["audit", "enforce"], var.mode)
    error_message = "mode must be \"audit\" (report what would be written, write nothing) or \"enforce\"."
  }
}
