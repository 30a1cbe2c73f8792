//! The status report (`tagwarden_core::status`) beside a policy store's documents: made from what
//! a sweep or a load found, written and read through the store's `PolicySource`.

use crate::policy_store::{PolicySource, PolicyStore, PutError, Rejection};
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
    if !enforced(store, cluster) {
        return Ok(());
    }
    store.source.put_status(cluster, &render(store, report)).await
}

/// Whether a report may be written for `cluster`: in a set, only for a cluster the deployment
/// enforces (see [`write`]).
fn enforced<S: PolicySource>(store: &PolicyStore<S>, cluster: Option<&str>) -> bool {
    match cluster.filter(|c| !store.enforces(c)) {
        Some(c) => {
            tracing::warn!(cluster = c, "no status report for a cluster the deployment does not enforce");
            false
        }
        None => true,
    }
}

/// The report's text as written: naming this build, within the store's size limit.
fn render<S: PolicySource>(store: &PolicyStore<S>, report: &StatusReport) -> String {
    let report = &StatusReport { written_by: WRITTEN_BY.get().cloned(), ..report.clone() };
    match store.source.max_status_bytes() {
        // Failures are dropped from the report to fit.
        Some(max) => report.to_json_within(max),
        None => serde_json::to_string_pretty(report).unwrap_or_default(),
    }
}

/// How often a part's report is laid over the one there again when another part's landed first.
const PART_ATTEMPTS: u32 = 5;

/// [`write`] for the sweep of one part of the deployment (`part`, a resource-ID prefix): laid
/// over the report there now (`StatusReport::merged_into`) and written only over the version
/// read, so that parts swept at once never drop each other's failures; read and laid over again
/// when another part's landed in between.
async fn write_part<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    report: &StatusReport,
    part: &str,
) -> Result<(), String> {
    if !enforced(store, cluster) {
        return Ok(());
    }
    for _ in 0..PART_ATTEMPTS {
        let there = store.source.get_status_tagged(cluster).await.map_err(|e| e.to_string())?;
        // A report that is not one tagwarden wrote is replaced, as a whole sweep's would.
        let older = there.as_ref().and_then(|o| serde_json::from_str::<StatusReport>(&o.text).ok());
        let text = render(store, &report.clone().merged_into(older, part));
        match store.source.put_status_if(cluster, &text, there.as_ref().map(|o| o.etag.as_str())).await {
            Ok(()) => return Ok(()),
            Err(PutError::Conflict { .. } | PutError::Raced { .. }) => continue,
            Err(PutError::Source(e)) => return Err(e.to_string()),
        }
    }
    Err(format!("another part's report landed {PART_ATTEMPTS} times between the read and the write"))
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
/// cluster's published policy stands now, and its failures; for the sweep of one `part` of the
/// deployment, laid over the other parts' ([`write_part`]).
pub async fn report_sweep<S: PolicySource>(
    store: &PolicyStore<S>,
    policy: &LoadedPolicy,
    records: &[Record],
    part: Option<&str>,
) {
    let cluster = store.cluster_key(policy);
    let Some(standing) = store.standing(cluster).await else { return };
    let location = store.location_for(cluster);
    let report = StatusReport::of_sweep(store.source.cloud(), &location, &policy.policy.version, standing, records);
    let cluster = Some(cluster).filter(|c| !c.is_empty());
    match part {
        None => write_logged(store, cluster, &report).await,
        Some(part) => {
            if let Err(e) = write_part(store, cluster, &report, part).await {
                tracing::warn!(error = %e, part, "could not write the status report");
            }
        }
    }
}
