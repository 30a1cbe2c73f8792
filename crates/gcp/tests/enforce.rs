//! The Cloud Run function end to end, in-process, against the fake Google Cloud APIs (through the
//! official client crates) and the real gcp-storage-emulator holding the policy: an OpenShift
//! cluster's owned instances, disks, buckets, forwarding rules and DNS zone end with exactly its
//! labels, after one event each and after a sweep; another cluster's, shared and unlabelable
//! resources are left alone; a second sweep writes nothing; a stale fingerprint is read again,
//! never overwritten; an audited deployment writes nothing.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{json, Value};
use tagwarden_engine::server::Request;
use tagwarden_gcp::config::Config;
use tagwarden_gcp::function::Handler;
use tagwarden_testkit::gcp::emulator::gcs_emulator;
use tagwarden_testkit::gcp::FakeGcp;

const INFRA: &str = "ocp-gcp-7x2k";
const OWNED: &str = "kubernetes-io-cluster-ocp-gcp-7x2k";
const POLICY: &str = "version: 1\ncloud: gcp\ninfraID: ocp-gcp-7x2k\ntags: {cost-center: cc-42, team: platform}\n";

struct Env {
    fake: FakeGcp,
    handler: Handler,
    bucket: String,
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl Env {
    async fn new(mode: &str) -> Env {
        Env::with_policy(mode, POLICY).await
    }

    async fn with_policy(mode: &str, policy: &str) -> Env {
        let fake = FakeGcp::start();
        fake.add_project("p-1", 101, &["folders/7", "organizations/9"]);
        fake.add_project("p-2", 102, &["folders/7", "organizations/9"]);
        let gcs = gcs_emulator();
        let bucket = gcs.bucket().await;
        gcs.put_object(&bucket, &format!("clusters/{INFRA}/policy.yaml"), policy.as_bytes(), "application/yaml").await;
        let vars = [
            ("TAGWARDEN_POLICY", format!("gs://{bucket}/clusters/*/")),
            ("POLICY_TTL", "0".to_string()),
            ("TAGWARDEN_CLUSTERS", INFRA.to_string()),
            ("TAGWARDEN_SWEEP_SCOPES", "folders/7".to_string()),
            ("TAGWARDEN_SELF_PRINCIPAL", "tagwarden@p-1.iam.gserviceaccount.com".to_string()),
            ("TAGWARDEN_GCP_ENDPOINT", fake.endpoint.clone()),
            ("STORAGE_EMULATOR_HOST", gcs.endpoint.clone()),
            ("TAGWARDEN_MODE", mode.to_string()),
        ];
        let config =
            Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).expect("config");
        let handler = Handler::new(&config).await.expect("handler");
        Env { fake, handler, bucket }
    }

    /// The fleet: each owned type with drift (a wrong value, a missing key, a label of its own),
    /// and the resources that must be left alone.
    fn fleet(&self) -> Fleet {
        let f = &self.fake;
        let drift = [(OWNED, "owned"), ("team", "wrong"), ("keep-me", "yes")];
        Fleet {
            owned: vec![
                f.add_instance("p-1", "us-central1-a", "master-0", &drift),
                f.add_disk("p-1", "us-central1-a", "master-0-disk", &drift),
                f.add_forwarding_rule("p-1", "us-central1", "api-internal", &drift),
                f.add_global_forwarding_rule("p-2", "api", &[(OWNED, "owned")]),
                f.add_bucket("p-2", "ocp-gcp-7x2k-image-registry", "US", &drift),
                f.add_managed_zone("p-2", "ocp-gcp-7x2k-private-zone", "c.example.com.", &drift),
            ],
            others: vec![
                f.add_instance(
                    "p-1",
                    "us-central1-b",
                    "other-0",
                    &[("kubernetes-io-cluster-other-1", "owned"), ("team", "x")],
                ),
                f.add_disk("p-2", "us-central1-b", "shared-disk", &[(OWNED, "shared"), ("team", "x")]),
            ],
            network: f.add_network("p-1", "ocp-gcp-7x2k-network"),
        }
    }

    async fn post(&self, body: Value) -> (u16, Value) {
        let req = Request {
            method: "POST".into(),
            path: "/".into(),
            body: body.to_string().into_bytes(),
            ..Request::default()
        };
        let resp = self.handler.handle(req).await;
        (resp.status, serde_json::from_slice(&resp.body).unwrap_or(Value::Null))
    }

    async fn sweep(&self) -> (u16, Value) {
        let data = base64::engine::general_purpose::STANDARD.encode(br#"{"tagwarden":"sweep"}"#);
        self.post(json!({"message": {"data": data, "attributes": {"tagwarden": "sweep"}, "messageId": "s-1"}, "subscription": "projects/p-1/subscriptions/tw-events"}))
            .await
    }

    fn labels(&self, full: &str) -> BTreeMap<String, String> {
        self.fake.labels(full).unwrap_or_default().into_iter().collect()
    }
}

struct Fleet {
    owned: Vec<String>,
    others: Vec<String>,
    network: String,
}

/// What an owned resource must carry: what it had, with the policy's labels laid over.
fn corrected(had: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut want = had.clone();
    want.extend(labels(&[("cost-center", "cc-42"), ("team", "platform")]));
    want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_corrects_every_owned_type_and_a_second_writes_nothing() {
    let env = Env::new("enforce").await;
    let fleet = env.fleet();
    let before: Vec<_> = fleet.owned.iter().map(|r| env.labels(r)).collect();
    let others: Vec<_> = fleet.others.iter().map(|r| env.labels(r)).collect();

    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    for (r, had) in fleet.owned.iter().zip(&before) {
        assert_eq!(env.labels(r), corrected(had), "{r}");
    }
    for (r, had) in fleet.others.iter().zip(&others) {
        assert_eq!(&env.labels(r), had, "{r} is not the cluster's: untouched");
    }
    assert!(env.labels(&fleet.network).is_empty(), "the network takes no labels");
    let first = env.fake.counters();
    assert_eq!(first.writes, fleet.owned.len() as u64, "one write per drifted resource: {first:?}");
    // The status report beside the cluster's policy, written by the sweep (a multipart upload).
    let report = gcs_emulator().get_object(&env.bucket, &format!("clusters/{INFRA}/tagwarden-status.json")).await;
    let report: Value = serde_json::from_slice(&report.expect("the sweep wrote its status report")).expect("JSON");
    assert_eq!((report["cloud"].as_str(), report["audit"]["owned"].as_u64()), (Some("gcp"), Some(6)), "{report:#}");
    assert_eq!(report["audit"]["in_line"].as_u64(), Some(6), "in line after the sweep: {report:#}");

    env.fake.clear_log();
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    let second = env.fake.counters();
    assert_eq!(second.writes, 0, "the second sweep writes nothing: {second:?}");
    let searches = env.fake.calls().iter().filter(|c| c.path.contains(":searchAllResources")).count();
    assert_eq!(searches, 1, "one search page for {} owned resources", fleet.owned.len());
}

/// OpenShift's Resource Manager tags (an Infrastructure object's `resourceTags`, published as is):
/// bound to every owned type that takes bindings, a wrong direct value replaced, a value inherited
/// from the project left to the project, another cluster's bindings untouched, and a second sweep
/// that finds everything in line in the inventory's `effectiveTags` (no read, no write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_binds_the_clusters_tags_and_a_second_writes_nothing() {
    let infra = format!(
        "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {{name: cluster}}\nspec: {{platformSpec: {{type: GCP}}}}\n\
         status:\n  infrastructureName: {INFRA}\n  platformStatus:\n    type: GCP\n    gcp:\n      projectID: p-1\n      region: us-central1\n\
         \x20     resourceLabels: [{{key: team, value: platform}}]\n\
         \x20     resourceTags:\n      - {{parentID: '123456789012', key: environment, value: production}}\n\
         \x20     - {{parentID: platform-proj, key: cost-center, value: cc-42}}\n"
    );
    let env = Env::with_policy("enforce", &infra).await;
    let f = &env.fake;
    let production = f.add_tag_value("123456789012/environment/production");
    let staging = f.add_tag_value("123456789012/environment/staging");
    let cc = f.add_tag_value("platform-proj/cost-center/cc-42");
    let drift = [(OWNED, "owned"), ("team", "wrong")];
    let vm = f.add_instance("p-1", "us-central1-a", "master-0", &drift);
    let bucket = f.add_bucket("p-1", "ocp-gcp-7x2k-registry", "US", &drift);
    f.bind_tag(&bucket, &staging);
    // In p-2, whose resources inherit cost-center=cc-42 from the project.
    f.bind_project_tag("p-2", &cc);
    let disk = f.add_disk("p-2", "us-central1-a", "master-0-disk", &[(OWNED, "owned"), ("team", "platform")]);
    let zone = f.add_managed_zone("p-2", "ocp-gcp-7x2k-private-zone", "c.example.com.", &drift);
    let other = f.add_instance("p-1", "us-central1-b", "other-0", &[("kubernetes-io-cluster-other-1", "owned")]);
    f.bind_tag(&other, &staging);

    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(f.tag_bindings(&vm)), sorted(vec![production.clone(), cc.clone()]), "{summary}");
    assert_eq!(sorted(f.tag_bindings(&bucket)), sorted(vec![production.clone(), cc.clone()]), "staging replaced");
    assert_eq!(f.tag_bindings(&disk), vec![production.clone()], "cost-center is in effect from the project");
    assert!(f.tag_bindings(&zone).is_empty(), "Cloud DNS zones take no bindings");
    assert_eq!(f.tag_bindings(&other), vec![staging], "another cluster's: untouched");
    for r in [&vm, &bucket, &zone] {
        assert_eq!(env.labels(r).get("team").map(String::as_str), Some("platform"), "{r}");
    }
    // 3 label writes (vm, bucket, zone) + 2 + (1 unbind + 2) + 1 bindings.
    let counted = f.counters();
    assert_eq!(counted.writes, 9, "{counted:?}: {summary}");

    env.fake.clear_log();
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    let calls = env.fake.calls();
    assert_eq!((calls.len(), env.fake.counters().writes), (1, 0), "in line: one search, nothing else: {calls:?}");
}

/// A wrong value bound directly is replaced only once the policy's value is known to exist (a
/// value that does not is refused before anything is unbound), and bound back when the new value
/// is refused after the old was unbound; the next sweep replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_tag_value_is_unbound_only_for_a_value_that_exists_and_bound_back_on_failure() {
    let policy = POLICY.replace("team: platform}", "team: platform, 123456789012/environment: production}");
    let env = Env::with_policy("enforce", &policy).await;
    let f = &env.fake;
    let staging = f.add_tag_value("123456789012/environment/staging");
    let bucket = f.add_bucket("p-1", "ocp-gcp-7x2k-registry", "US", &[(OWNED, "owned"), ("team", "wrong")]);
    f.bind_tag(&bucket, &staging);

    // The policy's value does not exist (yet): refused before the wrong one is unbound.
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(f.tag_bindings(&bucket), vec![staging.clone()], "nothing unbound: {summary}");
    assert_eq!(env.labels(&bucket).get("team").map(String::as_str), Some("platform"), "the labels are written");
    let calls = f.calls();
    assert!(calls.iter().any(|c| c.path == "/v3/tagValues/namespaced" && c.status == 403), "{calls:?}");
    assert!(!calls.iter().any(|c| c.method == "DELETE"), "no unbind: {calls:?}");

    // It exists now, but its bind fails once after the old value was unbound: bound back.
    let production = f.add_tag_value("123456789012/environment/production");
    f.clear_log();
    f.fail_next("POST", "/v3/tagBindings", 503);
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 500, "a transient failure is handed back to Pub/Sub for redelivery: {summary}");
    assert!(summary["failures"][0]["error"].as_str().is_some_and(|e| e.contains("503")), "{summary}");
    assert_eq!(f.tag_bindings(&bucket), vec![staging.clone()], "the replaced value, bound back: {summary}");
    let deletes = f.calls().iter().filter(|c| c.method == "DELETE").count();
    assert_eq!(deletes, 1, "unbound once, then bound back");

    // The next sweep replaces it.
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(f.tag_bindings(&bucket), vec![production.clone()], "{summary}");

    // Both the new value and every try to bind the old one back refused: the loss is named.
    let other = f.add_bucket("p-1", "ocp-gcp-7x2k-logs", "US", &[(OWNED, "owned"), ("team", "platform")]);
    f.bind_tag(&other, &staging);
    for _ in 0..4 {
        f.fail_next("POST", "/v3/tagBindings", 503);
    }
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 500, "{summary}");
    let said = summary["failures"][0]["error"].as_str().unwrap_or_default().to_string();
    assert!(said.contains("123456789012/environment/staging, could not be bound back"), "{summary}");
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(f.tag_bindings(&other), vec![production], "the next sweep binds the policy's value: {summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_fingerprint_is_read_again_never_overwritten() {
    let env = Env::new("enforce").await;
    let vm = env.fake.add_instance("p-1", "us-central1-a", "worker-0", &[(OWNED, "owned")]);
    // Another writer adds a label between our read and our write: our setLabels meets 412.
    env.fake.race_next_write(&vm, &[(OWNED, "owned"), ("backup", "daily")]);
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(
        env.labels(&vm),
        labels(&[(OWNED, "owned"), ("backup", "daily"), ("cost-center", "cc-42"), ("team", "platform")]),
        "the other writer's label survives: the write was laid over a fresh read"
    );
    let stale = env.fake.calls().iter().filter(|c| c.path.ends_with("/setLabels") && c.status == 412).count();
    assert_eq!(stale, 1, "one refused write, then one under the fresh fingerprint");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audited_deployment_writes_nothing() {
    let policy = POLICY.replace("team: platform}", "team: platform, 123456789012/environment: production}");
    let env = Env::with_policy("audit", &policy).await;
    env.fake.add_tag_value("123456789012/environment/production");
    let fleet = env.fleet();
    let before: Vec<_> = fleet.owned.iter().map(|r| env.labels(r)).collect();
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(env.fake.counters().writes, 0, "audit mode: no write anywhere");
    for (r, had) in fleet.owned.iter().zip(&before) {
        assert_eq!(&env.labels(r), had, "{r}");
        assert!(env.fake.tag_bindings(r).is_empty(), "{r}: no tag bound");
    }
    let report = gcs_emulator().get_object(&env.bucket, &format!("clusters/{INFRA}/tagwarden-status.json")).await;
    let report: Value =
        serde_json::from_slice(&report.expect("the audited sweep wrote its status report")).expect("JSON");
    let audit = report["audit"].to_string();
    assert!(audit.contains("123456789012/environment"), "the tag is reported as would-be bound: {report:#}");
    assert!(summary.to_string().contains(&fleet.owned.len().to_string()), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_2_label_edit_reaches_every_owned_resource_in_one_policy_change_sweep() {
    let env = Env::new("enforce").await;
    let fleet = env.fleet();
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    // Day 2: the cluster's labels change (OpenShift never updates them itself); the publisher
    // writes the new version, and Cloud Storage notifies the topic (JSON_API_V1 attributes).
    let object = format!("clusters/{INFRA}/policy.yaml");
    let v2 = POLICY.replace("team: platform", "team: platform, env: prod");
    let gcs = gcs_emulator();
    gcs.put_object(&env.bucket, &object, v2.as_bytes(), "application/yaml").await;
    env.fake.clear_log();
    let notification = json!({"message": {"data": "", "attributes": {
        "eventType": "OBJECT_FINALIZE", "bucketId": env.bucket, "objectId": object, "payloadFormat": "JSON_API_V1",
        "notificationConfig": "projects/_/buckets/b/notificationConfigs/1", "objectGeneration": "2"}, "messageId": "n-1"}});
    let (status, summary) = env.post(notification).await;
    assert_eq!(status, 200, "{summary}");
    for r in &fleet.owned {
        assert_eq!(env.labels(r).get("env").map(String::as_str), Some("prod"), "{r}: {summary}");
    }
    assert_eq!(env.fake.counters().writes, fleet.owned.len() as u64, "one write per owned resource");
}

/// The fleet shape for the notes: a folder of 5 projects, 100 owned resources (instances and
/// disks) of which 60 drifted, and 20 of another cluster, swept from one deployment. The counts
/// are the cost: one search page, then per drifted resource one read (the inventory carries no
/// fingerprint, and lags) and one write; nothing for the 40 in line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_of_five_projects_is_swept_from_one_deployment_at_the_api_lower_bound() {
    let env = Env::new("enforce").await;
    let (searches, reads, writes) = folder_of_five(&env, None).await;
    assert_eq!((searches, reads, writes), (1, 60, 60));
}

/// The same fleet whose policy also names a Resource Manager tag, bound on the 40 labels in line
/// and missing on the 60 drifted: a drifted resource costs its read, its tags in effect, its label
/// write and its binding; one in line costs nothing, its tags coming with the search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_of_five_projects_with_a_tag_costs_one_search_and_the_drifted_resources_only() {
    let policy = POLICY.replace("team: platform}", "team: platform, 123456789012/environment: production}");
    let env = Env::with_policy("enforce", &policy).await;
    let production = env.fake.add_tag_value("123456789012/environment/production");
    let (searches, reads, writes) = folder_of_five(&env, Some(&production)).await;
    assert_eq!((searches, reads, writes), (1, 120, 120), "a read and its tags, a label write and a binding each");
}

/// Sweep the folder of five; the search pages, the reads (Compute GETs and tags in effect) and
/// the writes it made, then check a second sweep is one search and nothing else.
async fn folder_of_five(env: &Env, tag: Option<&str>) -> (usize, usize, u64) {
    for p in 3..=5 {
        env.fake.add_project(&format!("p-{p}"), 100 + p, &["folders/7", "organizations/9"]);
    }
    let in_line = [(OWNED, "owned"), ("cost-center", "cc-42"), ("team", "platform")];
    let drifted = [(OWNED, "owned"), ("team", "wrong")];
    for p in 1..=5 {
        let project = format!("p-{p}");
        for i in 0..20 {
            let labels: &[(&str, &str)] = if i < 12 { &drifted } else { &in_line };
            let full = match i % 2 {
                0 => env.fake.add_instance(&project, "us-central1-a", &format!("vm-{i}"), labels),
                _ => env.fake.add_disk(&project, "us-central1-a", &format!("disk-{i}"), labels),
            };
            if let Some(tag) = tag.filter(|_| i >= 12) {
                env.fake.bind_tag(&full, tag);
            }
        }
        for i in 0..4 {
            env.fake.add_instance(
                &project,
                "us-central1-b",
                &format!("other-{i}"),
                &[("kubernetes-io-cluster-other-1", "owned")],
            );
        }
    }
    env.fake.clear_log();
    let (status, summary) = env.sweep().await;
    assert_eq!(status, 200, "{summary}");
    let calls = env.fake.calls();
    let searches = calls.iter().filter(|c| c.path.contains(":searchAllResources")).count();
    let reads = calls
        .iter()
        .filter(|c| c.method == "GET" && (c.path.starts_with("/compute/") || c.path == "/v3/effectiveTags"))
        .count();
    let writes = env.fake.counters().writes;
    eprintln!(
        "folder of 5 projects, 100 owned (60 drifted), 20 another cluster's{}: {} calls = {searches} search + {reads} reads + {writes} writes",
        if tag.is_some() { ", a tag in the policy" } else { "" },
        calls.len()
    );
    env.fake.clear_log();
    let (status, _) = env.sweep().await;
    assert_eq!(status, 200);
    assert_eq!((env.fake.calls().len(), env.fake.counters().writes), (1, 0), "in line: one search, nothing else");
    (searches, reads, writes)
}
