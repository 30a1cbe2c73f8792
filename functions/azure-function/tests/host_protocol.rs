//! The built `tagwarden-azure-function` binary, driven over HTTP exactly as the Functions host
//! drives a custom handler (readiness `GET /`, then `POST /drift` with `{Data, Metadata}`),
//! against the fake ARM / identity / metrics endpoints and a real Azurite holding the policy.
//! Also measures cold start (spawn → first event handled) and peak RSS (`VmHWM`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::azurite;
use support::fake::{FakeAzure, IDENTITY_HEADER};
use tagwarden_azure::reqwest;
use tagwarden_testkit::azure as support;

const SUB: &str = "11112222-3333-4444-5555-666677778888";
const CLIENT: &str = "5e29463d-71da-4fe0-8e69-999b57db23b0";

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn event(resource: &str) -> Value {
    json!({
        "topic": format!("/subscriptions/{SUB}"), "subject": resource,
        "eventType": "Microsoft.Resources.ResourceWriteSuccess", "eventTime": "2026-11-21T10:12:00Z", "id": support::suffix(),
        "data": {"authorization": {"evidence": []}, "claims": {}, "resourceUri": resource,
                 "operationName": "Microsoft.Compute/virtualMachines/write", "status": "Succeeded", "subscriptionId": SUB},
        "dataVersion": "2", "metadataVersion": "1"
    })
}

fn envelope(event: &Value) -> String {
    json!({"Data": {"eventGridEvent": event}, "Metadata": {"sys": {"MethodName": "drift", "UtcNow": "2026-11-21T10:12:01Z", "RandGuid": support::suffix()}}}).to_string()
}

/// Peak resident set size of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn binary_serves_the_functions_host_protocol() {
    let fake = FakeAzure::start(Some(CLIENT));
    let http = reqwest::Client::new();
    let container = azurite::container(&http).await;
    let policy = json!({"kind": "Infrastructure", "status": {"infrastructureName": "az-1", "platformStatus": {"type": "Azure", "azure": {"resourceTags": [{"key": "team", "value": "platform"}, {"key": "env", "value": "prod"}]}}}});
    azurite::put_blob(&http, &container, "infrastructure.json", &policy.to_string()).await;
    let vm =
        format!("/subscriptions/{SUB}/resourceGroups/az-1-rg/providers/Microsoft.Compute/virtualMachines/master-0");
    fake.put_resource(&vm, &[("kubernetes.io_cluster.az-1", "owned")]);

    let port = support::free_port();
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_tagwarden-azure-function"))
        .env_clear()
        .env("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string())
        .env("TAGWARDEN_POLICY", format!("{container}/infrastructure.json?{}", azurite::account_sas()))
        .env("TAGWARDEN_ARM_ENDPOINT", &fake.arm)
        .env("IDENTITY_ENDPOINT", &fake.identity)
        .env("IDENTITY_HEADER", IDENTITY_HEADER)
        .env("TAGWARDEN_SELF_CLIENT_ID", CLIENT)
        .env(
            "TAGWARDEN_METRICS_RESOURCE_ID",
            format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Web/sites/fn"),
        )
        .env("TAGWARDEN_METRICS_ENDPOINT", &fake.metrics)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the handler");
    let child = Killed(child);
    let base = format!("http://127.0.0.1:{port}");

    // The host's readiness probe: any response counts.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if http.get(format!("{base}/")).send().await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(Instant::now() < deadline, "the handler did not answer GET / within 30 s (the host waits 60 s)");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ready = started.elapsed();

    // First event: drift → one GET and one PATCH.
    let post = |body: String| {
        http.post(format!("{base}/drift"))
            .header("content-type", "application/json; charset=utf-8")
            .header("x-azure-functions-invocationid", support::suffix())
            .body(body)
            .send()
    };
    let resp = post(envelope(&event(&vm))).await.expect("POST /drift");
    let first_event = started.elapsed();
    assert_eq!(resp.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
    assert_eq!(body["Outputs"], json!({}));
    assert!(body["Logs"].as_array().is_some_and(|l| !l.is_empty()), "{body:#}");
    assert_eq!(body["ReturnValue"]["by_status"], json!({"applied": 1}), "{body:#}");
    let drift_calls = fake.arm_calls();
    assert_eq!(drift_calls, ["GET tags", "PATCH tags"]);
    assert_eq!(fake.tags(&vm).expect("vm")["env"], "prod");

    // No drift: reads only.
    fake.clear_log();
    let t = Instant::now();
    let resp = post(envelope(&event(&vm))).await.expect("POST /drift");
    let warm = t.elapsed();
    assert_eq!(resp.status().as_u16(), 200);
    let steady_calls = fake.arm_calls();
    assert_eq!(steady_calls, ["GET tags"]);
    // Failure answers non-2xx so Event Grid retries.
    let resp = post(envelope(&json!({"not": "an event"}))).await.expect("POST /drift");
    assert_eq!(resp.status().as_u16(), 500);

    // A policy change: `drift` re-checks the policy and answers without any ARM call; the sweep
    // runs from `sweep-queue`, whose message (the same BlobCreated event) the host passes as the
    // base64 text it found in the queue (host.json: `messageEncoding: none`).
    let blob_created = json!({
        "topic": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/policy",
        "subject": "/blobServices/default/containers/policy/blobs/infrastructure.json",
        "eventType": "Microsoft.Storage.BlobCreated", "id": support::suffix(), "eventTime": "2026-11-21T10:00:00Z",
        "data": {"api": "PutBlob"}, "dataVersion": "", "metadataVersion": "1"
    });
    fake.clear_log();
    let resp = post(envelope(&blob_created)).await.expect("POST /drift");
    assert_eq!(resp.status().as_u16(), 200);
    assert!(fake.arm_calls().is_empty(), "{:?}", fake.arm_calls());
    let message = azurite::base64_encode(blob_created.to_string().as_bytes());
    let queued = json!({"Data": {"message": message}, "Metadata": {"DequeueCount": 1, "Id": support::suffix(), "sys": {"MethodName": "sweep-queue", "UtcNow": "2026-11-21T10:00:02Z", "RandGuid": support::suffix()}}});
    let resp = http
        .post(format!("{base}/sweep-queue"))
        .header("content-type", "application/json; charset=utf-8")
        .body(queued.to_string())
        .send()
        .await
        .expect("POST /sweep-queue");
    assert_eq!(resp.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
    assert_eq!(body["ReturnValue"]["by_status"], json!({"unchanged": 1}), "{body:#}");
    // Listed with its tags by one Resource Graph query; in line, so not read.
    assert_eq!(fake.arm_calls(), ["POST graph"], "{:?}", fake.arm_calls());

    let rss = peak_rss_kib(child.0.id());
    eprintln!(
        "measurements (profile: {}): ready {} ms, first event handled {} ms after spawn, warm no-drift event {} ms, peak RSS {} KiB; ARM calls per event: drift {:?}, no drift {:?}",
        if cfg!(debug_assertions) { "dev" } else { "release" },
        ready.as_millis(),
        first_event.as_millis(),
        warm.as_millis(),
        rss,
        drift_calls,
        steady_calls
    );
    assert!(rss > 0 && rss < 200 * 1024, "peak RSS {rss} KiB");
}

#[test]
fn bad_configuration_exits_with_the_variable_and_the_fix() {
    let out = Command::new(env!("CARGO_BIN_EXE_tagwarden-azure-function"))
        .env_clear()
        .env("TAGWARDEN_POLICY", "s3://bucket/key")
        .output()
        .expect("run the handler");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TAGWARDEN_POLICY") && err.contains("CONTAINER"), "{err}");
}
