//! The scale-up scenario on moto, through the real handler (`aws::function`) with SQS
//! batching as Lambda's event source mapping does it: a batch is invoked when `batch` messages
//! have arrived or `window` has passed since the first. Every call is counted at a proxy in front
//! of moto, with its arrival time.
//!
//! N instances (default 200; `TAGWARDEN_SCALE_UP=1000` for the full scenario) are created one
//! `RunInstances` each, every one with its root volume, 10 % already compliant; their CloudTrail
//! events arrive at `TAGWARDEN_SCALE_UP_RATE` a second (default 50), stamped with the time they
//! are sent, and 20 tag-change events on 5 of them are mixed in. The same events are then sent
//! again (nothing to write), then a trickle of 1 event a second.
//!
//! Measured per run (printed as `SCALE UP:` lines): calls per resource corrected, `DescribeTags`
//! and `CreateTags` totals, the peak `CreateTags` in any 1-second window, and compliance lag
//! p50/p99. "Before" is one event per invocation without the write pacing: the per-event cost of
//! the event path before batching. Asserted are counts, never wall-clock limits: the batched
//! path's calls per corrected resource, the write pacing, the second pass's zero writes, and that
//! every owned resource ends compliant with its unmanaged tags kept.

#![cfg(feature = "aws")]

use crate::{fleet, support};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fleet::{infrastructure, reconciler, tags, OWNER};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use support::fault_proxy::FaultProxy;
use tagwarden::aws::function;
use tagwarden::aws::sdk::ec2::types::{ResourceType, Tag, TagSpecification};
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::enforce::Engine;
use tagwarden::rate_limit::RateLimit;
use tagwarden::report::Status;
use tagwarden::resource::ResourceRef;

const DESIRED: &[(&str, &str)] = &[("team", "platform"), ("env", "prod")];
/// The Terraform module's defaults (infra/aws variables `sqs_batch_size`,
/// `sqs_batching_window_seconds`, `ec2_writes_per_second`, `sqs_maximum_concurrency`).
const BATCH: usize = 100;
const WINDOW: Duration = Duration::from_secs(2);
const WRITES_PER_SECOND: f64 = 2.0;
/// Invocations of the mapping at once (`sqs_maximum_concurrency`). They share one write bucket
/// here; deployed, each function instance has its own.
const CONCURRENCY: usize = 2;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A `RunInstances` CloudTrail event as EventBridge delivers it (from the fixture, one instance,
/// no network interfaces), made by machine-api, stamped `at_ms`.
fn run_instances_event(instance: &str, account: &str, id: &str, at_ms: u64) -> String {
    let path =
        format!("{}/tests/fixtures/events/aws/ec2-run-instances-three-with-enis.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("fixture");
    let mut v: Value =
        serde_json::from_str(&text.replace("111122223333", account).replace("eu-west-1", "us-east-1")).expect("json");
    let items = v["detail"]["responseElements"]["instancesSet"]["items"].as_array_mut().expect("items");
    items.truncate(1);
    items[0]["instanceId"] = json!(instance);
    items[0].as_object_mut().expect("item").remove("networkInterfaceSet");
    stamp(&mut v, id, at_ms);
    v.to_string()
}

/// Someone's `CreateTags` on `r`, stamped `at_ms`.
fn tag_change_event(r: &ResourceRef, account: &str, id: &str, at_ms: u64) -> String {
    let mut v: Value = serde_json::from_str(&fleet::event_for(r, account, id)).expect("json");
    stamp(&mut v, id, at_ms);
    v.to_string()
}

fn stamp(v: &mut Value, id: &str, at_ms: u64) {
    let time = tagwarden::events::format_rfc3339_ms(at_ms);
    v["id"] = json!(id);
    v["time"] = json!(time);
    v["detail"]["eventTime"] = json!(time);
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// N instances, one `RunInstances` each with its root volume tagged like it; every tenth already
/// carries the policy. Returns (instance, volume) pairs.
async fn launch(c: &Clients, account: &str, n: usize) -> Vec<(ResourceRef, ResourceRef)> {
    let image = c.ec2.describe_images().send().await.expect("images");
    let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut pairs = vec![(OWNER, "owned"), ("Name", "worker"), ("machine", "keep-me")];
        if i % 10 == 0 {
            pairs.extend_from_slice(DESIRED);
        }
        let spec = |t: ResourceType| {
            let set = pairs.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()).collect();
            TagSpecification::builder().resource_type(t).set_tags(Some(set)).build()
        };
        let run = c
            .ec2
            .run_instances()
            .image_id(&image)
            .min_count(1)
            .max_count(1)
            .tag_specifications(spec(ResourceType::Instance))
            .tag_specifications(spec(ResourceType::Volume))
            .send()
            .await
            .expect("run instance");
        let instance = run.instances()[0].instance_id().expect("id").to_string();
        let volumes = c
            .ec2
            .describe_volumes()
            .filters(
                tagwarden::aws::sdk::ec2::types::Filter::builder()
                    .name("attachment.instance-id")
                    .values(&instance)
                    .build(),
            )
            .send()
            .await
            .expect("volumes");
        let volume = volumes.volumes()[0].volume_id().expect("volume").to_string();
        out.push((ResourceRef::ec2(&instance, "us-east-1", account), ResourceRef::ec2(&volume, "us-east-1", account)));
    }
    out
}

/// What one pass measured.
#[derive(Debug, Default)]
struct Pass {
    events: usize,
    invocations: usize,
    corrected: usize,
    calls: BTreeMap<String, u64>,
    peak_create_tags_per_second: usize,
    lag_ms: Vec<u64>,
    handed_back: usize,
    /// The EMF metric lines the invocations printed.
    emf: Vec<String>,
}

impl Pass {
    fn total_calls(&self) -> u64 {
        self.calls.iter().filter(|(op, _)| op.starts_with("ec2:") || op.starts_with("tagging:")).map(|(_, n)| n).sum()
    }

    fn calls_per_corrected(&self) -> f64 {
        self.total_calls() as f64 / self.corrected.max(1) as f64
    }

    fn percentile(&self, p: f64) -> u64 {
        let mut lag = self.lag_ms.clone();
        lag.sort_unstable();
        lag.get(((lag.len() as f64 * p).ceil() as usize).saturating_sub(1)).copied().unwrap_or(0)
    }

    fn line(&self, name: &str) -> String {
        format!(
            "SCALE UP: {name}: events={} invocations={} corrected={} calls={} ({:.3} per resource corrected) \
             DescribeTags={} DescribeVolumes={} CreateTags={} peak_CreateTags_per_1s={} lag_p50_ms={} lag_p99_ms={} handed_back={}",
            self.events,
            self.invocations,
            self.corrected,
            self.total_calls(),
            self.calls_per_corrected(),
            self.calls.get("ec2:DescribeTags").unwrap_or(&0),
            self.calls.get("ec2:DescribeVolumes").unwrap_or(&0),
            self.calls.get("ec2:CreateTags").unwrap_or(&0),
            self.peak_create_tags_per_second,
            self.percentile(0.5),
            self.percentile(0.99),
            self.handed_back,
        )
    }
}

/// Send `count` events (built by `make`, stamped with the time each is sent) at `rate` a second
/// through an event source mapping of `batch`/`window` with at most `CONCURRENCY` invocations at
/// once; count the calls at `proxy`.
async fn pass(
    rec: &Engine<Tagger>,
    proxy: &FaultProxy,
    count: usize,
    rate: f64,
    batch: usize,
    window: Duration,
    make: &(dyn Fn(usize, u64) -> String + Sync),
) -> Pass {
    proxy.reset_requests();
    let mut result = Pass { events: count, ..Pass::default() };
    let due = |i: usize| Duration::from_secs_f64(i as f64 / rate);
    // The batches as the mapping forms them from the arrivals: opened by the first message,
    // released when full or when the window since the first has passed.
    let mut batches = Vec::new();
    let mut next = 0;
    while next < count {
        let opened = due(next);
        let mut end = next;
        while end < count && end - next < batch && due(end) <= opened + window {
            end += 1;
        }
        let release = if end - next == batch { due(end - 1) } else { opened + window };
        batches.push((release, next..end));
        next = end;
    }
    let (start, start_ms) = (Instant::now(), now_ms());
    let invocations: Vec<function::Invocation> = stream::iter(batches)
        .map(|(release, range)| async move {
            tokio::time::sleep_until((start + release).into()).await;
            let messages: Vec<Value> = range
                .map(|i| {
                    let body = make(i, start_ms + due(i).as_millis() as u64);
                    json!({"eventSource": "aws:sqs", "messageId": format!("m{i}"), "body": body})
                })
                .collect();
            function::handle(rec, json!({ "Records": messages }).to_string()).await
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    for inv in invocations {
        result.invocations += 1;
        result.handed_back += inv.response["batchItemFailures"].as_array().map_or(0, Vec::len);
        for line in &inv.lines {
            let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
            if v.get("_aws").is_some() {
                result.emf.push(line.clone());
            }
            if v["record"] == "reconcile" && v["status"] == Status::Applied.as_str() {
                result.corrected += 1;
                result.lag_ms.extend(v["compliance_lag_ms"].as_u64());
            }
        }
    }
    result.calls = proxy.requests();
    let writes = proxy.arrivals("ec2:CreateTags");
    result.peak_create_tags_per_second = writes
        .iter()
        .map(|t| writes.iter().filter(|u| **u >= *t && **u < *t + Duration::from_secs(1)).count())
        .max()
        .unwrap_or(0);
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_costs_tens_of_calls_not_thousands_and_never_starves_the_cluster() {
    let n = env_usize("TAGWARDEN_SCALE_UP", 200);
    let rate = env_usize("TAGWARDEN_SCALE_UP_RATE", 50) as f64;
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, Duration::from_secs(10)).await;
    let location = fleet::publish_policy(&direct, &account, &infrastructure(DESIRED)).await;
    let launched = launch(&direct, &account, n).await;
    let instances: Vec<ResourceRef> = launched.iter().map(|(i, _)| i.clone()).collect();

    // The stream: every launch, with 20 tag-change events on 5 of them after their launch.
    let mut stream: Vec<(usize, Option<usize>)> = (0..n).map(|i| (i, None)).collect();
    for k in 0..20 {
        let target = (k % 5) * (n / 5);
        stream.insert((target + 1 + k).min(stream.len()), (target, Some(k)));
    }
    let make = |i: usize, at: u64| match stream[i] {
        (j, None) => run_instances_event(&instances[j].id, &account, &format!("run-{j}"), at),
        (j, Some(k)) => tag_change_event(&instances[j], &account, &format!("tag-{k}"), at),
    };
    let events = stream.len();

    // Before: one event per invocation, unpaced (the event path before batching), on the first
    // fifth of the fleet's stream.
    let before_rec = reconciler(&via, &account, &location, Duration::from_secs(60));
    let sample = (events / 5).max(1);
    let before = pass(&before_rec, &proxy, sample, rate, 1, Duration::ZERO, &make).await;
    println!("{}", before.line(&format!("before (batch 1, no window, first {sample} events)")));

    // After: the module's batch and window, EC2 writes paced.
    let mut rec = reconciler(&via, &account, &location, Duration::from_secs(60));
    rec.adapter.ec2_writes = Some(RateLimit::per_second(WRITES_PER_SECOND));
    let after = pass(&rec, &proxy, events, rate, BATCH, WINDOW, &make).await;
    println!("{}", after.line(&format!("after (batch {BATCH}, window {WINDOW:?}, {WRITES_PER_SECOND}/s)")));
    let again = pass(&rec, &proxy, events, rate, BATCH, WINDOW, &make).await;
    println!("{}", again.line("second pass (same events)"));
    // A trickle: someone edits one instance's tags a second; each edit is corrected.
    let trickle_n = 10.min(n / 2);
    for r in &instances[..2 * trickle_n] {
        let drift = Tag::builder().key("team").value("legacy").build();
        direct.ec2.create_tags().resources(&r.id).tags(drift).send().await.expect("drift");
    }
    let edit = |offset: usize| {
        let (instances, account) = (&instances, &account);
        move |i: usize, at: u64| tag_change_event(&instances[offset + i], account, &format!("edit-{offset}-{i}"), at)
    };
    let trickle = pass(&rec, &proxy, trickle_n, 1.0, BATCH, WINDOW, &edit(0)).await;
    println!("{}", trickle.line("trickle (1 edit a second)"));
    let trickle_before = pass(&before_rec, &proxy, trickle_n, 1.0, 1, Duration::ZERO, &edit(trickle_n)).await;
    println!("{}", trickle_before.line("trickle before (batch 1, no window)"));

    // Every owned resource ends compliant, its unmanaged tags kept.
    let desired = tags(DESIRED);
    for (instance, volume) in &launched {
        for r in [instance, volume] {
            let now = rec.adapter.read(r).await.expect("read back");
            assert!(desired.iter().all(|(k, v)| now.get(k) == Some(v)), "{r}: {now:?}");
            assert_eq!(now.get("machine").map(String::as_str), Some("keep-me"), "{r}");
        }
    }
    // The before-pass corrected the first fifth; the batched pass the rest (volumes included).
    assert_eq!(before.corrected + after.corrected, launched.len() * 2 - 2 * n.div_ceil(10), "{after:?}");
    assert_eq!(after.handed_back, 0);
    assert!(after.calls_per_corrected() <= 0.05, "{}", after.line("after"));
    assert!(after.peak_create_tags_per_second <= WRITES_PER_SECOND as usize, "{}", after.line("after"));
    assert_eq!((again.corrected, again.calls.get("ec2:CreateTags")), (0, None), "{}", again.line("again"));
    assert!(before.calls_per_corrected() > 1.0, "the per-event path costs a call and more per resource");
    assert_eq!((trickle.corrected, trickle_before.corrected), (trickle_n, trickle_n));
    assert!(after.emf.iter().any(|l| l.contains("CallsPerCorrection")), "the cost is a metric");
}
