//! The event path at the API bound: the events of one invocation (an SQS batch) are handled
//! together. Every resource they name or imply is read once, in as few calls as the adapter can
//! make ([`Adapter::read_all`]: EC2 `DescribeTags` for many ids at once), planned on its own
//! exactly as a single event's would be (same precedence, ownership, never-delete and limit
//! rules: `tagwarden_core::plan`), and written with the sweep's grouping, so identical deltas share a call
//! where the API takes many resources. A resource named by several events of the batch is read
//! and written once; each event gets the record of every resource it named, so its delivery fails
//! (and comes back) exactly when one of its resources needs another try.
//!
//! The per-resource locks of the single event's path are held for the whole batch, taken in one
//! order (by key) so two batches cannot deadlock: a resource that another batch or event of the
//! process is reconciling is waited for, then read again, so it is still written once.

use std::collections::HashMap;
use std::time::Instant;

use super::sweep::{batches, identity, Planned, Run};
use super::{answer_to, cause_of, for_event, hint, lock_key, Adapter, Cause, Engine, Read};
use crate::cloud_error::CloudError;
use tagwarden_core::events::Event;
use tagwarden_core::plan;
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::reason::Deferred;
use tagwarden_core::report::{epoch_ms, Failure, Outcome, Record};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

/// One resource of the batch, the events that name it, and what is known of its tags.
struct Target {
    resource: ResourceRef,
    /// Positions of the events that name or imply it.
    events: Vec<usize>,
    tags: Option<Result<TagMap, CloudError>>,
}

impl<A: Adapter> Engine<A> {
    /// Reconcile every resource the `events` name (and imply), once each, starting none after
    /// `stop_at`; one outcome per event, in order. Ignored and own events make no call at all;
    /// with no valid policy nothing is written, and every event's outcome says why.
    pub async fn handle_events(&self, events: &[Event], stop_at: Option<Instant>) -> Vec<Outcome> {
        let cloud = self.cloud();
        let mut outs: Vec<Outcome> = events.iter().map(|_| Outcome::default()).collect();
        let mut active = Vec::new();
        for (i, event) in events.iter().enumerate() {
            outs[i].metrics.events_received = 1;
            if event.is_ignored() || event.is_from(&self.own) {
                outs[i].metrics.events_ignored = 1;
                tracing::info!(event = event.event_name, id = event.id, reason = ?event.reason, own = event.is_from(&self.own), "event ignored");
            } else {
                active.push(i);
            }
        }
        let Some(&first) = active.first() else { return outs };
        let mut read_policy = Outcome::default();
        let policies = super::load_policies(&self.adapter, &self.store, &mut read_policy, false).await;
        let error = read_policy.error.clone();
        outs[first].absorb(read_policy);
        let Some(policies) = policies else {
            for &i in &active {
                outs[i].error = error.clone();
            }
            return outs;
        };
        let version = policies.version();
        let mut targets = self.targets(&policies, events, &active, &mut outs, &version).await;
        let mut keys: Vec<(String, usize)> =
            targets.iter().enumerate().map(|(i, t)| (lock_key(cloud, &t.resource), i)).collect();
        keys.sort();
        let mut held = Vec::with_capacity(keys.len());
        keys.dedup_by(|a, b| a.0 == b.0);
        for (key, i) in &keys {
            let lock = self.in_flight.acquire(key).await;
            // Waited behind another reconcile of it: what an event carried is stale now.
            if lock.waited {
                targets[*i].tags = None;
            }
            held.push(lock);
        }

        if stop_at.is_some_and(|t| Instant::now() >= t) {
            for t in &targets {
                let record = Record::failed(cloud, &t.resource, &version, String::new());
                deliver(
                    &mut outs,
                    events,
                    t,
                    record.failing(Failure::Transient, Deferred::EventHandedBack.to_string()),
                );
            }
            return outs;
        }
        let unknown: Vec<usize> = (0..targets.len()).filter(|&i| targets[i].tags.is_none()).collect();
        let refs: Vec<&ResourceRef> = unknown.iter().map(|&i| &targets[i].resource).collect();
        let reads = self.adapter.read_all(&refs, self.concurrency).await;
        for (i, read) in unknown.into_iter().zip(reads) {
            targets[i].tags = Some(read.map(|Read { tags, arn }| {
                let r = &mut targets[i].resource;
                if arn.is_some() && arn != r.arn {
                    r.arn = arn;
                }
                tags
            }));
            if let Some(Ok(now)) = &targets[i].tags {
                self.lost_since(&targets[i], now, events, &mut outs);
            }
        }

        // Each resource planned on its own, exactly as a single event's.
        let mut records: Vec<Option<Record>> = vec![None; targets.len()];
        let (mut planned, mut whose, mut causes) = (Vec::new(), Vec::new(), Vec::new());
        for (i, t) in targets.iter().enumerate() {
            let current = match t.tags.as_ref() {
                Some(Ok(tags)) => tags.clone(),
                Some(Err(e)) => {
                    let record = Record::failed(cloud, &t.resource, &version, String::new());
                    records[i] = Some(e.clone().into_record(record));
                    continue;
                }
                None => continue,
            };
            match answer_to(&policies, cloud, &t.resource, &current) {
                Ok(policy) => {
                    let mut plan = plan::diff(&policy.policy, cloud, &policy.infra_id, &t.resource, &current);
                    // A tag change among its events: this correction answers it, and is counted.
                    let cause = t.events.iter().map(|&e| cause_of(&events[e])).fold(Cause::Other, Cause::strongest);
                    self.hold_contested(policy, &mut plan, cause).await;
                    self.audit(policy, &mut plan);
                    let (policy, resource, started) = (policy.clone(), t.resource.clone(), Instant::now());
                    planned.push(Planned { policy, resource, current, plan, started });
                    whose.push(i);
                    causes.push(cause);
                }
                Err(record) => records[i] = Some(*record),
            }
        }
        // What is audited is out of the plans already: they write nothing.
        let jobs = batches(&self.adapter, &planned);
        let how = Run { stop_at, deferred: &Deferred::EventHandedBack, locks_held: true };
        let (_, written) = self.run_jobs(&policies, &planned, jobs, how).await;
        for ((p, record), cause) in planned.iter().zip(&written).zip(causes) {
            if record.status == tagwarden_core::report::Status::Applied {
                self.count_correction(&p.policy, &p.plan, cause).await;
            }
        }
        drop(held);
        for (record, i) in written.into_iter().zip(whose) {
            records[i] = Some(record);
        }
        for (t, record) in targets.iter().zip(records) {
            if let Some(record) = record {
                deliver(&mut outs, events, t, record);
            }
        }
        outs
    }

    /// Every resource the active events name or imply, once, with the events that name it; its
    /// tags where an event's hint spares the read (they say no enforced cluster owns it).
    async fn targets(
        &self,
        policies: &Policies,
        events: &[Event],
        active: &[usize],
        outs: &mut [Outcome],
        version: &str,
    ) -> Vec<Target> {
        let mut targets: Vec<Target> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        let cloud = self.cloud();
        let mut add = |r: ResourceRef, known: Option<TagMap>, event: usize| match at.get(&identity(cloud, &r)) {
            Some(&i) => {
                let t: &mut Target = &mut targets[i];
                if !t.events.contains(&event) {
                    t.events.push(event);
                }
                // Another event names it without a hint: read it.
                if known.is_none() {
                    t.tags = None;
                }
            }
            None => {
                at.insert(identity(cloud, &r), targets.len());
                targets.push(Target { resource: r, events: vec![event], tags: known.map(Ok) });
            }
        };
        for &i in active {
            let event = &events[i];
            // Event-carried tags are a hint, never proof of ownership (see `super::hint`).
            for r in &event.resources {
                add(r.clone(), hint(policies, cloud, r, event.tags.as_ref()), i);
            }
        }
        let implying: Vec<&Event> = active.iter().map(|&i| &events[i]).collect();
        let implied = self.adapter.implied_all(&implying, version).await;
        for (n, r, tags) in implied.found {
            add(r, tags, active[n]);
        }
        for (n, record) in implied.failed {
            outs[active[n]].push(record);
        }
        targets
    }
}

impl<A: Adapter> Engine<A> {
    /// A replace-style write (S3 `PutBucketTagging`) whose event carries the set it put, read
    /// back without some of its keys: another replace landed after it (tagwarden's own, between its
    /// last read and its put, is the window `aws::services::s3` cannot close). The keys lost are
    /// counted as conflicts of the event and logged, naming who put them.
    fn lost_since(&self, t: &Target, now: &TagMap, events: &[Event], outs: &mut [Outcome]) {
        if !matches!(self.adapter.batching(&t.resource), super::sweep::Batching::Reread) {
            return;
        }
        for &e in &t.events {
            let Some(put) = &events[e].replaced_with else { continue };
            // Absent, not changed: tagwarden never removes a key, but it does correct a value.
            let lost: Vec<&String> = put.keys().filter(|k| !now.contains_key(*k)).collect();
            if lost.is_empty() {
                continue;
            }
            let by = events[e].actor.as_deref().unwrap_or("an unknown caller");
            tracing::warn!(
                resource = %t.resource, event = events[e].id, by, ?lost,
                "tags another writer put were replaced since: a concurrent replace of the whole set"
            );
            let counters = outs[e].metrics.by_type.entry(t.resource.kind.clone()).or_default();
            counters.conflicts += lost.len() as u64;
        }
    }
}

/// A resource's record to every event that names it: the metrics count it once, in the first.
fn deliver(outs: &mut [Outcome], events: &[Event], t: &Target, record: Record) {
    let now = epoch_ms();
    for (n, &i) in t.events.iter().enumerate() {
        let event = &events[i];
        let out = &mut outs[i];
        let record = for_event(out, event, record.clone().in_line_since(event.occurred_at_ms, now));
        if n == 0 {
            out.push(record);
        } else {
            out.records.push(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::super::memory::{tags, Memory};
    use super::super::tests::{engine, tag_change, OWNED, POLICY};
    use super::*;
    use tagwarden_core::report::Status;

    fn event(id: &str, resources: &[&str]) -> Event {
        Event { id: Some(id.into()), ..tag_change(resources) }
    }

    /// The batch keeps the single event's invariants: one read and at most one write per
    /// resource however many events name it, identical deltas in shared calls, unmanaged keys
    /// kept, every event answered with the records of its own resources.
    #[tokio::test]
    async fn a_batch_reads_and_writes_each_resource_once_and_answers_every_event() {
        let drifted = tags(&[OWNED, ("team", "legacy"), ("owner", "alice")]);
        let cloud = Memory::with(&[
            ("i-1", drifted.clone()),
            ("i-2", drifted.clone()),
            ("i-3", drifted.clone()),
            ("i-4", tags(&[OWNED, ("team", "platform"), ("env", "prod")])),
            ("i-foreign", tags(&[("team", "other")])),
        ]);
        let events: Vec<Event> = vec![
            event("e1", &["i-1", "i-2"]),
            event("e2", &["i-1"]),
            event("e3", &["i-3", "i-4", "i-foreign"]),
            event("e4", &["i-1", "i-2", "i-3"]),
        ];
        let engine = engine(cloud, POLICY);
        let (outs, cloud) = (engine.handle_events(&events, None).await, &engine.adapter);
        assert_eq!(cloud.reads.load(Ordering::Relaxed), 5, "each resource read once");
        // i-1..3 share one delta, two a call (the in-memory cloud's batch): two calls.
        assert_eq!(cloud.writes(), 2);
        assert_eq!(cloud.get("i-2"), tags(&[OWNED, ("team", "platform"), ("env", "prod"), ("owner", "alice")]));
        assert_eq!(cloud.get("i-foreign"), tags(&[("team", "other")]));
        let names: Vec<Vec<&str>> = outs
            .iter()
            .map(|o| o.records.iter().map(|r| r.resource.rsplit('/').next().unwrap_or_default()).collect())
            .collect();
        assert_eq!(
            names,
            [vec!["i-1", "i-2"], vec!["i-1"], vec!["i-3", "i-4", "i-foreign"], vec!["i-1", "i-2", "i-3"]]
        );
        assert!(outs.iter().all(|o| !o.must_retry() && o.metrics.events_received == 1));
        let ids: Vec<Option<&str>> = outs.iter().map(|o| o.records[0].event_id.as_deref()).collect();
        assert_eq!(ids, [Some("e1"), Some("e2"), Some("e3"), Some("e4")]);
        // The metrics count each resource once, in the first event that names it.
        let evaluated: u64 =
            outs.iter().map(|o| o.metrics.by_type.values().map(|c| c.resources_evaluated).sum::<u64>()).sum();
        assert_eq!(evaluated, 5);

        let again = engine.handle_events(&events, None).await;
        assert_eq!(cloud.writes(), 2, "a batch after a batch writes nothing");
        assert!(again
            .iter()
            .flat_map(|o| &o.records)
            .all(|r| matches!(r.status, Status::Unchanged | Status::NotOwned)));
    }

    /// The single event's lock holds across batches: two batches of one process naming the same
    /// resources at once write them once (the second waits, reads again, finds nothing to do).
    #[tokio::test]
    async fn concurrent_batches_naming_one_resource_write_it_once() {
        let engine = engine(Memory::with(&[("i-1", tags(&[OWNED])), ("i-2", tags(&[OWNED]))]), POLICY);
        let (a, b) = (vec![event("a", &["i-1", "i-2"])], vec![event("b", &["i-2", "i-1"])]);
        let (x, y) = tokio::join!(engine.handle_events(&a, None), engine.handle_events(&b, None));
        assert_eq!(engine.adapter.writes(), 1, "one shared write for both resources, once");
        let applied = x.iter().chain(&y).flat_map(|o| &o.records).filter(|r| r.status == Status::Applied).count();
        assert_eq!(applied, 2, "{x:?} {y:?}");
    }

    #[tokio::test]
    async fn a_failing_write_fails_only_the_events_that_name_it() {
        let cloud = Memory {
            refuse: ["i-2".to_string()].into(),
            ..Memory::with(&[("i-1", tags(&[OWNED])), ("i-2", tags(&[OWNED])), ("vol-1", tags(&[OWNED]))])
        };
        let events = vec![event("e1", &["i-1"]), event("e2", &["i-2"]), event("e3", &["vol-1"])];
        let outs = engine(cloud, POLICY).handle_events(&events, None).await;
        let status: Vec<Status> = outs.iter().map(|o| o.records[0].status).collect();
        assert_eq!(status, [Status::Applied, Status::Failed, Status::Applied]);
        assert_eq!(outs[1].records[0].failure, Some(Failure::Permanent), "reported, never redelivered");

        let throttled = engine(Memory { throttled: true, ..Memory::with(&[("i-1", tags(&[OWNED]))]) }, POLICY);
        let outs = throttled.handle_events(&events[..1], None).await;
        assert!(outs[0].must_retry(), "throttled after the retries: handed back");
    }

    #[tokio::test]
    async fn without_a_valid_policy_nothing_is_read_and_every_event_fails_closed() {
        let invalid = "version: 1\ninfraID: c-1\ntags: {Name: web}\n";
        let engine = engine(Memory::with(&[("i-1", tags(&[OWNED]))]), invalid);
        let events = vec![event("e1", &["i-1"]), event("e2", &["i-1"])];
        let outs = engine.handle_events(&events, None).await;
        assert_eq!((engine.adapter.reads.load(Ordering::Relaxed), engine.adapter.writes()), (0, 0));
        assert!(outs.iter().all(|o| o.error.is_some() && o.must_retry()), "{outs:?}");
        assert_eq!(outs.iter().map(|o| o.metrics.policy_rejected).sum::<u64>(), 1, "counted once");
    }

    #[tokio::test]
    async fn a_dry_run_writes_nothing_and_past_the_deadline_nothing_starts() {
        let mut engine = engine(Memory::with(&[("i-1", tags(&[OWNED]))]), POLICY);
        let events = vec![event("e1", &["i-1"])];
        engine.dry_run = true;
        let outs = engine.handle_events(&events, None).await;
        assert_eq!((outs[0].records[0].status, engine.adapter.writes()), (Status::WouldApply, 0));

        engine.dry_run = false;
        let outs = engine.handle_events(&events, Some(Instant::now())).await;
        let cloud = &engine.adapter;
        assert_eq!((cloud.reads.load(Ordering::Relaxed), cloud.writes()), (1, 0), "no read or write started");
        assert!(outs[0].must_retry());
    }
}
