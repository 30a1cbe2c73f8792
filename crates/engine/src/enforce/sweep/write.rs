//! The sweep's write phase: planned resources grouped by identical delta into jobs, taken from
//! each pacing key in turn, run at most the engine's concurrency at once, and split on failure.

use std::collections::BTreeMap;
use std::time::Instant;

use futures_util::stream::{self, StreamExt};

use super::{since, Batching, Planned, Run};
use crate::cloud_error::{CloudError, ErrorClass};
use crate::enforce::{contests, Adapter, Cause, Current, Engine};
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::report::{epoch_ms, Failure, Record};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

/// One unit of the write phase.
pub(in crate::enforce) enum Job<G> {
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
    /// Run `jobs`, at most the engine's concurrency at once, starting none after `stop_at` (what
    /// is left is `deferred`, retryable, saying why); then the records of the resources the jobs
    /// read, and the record of each planned resource, in order. A correction's lag is the caller's.
    pub(in crate::enforce) async fn run_jobs(
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

    pub(in crate::enforce) fn report(&self, phase: &str, done: u64, total: u64) {
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
}

/// `jobs` taken from each pacing key in turn, each key's in their order.
pub(super) fn in_turn<G>(jobs: Vec<Job<G>>, key: impl Fn(&Job<G>) -> String) -> Vec<Job<G>> {
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
pub(in crate::enforce) fn batches<A: Adapter>(cloud: &A, planned: &[Planned]) -> Vec<Job<A::Group>> {
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
