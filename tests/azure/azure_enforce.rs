//! The Azure seed's scenarios end to end: Event Grid / CloudEvents deliveries through the custom
//! handler's code path (`tagwarden::azure::function::Handler`), with the real HTTP clients, against
//! a faithful fake of ARM's Tags API, a fake managed-identity endpoint, a fake Azure Monitor, and a
//! real Azurite holding the policy (reached with an account SAS). Calls are counted at the fakes.

#![cfg(feature = "azure")]

use crate::support;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::azurite;
use support::env::{
    blob_created, cloud_event, eg_event, infrastructure, queue_message, rid, timer, Env, INFRA, OWNER, OWN_CLIENT,
    OWN_PRINCIPAL, SOMEONE, SUB,
};
use support::fake::Fault;
use tagwarden::azure::reqwest;
use tagwarden::azure::server;
use tagwarden::policy::cache::PolicyChange;

fn statuses(body: &Value) -> Value {
    body["ReturnValue"]["by_status"].clone()
}

#[tokio::test]
async fn create_event_adds_missing_tags_with_one_merge() {
    let env = Env::new(
        "cluster/infrastructure.json",
        &[("cluster/infrastructure.json", &infrastructure(&[("team", "platform"), ("env", "prod")], &[]))],
    )
    .await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned"), ("mine", "kept")]);

    let body = env.drift(eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "{body:#}");
    // Exactly one read and one Merge; no read-back after the write, never PUT/Replace/Delete.
    assert_eq!(env.fake.arm_calls(), ["GET tags", "PATCH tags"]);
    assert_eq!(
        env.fake.patch_bodies(),
        [json!({"operation": "Merge", "properties": {"tags": {"env": "prod", "team": "platform"}}})]
    );
    let tags = env.fake.tags(&vm).expect("vm");
    assert_eq!(tags.get("team").map(String::as_str), Some("platform"));
    assert_eq!(tags.get("mine").map(String::as_str), Some("kept"));
    assert_eq!(tags.get(OWNER).map(String::as_str), Some("owned"));
    // The record is in the host's Logs.
    let logs = body["Logs"].as_array().expect("Logs");
    assert!(logs.iter().any(|l| l.as_str().is_some_and(|l| l.contains("\"status\":\"applied\""))), "{logs:?}");

    // The same event again: reads only.
    env.fake.clear_log();
    let body = env.drift(eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}));
    assert_eq!(env.fake.arm_calls(), ["GET tags"]);
}

#[tokio::test]
async fn infrastructure_values_replace_differing_values_case_insensitively() {
    let policy =
        infrastructure(&[("key_infra", "value_status"), ("team", "platform")], &[("key_infra", "value_infra")]);
    let env = Env::new("infrastructure.json", &[("infrastructure.json", &policy)]).await;
    let disk = rid("Microsoft.Compute/disks", "master-0_OSDisk");
    // Azure tag names are case-insensitive: `Team` is the managed key `team`, `KUBERNETES.io_…` owns.
    env.fake.put_resource(
        &disk,
        &[("KUBERNETES.IO_CLUSTER.mycluster-7xk2p", "owned"), ("key_infra", "value_azure"), ("Team", "platform")],
    );
    let body = env.drift(eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "{body:#}");
    // Only the differing value is written (the spec value supersedes status); `Team` already matches.
    assert_eq!(
        env.fake.patch_bodies(),
        [json!({"operation": "Merge", "properties": {"tags": {"key_infra": "value_infra"}}})]
    );
    let tags = env.fake.tags(&disk).expect("disk");
    assert_eq!(tags.len(), 3, "no duplicate key differing in case: {tags:?}");
    assert_eq!(tags["key_infra"], "value_infra");
    let logs = body["Logs"].to_string();
    assert!(logs.contains("superseded"), "{logs}");
}

#[tokio::test]
async fn unchanged_resource_is_read_only() {
    let env = Env::new("p.yaml", &[("p.yaml", &infrastructure(&[("team", "platform")], &[]))]).await;
    let nic = rid("Microsoft.Network/networkInterfaces", "master-0-nic");
    env.fake.put_resource(&nic, &[(OWNER, "owned"), ("team", "platform")]);
    for _ in 0..3 {
        let body = env.drift(eg_event(&nic, "Microsoft.Network/networkInterfaces/write", SOMEONE)).await;
        assert_eq!(statuses(&body), json!({"unchanged": 1}));
    }
    assert_eq!(env.fake.arm_calls(), ["GET tags", "GET tags", "GET tags"]);
    // The ARM token was requested once and cached; the policy needs none (SAS).
    let tokens = env.fake.token_requests();
    let arm_tokens = tokens.iter().filter(|l| l.query.contains("management.azure.com")).count();
    assert_eq!(arm_tokens, 1, "{tokens:?}");
    assert!(tokens.iter().all(|l| l.query.contains(&format!("client_id={OWN_CLIENT}"))), "{tokens:?}");
    assert!(!tokens.iter().any(|l| l.query.contains("storage.azure.com")));
}

#[tokio::test]
async fn external_edit_is_reverted_and_removed_key_stays() {
    let name = "infrastructure.json";
    let env = Env::new(name, &[(name, &infrastructure(&[("team", "platform"), ("cost-center", "42")], &[]))]).await;
    let lb = rid("Microsoft.Network/loadBalancers", "mycluster-7xk2p");
    env.fake.put_resource(&lb, &[(OWNER, "owned"), ("team", "platform"), ("cost-center", "42")]);
    // A user edits a managed key through the Tags API: the tags/write event brings it back.
    env.fake.edit_tags(&lb, &[("team", "someone-else")]);
    let ce = cloud_event(&eg_event(&lb, "Microsoft.Resources/tags/write", SOMEONE));
    let body = env.drift(ce).await;
    assert_eq!(statuses(&body), json!({"applied": 1}));
    assert_eq!(env.fake.tags(&lb).expect("lb")["team"], "platform");

    // cost-center leaves the policy: it stops being managed and stays on the resource.
    env.publish(name, &infrastructure(&[("team", "platform")], &[])).await;
    env.fake.edit_tags(&lb, &[("cost-center", "changed-by-finance")]);
    env.fake.clear_log();
    let body = env.drift(eg_event(&lb, "Microsoft.Network/loadBalancers/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}));
    assert_eq!(env.fake.count("PATCH tags"), 0);
    assert_eq!(env.fake.tags(&lb).expect("lb")["cost-center"], "changed-by-finance");
}

#[tokio::test]
async fn tag_limit_writes_nothing() {
    let policy = infrastructure(&[("team", "platform"), ("env", "prod")], &[]);
    let env = Env::new("p.json", &[("p.json", &policy)]).await;
    let sa = rid("Microsoft.Storage/storageAccounts", "mycluster7xk2pimages");
    let mut tags: Vec<(String, String)> = (0..49).map(|i| (format!("user{i:02}"), "x".to_string())).collect();
    tags.push((OWNER.to_string(), "owned".to_string()));
    let refs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.fake.put_resource(&sa, &refs);
    let body = env.drift(eg_event(&sa, "Microsoft.Storage/storageAccounts/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"limit-exceeded": 1}), "{body:#}");
    assert_eq!(env.fake.arm_calls(), ["GET tags"], "all or nothing: no write at all");
    assert_eq!(env.fake.tags(&sa).expect("sa").len(), 50);

    // ARM's own check (here: a DNS zone, 15 tags, with a policy that claims a higher limit).
    let policy = format!("version: 1\ncloud: azure\ninfraID: {INFRA}\ntags: {{team: platform, env: prod}}\nlimits: {{resourceTags: 50, resourceTagsByType: {{'Microsoft.Network/dnszones': 50}}}}\n");
    env.publish("p.json", &policy).await;
    let zone = rid("Microsoft.Network/dnszones", "mycluster.example.com");
    let mut tags: Vec<(String, String)> = (0..14).map(|i| (format!("user{i:02}"), "x".to_string())).collect();
    tags.push((OWNER.to_string(), "owned".to_string()));
    let refs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.fake.put_resource(&zone, &refs);
    env.fake.clear_log();
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&zone, "Microsoft.Network/dnszones/write", SOMEONE)).await;
    assert_eq!(status, 200, "a refused write for the limit is reported, not retried: {body:#}");
    assert_eq!(statuses(&body), json!({"limit-exceeded": 1}), "{body:#}");
    assert_eq!(env.fake.tags(&zone).expect("zone").len(), 15);
}

#[tokio::test]
async fn resources_not_owned_are_never_written() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let shared = rid("Microsoft.Network/virtualNetworks", "shared-vnet");
    let other = rid("Microsoft.Compute/virtualMachines", "other-cluster-vm");
    let untagged = rid("Microsoft.Compute/virtualMachines", "pet-vm");
    env.fake.put_resource(&shared, &[(OWNER, "shared")]);
    env.fake.put_resource(&other, &[("kubernetes.io_cluster.othercluster-a1b2c", "owned")]);
    env.fake.put_resource(&untagged, &[("team", "wrong")]);
    let batch = json!([
        eg_event(&shared, "Microsoft.Network/virtualNetworks/write", SOMEONE),
        eg_event(&other, "Microsoft.Compute/virtualMachines/write", SOMEONE),
        eg_event(&untagged, "Microsoft.Compute/virtualMachines/write", SOMEONE),
    ]);
    let (status, body) = env.deliver_with(&batch, &[("aeg-event-type", "Notification")]).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["by_status"], json!({"not-owned": 3}), "{body:#}");
    assert_eq!(env.fake.count("PATCH tags") + env.fake.count("PUT tags"), 0);
    assert_eq!(env.fake.tags(&untagged).expect("vm")["team"], "wrong");
}

#[tokio::test]
async fn own_events_are_ignored_without_any_call() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let blob_calls = env.handler.calls.get("blob:GetBlob");
    // The recorded fixture: a tags/write by the managed identity whose appid is ours.
    let fixture = format!(
        "{}/tests/fixtures/events/azure/ce-tags-write-by-managed-identity.json",
        support::workspace_root().display()
    );
    let text = std::fs::read_to_string(fixture).expect("fixture");
    let (status, body) = env.deliver_with(&serde_json::from_str(&text).expect("json"), &[]).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(
        (body["events"].as_u64(), body["ignored"].as_u64(), body["resources"].as_u64()),
        (Some(1), Some(1), Some(0))
    );
    // Our own principal id alone is enough too.
    let vm = rid("Microsoft.Compute/virtualMachines", "master-1");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    let mut ev = eg_event(&vm, "Microsoft.Resources/tags/write", SOMEONE);
    ev["data"]["authorization"]["evidence"]["principalId"] = json!(OWN_PRINCIPAL);
    env.drift(ev).await;
    assert!(env.fake.arm_calls().is_empty(), "{:?}", env.fake.arm_calls());
    // Only the metrics (EventsIgnored) needed a token.
    let tokens = env.fake.token_requests();
    assert!(tokens.iter().all(|l| l.query.contains("monitoring.azure.com")), "{tokens:?}");
    assert_eq!(env.handler.calls.get("blob:GetBlob"), blob_calls, "not even the policy is read");

    // The second guard: our write comes back as a tags/write event the identity check misses
    // (a caller id that is not ours): it is re-read and ends in zero writes.
    let body = env.drift(eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"applied": 1}));
    env.fake.clear_log();
    let body = env.drift(eg_event(&vm, "Microsoft.Resources/tags/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}));
    assert_eq!(env.fake.arm_calls(), ["GET tags"]);
}

#[tokio::test]
async fn policy_from_a_blob_prefix_is_layered_and_skips_the_status_report() {
    let overrides = format!(
        "version: 1\ncloud: azure\ninfraID: {INFRA}\ntags: {{team: platform}}\noverrides:\n  - name: masters\n    selector: {{type: 'Microsoft.Compute/virtualMachines', tag: {{key: role, value: master}}}}\n    tags: {{team: control-plane}}\n"
    );
    let docs = [
        ("layers/00-base.json", infrastructure(&[("team", "from-status"), ("env", "prod")], &[])),
        ("layers/10-tagwarden.yaml", overrides),
        // Not a policy: read as a layer it would make the whole version invalid.
        ("layers/tagwarden-status.json", "{\"failures\": []}".to_string()),
        ("other/99-ignored.yaml", "team: outside-the-prefix\n".to_string()),
    ];
    let docs: Vec<(&str, &str)> = docs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let env = Env::new("layers/", &docs).await;
    let master = rid("Microsoft.Compute/virtualMachines", "master-2");
    let worker = rid("Microsoft.Compute/virtualMachines", "worker-1");
    env.fake.put_resource(&master, &[(OWNER, "owned"), ("role", "master")]);
    env.fake.put_resource(&worker, &[(OWNER, "owned"), ("role", "worker")]);
    let batch = json!([
        cloud_event(&eg_event(&master, "Microsoft.Compute/virtualMachines/write", SOMEONE)),
        cloud_event(&eg_event(&worker, "Microsoft.Compute/virtualMachines/write", SOMEONE)),
    ]);
    let (status, body) = env.deliver_with(&batch, &[]).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(env.fake.tags(&master).expect("m")["team"], "control-plane");
    assert_eq!(env.fake.tags(&worker).expect("w")["team"], "platform");
    assert_eq!(env.fake.tags(&worker).expect("w")["env"], "prod");
    assert_eq!(env.handler.calls.get("blob:ListBlobs"), 2, "one listing per event (POLICY_TTL=0)");
    assert_eq!(env.handler.engine.store.downloads(), 2, "each layer downloaded once; the status report never");

    // A new layer: only it is downloaded.
    env.publish("layers/20-more.yaml", "env: staging\n").await;
    env.deliver_with(&json!([eg_event(&worker, "Microsoft.Compute/virtualMachines/write", SOMEONE)]), &[]).await;
    assert_eq!(env.handler.engine.store.downloads(), 3);
    assert_eq!(env.fake.tags(&worker).expect("w")["env"], "staging");
}

#[tokio::test]
async fn policy_blob_etag_last_known_good_and_status_report() {
    let name = "cluster/infrastructure.yaml";
    let env = Env::new(name, &[(name, &infrastructure(&[("team", "platform")], &[]))]).await;
    let store = &env.handler.engine.store;
    let (policy, change) = store.current(false).await;
    assert!(matches!(change, Some(PolicyChange::Loaded { .. })), "{change:?}");
    let v1 = policy.expect("policy").policy.version.clone();
    assert_eq!(store.downloads(), 1);
    // Unchanged: a conditional GET answered 304, nothing downloaded or parsed.
    let (policy, change) = store.current(false).await;
    assert_eq!((change, store.downloads(), env.handler.calls.get("blob:GetBlob")), (None, 1, 2));
    assert_eq!(policy.expect("policy").policy.version, v1);

    // An invalid new version (a reserved key and a duplicate differing in case) is rejected;
    // the last known good version stays in force, and the status report says so.
    env.publish(name, &infrastructure(&[("team", "platform"), ("azure-owner", "x"), ("Team", "y")], &[])).await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    let body = env.drift(eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "the last known good policy is applied: {body:#}");
    assert_eq!(env.fake.tags(&vm).expect("vm")["team"], "platform");
    let report: Value = serde_json::from_str(
        &azurite::get_blob(&env.http, &env.container, "cluster/tagwarden-status.json").await.expect("status report"),
    )
    .expect("json");
    assert_eq!(report["policy"]["state"], "rejected-keeping-last-good", "{report:#}");
    assert_eq!(report["policy"]["version"], json!(v1));
    let errors = report["policy"]["errors"].to_string();
    assert!(errors.contains("azure-owner") && errors.contains("Team"), "{errors}");
    assert!(!report["policy"]["location"].as_str().unwrap_or_default().contains("sig="), "no SAS in the report");
    // PolicyRejected reached Azure Monitor.
    let posted = env.fake.posted_metrics();
    assert!(posted.iter().any(|(_, b)| b.contains("\"PolicyRejected\"")), "{posted:?}");
}

#[tokio::test]
async fn fails_closed_without_a_valid_policy() {
    let env = Env::new("p.yaml", &[("p.yaml", "version: 1\ncloud: azure\ntags: {team: platform}\n")]).await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(status, 500, "Event Grid must retry: {body:#}");
    let error = body["ReturnValue"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("no valid policy") && error.contains("infraID"), "{error}");
    assert!(env.fake.arm_calls().is_empty(), "nothing read or written: {:?}", env.fake.arm_calls());
    let report = azurite::get_blob(&env.http, &env.container, "tagwarden-status.json").await.expect("status report");
    assert!(report.contains("\"unavailable\""), "{report}");

    // No blob at all: the error names the location (without the SAS).
    let env = Env::new("missing.yaml", &[]).await;
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(status, 500);
    let error = body["ReturnValue"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("missing.yaml") && error.contains("BlobNotFound") && !error.contains("sig="), "{error}");
}

#[tokio::test]
async fn handshakes_over_http() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let handler = std::sync::Arc::new(env.handler);
    let h = handler.clone();
    tokio::spawn(server::serve(listener, move |r| {
        let h = h.clone();
        async move { h.handle(r).await }
    }));
    let http = reqwest::Client::new();
    // The readiness probe.
    assert_eq!(http.get(format!("{url}/")).send().await.expect("GET /").status().as_u16(), 200);
    // Event Grid's synchronous subscription validation (the documented sample).
    let validation = json!([{
        "id": "2d1781af-3a4c-4d7c-bd0c-e34b19da4e66", "topic": "/subscriptions/xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "subject": "",
        "data": {"validationCode": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6", "validationUrl": "https://rp-eastus2.eventgrid.azure.net:553/eventsubscriptions/estest/validate?id=512d38b6"},
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent", "eventTime": "2018-01-25T22:12:19.4556811Z", "metadataVersion": "1", "dataVersion": "1"
    }]);
    let resp = http
        .post(format!("{url}/api/events"))
        .header("aeg-event-type", "SubscriptionValidation")
        .body(validation.to_string())
        .send()
        .await
        .expect("validation");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        serde_json::from_str::<Value>(&resp.text().await.expect("text")).expect("json"),
        json!({"validationResponse": "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"})
    );
    // CloudEvents abuse protection.
    let resp = http
        .request(reqwest::Method::OPTIONS, format!("{url}/api/events"))
        .header("WebHook-Request-Origin", "eventgrid.azure.net")
        .send()
        .await
        .expect("OPTIONS");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers().get("webhook-allowed-origin").and_then(|v| v.to_str().ok()), Some("eventgrid.azure.net"));
    // Not JSON: 400, so Event Grid dead-letters instead of retrying forever.
    let resp = http.post(format!("{url}/api/events")).body("nope").send().await.expect("bad body");
    assert_eq!(resp.status().as_u16(), 400);
    assert!(env.fake.arm_calls().is_empty());
}

#[tokio::test]
async fn cloudevents_batch_is_reconciled_event_by_event() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let a = rid("Microsoft.Compute/virtualMachines", "worker-a");
    let b = rid("Microsoft.Compute/disks", "worker-a_OSDisk");
    env.fake.put_resource(&a, &[(OWNER, "owned")]);
    env.fake.put_resource(&b, &[(OWNER, "owned"), ("team", "platform")]);
    let mut deleted = cloud_event(&eg_event(
        &rid("Microsoft.Compute/virtualMachines", "gone"),
        "Microsoft.Compute/virtualMachines/delete",
        SOMEONE,
    ));
    deleted["type"] = json!("Microsoft.Resources.ResourceDeleteSuccess");
    let batch = json!([
        cloud_event(&eg_event(&a, "Microsoft.Compute/virtualMachines/write", SOMEONE)),
        cloud_event(&eg_event(&b, "Microsoft.Compute/disks/write", SOMEONE)),
        deleted,
    ]);
    let (status, body) = env.deliver_with(&batch, &[]).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!((body["events"].as_u64(), body["ignored"].as_u64()), (Some(3), Some(1)));
    assert_eq!(body["by_status"], json!({"applied": 1, "unchanged": 1}));
    assert_eq!(env.fake.count("PATCH tags"), 1);
    // One metrics POST for the whole delivery, NDJSON, with the shared metric names.
    let posted = env.fake.posted_metrics();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].0, "application/x-ndjson");
    let docs: Vec<Value> = posted[0].1.lines().map(|l| serde_json::from_str(l).expect("ndjson line")).collect();
    let metric =
        |name: &str| docs.iter().find(|d| d["data"]["baseData"]["metric"] == name).cloned().unwrap_or(Value::Null);
    assert_eq!(metric("EventsReceived")["data"]["baseData"]["series"][0]["sum"], 3);
    assert_eq!(metric("EventsReceived")["data"]["baseData"]["namespace"], "TagWarden");
    assert_eq!(metric("TagsWritten")["data"]["baseData"]["dimNames"], json!(["Cloud", "ResourceType", "InfraID"]));
}

#[tokio::test]
async fn throttling_is_retried_after_retry_after() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    env.fake.inject("PATCH", Fault::Throttle { retry_after: 1 });
    let start = Instant::now();
    let body = env.drift(eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert!(start.elapsed() >= Duration::from_secs(1), "Retry-After honoured: {:?}", start.elapsed());
    assert_eq!(statuses(&body), json!({"applied": 1}));
    assert_eq!(env.fake.arm_calls(), ["GET tags", "PATCH tags", "PATCH tags"]);
    assert_eq!(env.fake.log().iter().filter(|l| l.status == 429).count(), 1);

    // Throttled past the budget: the invocation fails so Event Grid retries later; the metrics
    // endpoint failing does not change that answer (nor would it fail a success).
    env.fake.inject("GET", Fault::Throttle { retry_after: 3600 });
    env.fake.fail_metrics(500);
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(status, 500, "{body:#}");
    assert!(body["Logs"].to_string().contains("Retry-After"), "{body:#}");
    env.fake.clear_log();
    let body = env.drift(eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}), "a failed metrics POST never fails the invocation");
}

#[tokio::test]
async fn accepted_write_is_polled_to_completion() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let disk = rid("Microsoft.Compute/disks", "master-0_OSDisk");
    env.fake.put_resource(&disk, &[(OWNER, "owned")]);
    env.fake.inject("PATCH", Fault::Accept { polls: 2 });
    let body = env.drift(eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "{body:#}");
    assert_eq!(env.fake.arm_calls(), ["GET tags", "PATCH tags", "GET poll", "GET poll", "GET poll"]);
    assert_eq!(env.fake.tags(&disk).expect("disk")["team"], "platform");
}

#[tokio::test]
async fn host_envelope_with_a_string_event_and_failures() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    // The host may JSON-encode the binding value as a string: it is parsed twice.
    let event = eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE).to_string();
    let (status, body) = env.invoke("drift", "eventGridEvent", Value::String(event)).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["Outputs"], json!({}));
    assert_eq!(statuses(&body), json!({"applied": 1}));

    // A resource not visible yet (404 after retries) fails the invocation, so Event Grid retries.
    let ghost = rid("Microsoft.Compute/virtualMachines", "not-yet");
    let (status, body) = env
        .invoke("drift", "eventGridEvent", eg_event(&ghost, "Microsoft.Compute/virtualMachines/write", SOMEONE))
        .await;
    assert_eq!(status, 500);
    assert!(body["Logs"].to_string().contains("ResourceNotFound"), "{body:#}");
    assert_eq!(env.fake.log().iter().filter(|l| l.path.contains("not-yet")).count(), 2, "bounded retries of the 404");
    let other = rid("Microsoft.Compute/virtualMachines", "master-9");
    env.fake.put_resource(&other, &[(OWNER, "owned")]);
    // A denied write is permanent (by ARM's code): reported with the fix, not retried
    // for a day; the sweep writes it once the role is granted.
    env.fake.inject("PATCH", Fault::Status { status: 403, code: "AuthorizationFailed" });
    let (status, body) = env
        .invoke("drift", "eventGridEvent", eg_event(&other, "Microsoft.Compute/virtualMachines/write", SOMEONE))
        .await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"failed": 1}), "{body:#}");
    assert!(body["Logs"].to_string().contains("tag writer"), "{body:#}");
    // A deny assignment (a managed resource group's) refuses whatever roles are granted: permanent,
    // and its fix names the deny assignment, not a role.
    env.fake.inject("PATCH", Fault::Status { status: 403, code: "DenyAssignmentAuthorizationFailed" });
    let (status, body) = env
        .invoke("drift", "eventGridEvent", eg_event(&other, "Microsoft.Compute/virtualMachines/write", SOMEONE))
        .await;
    assert_eq!(status, 200, "not retried for a day: {body:#}");
    assert_eq!(statuses(&body), json!({"failed": 1}), "{body:#}");
    let logs = body["Logs"].to_string();
    assert!(logs.contains("managed-rg-lockdown") && logs.contains("only its owner can lift it"), "{body:#}");
    // Not an event at all.
    let (status, _) = env.invoke("drift", "eventGridEvent", json!({"hello": "world"})).await;
    assert_eq!(status, 500);
}

#[tokio::test]
async fn sweep_and_policy_change_reach_every_owned_resource() {
    let env = Env::new("layers/", &[("layers/00.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let rg = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    env.fake.put_resource(&rg, &[(OWNER, "owned")]);
    let mut owned = Vec::new();
    for i in 0..4 {
        let id = rid("Microsoft.Compute/disks", &format!("disk-{i}"));
        env.fake.put_resource(&id, &[(OWNER, "owned")]);
        owned.push(id);
    }
    let shared = rid("Microsoft.Network/virtualNetworks", "vnet");
    env.fake.put_resource(&shared, &[(OWNER, "shared")]);
    let denied = rid("Microsoft.Compute/virtualMachines", "locked");
    env.fake.put_resource(&denied, &[(OWNER, "owned")]);

    // The timer.
    let (status, body) =
        env.invoke("sweep", "timer", json!({"Schedule": {"AdjustForDST": true}, "IsPastDue": false})).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"applied": 6}), "4 disks, the VM and the resource group: {body:#}");
    assert_eq!(env.fake.tags(&shared).expect("vnet").get("team"), None);
    // One Resource Graph query lists the subscription's owned resources and resource groups.
    assert_eq!(env.fake.count("POST graph"), 1, "{:?}", env.fake.arm_calls());

    // The policy changes (Event Grid BlobCreated on the policy container): the queued sweep.
    env.publish("layers/10.yaml", "team: platform-2\n").await;
    env.fake.inject("PATCH", Fault::Status { status: 403, code: "AuthorizationFailed" });
    let (status, body) = env.invoke("sweep-queue", "message", queue_message(&blob_created("layers/10.yaml"))).await;
    assert_eq!(status, 200, "a denied write is permanent: reported, not a reason to sweep again now: {body:#}");
    assert_eq!(body["ReturnValue"]["by_status"]["applied"], 5);
    // The status report lists the failure (the Azure seed's resourceTags list: name + error).
    let report: Value = serde_json::from_str(
        &azurite::get_blob(&env.http, &env.container, "layers/tagwarden-status.json").await.expect("report"),
    )
    .expect("json");
    let failures = report["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{report:#}");
    assert!(failures[0]["error"].as_str().unwrap_or_default().contains("AuthorizationFailed"));
    assert!(!failures[0]["name"].as_str().unwrap_or_default().is_empty());
}

#[tokio::test]
async fn policy_blob_created_is_answered_at_once_and_the_queue_sweeps() {
    let env = Env::new("layers/", &[("layers/00.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let disks: Vec<String> = (0..3).map(|i| rid("Microsoft.Compute/disks", &format!("disk-{i}"))).collect();
    for d in &disks {
        env.fake.put_resource(d, &[(OWNER, "owned"), ("team", "platform")]);
    }
    let (status, _) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200);
    let downloads = env.handler.engine.store.downloads();

    // A new version: Event Grid's BlobCreated reaches `drift` (and a webhook subscription). It is
    // answered at once, having re-read the policy, without listing, reading or writing any resource.
    env.publish("layers/10.yaml", "team: platform-2\n").await;
    env.fake.clear_log();
    env.handler.calls.reset();
    let start = Instant::now();
    let (status, body) = env.invoke("drift", "eventGridEvent", blob_created("layers/10.yaml")).await;
    assert_eq!(status, 200, "{body:#}");
    let (status, direct) = env.deliver_with(&json!([blob_created("layers/10.yaml")]), &[]).await;
    assert_eq!(status, 200, "{direct:#}");
    assert!(start.elapsed() < Duration::from_secs(5), "answered at once: {:?}", start.elapsed());
    assert_eq!(env.fake.arm_calls(), Vec::<String>::new(), "no ARM call in the Event Grid delivery");
    assert_eq!(env.handler.calls.to_service("arm:"), 0, "{:?}", env.handler.calls.snapshot());
    assert_eq!((body["ReturnValue"]["events"].as_u64(), body["ReturnValue"]["resources"].as_u64()), (Some(1), Some(0)));
    assert_eq!(env.handler.engine.store.downloads(), downloads + 1, "the new layer was read and validated");
    assert!(disks.iter().all(|d| env.fake.tags(d).expect("disk")["team"] == "platform"), "nothing written yet");

    // An invalid version is rejected there too (reported, last good kept), still without ARM.
    env.publish("layers/20.yaml", "Team: x\nteam: y\n").await;
    let (status, body) = env.invoke("drift", "eventGridEvent", blob_created("layers/20.yaml")).await;
    assert_eq!(status, 200, "the last good version stays in force: {body:#}");
    assert_eq!(env.report().await.map(|r| r["policy"]["state"].clone()), Some(json!("rejected-keeping-last-good")));
    assert!(env.fake.posted_metrics().iter().any(|(_, b)| b.contains("\"PolicyRejected\"")));
    assert_eq!(env.fake.arm_calls(), Vec::<String>::new());
    env.delete("layers/20.yaml").await;

    // The queue the same events are routed to runs the sweep, whichever way the host hands the
    // message over: base64 (as Event Grid writes it), the JSON text, or the JSON value.
    let event = blob_created("layers/10.yaml");
    for message in [queue_message(&event), Value::String(event.to_string()), event.clone()] {
        env.fake.clear_log();
        let (status, body) = env.invoke("sweep-queue", "message", message).await;
        assert_eq!(status, 200, "{body:#}");
        assert_eq!(env.fake.count("POST graph"), 1, "{:?}", env.fake.arm_calls());
        assert_eq!(body["ReturnValue"]["resources"].as_u64(), Some(3), "{body:#}");
    }
    assert!(disks.iter().all(|d| env.fake.tags(d).expect("disk")["team"] == "platform-2"));
    assert_eq!(env.report().await.map(|r| r["policy"]["state"].clone()), Some(json!("ok")));

    // The function's own status report is not a policy change; a message that is not a policy
    // event fails, so the queue retries it and then parks it in the poison queue.
    env.fake.clear_log();
    let own = blob_created("layers/tagwarden-status.json");
    let (status, _) = env.invoke("drift", "eventGridEvent", own.clone()).await;
    assert_eq!(status, 200);
    let (status, _) = env.invoke("sweep-queue", "message", queue_message(&own)).await;
    assert_eq!(status, 200);
    let vm_write = eg_event(&disks[0], "Microsoft.Compute/disks/write", SOMEONE);
    for bad in [json!("not base64, not JSON"), queue_message(&vm_write)] {
        let (status, body) = env.invoke("sweep-queue", "message", bad).await;
        assert_eq!(status, 500, "{body:#}");
    }
    assert_eq!(env.fake.arm_calls(), Vec::<String>::new());
}

/// One deployment, a cluster set (`…/clusters/*/`): each cluster's resources get its own tags,
/// a cluster whose folder holds another's policy is rejected alone, a foreign cluster's resources
/// are ignored, each cluster gets its own status report, and a policy change of one cluster sweeps
/// that cluster only.
#[tokio::test]
async fn a_cluster_set_enforces_each_cluster_on_its_own() {
    let doc = |id: &str, team: &str| format!("version: 1\ncloud: azure\ninfraID: {id}\ntags: {{team: {team}}}\n");
    let env = Env::with(
        "clusters/*/",
        &[
            ("clusters/az-a/10-cluster.yaml", &doc("az-a", "a")),
            ("clusters/az-b/10-cluster.yaml", &doc("az-b", "b")),
            // A layer another publisher wrote into az-b's folder, naming no infraID:
            // refused alone, az-b's own layer is in force.
            ("clusters/az-b/20-extra.yaml", "version: 1\ncloud: azure\ntags: {team: evil}\n"),
            // The folder names az-c, the document az-x: refused, and az-c is not enforced.
            ("clusters/az-c/10-cluster.yaml", &doc("az-x", "c")),
            // A folder of a cluster the deployment does not list: never loaded.
            ("clusters/foreign/10-cluster.yaml", &doc("foreign", "evil")),
        ],
        &[("TAGWARDEN_CLUSTERS", "az-a,az-b,az-c")],
    )
    .await;
    let owner = |id: &str| format!("kubernetes.io_cluster.{id}");
    let disk = |id: &str| rid("Microsoft.Compute/disks", &format!("disk-{id}"));
    for id in ["az-a", "az-b", "az-c", "foreign"] {
        env.fake.put_resource(&disk(id), &[(owner(id).as_str(), "owned")]);
    }
    for id in ["az-a", "az-b", "az-c", "foreign"] {
        env.drift(eg_event(&disk(id), "Microsoft.Compute/disks/write", SOMEONE)).await;
    }
    let team = |id: &str| env.fake.tags(&disk(id)).expect("disk").get("team").cloned();
    assert_eq!((team("az-a"), team("az-b")), (Some("a".into()), Some("b".into())));
    assert_eq!((team("az-c"), team("foreign")), (None, None), "no policy in force for them: untouched");
    assert_eq!(env.fake.count("PATCH tags"), 2, "one write per owned, enforced resource");
    let rejected = azurite::get_blob(&env.http, &env.container, "clusters/az-c/tagwarden-status.json").await;
    let rejected: Value = serde_json::from_str(&rejected.expect("az-c's report")).expect("json");
    assert_eq!(rejected["policy"]["state"], "unavailable", "{rejected:#}");
    assert!(rejected["policy"]["errors"].to_string().contains("names infraID \\\"az-x\\\", not az-c"), "{rejected:#}");
    let b = azurite::get_blob(&env.http, &env.container, "clusters/az-b/tagwarden-status.json").await;
    let b: Value = serde_json::from_str(&b.expect("az-b's report")).expect("json");
    assert!(
        b["policy"]["errors"].to_string().contains("\\\"20-extra.yaml\\\""),
        "the refused layer is reported: {b:#}"
    );
    let foreign = azurite::get_blob(&env.http, &env.container, "clusters/foreign/tagwarden-status.json").await;
    assert!(foreign.is_none(), "no report for an unlisted cluster's folder");

    // The timer sweeps both enforced clusters; each gets its own report.
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    for id in ["az-a", "az-b"] {
        let report =
            azurite::get_blob(&env.http, &env.container, &format!("clusters/{id}/tagwarden-status.json")).await;
        let report: Value = serde_json::from_str(&report.expect("report")).expect("json");
        let state = if id == "az-b" { "rejected-keeping-last-good" } else { "ok" };
        assert_eq!(report["policy"]["state"], state, "{id} (az-b's extra layer stays refused): {report:#}");
    }

    // az-b's policy changes: the queued sweep lists az-b only.
    env.publish("clusters/az-b/10-cluster.yaml", &doc("az-b", "b2")).await;
    env.fake.clear_log();
    let (status, body) =
        env.invoke("sweep-queue", "message", queue_message(&blob_created("clusters/az-b/10-cluster.yaml"))).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(team("az-b"), Some("b2".into()));
    assert_eq!(team("az-a"), Some("a".into()));
    assert_eq!(body["ReturnValue"]["resources"].as_u64(), Some(1), "az-b's disk only: {body:#}");
}

/// A Resource Notifications event (`Microsoft.ResourceNotifications.Resources.CreatedOrUpdated`,
/// the shape of azure-rest-api-specs' `Resources_CreatedOrUpdated.json`) for `resource` carrying
/// `tags` (none: the optional field left out).
fn rn_event(resource: &str, tags: Option<&[(&str, &str)]>) -> Value {
    let mut info = json!({"id": resource, "name": resource.rsplit('/').next(), "type": "Microsoft.Compute/disks", "location": "eastus"});
    if let Some(tags) = tags {
        info["tags"] = tags.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>().into();
    }
    json!({
        "id": support::suffix(), "topic": format!("/subscriptions/{}", support::env::SUB), "subject": resource,
        "data": {"resourceInfo": info, "apiVersion": "2023-04-02", "operationalInfo": {"resourceEventTime": "2026-11-21T10:12:00.1234567Z"}},
        "eventType": "Microsoft.ResourceNotifications.Resources.CreatedOrUpdated",
        "dataVersion": "1", "metadataVersion": "1", "eventTime": "2026-11-21T10:12:00.1234567Z"
    })
}

/// A Resource Notifications event carries the resource's tags, a hint (the
/// engine's `hint`): where they show that no enforced cluster owns the resource and nothing is to
/// be written, the read is spared; a claim of ownership is verified by a read, as for AWS's `Tag
/// Change on Resource` (the event's sender could claim anything, and a record of an owned
/// resource must rest on ARM's answer), and a drift is Merged once. One without tags is read as
/// `ResourceWriteSuccess` is.
#[tokio::test]
async fn resource_notifications_spare_the_read_where_their_tags_show_nothing_to_write() {
    let desired = [("team", "platform"), ("env", "prod")];
    let env =
        Env::new("cluster/infrastructure.json", &[("cluster/infrastructure.json", &infrastructure(&desired, &[]))])
            .await;
    let disk = rid("Microsoft.Compute/disks", "rn-disk");
    let foreign = rid("Microsoft.Compute/disks", "rn-foreign");
    env.fake.put_resource(&disk, &[(OWNER, "owned"), ("team", "old")]);
    env.fake.put_resource(&foreign, &[("team", "theirs")]);

    // Drifted: read (the tags only hint), one Merge.
    let body = env.drift(rn_event(&disk, Some(&[(OWNER, "owned"), ("team", "old")]))).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "{body:#}");
    assert_eq!(env.fake.arm_calls(), ["GET tags", "PATCH tags"]);

    // Another cluster's resource, or nobody's: no ARM call at all.
    env.fake.clear_log();
    let body = env.drift(rn_event(&foreign, Some(&[("team", "theirs")]))).await;
    assert_eq!(statuses(&body), json!({"not-owned": 1}), "{body:#}");
    assert_eq!(env.fake.arm_calls(), Vec::<String>::new(), "no read for a resource no cluster owns");

    // The echo of that Merge claims ownership: verified by one read, nothing written.
    let echo = env.fake.tags(&disk).expect("disk");
    let echo: Vec<(&str, &str)> = echo.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let body = env.drift(rn_event(&disk, Some(&echo))).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}), "{body:#}");
    assert_eq!(env.fake.arm_calls(), ["GET tags"]);
    env.fake.clear_log();

    // No tags in the payload: read, as a ResourceWriteSuccess is.
    let body = env.drift(rn_event(&disk, None)).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}), "{body:#}");
    assert_eq!(env.fake.arm_calls(), ["GET tags"]);
}

/// A controller that re-PUTs the load balancer with its own tag set after every write (CAPZ keeps
/// the tags it applied and drops the rest), named in `TAGWARDEN_YIELD_TO` by its client id (an
/// Azure event names a service principal by its `appid` only): corrected `CORRECTIONS` times, then
/// the key is contested, naming the controller's identity, and no PATCH follows.
#[tokio::test]
async fn a_controller_that_rewrites_the_tags_is_out_waited_then_reported() {
    use tagwarden::contest::CORRECTIONS;
    const CAPZ: &str = "7d1f4c8e-0b6a-4f37-9a52-2c1e5f0d9b43";
    let name = "p.json";
    let docs = [(name, infrastructure(&[("team", "platform")], &[]))];
    let docs: Vec<(&str, &str)> = docs.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let env = Env::with(name, &docs, &[("TAGWARDEN_YIELD_TO", CAPZ)]).await;
    let lb = rid("Microsoft.Network/loadBalancers", "mycluster-7xk2p-capz");
    for round in 1..=CORRECTIONS + 2 {
        env.fake.put_resource(&lb, &[(OWNER, "owned"), ("capz-role", "lb")]);
        env.fake.clear_log();
        let body = env.drift(eg_event(&lb, "Microsoft.Network/loadBalancers/write", CAPZ)).await;
        let patches = env.fake.count("PATCH tags");
        if round <= CORRECTIONS {
            assert_eq!((statuses(&body), patches), (json!({"applied": 1}), 1), "round {round}: {body:#}");
        } else {
            assert_eq!((statuses(&body), patches), (json!({"contested": 1}), 0), "round {round}: {body:#}");
        }
    }
    assert!(!env.fake.tags(&lb).expect("lb").contains_key("team"));
    let report = env.report().await.expect("a status report");
    let contested: Vec<&Value> = report["contests"]
        .as_array()
        .expect("contests")
        .iter()
        .filter(|c| c.get("contested_since").is_some())
        .collect();
    assert_eq!(contested.len(), 1, "{report:#}");
    assert_eq!((contested[0]["key"].as_str(), contested[0]["writer"].as_str()), (Some("team"), Some(CAPZ)));
}

/// Any principal the deployment does not yield to (Azure's default: none) rewriting the tags is
/// drift, corrected every time, never contested.
#[tokio::test]
async fn a_principal_not_yielded_to_is_corrected_every_time() {
    const SOMEONE: &str = "0b5e2d1a-9c7f-4e3b-8a61-5d4c3b2a1f09";
    let name = "p.json";
    let env = Env::new(name, &[(name, &infrastructure(&[("team", "platform")], &[]))]).await;
    let lb = rid("Microsoft.Network/loadBalancers", "mycluster-7xk2p-capz");
    for round in 1..=tagwarden::contest::CORRECTIONS + 3 {
        env.fake.put_resource(&lb, &[(OWNER, "owned"), ("capz-role", "lb")]);
        env.fake.clear_log();
        let body = env.drift(eg_event(&lb, "Microsoft.Network/loadBalancers/write", SOMEONE)).await;
        assert_eq!(
            (statuses(&body), env.fake.count("PATCH tags")),
            (json!({"applied": 1}), 1),
            "round {round}: {body:#}"
        );
    }
}
