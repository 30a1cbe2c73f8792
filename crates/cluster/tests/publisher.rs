//! The publisher's controllers against the fake Kubernetes API server (`tagwarden_testkit`), with
//! an in-memory policy store behind [`Publish`]: debounce, resync, back-off, the status mirror and
//! the health they keep, one cluster's and a cluster set's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tagwarden_cluster::cluster_set::SetKind;
use tagwarden_cluster::health::{Health, Reason};
use tagwarden_cluster::publisher::one::Publisher;
use tagwarden_cluster::publisher::set::SetPublisher;
use tagwarden_cluster::publisher::{Publish, Reports, Settings, Sink, Unreadable};
use tagwarden_cluster::{ClusterSource, StatusMirror};
use tagwarden_core::publish::{PublishError, PublishOutcome, PublishResult};
use tagwarden_testkit::kube_api::{objects, FakeApi};

const NS: &str = "tagwarden";

/// A policy store in memory: what it holds by cluster, every publish asked of it, and a number of
/// publishes to fail (as a lost race) before it works again.
#[derive(Clone, Default)]
struct Store(Arc<StoreInner>);

#[derive(Default)]
struct StoreInner {
    held: Mutex<HashMap<Option<String>, String>>,
    calls: Mutex<Vec<(Option<String>, String)>>,
    fail: AtomicU32,
}

impl Store {
    fn calls(&self) -> Vec<(Option<String>, String)> {
        self.0.calls.lock().expect("calls").clone()
    }

    fn forget(&self) {
        self.0.held.lock().expect("held").clear();
    }
}

impl Publish for Store {
    fn location(&self) -> String {
        "memory://policy".to_string()
    }

    fn endpoint(&self) -> String {
        "memory://policy".to_string()
    }

    fn credential_expiry(&self) -> Option<(String, u64)> {
        None
    }

    async fn publish(&self, text: &str, cluster: Option<&str>, _dry_run: bool) -> Result<PublishOutcome, PublishError> {
        let cluster = cluster.map(str::to_string);
        self.0.calls.lock().expect("calls").push((cluster.clone(), text.to_string()));
        let failing = self.0.fail.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if failing {
            return Err(PublishError::Conflict { location: self.location(), read: "1".into(), found: "2".into() });
        }
        let mut held = self.0.held.lock().expect("held");
        let result = if held.get(&cluster).map(String::as_str) == Some(text) {
            PublishResult::Unchanged
        } else {
            held.insert(cluster.clone(), text.to_string());
            PublishResult::Written
        };
        let mut outcome = PublishOutcome::refused(self.location(), vec![]);
        outcome.result = result;
        outcome.version = Some(format!("v{}", self.0.calls.lock().expect("calls").len()));
        outcome.infra_id = cluster;
        Ok(outcome)
    }

    async fn status(&self) -> Result<Reports, Unreadable> {
        Ok(vec![(None, None)])
    }
}

/// What the publisher told its standard streams.
#[derive(Default)]
struct Told {
    published: Mutex<Vec<PublishOutcome>>,
    not_published: Mutex<Vec<String>>,
}

impl Sink for Told {
    fn published(&self, outcome: &PublishOutcome) {
        self.published.lock().expect("published").push(outcome.clone());
    }

    fn not_published(&self, object: &str, why: &str) {
        self.not_published.lock().expect("not published").push(format!("{object}: {why}"));
    }
}

impl Told {
    fn lines(&self) -> Vec<(Option<String>, PublishResult)> {
        self.published.lock().expect("published").iter().map(|o| (o.infra_id.clone(), o.result)).collect()
    }
}

fn settings(resync: Duration) -> Settings {
    Settings {
        debounce: Duration::from_millis(300),
        resync,
        status_interval: Duration::from_secs(1),
        dry_run: false,
        instance: Some("publisher-0".into()),
    }
}

async fn client_for(api: &FakeApi) -> tagwarden_cluster::Client {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("tagwarden-cluster-publisher-{}-{n}.kubeconfig", std::process::id()));
    std::fs::write(&path, api.kubeconfig(NS, None)).expect("kubeconfig");
    tagwarden_cluster::client(Some(&path)).await.expect("client from kubeconfig")
}

async fn until(what: &str, patience: Duration, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < patience, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn policy_configmap(doc: &str) -> Value {
    json!({"metadata": {"name": "policy", "namespace": NS}, "data": {"tagwarden.yaml": doc}})
}

/// One cluster's publisher on the ConfigMap `tagwarden/policy`, running until the test ends.
struct Running {
    store: Store,
    told: Arc<Told>,
    health: Arc<Health>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start_one(api: &FakeApi, store: Store, resync: Duration) -> Running {
    let client = client_for(api).await;
    let told = Arc::new(Told::default());
    let health = Arc::new(Health::default());
    let publisher = Publisher {
        mirror: StatusMirror::new(client.clone(), NS, "tagwarden-status", Some("publisher-0".into())),
        client,
        source: ClusterSource::ConfigMap { namespace: NS.into(), name: "policy".into() },
        target: store.clone(),
        health: health.clone(),
        settings: settings(resync),
        cluster: None,
        sink: told.clone(),
    };
    let task = tokio::spawn(async move {
        if let Err(e) = publisher.run().await {
            panic!("the publisher stopped: {e}");
        }
    });
    Running { store, told, health, task }
}

fn degraded(api: &FakeApi) -> Option<(String, String)> {
    let cm = api.get("configmaps", NS, "tagwarden-status")?;
    let conditions: Vec<Value> = serde_json::from_str(cm["data"]["conditions"].as_str()?).ok()?;
    let c = conditions.into_iter().find(|c| c["type"] == "Degraded")?;
    Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_changes_is_published_once_after_the_debounce() {
    let api = FakeApi::start().await;
    api.put_configmap(NS, policy_configmap("version: 1\ntags: {team: a}\n"));
    let run = start_one(&api, Store::default(), Duration::from_secs(3600)).await;
    until("the first publish", Duration::from_secs(20), || run.told.lines().len() == 1).await;
    assert_eq!(run.told.lines(), [(None, PublishResult::Written)]);
    assert!(run.health.is_ready(), "ready once a first publish was decided");

    // Five edits in quick succession (well inside the debounce of each other): one publish, of
    // the last document.
    for n in 0..5 {
        api.put_configmap(NS, policy_configmap(&format!("version: 1\ntags: {{team: b{n}}}\n")));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    until("the burst's publish", Duration::from_secs(20), || run.told.lines().len() == 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = run.store.calls();
    assert_eq!(calls.len(), 2, "one publish for the burst: {calls:?}");
    assert_eq!(calls[1].1, "version: 1\ntags: {team: b4}\n");

    // A write that leaves the document as it was publishes nothing.
    api.put_configmap(
        NS,
        json!({"metadata": {"name": "policy", "namespace": NS, "labels": {"x": "y"}},
                                 "data": {"tagwarden.yaml": "version: 1\ntags: {team: b4}\n"}}),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(run.store.calls().len(), 2, "an unchanged document is not published again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resync_publishes_again_and_rewrites_what_the_store_lost() {
    let api = FakeApi::start().await;
    api.put_configmap(NS, policy_configmap("version: 1\ntags: {team: a}\n"));
    let run = start_one(&api, Store::default(), Duration::from_secs(1)).await;
    until("the first publish", Duration::from_secs(20), || run.told.lines().len() == 1).await;
    // Each resync publishes the same document again: unchanged at the store, so nothing is said.
    until("two resyncs", Duration::from_secs(20), || run.store.calls().len() >= 3).await;
    assert_eq!(run.told.lines().len(), 1, "a resync that finds the store in line says nothing");
    // The object deleted at the store is written again by the next resync, and said.
    run.store.forget();
    until("the rewrite", Duration::from_secs(20), || run.told.lines().len() == 2).await;
    assert_eq!(run.told.lines()[1], (None, PublishResult::Written));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_publish_is_retried_with_back_off_and_shown_in_health_and_status() {
    let api = FakeApi::start().await;
    api.put_configmap(NS, policy_configmap("version: 1\ntags: {team: a}\n"));
    let store = Store::default();
    store.0.fail.store(2, Ordering::SeqCst);
    let started = Instant::now();
    let run = start_one(&api, store, Duration::from_secs(3600)).await;
    until("the status mirror's Degraded", Duration::from_secs(20), || {
        degraded(&api) == Some(("True".into(), "Conflict".into()))
    })
    .await;
    assert!(run.health.is_ready(), "a failed first publish is a decision: Degraded says why");
    // Retried without any change of the source: 1 s, then 2 s (each up to a quarter longer).
    until("the publish that works", Duration::from_secs(20), || run.told.lines().len() == 1).await;
    let took = started.elapsed();
    assert_eq!(run.store.calls().len(), 3, "two failures, then the publish");
    assert!(took >= Duration::from_secs(3), "the back-off waited 1 s then 2 s: {took:?}");
    assert_eq!(run.health.failures(Reason::Conflict), 2);
    let metrics = run.health.render();
    assert!(metrics.contains("tagwarden_publish_failures_total{reason=\"conflict\"} 2\n"), "{metrics}");
    until("Degraded cleared", Duration::from_secs(20), || degraded(&api).is_some_and(|(s, _)| s == "False")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_deleted_is_absent_and_publishes_again_when_it_returns() {
    let api = FakeApi::start().await;
    let run = start_one(&api, Store::default(), Duration::from_secs(3600)).await;
    // Never created: ready, nothing published, the conditions say there is no policy.
    until("ready without a source", Duration::from_secs(20), || run.health.is_ready()).await;
    until("the absence mirrored", Duration::from_secs(20), || api.get("configmaps", NS, "tagwarden-status").is_some())
        .await;
    assert!(run.store.calls().is_empty());
    api.put_configmap(NS, policy_configmap("version: 1\ntags: {team: a}\n"));
    until("the publish once it exists", Duration::from_secs(20), || run.told.lines().len() == 1).await;
}

fn hosted_cluster(name: &str, infra: &str, team: &str) -> Value {
    objects::hosted_cluster(name, "clusters", infra, json!([{"key": "team", "value": team}]))
}

fn node_pool(name: &str, cluster: &str, tier: &str) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {"clusterName": cluster, "replicas": 2, "management": {"upgradeType": "Replace"},
                 "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
                 "platform": {"type": "AWS", "aws": {"instanceType": "m5.large", "subnet": {"id": "subnet-0123456789abcdef0"},
                                                    "resourceTags": [{"key": "tier", "value": tier}]}}}
    })
}

/// A HyperShift set's publisher on the namespace `clusters`, running until the test ends.
async fn start_set(api: &FakeApi) -> Running {
    let (store, told, health) = (Store::default(), Arc::new(Told::default()), Arc::new(Health::default()));
    let publisher = SetPublisher {
        client: client_for(api).await,
        kind: SetKind::HyperShift,
        namespace: Some("clusters".into()),
        target: store.clone(),
        health: health.clone(),
        settings: settings(Duration::from_secs(3600)),
        status_namespace: NS.into(),
        sink: told.clone(),
    };
    let task = tokio::spawn(async move {
        if let Err(e) = publisher.run().await {
            panic!("the set publisher stopped: {e}");
        }
    });
    Running { store, told, health, task }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_set_publishes_each_member_and_then_only_the_one_that_changed() {
    let api = FakeApi::start().await;
    api.put_custom("hostedclusters", "clusters", hosted_cluster("hc-a", "hca-7xk2p", "a"));
    api.put_custom("hostedclusters", "clusters", hosted_cluster("hc-b", "hcb-7xk2p", "b"));
    api.put_custom("nodepools", "clusters", node_pool("hc-b-workers", "hc-b", "cpu"));
    let run = start_set(&api).await;
    until("each member's first publish", Duration::from_secs(20), || run.told.lines().len() == 2).await;
    let mut first = run.told.lines();
    first.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        first,
        [(Some("hca-7xk2p".into()), PublishResult::Written), (Some("hcb-7xk2p".into()), PublishResult::Written)]
    );
    assert!(run.health.is_ready());

    // A burst of NodePool edits: hc-b's policy alone, once, with the last edit.
    let lists = || {
        api.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/hostedclusters") && !r.is_watch())
            .count()
    };
    let before = lists();
    for tier in ["gpu-0", "gpu-1", "gpu-2"] {
        api.edit_custom("nodepools", "clusters", "hc-b-workers", |o| {
            o["spec"]["platform"]["aws"]["resourceTags"] = json!([{"key": "tier", "value": tier}]);
        })
        .expect("a NodePool edit");
    }
    until("hc-b's publish", Duration::from_secs(20), || run.told.lines().len() == 3).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let lines = run.told.lines();
    assert_eq!(lines.len(), 3, "one publish for the burst: {lines:?}");
    assert_eq!(lines[2].0.as_deref(), Some("hcb-7xk2p"));
    let last = run.store.calls().last().cloned().expect("a call");
    assert!(last.1.contains("gpu-2"), "the burst's last edit: {}", last.1);
    let read = lists() - before;
    assert!(read <= 2, "{read} listings of the set for one burst");
}

/// A HostedCluster whose status its operator keeps writing (faster than the debounce's quiet
/// moment) still has its NodePool's change published, at the latest the settle cap (5 s) after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_that_keeps_changing_is_still_published() {
    let api = FakeApi::start().await;
    api.put_custom("hostedclusters", "clusters", hosted_cluster("hc-a", "hca-7xk2p", "a"));
    api.put_custom("nodepools", "clusters", node_pool("hc-a-workers", "hc-a", "cpu"));
    let run = start_set(&api).await;
    until("the first publish", Duration::from_secs(20), || run.told.lines().len() == 1).await;

    api.edit_custom("nodepools", "clusters", "hc-a-workers", |o| {
        o["spec"]["platform"]["aws"]["resourceTags"] = json!([{"key": "tier", "value": "gpu"}]);
    })
    .expect("a NodePool edit");
    // The operator's writes every 100 ms (the debounce here is 300 ms), for 12 s.
    let started = Instant::now();
    let mut published_after = None;
    for n in 0..120 {
        // The fake writes status only with the object; an annotation's write is the same
        // MODIFIED event a status write is.
        api.edit_custom("hostedclusters", "clusters", "hc-a", |o| {
            o["metadata"]["annotations"] = json!({"example.com/heartbeat": n.to_string()});
        })
        .expect("an operator's write");
        if published_after.is_none() && run.told.lines().len() == 2 {
            published_after = Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = published_after.expect("the NodePool's change published while the status kept changing");
    assert!(after < Duration::from_secs(9), "published {after:?} after the change");
    let last = run.store.calls().last().cloned().expect("a call");
    assert!(last.1.contains("gpu"), "the NodePool's edit: {}", last.1);
}

/// OpenShift on Google Cloud: the publisher publishes the Infrastructure object's document, its
/// labels and its Resource Manager tags (each the `<parentID>/<key>` entry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openshift_cluster_on_gcp_publishes_its_labels_and_tags() {
    let api = FakeApi::start().await;
    let path = tagwarden_testkit::workspace::workspace_root().join("tests/fixtures/policies/infrastructure-gcp.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    api.put_infrastructure(serde_yaml_ng::from_str(&text).expect("the fixture parses"));
    let client = client_for(&api).await;
    let (store, told) = (Store::default(), Arc::new(Told::default()));
    let publisher = Publisher {
        mirror: StatusMirror::new(client.clone(), NS, "tagwarden-status", Some("publisher-0".into())),
        client,
        source: ClusterSource::Infrastructure,
        target: store.clone(),
        health: Arc::new(Health::default()),
        settings: settings(Duration::from_secs(3600)),
        cluster: None,
        sink: told.clone(),
    };
    let task = tokio::spawn(async move { publisher.run().await });
    until("the publish", Duration::from_secs(20), || !told.lines().is_empty()).await;
    task.abort();
    assert_eq!(told.lines(), [(Some("gcpcluster-5m8tq".to_string()), PublishResult::Written)]);
    let calls = store.calls();
    let policy = tagwarden_core::policy::load::load_one("infrastructure", &calls[0].1).expect("valid");
    assert_eq!(policy.cloud, Some(tagwarden_core::cloud::Cloud::Gcp));
    let labels: Vec<String> = policy.status.iter().map(|t| format!("{}={}", t.key, t.value)).collect();
    assert_eq!(labels, ["team=platform", "cost-center=cc_4242", "123456789012/environment=production"]);
}
