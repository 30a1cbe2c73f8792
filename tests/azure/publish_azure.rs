//! `tagwarden publish` and `tagwarden status` against a real Azurite: a blob and a prefix's cluster
//! layer, ETag-conditional writes that never overwrite another publisher, an invalid document
//! refused with nothing written, an unchanged document not rewritten, and the function reading
//! what was published.

#![cfg(feature = "azure")]

use crate::support;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::azurite::{self, account_sas};
use tagwarden::azure::blob_store::{blob_policy_store, BlobPolicyStore, OP_PUT};
use tagwarden::cloud::Cloud;
use tagwarden::policy_store::PolicySource;
use tagwarden::policy_store::PutError;
use tagwarden::publish::PublishResult;
use tagwarden::status::StatusReport;

fn doc(infra: &str, tags: &str) -> String {
    format!("version: 1\ncloud: azure\ninfraID: {infra}\ntags: {{{tags}}}\n")
}

fn policy_store(url: &str) -> BlobPolicyStore {
    let http = tagwarden::azure::http_client(Duration::from_secs(10)).expect("http");
    blob_policy_store(url.parse().expect("blob URL"), Duration::ZERO, http, None, Default::default())
}

#[tokio::test]
async fn blob_create_unchanged_update_refusal_and_conflicts() {
    let http = tagwarden::azure::reqwest::Client::new();
    let container = azurite::container(&http).await;
    let url = format!("{container}/cluster/policy.yaml?{}", account_sas());
    let store = policy_store(&url);

    let v1 = doc("c-1", "team: a, gone: x");
    let created = store.publish(&v1, None, false).await.expect("created");
    assert_eq!((created.result, created.infra_id.as_deref()), (PublishResult::Written, Some("c-1")));
    assert!(!created.location.contains("sig="), "no SAS in what is shown: {}", created.location);
    let (loaded, _) = store.current(true).await;
    assert_eq!(loaded.expect("the function accepts it").infra_id, "c-1");

    assert_eq!(store.publish(&v1, None, false).await.expect("same").result, PublishResult::Unchanged);
    assert_eq!(store.source.calls.get(OP_PUT), 1, "an unchanged document is not rewritten");
    let invalid = store.publish(&doc("c-1", "'a<b': x, 'k%': y"), None, false).await.expect("refused");
    assert_eq!(invalid.result, PublishResult::Refused, "{invalid:?}");
    assert!(invalid.violations.len() >= 2, "every violation is listed: {:?}", invalid.violations);
    assert_eq!(store.source.calls.get(OP_PUT), 1, "nothing written for an invalid document");

    let v2 = doc("c-1", "team: b, cost: '1'");
    let updated = store.publish(&v2, None, false).await.expect("updated");
    assert_eq!(updated.result, PublishResult::Written);
    assert_eq!(updated.changes.changed["team"], ["a".to_string(), "b".to_string()]);
    assert_eq!(updated.changes.removed.keys().collect::<Vec<_>>(), ["gone"]);

    // A stale ETag loses; so does a create when the blob appeared meanwhile.
    let read = store.read("cluster/policy.yaml").await.expect("read").expect("v2");
    store.source.put("cluster/policy.yaml", &doc("c-1", "team: c"), Some(&read.etag)).await.expect("replace");
    let lost =
        store.source.put("cluster/policy.yaml", &doc("c-1", "team: d"), Some(&read.etag)).await.expect_err("stale");
    assert!(matches!(lost, PutError::Conflict { .. }), "{lost}");
    let lost = store.source.put("cluster/policy.yaml", &v1, None).await.expect_err("exists");
    assert!(matches!(lost, PutError::Conflict { .. }), "{lost}");
    assert_eq!(store.read("cluster/policy.yaml").await.expect("read").expect("v3").text, doc("c-1", "team: c"));
}

#[tokio::test]
async fn prefix_layer_and_the_cli() {
    let http = tagwarden::azure::reqwest::Client::new();
    let container = azurite::container(&http).await;
    azurite::put_blob(&http, &container, "layers/00-defaults.yaml", &doc("c-1", "owner: platform")).await;
    let to = format!("{container}/layers/?{}", account_sas());

    let run = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_tagwarden"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the CLI runs");
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("stdin");
        let out = child.wait_with_output().expect("ends");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run(&["publish", "--from", "-", "--to", &to, "--json"], &doc("c-2", "a: b"));
    let json: Value = serde_json::from_str(&out).expect("--json");
    assert_eq!((code, json["result"].as_str()), (1, Some("refused")), "two clusters in one prefix: {out}");
    let (code, out) = run(&["publish", "--from", "-", "--to", &to, "--json"], &doc("c-1", "team: a"));
    let json: Value = serde_json::from_str(&out).expect("--json");
    assert_eq!((code, json["result"].as_str()), (0, Some("written")), "{out}");
    assert!(json["location"].as_str().is_some_and(|l| l.ends_with("/layers/10-cluster.yaml")), "{out}");
    assert_eq!(json["changes"]["added"], serde_json::json!({"team": "a"}));

    let store = policy_store(&to);
    let (loaded, _) = store.current(true).await;
    assert_eq!(loaded.expect("layers accepted").policy.base_tags(Cloud::Azure).len(), 2);
    let report = StatusReport::new(Cloud::Azure, &store.location(), Some("v1".into()), vec![], vec![]);
    tagwarden::status_store::write(&store, None, &report).await.expect("status");
    let (code, out) = run(&["status", "--policy", &to], "");
    assert_eq!(code, 0, "in force, nothing failed: {out}");
    assert!(out.contains("state      ok") && out.contains("failures   0") && !out.contains("sig="), "{out}");
}
