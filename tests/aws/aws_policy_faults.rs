//! The policy object under faults, against moto through the fault proxy: deleted, truncated,
//! replaced by an invalid version, too large, unreadable (403 `AccessDenied` on `GetObject`),
//! and changed in the middle of a sweep. A warm function keeps its last known good version; a
//! cold one fails closed (writes nothing, hands the event back) and says why.

#![cfg(feature = "aws")]

use crate::{fleet, support};
use support::fault_proxy;

use std::sync::Arc;
use std::time::Duration;

use fault_proxy::{Fault, FaultProxy, Rule, When};
use fleet::{Fleet, FleetSpec};
use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::enforce::Engine;
use tagwarden::report::Status;
use tagwarden::resource::ResourceRef;

struct Env {
    proxy: FaultProxy,
    via: Clients,
    direct: Clients,
    account: String,
    bucket: String,
    fleet: Fleet,
}

impl Env {
    async fn new(instances: usize) -> Env {
        let proxy = FaultProxy::start(&support::moto().endpoint).await;
        let (via, direct, account) = fleet::account_via(&proxy.endpoint, Duration::from_secs(2)).await;
        let bucket = format!("policy-{account}");
        direct.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
        let spec = FleetSpec { instances, foreign_instances: 0, buckets: 0, roles: 0, target_groups: 0 };
        let fleet = Fleet::create(&direct, &account, &spec).await;
        Env { proxy, via, direct, account, bucket, fleet }
    }

    async fn publish(&self, text: &str) {
        let body = text.as_bytes().to_vec().into();
        self.direct.s3.put_object().bucket(&self.bucket).key("p.json").body(body).send().await.expect("put");
    }

    fn reconciler(&self) -> Engine<Tagger> {
        fleet::reconciler(&self.via, &self.account, &format!("s3://{}/p.json", self.bucket), Duration::ZERO)
    }

    async fn event(&self, rec: &Engine<Tagger>, r: &ResourceRef) -> function::Invocation {
        let body = fleet::event_for(r, &self.account, "e");
        function::handle(
            rec,
            json!({"Records": [{"messageId": "m", "eventSource": "aws:sqs", "body": body}]}).to_string(),
        )
        .await
    }

    /// The status report beside the policy.
    async fn report(&self) -> Value {
        let out =
            self.direct.s3.get_object().bucket(&self.bucket).key("tagwarden-status.json").send().await.expect("report");
        serde_json::from_slice(&out.body.collect().await.expect("body").into_bytes()).expect("JSON")
    }

    async fn team(&self, r: &ResourceRef) -> Option<String> {
        Tagger::new(self.direct.clone()).read(r).await.expect("read").get("team").cloned()
    }
}

fn records(inv: &function::Invocation) -> Vec<Value> {
    inv.lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("status").is_some())
        .collect()
}

fn handed_back(inv: &function::Invocation) -> bool {
    inv.response == json!({"batchItemFailures": [{"itemIdentifier": "m"}]})
}

#[tokio::test]
async fn broken_policies_keep_the_last_known_good_version_or_fail_closed() {
    let env = Env::new(8).await;
    let r = &env.fleet.owned;
    env.publish(&fleet::infrastructure(&[("team", "platform")])).await;
    let warm = env.reconciler();
    let inv = env.event(&warm, &r[0]).await;
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    let v1 = records(&inv)[0]["policy_version"].as_str().expect("version").to_string();
    assert_eq!(env.team(&r[0]).await.as_deref(), Some("platform"));

    // Each fault, for a warm function (last known good) and a cold one (nothing known).
    let truncated = "{\"kind\": \"Infrastructure\", \"status\": {\"infrastructureName\": \"x\", ";
    let invalid = fleet::infrastructure(&[("aws:reserved", "x"), ("team", "{{ .Values.team }}")]);
    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(tagwarden::policy::load::MAX_DOCUMENT_BYTES));
    let cases: Vec<(&str, Option<String>, bool, &str)> = vec![
        ("unreadable (403)", None, true, "AccessDenied"),
        ("truncated", Some(truncated.to_string()), false, "not valid JSON"),
        ("invalid version", Some(invalid), false, "aws:reserved"),
        ("too large", Some(huge), false, "PolicyTooLarge"),
        ("deleted", None, false, "NoSuchKey"),
    ];
    for (i, (what, text, deny, why)) in cases.into_iter().enumerate() {
        match (&text, deny) {
            (Some(t), _) => env.publish(t).await,
            (None, true) => {
                env.proxy.set_rules(vec![Rule::new(Some("s3"), Some("GetObject"), Fault::AccessDenied, When::Always)])
            }
            (None, false) => {
                env.direct.s3.delete_object().bucket(&env.bucket).key("p.json").send().await.expect("delete");
            }
        }
        let resource = &r[1 + i];
        env.via.calls.reset();
        let inv = env.event(&warm, resource).await;
        assert_eq!(inv.response, json!({"batchItemFailures": []}), "{what}: {:?}", inv.lines);
        let recs = records(&inv);
        assert_eq!(recs[0]["policy_version"], v1.as_str(), "{what}: the last known good version");
        assert_eq!(env.team(resource).await.as_deref(), Some("platform"), "{what}");
        // A sweep meanwhile runs on the last known good version, and its status report says
        // what is wrong with the published policy, never `ok`.
        let out = warm.sweep(false, None, None).await;
        assert!(out.error.is_none(), "{what}: {:?}", out.error);
        let report = env.report().await;
        let rejected = matches!(what, "truncated" | "invalid version");
        let want = if rejected { "rejected-keeping-last-good" } else { "unreadable-keeping-last-good" };
        assert_eq!(report["policy"]["state"], want, "{what}: {report}");
        assert_eq!(report["policy"]["version"], v1.as_str(), "{what}");
        assert!(report["policy"]["errors"].to_string().contains(why), "{what}: {report}");

        let cold = env.reconciler();
        env.via.calls.reset();
        let out = cold
            .handle_event(
                &tagwarden::events::parse_one(fleet::event_for(resource, &env.account, "c").as_bytes()).unwrap(),
                None,
            )
            .await;
        let error = out.error.clone().expect("fail closed");
        assert!(error.contains("nothing is written") && error.contains(why), "{what}: {error}");
        assert!(out.records.is_empty());
        assert_eq!(env.via.calls.writes(), 0, "{what}");
        let inv = env.event(&cold, resource).await;
        assert!(handed_back(&inv), "{what}: a cold function hands the event back: {}", inv.response);
        println!("POLICY-FAULT {what}: warm kept {v1}; cold failed closed: {error}");
        env.proxy.clear_rules();
    }
    let injected = env.proxy.injected();
    assert!(injected.get("access-denied").copied().unwrap_or_default() >= 2, "{injected:?}");

    // A rejected version is reported beside the policy.
    env.publish(&fleet::infrastructure(&[("Name", "x")])).await;
    let _ = env.event(&warm, &r[0]).await;
    let report = env.report().await;
    assert_eq!(report["policy"]["state"], "rejected-keeping-last-good", "{report}");

    // A valid version again: in force at once.
    env.publish(&fleet::infrastructure(&[("team", "compute")])).await;
    let inv = env.event(&warm, &r[0]).await;
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    assert_ne!(records(&inv)[0]["policy_version"], v1.as_str());
    assert_eq!(env.team(&r[0]).await.as_deref(), Some("compute"));
}

#[tokio::test]
async fn a_policy_change_mid_sweep_applies_one_version_per_sweep() {
    let env = Env::new(10).await;
    env.publish(&fleet::infrastructure(&[("team", "platform"), ("env", "prod")])).await;
    let rec = Arc::new(env.reconciler());
    // Hold the write phase (one delayed CreateTags, inside the 2 s attempt timeout) and publish
    // v2 while the sweep is writing.
    env.proxy.set_rules(vec![Rule::new(
        Some("ec2"),
        Some("CreateTags"),
        Fault::Delay(Duration::from_millis(600)),
        When::Always,
    )
    .budget(1)]);
    let sweeping = {
        let rec = rec.clone();
        tokio::spawn(async move { rec.sweep(true, None, None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.publish(&fleet::infrastructure(&[("team", "compute"), ("env", "prod")])).await;
    let out = sweeping.await.expect("sweep");
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(env.proxy.injected().get("delay"), Some(&1), "the change landed during the write phase");
    let versions: std::collections::BTreeSet<&str> = out.records.iter().map(|r| r.policy_version.as_str()).collect();
    assert_eq!(versions.len(), 1, "one sweep, one policy version: {versions:?}");
    assert!(out.records.iter().all(|r| r.status == Status::Applied), "{:?}", out.records);
    for r in &env.fleet.owned {
        assert_eq!(env.team(r).await.as_deref(), Some("platform"), "the version the sweep started with");
    }
    // The change's own trigger (a policy-changed sweep) applies v2 everywhere.
    let inv = function::handle(&rec, json!({"tagwarden": "sweep"}).to_string()).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    for r in &env.fleet.owned {
        assert_eq!(env.team(r).await.as_deref(), Some("compute"));
    }
}
