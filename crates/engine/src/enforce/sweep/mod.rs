//! The sweep (docs/src/design/architecture.md), once for both clouds: list every resource the swept clusters own,
//! plan each against its cluster's policy, then write in as few calls as the cloud allows.
//!
//! What differs is the [`Adapter`]'s: how it lists (AWS: the Tagging API, tags included, plus the
//! listings that API cannot see; ARM: without tags) and how it groups writes ([`Batching`]). A
//! resource listed with its tags is planned from the listing; one listed without them is read and
//! reconciled alone. A write that replaces the whole tag set (S3) is re-read, its owner and plan
//! re-checked, right before it is sent, so nothing added since the listing is lost and a resource
//! no longer owned is not written. A write is sent once: the client retries throttling itself (one
//! retry layer), and what is still throttled is failed, retryable, for the next sweep; a shared
//! write that fails for another reason is split in halves, so only the resources that really fail
//! are sent again and reported. Past the deadline no write
//! starts: what is left is reported as deferred, for the next run. Each swept cluster gets its
//! status report.
//!
//! A listing that fails (a guardrail denying one IAM call, Route 53 throttling, an unreadable
//! Azure scope) does not stop the sweep: what could be listed is swept, and each failed listing is
//! a failed record — in the output, the exit code and every swept cluster's status report — that
//! the next sweep lists again. A resource listed and then deleted before its read or write is
//! `gone`: counted, not a failure.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::{answer_to, report_sweeps, Adapter, Cause, Engine};
use crate::cloud_error::CloudError;
use tagwarden_core::cloud::{ownership_for, Cloud, ClusterRef, Ownership};
use tagwarden_core::plan::{self, Plan};
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::reason::{Deferred, StopKind};
use tagwarden_core::report::{epoch_ms, Outcome, Record, Status};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

mod write;

pub(super) use write::batches;
use write::{in_turn, Job};

/// Told `(phase, done, total)` as a sweep goes: `discover`, `plan`, `write`.
pub type Progress = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

/// A listed resource, with its tags when the listing carries them.
pub type Listed = (ResourceRef, Option<TagMap>);

/// What one cluster's owned listing found, its errors if it failed part-way (several for several
/// scopes), and each time a cheaper listing was refused and a dearer one used instead, why
/// (reported and counted as a fallback, not a failure: everything was listed).
#[derive(Debug, Default)]
pub struct ClusterListing {
    pub found: Vec<Listed>,
    pub failed: Vec<CloudError>,
    pub fallbacks: Vec<String>,
}

impl ClusterListing {
    /// What was found and what failed, with no fallback.
    pub fn of(found: Vec<Listed>, failed: Vec<CloudError>) -> Self {
        ClusterListing { found, failed, fallbacks: Vec::new() }
    }
}

/// What the listings beside the owned one found.
#[derive(Debug, Default)]
pub struct Unindexed {
    /// Resources with their tags, whoever owns them.
    pub found: Vec<(ResourceRef, TagMap)>,
    /// Resources listed that could not be read.
    pub unreadable: Vec<(ResourceRef, CloudError)>,
    /// Listings that failed: the resources they would have named are not swept this time.
    pub failed: Vec<CloudError>,
}

/// How a write phase runs: no job starts after `stop_at` (what is left is failed, retryable, as
/// `deferred` says), and whether the caller holds the resources' locks already (a batch).
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    pub(super) stop_at: Option<Instant>,
    pub(super) deferred: &'static Deferred,
    pub(super) locks_held: bool,
}

/// How a sweep sends the write of one resource; `G`, what resources sharing a call have in common
/// ([`Adapter::Group`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Batching<G> {
    /// In one call with other resources of `group` that need the same tags, up to `max` a call.
    Shared { group: G, max: usize },
    /// One call of its own.
    Alone,
    /// One call of its own, re-read and re-planned right before: the write replaces the whole set,
    /// or the listed tags may be stale (Azure Resource Graph lags ARM), so only a fresh read may
    /// decide a write.
    Reread,
}

pub(super) struct Planned {
    pub(super) policy: Arc<LoadedPolicy>,
    pub(super) resource: ResourceRef,
    pub(super) current: TagMap,
    pub(super) plan: Plan,
    pub(super) started: Instant,
}
impl<A: Adapter> Engine<A> {
    /// Plan (and, unless dry-run, write) every resource the clusters named in `only` own (every
    /// cluster with `None`), starting no write after `stop_at`; `force` re-reads the policy now.
    pub async fn sweep(&self, force: bool, only: Option<&[String]>, stop_at: Option<Instant>) -> Outcome {
        self.sweep_with(force, only, stop_at, false).await
    }

    /// [`Engine::sweep`]; with `reuse`, what the listings beside the owned one found each swept
    /// cluster owning less than a policy window ago is re-read instead of listed again
    /// (`super::coalesce`).
    pub(super) async fn sweep_with(
        &self,
        force: bool,
        only: Option<&[String]>,
        stop_at: Option<Instant>,
        reuse: bool,
    ) -> Outcome {
        if let Some(why) = self.adapter.cannot_sweep() {
            return Outcome { error: Some(StopKind::CannotSweep(why.to_string()).into()), ..Outcome::default() };
        }
        let mut out = Outcome::default();
        let Some(policies) = super::load_policies(&self.adapter, &self.store, &mut out, force).await else {
            return out;
        };
        let version = policies.version();
        let swept: Vec<Arc<LoadedPolicy>> =
            policies.iter().filter(|p| only.is_none_or(|o| o.contains(&p.infra_id))).cloned().collect();
        let Discovered { targets, unreadable, failed, fallbacks } = self.discover(&policies, &swept, reuse).await;
        // Listed the dearer way: not a failure, but never silent (a log line, a metric, the outcome).
        for (infra_id, why) in fallbacks {
            tracing::warn!(infra_id, reason = why, "the owned listing fell back");
            out.metrics.listing_fallbacks += 1;
            out.fallbacks.push(why);
        }
        // A resource or a listing that could not be read is reported on its own; the rest is swept.
        for (r, e) in unreadable {
            out.push(e.into_record(Record::failed(self.cloud(), &r, &version, String::new())));
        }
        for (infra_id, e) in failed {
            tracing::warn!(error = %e, "a listing failed; sweeping what the others found");
            let mut record = Record::listing_failed(
                self.cloud(),
                e.target.clone(),
                e.operation.to_string(),
                &version,
                e.failure(),
                e.to_string(),
            );
            record.infra_id = infra_id.filter(|_| policies.is_set());
            out.push(record);
        }
        let total = targets.len() as u64;
        self.report("plan", 0, total);
        // When the sweep first saw the drift: where a correction's compliance lag starts (when the
        // drift itself began, no listing can say).
        let seen_ms = epoch_ms();
        let mut planned = Vec::with_capacity(targets.len());
        let mut jobs = Vec::new();
        for (resource, tags) in targets {
            let Some(current) = tags else {
                jobs.push(Job::Read(resource));
                continue;
            };
            let started = Instant::now();
            match answer_to(&policies, self.cloud(), &resource, &current) {
                Ok(policy) => {
                    let mut plan = plan::diff(&policy.policy, self.cloud(), &policy.infra_id, &resource, &current);
                    self.hold_contested(policy, &mut plan, Cause::Other).await;
                    self.audit(policy, &mut plan);
                    planned.push(Planned { policy: policy.clone(), resource, current, plan, started });
                }
                // Owned by two clusters: reported, never written.
                Err(record) => out.push(*record),
            }
        }
        self.report("plan", total, total);
        // What is audited is out of the plans already: they write nothing.
        jobs.extend(batches(&self.adapter, &planned));

        let jobs = in_turn(jobs, |job| match job {
            Job::Read(r) => self.adapter.pacing_key(r).to_string(),
            Job::Reread(i) => self.adapter.pacing_key(&planned[*i].resource).to_string(),
            Job::Write { members, .. } => self.adapter.pacing_key(&planned[members[0]].resource).to_string(),
        });
        let how = Run { stop_at, deferred: &Deferred::NextSweep, locks_held: false };
        let (read, written) = self.run_jobs(&policies, &planned, jobs, how).await;
        for record in read {
            out.push(record);
        }
        for record in written {
            out.push(since(record, seen_ms));
        }
        if !self.dry_run {
            report_sweeps(&self.store, &policies, &swept, &out.records, self.part.as_deref(), self.mode).await;
            // The heartbeat the `no-sweep` alarm waits for: only a sweep with nothing left to retry
            // (one that keeps running out of time never counts, so the alarm notices it).
            out.metrics.sweeps_completed = u64::from(!out.must_retry());
        }
        out
    }

    /// Every resource the swept clusters own: each cluster's owned listing, then what the adapter
    /// lists beside it, kept where a swept cluster owns it (or claims it in a conflict); and every
    /// listing that failed, with the cluster it was for (`None`: for all of them).
    async fn discover(&self, policies: &Policies, swept: &[Arc<LoadedPolicy>], reuse: bool) -> Discovered {
        let mut found: Vec<Listed> = Vec::new();
        let mut failed = Vec::new();
        let mut fallbacks = Vec::new();
        let mut seen = HashSet::new();
        let ids: Vec<&str> = swept.iter().map(|p| p.infra_id.as_str()).collect();
        let clusters: Vec<ClusterRef<'_>> =
            swept.iter().map(|p| ClusterRef { kind: p.policy.kind, infra_id: &p.infra_id }).collect();
        let pages = |n: usize| self.report("discover", n as u64, 0);
        let listings = self.adapter.list_owned_all(&clusters, &pages).await;
        for (policy, listing) in swept.iter().zip(listings) {
            fallbacks.extend(listing.fallbacks.into_iter().map(|why| (policy.infra_id.clone(), why)));
            for (r, tags) in listing.found {
                // Owned by two swept clusters: listed twice, reported once.
                if seen.insert(identity(self.cloud(), &r)) {
                    found.push((r, tags));
                }
            }
            failed.extend(listing.failed.into_iter().map(|e| (Some(policy.infra_id.clone()), e)));
        }
        if let Some(known) = reuse.then(|| self.coalesce.beside(&ids, self.policy_window)).flatten() {
            found.extend(known.into_iter().filter(|(r, _)| seen.insert(identity(self.cloud(), r))));
            self.report("discover", found.len() as u64, found.len() as u64);
            return Discovered { targets: found, unreadable: Vec::new(), failed, fallbacks };
        }
        // The swept cluster a resource is owned by (or claimed by, in a conflict), if any.
        let ours = |r: &ResourceRef, tags: &TagMap| match answer_to(policies, self.cloud(), r, tags) {
            Ok(p) => (ownership_for(self.cloud(), &r.kind, p.policy.kind, &p.infra_id, tags) == Ownership::Owned
                && ids.contains(&p.infra_id.as_str()))
            .then(|| p.infra_id.clone()),
            Err(record) => record.infra_id.filter(|id| record.status == Status::Failed && ids.contains(&id.as_str())),
        };
        let beside = self.adapter.list_unindexed(&found).await;
        let complete = beside.failed.is_empty() && beside.unreadable.is_empty();
        let mut by_cluster: HashMap<String, Vec<ResourceRef>> =
            ids.iter().map(|id| (id.to_string(), Vec::new())).collect();
        for (r, tags) in beside.found {
            let Some(owner) = ours(&r, &tags) else { continue };
            if seen.insert(identity(self.cloud(), &r)) {
                by_cluster.entry(owner).or_default().push(r.clone());
                found.push((r, Some(tags)));
            }
        }
        if complete && self.part.is_none() {
            self.coalesce.remember(by_cluster);
        }
        failed.extend(beside.failed.into_iter().map(|e| (None, e)));
        self.report("discover", found.len() as u64, found.len() as u64);
        Discovered { targets: found, unreadable: beside.unreadable, failed, fallbacks }
    }
}

/// What a sweep's discovery found, could not read, and could not list.
struct Discovered {
    targets: Vec<Listed>,
    unreadable: Vec<(ResourceRef, CloudError)>,
    failed: Vec<(Option<String>, CloudError)>,
    /// Each owned listing that fell back to a dearer one: its cluster, and why.
    fallbacks: Vec<(String, String)>,
}

/// A resource's identity across listings: its ARN on AWS, its ID ignoring case on Azure, its full
/// resource name on Google Cloud.
pub(super) fn identity(cloud: Cloud, r: &ResourceRef) -> String {
    match cloud {
        Cloud::Aws => r.arn.clone().unwrap_or_else(|| r.id.clone()),
        Cloud::Azure => r.id.to_ascii_lowercase(),
        Cloud::Gcp => r.id.clone(),
    }
}

/// A corrected record's compliance lag runs from `seen_ms`.
pub(super) fn since(record: Record, seen_ms: u64) -> Record {
    if record.status == Status::Applied {
        record.in_line_since(Some(seen_ms), epoch_ms())
    } else {
        record
    }
}

#[cfg(test)]
mod tests;
