# tagwarden for one OpenShift cluster in one Google Cloud project: the cluster's project is the
# scope (the audit-log sink, the function's custom role and the sweep stay inside it), and the
# deployment lives in the same project. The policy is the cluster's own, published by it under
# clusters/<infraID>/ in the policy bucket.

provider "google" {
  project = var.project_id
  region  = var.region
}

module "tagwarden" {
  source = "../../gcp"

  # Audit first (the default): everything is evaluated and reported, no label or tag binding is
  # written, until mode = "enforce".
  mode = var.mode

  project_id = var.project_id
  region     = var.region
  scope      = { type = "project", id = var.project_id }
  infra_ids  = [var.infra_id]
  image      = var.image

  # The cluster's publishers write its own folder of the policy bucket, and nothing else (none
  # listed: no grant).
  cluster_publishers = { (var.infra_id) = var.publishers }

  # The cluster's Resource Manager tag keys (tagKeys/<id>): the function is Tag User on these only.
  tag_keys = var.tag_keys

  sweep_schedule = "0 * * * *" # hourly
  alert_emails   = var.alert_emails
  labels         = var.labels
}
