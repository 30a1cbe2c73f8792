//! Audit mode on the fake ARM (`TAGWARDEN_MODE=audit` through the function's own configuration):
//! an event and a sweep (the timer, then a policy change's queued sweep) send no tag write — the
//! fake's own request log holds no PATCH or PUT of a tags resource — while the status report
//! lists every drifted owned resource before → after. Then the same handler's cluster, audited by
//! its policy (`enforce: false`) in an enforcing deployment, writes nothing either; and enforced,
//! it writes exactly the reported set.

#![cfg(feature = "azure")]

use crate::support;
use serde_json::{json, Value};
use support::env::{blob_created, eg_event, infrastructure, queue_message, rid, timer, Env, OWNER, SOMEONE};

fn writes(env: &Env) -> Vec<String> {
    env.fake.arm_calls().into_iter().filter(|c| c == "PATCH tags" || c == "PUT tags").collect()
}

/// One audited change: key, before, after.
type Change = (String, Option<String>, String);

fn reported(report: &Value) -> Vec<(String, Vec<Change>)> {
    let writes = report["audit"]["writes"].as_array().cloned().unwrap_or_default();
    writes
        .iter()
        .map(|w| {
            let changes = w["changes"].as_array().expect("changes").iter().map(|c| {
                let s = |k: &str| c[k].as_str().map(str::to_owned);
                (s("key").expect("key"), s("old"), s("new").expect("new"))
            });
            (w["resource"].as_str().expect("resource").to_ascii_lowercase(), changes.collect())
        })
        .collect()
}

fn owned_disks(env: &Env) -> Vec<String> {
    (0..4)
        .map(|i| {
            let id = rid("Microsoft.Compute/disks", &format!("disk-{i}"));
            env.fake.put_resource(&id, &[(OWNER, "owned"), ("team", "someone-else"), ("mine", "kept")]);
            id
        })
        .collect()
}

#[tokio::test]
async fn an_audited_deployment_writes_nothing_on_events_and_sweeps_and_reports_every_drift() {
    let docs = [("layers/00.json", infrastructure(&[("team", "platform")], &[]))];
    let docs: Vec<(&str, &str)> = docs.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let env = Env::with("layers/", &docs, &[("TAGWARDEN_MODE", "audit")]).await;
    let disks = owned_disks(&env);
    let before: Vec<_> = disks.iter().map(|d| env.fake.tags(d)).collect();

    let body = env.drift(eg_event(&disks[0], "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(body["ReturnValue"]["by_status"], json!({"would-apply": 1}), "{body:#}");
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["ReturnValue"]["by_status"]["would-apply"], 4, "{body:#}");
    env.publish("layers/10.yaml", "team: platform-2\n").await;
    let (status, body) = env.invoke("sweep-queue", "message", queue_message(&blob_created("layers/10.yaml"))).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(writes(&env), Vec::<String>::new(), "an audit wrote: {:?}", env.fake.arm_calls());
    let after: Vec<_> = disks.iter().map(|d| env.fake.tags(d)).collect();
    assert_eq!(before, after, "nothing changed");

    let report = env.report().await.expect("a status report");
    assert_eq!(report["audit"]["mode"], "audit", "{report:#}");
    let listed = reported(&report);
    assert_eq!(listed.len(), disks.len(), "{listed:?}");
    for d in &disks {
        let entry = listed.iter().find(|(r, _)| *r == d.to_ascii_lowercase()).expect("listed");
        assert_eq!(entry.1, [("team".to_string(), Some("someone-else".to_string()), "platform-2".to_string())]);
    }
}

#[tokio::test]
async fn a_cluster_audited_by_its_policy_writes_nothing_then_enforced_writes_its_report() {
    // A layer beside the Infrastructure object: the cluster is audited.
    let infra = infrastructure(&[("team", "platform")], &[]);
    let env =
        Env::new("layers/", &[("layers/00.json", &infra), ("layers/05.yaml", "version: 1\nenforce: false\n")]).await;
    let disks = owned_disks(&env);
    let body = env.drift(eg_event(&disks[0], "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(body["ReturnValue"]["by_status"], json!({"would-apply": 1}), "{body:#}");
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(writes(&env), Vec::<String>::new());
    let report = env.report().await.expect("report");
    let listed = reported(&report);
    assert_eq!(listed.len(), disks.len());

    // Switched to enforce by the policy alone: no redeploy.
    env.publish("layers/05.yaml", "version: 1\nenforce: true\n").await;
    env.fake.clear_log();
    let (status, body) = env.invoke("sweep-queue", "message", queue_message(&blob_created("layers/05.yaml"))).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(writes(&env).len(), disks.len(), "one Merge per reported resource: {:?}", env.fake.arm_calls());
    for d in &disks {
        assert_eq!(env.fake.tags(d).expect("disk").get("team").map(String::as_str), Some("platform"));
    }
}
