//! Security of the Azure function's code path (`Handler::handle`, the real HTTP clients, the fakes
//! of ARM / managed identity / Azure Monitor and a real Azurite holding the policy):
//! - logs at `debug` for every target (tagwarden, hyper, reqwest, rustls…) and the host responses
//!   (`Logs`, `ReturnValue`) never carry a bearer token, the `IDENTITY_HEADER` secret, the policy
//!   SAS signature or the value of a key the policy marks `sensitive` — through writes, a sweep,
//!   ARM 401 and 403, a rejected policy, a 403 and an unreachable policy store, metrics;
//! - forged events never make a resource that is not owned writable, and a policy that tries to
//!   set the ownership tag itself is rejected (warm: last known good; cold: fail closed).
//!
//! The built binary's own output is scanned by `functions/azure-function/tests/log_secrets.rs`.

#![cfg(feature = "azure")]

use std::collections::BTreeMap;

use serde_json::{json, Value};
use support::azurite;
use support::env::{
    captured, cloud_event, eg_event, infrastructure, invoke, records, rid, sas_signatures, tampered_sas, timer, Env,
    INFRA, OTHER_SUB, OWNER, SOMEONE, SUB,
};
use support::fake::{Fault, IDENTITY_HEADER};
use tagwarden_testkit::azure as support;

const SECRET_VALUE: &str = "ultra-secret-4711-azure";
const VM: &str = "Microsoft.Compute/virtualMachines";
const VM_WRITE: &str = "Microsoft.Compute/virtualMachines/write";

fn sensitive_policy(extra: &str) -> String {
    format!(
        "version: 1\ncloud: azure\ninfraID: {INFRA}\ntags:\n  team: platform\n  cost-center: {SECRET_VALUE}\n{extra}sensitive: [cost-center]\n"
    )
}

/// Panic with the line holding `secret`, if any.
fn assert_absent(output: &str, what: &str, secret: &str) {
    assert!(secret.len() >= 8, "{what} is long enough to search for: {secret:?}");
    if let Some(at) = output.find(secret) {
        let from = output[..at].rfind('\n').map_or(0, |n| n + 1);
        let to = output[at..].find('\n').map_or(output.len(), |n| at + n);
        panic!("the {what} is in the output: {}", &output[from..to]);
    }
}

#[tokio::test]
async fn logs_and_responses_carry_no_token_identity_secret_sas_or_sensitive_value() {
    let logs = captured();
    let mut env = Env::new("p.yaml", &[("p.yaml", &sensitive_policy(""))]).await;
    let vms: Vec<String> = (0..6).map(|i| rid(VM, &format!("vm-{i}"))).collect();
    for vm in &vms[..3] {
        env.fake.put_resource(vm, &[(OWNER, "owned")]);
    }
    env.fake.edit_tags(&vms[2], &[("cost-center", "old-value-42")]);
    let rg = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    env.fake.put_resource(&rg, &[(OWNER, "owned")]);
    env.fake.put_resource(&rid("Microsoft.Network/virtualNetworks", "vnet"), &[(OWNER, "shared")]);
    let mut responses: Vec<Value> = Vec::new();

    // Writes: a CloudEvents batch straight from Event Grid, and a host invocation.
    let batch =
        json!([cloud_event(&eg_event(&vms[0], VM_WRITE, SOMEONE)), cloud_event(&eg_event(&vms[1], VM_WRITE, SOMEONE))]);
    let (status, body) = env.deliver(&batch).await;
    assert_eq!((status, &body["by_status"]), (200, &json!({"applied": 2})), "{body:#}");
    responses.push(body);
    let body = env.drift(eg_event(&vms[2], VM_WRITE, SOMEONE)).await;
    assert_eq!(records(&body)[0]["status"], "applied");
    let changes = records(&body)[0]["changes"].to_string();
    assert!(changes.contains("cost-center") && changes.contains("sha256:"), "sensitive values are hashed: {changes}");
    responses.push(body);
    // A sweep (the resource group is new to it).
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["ReturnValue"]["by_status"]["applied"], 1, "{body:#}");
    responses.push(body);
    for vm in &vms[3..] {
        env.fake.put_resource(vm, &[(OWNER, "owned")]);
    }
    // ARM answers 401 to a read (handed back), then 403 to a write (reported, permanent).
    env.fake.inject("GET", Fault::Status { status: 401, code: "InvalidAuthenticationToken" });
    let (status, body) = env.invoke("drift", "eventGridEvent", eg_event(&vms[3], VM_WRITE, SOMEONE)).await;
    assert_eq!(status, 500, "{body:#}");
    assert!(body["Logs"].to_string().contains("InvalidAuthenticationToken"), "{body:#}");
    responses.push(body);
    env.fake.inject("PATCH", Fault::Status { status: 403, code: "AuthorizationFailed" });
    let (status, body) = env.invoke("drift", "eventGridEvent", eg_event(&vms[3], VM_WRITE, SOMEONE)).await;
    assert_eq!(status, 200, "{body:#}");
    assert!(body["Logs"].to_string().contains("AuthorizationFailed"), "{body:#}");
    responses.push(body);
    // Azure Monitor refuses the metrics once (logged, best effort).
    env.fake.fail_metrics(500);
    let body = env.drift(eg_event(&vms[3], VM_WRITE, SOMEONE)).await;
    assert_eq!(records(&body)[0]["status"], "applied");
    responses.push(body);
    env.fake.fail_metrics(200);
    // A rejected version (the secret inside an invalid value, a reserved key): the last good one stays.
    let rejected = sensitive_policy("  microsoft.owner: x\n").replace(SECRET_VALUE, &format!("{SECRET_VALUE}#2"));
    env.publish("p.yaml", &rejected).await;
    let body = env.drift(eg_event(&vms[4], VM_WRITE, SOMEONE)).await;
    assert_eq!(records(&body)[0]["status"], "applied");
    responses.push(body);
    let report = env.report().await.expect("status report");
    assert_eq!(report["policy"]["state"], "rejected-keeping-last-good", "{report:#}");
    responses.push(report);
    // The policy store answers 403 (a wrong signature): the last good version stays.
    let tampered = tampered_sas();
    env.repoint(Some(&env.policy_url(Some(&tampered))));
    let body = env.drift(eg_event(&vms[5], VM_WRITE, SOMEONE)).await;
    assert_eq!(records(&body)[0]["status"], "applied");
    responses.push(body);
    env.repoint(None);
    // A cold function whose policy store does not answer: fails closed.
    let cold = env.cold(Some(&env.unreachable_policy_url()));
    let (status, body) = invoke(&cold, "drift", "eventGridEvent", eg_event(&vms[5], VM_WRITE, SOMEONE)).await;
    assert_eq!(status, 500, "{body:#}");
    assert!(body["ReturnValue"]["error"].to_string().contains("Transport"), "{body:#}");
    responses.push(body);

    // The value was written verbatim to every owned VM: it was in flight.
    for vm in &vms {
        assert_eq!(env.fake.tags(vm).expect("vm").get("cost-center").map(String::as_str), Some(SECRET_VALUE), "{vm}");
    }
    let patched = env.fake.patch_bodies().iter().filter(|b| b.to_string().contains(SECRET_VALUE)).count();
    assert!(patched >= vms.len(), "{patched} PATCH bodies carried the value");
    let posted = env.fake.posted_metrics();
    assert!(posted.iter().any(|(_, b)| b.contains("\"PolicyRejected\"")), "metrics were published");

    let (tokens, issued) = env.tokens_in_flight();
    assert!(tokens.len() >= 2, "ARM and Azure Monitor tokens were presented: {tokens:?}");
    assert_eq!(tokens.len(), issued, "every token the identity endpoint issued was used: {tokens:?}");
    let mut secrets: Vec<(String, String)> = vec![
        ("identity header".into(), IDENTITY_HEADER.to_string()),
        ("sensitive policy value".into(), SECRET_VALUE.to_string()),
    ];
    secrets.extend(tokens.iter().map(|t| (format!("bearer token {t}"), t.clone())));
    for sas in [azurite::account_sas(), tampered] {
        for sig in sas_signatures(&sas) {
            secrets.push(("SAS signature".into(), sig));
        }
    }
    secrets.push(("SAS (sig=)".into(), "sig=".into()));

    let logged = logs.text();
    let mut output = logged.clone();
    for r in &responses {
        output.push_str(&r.to_string());
        output.push('\n');
    }
    assert!(logged.len() > 15_000, "debug logs were captured: {} bytes", logged.len());
    assert!(logged.contains("\"level\":\"DEBUG\""), "debug level is on");
    assert!(logged.contains("keeping the last known good version"), "the store's warnings were captured");
    assert!(output.contains("cost-center"), "the sensitive key itself may be shown");
    for (what, secret) in &secrets {
        if what == "SAS (sig=)" {
            assert!(!output.contains("sig="), "a SAS is in the output");
        } else {
            assert_absent(&output, what, secret);
        }
    }
    let targets: std::collections::BTreeSet<String> = logged
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["target"].as_str().map(|t| t.split("::").next().unwrap_or(t).to_string()))
        .collect();
    assert!(targets.iter().any(|t| t.starts_with("tagwarden")), "{targets:?}");
    println!(
        "SECURITY(logs, in-process): {} bytes of debug logs ({} lines; crates {targets:?}) + {} bytes of host responses scanned; {} secrets ({} tokens, identity header, SAS signatures, sensitive value) not found",
        logged.len(),
        logged.lines().count(),
        output.len() - logged.len(),
        secrets.len(),
        tokens.len()
    );
}

#[tokio::test]
async fn forged_events_never_write_a_resource_that_is_not_owned() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let other_rg = format!("/subscriptions/{OTHER_SUB}/resourceGroups/other-rg/providers/{VM}/vm-x");
    let foreign: Vec<(String, Vec<(&str, &str)>)> = vec![
        (rid(VM, "pet-vm"), vec![("team", "wrong")]),
        (rid("Microsoft.Network/virtualNetworks", "shared-vnet"), vec![(OWNER, "shared")]),
        (rid(VM, "other-cluster-vm"), vec![("kubernetes.io_cluster.othercluster-a1b2c", "owned")]),
        (
            rid("Microsoft.Compute/disks", "suffix-lookalike"),
            vec![("kubernetes.io_cluster.mycluster-7xk2p-evil", "owned")],
        ),
        (rid("Microsoft.Compute/disks", "prefix-lookalike"), vec![("kubernetes.io_cluster.mycluster", "owned")]),
        (rid("Microsoft.Compute/disks", "aws-form"), vec![("kubernetes.io/cluster/mycluster-7xk2p", "owned")]),
        (other_rg, vec![("kubernetes.io_cluster.othercluster-a1b2c", "owned")]),
        (format!("/subscriptions/{SUB}/resourceGroups/someone-elses-rg"), vec![]),
    ];
    for (id, tags) in &foreign {
        env.fake.put_resource(id, tags);
    }
    let initial: BTreeMap<String, _> = foreign.iter().map(|(id, _)| (id.clone(), env.fake.tags(id))).collect();
    let owned = rid(VM, "master-0");
    env.fake.put_resource(&owned, &[(OWNER, "owned")]);
    let write_op = |id: &str| {
        let kind = tagwarden::resource::ResourceRef::from_arm_id(id).expect("an ARM ID").kind;
        if kind == "Microsoft.Resources/resourceGroups" {
            "Microsoft.Resources/subscriptions/resourceGroups/write".to_string()
        } else {
            format!("{kind}/write")
        }
    };
    let mut forged = 0;

    // One forged ResourceWriteSuccess per foreign resource, claiming in every field it can that
    // the resource is the cluster's (our subscription, an ownership "tag" in the payload).
    for (id, _) in &foreign {
        let mut ev = eg_event(id, &write_op(id), SOMEONE);
        ev["data"]["tags"] = json!({OWNER: "owned"});
        ev["data"]["properties"] = json!({"tags": {OWNER: "owned"}});
        ev["topic"] = json!(format!("/subscriptions/{SUB}"));
        let body = env.drift(ev).await;
        assert_eq!(body["ReturnValue"]["by_status"], json!({"not-owned": 1}), "{id}: {body:#}");
        forged += 1;
    }
    // Tags-API writes on foreign resources (CloudEvents, through the host).
    for (id, _) in foreign.iter().take(3) {
        let body = env.drift(cloud_event(&eg_event(id, "Microsoft.Resources/tags/write", SOMEONE))).await;
        assert_eq!(body["ReturnValue"]["by_status"], json!({"not-owned": 1}), "{id}: {body:#}");
        forged += 1;
    }
    // The subject names the owned VM, the resource URI a foreign one: the URI is what is read.
    let mut ev = eg_event(&foreign[0].0, VM_WRITE, SOMEONE);
    ev["subject"] = json!(owned);
    let body = env.drift(ev).await;
    assert_eq!(body["ReturnValue"]["by_status"], json!({"not-owned": 1}), "{body:#}");
    forged += 1;
    assert_eq!(env.fake.count("PATCH tags") + env.fake.count("PUT tags"), 0, "{:?}", env.fake.arm_calls());

    // A CloudEvents batch (direct delivery) mixing the owned VM with every foreign resource.
    let mut batch = vec![cloud_event(&eg_event(&owned, VM_WRITE, SOMEONE))];
    batch.extend(foreign.iter().map(|(id, _)| cloud_event(&eg_event(id, &write_op(id), SOMEONE))));
    forged += foreign.len();
    let (status, body) = env.deliver(&Value::Array(batch)).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["by_status"], json!({"applied": 1, "not-owned": foreign.len()}), "{body:#}");
    // The same as an Event Grid schema array.
    let batch: Vec<Value> = foreign.iter().map(|(id, _)| eg_event(id, &write_op(id), SOMEONE)).collect();
    forged += batch.len();
    let (status, body) = env.deliver(&Value::Array(batch)).await;
    assert_eq!((status, &body["by_status"]), (200, &json!({"not-owned": foreign.len()})), "{body:#}");
    // A sweep lists only what carries the ownership tag.
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");

    // Exactly one write happened, to the owned VM; every foreign resource is as it was.
    let patched: Vec<String> = env
        .fake
        .log()
        .iter()
        // Writes: every ARM request but reads and Resource Graph queries (a POST that reads).
        .filter(|l| {
            l.api == "arm"
                && l.method != "GET"
                && !l.path.eq_ignore_ascii_case("/providers/Microsoft.ResourceGraph/resources")
        })
        .map(|l| l.path.to_ascii_lowercase())
        .collect();
    let owned_tags = format!("{}/providers/microsoft.resources/tags/default", owned.to_ascii_lowercase());
    assert_eq!(patched, [owned_tags], "writes");
    for (id, before) in &initial {
        assert_eq!(&env.fake.tags(id), before, "{id} untouched");
    }
    assert_eq!(env.fake.tags(&owned).expect("owned")["team"], "platform");

    // A policy that sets the ownership tag itself (as a desired tag, in an override, in the
    // Infrastructure object, in another case) is rejected: warm keeps the last good version,
    // cold fails closed.
    let claims = [
        (
            "tagwarden.yaml",
            format!("version: 1\ncloud: azure\ninfraID: {INFRA}\ntags:\n  team: platform-2\n  {OWNER}: owned\n"),
            OWNER.to_string(),
        ),
        (
            "tagwarden.yaml override",
            format!("version: 1\ncloud: azure\ninfraID: {INFRA}\ntags: {{team: platform-2}}\noverrides:\n  - selector: {{type: '{VM}'}}\n    tags: {{'KUBERNETES.IO_cluster.{INFRA}': owned}}\n"),
            format!("KUBERNETES.IO_cluster.{INFRA}"),
        ),
        ("Infrastructure", infrastructure(&[("team", "platform-2"), (OWNER, "owned")], &[]), OWNER.to_string()),
    ];
    let v1 = records(&env.drift(eg_event(&owned, VM_WRITE, SOMEONE)).await)[0]["policy_version"].clone();
    for (what, policy, key) in &claims {
        env.publish("p.json", policy).await;
        let metrics_before = env.fake.posted_metrics().len();
        env.fake.clear_log();
        for (id, _) in &foreign {
            let body = env.drift(eg_event(id, &write_op(id), SOMEONE)).await;
            assert_eq!(records(&body)[0]["status"], "not-owned", "{what}: {id}");
            assert_eq!(records(&body)[0]["policy_version"], v1, "{what}: the last good version");
            forged += 1;
        }
        let disk = rid("Microsoft.Compute/disks", &format!("new-{}", support::suffix()));
        env.fake.put_resource(&disk, &[(OWNER, "owned")]);
        let body = env.drift(eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE)).await;
        assert_eq!(
            (records(&body)[0]["status"].as_str(), &records(&body)[0]["policy_version"]),
            (Some("applied"), &v1)
        );
        assert_eq!(env.fake.tags(&disk).expect("disk")["team"], "platform", "{what}: the last good version");
        assert_eq!(env.fake.count("PATCH tags"), 1, "{what}: only the owned disk");
        let bodies = env.fake.patch_bodies();
        assert!(!bodies[0].to_string().to_ascii_lowercase().contains("kubernetes.io"), "{what}: {bodies:?}");
        let report = env.report().await.expect("status report");
        assert_eq!(report["policy"]["state"], "rejected-keeping-last-good", "{what}: {report:#}");
        let errors = report["policy"]["errors"].to_string();
        assert!(errors.contains(key.as_str()) && errors.contains("reserved"), "{what}: {errors}");
        let posted: Vec<String> = env.fake.posted_metrics().into_iter().skip(metrics_before).map(|(_, b)| b).collect();
        assert!(posted.iter().any(|b| b.contains("\"PolicyRejected\"")), "{what}");

        let cold = env.cold(None);
        env.fake.clear_log();
        let (status, body) = invoke(&cold, "drift", "eventGridEvent", eg_event(&foreign[0].0, VM_WRITE, SOMEONE)).await;
        assert_eq!(status, 500, "{what}: {body:#}");
        let error = body["ReturnValue"]["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(key.as_str()) && error.contains("reserved") && error.contains("nothing is written"),
            "{what}: {error}"
        );
        assert!(env.fake.arm_calls().is_empty(), "{what}: {:?}", env.fake.arm_calls());
        forged += 1;
    }
    for (id, before) in &initial {
        assert_eq!(&env.fake.tags(id), before, "{id} untouched");
    }
    println!(
        "SECURITY(forged): {forged} forged events and {} ownership-claiming policies over {} foreign resources; 0 foreign writes",
        claims.len(),
        foreign.len()
    );
}

/// Event Grid deliveries are worked on only from the topics the deployment subscribes to
/// (`TAGWARDEN_EVENT_TOPICS`, compared ignoring case as ARM IDs are): a resource write from
/// another subscription's topic, in either schema, directly or through the host, and a policy
/// `BlobCreated` from another storage account through the sweep queue, are refused and counted,
/// with nothing read or written; the configured topics still work, in any case.
#[tokio::test]
async fn deliveries_from_topics_the_deployment_never_subscribed_to_are_refused() {
    let storage = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/policy";
    let topics = format!("/subscriptions/{SUB},{storage}");
    let env = Env::with("p.yaml", &[("p.yaml", &sensitive_policy(""))], &[("TAGWARDEN_EVENT_TOPICS", &topics)]).await;
    let vm = rid(VM, "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    let foreign_topic = format!("/subscriptions/{OTHER_SUB}");
    let mut ev = eg_event(&vm, VM_WRITE, SOMEONE);
    ev["topic"] = json!(foreign_topic);

    let (status, body) = env.invoke("drift", "eventGridEvent", ev.clone()).await;
    assert_eq!(status, 500, "refused, so kept for the dead-letter container: {body:#}");
    let error = body["ReturnValue"]["error"].as_str().unwrap_or_default();
    assert!(error.contains(&foreign_topic) && error.contains("TAGWARDEN_EVENT_TOPICS"), "{body:#}");
    assert_eq!((&body["ReturnValue"]["events"], &body["ReturnValue"]["ignored"]), (&json!(1), &json!(1)), "{body:#}");
    let (status, body) = env.deliver(&json!([cloud_event(&ev), cloud_event(&ev)])).await;
    assert_eq!(status, 403, "{body:#}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("refused 2 event(s)")), "{body:#}");
    let mut blob = support::env::blob_created("p.yaml");
    blob["topic"] = json!(storage.replace("/s/", "/other/"));
    let (status, body) = env.invoke("sweep-queue", "message", support::env::queue_message(&blob)).await;
    assert_eq!(status, 500, "{body:#}");
    assert!(env.fake.arm_calls().is_empty(), "nothing read or written: {:?}", env.fake.arm_calls());

    // The subscribed topics, in another case: worked on.
    ev["topic"] = json!(format!("/subscriptions/{SUB}").to_uppercase());
    let body = env.drift(ev).await;
    assert_eq!(body["ReturnValue"]["by_status"], json!({"applied": 1}), "{body:#}");
    let (status, _) =
        env.invoke("sweep-queue", "message", support::env::queue_message(&support::env::blob_created("p.yaml"))).await;
    assert_eq!(status, 200);
}
