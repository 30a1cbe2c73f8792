//! The Cloud Run function's metrics end to end, in-process: a sweep against the fake Google Cloud
//! APIs (through the official clients, Cloud Monitoring's among them) and the real
//! gcp-storage-emulator holding a cluster set's policy writes the core table's metrics as
//! `custom.googleapis.com/tagwarden/<name>` series of a `generic_task`, per cluster (`infra_id`)
//! and resource type; a second sweep within the minimum interval holds its counts back (the fake
//! would refuse a point too soon) and the next point carries them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use serde_json::{json, Value};
use tagwarden_core::report::Metrics;
use tagwarden_engine::server::Request;
use tagwarden_gcp::config::Config;
use tagwarden_gcp::function::Handler;
use tagwarden_gcp::metrics::MIN_POINT_INTERVAL;
use tagwarden_testkit::gcp::emulator::gcs_emulator;
use tagwarden_testkit::gcp::{FakeGcp, WrittenSeries};

const INFRA: &str = "ocp-gcp-7x2k";
const OWNED: &str = "kubernetes-io-cluster-ocp-gcp-7x2k";
const POLICY: &str = "version: 1\ncloud: gcp\ninfraID: ocp-gcp-7x2k\ntags: {cost-center: cc-42, team: platform}\n";

async fn handler(fake: &FakeGcp) -> Handler {
    let gcs = gcs_emulator();
    let bucket = gcs.bucket().await;
    gcs.put_object(&bucket, &format!("clusters/{INFRA}/policy.yaml"), POLICY.as_bytes(), "application/yaml").await;
    let vars = [
        ("TAGWARDEN_POLICY", format!("gs://{bucket}/clusters/*/")),
        ("POLICY_TTL", "0".to_string()),
        ("TAGWARDEN_CLUSTERS", INFRA.to_string()),
        ("TAGWARDEN_SWEEP_SCOPES", "folders/7".to_string()),
        ("TAGWARDEN_GCP_ENDPOINT", fake.endpoint.clone()),
        ("STORAGE_EMULATOR_HOST", gcs.endpoint.clone()),
        ("TAGWARDEN_METRICS_PROJECT", "p-1".to_string()),
        ("K_SERVICE", "tagwarden-test".to_string()),
    ];
    let config = Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).expect("config");
    Handler::new(&config).await.expect("handler")
}

async fn sweep(handler: &Handler) -> (u16, Value) {
    let data = base64::engine::general_purpose::STANDARD.encode(br#"{"tagwarden":"sweep"}"#);
    let body = json!({"message": {"data": data, "attributes": {"tagwarden": "sweep"}, "messageId": "s-1"}, "subscription": "projects/p-1/subscriptions/tw-events"});
    let req =
        Request { method: "POST".into(), path: "/".into(), body: body.to_string().into_bytes(), ..Request::default() };
    let resp = handler.handle(req).await;
    (resp.status, serde_json::from_slice(&resp.body).unwrap_or(Value::Null))
}

/// The sum of a count over its series, by name.
fn sums(series: &[WrittenSeries]) -> BTreeMap<String, i64> {
    series.iter().filter_map(|s| Some((s.name().to_string(), s.int64()?))).fold(BTreeMap::new(), |mut m, (n, v)| {
        *m.entry(n).or_default() += v;
        m
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_writes_the_tables_metrics_per_cluster_and_holds_a_point_too_soon() {
    let fake = FakeGcp::start();
    fake.add_project("p-1", 101, &["folders/7", "organizations/9"]);
    let drift = [(OWNED, "owned"), ("team", "wrong")];
    fake.add_instance("p-1", "us-central1-a", "master-0", &drift);
    fake.add_disk("p-1", "us-central1-a", "master-0-disk", &drift);
    fake.add_bucket("p-1", "ocp-gcp-7x2k-image-registry", "US", &drift);
    let handler = handler(&fake).await;

    let (status, summary) = sweep(&handler).await;
    assert_eq!(status, 200, "{summary}");
    let first = fake.time_series();
    assert!(!first.is_empty(), "no series written");
    for s in &first {
        assert!(s.metric_type.starts_with("custom.googleapis.com/tagwarden/"), "{}", s.metric_type);
        assert_eq!(
            (s.project.as_str(), s.resource_type.as_str(), s.metric_kind.as_str()),
            ("p-1", "generic_task", "GAUGE")
        );
        assert_eq!(s.resource_labels.get("job").map(String::as_str), Some("tagwarden-test"));
        assert_eq!(s.resource_labels.get("namespace").map(String::as_str), Some("tagwarden"));
        assert!(s.resource_labels.get("task_id").is_some_and(|t| !t.is_empty()));
        assert_eq!(s.label("cloud"), Some("gcp"));
    }
    // The deployment's own count under "all", the resources' under their cluster.
    let sweeps: Vec<&WrittenSeries> = first.iter().filter(|s| s.name() == "SweepsCompleted").collect();
    assert_eq!(sweeps.len(), 1);
    assert_eq!((sweeps[0].label("infra_id"), sweeps[0].int64()), (Some("all"), Some(1)));
    let typed: Vec<&WrittenSeries> = first.iter().filter(|s| s.label("resource_type").is_some()).collect();
    assert!(typed.iter().all(|s| s.label("infra_id") == Some(INFRA)), "{typed:?}");
    let types: std::collections::BTreeSet<&str> = typed.iter().filter_map(|s| s.label("resource_type")).collect();
    assert_eq!(types.len(), 3, "instance, disk, bucket: {types:?}");
    let sums = sums(&first);
    assert_eq!(sums.get("ResourcesEvaluated"), Some(&3), "{sums:?}");
    assert_eq!(sums.get("TagsWritten"), Some(&6), "cost-center and team on each: {sums:?}");
    assert_eq!(sums.get("ResourcesInLine"), Some(&3), "{sums:?}");
    assert_eq!(sums.get("ResourcesDrifted"), Some(&0), "{sums:?}");
    let latency = first.iter().filter(|s| s.name() == "ReconcileLatency").map(|s| s.count().unwrap_or(0)).sum::<i64>();
    assert_eq!(latency, 3, "one reconcile latency per resource");
    assert!(first.iter().all(|s| s.name() != "CallsPerCorrection"), "CloudWatch's only");

    // A second sweep at once: every series got a point under 10 s ago, so nothing is sent.
    let (status, _) = sweep(&handler).await;
    assert_eq!(status, 200);
    assert_eq!(fake.time_series().len(), first.len(), "a point too soon was written");
    assert!(fake.calls().iter().all(|c| !c.path.ends_with("/timeSeries") || c.status == 200));
    // The next point, once the interval has passed, carries the held counts.
    let publisher = handler.metrics.as_ref().expect("publisher");
    let later = SystemTime::now() + MIN_POINT_INTERVAL + Duration::from_secs(1);
    publisher.publish_at(&Metrics::default(), &[], "all", later).await.expect("written");
    let second: Vec<WrittenSeries> = fake.time_series().split_off(first.len());
    let again = self::sums(&second);
    assert_eq!(again.get("SweepsCompleted"), Some(&1), "{again:?}");
    assert_eq!(again.get("ResourcesEvaluated"), Some(&3), "{again:?}");
    assert_eq!(again.get("TagsWritten"), Some(&0), "in line already: {again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_leaves_the_invocation_alone() {
    let fake = FakeGcp::start();
    fake.add_project("p-1", 101, &["folders/7", "organizations/9"]);
    fake.add_instance("p-1", "us-central1-a", "master-0", &[(OWNED, "owned")]);
    let handler = handler(&fake).await;
    fake.fail_next("POST", "/timeSeries", 503);
    let (status, summary) = sweep(&handler).await;
    assert_eq!(status, 200, "metrics are best effort: {summary}");
    assert!(fake.time_series().is_empty());
    assert!(fake.calls().iter().any(|c| c.path == "/v3/projects/p-1/timeSeries" && c.status == 503));
}
