//! The cluster side (`crates/cluster/src/`) against a fake Kubernetes API server that speaks the list/watch
//! protocol (`tagwarden_testkit::kube_api`; no real API server can run here) and serves the
//! Infrastructure object from openshift/api's real CRD (pruning, defaulting, validation, `/status`),
//! through kube's real client configured from a kubeconfig: reading the Infrastructure object and
//! a ConfigMap, the watch through a day-2 edit of `status.platformStatus.aws.resourceTags` (the
//! field OpenShift lets an admin edit; `spec.platformSpec.aws.resourceTags` is no field of the CRD
//! and is pruned), a connection cut mid-event, 410 Gone (as an ERROR event and as an HTTP answer),
//! a deletion; the status mirror; and the RBAC in deploy/kubernetes checked against every request
//! the code made.

#![cfg(feature = "kube")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use kube_api::{FakeApi, Seen};
use serde_json::{json, Value};
use tagwarden::cloud::Cloud;
use tagwarden::cluster::mirror::{Write, DEFAULT_NAME};
use tagwarden::cluster::{self, Change, ClusterError, ClusterSource, SourceDocument, StatusMirror};
use tagwarden::policy::cache::PolicyState;
use tagwarden::policy::load::load_one;
use tagwarden::status::{ResourceFailure, StatusReport};
use tagwarden_testkit::kube_api;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long a test waits for something the code must do "within seconds" before failing (a hang
/// guard, not a performance assertion: the latencies are printed).
const PATIENCE: Duration = Duration::from_secs(20);
/// How long a test listens to show that nothing (more) is published.
const QUIET: Duration = Duration::from_millis(1500);
const NS: &str = "tagwarden";

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fixture Infrastructure as the API server holds it, with fields tagwarden does not read.
fn infrastructure(name: &str) -> Value {
    let mut v: Value = serde_yaml_ng::from_str(&fixture(name)).expect("fixture parses");
    v["metadata"]["managedFields"] = json!([{"manager": "cluster-bootstrap", "operation": "Update"}]);
    v["metadata"]["generation"] = json!(3);
    v
}

fn tag_list(tags: &[(&str, &str)]) -> Value {
    json!(tags.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>())
}

fn with_status_tags(mut infra: Value, tags: &[(&str, &str)]) -> Value {
    infra["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(tags);
    infra
}

/// A day-2 edit of the AWS user tags the way OpenShift allows it: `status.platformStatus.aws
/// .resourceTags` through the `/status` subresource, validated against the CRD like the HTTP
/// request. The new resourceVersion.
fn edit_status_tags(api: &FakeApi, tags: &[(&str, &str)]) -> u64 {
    api.edit_status(|o| o["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(tags))
        .unwrap_or_else(|s| panic!("the API server refused the edit: {s}"))
}

/// The fixture's status tags (its spec tags are pruned: no such field in the CRD).
const FIXTURE_STATUS_TAGS: [&str; 3] = ["key_infra1=value_status", "team=platform", "env=prod"];

/// A file in this test process's temp dir, named after the fake server's port.
fn temp_file(api: &FakeApi, name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tagwarden-kube-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("{name}-{}", api.url.rsplit(':').next().unwrap_or("0")));
    std::fs::write(&path, text).expect("write temp file");
    path
}

async fn client_for(api: &FakeApi) -> cluster::Client {
    let ca = api.ca_pem.as_ref().map(|pem| temp_file(api, "ca.pem", pem));
    let path = temp_file(api, "kubeconfig", &api.kubeconfig(NS, ca.as_deref()));
    cluster::client(Some(&path)).await.expect("client from kubeconfig")
}

/// `key=value` of each layer, as the policy loader reads the document.
fn tags_of(doc: &SourceDocument) -> (Vec<String>, Vec<String>) {
    let p = load_one(&doc.name, &doc.text).unwrap_or_else(|e| panic!("{e}\n{}", doc.text));
    let f = |l: &[tagwarden::policy::Tag]| l.iter().map(|t| format!("{}={}", t.key, t.value)).collect();
    (f(&p.status), f(&p.spec))
}

struct Watch {
    rx: mpsc::UnboundedReceiver<Result<Change, ClusterError>>,
    task: JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watch {
    /// The watch runs on its own task, as the publisher's does, so the client reads the stream
    /// while the test changes the cluster.
    fn start(client: cluster::Client, source: ClusterSource) -> Watch {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut changes = std::pin::pin!(cluster::watch(client, source));
            while let Some(c) = changes.next().await {
                if tx.send(c).is_err() {
                    return;
                }
            }
        });
        Watch { rx, task }
    }

    async fn next(&mut self) -> Result<Change, ClusterError> {
        match tokio::time::timeout(PATIENCE, self.rx.recv()).await {
            Ok(Some(c)) => c,
            Ok(None) => panic!("the watch ended"),
            Err(_) => panic!("no change within {PATIENCE:?}"),
        }
    }

    async fn document(&mut self) -> SourceDocument {
        match self.next().await {
            Ok(Change::Document(d)) => d,
            other => panic!("expected a document, got {other:?}"),
        }
    }

    async fn assert_quiet(&mut self) {
        if let Ok(Some(c)) = tokio::time::timeout(QUIET, self.rx.recv()).await {
            panic!("nothing more was expected, got {c:?}");
        }
    }
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn watches(api: &FakeApi) -> Vec<Seen> {
    api.requests().into_iter().filter(|r| r.is_watch()).collect()
}

fn lists(api: &FakeApi, resource: &str) -> usize {
    api.requests().iter().filter(|r| r.method == "GET" && !r.is_watch() && r.path.ends_with(resource)).count()
}

#[tokio::test]
async fn reads_the_infrastructure_object_through_a_kubeconfig() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    for (fixture_name, cloud) in [("infrastructure-aws.yaml", Cloud::Aws), ("infrastructure-azure.json", Cloud::Azure)]
    {
        if api.infrastructure().is_some() {
            api.delete_infrastructure();
        }
        let rv = api.put_infrastructure(infrastructure(fixture_name));
        let doc = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect("read");
        assert_eq!(doc.name, "infrastructures.config.openshift.io/cluster");
        assert_eq!(doc.resource_version, rv.to_string());
        // The same policy as the file `oc get infrastructure cluster -o yaml` gives, less the spec
        // tags the AWS file carries: `spec.platformSpec.aws.resourceTags` is no field of the CRD,
        // so the API server prunes it and no document read from a cluster has spec tags.
        let from_cluster = load_one(&doc.name, &doc.text).expect("valid");
        let from_file = load_one(fixture_name, &fixture(fixture_name)).expect("valid");
        assert_eq!(from_cluster.cloud, Some(cloud));
        let f = |l: &[tagwarden::policy::Tag]| l.iter().map(|t| format!("{}={}", t.key, t.value)).collect::<Vec<_>>();
        assert_eq!(
            (from_cluster.infra_id.clone(), tags_of(&doc)),
            (from_file.infra_id.clone(), (f(&from_file.status), vec![]))
        );
        for absent in ["managedFields", "resourceVersion", "apiServerURL", "uid"] {
            assert!(!doc.text.contains(absent), "{absent} in the published document:\n{}", doc.text);
        }
    }
    let gets: Vec<Seen> = api.requests().into_iter().filter(|r| r.method == "GET").collect();
    assert!(gets.iter().all(|r| r.path == "/apis/config.openshift.io/v1/infrastructures/cluster"), "{gets:?}");

    // A kubeconfig whose credentials the server refuses: the error says what to fix.
    let path = temp_file(&api, "kubeconfig-expired", &api.kubeconfig(NS, None).replace(kube_api::TOKEN, "expired"));
    let denied = cluster::client(Some(&path)).await.expect("client");
    let err = cluster::read_once(&denied, &ClusterSource::Infrastructure).await.expect_err("refused");
    // 401 is about who asks, not what they may do: the fix is the credentials, not a Role.
    assert!(
        matches!(err, ClusterError::Unauthorized { .. }) && err.to_string().contains("token or certificate"),
        "{err}"
    );
}

/// OpenShift on Google Cloud: the Infrastructure object as the installer leaves it (the fixture's
/// header names the shape's sources), served from openshift/api's CRD, whose `GCPPlatformStatus`
/// holds the labels (at most 32, immutable by CEL) and the Resource Manager tags (at most 50).
#[tokio::test]
async fn an_openshift_cluster_on_gcp_publishes_its_resource_labels() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_infrastructure(infrastructure("infrastructure-gcp.yaml"));
    let doc = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect("read");
    assert_eq!(doc.text, GCP_DOCUMENT, "the published document");
    let policy = load_one(&doc.name, &doc.text).expect("valid");
    assert_eq!((policy.cloud, policy.infra_id.as_deref()), (Some(Cloud::Gcp), Some("gcpcluster-5m8tq")));
    let wanted = ["team=platform", "cost-center=cc_4242", "123456789012/environment=production"];
    assert_eq!(tags_of(&doc), (wanted.map(String::from).to_vec(), vec![]));
    // What the store's publish decides: the labels and the tag, added.
    match tagwarden::publish::decide(Cloud::Gcp, &doc.name, &doc.text, &[], None) {
        tagwarden::publish::Verdict::Write { changes, infra_id } => {
            assert_eq!(infra_id, "gcpcluster-5m8tq");
            assert_eq!(
                changes.added.keys().map(String::as_str).collect::<Vec<_>>(),
                ["123456789012/environment", "cost-center", "team"]
            );
        }
        other => panic!("{other:?}"),
    }

    // The CRD: the labels cannot change after installation, nor can there be 33.
    let refused = api
        .edit_status(|o| o["status"]["platformStatus"]["gcp"]["resourceLabels"] = tag_list(&[("team", "other")]))
        .expect_err("immutable");
    assert!(refused["message"].as_str().unwrap_or_default().contains("resourceLabels are immutable"), "{refused}");
    let labels: Vec<(String, String)> = (0..33).map(|i| (format!("l{i}"), "v".to_string())).collect();
    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let refused = api
        .edit_status(|o| o["status"]["platformStatus"]["gcp"]["resourceLabels"] = tag_list(&labels))
        .expect_err("33");
    assert!(refused["message"].as_str().unwrap_or_default().contains("must have at most 32 items"), "{refused}");

    // A label the API server takes but tagwarden must not write (`goog-` is Google's): refused at
    // publish, naming the key and the fix.
    api.delete_infrastructure();
    let mut bad = infrastructure("infrastructure-gcp.yaml");
    bad["status"]["platformStatus"]["gcp"]["resourceLabels"] = tag_list(&[("goog-owner", "me"), ("team", "platform")]);
    api.put_infrastructure(bad);
    let doc = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect("read");
    match tagwarden::publish::decide(Cloud::Gcp, &doc.name, &doc.text, &[], None) {
        tagwarden::publish::Verdict::Refuse(why) => {
            assert!(why.iter().any(|w| w.contains("goog-owner") && w.contains("choose another key")), "{why:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// The document an OpenShift cluster on Google Cloud publishes: what the loader reads, no more.
const GCP_DOCUMENT: &str = "\
apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata:
  name: cluster
spec:
  platformSpec:
    type: GCP
status:
  infrastructureName: gcpcluster-5m8tq
  platformStatus:
    type: GCP
    gcp:
      resourceLabels:
      - key: team
        value: platform
      - key: cost-center
        value: cc_4242
      resourceTags:
      - key: environment
        parentID: '123456789012'
        value: production
";

#[tokio::test]
async fn reads_and_watches_over_tls_trusting_only_the_cluster_ca() {
    let api = FakeApi::start_tls().await;
    let client = client_for(&api).await;
    api.put_infrastructure(infrastructure("infrastructure-aws.yaml"));
    let doc = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect("read over TLS");
    assert_eq!(tags_of(&doc), (FIXTURE_STATUS_TAGS.map(String::from).to_vec(), vec![]));
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    w.document().await;
    until("the watch is open", || api.open_watch_count() > 0).await;
    edit_status_tags(&api, &[("tls", "yes")]);
    assert_eq!(tags_of(&w.document().await).0, ["tls=yes"]);

    // Without the cluster's CA the server is not trusted, and nothing is read.
    let untrusted = temp_file(&api, "kubeconfig-no-ca", &api.kubeconfig(NS, None));
    let client = cluster::client(Some(&untrusted)).await.expect("client");
    let err = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect_err("untrusted");
    assert!(matches!(err, ClusterError::Api { .. }) && err.to_string().contains("certificate"), "{err}");
}

#[tokio::test]
async fn a_cluster_without_the_object_or_its_type_is_told_to_use_a_configmap() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    let err = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect_err("no object");
    assert!(matches!(err, ClusterError::NotFound { .. }) && err.to_string().contains("--configmap NS/NAME"), "{err}");

    api.without_infrastructure_type();
    let err = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect_err("no type");
    assert!(err.to_string().contains("--configmap NS/NAME"), "{err}");
    // The watch cannot fix that by retrying: it ends with the error.
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    let err = w.next().await.expect_err("the watch ends");
    assert!(err.to_string().contains("the resource type of infrastructures.config.openshift.io/cluster"), "{err}");
    assert!(tokio::time::timeout(PATIENCE, w.rx.recv()).await.expect("ends").is_none());
}

#[tokio::test]
async fn the_watch_publishes_a_modified_object_within_seconds() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_infrastructure(infrastructure("infrastructure-aws.yaml"));
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    let first = w.document().await;
    assert_eq!(tags_of(&first).0, FIXTURE_STATUS_TAGS);
    until("the watch is open", || api.open_watch_count() > 0).await;
    let seen = watches(&api);
    let q = &seen[0].query;
    assert_eq!(
        (q.get("fieldSelector").map(String::as_str), q.get("allowWatchBookmarks").map(String::as_str)),
        (Some("metadata.name=cluster"), Some("true"))
    );
    assert_eq!(q.get("resourceVersion"), Some(&first.resource_version), "watches from the list's version");

    // A change to a field tagwarden does not read is a new revision (MODIFIED) but no new
    // document …
    let moved = api
        .edit_status(|o| o["status"]["apiServerURL"] = json!("https://api.moved.example.com:6443"))
        .expect("the status edit is accepted");
    assert!(moved > first.resource_version.parse().expect("a number"), "the edit is a new revision");
    // … a day-2 edit of the status tags is.
    let start = Instant::now();
    let rv = edit_status_tags(&api, &[("cost-center", "5555"), ("owner", "ops")]);
    let doc = w.document().await;
    println!("MODIFIED → new document in {:?}", start.elapsed());
    assert_eq!(doc.resource_version, rv.to_string());
    assert_eq!(tags_of(&doc), (vec!["cost-center=5555".to_string(), "owner=ops".to_string()], vec![]));
    w.assert_quiet().await;
}

/// `spec.platformSpec.aws.resourceTags` was never merged into openshift/api (`AWSPlatformSpec` has
/// only `serviceEndpoints`): an edit of it is pruned by the API server, so it is no change at all
/// (no new revision, no watch event) and nothing the publisher could ever see.
#[tokio::test]
async fn a_day_2_edit_of_the_spec_tags_is_pruned_and_never_published() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_infrastructure(infrastructure("infrastructure-aws.yaml"));
    let stored = api.infrastructure().expect("seeded");
    assert_eq!(stored["spec"]["platformSpec"]["aws"], json!({}), "the fixture's spec tags are pruned on create");
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    let first = w.document().await;
    assert_eq!(tags_of(&first), (FIXTURE_STATUS_TAGS.map(String::from).to_vec(), vec![]));
    until("the watch is open", || api.open_watch_count() > 0).await;
    let events = api.events("infrastructures");

    // `oc edit infrastructure cluster` adding spec tags, over HTTP as an admin: accepted with a
    // warning, and the field dropped.
    let mut edited = stored.clone();
    edited["spec"]["platformSpec"]["aws"]["resourceTags"] = tag_list(&[("cost-center", "9999")]);
    let path = "/apis/config.openshift.io/v1/infrastructures/cluster";
    let reply = api.request(kube_api::ADMIN_TOKEN, "PUT", path, "application/json", Some(&edited)).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    assert_eq!(reply.warnings, ["unknown field \"spec.platformSpec.aws.resourceTags\""]);
    assert_eq!(reply.body, stored, "the same object: same resourceVersion, no spec tags");
    // kubectl and oc ask for strict field validation by default: then it is refused outright.
    let strict = format!("{path}?fieldValidation=Strict");
    let reply = api.request(kube_api::ADMIN_TOKEN, "PUT", &strict, "application/json", Some(&edited)).await;
    assert_eq!((reply.code, reply.body["reason"].as_str()), (400, Some("BadRequest")), "{}", reply.body);
    assert!(
        reply.body["message"].as_str().is_some_and(|m| m.ends_with("strict decoding error: unknown field \"spec.platformSpec.aws.resourceTags\"")),
        "{}",
        reply.body
    );

    assert_eq!(api.events("infrastructures"), events, "no new revision, no watch event");
    w.assert_quiet().await;
    assert_eq!(api.infrastructure(), Some(stored));
}

#[tokio::test]
async fn a_watch_cut_mid_event_publishes_nothing_half_read_and_resumes_from_the_last_version() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_infrastructure(infrastructure("infrastructure-aws.yaml"));
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    w.document().await;
    until("the watch is open", || api.open_watch_count() > 0).await;

    // Other objects move the revision on; a bookmark tells the client so.
    api.unrelated_write();
    let bookmark = api.bookmark();
    // The next event is sent half, inside a chunk that promised all of it, then the socket closes.
    api.cut_next_event();
    let rv = edit_status_tags(&api, &[("cost-center", "7777")]);
    let doc = w.document().await;
    assert_eq!(doc.resource_version, rv.to_string());
    assert_eq!(tags_of(&doc).0, ["cost-center=7777"], "the whole object, read again after the cut");
    w.assert_quiet().await;

    let seen = watches(&api);
    assert!(seen.len() >= 2, "the watch was resumed: {seen:?}");
    assert_eq!(
        seen[1].query.get("resourceVersion"),
        Some(&bookmark.to_string()),
        "resumed from the bookmark's resourceVersion, not from scratch"
    );
    assert_eq!(lists(&api, "infrastructures"), 1, "a resumable cut is no reason to list again");
}

async fn expired_version_lists_again(gone_as_http: bool) {
    let api = FakeApi::start().await;
    api.gone_as_http(gone_as_http);
    let client = client_for(&api).await;
    api.put_infrastructure(infrastructure("infrastructure-aws.yaml"));
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    w.document().await;
    until("the watch is open", || api.open_watch_count() > 0).await;

    // Two edits the client never sees, then the history is compacted past its version and the
    // connection dropped: watching from there is 410 Gone.
    api.hold_events(true);
    edit_status_tags(&api, &[("stage", "b")]);
    let rv = edit_status_tags(&api, &[("stage", "c")]);
    api.compact();
    api.hold_events(false);
    api.close_watches();

    let doc = w.document().await;
    assert_eq!((doc.resource_version.clone(), tags_of(&doc).0), (rv.to_string(), vec!["stage=c".to_string()]));
    w.assert_quiet().await;
    assert_eq!(lists(&api, "infrastructures"), 2, "listed again after 410 Gone");
    let last_watch = watches(&api).pop().expect("watching again");
    assert_eq!(last_watch.query.get("resourceVersion"), Some(&rv.to_string()), "from the new list's version");
}

#[tokio::test]
async fn an_expired_resource_version_sent_as_an_error_event_lists_again() {
    expired_version_lists_again(false).await;
}

#[tokio::test]
async fn an_expired_resource_version_answered_http_410_lists_again() {
    expired_version_lists_again(true).await;
}

#[tokio::test]
async fn a_deleted_object_publishes_nothing_and_the_watch_goes_on() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    let infra = infrastructure("infrastructure-aws.yaml");
    api.put_infrastructure(infra.clone());
    let mut w = Watch::start(client, ClusterSource::Infrastructure);
    w.document().await;
    until("the watch is open", || api.open_watch_count() > 0).await;

    api.delete_infrastructure();
    match w.next().await {
        Ok(Change::Absent { reason }) => {
            assert!(reason.contains("does not exist") && reason.contains("stays in force"), "{reason}")
        }
        other => panic!("expected the deletion to be reported, got {other:?}"),
    }
    w.assert_quiet().await;

    let rv = api.put_infrastructure(with_status_tags(infra, &[("recreated", "yes")]));
    let doc = w.document().await;
    assert_eq!((doc.resource_version.clone(), tags_of(&doc).0), (rv.to_string(), vec!["recreated=yes".to_string()]));
}

#[tokio::test]
async fn a_configmap_publishes_its_tagwarden_yaml_as_is() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    let source = ClusterSource::configmap("tagwarden/tagwarden-policy").expect("NS/NAME");
    let err = cluster::read_once(&client, &source).await.expect_err("not there yet");
    assert!(err.to_string().contains("configmap tagwarden/tagwarden-policy not found"), "{err}");

    let text = fixture("tagwarden.yaml");
    let cm = |data: Value| json!({"metadata": {"name": "tagwarden-policy"}, "data": data});
    api.put_configmap(NS, cm(json!({"tagwarden.yaml": text, "README": "policy for tagwarden"})));
    let doc = cluster::read_once(&client, &source).await.expect("read");
    assert_eq!(doc.text, text, "the bytes the ConfigMap holds");
    assert_eq!(doc.name, "configmap tagwarden/tagwarden-policy tagwarden.yaml");
    assert!(load_one(&doc.name, &doc.text).is_ok());

    let mut w = Watch::start(client.clone(), source.clone());
    assert_eq!(w.document().await.text, text);
    until("the watch is open", || api.open_watch_count() > 0).await;
    let edited = text.replace("team: platform", "team: payments");
    api.put_configmap(NS, cm(json!({"tagwarden.yaml": edited})));
    assert_eq!(w.document().await.text, edited);

    api.put_configmap(NS, cm(json!({"other.yaml": "x: 1"})));
    match w.next().await {
        Ok(Change::Absent { reason }) => {
            assert!(reason.contains("has no key \"tagwarden.yaml\" (keys: other.yaml)"), "{reason}")
        }
        other => panic!("expected the missing key to be reported, got {other:?}"),
    }
    let err = cluster::read_once(&client, &source).await.expect_err("no key");
    assert!(matches!(err, ClusterError::MissingKey { .. }), "{err}");
    w.assert_quiet().await;
}

fn report(state_version: Option<&str>, errors: &[&str], failures: usize) -> StatusReport {
    let failures = (0..failures)
        .map(|i| {
            ResourceFailure::new(
                &format!("arn:aws:ec2:eu-west-1:111122223333:instance/i-{i:017}"),
                "ec2:instance",
                "UnauthorizedOperation",
            )
        })
        .collect();
    StatusReport::new(
        Cloud::Aws,
        &"s3://policy/cluster/infrastructure.yaml",
        state_version.map(str::to_owned),
        errors.iter().map(|e| e.to_string()).collect(),
        failures,
    )
}

#[tokio::test]
async fn the_status_mirror_creates_then_updates_its_configmap_and_emits_an_event_per_state_change() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    let mirror = StatusMirror::new(client, NS, DEFAULT_NAME, Some("tagwarden-7c9f-abcde".into()));

    let first = report(Some("v1"), &[], 0);
    let out = mirror.mirror(&first).await.expect("mirror");
    assert_eq!((out.configmap, out.event.as_deref()), (Write::Created, Some("PolicyInForce")));
    let cm = api.get("configmaps", NS, DEFAULT_NAME).expect("created");
    assert_eq!(
        (cm["data"]["state"].as_str(), cm["data"]["version"].as_str()),
        (Some(PolicyState::Ok.as_str()), Some("v1"))
    );
    let inner: Value = serde_json::from_str(cm["data"]["report.json"].as_str().expect("report")).expect("json");
    assert_eq!(inner["policy"]["location"], "s3://policy/cluster/infrastructure.yaml");

    let events = api.list("events", NS);
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(
        (e["type"].as_str(), e["reason"].as_str(), e["regarding"]["kind"].as_str(), e["regarding"]["name"].as_str()),
        (Some("Normal"), Some("PolicyInForce"), Some("ConfigMap"), Some(DEFAULT_NAME))
    );
    assert_eq!(e["regarding"]["uid"], cm["metadata"]["uid"]);
    assert_eq!(
        (e["reportingController"].as_str(), e["reportingInstance"].as_str()),
        (Some("tagwarden"), Some("tagwarden-7c9f-abcde"))
    );

    // The same report again: no write at all.
    assert_eq!(mirror.mirror(&first).await.expect("mirror").configmap, Write::Unchanged);
    // A newer sweep in the same state: the ConfigMap follows, no Event.
    let mut later = first.clone();
    later.generated_at += 3600;
    let out = mirror.mirror(&later).await.expect("mirror");
    assert_eq!((out.configmap, out.event), (Write::Updated, None));
    // More failures of a failing state are no new state either; the first one is.
    let out = mirror.mirror(&report(Some("v1"), &[], 2)).await.expect("mirror");
    assert_eq!(out.event.as_deref(), Some("TagWriteFailures"));
    let out = mirror.mirror(&report(Some("v1"), &[], 5)).await.expect("mirror");
    assert_eq!(out.event, None);
    let out = mirror
        .mirror(&report(Some("v1"), &["tag \"Name\" (status): the key \"Name\" is reserved"], 0))
        .await
        .expect("mirror");
    assert_eq!((out.configmap, out.event.as_deref()), (Write::Updated, Some("PolicyRejected")));

    let reasons: Vec<String> = api
        .list("events", NS)
        .iter()
        .map(|e| format!("{} {}", e["type"].as_str().unwrap_or(""), e["reason"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    for r in ["Normal PolicyInForce", "Warning TagWriteFailures", "Warning PolicyRejected"] {
        assert!(reasons.contains(&r.to_string()), "{r} not in {reasons:?}");
    }
    let cm = api.get("configmaps", NS, DEFAULT_NAME).expect("there");
    assert_eq!(cm["data"]["state"], "rejected-keeping-last-good");
}

#[tokio::test]
async fn the_status_mirror_fills_the_configmap_the_manifests_create() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_configmap(NS, json!({"metadata": {"name": DEFAULT_NAME}}));
    let mirror = StatusMirror::new(client, NS, DEFAULT_NAME, None);
    let out = mirror.mirror(&report(None, &["the policy object does not exist"], 0)).await.expect("mirror");
    assert_eq!((out.configmap, out.event.as_deref()), (Write::Updated, Some("PolicyUnavailable")));
    assert!(!api.requests().iter().any(|r| r.method == "POST" && r.path.ends_with("/configmaps")), "no create needed");
    let e = &api.list("events", NS)[0];
    assert_eq!(e["reportingInstance"], "tagwarden", "the controller's name when no instance is given");
}

#[tokio::test]
async fn the_status_mirror_reads_again_after_a_concurrent_write() {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_configmap(NS, json!({"metadata": {"name": DEFAULT_NAME}}));
    api.conflict_next_replace();
    let mirror = StatusMirror::new(client, NS, DEFAULT_NAME, None);
    let out = mirror.mirror(&report(Some("v1"), &[], 0)).await.expect("mirror");
    assert_eq!((out.configmap, out.event.as_deref()), (Write::Updated, Some("PolicyInForce")));
    let puts = api.requests().iter().filter(|r| r.method == "PUT").count();
    assert_eq!(puts, 2, "the stale write is refused (409) and made again on a fresh read");
    assert_eq!(api.get("configmaps", NS, DEFAULT_NAME).expect("there")["data"]["version"], "v1");
}

// ---- RBAC: the manifests grant exactly what the code asks for ----

/// One authorisation check, as the API server's RBAC authoriser sees a request
/// (https://kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Check {
    verb: &'static str,
    group: String,
    resource: String,
    namespace: String,
    /// The object's name; for list/watch, the `metadata.name` field selector (RBAC docs: list and
    /// watch restricted by resourceNames must select that name).
    name: String,
}

fn check_of(r: &Seen) -> Check {
    let parts: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest.to_vec()),
        ["apis", g, _v, rest @ ..] => (g.to_string(), rest.to_vec()),
        _ => panic!("unexpected path {}", r.path),
    };
    let (namespace, rest) = match rest.as_slice() {
        ["namespaces", ns, rest @ ..] => (ns.to_string(), rest.to_vec()),
        _ => (String::new(), rest),
    };
    let (resource, name) = (rest[0].to_string(), rest.get(1).map(|s| s.to_string()));
    let verb = match (r.method.as_str(), &name) {
        ("GET", Some(_)) => "get",
        ("GET", None) if r.is_watch() => "watch",
        ("GET", None) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        (m, _) => panic!("unexpected method {m}"),
    };
    let selected = r.query.get("fieldSelector").and_then(|s| s.strip_prefix("metadata.name=")).map(str::to_owned);
    Check { verb, group, resource, namespace, name: name.or(selected).unwrap_or_default() }
}

/// The rules bound to the tagwarden ServiceAccount in a manifest: (namespace or "" for a
/// ClusterRole, rule).
fn granted(manifest: &str) -> Vec<(String, Value)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes").join(manifest);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML document"))
        .collect();
    let mut rules = Vec::new();
    for binding in docs.iter().filter(|d| matches!(d["kind"].as_str(), Some("RoleBinding" | "ClusterRoleBinding"))) {
        let to_us = binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == "tagwarden" && s["namespace"] == NS);
        assert!(to_us, "{manifest}: a binding not to the tagwarden ServiceAccount: {binding}");
        let role = docs
            .iter()
            .find(|d| d["kind"] == binding["roleRef"]["kind"] && d["metadata"]["name"] == binding["roleRef"]["name"])
            .unwrap_or_else(|| panic!("{manifest}: roleRef {} not in the manifest", binding["roleRef"]));
        let scope = if binding["kind"] == "RoleBinding" {
            binding["metadata"]["namespace"].as_str().unwrap_or_default().to_string()
        } else {
            String::new()
        };
        for rule in role["rules"].as_array().into_iter().flatten() {
            rules.push((scope.clone(), rule.clone()));
        }
    }
    rules
}

fn allows(rule: &Value, c: &Check) -> bool {
    let has = |field: &str, want: &str| rule[field].as_array().is_some_and(|a| a.iter().any(|v| v == want));
    let names = rule["resourceNames"].as_array();
    has("verbs", c.verb)
        && has("apiGroups", &c.group)
        && has("resources", &c.resource)
        && match names {
            // RBAC cannot name the object of a create.
            Some(n) => c.verb != "create" && n.iter().any(|v| v == c.name.as_str()),
            None => true,
        }
}

/// Every request is allowed by some rule, and every (rule, verb) is used by some request.
fn assert_least_privilege(manifest: &str, requests: &[Seen]) {
    let rules = granted(manifest);
    let checks: std::collections::BTreeSet<Check> = requests.iter().map(check_of).collect();
    for c in &checks {
        let ok = rules.iter().any(|(ns, rule)| (ns.is_empty() || *ns == c.namespace) && allows(rule, c));
        assert!(ok, "{manifest} does not allow {c:?}");
    }
    for (ns, rule) in &rules {
        for verb in rule["verbs"].as_array().into_iter().flatten() {
            let used = checks
                .iter()
                .any(|c| Some(c.verb) == verb.as_str() && (ns.is_empty() || *ns == c.namespace) && allows(rule, c));
            assert!(used, "{manifest} grants {verb} in {rule} but the code never needs it");
        }
    }
}

/// Run everything the Deployment does — read, watch (through a resume and a re-list), mirror —
/// and return the requests.
async fn exercise(source: ClusterSource) -> Vec<Seen> {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    let infra = infrastructure("infrastructure-aws.yaml");
    match &source {
        ClusterSource::Infrastructure => {
            api.put_infrastructure(infra.clone());
        }
        ClusterSource::ConfigMap { .. } => {
            api.put_configmap(NS, json!({"metadata": {"name": "tagwarden-policy"}, "data": {"tagwarden.yaml": fixture("tagwarden.yaml")}}));
        }
    }
    api.put_configmap(NS, json!({"metadata": {"name": DEFAULT_NAME}}));
    cluster::read_once(&client, &source).await.expect("read");
    let mut w = Watch::start(client.clone(), source);
    w.document().await;
    until("the watch is open", || api.open_watch_count() > 0).await;
    api.close_watches();
    until("the watch is open again", || watches(&api).len() >= 2 && api.open_watch_count() > 0).await;
    let mirror = StatusMirror::new(client, NS, DEFAULT_NAME, None);
    mirror.mirror(&report(Some("v1"), &[], 0)).await.expect("mirror");
    api.requests().into_iter().filter(|r| !r.path.contains("/namespaces/elsewhere/")).collect()
}

#[tokio::test]
async fn the_manifests_rbac_allows_exactly_what_the_code_does() {
    let openshift = exercise(ClusterSource::Infrastructure).await;
    assert_least_privilege("openshift.yaml", &openshift);
    let configmap = exercise(ClusterSource::configmap("tagwarden/tagwarden-policy").expect("NS/NAME")).await;
    assert_least_privilege("configmap-source.yaml", &configmap);
}

/// Everything the set publisher does on a management cluster of `kind` — read the set, watch both
/// resources, tell a member without a policy with an Event on it — against `objects` (plural,
/// namespace, object), and return the requests.
async fn exercise_set(kind: cluster::cluster_set::SetKind, objects: Vec<(&str, &str, Value)>) -> Vec<Seen> {
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    for (plural, ns, object) in objects {
        api.put_custom(plural, ns, object);
    }
    let members = cluster::cluster_set::read_set(&client, kind, None).await.expect("the set");
    let refused = members.iter().find(|m| m.document.is_err()).expect("a member without a policy");
    cluster::warn_member(&client, None, &refused.object, "NoPolicy", "why".into()).await.expect("the Event");
    // Each member's status report, mirrored into the publisher's namespace: created, then updated.
    let mirror = cluster::StatusMirror::new(client.clone(), NS, "tagwarden-status-x", None);
    mirror.mirror(&report(Some("v1"), &[], 0)).await.expect("created");
    mirror.mirror(&report(Some("v2"), &[], 1)).await.expect("updated");
    let mut changes = Box::pin(cluster::cluster_set::changes(client, kind, None));
    tokio::time::timeout(PATIENCE, changes.next()).await.expect("the watch answers").expect("a change");
    let drain = tokio::spawn(async move { while changes.next().await.is_some() {} });
    let resources = 1 + kind.resources().1.len();
    until("every watch is open", || api.open_watch_count() >= resources).await;
    drain.abort();
    api.requests()
}

/// The components that turn the publisher into a management cluster's set publisher
/// grant exactly what it does: list and watch of those objects, Events in their namespace.
#[tokio::test]
async fn the_set_components_rbac_allows_exactly_what_the_set_publisher_does() {
    use cluster::cluster_set::SetKind;
    let hosted = |name: &str, infra: &str| {
        let role = |r: &str| format!("arn:aws:iam::111122223333:role/{r}");
        let o = json!({"metadata": {"name": name, "namespace": "clusters"}, "spec": {
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
            "pullSecret": {"name": "ps"}, "infraID": infra,
            "platform": {"type": "AWS", "aws": {"region": "us-east-1", "rolesRef": {
                "controlPlaneOperatorARN": role("a"), "imageRegistryARN": role("b"), "ingressARN": role("c"),
                "kubeCloudControllerARN": role("d"), "networkARN": role("e"), "nodePoolManagementARN": role("f"),
                "storageARN": role("g")}, "resourceTags": [{"key": "team", "value": "a"}]}},
            "services": [{"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}},
                         {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}},
                         {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
                         {"service": "Ignition", "servicePublishingStrategy": {"type": "Route"}}]}});
        let mut o = o;
        if infra.is_empty() {
            // Not set yet (HyperShift sets it when it creates the infrastructure).
            o["spec"].as_object_mut().map(|s| s.remove("infraID"));
        }
        o
    };
    let pool = json!({"metadata": {"name": "hc-a-workers", "namespace": "clusters"}, "spec": {
        "clusterName": "hc-a", "management": {"upgradeType": "Replace"},
        "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
        "platform": {"type": "AWS", "aws": {"instanceType": "m5.large", "subnet": {"id": "subnet-0123456789abcdef0"}}}}});
    let hypershift = exercise_set(
        SetKind::HyperShift,
        vec![
            ("hostedclusters", "clusters", hosted("hc-a", "hca-7xk2p")),
            ("hostedclusters", "clusters", hosted("hc-empty", "")),
            ("nodepools", "clusters", pool),
        ],
    )
    .await;
    assert_least_privilege("components/hypershift/rbac.yaml", &hypershift);

    let capa = |name: &str, owned: bool| {
        let mut o = json!({"metadata": {"name": name, "namespace": "fleet"}, "spec": {"region": "us-east-1", "additionalTags": {"team": "w"}}});
        if owned {
            o["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "w-1", "uid": "u"}]);
        }
        o
    };
    let template = json!({"metadata": {"name": "w-1-md-0", "namespace": "fleet"},
                          "spec": {"template": {"spec": {"instanceType": "m5.large", "additionalTags": {"tier": "gpu"}}}}});
    let control_plane = json!({"metadata": {"name": "w-1-cp", "namespace": "fleet", "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "w-1", "uid": "u"}]},
                               "spec": {"version": "v1.33.0", "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": "w-1-md-0"}}}}});
    let machine_pool = json!({"metadata": {"name": "w-1-mp-0", "namespace": "fleet", "labels": {"cluster.x-k8s.io/cluster-name": "w-1"}},
                              "spec": {"awsLaunchTemplate": {"instanceType": "m5.large"}, "maxSize": 3, "minSize": 1, "additionalTags": {"spot": "true"}}});
    let cluster_api = exercise_set(
        SetKind::Capa,
        vec![
            ("awsclusters", "fleet", capa("w-1-x", true)),
            ("awsclusters", "fleet", capa("orphan", false)),
            ("awsmachinetemplates", "fleet", template),
            ("kubeadmcontrolplanes", "fleet", control_plane),
            ("awsmachinepools", "fleet", machine_pool),
        ],
    )
    .await;
    // The component grants azureclusters too (for capz): exercised the same way.
    let capz = exercise_set(
        SetKind::Capz,
        vec![(
            "azureclusters",
            "fleet",
            json!({"metadata": {"name": "orphan", "namespace": "fleet"}, "spec": {"location": "westeurope"}}),
        )],
    )
    .await;
    // And gcpclusters (for capg).
    let capg = exercise_set(
        SetKind::Capg,
        vec![
            ("gcpclusters", "fleet", gcp_cluster("g-1-x", Some("g-1"), json!({"team": "g"}))),
            ("gcpclusters", "fleet", gcp_cluster("orphan", None, json!({}))),
        ],
    )
    .await;
    assert_least_privilege("components/cluster-api/rbac.yaml", &[cluster_api, capz, capg].concat());
}

/// A CAPG `GCPCluster` (kubernetes-sigs/cluster-api-provider-gcp `api/v1beta1`), owned by Cluster
/// `owner` when given.
fn gcp_cluster(name: &str, owner: Option<&str>, labels: Value) -> Value {
    let mut o = json!({"metadata": {"name": name, "namespace": "fleet"},
                       "spec": {"project": "my-project", "region": "us-central1", "network": {}, "additionalLabels": labels}});
    if let Some(owner) = owner {
        o["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": owner, "uid": "u"}]);
    }
    o
}

/// A CAPG management cluster's set, from the GCPCluster CRD served as CAPG generates it: one
/// policy of labels per workload cluster, an orphan and an invalid label each said.
#[tokio::test]
async fn a_capg_cluster_set_is_one_policy_of_labels_per_workload_cluster() {
    use cluster::cluster_set::{read_set, SetKind};
    let api = FakeApi::start().await;
    let client = client_for(&api).await;
    api.put_custom("gcpclusters", "fleet", gcp_cluster("g-1-x", Some("g-1"), json!({"team": "g", "Cost": "CC7"})));
    api.put_custom("gcpclusters", "fleet", gcp_cluster("g-2-x", Some("g-2"), json!({"goog-owner": "me"})));
    api.put_custom("gcpclusters", "fleet", gcp_cluster("orphan", None, json!({"team": "o"})));
    // The CRD's schema: a label's value is a string.
    let refused = api
        .create_custom("gcpclusters", "fleet", gcp_cluster("g-3-x", Some("g-3"), json!({"team": 7})))
        .expect_err("not a string");
    assert!(refused["message"].as_str().unwrap_or_default().contains("spec.additionalLabels[team]"), "{refused}");

    let members = read_set(&client, SetKind::Capg, None).await.expect("the set");
    let by_name = |n: &str| members.iter().find(|m| m.object.name == n).unwrap_or_else(|| panic!("{n}"));
    let g1 = by_name("g-1-x");
    assert_eq!((g1.object.kind.as_str(), g1.cluster.as_deref()), ("GCPCluster", Some("g-1")));
    let doc = g1.document.as_ref().expect("a document");
    let policy = load_one(&doc.name, &doc.text).expect("valid");
    assert_eq!((policy.cloud, policy.kind), (Some(Cloud::Gcp), tagwarden::cloud::ClusterKind::ClusterApi));
    assert_eq!(tags_of(doc).0, ["cost=cc7", "team=g"], "lowercased as CAPG writes them:\n{}", doc.text);
    assert!(matches!(
        tagwarden::publish::decide(Cloud::Gcp, &doc.name, &doc.text, &[], None),
        tagwarden::publish::Verdict::Write { .. }
    ));

    let g2 = by_name("g-2-x").document.as_ref().expect("a document");
    match tagwarden::publish::decide(Cloud::Gcp, &g2.name, &g2.text, &[], None) {
        tagwarden::publish::Verdict::Refuse(why) => {
            assert!(why.iter().any(|w| w.contains("goog-owner") && w.contains("choose another key")), "{why:?}")
        }
        other => panic!("{other:?}"),
    }
    let orphan = by_name("orphan").document.as_ref().expect_err("no owning Cluster").to_string();
    assert!(orphan.contains("GCPCluster fleet/orphan has no owning Cluster"), "{orphan}");
}
