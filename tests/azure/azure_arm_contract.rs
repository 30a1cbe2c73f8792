//! ARM as it really answers, through the Azure function's handler and the built CLI:
//! the fake ARM (`tagwarden_testkit::azure::fake`) speaks the shapes of real recorded responses and of
//! ARM's documented async protocol, each cited where the fake makes it. What is proven here:
//! a write counts as applied only when ARM says its operation `Succeeded`; a lock is permanent
//! after one attempt and names its fix; no wait follows the last attempt; a resource deleted after
//! its listing is `gone`; ids ARM cases differently are one resource; a scope that cannot be listed
//! is reported while every other owned resource is still corrected.

#![cfg(feature = "azure")]

use crate::support;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::azurite;
use support::env::{eg_event, infrastructure, rid, timer, Env, INFRA, OWNER, OWN_PRINCIPAL, SOMEONE, SUB};
use support::fake::{End, FakeAzure, Fault, ARM_AUDIENCE, IDENTITY_HEADER};
use tagwarden::azure::reqwest;

const POLICY: &str = "cluster/infrastructure.json";

async fn env() -> Env {
    Env::new(POLICY, &[(POLICY, &infrastructure(&[("team", "platform")], &[]))]).await
}

fn statuses(body: &Value) -> Value {
    body["ReturnValue"]["by_status"].clone()
}

fn logs(body: &Value) -> String {
    body["Logs"].to_string()
}

fn write_event(id: &str) -> Value {
    eg_event(id, "Microsoft.Compute/disks/write", SOMEONE)
}

#[tokio::test]
async fn an_accepted_write_is_applied_only_when_its_operation_succeeded() {
    let env = env().await;
    let disk = |n: &str| {
        let id = rid("Microsoft.Compute/disks", n);
        env.fake.put_resource(&id, &[(OWNER, "owned")]);
        id
    };

    // 202 with Azure-AsyncOperation: the monitor (not the Location) is polled, each `Retry-After`
    // (1 s) is waited, and only `Succeeded` makes the record `applied`.
    let ok = disk("ok");
    env.fake.inject("PATCH", Fault::Accepted { polls: 2, end: End::Succeeded, retry_after: 1, monitor: true });
    let started = Instant::now();
    let body = env.drift(write_event(&ok)).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "{body:#}");
    assert!(started.elapsed() >= Duration::from_secs(3), "three Retry-After waits of 1 s: {:?}", started.elapsed());
    let polls: Vec<String> =
        env.fake.log().into_iter().filter(|l| l.path.contains("/operations/")).map(|l| l.path).collect();
    assert_eq!(polls.len(), 3, "InProgress, InProgress, Succeeded: {:?}", env.fake.arm_calls());
    assert_eq!(env.fake.tags(&ok).expect("disk")["team"], "platform");

    // The monitor answers 200 all along; the operation ends Failed: the record is failed with
    // ARM's error (a refused request: permanent, so the delivery succeeds and it is reported).
    let failed = disk("failed");
    let end = End::Failed { code: "InvalidTagNameCharacters", message: "The tag names contain invalid characters." };
    env.fake.inject("PATCH", Fault::Accepted { polls: 1, end, retry_after: 0, monitor: true });
    let (status, body) = env.invoke("drift", "eventGridEvent", write_event(&failed)).await;
    assert_eq!((status, statuses(&body)), (200, json!({"failed": 1})), "{body:#}");
    let text = logs(&body);
    assert!(text.contains("InvalidTagNameCharacters") && text.contains("ended Failed"), "{text}");
    assert!(!env.fake.tags(&failed).expect("disk").contains_key("team"), "the failed write did not land");

    // Canceled by someone else: worth another delivery.
    let canceled = disk("canceled");
    env.fake.inject("PATCH", Fault::Accepted { polls: 0, end: End::Canceled, retry_after: 0, monitor: true });
    let (status, body) = env.invoke("drift", "eventGridEvent", write_event(&canceled)).await;
    assert_eq!(status, 500, "handed back to Event Grid: {body:#}");
    assert!(logs(&body).contains("ended Canceled"), "{body:#}");

    // Location only: 202 while running, then the failed operation's own error.
    let located = disk("located");
    let end = End::Failed { code: "InvalidTagNameCharacters", message: "The tag names contain invalid characters." };
    env.fake.inject("PATCH", Fault::Accepted { polls: 1, end, retry_after: 0, monitor: false });
    let (status, body) = env.invoke("drift", "eventGridEvent", write_event(&located)).await;
    assert_eq!((status, statuses(&body)), (200, json!({"failed": 1})), "{body:#}");
    assert!(logs(&body).contains("HTTP 400 InvalidTagNameCharacters"), "{body:#}");
}

#[tokio::test]
async fn a_read_only_lock_is_permanent_after_one_attempt_and_names_the_fix() {
    let env = env().await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    env.fake.lock(&format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg"));
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    assert_eq!((status, statuses(&body)), (200, json!({"failed": 1})), "reported, not handed back: {body:#}");
    assert_eq!(env.fake.count("PATCH tags"), 1, "a 409 ScopeLocked is not retried: {:?}", env.fake.arm_calls());
    let text = logs(&body);
    assert!(text.contains("HTTP 409 ScopeLocked") && text.contains("remove the ReadOnly lock"), "{text}");
    // ARM's ids of the failed request, and the one tagwarden sent, are in the record.
    assert!(text.contains("x-ms-request-id") && text.contains("x-ms-correlation-request-id"), "{text}");
    assert!(text.contains("x-ms-client-request-id"), "{text}");
    // Every ARM request carried its own client request id.
    let ids: Vec<String> = env
        .fake
        .log()
        .into_iter()
        .filter(|l| l.api == "arm")
        .filter_map(|l| l.headers.into_iter().find(|(k, _)| k.eq_ignore_ascii_case("x-ms-client-request-id")))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(ids.len(), 2, "GET and PATCH each send one");
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn no_wait_follows_the_last_attempt() {
    let env = env().await;
    let vm = rid("Microsoft.Compute/virtualMachines", "busy");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    // The handler's client makes 4 attempts (`tagwarden_testkit::azure::env`); each is throttled for 2 s.
    for _ in 0..4 {
        env.fake.inject("PATCH", Fault::Throttle { retry_after: 2 });
    }
    let started = Instant::now();
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE)).await;
    let took = started.elapsed();
    assert_eq!(status, 500, "throttled to the end: handed back: {body:#}");
    assert!(logs(&body).contains("SubscriptionRequestsThrottled"), "{body:#}");
    assert_eq!(env.fake.count("PATCH tags"), 4);
    // Three waits between four attempts; a fourth wait after the last would make it 8 s.
    assert!(took >= Duration::from_secs(6) && took < Duration::from_millis(7_500), "took {took:?}");
}

#[tokio::test]
async fn the_functions_own_write_is_known_by_its_principal_id_without_hyphens() {
    let env = env().await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-1");
    env.fake.put_resource(&vm, &[(OWNER, "owned")]);
    // Only the evidence names the caller, as Event Grid sends it: 32 hex digits, no hyphens.
    let mut event = eg_event(&vm, "Microsoft.Resources/tags/write", OWN_PRINCIPAL);
    event["data"]["claims"] = json!({});
    assert_eq!(event["data"]["authorization"]["evidence"]["principalId"], OWN_PRINCIPAL.replace('-', ""));
    let body = env.drift(event).await;
    assert_eq!(env.fake.arm_calls(), Vec::<String>::new(), "its own write costs no call: {body:#}");
}

#[tokio::test]
async fn the_function_sweeps_past_a_scope_it_cannot_list_and_reports_it() {
    let denied_rg = format!("/subscriptions/{SUB}/resourceGroups/locked-down");
    let open_rg = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    let env = Env::with(
        POLICY,
        &[(POLICY, &infrastructure(&[("team", "platform")], &[]))],
        &[("TAGWARDEN_SWEEP_SCOPES", &format!("{denied_rg},{open_rg}"))],
    )
    .await;
    let disks: Vec<String> = (0..3).map(|i| rid("Microsoft.Compute/disks", &format!("disk-{i}"))).collect();
    for d in &disks {
        env.fake.put_resource(d, &[(OWNER, "owned")]);
    }
    env.fake.deny(&denied_rg);
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    // A missing role is permanent: the timer run succeeds, and the failure is reported.
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"applied": 3, "failed": 1}), "{body:#}");
    // Resource Graph showed nothing in the denied scope (it leaves out what the caller may not
    // read, without a word), so that scope alone was listed through ARM, which says why.
    assert_eq!((env.fake.count("POST graph"), env.fake.count("GET list")), (1, 1), "{:?}", env.fake.arm_calls());
    for d in &disks {
        assert_eq!(env.fake.tags(d).expect("disk")["team"], "platform");
    }
    let report = env.report().await.expect("a status report");
    let failures = report["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{report:#}");
    assert_eq!(failures[0]["type"], "arm:ListResources");
    assert_eq!(failures[0]["resource"], denied_rg);
    let error = failures[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("AuthorizationFailed") && error.contains("Reader"), "names the fix: {error}");
}

/// An ARM token from the fake identity endpoint, as `az account get-access-token` would give one.
async fn arm_token(fake: &FakeAzure, http: &reqwest::Client) -> String {
    let url = format!("{}?resource={ARM_AUDIENCE}&api-version=2019-08-01", fake.identity);
    let resp = http.get(url).header("X-IDENTITY-HEADER", IDENTITY_HEADER).send().await.expect("token request");
    let body: Value = serde_json::from_str(&resp.text().await.expect("token body")).expect("token JSON");
    body["access_token"].as_str().expect("access_token").to_string()
}

/// `tagwarden sweep --json` on Azure with these scopes.
async fn cli_sweep(fake: &FakeAzure, scopes: &[&str]) -> (Output, Value) {
    let http = reqwest::Client::new();
    let container = azurite::container(&http).await;
    azurite::put_blob(&http, &container, POLICY, &infrastructure(&[("team", "platform")], &[])).await;
    let policy = format!("{container}/{POLICY}?{}", azurite::account_sas());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tagwarden"));
    cmd.args(["sweep", "--json", "--policy", &policy, "--arm-endpoint", &fake.arm]);
    for s in scopes {
        cmd.args(["--scope", s]);
    }
    cmd.env("TAGWARDEN_ARM_TOKEN", arm_token(fake, &http).await);
    let out = cmd.output().expect("run tagwarden");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out, json)
}

#[tokio::test]
async fn cli_sweep_writes_each_resource_once_however_arm_cases_it_and_counts_the_gone() {
    let fake = FakeAzure::start(None);
    let sub = format!("/subscriptions/{SUB}");
    let rg = format!("{sub}/resourceGroups/DefaultResourceGroup-EUS");
    // A name with parentheses, as ARM names a solution after its workspace.
    let solution =
        format!("{rg}/providers/Microsoft.OperationsManagement/solutions/SecurityCenterFree(DefaultWorkspace-EUS)");
    let disk = format!("{rg}/providers/Microsoft.Compute/disks/data-0");
    let deleted = format!("{rg}/providers/Microsoft.Compute/disks/deleted-0");
    for id in [&solution, &disk, &deleted] {
        fake.put_resource(id, &[(OWNER, "owned")]);
    }
    // Swept through the subscription and through its resource group, whose listing names every
    // id in lower case; each listing opens with an empty page that has a nextLink.
    fake.lower_case_listing(&rg);
    fake.empty_first_page();
    fake.delete_after_listing(&deleted);
    let (out, s) = cli_sweep(&fake, &[&sub, &rg]).await;
    assert_eq!(out.status.code(), Some(0), "{s:#}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (s["owned"].as_u64(), s["written"].as_u64(), s["gone"].as_u64(), s["failed"].as_u64()),
        (Some(2), Some(2), Some(1), Some(0)),
        "{s:#}"
    );
    assert_eq!(fake.count("PATCH tags"), 2, "one Merge per resource: {:?}", fake.arm_calls());
    for id in [&solution, &disk] {
        assert_eq!(fake.tags(id).expect("resource")["team"], "platform", "{id}");
    }
    let gone: Vec<&Value> =
        s["records"].as_array().expect("records").iter().filter(|r| r["status"] == "gone").collect();
    assert_eq!(gone.len(), 1);
    assert!(gone[0]["resource"].as_str().is_some_and(|r| r.eq_ignore_ascii_case(&deleted)), "{:#}", gone[0]);
    assert_eq!(fake.count("GET tags"), 3, "the gone resource was read once, without the not-visible-yet retries");
}

#[tokio::test]
async fn cli_sweep_past_a_scope_it_cannot_list_exits_2_and_names_it() {
    let fake = FakeAzure::start(None);
    let denied = format!("/subscriptions/{SUB}/resourceGroups/locked-down");
    let open = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    fake.put_resource(&vm, &[(OWNER, "owned")]);
    fake.deny(&denied);
    let (out, s) = cli_sweep(&fake, &[&denied, &open]).await;
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!((s["written"].as_u64(), s["listings_failed"].as_u64()), (Some(1), Some(1)), "{s:#}");
    assert_eq!(fake.tags(&vm).expect("vm")["team"], "platform", "the open scope was swept");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 listing(s) failed"), "{stderr}");
}
