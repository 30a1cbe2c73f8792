//! The status report (`tagwarden_core::status`) beside a policy store's documents: made from what
//! a sweep or a load found, written and read through the store's `PolicySource`.

use crate::policy_store::{PolicySource, PolicyStore, Rejection};
use std::sync::OnceLock;
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::report::Record;

use tagwarden_core::status::StatusReport;

static WRITTEN_BY: OnceLock<String> = OnceLock::new();

/// Name the binary that writes this process's reports (`<package> <version> (commit <sha>)`),
/// once, at start-up: each report says which build wrote it.
pub fn set_written_by(build: String) {
    let _ = WRITTEN_BY.set(build);
}

#[derive(Debug, thiserror::Error)]
pub enum ReadStatusError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Source(E),
    #[error("the status report beside {location} is not one tagwarden wrote ({message}); the next sweep replaces it")]
    NotAReport { location: String, message: String },
}

/// Write `report` beside the policy (of cluster `cluster` in a set). In a set, only for a
/// cluster the deployment enforces ([`PolicyStore::enforces`]): a folder a publisher named
/// (an unlisted cluster, a name with `/` or `..`) never gets one, so no publisher chooses
/// where the function writes.
pub async fn write<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    report: &StatusReport,
) -> Result<(), S::Error> {
    if let Some(c) = cluster.filter(|c| !store.enforces(c)) {
        tracing::warn!(cluster = c, "no status report for a cluster the deployment does not enforce");
        return Ok(());
    }
    let report = &StatusReport { written_by: WRITTEN_BY.get().cloned(), ..report.clone() };
    let text = match store.source.max_status_bytes() {
        // Failures are dropped from the report to fit.
        Some(max) => report.to_json_within(max),
        None => serde_json::to_string_pretty(report).unwrap_or_default(),
    };
    store.source.put_status(cluster, &text).await
}

/// A report that cannot be written is logged: it never fails the invocation that made it.
async fn write_logged<S: PolicySource>(store: &PolicyStore<S>, cluster: Option<&str>, report: &StatusReport) {
    if let Err(e) = write(store, cluster, report).await {
        tracing::warn!(error = %e, "could not write the status report");
    }
}

/// The status report beside the policy (of cluster `cluster` in a set), if one was written.
pub async fn read<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
) -> Result<Option<StatusReport>, ReadStatusError<S::Error>> {
    let text = store.source.get_status(cluster).await.map_err(ReadStatusError::Source)?;
    let location = cluster.map_or_else(|| store.location(), |c| store.source.cluster_location(c));
    text.map(|t| serde_json::from_str(&t).map_err(|e| ReadStatusError::NotAReport { location, message: e.to_string() }))
        .transpose()
}

/// A rejected newer version, reported beside that cluster's policy with the one in force.
pub async fn report_rejection<S: PolicySource>(store: &PolicyStore<S>, r: &Rejection) {
    let report = StatusReport::new(store.source.cloud(), &r.location, r.in_force.clone(), r.errors.clone(), Vec::new());
    write_logged(store, r.cluster.as_deref(), &report).await;
}

/// A sweep's status report for one cluster (`policy`): the version it applied, how that
/// cluster's published policy stands now, and its failures.
pub async fn report_sweep<S: PolicySource>(store: &PolicyStore<S>, policy: &LoadedPolicy, records: &[Record]) {
    let cluster = store.cluster_key(policy);
    let Some(standing) = store.standing(cluster).await else { return };
    let location = store.location_for(cluster);
    let report = StatusReport::of_sweep(store.source.cloud(), &location, &policy.policy.version, standing, records);
    write_logged(store, Some(cluster).filter(|c| !c.is_empty()), &report).await;
}
