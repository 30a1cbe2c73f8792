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
//! The invariants it holds, unit-tested (`tests`) against an in-memory cloud: a resource is written
//! at most once per policy version however many events name it at once (a duplicate waits for
//! the lock, re-reads and finds nothing to do); no write ever removes a tag; an audit (the
//! deployment's [`Mode`], a cluster's `enforce: false`, a policy's `auditKeys`, or a dry run: one
//! mechanism, `tagwarden_core::plan::audit`, applied right before the write on every path) writes
//! nothing it audits and reports it as what would be written; a failed read or write is a record, never a dropped resource; a resource owned by two
//! clusters is never written.

mod adapter;
mod batch;
mod coalesce;
mod contests;
mod policies;
pub mod sweep;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use tokio::sync::Semaphore;

use crate::cloud_error::ErrorClass;
use crate::inflight::ResourceLocks;
use crate::policy_store::PolicyStore;
pub use adapter::{Adapter, Current, Implied, Read};
pub use coalesce::POLICY_SWEEP_WINDOW;
pub use contests::Cause;
use policies::hint;
pub use policies::{answer_to, load_policies, report_sweeps};
use sweep::Progress;
use tagwarden_core::cloud::Cloud;
pub use tagwarden_core::contest::YieldTo;
use tagwarden_core::events::{Event, EventKind};
pub use tagwarden_core::mode::Mode;
use tagwarden_core::plan;
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::report::{epoch_ms, Failure, Outcome, Record};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

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
        if let Some(policies) = load_policies(&self.adapter, &self.store, &mut out, true).await {
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
        let Some(policies) = load_policies(&self.adapter, &self.store, &mut out, false).await else { return out };
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
        Cloud::Aws | Cloud::Gcp => r.id.clone(),
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

#[cfg(test)]
pub(crate) mod memory;

#[cfg(test)]
mod tests;
