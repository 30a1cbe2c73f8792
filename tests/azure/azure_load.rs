//! Load on the Azure side: many Event Grid events (duplicates, reordered) for a fleet in the fake
//! ARM, delivered to the custom handler with bounded concurrency, the policy in Azurite. Asserts
//! the final tags, exactly one Merge per drifted resource for the one policy version (the fake is
//! consistent and retries nothing, so anything more is a duplicate write), and that memory does
//! not grow with the events handled; reports events/s and peak RSS (not asserted).
//!
//! Size: `TAGWARDEN_LOAD_EVENTS` (default 1000) for `TAGWARDEN_LOAD_RESOURCES` (default 100);
//! `scripts/load` runs 10,000 events for 1,000 resources.

#![cfg(feature = "azure")]

use crate::{grid, load, support};
use std::time::Instant;

use grid::{EventGrid, Fleet, Rng};
use load::{env_usize, rss_kib};
use support::azurite;
use support::fake::FakeAzure;
use tagwarden::azure::reqwest;
use tagwarden::TagMap;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn many_events_with_duplicates_and_reordering_end_right_with_one_merge_per_resource() {
    let events = env_usize("TAGWARDEN_LOAD_EVENTS", 1000);
    let resources = env_usize("TAGWARDEN_LOAD_RESOURCES", 100).max(10);
    let concurrency = env_usize("TAGWARDEN_LOAD_CONCURRENCY", 16);
    let fake = FakeAzure::start(Some(support::env::OWN_CLIENT));
    let http = reqwest::Client::new();
    let container = azurite::container(&http).await;
    let tags = [("team", "platform"), ("cost-center", "42")];
    azurite::put_blob(&http, &container, "p.json", &grid::infrastructure(&tags)).await;
    let desired: TagMap = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let owned = resources * 9 / 10;
    let fleet = Fleet::create(&fake, owned, resources - owned, &tags);
    let drifted = fleet.drifted(&desired) as u64;
    let policy_url = format!("{container}/p.json?{}", azurite::account_sas());
    let handler = grid::handler(&fake, &fake.arm, &policy_url, &[("POLICY_TTL", "60")]);
    // The fake would keep every request; the handler counts its own calls.
    fake.quiet(true);

    // Every resource once, the rest duplicates, all shuffled.
    let all: Vec<&String> = fleet.all().collect();
    let mut rng = Rng(0x7a67_7761_7264_656e);
    let mut order: Vec<usize> = (0..all.len()).collect();
    while order.len() < events {
        order.push(rng.below(all.len()));
    }
    rng.shuffle(&mut order);

    let (rss_before, _) = rss_kib();
    let started = Instant::now();
    let mut grid = EventGrid::new(5);
    let mut samples = Vec::new();
    for (chunk_no, chunk) in order.chunks(1000).enumerate() {
        for (n, i) in chunk.iter().enumerate() {
            let id = format!("e{}", chunk_no * 1000 + n);
            grid.publish(&id, grid::write_event(all[*i]));
        }
        grid.drain(&handler, concurrency).await;
        // What was delivered need not be kept: memory measures the handler, not this test.
        grid.sent.clear();
        samples.push(rss_kib().0);
    }
    let elapsed = started.elapsed();
    let (rss_after, peak) = rss_kib();
    fake.quiet(false);

    assert_eq!(grid.done.len(), events, "dead-lettered: {:?}", grid.dead.iter().map(|(id, _)| id).collect::<Vec<_>>());
    let calls = handler.calls.snapshot();
    let writes = handler.calls.writes();
    let (wrong, applied) = fleet.check(&fake, &desired, &|_| true);
    assert!(wrong.is_empty(), "wrong final values: {wrong:#?}");
    assert_eq!(applied, fleet.owned.len());
    let rate = events as f64 / elapsed.as_secs_f64();
    println!(
        "AZURE LOAD: events={events} resources={} owned={} drifted={drifted} concurrency={concurrency} elapsed={:.1}s \
         events_per_s={rate:.0} merges={writes} redelivered={} rss_before={rss_before}KiB rss_after={rss_after}KiB \
         peak_rss(VmHWM)={peak}KiB",
        all.len(),
        fleet.owned.len(),
        elapsed.as_secs_f64(),
        grid.redelivered(),
    );
    println!("AZURE LOAD: calls {calls:?}");
    println!("AZURE LOAD: VmRSS after each 1,000 events (KiB): {samples:?}");
    // Duplicates handled at the same moment wait for each other and re-read: one Merge each.
    assert_eq!(writes, drifted, "one Merge per drifted resource for one policy version: {calls:?}");
    // One policy download for the whole run (a warm function, ETag-checked once a minute).
    assert_eq!(handler.engine.store.downloads(), 1, "{calls:?}");
    // Memory: no growth proportional to the events handled (64 MiB is far above what the
    // test's own bookkeeping needs).
    assert!(rss_after < rss_before + 64 * 1024, "RSS grew from {rss_before} KiB to {rss_after} KiB: {samples:?}");
}
