//! A policy location the CLI publishes to or reads the status of: S3 or SSM (feature `aws`), a
//! blob URL (feature `azure`), or Cloud Storage, `gs://` (feature `gcp`).

use tagwarden::publish::{PublishError, PublishOutcome};
#[cfg(feature = "kube")]
use tagwarden::status::StatusReport;

/// A SAS for a blob location given apart from its URL, from a Secret.
#[cfg(feature = "azure")]
pub const BLOB_SAS_ENV: &str = "TAGWARDEN_BLOB_SAS";

pub enum Target {
    #[cfg(feature = "aws")]
    Aws(tagwarden::aws::policy_store::PolicyStore),
    #[cfg(feature = "azure")]
    Blob(tagwarden::azure::blob_store::BlobPolicyStore),
    #[cfg(feature = "gcp")]
    Gcs(tagwarden::policy_store::PolicyStore<tagwarden::gcp::GcsSource>),
}

impl Target {
    /// Connect to `location`: `s3://…` and `ssm:…` with the AWS SDK's usual configuration
    /// (`AWS_REGION`, `AWS_ENDPOINT_URL`, profiles, IRSA / Pod Identity), a blob URL with its SAS,
    /// `gs://…` with Application Default Credentials (`STORAGE_EMULATOR_HOST` honoured).
    ///
    /// With `preflight`, a missing AWS region or credentials is an error now, in one line; a
    /// long-running publisher passes `false` and reports it as a condition while it retries (the
    /// credentials Secret may be created after the pod).
    pub async fn connect(location: &str, region: Option<&str>, preflight: bool) -> anyhow::Result<Target> {
        let _ = (region, preflight);
        if location.starts_with("s3://") || location.starts_with("ssm:") {
            #[cfg(feature = "aws")]
            {
                let parsed = location.parse().map_err(anyhow::Error::msg)?;
                let mut loader = tagwarden::aws::config_loader()?;
                if let Some(r) = region {
                    loader = loader.region(aws_config::Region::new(r.to_string()));
                }
                let config = loader.load().await;
                if preflight {
                    tagwarden::aws::preflight(&config).await?;
                }
                let clients = tagwarden::aws::Clients::new(&config);
                let hub_folder = organization_contests(&parsed);
                let mut store = tagwarden::aws::policy_store::policy_store(&clients, parsed, std::time::Duration::ZERO);
                if let Some(folder) = hub_folder {
                    store.source.contests_folder = folder;
                }
                return Ok(Target::Aws(store));
            }
            #[cfg(not(feature = "aws"))]
            anyhow::bail!("{location}: this build has no AWS support; build tagwarden with --features aws");
        }
        if location.starts_with("https://") || location.starts_with("http://") {
            #[cfg(feature = "azure")]
            {
                use tagwarden::azure::blob_store::{blob_policy_store, BlobLocation};
                use tagwarden::azure::identity::{ManagedIdentity, WORKLOAD_IDENTITY_ENV};
                let mut parsed: BlobLocation = location.parse().map_err(anyhow::Error::msg)?;
                let http = anyhow::Context::context(
                    tagwarden::azure::http_client(std::time::Duration::from_secs(30)),
                    "HTTP client",
                )?;
                // A SAS from a Secret (never a ConfigMap: anyone with `view` reads those).
                if let Some(sas) = std::env::var(BLOB_SAS_ENV).ok().filter(|s| !s.is_empty() && !parsed.has_sas()) {
                    parsed.set_sas(&sas);
                }
                let identity = if parsed.has_sas() {
                    None
                } else {
                    match ManagedIdentity::workload_from_env(http.clone(), Default::default()) {
                        Some(identity) => Some(std::sync::Arc::new(identity?)),
                        None => anyhow::bail!(
                            "{parsed}: no credential for the blob: set Workload Identity ({}), or a SAS in {BLOB_SAS_ENV} (from a Secret), or append a SAS to the URL (az storage blob generate-sas --as-user …)",
                            WORKLOAD_IDENTITY_ENV.join(", ")
                        ),
                    }
                };
                let store = blob_policy_store(parsed, std::time::Duration::ZERO, http, identity, Default::default());
                return Ok(Target::Blob(store));
            }
            #[cfg(not(feature = "azure"))]
            anyhow::bail!("{location}: this build has no Azure support; build tagwarden with --features azure");
        }
        if location.starts_with("gs://") {
            #[cfg(feature = "gcp")]
            {
                let parsed = tagwarden::gcp::GcsLocation::parse(location).map_err(|e| {
                    anyhow::anyhow!(
                        "{:?}: {}; expected gs://BUCKET/OBJECT.yaml, gs://BUCKET/PREFIX/ (layers) or gs://BUCKET/PREFIX*/ (a cluster set)",
                        e.input,
                        e.why
                    )
                })?;
                let clients = crate::sweep::gcp::clients().await?;
                let source = tagwarden::gcp::GcsSource::new(
                    parsed,
                    crate::sweep::gcp::storage_endpoint(),
                    clients,
                    Default::default(),
                );
                return Ok(Target::Gcs(tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO)));
            }
            #[cfg(not(feature = "gcp"))]
            anyhow::bail!("{location}: this build has no Google Cloud support; build tagwarden with --features gcp");
        }
        anyhow::bail!(
            "{location:?} is not a policy location: expected s3://BUCKET/KEY, s3://BUCKET/PREFIX/, ssm:/PARAMETER, https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB?SAS or gs://BUCKET/OBJECT.yaml"
        )
    }

    /// Publish `text`; into a cluster set, into the folder of `cluster` (which it must name).
    pub async fn publish(
        &self,
        text: &str,
        cluster: Option<&str>,
        dry_run: bool,
    ) -> Result<PublishOutcome, PublishError> {
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(store) => store.publish(text, cluster, dry_run).await,
            #[cfg(feature = "azure")]
            Target::Blob(store) => store.publish(text, cluster, dry_run).await,
            #[cfg(feature = "gcp")]
            Target::Gcs(store) => store.publish(text, cluster, dry_run).await,
        }
    }

    /// The status reports the function wrote beside the policy: one, or one per cluster of a
    /// set (`(infraID, report)`, the report `None` where none was written yet). The publisher's
    /// `--watch` mirrors them (`tagwarden status` reads them unparsed: [`Target::raw_status`]).
    #[cfg(feature = "kube")]
    pub async fn status(&self) -> anyhow::Result<Vec<(Option<String>, Option<StatusReport>)>> {
        #[allow(unreachable_code)]
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(store) => reports(store).await,
            #[cfg(feature = "azure")]
            Target::Blob(store) => reports(store).await,
            #[cfg(feature = "gcp")]
            Target::Gcs(store) => reports(store).await,
        }
    }

    /// The status reports' text as the store holds it (every field, whatever this build knows
    /// of them): one, or one per cluster of a set.
    pub async fn raw_status(&self) -> anyhow::Result<Vec<(Option<String>, Option<String>)>> {
        #[allow(unreachable_code)]
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(store) => raw_reports(store).await,
            #[cfg(feature = "azure")]
            Target::Blob(store) => raw_reports(store).await,
            #[cfg(feature = "gcp")]
            Target::Gcs(store) => raw_reports(store).await,
        }
    }

    /// Lift the contests on `resource` (only `key`'s, if given) in every cluster's contest state
    /// there, recording `by` (the operator's principal): how many, by cluster.
    pub async fn lift(
        &self,
        resource: &str,
        key: Option<&str>,
        by: &str,
    ) -> anyhow::Result<Vec<(Option<String>, usize)>> {
        #[allow(unreachable_code)]
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(store) => lift(store, resource, key, by).await,
            #[cfg(feature = "azure")]
            Target::Blob(store) => lift(store, resource, key, by).await,
            #[cfg(feature = "gcp")]
            Target::Gcs(store) => lift(store, resource, key, by).await,
        }
    }

    /// Who the CLI acts as, for the audit of a lift: on AWS the caller's ARN (STS
    /// `GetCallerIdentity`); on Azure the workload identity's client id; on Google Cloud the key
    /// file's service account, else Application Default Credentials unnamed; else `unknown`, with
    /// a warning.
    pub async fn caller(&self, region: Option<&str>) -> String {
        let _ = region;
        #[allow(unreachable_code)]
        let found: anyhow::Result<String> = match self {
            #[cfg(feature = "aws")]
            Target::Aws(_) => {
                let mut loader = match tagwarden::aws::config_loader() {
                    Ok(l) => l,
                    Err(e) => return unknown(&e.to_string()),
                };
                if let Some(r) = region {
                    loader = loader.region(aws_config::Region::new(r.to_string()));
                }
                let config = loader.load().await;
                let sts = tagwarden::aws::sdk::sts::Client::new(&config);
                match sts.get_caller_identity().send().await {
                    Ok(out) => out.arn().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("STS named no ARN")),
                    Err(e) => Err(anyhow::anyhow!(
                        "sts:GetCallerIdentity: {}",
                        tagwarden::aws::sdk::sts::error::DisplayErrorContext(e)
                    )),
                }
            }
            #[cfg(feature = "azure")]
            Target::Blob(_) => std::env::var("AZURE_CLIENT_ID")
                .ok()
                .filter(|id| !id.is_empty())
                .map(|id| format!("azure client {id}"))
                .ok_or_else(|| anyhow::anyhow!("a SAS names no principal (no AZURE_CLIENT_ID: no workload identity)")),
            #[cfg(feature = "gcp")]
            Target::Gcs(_) => Ok(crate::sweep::gcp::principal()),
        };
        found.unwrap_or_else(|why| unknown(&why.to_string()))
    }
}

/// What the publisher's `--watch` loop reports about where it publishes.
#[cfg(feature = "kube")]
impl Target {
    /// Where the policy goes, as messages show it (no credential).
    pub fn location(&self) -> String {
        use tagwarden::policy_store::PolicySource as _;
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(store) => store.source.location(),
            #[cfg(feature = "azure")]
            Target::Blob(store) => store.source.location(),
            #[cfg(feature = "gcp")]
            Target::Gcs(store) => store.source.location(),
        }
    }

    /// The endpoint calls go to, to name the proxy they go through.
    pub fn endpoint(&self) -> String {
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(store) => store.source.endpoint(),
            #[cfg(feature = "azure")]
            Target::Blob(store) => store.source.location.display_name(""),
            #[cfg(feature = "gcp")]
            Target::Gcs(_) => crate::sweep::gcp::storage_endpoint(),
        }
    }

    /// A credential that stops working at a known time: what it is, and when (ms since the epoch).
    pub fn credential_expiry(&self) -> Option<(String, u64)> {
        match self {
            #[cfg(feature = "aws")]
            Target::Aws(_) => None,
            #[cfg(feature = "azure")]
            Target::Blob(store) => {
                let at = store.source.location.sas_expiry_ms()?;
                let from = if std::env::var_os(BLOB_SAS_ENV).is_some() { BLOB_SAS_ENV } else { "the blob URL" };
                Some((format!("the SAS in {from}"), at))
            }
            #[cfg(feature = "gcp")]
            Target::Gcs(_) => None,
        }
    }
}

#[cfg(feature = "kube")]
async fn reports<S: tagwarden::policy_store::PolicySource>(
    store: &tagwarden::policy_store::PolicyStore<S>,
) -> anyhow::Result<Vec<(Option<String>, Option<StatusReport>)>> {
    if !store.is_set() {
        return Ok(vec![(None, tagwarden::status_store::read(store, None).await?)]);
    }
    let mut out = Vec::new();
    for cluster in store.clusters().await? {
        let report = tagwarden::status_store::read(store, Some(&cluster)).await?;
        out.push((Some(cluster), report));
    }
    Ok(out)
}

/// [`reports`]' text, unparsed: one, or one per cluster of a set.
pub async fn raw_reports<S: tagwarden::policy_store::PolicySource>(
    store: &tagwarden::policy_store::PolicyStore<S>,
) -> anyhow::Result<Vec<(Option<String>, Option<String>)>> {
    let read = |cluster: Option<String>| async move {
        let text = store
            .source
            .get_status(cluster.as_deref())
            .await
            .map_err(|e| anyhow::anyhow!("reading the status report beside {}: {e}", store.location()))?;
        anyhow::Ok((cluster, text))
    };
    if !store.is_set() {
        return Ok(vec![read(None).await?]);
    }
    let clusters = store.clusters().await.map_err(|e| anyhow::anyhow!("listing {}: {e}", store.location()))?;
    let mut out = Vec::new();
    for cluster in clusters {
        out.push(read(Some(cluster)).await?);
    }
    Ok(out)
}

async fn lift<S: tagwarden::policy_store::PolicySource>(
    store: &tagwarden::policy_store::PolicyStore<S>,
    resource: &str,
    key: Option<&str>,
    by: &str,
) -> anyhow::Result<Vec<(Option<String>, usize)>> {
    use anyhow::Context as _;
    // Each cluster's infraID names its contest state: a set's folders, or the single policy's.
    let clusters: Vec<(Option<String>, String)> = if store.is_set() {
        store.clusters().await?.into_iter().map(|c| (Some(c.clone()), c)).collect()
    } else {
        let (loaded, _) = store.policies(true).await;
        let loaded = loaded
            .map_err(|e| anyhow::anyhow!("{e}"))
            .context("reading the policy, whose infraID names its contest state")?;
        loaded.iter().map(|p| (None, p.infra_id.clone())).collect()
    };
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let mut out = Vec::new();
    for (cluster, infra_id) in clusters {
        let lifted =
            tagwarden::status_store::lift_contests(store, cluster.as_deref(), &infra_id, resource, key, by, now)
                .await
                .map_err(anyhow::Error::msg)
                .with_context(|| {
                    format!(
                        "lifting the contests on {resource} in cluster {infra_id}'s contest state ({})",
                        store.location()
                    )
                })?;
        out.push((cluster, lifted));
    }
    Ok(out)
}

/// `unknown`, saying why on stderr: the lift is still recorded.
fn unknown(why: &str) -> String {
    eprintln!("warning: the lift is recorded as by \"unknown\": the caller's identity could not be read ({why})");
    "unknown".to_string()
}

/// A member account's cluster set in an Organization hub's bucket (`s3://BUCKET/PREFIX/<account>/*/`,
/// the account a 12-digit id): its contests are kept in the hub's own folder,
/// `PREFIX/_organization/contests/<account>/`, as the hub's function keeps them.
#[cfg(feature = "aws")]
fn organization_contests(location: &tagwarden::aws::policy_store::PolicyLocation) -> Option<String> {
    let tagwarden::aws::policy_store::PolicyLocation::S3Set { prefix, .. } = location else { return None };
    let trimmed = prefix.strip_suffix('/')?;
    let (org, account) = trimmed.rsplit_once('/').map_or(("", trimmed), |(o, a)| (o, a));
    let org = if org.is_empty() { String::new() } else { format!("{org}/") };
    (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()))
        .then(|| tagwarden::aws::organization::contests_folder(&org, account))
}

#[cfg(all(test, feature = "aws"))]
mod tests {
    #[test]
    fn a_member_accounts_set_keeps_its_contests_in_the_hubs_folder() {
        let folder = |s: &str| super::organization_contests(&s.parse().expect("location"));
        assert_eq!(
            folder("s3://b/accounts/111122223333/*/").as_deref(),
            Some("accounts/_organization/contests/111122223333/")
        );
        assert_eq!(folder("s3://b/111122223333/*/").as_deref(), Some("_organization/contests/111122223333/"));
        assert_eq!(folder("s3://b/clusters/*/"), None);
        assert_eq!(folder("s3://b/p.yaml"), None);
    }
}
