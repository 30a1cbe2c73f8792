//! Load: many events (duplicates, reordered) for a fleet of resources, through the Lambda handler
//! as SQS batches with bounded concurrency, against moto. Asserts the final tags, that tag writes
//! stay at one per drifted resource for the one policy version (plus retries, counted), and that
//! memory does not grow without bound; reports events/s and peak RSS (not asserted).
//!
//! Size: `TAGWARDEN_LOAD_EVENTS` (default 1000) for `TAGWARDEN_LOAD_RESOURCES` (default 100);
//! `scripts/load` runs the full 10,000 events for 1,000 resources.

#![cfg(feature = "aws")]

use crate::{fleet, load, support};
use std::time::{Duration, Instant};

use fleet::{Fleet, FleetSpec, Rng, Sqs};
use futures_util::stream::{self, StreamExt};
use load::{env_usize, rss_kib};
use tagwarden::aws::function;
use tagwarden::aws::Tagger;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn many_events_with_duplicates_and_reordering_end_right_with_one_write_per_resource() {
    let events = env_usize("TAGWARDEN_LOAD_EVENTS", 1000);
    let resources = env_usize("TAGWARDEN_LOAD_RESOURCES", 100).max(10);
    let concurrency = env_usize("TAGWARDEN_LOAD_CONCURRENCY", 16);
    let (clients, account, _) = support::account_with_env().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
    let desired = fleet::tags(&[("team", "platform"), ("cost-center", "42")]);
    let policy = fleet::infrastructure(&[("team", "platform"), ("cost-center", "42")]);
    clients.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("put");
    let spec = FleetSpec {
        instances: resources * 8 / 10,
        foreign_instances: resources / 20,
        buckets: resources / 10,
        roles: resources - resources * 8 / 10 - resources / 10 - resources / 20,
        target_groups: 0,
    };
    let created = Instant::now();
    let fleet = Fleet::create(&clients, &account, &spec).await;
    eprintln!("LOAD: fleet of {} resources created in {:.1}s", fleet.initial.len(), created.elapsed().as_secs_f64());
    // What has to be written at all: owned resources missing a desired value.
    let drifted =
        fleet.owned.iter().filter(|r| desired.iter().any(|(k, v)| fleet.initial[&r.id].get(k) != Some(v))).count()
            as u64;

    // Every resource once, the rest duplicates, all shuffled.
    let all: Vec<_> = fleet.all().cloned().collect();
    let mut rng = Rng(0x7a67_7761_7264_656e);
    let mut order: Vec<usize> = (0..all.len()).collect();
    while order.len() < events {
        order.push(rng.below(all.len()));
    }
    rng.shuffle(&mut order);
    let mut sqs = Sqs::new(5, 10);
    for (n, i) in order.iter().enumerate() {
        sqs.send(&format!("m{n}"), fleet::event_for(&all[*i], &account, &format!("e{n}")));
    }
    let rec = fleet::reconciler(&clients, &account, &format!("s3://{bucket}/p.json"), Duration::from_secs(60));
    clients.calls.reset();

    let (rss_before, _) = rss_kib();
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut corrected: u64 = 0;
    while !sqs.is_empty() {
        let mut batches = Vec::new();
        while !sqs.is_empty() {
            batches.push(sqs.receive());
        }
        let results: Vec<_> = stream::iter(batches)
            .map(|batch| {
                let rec = &rec;
                async move {
                    let inv = function::handle(rec, Sqs::payload(&batch).to_string()).await;
                    (batch, inv)
                }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        for (batch, inv) in results {
            sqs.invocations += 1;
            // A resource several events of a batch name is written once and recorded for each event.
            let written: std::collections::HashSet<String> = inv
                .lines
                .iter()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v["record"] == "reconcile" && v["status"] == "applied")
                .filter_map(|v| v["resource"].as_str().map(str::to_owned))
                .collect();
            corrected += written.len() as u64;
            assert!(inv.error.is_none(), "{:?}", inv.error);
            sqs.settle(batch, &inv.response);
        }
        samples.push(rss_kib().0);
    }
    let elapsed = started.elapsed();
    let (rss_after, peak) = rss_kib();

    assert_eq!(sqs.done.len(), events, "dead-lettered: {:?}", sqs.dead.iter().map(|(id, _)| id).collect::<Vec<_>>());
    let checker = Tagger::new(clients.clone());
    let calls = clients.calls.snapshot();
    let writes = clients.calls.writes();
    let (wrong, applied) = fleet.check(&checker, &desired, &|_| true).await;
    assert!(wrong.is_empty(), "wrong final values: {wrong:#?}");
    assert_eq!(applied, fleet.owned.len());
    let rate = events as f64 / elapsed.as_secs_f64();
    println!(
        "LOAD: events={events} resources={} owned={} drifted={drifted} concurrency={concurrency} elapsed={:.1}s \
         events_per_s={rate:.0} tag_write_calls={writes} resources_written={corrected} redelivered={} rss_before={}KiB rss_after={}KiB peak_rss(VmHWM)={}KiB",
        all.len(),
        fleet.owned.len(),
        elapsed.as_secs_f64(),
        sqs.redelivered(),
        rss_before,
        rss_after,
        peak
    );
    println!("LOAD: calls {calls:?}");
    // One write per drifted resource for the one policy version. Duplicates of one resource
    // handled at the same moment by two concurrent invocations can both see the drift; such
    // races are the only allowance (every write is counted above, none is hidden). A batch's
    // resources that need the same delta share one call, so there are fewer calls than writes.
    assert!(corrected >= drifted, "{corrected} resources written for {drifted} drifted");
    assert!(corrected <= drifted + drifted / 10, "{corrected} resources written for {drifted} drifted: {calls:?}");
    assert!(writes <= corrected, "{writes} write calls for {corrected} resources written: {calls:?}");
    // Memory: no growth proportional to the events handled (64 MiB is far above the few MiB
    // the test's own bookkeeping needs).
    assert!(rss_after < rss_before + 64 * 1024, "RSS grew from {rss_before} KiB to {rss_after} KiB: {samples:?}");
}
