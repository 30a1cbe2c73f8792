//! The enforcement engine, once for both clouds. An event ([`Engine::handle_event`]) or a sweep
//! ([`sweep`]) names resources; each one is locked, re-read (unless its tags are known and still
//! fresh), planned against the policy of the cluster that owns it (one of a cluster set's, found
//! from the tags read), written at most once, and recorded ([`Engine::reconcile`]). What differs
//! between clouds is an [`Adapter`]: how tags are read and written, how owned resources are
//! listed, and how writes are grouped (`aws::adapter`, `azure::adapter`). An [`Engine`] owns its
//! cloud's adapter, its policy store and the function's own identities; the functions and the CLI
//! call it directly.
//!
//! Loop safety takes three guards: an event the function's own identities caused is dropped before
//! any call; planning is idempotent, so an own write read back finds no drift (the only guard
//! for AWS's `Tag Change on Resource`, which names no caller against tagwarden's own writes); and
//! a key another controller keeps changing back is contested after a few corrections, never fought
//! over (`contests`, `tagwarden_core::contest`).
//!
//! The invariants it holds, unit-tested below against an in-memory cloud: a resource is written
//! at most once per policy version however many events name it at once (a duplicate waits for
//! the lock, re-reads and finds nothing to do); no write ever removes a tag; an audit (the
//! deployment's [`Mode`], a cluster's `enforce: false`, a policy's `auditKeys`, or a dry run: one
//! mechanism, `tagwarden_core::plan::audit`, applied right before the write on every path) writes
//! nothing it audits and reports it as what would be written; a failed read or write is a record, never a dropped resource; a resource owned by two
//! clusters is never written.

mod batch;
mod coalesce;
mod contests;
pub mod sweep;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use tokio::sync::Semaphore;

use crate::cloud_error::{CloudError, ErrorClass};
use crate::inflight::ResourceLocks;
use crate::policy_store::{PolicySource, PolicyStore};
pub use coalesce::POLICY_SWEEP_WINDOW;
pub use contests::Cause;
use sweep::{Batching, ClusterListing, Progress, Unindexed};
use tagwarden_core::cloud::{Cloud, ClusterRef};
pub use tagwarden_core::contest::YieldTo;
use tagwarden_core::events::{Event, EventKind};
pub use tagwarden_core::mode::Mode;
use tagwarden_core::plan;
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::policy::clusters::{Owner, Policies};
use tagwarden_core::reason::StopKind;
use tagwarden_core::report::{epoch_ms, Failure, Outcome, Record};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

/// Resources the events of a batch imply, by the position of their event, with their tags when
/// the lookup carries them; and the lookups that failed, as records of their event.
#[derive(Debug, Default)]
pub struct Implied {
    pub found: Vec<(usize, ResourceRef, Option<TagMap>)>,
    pub failed: Vec<(usize, Record)>,
}

/// Where a reconcile gets a resource's current tags.
#[derive(Debug, Clone, Copy)]
pub enum Current<'a> {
    /// Known and fresh (a listing carried them, or an event's hint): no read.
    Known(&'a TagMap),
    /// Read; an event named the resource, so "not found" may be "not visible yet" and is waited out.
    Read,
    /// Read; a listing named it a moment ago, so "not found" means it was deleted since: `gone`.
    Listed,
}

/// A resource's tags as read, and its ARN when the cloud names it differently from the event
/// (an IAM path), for overrides that match on it.
pub struct Read {
    pub tags: TagMap,
    pub arn: Option<String>,
}

/// What a cloud does differently.
#[allow(async_fn_in_trait)]
pub trait Adapter: Send + Sync {
    /// Where this cloud's policies are published.
    type Source: PolicySource;
    /// What the resources whose writes share a call have in common (AWS: the API); a cloud that
    /// never shares a call names none (`std::convert::Infallible`).
    type Group: Copy + Ord + std::fmt::Debug + Send + Sync;
    /// Resources reconciled at once, and calls in flight, unless the engine is told otherwise.
    const CONCURRENCY: usize;
    fn cloud(&self) -> Cloud;
    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError>;
    /// The tags of a resource a listing just named: "not found" is returned at once, since it
    /// means the resource was deleted, not that it is not visible yet.
    async fn read_listed(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.read(r).await
    }
    /// Write `set` (every key that must change; never a removal). `current` is what was read,
    /// for the services whose write replaces the whole tag set.
    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError>;
    /// The tags of each of `resources`, in order, in as few calls as the cloud allows (at most
    /// `concurrency` in flight); "not found" is waited out as [`Adapter::read`] does.
    async fn read_all(&self, resources: &[&ResourceRef], concurrency: usize) -> Vec<Result<Read, CloudError>> {
        // Indices, not references: see `handle_event`.
        stream::iter(0..resources.len()).map(|i| self.read(resources[i])).buffered(concurrency.max(1)).collect().await
    }
    /// Resources the events of a batch imply but do not name (a new instance's volumes), each
    /// with the position of its event and its tags when the lookup carries them; a lookup that
    /// failed is a record of its event.
    async fn implied_all(&self, events: &[&Event], version: &str) -> Implied {
        let _ = (events, version);
        Implied::default()
    }
    /// Every resource one of `cluster`'s ownership tags marks, each once, with its tags when the
    /// listing carries them; `pages` is told how many were found so far as pages arrive. A listing
    /// that failed part-way keeps what it found and names its error.
    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing;
    /// [`Adapter::list_owned`], and what the sweep must say about how it listed: each time a
    /// cheaper listing was refused and a dearer one used instead, why (reported and counted as a
    /// fallback, not a failure: everything was listed).
    async fn list_owned_noting(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        self.list_owned(cluster, pages).await
    }
    /// [`Adapter::list_owned_noting`] for every swept cluster, in `clusters`' order: one listing
    /// each, unless the cloud can list several ownership keys in one query (Azure Resource Graph).
    /// `pages` is told how many were found so far, all clusters together.
    async fn list_owned_all(&self, clusters: &[ClusterRef<'_>], pages: &(dyn Fn(usize) + Sync)) -> Vec<ClusterListing> {
        let mut out = Vec::with_capacity(clusters.len());
        let mut before = 0;
        for cluster in clusters {
            let listed = self.list_owned_noting(*cluster, &|n| pages(before + n)).await;
            before += listed.found.len();
            out.push(listed);
        }
        out
    }
    /// Resources the owned listing cannot see, with their tags, whoever owns them (the engine
    /// keeps the swept clusters'), given what it found; the ones that could not be read; and the
    /// listings that failed.
    async fn list_unindexed(&self, owned: &[sweep::Listed]) -> Unindexed {
        let _ = owned;
        Unindexed::default()
    }
    /// Why this cloud cannot sweep, if it cannot (it was given nowhere to list).
    fn cannot_sweep(&self) -> Option<&'static str> {
        None
    }
    /// The budget `r`'s writes are paced against, where the adapter paces by more than one (Azure:
    /// its subscription): a sweep takes its jobs from each in turn, so no budget's pace holds every
    /// slot. One for all by default.
    fn pacing_key<'r>(&self, r: &'r ResourceRef) -> &'r str {
        let _ = r;
        ""
    }
    /// How a sweep sends the write of `r`.
    fn batching(&self, r: &ResourceRef) -> Batching<Self::Group> {
        let _ = r;
        Batching::Alone
    }
    /// One call that writes `set` on every resource of a [`Batching::Shared`] `group`; on
    /// success, the positions in `resources` it failed for.
    async fn write_shared(
        &self,
        group: Self::Group,
        resources: &[&ResourceRef],
        set: &TagMap,
    ) -> Result<Vec<(usize, CloudError)>, CloudError> {
        let _ = group;
        let mut failed = Vec::new();
        for (at, r) in resources.iter().enumerate() {
            if let Err(e) = self.write(r, set, &TagMap::new()).await {
                failed.push((at, e));
            }
        }
        Ok(failed)
    }
}

/// The enforcement engine over one cloud: its adapter, its policy store, and the function's own
/// identities, whose events are not reconciled.
pub struct Engine<A: Adapter> {
    /// How this cloud reads, writes and lists tags.
    pub adapter: A,
    /// Where the policies are, with the one in force cached (shared with [`Engine::part`]'s).
    pub store: Arc<PolicyStore<A::Source>>,
    /// The function's own identities (its role ARN; its principal and client ids).
    own: Vec<String>,
    /// One reconcile at a time per resource: a duplicate event handled concurrently waits, then
    /// re-reads and finds no drift, so a policy version costs one write per resource.
    in_flight: ResourceLocks,
    /// How many resources are reconciled at once, across every event of an invocation.
    permits: Semaphore,
    /// Resources reconciled at once, and a sweep's or a batch's write calls in flight.
    concurrency: usize,
    /// A person's preview: an audit of everything ([`Mode::Audit`]) that also leaves the status
    /// report and the contest state alone.
    pub dry_run: bool,
    /// The deployment's mode (`TAGWARDEN_MODE`): in [`Mode::Audit`] every cluster is audited —
    /// evaluated and reported as in enforce, nothing written. The strictest of it, the cluster's
    /// `enforce` and the policy's `auditKeys` wins (`tagwarden_core::mode`).
    pub mode: Mode,
    /// Told how a sweep is going (the CLI draws a progress bar).
    pub progress: Option<Progress>,
    /// A cluster's policy-change sweeps are at least this far apart ([`POLICY_SWEEP_WINDOW`]).
    pub policy_window: Duration,
    /// When each cluster was last swept for a policy change, and what was listed beside it.
    coalesce: coalesce::Coalesce,
    /// The part of the deployment this engine sweeps (a resource-ID prefix, [`Engine::part`]);
    /// `None`: all of it.
    part: Option<String>,
    /// The contested keys kept in each cluster's contest state, and this instance's corrections.
    contests: contests::Contests,
    /// The controllers whose changes may contest a key (`TAGWARDEN_YIELD_TO`); every other
    /// writer's change is drift, corrected every time. By default the cloud's
    /// ([`YieldTo::default_for`]).
    pub yield_to: YieldTo,
    /// Seconds since the epoch, as contests count them: the system clock, or a test's.
    pub clock: Clock,
}

/// A clock of seconds since the epoch ([`Engine::clock`]).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| epoch_ms() / 1000)
}

impl<A: Adapter> Engine<A> {
    /// The engine over `adapter` and `store`, ignoring the events `own` (the function's role ARN,
    /// principal or client ids) caused; `A::CONCURRENCY` resources at once.
    pub fn new(adapter: A, store: PolicyStore<A::Source>, own: Vec<String>) -> Self {
        Self::sharing(adapter, Arc::new(store), own, None)
    }

    /// [`Engine::new`] over a store other engines share, sweeping `part` of what the store's
    /// policies cover (see [`Engine::part`]; `None`: all of it): an AWS organization's engines,
    /// one per member account and region, share their account's store (`aws::organization`).
    pub fn sharing(adapter: A, store: Arc<PolicyStore<A::Source>>, own: Vec<String>, part: Option<String>) -> Self {
        let concurrency = A::CONCURRENCY.max(1);
        let cloud = adapter.cloud();
        Engine {
            adapter,
            store,
            own,
            in_flight: ResourceLocks::default(),
            permits: Semaphore::new(concurrency),
            concurrency,
            dry_run: false,
            mode: Mode::Enforce,
            progress: None,
            policy_window: POLICY_SWEEP_WINDOW,
            coalesce: coalesce::Coalesce::default(),
            part,
            contests: contests::Contests::default(),
            yield_to: YieldTo::default_for(cloud),
            clock: system_clock(),
        }
    }

    /// An engine over one part of this one's deployment: `adapter` lists and writes only within
    /// `part` (a resource-ID prefix, such as an Azure subscription's `/subscriptions/<id>`), the
    /// policies and settings are this engine's, and its sweep's status report is laid over the
    /// other parts' instead of replacing it (`status_store::report_sweep`). What is listed in a
    /// part is never remembered for a later policy-change sweep of the whole.
    pub fn part(&self, adapter: A, part: String) -> Engine<A> {
        Engine {
            adapter,
            store: Arc::clone(&self.store),
            own: self.own.clone(),
            in_flight: ResourceLocks::default(),
            permits: Semaphore::new(self.concurrency),
            concurrency: self.concurrency,
            dry_run: self.dry_run,
            mode: self.mode,
            progress: self.progress.clone(),
            policy_window: self.policy_window,
            coalesce: coalesce::Coalesce::default(),
            part: Some(part),
            contests: contests::Contests::default(),
            yield_to: self.yield_to.clone(),
            clock: self.clock.clone(),
        }
    }

    /// At most `n` (at least 1) resources reconciled, and calls in flight, at once.
    pub fn set_concurrency(&mut self, n: usize) {
        self.concurrency = n.max(1);
        self.permits = Semaphore::new(self.concurrency);
    }

    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    fn cloud(&self) -> Cloud {
        self.adapter.cloud()
    }

    /// The deployment's mode as the writes see it: a dry run audits everything.
    pub fn audit_mode(&self) -> Mode {
        if self.dry_run {
            Mode::Audit
        } else {
            self.mode
        }
    }

    /// Whether every key of cluster `policy` is audited (the deployment, a dry run, or the
    /// cluster's `enforce: false`).
    pub(crate) fn audits_all(&self, policy: &tagwarden_core::policy::Policy) -> bool {
        self.audit_mode() == Mode::Audit || !policy.enforce
    }

    /// What is audited taken out of `plan`'s write, right before it (`tagwarden_core::plan::audit`).
    pub(crate) fn audit(&self, policy: &LoadedPolicy, plan: &mut plan::Plan) {
        plan::audit(plan, &policy.policy, self.cloud(), self.audit_mode());
    }

    /// Re-read the policy now (a conditional GET, then validate and cache; a rejected version is
    /// counted and reported, and the last good one stays in force). Lists, reads and writes no
    /// resource: a policy change delivered where there is no time to sweep.
    pub async fn recheck_policy(&self) -> Outcome {
        let mut out = Outcome::default();
        out.metrics.events_received = 1;
        if let Some(policies) = load_policies(&self.store, &mut out, true).await {
            tracing::info!(version = %policies.version(), "policy re-checked; the sweep runs from the queue");
        }
        out
    }

    /// Reconcile every resource an event names (and implies), starting none after `stop_at`: the
    /// ones left are reported as deferred (retryable), so the event comes back and finds the
    /// finished ones unchanged. Ignored and own events make no call at all; with no valid policy,
    /// nothing is written and `error` says why.
    pub async fn handle_event(&self, event: &Event, stop_at: Option<Instant>) -> Outcome {
        let mut out = Outcome::default();
        out.metrics.events_received = 1;
        if event.is_ignored() || event.is_from(&self.own) {
            out.metrics.events_ignored = 1;
            tracing::info!(event = event.event_name, id = event.id, reason = ?event.reason, own = event.is_from(&self.own), "event ignored");
            return out;
        }
        let Some(policies) = load_policies(&self.store, &mut out, false).await else { return out };
        let version = policies.version();
        let mut targets: Vec<(ResourceRef, Option<TagMap>)> = event
            .resources
            .iter()
            .map(|r| (r.clone(), hint(&policies, self.cloud(), r, event.tags.as_ref())))
            .collect();
        let implied = self.adapter.implied_all(&[event], &version).await;
        targets.extend(implied.found.into_iter().map(|(_, r, tags)| (r, tags)));
        for (_, record) in implied.failed {
            out.push(record);
        }
        // Indices, not references, into the stream: a closure over `&T` trips rustc's
        // higher-ranked `Send` inference once the future is boxed as `Send` (rust-lang/rust#102211).
        let records = stream::iter(0..targets.len())
            .map(|i| {
                let (policies, version, (r, known)) = (&policies, &version, &targets[i]);
                async move {
                    if stop_at.is_some_and(|t| Instant::now() >= t) {
                        let why = tagwarden_core::reason::Deferred::EventHandedBack.to_string();
                        return Record::failed(self.cloud(), r, version, why.clone()).failing(Failure::Transient, why);
                    }
                    let current = known.as_ref().map_or(Current::Read, Current::Known);
                    let cause = cause_of(event);
                    self.reconcile(policies, r, current, cause).await.in_line_since(event.occurred_at_ms, epoch_ms())
                }
            })
            .buffered(self.concurrency)
            .collect::<Vec<_>>()
            .await;
        for record in records {
            let record = for_event(&mut out, event, record);
            out.push(record);
        }
        out
    }

    /// Read (unless the tags are known), find its cluster's policy, plan and write one resource;
    /// a key another controller keeps changing is held back (`cause`: whether this correction
    /// answers a tag change, and so is counted, [`Cause`]).
    pub async fn reconcile(
        &self,
        policies: &Policies,
        r: &ResourceRef,
        current: Current<'_>,
        cause: Cause<'_>,
    ) -> Record {
        let held = self.in_flight.acquire(&lock_key(self.cloud(), r)).await;
        // The resource's lock first, then a permit: whoever holds a permit never waits for a lock,
        // so the two cannot deadlock. The semaphore is never closed.
        let _permit = self.permits.acquire().await;
        // Waited behind another reconcile of this resource: tags an event carried are stale now.
        let current = match current {
            Current::Known(_) if held.waited => Current::Read,
            current => current,
        };
        self.reconcile_held(policies, r, current, cause).await
    }

    /// [`Engine::reconcile`] for a caller that holds the resource's lock already (a batch).
    pub(crate) async fn reconcile_held(
        &self,
        policies: &Policies,
        r: &ResourceRef,
        mode: Current<'_>,
        cause: Cause<'_>,
    ) -> Record {
        let start = Instant::now();
        let version = policies.version();
        let version = &version;
        let mut resource = std::borrow::Cow::Borrowed(r);
        let read = match mode {
            Current::Known(tags) => Ok(Read { tags: tags.clone(), arn: None }),
            Current::Read => self.adapter.read(r).await,
            Current::Listed => self.adapter.read_listed(r).await,
        };
        let current = match read {
            Ok(read) => {
                if read.arn.is_some() && read.arn != r.arn {
                    resource.to_mut().arn = read.arn;
                }
                read.tags
            }
            Err(e) if e.class == ErrorClass::NotFound && matches!(mode, Current::Listed) => {
                return Record::gone(self.cloud(), r, version, e.to_string());
            }
            Err(e) => return e.into_record(Record::failed(self.cloud(), r, version, String::new())),
        };
        let r = resource.as_ref();
        let policy = match answer_to(policies, self.cloud(), r, &current) {
            Ok(p) => p,
            Err(record) => return *record,
        };
        let mut plan = plan::diff(&policy.policy, self.cloud(), &policy.infra_id, r, &current);
        self.hold_contested(policy, &mut plan, cause).await;
        self.audit(policy, &mut plan);
        let mut written = false;
        let mut error = None;
        if plan.writes() {
            match self.adapter.write(r, &plan.set, &current).await {
                Ok(()) => written = true,
                Err(e) => error = Some(e),
            }
        }
        if written {
            self.count_correction(policy, &plan, cause).await;
        }
        let elapsed = start.elapsed().as_millis() as u64;
        let mut record = Record::from_plan(self.cloud(), &policy.policy, &plan, written, elapsed);
        if policies.is_set() {
            record.infra_id = Some(policy.infra_id.clone());
        }
        record.reason = record.reason.or_else(|| contests::reason(&plan));
        match error {
            Some(e) => e.into_record(record),
            None => record,
        }
    }
}

/// Whether `event`'s corrections are counted: a tag change is somebody's (the function's own were
/// dropped before), an AWS creation is the first tagging, an Azure write may be either.
fn cause_of(event: &Event) -> Cause<'_> {
    let by = event.actor.as_deref();
    match (event.kind, event.cloud) {
        (EventKind::TagChange, _) => Cause::TagChange { by },
        (EventKind::Create, Cloud::Azure) => Cause::Write { by },
        _ => Cause::Other,
    }
}

/// The key of a resource's lock: ARM IDs compare case-insensitively, so one lock whichever casing
/// an event used.
fn lock_key(cloud: Cloud, r: &ResourceRef) -> String {
    match cloud {
        Cloud::Azure => r.id.to_ascii_lowercase(),
        Cloud::Aws => r.id.clone(),
    }
}

/// `record` as event `event`'s: a resource its cluster published no policy for counts as an
/// ignored event, and the first record names the outcome's cluster.
fn for_event(out: &mut Outcome, event: &Event, record: Record) -> Record {
    if record.ignored() {
        out.metrics.events_ignored += 1;
        tracing::info!(
            event = event.event_name,
            id = event.id,
            resource = record.resource,
            reason = record.error,
            "event ignored"
        );
    }
    if out.infra_id.is_none() {
        out.infra_id = record.infra_id.clone();
    }
    Record { event_id: event.id.clone(), ..record }
}

/// Event-carried tags (`Tag Change on Resource`) as a stand-in for a read of `r`, if they may be:
/// they are a hint, never proof of ownership, since whoever can put an event on the bus can claim
/// anything. They spare the read only when, read the way `r`'s service compares keys (IAM and
/// Azure ignore case: `Kubernetes.io/cluster/<id>` is the ownership tag on a role), they say no
/// enforced cluster owns `r`, and the plan made from them writes nothing. A claim of ownership or
/// a conflict is re-read, so a hint never makes writable what a fresh read would not.
fn hint(policies: &Policies, cloud: Cloud, r: &ResourceRef, tags: Option<&TagMap>) -> Option<TagMap> {
    let tags = tags?;
    let unclaimed = matches!(policies.owner(cloud, &r.kind, tags), Owner::NotOwned | Owner::Unpublished(_));
    let writes =
        answer_to(policies, cloud, r, tags).is_ok_and(|p| plan::plan(&p.policy, cloud, &p.infra_id, r, tags).writes());
    (unclaimed && !writes).then(|| tags.clone())
}

/// The policy a resource with `tags` is planned against, or the record of why it is left alone:
/// with one policy, everything is planned (the plan says what is not owned); in a set, a resource
/// owned by no enforced cluster is not owned, one owned by a cluster with no valid policy here is
/// ignored, and one owned by two clusters is a permanent failure, never written.
pub fn answer_to<'p>(
    policies: &'p Policies,
    cloud: Cloud,
    r: &ResourceRef,
    tags: &TagMap,
) -> Result<&'p Arc<LoadedPolicy>, Box<Record>> {
    match (policies.owner(cloud, &r.kind, tags), policies.single()) {
        (Owner::Cluster(p), _) | (Owner::NotOwned, Some(p)) => Ok(p),
        (Owner::NotOwned, None) => Err(Box::new(Record::not_owned(cloud, r, None, None))),
        (Owner::Unpublished(id), _) => {
            let why = format!("owned by cluster {id}, which has published no valid policy here: ignored");
            Err(Box::new(Record::not_owned(cloud, r, Some(id), Some(why))))
        }
        (Owner::Conflict(ids), _) => {
            let why = format!(
                "owned by clusters {}: a resource has one owner, so no cluster's policy is applied; remove the ownership tag that is wrong",
                ids.join(" and ")
            );
            let mut record =
                Record::failed(cloud, r, &policies.version(), String::new()).failing(Failure::Permanent, why);
            record.infra_id = ids.iter().find(|id| policies.get(id).is_some()).cloned();
            Err(Box::new(record))
        }
    }
}

/// The policies for an invocation, into `out`: each newer version that was rejected is counted,
/// listed, and reported beside its cluster's policy; with no valid version anywhere, `out.error`
/// says why and nothing is written.
pub async fn load_policies<S: PolicySource>(
    store: &PolicyStore<S>,
    out: &mut Outcome,
    force: bool,
) -> Option<Policies> {
    let loaded = store.load(force).await;
    for r in &loaded.rejected {
        out.metrics.policy_rejected += 1;
        crate::status_store::report_rejection(store, r).await;
        out.rejected.push(tagwarden_core::report::RejectedPolicy {
            cluster: r.cluster.clone(),
            in_force: r.in_force.clone(),
            errors: r.errors.clone(),
        });
    }
    match loaded.policies {
        Ok(p) => {
            out.infra_id = p.single().map(|p| p.infra_id.clone());
            Some(p)
        }
        Err(e) => {
            tracing::error!(error = %e, "fail closed");
            out.error = Some(StopKind::NoPolicy(e.to_string()).into());
            None
        }
    }
}

/// One status report per swept cluster, beside its policy, with its own records and its audit
/// section (the deployment in `mode`).
pub async fn report_sweeps<S: PolicySource>(
    store: &PolicyStore<S>,
    policies: &Policies,
    swept: &[Arc<LoadedPolicy>],
    records: &[Record],
    part: Option<&str>,
    mode: Mode,
) {
    for policy in swept {
        if policies.is_set() {
            // A listing made for every cluster (IAM, Route 53) that failed is each one's failure.
            let own: Vec<Record> = records
                .iter()
                .filter(|r| match r.infra_id.as_deref() {
                    Some(id) => id == policy.infra_id,
                    None => r.is_listing(),
                })
                .cloned()
                .collect();
            crate::status_store::report_sweep(store, policy, &own, part, mode).await;
        } else {
            crate::status_store::report_sweep(store, policy, records, part, mode).await;
        }
    }
}

#[cfg(test)]
pub(crate) mod memory;

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::memory::{resource, tags, Documents, Memory};
    use super::*;
    use crate::policy_store::Layout;
    use tagwarden_core::events::EventKind;
    use tagwarden_core::policy::cache::check;
    use tagwarden_core::report::Status;

    pub(super) const OWNED: (&str, &str) = ("kubernetes.io/cluster/c-1", "owned");
    pub(super) const POLICY: &str = "version: 1\ninfraID: c-1\ntags: {team: platform, env: prod}\n";

    pub(super) fn tag_change(ids: &[&str]) -> Event {
        Event {
            cloud: Cloud::Aws,
            kind: EventKind::TagChange,
            reason: None,
            service: "ec2".into(),
            event_name: "CreateTags".into(),
            account: None,
            region: None,
            actor: None,
            resources: ids.iter().map(|id| resource(id)).collect(),
            principals: Vec::new(),
            tags: None,
            replaced_with: None,
            validation_code: None,
            id: Some("e-1".into()),
            occurred_at_ms: None,
        }
    }

    /// An engine over `cloud`, with `policy` as its one policy document, re-read on every call.
    pub(super) fn engine(cloud: Memory, policy: &str) -> Engine<Memory> {
        let store =
            PolicyStore::new(Documents::new(Layout::One("p.yaml".into()), &[("p.yaml", policy)]), Duration::ZERO);
        Engine::new(cloud, store, Vec::new())
    }

    fn policy() -> Policies {
        let (policy, infra_id) = check(Cloud::Aws, vec![("p.yaml".into(), POLICY.to_string())]).expect("valid");
        Policies::one(std::sync::Arc::new(LoadedPolicy { policy, infra_id, fingerprint: "fp".into() }))
    }

    #[tokio::test]
    async fn duplicates_at_once_write_once_and_nothing_is_removed() {
        let r = resource("i-0abc");
        let engine = engine(Memory::with(&[(&r.id, tags(&[OWNED, ("team", "legacy"), ("owner", "alice")]))]), POLICY);
        let (p, cloud) = (policy(), &engine.adapter);
        // Ten events name the resource at once (a create, its tag change, redeliveries).
        let records =
            futures_util::future::join_all((0..10).map(|_| engine.reconcile(&p, &r, Current::Read, Cause::Other)))
                .await;
        assert_eq!(cloud.writes(), 1, "one write per resource per policy version");
        assert_eq!(records.iter().filter(|r| r.status == Status::Applied).count(), 1);
        assert_eq!(
            cloud.get(&r.id),
            tags(&[OWNED, ("team", "platform"), ("env", "prod"), ("owner", "alice")]),
            "unmanaged keys survive"
        );
        // Read again: in line, nothing to do.
        let again = engine.reconcile(&p, &r, Current::Read, Cause::Other).await;
        assert_eq!((again.status, cloud.writes()), (Status::Unchanged, 1));
    }

    #[tokio::test]
    async fn dry_run_not_owned_and_failures_are_records() {
        let p = policy();
        let r = resource("i-0def");
        let mut dry = engine(Memory::with(&[(&r.id, tags(&[OWNED]))]), POLICY);
        dry.dry_run = true;
        assert_eq!(dry.reconcile(&p, &r, Current::Read, Cause::Other).await.status, Status::WouldApply);
        assert_eq!(dry.adapter.writes(), 0, "a dry run writes nothing");

        let foreign = engine(Memory::with(&[(&r.id, tags(&[("kubernetes.io/cluster/other", "owned")]))]), POLICY);
        assert_eq!(foreign.reconcile(&p, &r, Current::Read, Cause::Other).await.status, Status::NotOwned);
        assert_eq!(foreign.adapter.writes(), 0);

        let missing = engine(Memory::default(), POLICY);
        let record = missing.reconcile(&p, &r, Current::Read, Cause::Other).await;
        assert_eq!((record.status, record.failure), (Status::Failed, Some(Failure::Transient)));
        assert!(record.error.as_deref().is_some_and(|e| e.contains("NotFound")), "{record:?}");
        let gone = missing.reconcile(&p, &r, Current::Listed, Cause::Other).await;
        assert_eq!((gone.status, gone.failure), (Status::Gone, None), "deleted after its listing: {gone:?}");
        let throttled = engine(Memory { throttled: true, ..Memory::with(&[(&r.id, tags(&[OWNED]))]) }, POLICY);
        let record = throttled.reconcile(&p, &r, Current::Read, Cause::Other).await;
        assert_eq!((record.status, record.failure), (Status::Failed, Some(Failure::Transient)));
    }

    /// A writer that removes `team` after every write: corrected `CORRECTIONS` times, then held
    /// back and reported, costing no write; `env`, drifted once, is still corrected.
    #[tokio::test]
    async fn a_key_removed_after_every_write_is_contested_after_the_count() {
        use tagwarden_core::contest::CORRECTIONS;
        let mut engine =
            engine(Memory::with(&[("i-0a", tags(&[OWNED, ("team", "platform"), ("env", "prod")]))]), POLICY);
        engine.yield_to = YieldTo::parse("arn:aws:sts::*:assumed-role/remover/*").expect("pattern");
        let mut event = tag_change(&["i-0a"]);
        event.actor = Some("arn:aws:sts::111122223333:assumed-role/remover/1".into());
        let drift = |key: &str, value: Option<&str>| {
            let mut all = engine.adapter.tags.lock().expect("tags");
            let t = all.get_mut("i-0a").expect("resource");
            match value {
                Some(v) => t.insert(key.into(), v.into()),
                None => t.remove(key),
            };
        };
        for round in 1..=CORRECTIONS + 2 {
            drift("team", None);
            let before = engine.adapter.writes();
            let out = engine.handle_event(&event, None).await;
            let (wrote, record) = (engine.adapter.writes() - before, &out.records[0]);
            if round <= CORRECTIONS {
                assert_eq!((wrote, record.status), (1, Status::Applied), "round {round}");
            } else {
                assert_eq!((wrote, record.status), (0, Status::Contested), "round {round}");
                assert_eq!(record.contested, ["team"]);
                assert_eq!(out.metrics.by_type["ec2:instance"].contested, 1);
            }
        }
        // Kept in the contest state, and shown in the report.
        let state = crate::status_store::read_contest_state(&engine.store, "c-1").await.expect("state");
        let contested: Vec<_> = state.contests.iter().filter(|c| c.is_contested()).collect();
        assert_eq!((contested.len(), contested[0].writer()), (1, "arn:aws:sts::111122223333:assumed-role/remover/1"));
        let report = engine.store.source.statuses.lock().expect("statuses").get(&None).cloned().expect("a report");
        assert_eq!(report.contests, state.contests, "the report shows the state");
        // One edit of another key: corrected, the contested one still held.
        drift("env", Some("dev"));
        let out = engine.handle_event(&event, None).await;
        assert_eq!(
            (out.records[0].status, out.records[0].contested.as_slice()),
            (Status::Applied, ["team".to_string()].as_slice())
        );
        let changed: Vec<&str> = out.records[0].changes.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(changed, ["env"], "a held key is not reported as written");
        assert_eq!(out.metrics.by_type["ec2:instance"].tags_written, 1);
        assert_eq!(engine.adapter.get("i-0a").get("env").map(String::as_str), Some("prod"));
        assert!(!engine.adapter.get("i-0a").contains_key("team"));
    }

    /// Drive `rounds` removals of `key` by `actor` through the event path: what each wrote.
    async fn fight(engine: &Engine<Memory>, key: &str, actor: Option<&str>, rounds: usize) -> Vec<(u64, Status)> {
        let mut event = tag_change(&["i-0a"]);
        event.actor = actor.map(str::to_owned);
        let mut out = Vec::new();
        for _ in 0..rounds {
            engine.adapter.tags.lock().expect("tags").get_mut("i-0a").expect("resource").remove(key);
            let before = engine.adapter.writes();
            let handled = engine.handle_event(&event, None).await;
            out.push((engine.adapter.writes() - before, handled.records[0].status));
        }
        out
    }

    /// Anyone but a controller the deployment yields to, or an event that names no caller: drift,
    /// corrected every time, never counted.
    #[tokio::test]
    async fn an_ordinary_principal_or_no_caller_is_corrected_every_time() {
        for actor in [Some("arn:aws:iam::111122223333:user/alice"), Some("arn:aws:sts::1:assumed-role/admin/x"), None] {
            let engine = engine(Memory::with(&[("i-0a", tags(&[OWNED]))]), POLICY);
            let steps = fight(&engine, "team", actor, 10).await;
            assert!(steps.iter().all(|s| *s == (1, Status::Applied)), "{actor:?}: {steps:?}");
            let state = crate::status_store::read_contest_state(&engine.store, "c-1").await.expect("state");
            assert!(state.contests.is_empty(), "{actor:?}: nothing counted: {state:?}");
        }
    }

    /// A key the policy marks `neverYield`: corrected every time, even for the load balancer controller.
    #[tokio::test]
    async fn a_never_yield_key_is_corrected_whoever_writes() {
        let policy = "version: 1\ninfraID: c-1\ntags: {team: platform, env: prod}\nneverYield: [team]\n";
        let engine = engine(Memory::with(&[("i-0a", tags(&[OWNED]))]), policy);
        let lbc = "arn:aws:sts::111122223333:assumed-role/aws-load-balancer-controller/1";
        let steps = fight(&engine, "team", Some(lbc), 8).await;
        assert!(steps.iter().all(|s| *s == (1, Status::Applied)), "{steps:?}");
        let steps = fight(&engine, "env", Some(lbc), tagwarden_core::contest::CORRECTIONS + 1).await;
        assert_eq!(steps.last(), Some(&(0, Status::Contested)), "another key still yields: {steps:?}");
    }

    /// A contest entry forged into the status report: neither the event path nor a sweep reads it.
    #[tokio::test]
    async fn a_forged_report_entry_changes_nothing() {
        let engine = engine(Memory::with(&[("i-0a", tags(&[OWNED]))]), POLICY);
        let p = policy();
        engine.reconcile(&p, &resource("i-0a"), Current::Read, Cause::Other).await;
        let forged = tagwarden_core::contest::Contest {
            resource: "i-0a".into(),
            key: "team".into(),
            policy: engine
                .store
                .policies(false)
                .await
                .0
                .expect("policy")
                .iter()
                .next()
                .expect("one")
                .fingerprint
                .clone(),
            corrections: vec![1, 2, 3],
            writer: Some("arn:aws:sts::111122223333:assumed-role/aws-load-balancer-controller/1".into()),
            contested_since: Some(u64::MAX / 4),
            hold_until: Some(u64::MAX / 2),
            holds: 9,
        };
        let mut report =
            tagwarden_core::status::StatusReport::new(Cloud::Aws, &"memory:/", Some("v".into()), vec![], vec![]);
        report.contests = vec![forged];
        engine.store.source.statuses.lock().expect("statuses").insert(None, report);
        let steps = fight(&engine, "team", Some("arn:aws:iam::111122223333:user/alice"), 2).await;
        assert!(steps.iter().all(|s| *s == (1, Status::Applied)), "{steps:?}");
        engine.adapter.tags.lock().expect("tags").get_mut("i-0a").expect("resource").remove("team");
        let out = engine.sweep(false, None, None).await;
        assert!(out.records.iter().all(|r| r.status != Status::Failed), "{:?}", out.records);
        assert_eq!(engine.adapter.get("i-0a").get("team").map(String::as_str), Some("platform"), "the sweep writes it");
    }

    /// A contest holds an hour, then the key is corrected again; fought again, it holds two.
    #[tokio::test]
    async fn a_contest_expires_and_is_tried_again_with_a_longer_hold() {
        use std::sync::atomic::AtomicU64;
        use tagwarden_core::contest::{CORRECTIONS, FIRST_HOLD_SECS};
        let mut engine = engine(Memory::with(&[("i-0a", tags(&[OWNED]))]), POLICY);
        let now = Arc::new(AtomicU64::new(1_800_000_000));
        let clock = now.clone();
        engine.clock = Arc::new(move || clock.load(Ordering::Relaxed));
        let lbc = "arn:aws:sts::111122223333:assumed-role/aws-load-balancer-controller/1";
        let steps = fight(&engine, "team", Some(lbc), CORRECTIONS + 2).await;
        assert_eq!(steps.iter().filter(|s| s.0 == 1).count(), CORRECTIONS, "{steps:?}");
        // Within the hold: still held (the copy this instance keeps is read again after FRESH,
        // which the test's clock does not move: the hold's end is judged by the clock).
        now.fetch_add(FIRST_HOLD_SECS - 10, Ordering::Relaxed);
        assert_eq!(fight(&engine, "team", Some(lbc), 1).await, [(0, Status::Contested)]);
        now.fetch_add(10, Ordering::Relaxed);
        let steps = fight(&engine, "team", Some(lbc), CORRECTIONS + 1).await;
        assert_eq!(steps.iter().filter(|s| s.0 == 1).count(), CORRECTIONS, "retried after the hold: {steps:?}");
        assert_eq!(steps.last(), Some(&(0, Status::Contested)));
        let state = crate::status_store::read_contest_state(&engine.store, "c-1").await.expect("state");
        let c = &state.contests[0];
        assert_eq!((c.holds, c.hold_until.zip(c.contested_since).map(|(u, s)| u - s)), (2, Some(2 * FIRST_HOLD_SECS)));
    }

    /// What an event's delivery becomes: a transient failure hands it back (SQS redelivers, then
    /// dead-letters), a permanent one is reported and the delivery succeeds, and without a valid
    /// policy nothing is written and the delivery fails closed.
    #[tokio::test]
    async fn events_hand_back_what_a_retry_can_fix_and_fail_closed() {
        let event = tag_change(&["i-0a"]);
        let throttled = engine(Memory { throttled: true, ..Memory::with(&[("i-0a", tags(&[OWNED]))]) }, POLICY);
        let out = throttled.handle_event(&event, None).await;
        assert!(out.must_retry(), "throttled after the client's retries: handed back");

        let refused = Memory { refuse: ["i-0a".to_string()].into(), ..Memory::with(&[("i-0a", tags(&[OWNED]))]) };
        let out = engine(refused, POLICY).handle_event(&event, None).await;
        assert_eq!(out.records[0].failure, Some(Failure::Permanent));
        assert!(!out.must_retry(), "a permanent failure is reported, never redelivered");

        let invalid =
            engine(Memory::with(&[("i-0a", tags(&[OWNED]))]), "version: 1\ninfraID: c-1\ntags: {Name: web}\n");
        let out = invalid.handle_event(&event, None).await;
        let cloud = &invalid.adapter;
        assert_eq!((cloud.writes(), cloud.reads.load(Ordering::Relaxed), out.metrics.policy_rejected), (0, 0, 1));
        assert!(out.error.is_some() && out.must_retry(), "no valid policy: fail closed, {out:?}");
    }
}
