//! One SQS batch of ten messages through the Lambda's handler, messages side by side (bounded by
//! the engine's concurrency) versus one at a time, with every AWS call slowed by a fixed 30 ms
//! in the fault proxy so the figure is about round trips, not moto's speed. Both must end the same:
//! the same batch item failures (only the messages that failed), one write per drifted resource
//! (a duplicate message for a resource in the same batch writes nothing), every owned resource in
//! line, foreign ones untouched. Timings are printed (`--nocapture`), never asserted.

#![cfg(feature = "aws")]

use crate::{fleet, support};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fleet::{Fleet, FleetSpec};
use serde_json::{json, Value};
use support::fault_proxy::{Fault, FaultProxy, Rule, When};
use tagwarden::aws::function;
use tagwarden::aws::Tagger;
use tagwarden::resource::ResourceRef;

const LATENCY: Duration = Duration::from_millis(30);

struct Run {
    failures: BTreeSet<String>,
    writes: u64,
    calls: u64,
    elapsed: Duration,
    lags: usize,
}

async fn run_batch(concurrency: usize) -> Run {
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, Duration::from_secs(5)).await;
    let bucket = format!("policy-{account}");
    direct.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
    let pairs = [("team", "platform"), ("cost-center", "42")];
    let policy = fleet::infrastructure(&pairs);
    direct.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("policy");
    let spec = FleetSpec { instances: 5, foreign_instances: 1, buckets: 1, roles: 1, target_groups: 1 };
    let fleet = Fleet::create(&direct, &account, &spec).await;
    let mut rec = fleet::reconciler(&via, &account, &format!("s3://{bucket}/p.json"), Duration::from_secs(300));
    rec.set_concurrency(concurrency);
    // The policy is read once before the batch, as on a warm function.
    rec.store.current(true).await.0.expect("the policy is valid");

    // Eight resources, the first one twice, and a message that is not an event: ten messages.
    let resources: Vec<&ResourceRef> = fleet.all().take(8).collect();
    assert_eq!(resources.len(), 8, "the fleet has eight resources to name");
    let mut bodies: Vec<(String, String)> = resources
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("m{i}"), fleet::event_for(r, &account, &format!("e{i}"))))
        .collect();
    bodies.insert(1, ("dup".into(), fleet::event_for(resources[0], &account, "e0-again")));
    bodies.push(("garbage".into(), "not an event {".into()));
    let records: Vec<Value> =
        bodies.iter().map(|(id, body)| json!({"messageId": id, "eventSource": "aws:sqs", "body": body})).collect();

    proxy.set_rules(vec![Rule::new(None, None, Fault::Delay(LATENCY), When::Always)]);
    via.calls.reset();
    let started = Instant::now();
    let inv = function::handle(&rec, json!({"Records": records}).to_string()).await;
    let elapsed = started.elapsed();
    proxy.clear_rules();

    assert!(inv.error.is_none(), "{:?}", inv.error);
    let failures = inv.response["batchItemFailures"]
        .as_array()
        .expect("batchItemFailures")
        .iter()
        .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_owned))
        .collect();
    let calls = via.calls.snapshot();
    let writes = ["EC2:CreateTags", "S3:PutBucketTagging", "IAM:TagRole", "Elastic Load Balancing v2:AddTags"]
        .iter()
        .filter_map(|op| calls.get(*op))
        .sum();
    let lags = inv.lines.iter().filter(|l| l.contains("\"compliance_lag_ms\"")).count();

    let desired = fleet::tags(&pairs);
    let named: Vec<String> = resources.iter().map(|r| r.id.clone()).collect();
    let (wrong, _) = fleet.check(&Tagger::new(direct), &desired, &|r: &ResourceRef| named.contains(&r.id)).await;
    assert!(wrong.is_empty(), "concurrency {concurrency}: wrong values {wrong:#?}");
    Run { failures, writes, calls: calls.values().sum(), elapsed, lags }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_side_by_side_ends_as_one_at_a_time_does() {
    let one = run_batch(1).await;
    let ten = run_batch(10).await;
    let expected: BTreeSet<String> = ["garbage".to_string()].into();
    assert_eq!(one.failures, expected, "only the message that is not an event fails");
    assert_eq!(ten.failures, expected, "side by side, still only that message fails");
    assert!(one.writes > 0, "the fleet starts with drift");
    assert_eq!(ten.writes, one.writes, "one write per drifted resource, the duplicate message included");
    assert_eq!(ten.calls, one.calls, "the same calls, only sooner");
    assert!(one.lags > 0 && ten.lags == one.lags, "compliance lag recorded: {} vs {}", one.lags, ten.lags);
    println!(
        "BATCH(10 messages, {} ms per call): one at a time {:.0} ms, side by side (10) {:.0} ms ({:.1}x); \
         {} calls and {} writes each",
        LATENCY.as_millis(),
        one.elapsed.as_secs_f64() * 1e3,
        ten.elapsed.as_secs_f64() * 1e3,
        one.elapsed.as_secs_f64() / ten.elapsed.as_secs_f64(),
        one.calls,
        one.writes
    );
}
