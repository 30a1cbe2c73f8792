//! `tagwarden sweep` on Google Cloud: a `gs://` policy (or one on this machine, previewed) and the
//! Cloud Asset Inventory scopes to search, with the person's Application Default Credentials.
//! The adapter and the policy source are the Cloud Run function's own (`tagwarden-gcp`), so a
//! preview plans exactly what the function would write.

use super::engine::Swept;
use super::Args;
#[cfg(feature = "gcp")]
use super::{engine::run_engine, listed};

/// Every Google API at one base URL, and no credentials: a test server (the function reads the
/// same variable).
#[cfg(feature = "gcp")]
pub const ENDPOINT_ENV: &str = "TAGWARDEN_GCP_ENDPOINT";
/// Cloud Storage's emulator (`host:port` or a URL), as Google's client libraries honour it.
#[cfg(feature = "gcp")]
pub const STORAGE_EMULATOR_ENV: &str = "STORAGE_EMULATOR_HOST";

/// A `SearchAllResourcesRequest.scope`: `projects/{PROJECT_ID}`, `projects/{PROJECT_NUMBER}`,
/// `folders/{FOLDER_NUMBER}` or `organizations/{ORGANIZATION_NUMBER}` (Cloud Asset Inventory API
/// reference, `v1.searchAllResources`, "scope").
pub fn is_gcp_scope(s: &str) -> bool {
    match s.trim_end_matches('/').split_once('/') {
        Some(("projects" | "folders" | "organizations", id)) => {
            !id.is_empty() && !id.contains('/') && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        }
        _ => false,
    }
}

/// The clients the sweep, `status` and `publish` use: Google's endpoints with Application Default
/// Credentials, or every API at `TAGWARDEN_GCP_ENDPOINT` without any (a test server).
#[cfg(feature = "gcp")]
pub async fn clients() -> anyhow::Result<std::sync::Arc<tagwarden::gcp::Clients>> {
    use tagwarden::gcp::{Clients, Endpoints};
    let (endpoints, anonymous) = match std::env::var(ENDPOINT_ENV).ok().filter(|v| !v.trim().is_empty()) {
        Some(base) => (Endpoints::all_at(base.trim()), true),
        None => (Endpoints::default(), false),
    };
    let clients = Clients::new(endpoints, anonymous).await?;
    Ok(std::sync::Arc::new(clients))
}

/// The Cloud Storage JSON API endpoint the policy is read from: `STORAGE_EMULATOR_HOST`, else Google's.
#[cfg(feature = "gcp")]
pub fn storage_endpoint() -> String {
    tagwarden::gcp::gcs::storage_endpoint(std::env::var(STORAGE_EMULATOR_ENV).ok().as_deref())
}

/// Whose credentials write: the service account of a key file in GOOGLE_APPLICATION_CREDENTIALS,
/// else Application Default Credentials as gcloud set them (their user is not in the file).
#[cfg(feature = "gcp")]
pub fn principal() -> String {
    if std::env::var_os(ENDPOINT_ENV).is_some() {
        return format!("no credentials ({ENDPOINT_ENV} points every Google API at a test server)");
    }
    let email = std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS")
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|v| v.get("client_email").and_then(|e| e.as_str()).map(str::to_owned));
    match email {
        Some(email) => format!("{email} (GOOGLE_APPLICATION_CREDENTIALS)"),
        None => "your Application Default Credentials (gcloud auth application-default login; gcloud auth list names the account)".to_string(),
    }
}

#[cfg(feature = "gcp")]
pub(super) async fn sweep(args: &Args) -> anyhow::Result<Swept> {
    use tagwarden::calls::CallCounter;
    use tagwarden::gcp::{GcpTagger, GcsLocation, GcsSource};

    let local = crate::local::is_local(&args.policy);
    let location: Option<GcsLocation> = if local {
        None
    } else {
        // The parser names the function's variable; here it is --policy.
        let parsed = GcsLocation::parse(&args.policy)
            .map_err(|e| anyhow::anyhow!("--policy {:?}: {}; expected gs://BUCKET/OBJECT.yaml, gs://BUCKET/PREFIX/ (layers) or gs://BUCKET/PREFIX*/ (a cluster set)", e.input, e.why))?;
        Some(parsed)
    };
    if args.scope.is_empty() {
        anyhow::bail!(
            "a Google Cloud sweep needs --scope: the project (projects/PROJECT_ID), folder (folders/NUMBER) or organization (organizations/NUMBER) whose Cloud Asset Inventory is searched for owned resources, as the function's TAGWARDEN_SWEEP_SCOPES; repeat it for several"
        );
    }
    if let Some(bad) = args.scope.iter().find(|s| !is_gcp_scope(s)) {
        anyhow::bail!(
            "--scope {bad:?} is not a Cloud Asset Inventory scope: expected projects/PROJECT_ID, projects/PROJECT_NUMBER, folders/FOLDER_NUMBER or organizations/ORG_NUMBER"
        );
    }
    let scopes: Vec<String> = args.scope.iter().map(|s| s.trim_end_matches('/').to_string()).collect();
    let clients = clients().await?;
    let calls = CallCounter::default();
    let adapter = GcpTagger::new(clients.clone(), scopes, calls.clone());
    let who = principal();
    let caller = async move { anyhow::Ok(who) };
    let counted = calls.clone();
    let api_calls = move || counted.snapshot();
    match location {
        None => {
            let source = crate::local::LocalSource::open(&args.policy, tagwarden::cloud::Cloud::Gcp)?;
            let set = source.is_set();
            let clusters = listed(args, set, &args.policy)?;
            let store =
                tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO).with_clusters(clusters);
            run_engine(args, crate::local::Local(adapter), store, caller, api_calls).await
        }
        Some(location) => {
            let clusters = listed(args, location.is_set, &location)?;
            let source = GcsSource::new(location.clone(), storage_endpoint(), clients, calls.clone());
            let store =
                tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO).with_clusters(clusters);
            let mut swept = run_engine(args, adapter, store, caller, api_calls).await?;
            swept.policy = location.to_string();
            Ok(swept)
        }
    }
}

#[cfg(not(feature = "gcp"))]
pub(super) async fn sweep(args: &Args) -> anyhow::Result<Swept> {
    anyhow::bail!("{}: this build has no Google Cloud support; build tagwarden with --features gcp", args.policy)
}

#[cfg(test)]
mod tests {
    #[test]
    fn scopes_are_cloud_asset_inventorys() {
        for ok in ["projects/p-1", "projects/101", "folders/7", "organizations/9", "folders/7/"] {
            assert!(super::is_gcp_scope(ok), "{ok}");
        }
        for bad in ["/subscriptions/x", "projects/", "projects/a/b", "billingAccounts/1", "p-1"] {
            assert!(!super::is_gcp_scope(bad), "{bad}");
        }
    }
}
