//! Faults between the Lambda's code and the AWS APIs: throttling in each service's real shape,
//! 500/503, dropped connections and delays past the client's timeout, injected by a proxy in front
//! of moto (`tagwarden_testkit::fault_proxy`). SQS is simulated around the real handler: partial batch
//! failures are redelivered up to `maxReceiveCount` 5, then dead-lettered with the original body.
//! Invariants: every event ends applied or in the dead-letter queue (none lost), and no resource
//! ends with a wrong value. Figures are printed (`--nocapture`).

#![cfg(feature = "aws")]

use crate::{fleet, support};
use support::fault_proxy;

use std::time::{Duration, Instant};

use fault_proxy::{Fault, FaultProxy, Rule, When};
use fleet::{Fleet, FleetSpec, Rng, Sqs};
use serde_json::{json, Value};
use tagwarden::aws::adapter::DEFAULT_CONCURRENCY;
use tagwarden::aws::function;
use tagwarden::aws::Tagger;
use tagwarden::resource::ResourceRef;

/// The client attempt timeout in these tests; injected delays are longer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(800);

fn chaos_rules() -> Vec<Rule> {
    let p = When::Probability;
    let on = |svc: &str, op: &str, fault: Fault, when: When| Rule::new(Some(svc), Some(op), fault, when);
    vec![
        // Enough in a row that some event exhausts the SDK's 5 attempts, however the calls of
        // the (at most DEFAULT_CONCURRENCY) events in flight interleave: if none did, they made
        // at most 4 each, fewer than this budget. The handler must hand events back.
        on("ec2", "CreateTags", Fault::Throttle, When::Always).budget(4 * DEFAULT_CONCURRENCY as u64 + 1),
        on("ec2", "DescribeTags", Fault::Throttle, p(0.25)),
        on("ec2", "CreateTags", Fault::Throttle, p(0.25)),
        on("s3", "GetBucketTagging", Fault::Throttle, p(0.2)),
        on("s3", "PutBucketTagging", Fault::OperationAborted, p(0.3)),
        on("s3", "PutBucketTagging", Fault::Throttle, p(0.1)),
        on("s3", "GetObject", Fault::Status(503), p(0.1)),
        on("iam", "ListRoleTags", Fault::Throttle, p(0.25)),
        on("iam", "TagRole", Fault::Throttle, p(0.25)),
        on("elasticloadbalancing", "DescribeTags", Fault::Throttle, p(0.25)),
        on("elasticloadbalancing", "AddTags", Fault::Throttle, p(0.25)),
        Rule::new(None, None, Fault::Status(500), p(0.04)),
        Rule::new(None, None, Fault::Status(503), p(0.03)),
        Rule::new(None, None, Fault::Reset, p(0.04)),
        Rule::new(None, None, Fault::Delay(ATTEMPT_TIMEOUT + Duration::from_millis(400)), p(0.02)).budget(12),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_under_faults_end_applied_or_dead_lettered_and_sweep_rides_out_throttling() {
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, ATTEMPT_TIMEOUT).await;
    let bucket = format!("policy-{account}");
    direct.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
    let desired = fleet::tags(&[("team", "platform"), ("cost-center", "42")]);
    let policy = fleet::infrastructure(&[("team", "platform"), ("cost-center", "42")]);
    direct.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("policy");
    let spec = FleetSpec { instances: 40, foreign_instances: 6, buckets: 8, roles: 8, target_groups: 4 };
    let fleet = Fleet::create(&direct, &account, &spec).await;
    let rec = fleet::reconciler(&via, &account, &format!("s3://{bucket}/p.json"), Duration::ZERO);

    // One event per resource, a third again as duplicates, shuffled; plus two that cannot
    // succeed: an instance that never exists, and a body that is not an event.
    let mut rng = Rng(proxy.seed | 1);
    let mut bodies: Vec<(String, String)> = Vec::new();
    for (i, r) in fleet.all().enumerate() {
        bodies.push((format!("m{i}"), fleet::event_for(r, &account, &format!("e{i}"))));
    }
    let n = bodies.len();
    for d in 0..n / 3 {
        let (_, body) = bodies[rng.below(n)].clone();
        bodies.push((format!("dup{d}"), body));
    }
    let ghost = ResourceRef::ec2("i-0000000000000dead", "us-east-1", &account);
    bodies.push(("ghost".into(), fleet::event_for(&ghost, &account, "ghost")));
    bodies.push(("garbage".into(), "not json at all {".into()));
    rng.shuffle(&mut bodies);

    let mut sqs = Sqs::new(5, 10);
    for (id, body) in &bodies {
        sqs.send(id, body.clone());
    }
    proxy.set_rules(chaos_rules());
    let started = Instant::now();
    via.calls.reset();
    sqs.drain(&rec).await;
    let elapsed = started.elapsed();
    proxy.clear_rules();

    // Nothing lost: every message is done or dead-lettered, with its original body.
    let total = bodies.len();
    let lost: Vec<&String> =
        sqs.sent.keys().filter(|id| !sqs.done.contains_key(*id) && !sqs.dead.iter().any(|(d, _)| d == *id)).collect();
    assert!(lost.is_empty(), "lost messages: {lost:?}");
    assert_eq!(sqs.done.len() + sqs.dead.len(), total);
    for (id, body) in &sqs.dead {
        assert_eq!(body, &sqs.sent[id], "the dead-letter queue keeps the original body of {id}");
    }
    let dead: Vec<&str> = sqs.dead.iter().map(|(id, _)| id.as_str()).collect();
    assert!(dead.contains(&"ghost") && dead.contains(&"garbage"), "{dead:?}");
    assert!(sqs.redelivered() > 2, "the injected faults made the handler hand events back: {}", sqs.redelivered());

    // No wrong value; every resource named by a message that succeeded carries the policy.
    let applied_ids: Vec<String> = sqs
        .done
        .keys()
        .filter_map(|id| serde_json::from_str::<Value>(&sqs.sent[id]).ok())
        .filter_map(|v| tagwarden::events::parse_one(v.to_string().as_bytes()).ok())
        .flat_map(|e| e.resources.into_iter().map(|r| r.id))
        .collect();
    let checker = Tagger::new(direct.clone());
    let (wrong, applied) = fleet.check(&checker, &desired, &|r: &ResourceRef| applied_ids.contains(&r.id)).await;
    assert!(wrong.is_empty(), "wrong final values: {wrong:#?}");

    let injected = proxy.injected();
    assert!(injected.get("throttle").copied().unwrap_or_default() > 12, "{injected:?}");
    assert!(injected.keys().len() >= 4, "several kinds of fault were injected: {injected:?}");
    println!(
        "FAULTS(events): messages={total} done={} dead_lettered={} (ghost+garbage+{} under faults) lost=0 redelivered={} \
         receives={} invocations={} wrong_values=0 owned_resources={} carrying_policy={applied} elapsed={:.1}s",
        sqs.done.len(),
        sqs.dead.len(),
        sqs.dead.len() - 2,
        sqs.redelivered(),
        sqs.receives,
        sqs.invocations,
        fleet.owned.len(),
        elapsed.as_secs_f64()
    );
    println!("FAULTS(events) injected by kind: {injected:?}");
    println!("FAULTS(events) injected by operation: {:?}", proxy.injected_by_operation());
    println!("FAULTS(events) SDK attempts: {:?}", via.calls.snapshot());

    // The sweep under throttling: drift half the fleet behind tagwarden's back, then throttle
    // the batched writes and the discovery; the SDK's own retries ride it out and everything
    // ends right.
    for r in fleet.owned.iter().step_by(2) {
        Tagger::new(direct.clone())
            .write(r, &fleet::tags(&[("team", "drifted")]), &checker.read(r).await.unwrap())
            .await
            .unwrap();
    }
    let before = proxy.injected();
    proxy.set_rules(vec![
        // 4 in a row: the batch call's fifth SDK attempt (standard mode) goes through.
        Rule::new(Some("ec2"), Some("CreateTags"), Fault::Throttle, When::Always).budget(4),
        Rule::new(Some("tagging"), Some("GetResources"), Fault::Throttle, When::EveryNth(2)).budget(3),
        // Each budget below is under what one write's retries absorb, however the concurrent
        // writes interleave: S3's aborts under the fleet tagger's 3 attempts, the throttles
        // under the SDK's 5.
        Rule::new(Some("s3"), Some("PutBucketTagging"), Fault::OperationAborted, When::EveryNth(2)).budget(2),
        Rule::new(Some("iam"), Some("TagRole"), Fault::Throttle, When::EveryNth(2)).budget(4),
        Rule::new(Some("elasticloadbalancing"), Some("AddTags"), Fault::Throttle, When::Always).budget(4),
    ]);
    via.calls.reset();
    let inv = function::handle(&rec, json!({"tagwarden": "sweep"}).to_string()).await;
    proxy.clear_rules();
    assert!(inv.error.is_none(), "{:?} {:?}", inv.error, inv.lines);
    let swept = inv.response["sweep"].as_u64().expect("sweep count");
    assert_eq!(inv.response["failed"], 0, "{}", inv.response);
    let (wrong, applied) = fleet.check(&checker, &desired, &|_| true).await;
    assert!(wrong.is_empty(), "wrong values after the sweep: {wrong:#?}");
    assert_eq!(applied, fleet.owned.len());
    let after = proxy.injected();
    let during: Vec<(String, u64)> =
        after.iter().map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or_default())).collect();
    let calls = via.calls.snapshot();
    // 20 drifted instances share one delta: one batch, whose call the SDK attempted 5 times.
    assert_eq!(calls.get("EC2:CreateTags"), Some(&5), "{calls:?}");
    println!(
        "FAULTS(sweep): swept={swept} failed=0 wrong_values=0 injected={during:?} batch_attempts EC2:CreateTags={:?} ELBv2:AddTags={:?} S3:PutBucketTagging={:?} IAM:TagRole={:?}",
        calls.get("EC2:CreateTags"),
        calls.get("Elastic Load Balancing v2:AddTags"),
        calls.get("S3:PutBucketTagging"),
        calls.get("IAM:TagRole"),
    );

    // Throttling that outlasts the SDK's retries: the batch is attempted 5 times (the SDK's
    // standard mode, one retry layer), not sent again around it; its instances are failed,
    // retryable, and the next sweep brings them in line.
    let drifted: Vec<_> = fleet.owned.iter().filter(|r| r.kind == "ec2:instance").step_by(2).collect();
    for r in &drifted {
        Tagger::new(direct.clone())
            .write(r, &fleet::tags(&[("team", "drifted")]), &checker.read(r).await.unwrap())
            .await
            .unwrap();
    }
    proxy.set_rules(vec![Rule::new(Some("ec2"), Some("CreateTags"), Fault::Throttle, When::Always).budget(7)]);
    via.calls.reset();
    let inv = function::handle(&rec, json!({"tagwarden": "sweep"}).to_string()).await;
    assert_eq!(via.calls.snapshot().get("EC2:CreateTags"), Some(&5), "one retry layer: {:?}", via.calls.snapshot());
    assert_eq!(inv.response["failed"], drifted.len(), "{}", inv.response);
    let again = function::handle(&rec, json!({"tagwarden": "sweep"}).to_string()).await;
    proxy.clear_rules();
    assert_eq!(again.response["failed"], 0, "{}", again.response);
    let (wrong, _) = fleet.check(&checker, &desired, &|_| true).await;
    assert!(wrong.is_empty(), "wrong values after the next sweep: {wrong:#?}");
}

/// S3's `PutBucketTagging` replaces the whole set and cannot be made conditional, so another
/// writer's change racing tagwarden's must never be lost silently, and an ownership tag never
/// dropped. The proxy lets a second writer (straight to moto) put the bucket's tags at the worst
/// moments of one reconcile: right after the plan's read (it adds another cluster's ownership
/// tag: the write is re-planned, never merged on the stale read), and right after tagwarden's put
/// (from a stale read of its own: the lost keys are merged back, the writer's kept).
#[tokio::test]
async fn a_concurrent_bucket_tag_write_is_never_lost_and_no_ownership_tag_is_dropped() {
    use std::sync::Arc;
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, ATTEMPT_TIMEOUT).await;
    let location = fleet::publish_policy(&direct, &account, &fleet::infrastructure(&[("team", "platform")])).await;
    let rec = fleet::reconciler(&via, &account, &location, Duration::ZERO);
    let put_tags = |c: tagwarden::aws::Clients, bucket: String, pairs: Vec<(&'static str, &'static str)>| async move {
        let tags: Vec<_> = pairs
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::s3::types::Tag::builder().key(*k).value(*v).build().expect("tag"))
            .collect();
        let tagging =
            tagwarden::aws::sdk::s3::types::Tagging::builder().set_tag_set(Some(tags)).build().expect("tagging");
        c.s3.put_bucket_tagging().bucket(bucket).tagging(tagging).send().await.expect("the other writer's put");
    };
    let other_owner = "kubernetes.io/cluster/other-1";
    let initial = vec![(fleet::OWNER, "owned"), ("team", "legacy"), ("keep", "me")];
    let read = |bucket: &str| {
        let t = Tagger::new(direct.clone());
        let r = ResourceRef::s3_bucket(bucket, "us-east-1");
        async move { t.read(&r).await.expect("read") }
    };

    // Right after the plan's read, another writer marks the bucket shared by another cluster.
    direct.s3.create_bucket().bucket("race-a").send().await.expect("bucket");
    put_tags(direct.clone(), "race-a".into(), initial.clone()).await;
    let (writer, mut racing) = (direct.clone(), initial.clone());
    racing.push((other_owner, "shared"));
    proxy.after(
        "GetBucketTagging",
        1,
        Arc::new(move || Box::pin(put_tags(writer.clone(), "race-a".into(), racing.clone()))),
    );
    let r = ResourceRef::s3_bucket("race-a", "us-east-1");
    let event = tagwarden::events::parse_one(fleet::event_for(&r, &account, "e-a").as_bytes()).expect("event");
    let first = rec.handle_event(&event, None).await;
    let now = read("race-a").await;
    assert_eq!(
        now.get(other_owner).map(String::as_str),
        Some("shared"),
        "the ownership tag was dropped: {now:?} {first:?}"
    );
    // Re-planned on redelivery (a fresh read), it is written with everything kept.
    let again = rec.handle_event(&event, None).await;
    let now = read("race-a").await;
    assert_eq!(
        (
            now.get(other_owner).map(String::as_str),
            now.get("team").map(String::as_str),
            now.get("keep").map(String::as_str)
        ),
        (Some("shared"), Some("platform"), Some("me")),
        "{now:?} {first:?} {again:?}"
    );

    // Right after tagwarden's put, a writer working from a stale read replaces the set.
    direct.s3.create_bucket().bucket("race-b").send().await.expect("bucket");
    put_tags(direct.clone(), "race-b".into(), initial.clone()).await;
    let (writer, mut stale) = (direct.clone(), initial.clone());
    stale.push(("cost-center", "42"));
    proxy.after(
        "PutBucketTagging",
        1,
        Arc::new(move || Box::pin(put_tags(writer.clone(), "race-b".into(), stale.clone()))),
    );
    let r = ResourceRef::s3_bucket("race-b", "us-east-1");
    let event = tagwarden::events::parse_one(fleet::event_for(&r, &account, "e-b").as_bytes()).expect("event");
    let out = rec.handle_event(&event, None).await;
    let now = read("race-b").await;
    let applied = out.records.iter().all(|r| r.status == tagwarden::report::Status::Applied);
    assert!(
        !applied || (now.get("team").map(String::as_str) == Some("platform") && now.contains_key("cost-center")),
        "reported applied, yet the write was lost or the other writer's key dropped: {now:?} {out:?}"
    );
    assert_eq!(now.get(fleet::OWNER).map(String::as_str), Some("owned"));
    assert_eq!(now.get("cost-center").map(String::as_str), Some("42"), "the other writer's key is kept: {now:?}");
    assert_eq!(now.get("team").map(String::as_str), Some("platform"), "merged back: {now:?} {out:?}");
}

/// What no read can see: a second writer's `PutBucketTagging` landing between tagwarden's last
/// read and its put, which tagwarden's put replaces. That writer's own event carries the set it
/// put; read back without one of its keys, the keys lost are counted as conflicts of the event
/// (and logged naming the writer), so the window is visible.
#[tokio::test]
async fn a_write_lost_in_the_window_no_read_can_close_is_reported_by_its_own_event() {
    use std::sync::Arc;
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, ATTEMPT_TIMEOUT).await;
    let location = fleet::publish_policy(&direct, &account, &fleet::infrastructure(&[("team", "platform")])).await;
    let rec = fleet::reconciler(&via, &account, &location, Duration::ZERO);
    let tagging = |pairs: &[(&str, &str)]| {
        let tags: Vec<_> = pairs
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::s3::types::Tag::builder().key(*k).value(*v).build().expect("tag"))
            .collect();
        tagwarden::aws::sdk::s3::types::Tagging::builder().set_tag_set(Some(tags)).build().expect("tagging")
    };
    let initial = [(fleet::OWNER, "owned"), ("team", "legacy")];
    direct.s3.create_bucket().bucket("race-c").send().await.expect("bucket");
    direct.s3.put_bucket_tagging().bucket("race-c").tagging(tagging(&initial)).send().await.expect("tags");
    // Bob's put lands right after tagwarden's last read before its put (the second read).
    let bob_set = [(fleet::OWNER, "owned"), ("team", "legacy"), ("cost-center", "42")];
    let (writer, put) = (direct.clone(), tagging(&bob_set));
    proxy.after(
        "GetBucketTagging",
        2,
        Arc::new(move || {
            let (w, put) = (writer.clone(), put.clone());
            Box::pin(async move {
                w.s3.put_bucket_tagging().bucket("race-c").tagging(put).send().await.expect("bob's put");
            })
        }),
    );
    let r = ResourceRef::s3_bucket("race-c", "us-east-1");
    let ours = tagwarden::events::parse_one(fleet::event_for(&r, &account, "e-1").as_bytes()).expect("event");
    let out = rec.handle_event(&ours, None).await;
    let now = Tagger::new(direct.clone()).read(&r).await.expect("read");
    assert!(!now.contains_key("cost-center"), "the window exists (S3 has no conditional tagging): {now:?} {out:?}");

    // Bob's own PutBucketTagging event, with the set he put.
    let mut event: Value = serde_json::from_str(&fleet::event_for(&r, &account, "bob-1")).expect("json");
    let tags: Vec<Value> = bob_set.iter().map(|(k, v)| json!({"Key": k, "Value": v})).collect();
    event["detail"]["requestParameters"]["Tagging"]["TagSet"]["Tag"] = json!(tags);
    let bob = tagwarden::events::parse_one(event.to_string().as_bytes()).expect("event");
    let outs = rec.handle_events(&[bob], None).await;
    let conflicts = outs[0].metrics.by_type.get("s3:bucket").map(|c| c.conflicts);
    assert_eq!(conflicts, Some(1), "the lost key is a conflict of bob's event: {outs:?}");
}
