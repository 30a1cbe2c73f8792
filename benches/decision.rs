//! The per-event decision path: parse an EventBridge CloudTrail event and plan its resource
//! against a 25-tag policy. Run with `cargo bench --bench decision`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use tagwarden::cloud::Cloud;
use tagwarden::{events, plan, policy, TagMap};

fn decision(c: &mut Criterion) {
    let event =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/events/aws/ec2-run-instances-sso.json"))
            .expect("fixture");
    let tags: Vec<String> = (0..25).map(|i| format!(r#"{{"key": "tag-{i:02}", "value": "value-{i:02}"}}"#)).collect();
    let doc = format!(
        r#"{{"kind": "Infrastructure", "status": {{"infrastructureName": "bench-1",
            "platformStatus": {{"type": "AWS", "aws": {{"resourceTags": [{}]}}}}}}}}"#,
        tags.join(", ")
    );
    let policy = policy::load_one("bench.yaml", &doc).expect("policy");
    // An owned instance with some drift: half the tags present, a third of them wrong.
    let mut current: TagMap = (0..12)
        .map(|i| (format!("tag-{i:02}"), if i % 3 == 0 { "old".into() } else { format!("value-{i:02}") }))
        .collect();
    current.insert("kubernetes.io/cluster/bench-1".into(), "owned".into());
    current.insert("Name".into(), "web-1".into());

    c.bench_function("parse RunInstances + plan against 25 tags", |b| {
        b.iter(|| {
            let event = events::parse_one(black_box(&event)).expect("parses");
            let resource = &event.resources[0];
            let plan = plan::plan(&policy, Cloud::Aws, "bench-1", resource, black_box(&current));
            black_box(plan)
        })
    });
    c.bench_function("parse RunInstances only", |b| b.iter(|| events::parse_one(black_box(&event)).expect("parses")));
}

criterion_group!(benches, decision);
criterion_main!(benches);
