//! The built `tagwarden-gcp-function` binary, driven over HTTP exactly as a Pub/Sub push
//! subscription drives a Cloud Run service (readiness `GET /`, then `POST /` with the push
//! envelope), against the fake Google APIs and the real gcp-storage-emulator holding the policy.
//! Each owned type is corrected by one audit-log event, built from the real entries in
//! tests/fixtures/events/gcp (their sources are in its README) with only the names changed.
//! Also measures cold start (spawn → ready) and peak RSS (`VmHWM`).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use tagwarden_testkit::gcp::emulator::gcs_emulator;
use tagwarden_testkit::gcp::FakeGcp;

const INFRA: &str = "ocp-gcp-7x2k";
const OWNED: &str = "kubernetes-io-cluster-ocp-gcp-7x2k";
const SELF: &str = "tagwarden@p-1.iam.gserviceaccount.com";

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/../../tests/fixtures/events/gcp/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("fixture JSON")
}

/// A real entry of `fixture`, naming `resource_name` in project `project` instead (and `method`).
fn entry(fixture_name: &str, method: &str, resource_name: &str, project: &str) -> Value {
    let mut e = fixture(fixture_name);
    e["protoPayload"]["methodName"] = json!(method);
    e["protoPayload"]["resourceName"] = json!(resource_name);
    e["resource"]["labels"]["project_id"] = json!(project);
    e
}

/// The push envelope (Pub/Sub, "Push subscriptions": `message.data` is the base64 of the log entry).
fn push(entry: &Value) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode(entry.to_string());
    json!({"message": {"data": data, "attributes": {"logging.googleapis.com/timestamp": "2026-11-29T10:00:00Z"},
                       "messageId": format!("m-{}", fastid()), "publishTime": "2026-11-29T10:00:01Z"},
           "subscription": "projects/p-1/subscriptions/tagwarden-events"})
    .to_string()
}

fn fastid() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default()
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// `POST /` with `body` over plain HTTP/1.1: the status and the JSON answer.
fn post(port: u16, body: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let req = format!(
        "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let json = out.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok()).unwrap_or(Value::Null);
    (status, json)
}

fn ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

fn labels(fake: &FakeGcp, full: &str) -> BTreeMap<String, String> {
    fake.labels(full).unwrap_or_default().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_corrects_each_owned_type_after_one_pushed_audit_log_entry() {
    let fake = FakeGcp::start();
    fake.add_project("p-1", 101, &["folders/7"]);
    let gcs = gcs_emulator();
    let bucket = gcs.bucket().await;
    // Two labels and a Resource Manager tag (an existing value, which tagwarden only binds).
    let policy = format!(
        "version: 1\ncloud: gcp\ninfraID: {INFRA}\ntags: {{cost-center: cc-42, team: platform, 123456789012/environment: production}}\n"
    );
    let production = fake.add_tag_value("123456789012/environment/production");
    gcs.put_object(&bucket, &format!("clusters/{INFRA}/policy.yaml"), policy.as_bytes(), "application/yaml").await;

    let port = free_port();
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_tagwarden-gcp-function"))
        .env_clear()
        .env("PORT", port.to_string())
        .env("TAGWARDEN_POLICY", format!("gs://{bucket}/clusters/*/"))
        .env("TAGWARDEN_CLUSTERS", INFRA)
        .env("TAGWARDEN_SWEEP_SCOPES", "folders/7")
        .env("TAGWARDEN_SELF_PRINCIPAL", SELF)
        .env("TAGWARDEN_MODE", "enforce")
        .env("TAGWARDEN_GCP_ENDPOINT", &fake.endpoint)
        .env("STORAGE_EMULATOR_HOST", &gcs.endpoint)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the function");
    let pid = child.id();
    let _child = Killed(child);
    while !ready(port) {
        assert!(started.elapsed() < Duration::from_secs(30), "the function did not become ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let cold = started.elapsed();

    let drift = [(OWNED, "owned"), ("team", "wrong")];
    let zone = "us-central1-a";
    let cases = [
        (
            fake.add_instance("p-1", zone, "master-0", &drift),
            entry(
                "compute-instance-insert-last",
                "beta.compute.instances.insert",
                &format!("projects/p-1/zones/{zone}/instances/master-0"),
                "p-1",
            ),
        ),
        (
            fake.add_disk("p-1", zone, "master-0-data", &drift),
            entry(
                "compute-instance-insert-last",
                "v1.compute.disks.insert",
                &format!("projects/p-1/zones/{zone}/disks/master-0-data"),
                "p-1",
            ),
        ),
        (
            fake.add_forwarding_rule("p-1", "us-central1", "api-internal", &drift),
            entry(
                "compute-instance-insert-last",
                "v1.compute.forwardingRules.insert",
                "projects/p-1/regions/us-central1/forwardingRules/api-internal",
                "p-1",
            ),
        ),
        (
            fake.add_bucket("p-1", "ocp-gcp-7x2k-registry", "US", &drift),
            entry("storage-bucket-create", "storage.buckets.create", "projects/_/buckets/ocp-gcp-7x2k-registry", "p-1"),
        ),
        (
            fake.add_managed_zone("p-1", "ocp-gcp-7x2k-private", "c.example.com.", &drift),
            entry("dns-managed-zone-create", "dns.managedZones.create", "managedZones/ocp-gcp-7x2k-private", "p-1"),
        ),
    ];
    let want = |_: &str| -> BTreeMap<String, String> {
        [(OWNED, "owned"), ("team", "platform"), ("cost-center", "cc-42")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    for (full, e) in &cases {
        fake.clear_log();
        let (status, answer) = post(port, &push(e));
        assert_eq!(status, 200, "{full}: {answer}");
        assert_eq!(labels(&fake, full), want(full), "{full} after one event: {answer}");
        // Cloud DNS zones take no tag bindings: their labels alone are planned.
        let bound = if full.starts_with("//dns.") { vec![] } else { vec![production.clone()] };
        assert_eq!(fake.tag_bindings(full), bound, "{full}: the tag bound after one event: {answer}");
        assert_eq!(fake.counters().writes, 1 + bound.len() as u64, "{full}: one label write and one binding");
    }

    // Left alone: another cluster's instance, a network (no labels), the function's own write,
    // and an operation's first entry.
    let other = fake.add_instance("p-1", zone, "other-0", &[("kubernetes-io-cluster-other-1", "owned")]);
    fake.add_network("p-1", "ocp-gcp-7x2k-network");
    let own = fake.add_instance("p-1", zone, "master-1", &drift);
    let mut own_entry = entry(
        "compute-instance-insert-last",
        "v1.compute.instances.setLabels",
        &format!("projects/p-1/zones/{zone}/instances/master-1"),
        "p-1",
    );
    own_entry["protoPayload"]["authenticationInfo"]["principalEmail"] = json!(SELF);
    let first = fixture("compute-instance-insert-first");
    fake.clear_log();
    for e in [
        entry(
            "compute-instance-insert-last",
            "v1.compute.instances.insert",
            &format!("projects/p-1/zones/{zone}/instances/other-0"),
            "p-1",
        ),
        entry(
            "compute-router-insert-first",
            "v1.compute.networks.insert",
            "projects/p-1/global/networks/ocp-gcp-7x2k-network",
            "p-1",
        ),
        own_entry,
        first,
    ] {
        let (status, answer) = post(port, &push(&e));
        assert_eq!(status, 200, "{answer}");
    }
    assert_eq!(fake.counters().writes, 0, "nothing written for what is not the cluster's to correct");
    assert_eq!(labels(&fake, &other), [("kubernetes-io-cluster-other-1".to_string(), "owned".to_string())].into());
    assert_eq!(labels(&fake, &own).get("team").map(String::as_str), Some("wrong"), "its own write's entry is no drift");

    // An unreadable delivery is answered 2xx (a retry cannot help), never dropped silently: logged.
    let (status, _) = post(port, r#"{"message":{"data":"bm90IGpzb24="}}"#);
    assert_eq!(status, 200);
    eprintln!("tagwarden-gcp-function: ready {} ms after spawn; peak RSS {} KiB", cold.as_millis(), peak_rss_kib(pid));
}
