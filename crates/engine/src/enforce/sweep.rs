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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{self, StreamExt};

use super::{answer_to, contests, report_sweeps, Adapter, Cause, Current, Engine};
use crate::cloud_error::{CloudError, ErrorClass};
use tagwarden_core::cloud::{ownership_for, Cloud, ClusterRef, Ownership};
use tagwarden_core::plan::{self, Plan};
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::reason::{Deferred, StopKind};
use tagwarden_core::report::{epoch_ms, Failure, Outcome, Record, Status};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

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

/// One unit of the write phase.
pub(super) enum Job<G> {
    /// Listed without tags: read, planned and written by the engine's reconcile.
    Read(ResourceRef),
    /// A planned write that replaces the set: the same, for planned resource `i`.
    Reread(usize),
    /// Planned resources sharing a delta, in one call where the adapter allows it.
    Write { batching: Batching<G>, set: TagMap, members: Vec<usize> },
}

impl<G> Job<G> {
    fn size(&self) -> u64 {
        match self {
            Job::Write { members, .. } => members.len() as u64,
            _ => 1,
        }
    }
}

/// What became of a job's resources.
enum Done {
    /// The record of a resource listed without tags.
    Record(Record),
    /// The record of planned resource `i`, re-read and reconciled.
    Replaced(usize, Record),
    Written(usize, Result<(), CloudError>),
    /// Planned resource `i` was not started: the deadline was near.
    Deferred(usize),
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
        let Some(policies) = super::load_policies(&self.store, &mut out, force).await else { return out };
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

    /// Run `jobs`, at most the engine's concurrency at once, starting none after `stop_at` (what
    /// is left is `deferred`, retryable, saying why); then the records of the resources the jobs
    /// read, and the record of each planned resource, in order. A correction's lag is the caller's.
    pub(super) async fn run_jobs(
        &self,
        policies: &Policies,
        planned: &[Planned],
        jobs: Vec<Job<A::Group>>,
        how: Run,
    ) -> (Vec<Record>, Vec<Record>) {
        let mut read = Vec::new();
        let mut records: Vec<Option<Record>> = vec![None; planned.len()];
        let mut written = vec![None; planned.len()];
        let mut deferred = vec![false; planned.len()];
        let size: u64 = jobs.iter().map(Job::size).sum();
        let mut done = 0;
        self.report("write", 0, size);
        let mut results = stream::iter(jobs)
            .map(|job| async move { self.run(policies, planned, job, how).await })
            .buffer_unordered(self.concurrency);
        while let Some(finished) = results.next().await {
            for d in finished {
                done += 1;
                match d {
                    Done::Record(record) => read.push(record),
                    Done::Replaced(i, record) => records[i] = Some(record),
                    Done::Written(i, result) => written[i] = Some(result),
                    Done::Deferred(i) => deferred[i] = true,
                }
            }
            self.report("write", done.min(size), size);
        }
        let mut out = Vec::with_capacity(planned.len());
        for (i, p) in planned.iter().enumerate() {
            if let Some(record) = records[i].take() {
                out.push(record);
                continue;
            }
            let ok = matches!(written[i], Some(Ok(())));
            let elapsed = p.started.elapsed().as_millis() as u64;
            let mut record = Record::from_plan(self.cloud(), &p.policy.policy, &p.plan, ok, elapsed);
            if policies.is_set() {
                record.infra_id = Some(p.policy.infra_id.clone());
            }
            record.reason = contests::reason(&p.plan);
            out.push(match written[i].take() {
                // Deleted since it was listed or read: nothing left to enforce.
                Some(Err(e)) if e.class == ErrorClass::NotFound => {
                    Record::gone(self.cloud(), &p.resource, &p.policy.policy.version, e.to_string())
                }
                Some(Err(e)) => e.into_record(record),
                None if deferred[i] => record.failing(Failure::Transient, how.deferred.to_string()),
                _ => record,
            });
        }
        (read, out)
    }

    pub(super) fn report(&self, phase: &str, done: u64, total: u64) {
        if let Some(p) = &self.progress {
            p(phase, done, total);
        }
    }

    async fn run(&self, policies: &Policies, planned: &[Planned], job: Job<A::Group>, how: Run) -> Vec<Done> {
        let past = how.stop_at.is_some_and(|t| Instant::now() >= t);
        match job {
            Job::Read(r) if past => {
                let why = how.deferred.to_string();
                let record = Record::failed(self.cloud(), &r, &policies.version(), why.clone());
                vec![Done::Record(record.failing(Failure::Transient, why))]
            }
            Job::Read(r) => {
                let record = self.reconcile(policies, &r, Current::Listed, Cause::Other).await;
                // The listing carried no tags: the drift was first seen by this reconcile's read.
                let seen = epoch_ms().saturating_sub(record.latency_ms);
                vec![Done::Record(since(record, seen))]
            }
            Job::Reread(i) if past => vec![Done::Deferred(i)],
            // A correction answering somebody's change is counted by the batch once written.
            Job::Reread(i) => {
                let r = &planned[i].resource;
                let record = match how.locks_held {
                    true => self.reconcile_held(policies, r, Current::Listed, Cause::Other).await,
                    false => self.reconcile(policies, r, Current::Listed, Cause::Other).await,
                };
                vec![Done::Replaced(i, record)]
            }
            Job::Write { members, .. } if past => members.into_iter().map(Done::Deferred).collect(),
            Job::Write { batching, set, members } => self
                .write_split(planned, batching, &set, members)
                .await
                .into_iter()
                .map(|(i, result)| Done::Written(i, result))
                .collect(),
        }
    }

    /// Send one write; on a failure that is not throttling, send each half again, down to single
    /// resources, so one bad resource does not fail its neighbours.
    async fn write_split(
        &self,
        planned: &[Planned],
        batching: Batching<A::Group>,
        set: &TagMap,
        members: Vec<usize>,
    ) -> Vec<(usize, Result<(), CloudError>)> {
        let mut done = Vec::with_capacity(members.len());
        let mut queue = vec![members];
        while let Some(members) = queue.pop() {
            match self.send(planned, batching, set, &members).await {
                Ok(failed) => {
                    done.extend(members.iter().enumerate().map(|(at, i)| match failed.iter().find(|(f, _)| *f == at) {
                        Some((_, e)) => (*i, Err(e.clone())),
                        None => (*i, Ok(())),
                    }))
                }
                Err(e) if members.len() > 1 && e.class != ErrorClass::Throttled => {
                    let (a, b) = members.split_at(members.len() / 2);
                    queue.push(a.to_vec());
                    queue.push(b.to_vec());
                }
                Err(e) => done.extend(members.into_iter().map(|i| (i, Err(e.clone())))),
            }
        }
        done
    }

    /// One call for `members`; on success, the positions in `members` it failed for (a shared call
    /// may answer per resource). Sent once: the client has retried it already (the AWS SDK's
    /// standard mode within its retry quota, ARM by `Backoff::ARM_BUSY`), and a write still
    /// throttled after that is failed, retryable, for the next sweep — another round here would
    /// spend the account's shared bucket outside the SDK's quota.
    async fn send(
        &self,
        planned: &[Planned],
        batching: Batching<A::Group>,
        set: &TagMap,
        members: &[usize],
    ) -> Result<Vec<(usize, CloudError)>, CloudError> {
        match batching {
            Batching::Shared { group, .. } => {
                let resources: Vec<&ResourceRef> = members.iter().map(|i| &planned[*i].resource).collect();
                self.adapter.write_shared(group, &resources, set).await
            }
            Batching::Alone | Batching::Reread => {
                let p = &planned[members[0]];
                self.adapter.write(&p.resource, set, &p.current).await.map(|()| Vec::new())
            }
        }
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

/// A resource's identity across listings: its ARN on AWS, its ID ignoring case on Azure.
pub(super) fn identity(cloud: Cloud, r: &ResourceRef) -> String {
    match cloud {
        Cloud::Aws => r.arn.clone().unwrap_or_else(|| r.id.clone()),
        Cloud::Azure => r.id.to_ascii_lowercase(),
    }
}

/// A corrected record's compliance lag runs from `seen_ms`.
fn since(record: Record, seen_ms: u64) -> Record {
    if record.status == Status::Applied {
        record.in_line_since(Some(seen_ms), epoch_ms())
    } else {
        record
    }
}

/// `jobs` taken from each pacing key in turn, each key's in their order.
fn in_turn<G>(jobs: Vec<Job<G>>, key: impl Fn(&Job<G>) -> String) -> Vec<Job<G>> {
    let mut by_key: BTreeMap<String, std::collections::VecDeque<Job<G>>> = BTreeMap::new();
    for job in jobs {
        by_key.entry(key(&job)).or_default().push_back(job);
    }
    let mut out = Vec::new();
    while !by_key.is_empty() {
        by_key.retain(|_, q| {
            out.extend(q.pop_front());
            !q.is_empty()
        });
    }
    out
}

/// The planned writes as jobs: shared calls grouped by identical delta, the rest alone.
pub(super) fn batches<A: Adapter>(cloud: &A, planned: &[Planned]) -> Vec<Job<A::Group>> {
    let mut groups: BTreeMap<(Batching<A::Group>, &TagMap), Vec<usize>> = BTreeMap::new();
    let mut jobs = Vec::new();
    for (i, p) in planned.iter().enumerate() {
        if !p.plan.writes() {
            continue;
        }
        match cloud.batching(&p.resource) {
            Batching::Reread => jobs.push(Job::Reread(i)),
            Batching::Alone => {
                jobs.push(Job::Write { batching: Batching::Alone, set: p.plan.set.clone(), members: vec![i] })
            }
            shared => groups.entry((shared, &p.plan.set)).or_default().push(i),
        }
    }
    for ((batching, set), members) in groups {
        let max = match batching {
            Batching::Shared { max, .. } => max.max(1),
            _ => 1,
        };
        for chunk in members.chunks(max) {
            jobs.push(Job::Write { batching, set: set.clone(), members: chunk.to_vec() });
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    #[test]
    fn jobs_are_taken_from_each_pacing_key_in_turn() {
        let jobs: Vec<super::Job<()>> = [0, 1, 2, 3, 4, 5].into_iter().map(super::Job::Reread).collect();
        let key = |j: &super::Job<()>| match j {
            super::Job::Reread(i) if *i < 4 => "a".to_string(),
            _ => "b".to_string(),
        };
        let order: Vec<usize> = super::in_turn(jobs, key)
            .iter()
            .map(|j| match j {
                super::Job::Reread(i) => *i,
                _ => usize::MAX,
            })
            .collect();
        assert_eq!(order, [0, 4, 1, 5, 2, 3]);
    }

    use super::super::memory::{tags, Memory};
    use super::super::tests::{engine, OWNED, POLICY};
    use super::*;
    use tagwarden_core::status::StatusReport;

    const IN_LINE: [(&str, &str); 3] = [OWNED, ("team", "platform"), ("env", "prod")];

    fn status_of(out: &Outcome, id: &str) -> Status {
        out.records.iter().find(|r| r.resource.ends_with(id)).map(|r| r.status).unwrap_or(Status::Gone)
    }

    #[tokio::test]
    async fn identical_deltas_share_calls_nothing_is_removed_and_a_second_sweep_writes_nothing() {
        let drifted = tags(&[OWNED, ("team", "legacy"), ("owner", "alice")]);
        let cloud = Memory::with(&[
            ("i-1", drifted.clone()),
            ("i-2", drifted.clone()),
            ("i-3", drifted.clone()),
            ("vol-1", tags(&[OWNED])),
            ("i-9", tags(&IN_LINE)),
            ("i-foreign", tags(&[("kubernetes.io/cluster/other", "owned")])),
        ]);
        let engine = engine(cloud, POLICY);
        let (cloud, store) = (&engine.adapter, &engine.store);
        let out = engine.sweep(true, None, None).await;
        // i-1..3 share one delta, two a call; vol-1 is written alone; i-9 needs nothing.
        assert_eq!(cloud.writes(), 3);
        assert_eq!(out.records.len(), 5, "every owned resource is a record: {:?}", out.records);
        for id in ["i-1", "i-2", "i-3", "vol-1"] {
            assert_eq!(status_of(&out, id), Status::Applied, "{id}");
        }
        assert_eq!(status_of(&out, "i-9"), Status::Unchanged);
        assert_eq!(cloud.get("i-1"), tags(&[OWNED, ("team", "platform"), ("env", "prod"), ("owner", "alice")]));
        assert_eq!(cloud.get("i-foreign"), tags(&[("kubernetes.io/cluster/other", "owned")]));
        assert!(store.source.statuses.lock().expect("statuses").contains_key(&None), "the status report is written");

        let again = engine.sweep(true, None, None).await;
        assert_eq!(cloud.writes(), 3, "a sweep after a sweep writes nothing");
        assert!(again.records.iter().all(|r| r.status == Status::Unchanged));
    }

    /// A deployment in audit: the event path, a batch and a sweep write nothing (the cloud's own
    /// count), while the records and the status report's audit section list every drifted owned
    /// resource before → after; switched to enforce, the next sweep writes exactly that set.
    #[tokio::test]
    async fn an_audit_writes_nothing_on_every_path_and_enforce_then_writes_what_it_reported() {
        let drifted = tags(&[OWNED, ("team", "legacy"), ("owner", "alice")]);
        let cloud = Memory::with(&[
            ("i-1", drifted.clone()),
            ("i-2", drifted.clone()),
            ("vol-1", tags(&[OWNED])),
            ("i-9", tags(&IN_LINE)),
            ("i-foreign", tags(&[("kubernetes.io/cluster/other", "owned")])),
        ]);
        let mut engine = engine(cloud, POLICY);
        engine.mode = super::super::Mode::Audit;
        let event = super::super::tests::tag_change(&["i-1", "vol-1"]);
        let out = engine.handle_event(&event, None).await;
        assert_eq!((engine.adapter.writes(), status_of(&out, "i-1")), (0, Status::WouldApply));
        let outs = engine.handle_events(&[event.clone(), super::super::tests::tag_change(&["i-2"])], None).await;
        assert!(outs.iter().flat_map(|o| &o.records).all(|r| r.status == Status::WouldApply), "{outs:?}");
        let out = engine.sweep(true, None, None).await;
        assert_eq!(engine.adapter.writes(), 0, "an audit writes nothing");
        let audited: Vec<(String, Vec<String>)> = out
            .records
            .iter()
            .filter(|r| !r.audited.is_empty())
            .map(|r| {
                (r.resource.clone(), r.audited.iter().map(|c| format!("{}:{:?}->{}", c.key, c.old, c.new)).collect())
            })
            .collect();
        assert_eq!(audited.len(), 3, "{audited:?}");
        assert!(audited[0].1.contains(&"team:Some(\"legacy\")->platform".to_string()), "{audited:?}");
        assert_eq!(out.metrics.sweeps_completed, 1, "an audit sweep is a sweep");
        let report = engine.store.source.statuses.lock().expect("statuses").get(&None).cloned().expect("report");
        let audit = report.audit.expect("an audit section");
        assert_eq!(audit.mode, Some(tagwarden_core::mode::ClusterMode::Audit));
        assert_eq!(
            (audit.counts.would_write, audit.counts.in_line, audit.counts.drifted, audit.counts.owned),
            (3, 1, 3, 4)
        );
        let reported: Vec<(String, TagMap)> = audit
            .writes
            .iter()
            .map(|w| (w.resource.clone(), w.changes.iter().map(|c| (c.key.clone(), c.new.clone())).collect()))
            .collect();

        // Enforced: exactly the reported set, nothing more.
        engine.mode = super::super::Mode::Enforce;
        let before: BTreeMap<String, TagMap> = ["i-1", "i-2", "vol-1", "i-9", "i-foreign"]
            .iter()
            .map(|id| (id.to_string(), engine.adapter.get(id)))
            .collect();
        engine.sweep(true, None, None).await;
        let mut written = Vec::new();
        for (id, was) in &before {
            let now = engine.adapter.get(id);
            let delta: TagMap =
                now.iter().filter(|(k, v)| was.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect();
            assert!(was.keys().all(|k| now.contains_key(k)), "nothing removed from {id}");
            if !delta.is_empty() {
                written.push((
                    reported.iter().find(|(r, _)| r.ends_with(id.as_str())).map(|(r, _)| r.clone()).unwrap_or_default(),
                    delta,
                ));
            }
        }
        written.sort();
        let mut reported = reported;
        reported.sort();
        assert_eq!(written, reported, "the first enforce sweep writes what the audit reported");
    }

    /// A cluster's `enforce: false` audits all of it; `auditKeys` only those keys: the others are
    /// written.
    #[tokio::test]
    async fn a_cluster_audited_by_its_policy_and_a_key_audited_beside_enforced_ones() {
        let off = "version: 1\ninfraID: c-1\nenforce: false\ntags: {team: platform, env: prod}\n";
        let engine_off = engine(Memory::with(&[("i-1", tags(&[OWNED]))]), off);
        let out = engine_off.sweep(true, None, None).await;
        assert_eq!((engine_off.adapter.writes(), status_of(&out, "i-1")), (0, Status::WouldApply));
        let report = engine_off.store.source.statuses.lock().expect("statuses").get(&None).cloned().expect("report");
        assert_eq!(report.audit.expect("audit").mode, Some(tagwarden_core::mode::ClusterMode::Audit));

        let keys = "version: 1\ninfraID: c-1\ntags: {team: platform, env: prod}\nauditKeys: [env]\n";
        let engine = engine(Memory::with(&[("i-1", tags(&[OWNED])), ("i-2", tags(&[OWNED]))]), keys);
        let out = engine.handle_event(&super::super::tests::tag_change(&["i-1"]), None).await;
        let r = &out.records[0];
        assert_eq!(r.status, Status::Applied);
        assert_eq!((r.changes.len(), r.changes[0].key.as_str(), r.audited[0].key.as_str()), (1, "team", "env"));
        engine.sweep(true, None, None).await;
        for id in ["i-1", "i-2"] {
            assert_eq!(engine.adapter.get(id), tags(&[OWNED, ("team", "platform")]), "{id}: env only reported");
        }
        let report = engine.store.source.statuses.lock().expect("statuses").get(&None).cloned().expect("report");
        let audit = report.audit.expect("audit");
        assert_eq!((audit.mode, audit.counts.would_write), (Some(tagwarden_core::mode::ClusterMode::Mixed), 2));
    }

    #[tokio::test]
    async fn a_refused_resource_fails_alone_and_is_reported() {
        let cloud = Memory {
            refuse: ["i-2".to_string()].into(),
            ..Memory::with(&[("i-1", tags(&[OWNED])), ("i-2", tags(&[OWNED]))])
        };
        let engine = engine(cloud, POLICY);
        let out = engine.sweep(true, None, None).await;
        // One shared call refused, then each half alone.
        assert_eq!(engine.adapter.writes(), 3);
        assert_eq!((status_of(&out, "i-1"), status_of(&out, "i-2")), (Status::Applied, Status::Failed));
        assert!(!out.must_retry(), "a permanent refusal is reported, not retried: {out:?}");
        let statuses = engine.store.source.statuses.lock().expect("statuses");
        let report: Vec<&str> = statuses[&None].failures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(report, ["i-2"], "the refusal is in the status report");
    }

    /// Two parts of one deployment swept apart (each over its own part's resources): the status
    /// report ends with both parts' failures and both parts named, whichever ran last; a part
    /// swept again in line drops only its own failure.
    #[tokio::test]
    async fn parts_swept_apart_add_up_in_one_status_report() {
        use super::super::memory::resource;
        // The in-memory cloud names resources by ARN (`…:unknown/<id>`): each part is a prefix of them.
        let (a1, a2, b1) = ("a/vm-1", "a/vm-2", "b/vm-1");
        let (part_a, part_b) = (resource("a").to_string(), resource("b").to_string());
        let whole = engine(Memory::default(), POLICY);
        let part = |ids: &[&str], refused: &[&str]| Memory {
            refuse: refused.iter().map(|s| s.to_string()).collect(),
            ..Memory::with(&ids.iter().map(|id| (*id, tags(&[OWNED]))).collect::<Vec<_>>())
        };
        let out = whole.part(part(&[a1, a2], &[a2]), part_a.clone()).sweep(true, None, None).await;
        assert_eq!((status_of(&out, a1), status_of(&out, a2)), (Status::Applied, Status::Failed));
        let out = whole.part(part(&[b1], &[b1]), part_b.clone()).sweep(true, None, None).await;
        assert_eq!(status_of(&out, b1), Status::Failed);
        let report = |e: &Engine<Memory>| e.store.source.statuses.lock().expect("statuses")[&None].clone();
        let failed = |r: &StatusReport| {
            let mut f: Vec<String> = r.failures.iter().map(|f| f.resource.clone()).collect();
            f.sort();
            f
        };
        let both = report(&whole);
        assert_eq!(failed(&both), [resource(a2).to_string(), resource(b1).to_string()], "each part's failure is kept");
        assert_eq!(both.parts.keys().collect::<Vec<_>>(), [&part_a, &part_b]);
        // Part a again, its refusal lifted: a's failure goes, b's stays.
        whole.part(part(&[a1, a2], &[]), part_a.clone()).sweep(true, None, None).await;
        assert_eq!(failed(&report(&whole)), [resource(b1).to_string()]);
    }

    #[tokio::test]
    async fn past_the_deadline_writes_are_deferred_and_retried() {
        let cloud = Memory::with(&[("i-1", tags(&[OWNED])), ("bucket-1", tags(&[OWNED])), ("vol-1", tags(&[OWNED]))]);
        let engine = engine(cloud, POLICY);
        let out = engine.sweep(true, None, Some(Instant::now())).await;
        assert_eq!(engine.adapter.writes(), 0);
        assert_eq!(out.records.len(), 3);
        assert!(out.records.iter().all(|r| r.status == Status::Failed && r.failure == Some(Failure::Transient)));
        assert!(out.must_retry());
        assert_eq!(out.metrics.sweeps_completed, 0, "a sweep that ran out of time did not complete");
    }

    #[tokio::test]
    async fn a_replace_style_write_keeps_a_tag_added_after_the_listing() {
        let cloud = Memory::with(&[("bucket-1", tags(&[OWNED, ("team", "legacy")]))]);
        *cloud.added_after_listing.lock().expect("lock") = Some(("bucket-1".into(), "cost".into(), "cc-7".into()));
        let engine = engine(cloud, POLICY);
        let out = engine.sweep(true, None, None).await;
        assert_eq!(status_of(&out, "bucket-1"), Status::Applied);
        let want = tags(&[OWNED, ("team", "platform"), ("env", "prod"), ("cost", "cc-7")]);
        assert_eq!(engine.adapter.get("bucket-1"), want);
    }

    #[tokio::test]
    async fn a_failed_listing_is_reported_and_everything_else_is_swept() {
        let cloud = Memory {
            denied_listing: true,
            ..Memory::with(&[("i-1", tags(&[OWNED])), ("vol-1", tags(&[OWNED, ("team", "legacy")]))])
        };
        let engine = engine(cloud, POLICY);
        let out = engine.sweep(true, None, None).await;
        assert!(out.error.is_none(), "the sweep went on: {out:?}");
        assert_eq!((status_of(&out, "i-1"), status_of(&out, "vol-1")), (Status::Applied, Status::Applied));
        let listing: Vec<&Record> = out.records.iter().filter(|r| r.is_listing()).collect();
        assert_eq!(listing.len(), 1, "{:?}", out.records);
        let (l, error) = (listing[0], listing[0].error.as_deref().unwrap_or_default());
        assert_eq!((l.status, l.resource_type.as_str()), (Status::Failed, "iam:GetAccountAuthorizationDetails"));
        assert!(error.contains("AccessDenied") && error.contains("fix: grant"), "names the call and the fix: {error}");
        assert_eq!((out.failed(), out.metrics.listing_failures), (1, 1));
        let statuses = engine.store.source.statuses.lock().expect("statuses");
        let failures: Vec<&str> = statuses[&None].failures.iter().map(|f| f.resource_type.as_str()).collect();
        assert_eq!(failures, ["iam:GetAccountAuthorizationDetails"], "the status report shows the failed listing");
    }

    #[tokio::test]
    async fn a_resource_deleted_after_the_listing_is_gone_not_failed() {
        for bare_listing in [false, true] {
            let cloud = Memory { bare_listing, ..Memory::with(&[("i-1", tags(&[OWNED])), ("vol-1", tags(&[OWNED]))]) };
            *cloud.deleted_after_listing.lock().expect("lock") = Some("vol-1".into());
            let out = engine(cloud, POLICY).sweep(true, None, None).await;
            assert_eq!((status_of(&out, "i-1"), status_of(&out, "vol-1")), (Status::Applied, Status::Gone));
            assert_eq!(out.failed(), 0, "gone is not a failure: {:?}", out.records);
            assert!(!out.must_retry());
        }
    }

    #[tokio::test]
    async fn a_listing_without_tags_is_read_and_a_dry_run_writes_nothing() {
        let cloud = Memory { bare_listing: true, ..Memory::with(&[("i-1", tags(&[OWNED])), ("i-2", tags(&IN_LINE))]) };
        let mut engine = engine(cloud, POLICY);
        engine.dry_run = true;
        let out = engine.sweep(true, None, None).await;
        assert_eq!((status_of(&out, "i-1"), status_of(&out, "i-2")), (Status::WouldApply, Status::Unchanged));
        let cloud = &engine.adapter;
        assert_eq!((cloud.writes(), cloud.reads.load(std::sync::atomic::Ordering::Relaxed)), (0, 2));
        assert!(engine.store.source.statuses.lock().expect("statuses").is_empty(), "a dry run writes no report");
        assert_eq!(out.metrics.sweeps_completed, 0, "a dry run is no sweep the alarm may count");
        engine.dry_run = false;
        let out = engine.sweep(true, None, None).await;
        assert_eq!((status_of(&out, "i-1"), engine.adapter.writes()), (Status::Applied, 1));
        assert_eq!(out.metrics.sweeps_completed, 1);
        let emitted = tagwarden_core::report::EVENT_COUNTS.iter().find(|(m, _)| m.name == "SweepsCompleted");
        assert_eq!(emitted.map(|(_, count)| count(&out.metrics)), Some(1), "the heartbeat is emitted");
    }
}
