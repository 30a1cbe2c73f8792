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

use std::collections::BTreeMap;

use super::super::memory::{tags, Memory};
use super::super::tests::{engine, OWNED, POLICY};
use super::*;
use tagwarden_core::report::Failure;
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
        .map(|r| (r.resource.clone(), r.audited.iter().map(|c| format!("{}:{:?}->{}", c.key, c.old, c.new)).collect()))
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
    let before: BTreeMap<String, TagMap> =
        ["i-1", "i-2", "vol-1", "i-9", "i-foreign"].iter().map(|id| (id.to_string(), engine.adapter.get(id))).collect();
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
