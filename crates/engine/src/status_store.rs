//! The status report (`tagwarden_core::status`) beside a policy store's documents: made from what
//! a sweep or a load found, written and read through the store's `PolicySource`.

use crate::policy_store::{PolicySource, PolicyStore, PutError, Rejection};
use std::sync::OnceLock;
use tagwarden_core::contest::{self, Contest, ContestState, Lift};
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
#[derive(Debug, thiserror::Error)]
enum Rewrite {
    /// The report there could not be read.
    #[error("{0}")]
    Unreadable(String),
    /// It could not be written (or other writes kept landing first).
    #[error("{0}")]
    Unwritten(String),
}

/// Why a cluster's contest state could not be read or rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContestStateError {
    /// The name given is no cluster's infraID.
    #[error(transparent)]
    NotACluster(#[from] tagwarden_core::policy::clusters::NotAnInfraId),
    /// The store keeps no contest state (its location).
    #[error("{0} keeps no contest state")]
    NoState(String),
    /// The store's answer.
    #[error("{0}")]
    Source(String),
    /// The state could not be written as JSON.
    #[error("{0}")]
    Unserializable(String),
    /// Other writes kept landing between the read and the write.
    #[error("another write of the contest state landed {ATTEMPTS} times between the read and the write")]
    Raced,
    /// The deployment does not enforce the cluster.
    #[error("the deployment does not enforce this cluster")]
    NotEnforced,
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

/// Write `report` over the one there without losing what only that one holds: for the sweep of
/// one `part` of the deployment (a resource-ID prefix), the other parts' failures
/// (`StatusReport::merged_into`). The contests it shows are `shown`'s (the contest state, read
/// apart: never the older report's, which anyone who can write the report could have forged);
/// `None` when the state could not be read: the older report's copy is kept, for readers only.
async fn write_over<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    report: &StatusReport,
    part: Option<&str>,
    shown: Option<&ContestState>,
) -> Result<(), Rewrite> {
    if !enforced(store, cluster) {
        return Ok(());
    }
    let over = |older: Option<StatusReport>| {
        let mut report = report.clone();
        match (shown, &older) {
            (Some(state), _) => show(&mut report, state),
            (None, Some(older)) => {
                report.contests = older.contests.clone();
                report.lifts = older.lifts.clone();
            }
            (None, None) => {}
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
        Err(e @ Rewrite::Unreadable(_)) if part.is_some() => Err(e),
        // Unreadable otherwise (a guardrail on reads, a fault): the new report still goes out, as
        // it did before reports were read back; what only the old one held is lost, and said so.
        Err(Rewrite::Unreadable(e)) => {
            tracing::warn!(error = %e, "could not read the status report back: written over it");
            let mut report = report.clone();
            if let Some(state) = shown {
                show(&mut report, state);
            }
            store
                .source
                .put_status(cluster, &render(store, &report))
                .await
                .map_err(|e| Rewrite::Unwritten(e.to_string()))
        }
        Err(e @ Rewrite::Unwritten(_)) => Err(e),
    }
}

/// The contests and lifts of `state` as the report shows them.
fn show(report: &mut StatusReport, state: &ContestState) {
    report.contests = state.contests.clone();
    report.lifts = state.lifts.clone();
}

/// Where cluster `infra_id`'s contest state is kept in `store`, or why there is none.
fn state_name<S: PolicySource>(store: &PolicyStore<S>, infra_id: &str) -> Result<String, ContestStateError> {
    tagwarden_core::policy::clusters::valid_infra_id(infra_id).map_err(ContestStateError::NotACluster)?;
    store.source.contest_state_name(infra_id).ok_or_else(|| ContestStateError::NoState(store.location()))
}

/// Cluster `infra_id`'s contest state (`tagwarden_core::contest::ContestState`), as kept apart
/// from the status report: empty if none was written. Contests are read from here alone, never
/// from the report. One that is not a state tagwarden wrote reads as empty (every key is then
/// corrected: the safe side) and is replaced at the next write.
pub async fn read_contest_state<S: PolicySource>(
    store: &PolicyStore<S>,
    infra_id: &str,
) -> Result<ContestState, ContestStateError> {
    Ok(get_state(store, &state_name(store, infra_id)?).await?.map(|(state, _)| state).unwrap_or_default())
}

async fn get_state<S: PolicySource>(
    store: &PolicyStore<S>,
    name: &str,
) -> Result<Option<(ContestState, String)>, ContestStateError> {
    let there = match store.source.get(name, None).await {
        Ok(there) => there,
        Err(e) if store.source.is_absent(&e) => None,
        Err(e) => return Err(ContestStateError::Source(e.to_string())),
    };
    Ok(there.map(|o| {
        let state = serde_json::from_str::<ContestState>(&o.text).unwrap_or_else(|e| {
            tracing::warn!(object = %store.source.location_of(name), error = %e, "the contest state is not one tagwarden wrote: read as empty, replaced at the next write");
            ContestState::default()
        });
        (state, o.etag)
    }))
}

/// Rewrite cluster `infra_id`'s contest state: `change` changes it and answers whether to write it
/// (and something). Written only over the version read (a conditional write), read and changed
/// again when another write landed in between. What `change` answered the last time, and the
/// state as written (or read, when nothing was written).
async fn rewrite_state<S: PolicySource, T>(
    store: &PolicyStore<S>,
    infra_id: &str,
    now: u64,
    mut change: impl FnMut(&mut ContestState) -> (bool, T),
) -> Result<(T, ContestState), ContestStateError> {
    let name = state_name(store, infra_id)?;
    for _ in 0..ATTEMPTS {
        let there = get_state(store, &name).await?;
        let etag = there.as_ref().map(|(_, e)| e.clone());
        let mut state = there.map(|(s, _)| s).unwrap_or_default();
        let (write, answer) = change(&mut state);
        if !write {
            return Ok((answer, state));
        }
        state.cluster = infra_id.to_string();
        state.updated_at = now;
        state.bound();
        let text =
            serde_json::to_string_pretty(&state).map_err(|e| ContestStateError::Unserializable(e.to_string()))?;
        match store.source.put(&name, &text, etag.as_deref()).await {
            Ok(_) => return Ok((answer, state)),
            Err(PutError::Conflict { .. } | PutError::Raced { .. }) => continue,
            Err(PutError::Source(e)) => return Err(ContestStateError::Source(e.to_string())),
        }
    }
    Err(ContestStateError::Raced)
}

/// Change the contests kept in cluster `policy`'s contest state with `change`, given those in
/// force under its policy at `now`; then show them in its status report (a report is started if
/// there is none; a report that cannot be written is logged, the state is what counts). What
/// `change` answered the last time, and the contests written.
pub async fn update_contests<S: PolicySource, T>(
    store: &PolicyStore<S>,
    policy: &LoadedPolicy,
    now: u64,
    mut change: impl FnMut(&mut Vec<Contest>) -> T,
) -> Result<(T, Vec<Contest>), ContestStateError> {
    let key = store.cluster_key(policy);
    let cluster = Some(key).filter(|c| !c.is_empty());
    if !enforced(store, cluster) {
        return Err(ContestStateError::NotEnforced);
    }
    let changed = |state: &mut ContestState| {
        let mut contests = contest::in_force(std::mem::take(&mut state.contests), &policy.fingerprint, now);
        let answer = change(&mut contests);
        state.contests = contests.clone();
        (true, (answer, contests))
    };
    let ((answer, contests), state) = rewrite_state(store, &policy.infra_id, now, changed).await?;
    // The policy was just loaded, so its cache is there; `ok` otherwise, as it is in force.
    let standing = store.standing(key).await.unwrap_or(Standing { state: PolicyState::Ok, errors: Vec::new() });
    let location = store.location_for(key);
    let shown = |older: Option<StatusReport>| {
        // No report yet: one that shows the contests and says no sweep has run (generated_at 0).
        let mut report = older.unwrap_or_else(|| StatusReport {
            generated_at: 0,
            ..StatusReport::of_sweep(store.source.cloud(), &location, &policy.policy.version, standing.clone(), &[])
        });
        show(&mut report, &state);
        (Some(report), ())
    };
    if let Err(Rewrite::Unreadable(e) | Rewrite::Unwritten(e)) = rewrite(store, cluster, shown).await {
        tracing::warn!(error = %e, "could not show the contests in the status report (they are kept in the contest state)");
    }
    Ok((answer, contests))
}

/// Lift the contests on `resource` (only `key`'s, if given) of cluster `infra_id` (`cluster`: its
/// key in a set, for the report): an operator's acknowledgement (`tagwarden status --lift`),
/// recorded in the contest state with `by` (the operator's principal) and `now`, and shown in the
/// status report if there is one. How many were lifted.
pub async fn lift_contests<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    infra_id: &str,
    resource: &str,
    key: Option<&str>,
    by: &str,
    now: u64,
) -> Result<usize, ContestStateError> {
    let lifted = |state: &mut ContestState| match contest::lift(&mut state.contests, resource, key) {
        0 => (false, 0),
        n => {
            let lift = Lift {
                resource: resource.to_string(),
                key: key.map(str::to_owned),
                by: by.to_string(),
                at: now,
                lifted: n,
            };
            state.record_lift(lift);
            (true, n)
        }
    };
    let (n, state) = rewrite_state(store, infra_id, now, lifted).await?;
    if n > 0 {
        let shown = |older: Option<StatusReport>| match older {
            Some(mut report) => {
                show(&mut report, &state);
                (Some(report), ())
            }
            None => (None, ()),
        };
        if let Err(Rewrite::Unreadable(e) | Rewrite::Unwritten(e)) = rewrite(store, cluster, shown).await {
            tracing::warn!(error = %e, "lifted in the contest state; could not show it in the status report");
        }
    }
    Ok(n)
}

/// A report that cannot be written is logged: it never fails the invocation that made it.
async fn write_logged<S: PolicySource>(
    store: &PolicyStore<S>,
    cluster: Option<&str>,
    report: &StatusReport,
    part: Option<&str>,
    shown: Option<&ContestState>,
) {
    if let Err(e) = write_over(store, cluster, report, part, shown).await {
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
    // The cluster whose state to show: the set's cluster, or the single policy's in force.
    let infra_id = match &r.cluster {
        Some(c) => Some(c.clone()),
        None => store.in_force().await.into_iter().next().map(|(id, _)| id),
    };
    let shown = match infra_id {
        Some(id) => shown_state(store, &id, None).await,
        None => Some(ContestState::default()),
    };
    write_logged(store, r.cluster.as_deref(), &report, None, shown.as_ref()).await;
}

/// Cluster `infra_id`'s contest state as a report shows it (those a new policy, `fingerprint`,
/// lifted left out); `None` if it cannot be read.
async fn shown_state<S: PolicySource>(
    store: &PolicyStore<S>,
    infra_id: &str,
    fingerprint: Option<&str>,
) -> Option<ContestState> {
    match read_contest_state(store, infra_id).await {
        Ok(mut state) => {
            if let Some(fp) = fingerprint {
                state.contests = contest::in_force(state.contests, fp, epoch_ms() / 1000);
            }
            Some(state)
        }
        Err(e) if store.source.contest_state_name(infra_id).is_none() => {
            let _ = e;
            Some(ContestState::default())
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read the contest state to show it in the status report");
            None
        }
    }
}

/// A sweep's status report for one cluster (`policy`): the version it applied, how that
/// cluster's published policy stands now, its failures, and its audit section (the deployment in
/// `mode`); for the sweep of one `part` of the deployment, laid over the other parts'.
pub async fn report_sweep<S: PolicySource>(
    store: &PolicyStore<S>,
    policy: &LoadedPolicy,
    records: &[Record],
    part: Option<&str>,
    mode: tagwarden_core::mode::Mode,
) {
    let cluster = store.cluster_key(policy);
    let Some(standing) = store.standing(cluster).await else { return };
    let location = store.location_for(cluster);
    let mut report = StatusReport::of_sweep(store.source.cloud(), &location, &policy.policy.version, standing, records);
    let cluster_mode = tagwarden_core::mode::ClusterMode::of(mode, &policy.policy);
    report.audit = Some(tagwarden_core::status::AuditSummary::of(cluster_mode, records));
    let cluster = Some(cluster).filter(|c| !c.is_empty());
    let shown = shown_state(store, &policy.infra_id, Some(&policy.fingerprint)).await;
    write_logged(store, cluster, &report, part, shown.as_ref()).await;
}
