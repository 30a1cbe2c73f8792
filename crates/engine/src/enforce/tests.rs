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
    let store = PolicyStore::new(Documents::new(Layout::One("p.yaml".into()), &[("p.yaml", policy)]), Duration::ZERO);
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
        futures_util::future::join_all((0..10).map(|_| engine.reconcile(&p, &r, Current::Read, Cause::Other))).await;
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
    let mut engine = engine(Memory::with(&[("i-0a", tags(&[OWNED, ("team", "platform"), ("env", "prod")]))]), POLICY);
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
        policy: engine.store.policies(false).await.0.expect("policy").iter().next().expect("one").fingerprint.clone(),
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

    let invalid = engine(Memory::with(&[("i-0a", tags(&[OWNED]))]), "version: 1\ninfraID: c-1\ntags: {Name: web}\n");
    let out = invalid.handle_event(&event, None).await;
    let cloud = &invalid.adapter;
    assert_eq!((cloud.writes(), cloud.reads.load(Ordering::Relaxed), out.metrics.policy_rejected), (0, 0, 1));
    assert!(out.error.is_some() && out.must_retry(), "no valid policy: fail closed, {out:?}");
}
