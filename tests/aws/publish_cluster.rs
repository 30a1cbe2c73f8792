//! `tagwarden publish --from-cluster --watch`, the deployed publisher, as a process: it reads the
//! Infrastructure object from the fake API server (`tagwarden_testkit::kube_api`, which serves it
//! from openshift/api's real CRD; no real API server runs here), publishes it to S3 in moto,
//! republishes each day-2 edit of `status.platformStatus.aws.resourceTags` made through the
//! `/status` subresource (what OpenShift lets an admin edit), never sees an edit the CRD refuses,
//! refuses an edit the CRD allows but tagwarden does not (what is published stays), and mirrors the
//! function's status report into the `tagwarden-status` ConfigMap, with the refusal on top.

#![cfg(all(feature = "aws", feature = "kube"))]

use crate::{kube_api, publisher, support};

use std::path::Path;
use std::time::{Duration, Instant};

use kube_api::FakeApi;
use publisher::Publisher;
use serde_json::{json, Value};
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::cloud::Cloud;
use tagwarden::status::StatusReport;

const PATIENCE: Duration = Duration::from_secs(30);

fn tag_list(tags: &[(&str, &str)]) -> Value {
    json!(tags.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>())
}

/// The AWS fixture with `tags` as its user tags (`status.platformStatus.aws.resourceTags`). Its
/// `spec.platformSpec.aws.resourceTags` is no field of the CRD: the fake API server prunes it.
fn infrastructure(tags: &[(&str, &str)]) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies/infrastructure-aws.yaml");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let mut v: Value = serde_yaml_ng::from_str(&text).expect("fixture parses");
    v["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(tags);
    v
}

/// A day-2 edit as an admin makes it: `PUT …/infrastructures/cluster/status` over HTTP with the
/// stored object and new user tags. The server's answer.
async fn edit_status_tags(api: &FakeApi, tags: &[(&str, &str)]) -> kube_api::Reply {
    let mut object = api.infrastructure().expect("the Infrastructure object");
    object["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(tags);
    api.put_status_as_admin(&object).await
}

/// Wait until the published policy document contains `needle`.
async fn published_with(clients: &tagwarden::aws::Clients, bucket: &str, key: &str, needle: &str) {
    let start = Instant::now();
    loop {
        if let Ok(o) = clients.s3.get_object().bucket(bucket).key(key).send().await {
            let text = String::from_utf8(o.body.collect().await.expect("body").to_vec()).expect("utf-8");
            if text.contains(needle) {
                return;
            }
        }
        assert!(start.elapsed() < PATIENCE, "s3://{bucket}/{key} never contained {needle:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The publisher as the Deployment runs it, with the account's settings.
fn spawn(api: &FakeApi, env: &[(&'static str, String)], to: &str) -> Publisher {
    Publisher::spawn(&api.kubeconfig("tagwarden", None), to, env, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_that_could_not_be_published_is_retried_without_a_new_change() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure(&[("team", "a")]));
    let (clients, account, env) = support::account_with_env().await;
    // The bucket does not exist yet: the first attempts fail (NoSuchBucket).
    let bucket = format!("policy-late-{account}");
    let to = format!("s3://{bucket}/p.yaml");
    let publisher = spawn(&api, &env, &to);
    assert!(publisher.lines.recv_timeout(Duration::from_secs(2)).is_err(), "nothing can be published yet");
    let created = Instant::now();
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let line = publisher.next("published once the bucket exists, with no change in the cluster", PATIENCE);
    println!("PUBLISH(retry): bucket created → published in {} ms", created.elapsed().as_millis());
    assert_eq!(line["result"], "written", "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publisher_follows_the_cluster_and_mirrors_the_status_back() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure(&[("team", "a")]));
    // The manifests create the status ConfigMap, so the Role grants no create on ConfigMaps.
    api.put_configmap("tagwarden", json!({"metadata": {"name": "tagwarden-status"}}));
    let (clients, account, env) = support::account_with_env().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let to = format!("s3://{bucket}/cluster/policy.yaml");
    let publisher = spawn(&api, &env, &to);
    let next = |what: &str| publisher.next(what, PATIENCE);

    let first = next("the first publish");
    assert_eq!(first["result"], "written", "{first}");
    assert_eq!(first["changes"]["added"]["team"], "a", "{first}");
    let loc: PolicyLocation = to.parse().expect("location");
    let function = policy_store(&clients, loc.clone(), Duration::ZERO);
    let (loaded, _) = function.current(true).await;
    let infra_id = loaded.expect("the function accepts what was published").infra_id.clone();

    // A day-2 edit of the status tags through `/status` is republished within seconds.
    let reply = edit_status_tags(&api, &[("team", "b"), ("cost-center", "42")]).await;
    let answered = Instant::now();
    assert_eq!(reply.code, 200, "{}", reply.body);
    published_with(&clients, &bucket, "cluster/policy.yaml", "cost-center").await;
    let to_object = answered.elapsed();
    let second = next("the edit");
    eprintln!(
        "PUBLISH(watch): /status PUT answered → policy object in S3 in {} ms (publish line after {} ms)",
        to_object.as_millis(),
        answered.elapsed().as_millis()
    );
    assert_eq!(
        (second["result"].as_str(), second["changes"]["changed"]["team"][1].as_str()),
        (Some("written"), Some("b"))
    );
    let (loaded, _) = function.current(true).await;
    let base = loaded.expect("in force").policy.base_tags(Cloud::Aws);
    assert_eq!(base.get("cost-center").map(String::as_str), Some("42"));

    // The function's report shows up in the cluster.
    let report = StatusReport::new(Cloud::Aws, &loc, Some("v2".into()), vec![], vec![]);
    tagwarden::status_store::write(&function, None, &report).await.expect("status written");
    let start = Instant::now();
    let state =
        |api: &FakeApi| api.get("configmaps", "tagwarden", "tagwarden-status").map(|c| c["data"]["state"].clone());
    while state(&api) != Some(json!("ok")) {
        assert!(start.elapsed() < PATIENCE, "the status ConfigMap never said ok: {:?}", state(&api));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // An edit the CRD refuses (a key outside its pattern) is answered 422 and never stored, so the
    // publisher has nothing to see.
    let reply = edit_status_tags(&api, &[("a*b", "c")]).await;
    assert_eq!(reply.code, 422, "{}", reply.body);
    assert_eq!(reply.body["details"]["causes"][0]["field"], "status.platformStatus.aws.resourceTags[0].key");
    assert!(publisher.lines.recv_timeout(Duration::from_secs(2)).is_err(), "nothing is published for a refused edit");

    // An edit the CRD allows but tagwarden does not (the `aws:` prefix is AWS's own) is refused by
    // the publisher: nothing written, and the cluster is told.
    let reply = edit_status_tags(&api, &[("aws:team", "c")]).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    let refused = next("the invalid edit");
    assert_eq!(refused["result"], "refused", "{refused}");
    let (loaded, _) = function.current(true).await;
    assert_eq!(loaded.expect("still in force").policy.base_tags(Cloud::Aws).get("team").map(String::as_str), Some("b"));
    let start = Instant::now();
    while state(&api) != Some(json!("rejected-keeping-last-good")) {
        assert!(start.elapsed() < PATIENCE, "the refusal never reached the ConfigMap: {:?}", state(&api));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cm = api.get("configmaps", "tagwarden", "tagwarden-status").expect("configmap");
    assert!(cm["data"]["report.json"].as_str().is_some_and(|r| r.contains("aws:")), "{cm}");
    let degraded = publisher::condition(Some(cm.clone()), "Degraded").expect("a Degraded condition");
    assert_eq!(
        (degraded["status"].as_str(), degraded["reason"].as_str()),
        (Some("True"), Some("PolicyRefused")),
        "{degraded}"
    );
    assert!(!infra_id.is_empty());
    let creates: Vec<String> = api.requests().into_iter().filter(|r| r.method == "POST").map(|r| r.path).collect();
    assert!(creates.iter().all(|p| p.contains("/events")), "only Events are created: {creates:?}");
}
