//! The status report (`tagwarden_core::status`) beside a policy store's documents: made from what
//! a sweep or a load found, written and read through the store's `PolicySource`.

use crate::policy_store::{PolicySource, PolicyStore, PutError, Rejection};
use std::sync::OnceLock;
use tagwarden_core::contest::{self, Contest};
use tagwarden_core::policy::cache::{LoadedPolicy, PolicyState, Standing};
use tagwarden_core::report::{epoch_ms, Record};

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

/// How often a report is laid over the one there again when another write landed first.
const ATTEMPTS: u32 = 5;

/// Why a report could not be rewritten.
enum Rewrite {
    /// The report there could not be read.
    Unreadable(String),
    /// It could not be written (or other writes kept landing first).
    Unwritten(String),
}

/// Rewrite cluster `cluster`'s report: `change` makes the one to write from the one there (`None`:
/// there is none, or it is not one tagwarden wrote), or `None` to write nothing, and answers
/// something. Written only over the version read where the store can write so, and read and
/// changed again when another write landed in between (parts swept at once, an event's contest,
/// an operator's lift). What `change` answered the last time.
async fn rewrite<S: PolicySource, T>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    mut change: impl FnMut(Option<StatusReport>) -> (Option<StatusReport>, T),
) -> Result<T, Rewrite> {
    for _ in 0..ATTEMPTS {
        let there = store.source.get_status_tagged(cluster).await.map_err(|e| Rewrite::Unreadable(e.to_string()))?;
        let older = there.as_ref().and_then(|o| serde_json::from_str::<StatusReport>(&o.text).ok());
        let (report, answer) = change(older);
        let Some(report) = report else { return Ok(answer) };
        let text = render(store, &report);
        match store.source.put_status_if(cluster, &text, there.as_ref().map(|o| o.etag.as_str())).await {
            Ok(()) => return Ok(answer),
            Err(PutError::Conflict { .. } | PutError::Raced { .. }) => continue,
            Err(PutError::Source(e)) => return Err(Rewrite::Unwritten(e.to_string())),
        }
    }
    Err(Rewrite::Unwritten(format!(
        "another write of the report landed {ATTEMPTS} times between the read and the write"
    )))
}

/// Write `report` over the one there without losing what only that one holds: the contests
/// (`tagwarden_core::contest`: only the event path counts them; those a new policy, `fingerprint`,
/// lifted are dropped) and, for the sweep of one `part` of the deployment (a resource-ID prefix),
/// the other parts' failures (`StatusReport::merged_into`).
async fn write_over<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    report: &StatusReport,
    part: Option<&str>,
    fingerprint: Option<&str>,
) -> Result<(), String> {
    if !enforced(store, cluster) {
        return Ok(());
    }
    let over = |older: Option<StatusReport>| {
        let mut report = report.clone();
        if let Some(older) = &older {
            report.contests = match fingerprint {
                Some(fp) => contest::in_force(older.contests.clone(), fp, epoch_ms() / 1000),
                None => older.contests.clone(),
            };
        }
        let report = match part {
            Some(part) => report.merged_into(older, part),
            None => report,
        };
        (Some(report), ())
    };
    match rewrite(store, cluster, over).await {
        Ok(()) => Ok(()),
        // A part's report is only ever laid over the others: unreadable, nothing is written.
        Err(Rewrite::Unreadable(e)) if part.is_some() => Err(e),
        // Unreadable otherwise (a guardrail on reads, a fault): the new report still goes out, as
        // it did before reports were read back; what only the old one held is lost, and said so.
        Err(Rewrite::Unreadable(e)) => {
            tracing::warn!(error = %e, "could not read the status report back: written without its contests");
            store.source.put_status(cluster, &render(store, report)).await.map_err(|e| e.to_string())
        }
        Err(Rewrite::Unwritten(e)) => Err(e),
    }
}

/// Change the contests kept in cluster `policy`'s status report with `change`, given those in
/// force under its policy now (a report is started if there is none). What `change` answered the
/// last time, and the contests written.
pub async fn update_contests<S: PolicySource, T>(
    store: &PolicyStore<S>,
    policy: &LoadedPolicy,
    mut change: impl FnMut(&mut Vec<Contest>) -> T,
) -> Result<(T, Vec<Contest>), String> {
    let key = store.cluster_key(policy);
    let cluster = Some(key).filter(|c| !c.is_empty());
    if !enforced(store, cluster) {
        return Err("the deployment does not enforce this cluster".to_string());
    }
    // The policy was just loaded, so its cache is there; `ok` otherwise, as it is in force.
    let standing = store.standing(key).await.unwrap_or(Standing { state: PolicyState::Ok, errors: Vec::new() });
    let location = store.location_for(key);
    let contested = |older: Option<StatusReport>| {
        // No report yet: one that holds the contests and says no sweep has run (generated_at 0).
        let mut report = older.unwrap_or_else(|| StatusReport {
            generated_at: 0,
            ..StatusReport::of_sweep(store.source.cloud(), &location, &policy.policy.version, standing.clone(), &[])
        });
        let mut contests =
            contest::in_force(std::mem::take(&mut report.contests), &policy.fingerprint, epoch_ms() / 1000);
        let answer = change(&mut contests);
        report.contests = contests.clone();
        (Some(report), (answer, contests))
    };
    rewrite(store, cluster, contested).await.map_err(|(Rewrite::Unreadable(e) | Rewrite::Unwritten(e))| e)
}

/// Lift the contests on `resource` (only `key`'s, if given) in the status report of `cluster`: an
/// operator's acknowledgement (`tagwarden status --lift`). How many were lifted.
pub async fn lift_contests<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    resource: &str,
    key: Option<&str>,
) -> Result<usize, String> {
    let lifted = |older: Option<StatusReport>| match older {
        Some(mut report) => match contest::lift(&mut report.contests, resource, key) {
            0 => (None, 0),
            n => (Some(report), n),
        },
        None => (None, 0),
    };
    rewrite(store, cluster, lifted).await.map_err(|(Rewrite::Unreadable(e) | Rewrite::Unwritten(e))| e)
}

/// A report that cannot be written is logged: it never fails the invocation that made it.
async fn write_logged<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    report: &StatusReport,
    part: Option<&str>,
    fingerprint: Option<&str>,
) {
    if let Err(e) = write_over(store, cluster, report, part, fingerprint).await {
        tracing::warn!(error = %e, part, "could not write the status report");
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
    write_logged(store, r.cluster.as_deref(), &report, None, None).await;
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
    write_logged(store, cluster, &report, part, Some(&policy.fingerprint)).await;
}
