//! The Azure reconciler: an event names a resource; it is re-read through the Tags API, planned
//! against the policy in force and written with at most one Merge (DESIGN.md §4, §5). The sweep
//! does the same for every owned resource it can list.
//!
//! Loop safety takes two guards, both always on: an event caused by the function's own identity
//! (`claims.appid`, `claims.oid` or `authorization.evidence.principalId` equal to
//! `TAGWARDEN_SELF_CLIENT_ID` / `TAGWARDEN_SELF_PRINCIPAL_ID`) is dropped before any call, and
//! planning is idempotent, so an own write read back finds no drift and writes nothing.
//!
//! Deliberately not here: the HTTP protocol of the Functions host (`super::function`) and the
//! decision itself (`crate::plan`).

use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{self, StreamExt};

use super::arm::ArmClient;
use super::blob_store::{BlobPolicyStore, LoadedPolicy};
use crate::cloud::Cloud;
use crate::events::Event;
use crate::inflight::ResourceLocks;
use crate::plan;
pub use crate::report::Outcome;
use crate::report::{epoch_ms, Record, Status};
use crate::resource::ResourceRef;

pub struct Reconciler {
    pub arm: ArmClient,
    pub store: BlobPolicyStore,
    /// The function's own identities (principal id, client id): events they caused are ignored.
    pub own: Vec<String>,
    /// Subscription or resource-group IDs the sweep lists.
    pub sweep_scopes: Vec<String>,
    /// Plan without writing.
    pub dry_run: bool,
    /// Resources reconciled at once: in a sweep, and the events of one delivered batch.
    pub concurrency: usize,
    /// One reconcile at a time per resource: a duplicate event handled concurrently waits, then
    /// re-reads and finds no drift, so a policy version costs one Merge per resource.
    in_flight: ResourceLocks,
}

impl Reconciler {
    pub fn new(arm: ArmClient, store: BlobPolicyStore, own: Vec<String>) -> Self {
        Reconciler {
            arm,
            store,
            own,
            sweep_scopes: Vec::new(),
            dry_run: false,
            concurrency: 8,
            in_flight: ResourceLocks::default(),
        }
    }

    /// The policy in force; a rejected new version is counted and reported.
    async fn policy(&self, out: &mut Outcome, force: bool) -> Option<Arc<LoadedPolicy>> {
        self.store.policy_for(out, force).await
    }

    /// A policy blob changed: re-read the policy now (a conditional GET, then validate and cache;
    /// a rejected version is counted and reported, and the last good one stays in force). Lists,
    /// reads and writes no resource: that is the queued sweep's work, so the Event Grid delivery
    /// that asked for this is answered within its 30 s.
    pub async fn recheck_policy(&self) -> Outcome {
        let mut out = Outcome::default();
        out.metrics.events_received = 1;
        if let Some(policy) = self.policy(&mut out, true).await {
            tracing::info!(version = %policy.policy.version, "policy re-checked; the sweep runs from the queue");
        }
        out
    }

    /// Reconcile the resource an event names. Ignored and own events make no call at all.
    pub async fn handle_event(&self, event: &Event) -> Outcome {
        let mut out = Outcome::default();
        out.metrics.events_received = 1;
        let own = event.is_from(&self.own);
        if event.is_ignored() || own {
            out.metrics.events_ignored = 1;
            tracing::info!(event = event.event_name, id = event.id, reason = ?event.reason, own, "event ignored");
            return out;
        }
        let Some(policy) = self.policy(&mut out, false).await else { return out };
        for r in &event.resources {
            let record = self.reconcile(&policy, r).await.in_line_since(event.occurred_at_ms, epoch_ms());
            out.push(Record { event_id: event.id.clone(), ..record });
        }
        out
    }

    /// Re-read, plan and (unless dry-run) write one resource.
    pub async fn reconcile(&self, policy: &LoadedPolicy, r: &ResourceRef) -> Record {
        let start = Instant::now();
        // ARM IDs compare case-insensitively: one lock whichever casing an event used.
        let _held = self.in_flight.acquire(&r.id.to_ascii_lowercase()).await;
        let version = &policy.policy.version;
        let current = match self.arm.get_tags(&r.id).await {
            Ok(tags) => tags,
            Err(e) => return e.into_record(Record::failed(Cloud::Azure, r, version, String::new())),
        };
        let plan = plan::plan(&policy.policy, Cloud::Azure, &policy.infra_id, r, &current);
        let mut written = false;
        let mut error = None;
        if plan.writes() && !self.dry_run {
            // The PATCH response is the record of the write: no read-back (stale reads).
            match self.arm.merge_tags(&r.id, &plan.set).await {
                Ok(_) => written = true,
                Err(e) => error = Some(e),
            }
        }
        let elapsed = start.elapsed().as_millis() as u64;
        let record = Record::from_plan(Cloud::Azure, &policy.policy, &plan, written, elapsed);
        // ARM's own checks: the limit (a concurrent writer got there first, or a lower limit), a
        // type that refuses the PATCH, a refused tag, or a failure worth another delivery.
        match error {
            Some(e) => e.into_record(record),
            None => record,
        }
    }

    /// Plan (and, unless dry-run, write) every owned resource in the sweep scopes; `force`
    /// re-reads the policy now (a policy blob changed). Writes the status report.
    pub async fn sweep(&self, force: bool) -> Outcome {
        let mut out = Outcome::default();
        let Some(policy) = self.policy(&mut out, force).await else { return out };
        if self.sweep_scopes.is_empty() {
            out.error = Some("no sweep scope: set TAGWARDEN_SWEEP_SCOPES (or TAGWARDEN_METRICS_RESOURCE_ID, whose subscription is the default)".to_string());
            return out;
        }
        let key = Cloud::Azure.ownership_key(&policy.infra_id);
        let mut targets = Vec::new();
        for scope in &self.sweep_scopes {
            match self.arm.list_owned(scope, &key).await {
                Ok(found) => targets.extend(found),
                Err(e) => {
                    out.error = Some(format!("listing owned resources failed: {e}"));
                    return out;
                }
            }
        }
        targets.sort();
        targets.dedup_by(|a, b| a.id.eq_ignore_ascii_case(&b.id));
        let policy_ref = &policy;
        let records: Vec<Record> = stream::iter(targets)
            .map(|r| async move {
                let record = self.reconcile(policy_ref, &r).await;
                // The listing carries no tags: the drift was first seen by this reconcile's read.
                let seen = epoch_ms().saturating_sub(record.latency_ms);
                if record.status == Status::Applied {
                    record.in_line_since(Some(seen), epoch_ms())
                } else {
                    record
                }
            })
            .buffer_unordered(self.concurrency.max(1))
            .collect()
            .await;
        for r in records {
            out.push(r);
        }
        if !self.dry_run {
            self.store.report_sweep(&policy.policy.version, &out.records).await;
        }
        out
    }
}
