//! Events per second through the Lambda's handler, in-process, against a real moto server:
//! real-shaped RunInstances events for owned instances, first with drift (read + one write each),
//! then again without (reads only). Run with `cargo bench --bench event_path` (moto comes from
//! scripts/install-tools). Prints a table; asserts nothing about time.

use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::sdk::{ec2, s3};
use tagwarden::aws::Tagger;
use tagwarden::enforce::Engine;
use tagwarden::events::{self, Event};
use tagwarden_testkit::aws as support;

const EVENTS: usize = 200;

#[tokio::main]
async fn main() {
    let (clients, account) = support::account().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let tags: Vec<String> = (0..25).map(|i| format!(r#"{{"key": "tag-{i:02}", "value": "v{i}"}}"#)).collect();
    let policy = format!(
        r#"{{"kind": "Infrastructure", "status": {{"infrastructureName": "bench-1", "platformStatus": {{"type": "AWS", "aws": {{"resourceTags": [{}]}}}}}}}}"#,
        tags.join(",")
    );
    clients
        .s3
        .put_object()
        .bucket(&bucket)
        .key("p.json")
        .body(s3::primitives::ByteStream::from(policy.into_bytes()))
        .send()
        .await
        .expect("policy");
    let image =
        clients.ec2.describe_images().send().await.expect("images").images()[0].image_id().expect("ami").to_string();
    let owned = ec2::types::TagSpecification::builder()
        .resource_type(ec2::types::ResourceType::Instance)
        .tags(ec2::types::Tag::builder().key("kubernetes.io/cluster/bench-1").value("owned").build())
        .build();
    let run = clients
        .ec2
        .run_instances()
        .image_id(image)
        .min_count(EVENTS as i32)
        .max_count(EVENTS as i32)
        .tag_specifications(owned)
        .send()
        .await
        .expect("instances");
    let template = std::fs::read_to_string(format!(
        "{}/tests/fixtures/events/aws/ec2-run-instances-sso.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture");
    let events: Vec<Event> = run
        .instances()
        .iter()
        .map(|i| {
            let text = template
                .replace("i-0123456789abcdef0", i.instance_id().expect("id"))
                .replace("111122223333", &account)
                .replace("eu-west-1", "us-east-1");
            events::parse_one(text.as_bytes()).expect("event")
        })
        .collect();
    let location: PolicyLocation = format!("s3://{bucket}/p.json").parse().expect("location");
    let engine = Engine::new(
        Tagger::new(clients.clone()),
        policy_store(&clients, location, Duration::from_secs(60)),
        Vec::new(),
    );

    println!("{EVENTS} RunInstances events (instance, no attached volume), 25-tag policy, moto on loopback");
    println!(
        "{:<28} {:>11} {:>10} {:>16} {:>14}",
        "pass", "concurrency", "events/s", "API calls/event", "writes/event"
    );
    for (pass, concurrency) in [("drift (first time)", 1), ("no drift", 1), ("no drift", 8)] {
        clients.calls.reset();
        let started = Instant::now();
        let outcomes: Vec<_> =
            stream::iter(&events).map(|e| engine.handle_event(e, None)).buffer_unordered(concurrency).collect().await;
        let elapsed = started.elapsed();
        assert!(outcomes.iter().all(|o| !o.must_retry()), "an event failed");
        let n = EVENTS as f64;
        println!(
            "{pass:<28} {concurrency:>11} {:>10.0} {:>16.2} {:>14.2}",
            n / elapsed.as_secs_f64(),
            clients.calls.total() as f64 / n,
            clients.calls.writes() as f64 / n
        );
    }
}
