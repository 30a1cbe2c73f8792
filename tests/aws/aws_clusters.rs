//! Many clusters in one account, on moto through the strict layer: ten clusters, each
//! with owned resources that drifted and its own policy under `s3://…/clusters/<infraID>/`, one of
//! them invalid, and a foreign cluster that published nothing. The same events go once through
//! one deployment that reads the cluster set, and once through ten single-cluster deployments as
//! before. Both must end the same (each cluster's resources carry its own tags, the invalid
//! cluster's and the foreign ones are untouched, writes at the lower bound of one per drifted
//! resource); the API calls of each are printed (`--nocapture`) and their ratio asserted only as
//! far as it is structural: the set reads each resource once, ten deployments read it once each.

#![cfg(feature = "aws")]

use crate::{fleet, support};
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use tagwarden::aws::function;
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::enforce::Engine;
use tagwarden::events;
use tagwarden::report::Status;
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

const CLUSTERS: usize = 10;
/// The cluster whose published policy is invalid.
const INVALID: usize = 9;
const FOREIGN: &str = "foreign-9zz9z";
const INSTANCES: usize = 3;

fn infra(i: usize) -> String {
    format!("cl{i:02}-7xk2p")
}

fn owner_key(id: &str) -> String {
    format!("kubernetes.io/cluster/{id}")
}

/// Cluster `i`'s policy: its own team, and a shared env.
fn policy(i: usize) -> String {
    let team = if i == INVALID { "aws:invalid" } else { "team" };
    format!("version: 1\ninfraID: {}\ntags:\n  {team}: t-{i}\n  env: prod\n", infra(i))
}

struct Account {
    clients: Clients,
    account: String,
    bucket: String,
    /// Resources by the cluster that owns them (`FOREIGN` included).
    owned: BTreeMap<String, Vec<ResourceRef>>,
}

pub(crate) fn ec2_tags(pairs: &[(String, String)]) -> Vec<tagwarden::aws::sdk::ec2::types::Tag> {
    pairs.iter().map(|(k, v)| tagwarden::aws::sdk::ec2::types::Tag::builder().key(k).value(v).build()).collect()
}

/// Clusters `0..n`'s policies, each under its infraID in the set `s3://bucket/clusters/*/`.
async fn publish_policies(clients: &Clients, bucket: &str, n: usize) {
    for i in 0..n {
        let key = format!("clusters/{}/10-cluster.yaml", infra(i));
        let body = policy(i).into_bytes();
        clients.s3.put_object().bucket(bucket).key(key).body(body.into()).send().await.expect("policy");
    }
}

/// `n` new instances with `pairs`: their ids.
pub(crate) async fn run_instances(clients: &Clients, n: usize, pairs: &[(String, String)]) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    let image = clients.ec2.describe_images().send().await.expect("images");
    let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
    let spec = tagwarden::aws::sdk::ec2::types::TagSpecification::builder()
        .resource_type(tagwarden::aws::sdk::ec2::types::ResourceType::Instance)
        .set_tags(Some(ec2_tags(pairs)))
        .build();
    let run = clients.ec2.run_instances().image_id(&image).min_count(n as i32).max_count(n as i32);
    // A fixture, not the code under test: moto runs many instances slowly on a loaded machine
    // (the product's 30 s operation timeout once ran out here), and a retry would run them twice.
    let patient = tagwarden::aws::sdk::ec2::config::Builder::default().timeout_config(
        tagwarden::aws::sdk::ec2::config::timeout::TimeoutConfig::builder()
            .operation_attempt_timeout(std::time::Duration::from_secs(300))
            .operation_timeout(std::time::Duration::from_secs(300))
            .build(),
    );
    let run = run.tag_specifications(spec).customize().config_override(patient).send().await.expect("instances");
    run.instances().iter().filter_map(|i| i.instance_id()).map(str::to_owned).collect()
}

/// An account with every cluster's resources, drifted (`team=someone-else`, `env` missing), each
/// with an unmanaged `keep=me`, and the policies published.
async fn account() -> Account {
    let (clients, account) = support::account().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
    publish_policies(&clients, &bucket, CLUSTERS).await;
    let mut owned = BTreeMap::new();
    for id in (0..CLUSTERS).map(infra).chain([FOREIGN.to_string()]) {
        let pairs = vec![
            (owner_key(&id), "owned".to_string()),
            ("team".to_string(), "someone-else".to_string()),
            ("keep".to_string(), "me".to_string()),
        ];
        let mut resources: Vec<ResourceRef> = run_instances(&clients, INSTANCES, &pairs)
            .await
            .iter()
            .map(|i| ResourceRef::ec2(i, "us-east-1", &account))
            .collect();
        let name = format!("data-{}-{account}", id.to_ascii_lowercase());
        clients.s3.create_bucket().bucket(&name).send().await.expect("bucket");
        let set = pairs
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::s3::types::Tag::builder().key(k).value(v).build().expect("tag"));
        let tagging = tagwarden::aws::sdk::s3::types::Tagging::builder()
            .set_tag_set(Some(set.collect()))
            .build()
            .expect("tagging");
        clients.s3.put_bucket_tagging().bucket(&name).tagging(tagging).send().await.expect("bucket tags");
        resources.push(ResourceRef::s3_bucket(&name, "us-east-1"));
        owned.insert(id, resources);
    }
    Account { clients, account, bucket, owned }
}

/// A real-shaped CloudTrail event naming `r` alone (the EC2 fixture also names a volume).
fn event_naming(r: &ResourceRef, account: &str, id: &str) -> events::Event {
    let mut v: serde_json::Value = serde_json::from_str(&fleet::event_for(r, account, id)).expect("json");
    if let Some(items) = v.pointer_mut("/detail/requestParameters/resourcesSet/items").and_then(|i| i.as_array_mut()) {
        items.truncate(1);
    }
    events::parse_one(v.to_string().as_bytes()).expect("a CloudTrail event")
}

impl Account {
    fn events(&self) -> Vec<events::Event> {
        let all = self.owned.values().flatten().enumerate();
        all.map(|(n, r)| event_naming(r, &self.account, &format!("e{n}"))).collect()
    }

    async fn tags(&self, r: &ResourceRef) -> TagMap {
        Tagger::new(self.clients.clone()).read(r).await.expect("read")
    }

    /// Every resource ends as its cluster's policy says; the invalid and the foreign cluster's
    /// are as they were. Nothing was removed.
    async fn check(&self) {
        for (id, resources) in &self.owned {
            let i = (0..CLUSTERS).find(|i| infra(*i) == *id);
            for r in resources {
                let tags = self.tags(r).await;
                assert_eq!(tags.get("keep").map(String::as_str), Some("me"), "{r}: unmanaged key kept");
                assert!(tags.contains_key(&owner_key(id)), "{r}: ownership tag kept");
                match i {
                    Some(i) if i != INVALID => {
                        assert_eq!(tags.get("team"), Some(&format!("t-{i}")), "{r} of {id}: {tags:?}");
                        assert_eq!(tags.get("env").map(String::as_str), Some("prod"), "{r} of {id}: {tags:?}");
                    }
                    _ => {
                        assert_eq!(tags.get("team").map(String::as_str), Some("someone-else"), "{r} of {id}");
                        assert!(!tags.contains_key("env"), "{r} of {id}: untouched");
                    }
                }
            }
        }
    }
}

/// A deployment reading `location`; a set's lists the clusters `0..CLUSTERS` (`TAGWARDEN_CLUSTERS`).
fn reconciler(a: &Account, location: &str) -> Engine<Tagger> {
    let mut engine = fleet::reconciler(&a.clients, &a.account, location, Duration::from_secs(300));
    if location.ends_with("*/") {
        let store = std::sync::Arc::get_mut(&mut engine.store).expect("a new engine's store is its own");
        store.set_clusters(Some((0..CLUSTERS).map(infra).collect()));
    }
    engine
}

/// API calls: those on resources (reads and writes), those on the policy store, the writes.
#[derive(Debug, Default, PartialEq, Eq)]
struct Calls {
    resource: u64,
    policy: u64,
    writes: u64,
}

fn calls(c: &Clients) -> Calls {
    let snapshot = c.calls.snapshot();
    let policy: u64 = snapshot
        .iter()
        .filter(|(op, _)| matches!(op.as_str(), "S3:GetObject" | "S3:ListObjectsV2" | "S3:PutObject"))
        .map(|(_, n)| n)
        .sum();
    Calls { resource: c.calls.total() - policy, policy, writes: c.calls.writes() }
}

#[tokio::test]
async fn one_deployment_enforces_every_cluster_in_the_account() {
    let drifted = (CLUSTERS - 1) * (INSTANCES + 1);
    let total_events = (CLUSTERS + 1) * (INSTANCES + 1);

    // One deployment, the cluster set.
    let multi = account().await;
    let events = multi.events();
    assert_eq!(events.len(), total_events);
    let set = reconciler(&multi, &format!("s3://{}/clusters/*/", multi.bucket));
    multi.clients.calls.reset();
    let mut ignored = 0;
    for event in &events {
        let out = set.handle_event(event, None).await;
        assert!(out.error.is_none(), "{:?}", out.error);
        ignored += out.metrics.events_ignored;
        for r in &out.records {
            assert_ne!(r.status, Status::Failed, "{r:?}");
        }
    }
    let one = calls(&multi.clients);
    multi.check().await;
    assert_eq!(one.writes, drifted as u64, "one write per drifted resource of the nine valid clusters");
    // S3's replace-style write reads the set again right before its put and once after it
    // (`aws::services::s3`): two more reads per bucket written.
    let s3_rereads = 2 * (CLUSTERS - 1) as u64;
    assert_eq!(
        one.resource - one.writes,
        total_events as u64 + s3_rereads,
        "one read per event, whatever the number of clusters"
    );
    assert_eq!(ignored, 2 * (INSTANCES + 1) as u64, "the invalid and the foreign cluster's events are ignored");

    // Ten deployments, one per cluster, as before.
    let single = account().await;
    let events = single.events();
    let deployments: Vec<Engine<Tagger>> = (0..CLUSTERS)
        .map(|i| reconciler(&single, &format!("s3://{}/clusters/{}/10-cluster.yaml", single.bucket, infra(i))))
        .collect();
    single.clients.calls.reset();
    for event in &events {
        for d in &deployments {
            let out = d.handle_event(event, None).await;
            assert!(out.error.is_none() || out.error.as_deref().is_some_and(|e| e.contains("no valid policy")));
        }
    }
    let ten = calls(&single.clients);
    single.check().await;
    assert_eq!(ten.writes, one.writes, "the same writes");
    // Nine valid deployments each read every event's resource; the invalid one fails closed.
    assert_eq!(ten.resource - ten.writes, ((CLUSTERS - 1) * total_events) as u64 + s3_rereads);

    println!(
        "CLUSTERS {CLUSTERS} clusters (one invalid) + 1 foreign, {total_events} events, {drifted} drifted resources"
    );
    for (what, c) in [("one set deployment", &one), ("ten deployments", &ten)] {
        println!(
            "CLUSTERS {what:<20} resource calls {:>4} ({:.2}/event: {} reads, {} writes), policy calls {:>3}, total {:>4}",
            c.resource,
            c.resource as f64 / total_events as f64,
            c.resource - c.writes,
            c.writes,
            c.policy,
            c.resource + c.policy
        );
    }
    println!(
        "CLUSTERS reads ratio {:.3} (set / ten deployments)",
        (one.resource - one.writes) as f64 / (ten.resource - ten.writes) as f64
    );

    // A sweep of the set: each cluster discovered on its own, the same delta batched across
    // clusters, one status report per cluster beside its policy.
    let env_dev = tagwarden::aws::sdk::ec2::types::Tag::builder().key("env").value("dev").build();
    let instances: Vec<String> = (0..CLUSTERS)
        .filter(|i| *i != INVALID)
        .flat_map(|i| &multi.owned[&infra(i)])
        .filter(|r| r.kind == "ec2:instance")
        .map(|r| r.id.clone())
        .collect();
    multi.clients.ec2.create_tags().set_resources(Some(instances)).tags(env_dev).send().await.expect("drift");
    multi.clients.calls.reset();
    let out = set.sweep(true, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let valid = CLUSTERS - 1;
    let applied = out.records.iter().filter(|r| r.status == Status::Applied).count();
    assert_eq!(applied, valid * INSTANCES, "every valid cluster's instances corrected");
    let snapshot = multi.clients.calls.snapshot();
    assert_eq!(snapshot.get("EC2:CreateTags"), Some(&1), "one CreateTags for the identical delta of nine clusters");
    assert_eq!(
        snapshot.get("Resource Groups Tagging API:GetResources"),
        Some(&(valid as u64)),
        "discovery per cluster"
    );
    println!("CLUSTERS sweep of the set: {} calls, {snapshot:?}", multi.clients.calls.total());
    multi.check().await;
    for i in 0..CLUSTERS {
        let key = format!("clusters/{}/tagwarden-status.json", infra(i));
        let report = multi.clients.s3.get_object().bucket(&multi.bucket).key(&key).send().await.expect(&key);
        let text = String::from_utf8(report.body.collect().await.expect("body").to_vec()).expect("utf-8");
        let report: serde_json::Value = serde_json::from_str(&text).expect("json");
        let state = report["policy"]["state"].as_str().unwrap_or_default();
        assert_eq!(state, if i == INVALID { "unavailable" } else { "ok" }, "{key}: {report:#}");
    }

    // One cluster's policy changes: only that cluster is swept.
    let changed = 3;
    let key = format!("clusters/{}/10-cluster.yaml", infra(changed));
    let text = policy(changed).replace("env: prod", "env: staging");
    multi
        .clients
        .s3
        .put_object()
        .bucket(&multi.bucket)
        .key(&key)
        .body(text.into_bytes().into())
        .send()
        .await
        .expect("edit");
    multi.clients.calls.reset();
    // The S3 event message structure (S3 user guide, "Event message structure", version 2.1).
    let notification = json!({"Records": [{
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventTime": "2026-11-24T12:00:00.000Z", "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": "AWS:AROAEXAMPLE:publisher"},
        "requestParameters": {"sourceIPAddress": "203.0.113.10"},
        "responseElements": {"x-amz-request-id": "C3D13FE58DE4C810", "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"},
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "policy",
               "bucket": {"name": multi.bucket, "ownerIdentity": {"principalId": "A3NL1KOZZKExample"}, "arn": format!("arn:aws:s3:::{}", multi.bucket)},
               "object": {"key": key, "size": 120, "eTag": "d41d8cd98f00b204e9800998ecf8427e", "sequencer": "0055AED6DCD90281E5"}}
    }]});
    let inv = function::handle(&set, notification.to_string()).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    let snapshot = multi.clients.calls.snapshot();
    assert_eq!(snapshot.get("Resource Groups Tagging API:GetResources"), Some(&1), "that cluster only: {snapshot:?}");
    assert_eq!(snapshot.get("EC2:CreateTags"), Some(&1));
    for r in &multi.owned[&infra(changed)] {
        assert_eq!(multi.tags(r).await.get("env").map(String::as_str), Some("staging"), "{r}");
    }
    let other = &multi.owned[&infra(changed + 1)][0];
    assert_eq!(multi.tags(other).await.get("env").map(String::as_str), Some("prod"), "{other}: another cluster's");
    println!("CLUSTERS policy change of one cluster: {} calls {snapshot:?}", multi.clients.calls.total());
}

/// A resource owned by two clusters is reported and never written; one owned by a cluster with no
/// policy is ignored and counted.
#[tokio::test]
async fn a_resource_owned_by_two_clusters_is_a_conflict_and_not_written() {
    let a = account().await;
    let set = reconciler(&a, &format!("s3://{}/clusters/*/", a.bucket));
    let r = &a.owned[&infra(0)][0];
    let second = tagwarden::aws::sdk::ec2::types::Tag::builder().key(owner_key(&infra(1))).value("owned").build();
    a.clients.ec2.create_tags().resources(&r.id).tags(second).send().await.expect("second owner");
    let before = a.tags(r).await;
    let event = event_naming(r, &a.account, "e");
    a.clients.calls.reset();
    let out = set.handle_event(&event, None).await;
    assert_eq!(out.records.len(), 1);
    let record = &out.records[0];
    assert_eq!(record.status, Status::Failed);
    assert!(!out.must_retry(), "a conflict is permanent: retrying cannot help");
    let error = record.error.as_deref().unwrap_or_default();
    assert!(
        error.contains(&infra(0)) && error.contains(&infra(1)) && error.contains("remove the ownership tag"),
        "{error}"
    );
    assert_eq!(a.clients.calls.writes(), 0);
    assert_eq!(a.tags(r).await, before, "not written");

    let foreign = &a.owned[FOREIGN][0];
    let event = event_naming(foreign, &a.account, "f");
    let out = set.handle_event(&event, None).await;
    assert_eq!(out.metrics.events_ignored, 1);
    assert_eq!(out.records[0].status, Status::NotOwned);
    assert!(out.records[0].reason.as_deref().is_some_and(|r| r.contains(FOREIGN)), "{:?}", out.records[0]);
}

/// The CLI on a cluster set: `sweep` prints a line per cluster and the totals, `status` each
/// cluster's report.
#[tokio::test]
async fn cli_sweeps_and_reports_each_cluster() {
    let (clients, account, env) = support::account_with_env().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    publish_policies(&clients, &bucket, 2).await;
    for i in 0..2 {
        run_instances(&clients, 1, &[(owner_key(&infra(i)), "owned".to_string())]).await;
    }
    let cli_status = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("tagwarden runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cli = cli_status;
    let set = format!("s3://{bucket}/clusters/*/");
    let (code, _, err) = cli(&["sweep", "--policy", &set, "--dry-run"]);
    assert_eq!(code, 3, "a set is swept only for the clusters named: {err}");
    assert!(err.contains("--cluster INFRA_ID"), "{err}");
    let (a, b, refused) = (infra(0), infra(1), infra(INVALID));
    // A named cluster that has published nothing yet is reported as such, never left out (exit 1).
    let named = ["sweep", "--policy", &set, "--dry-run", "--cluster", &a, "--cluster", &refused];
    let (code, out, err) = cli(&[&named[..], &["--json"]].concat());
    assert_eq!(code, 1, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    let listed = json["clusters"].as_array().cloned().unwrap_or_default();
    let unpublished = listed.iter().find(|c| c["infraID"] == refused.as_str()).map(|c| c["unpublished"].clone());
    assert!(unpublished.is_some_and(|u| u.as_str().is_some_and(|u| u.contains("--cluster"))), "{json}");
    let (_, out, _) = cli(&named);
    assert!(out.contains("unpublished no policy of this cluster in the set"), "{out}");
    let clusters = ["--cluster", a.as_str(), "--cluster", b.as_str()];
    let with_refused = ["--cluster", a.as_str(), "--cluster", b.as_str(), "--cluster", refused.as_str()];
    let cli3 = |args: &[&str]| cli(&[args, &with_refused[..]].concat());
    let cli = |args: &[&str]| cli(&[args, &clusters[..]].concat());
    let (code, out, err) = cli(&["sweep", "--policy", &set, "--dry-run"]);
    assert_eq!(code, 2, "drift in a dry run: {out}{err}");
    for i in 0..2 {
        assert!(out.contains(&format!("cluster       {} (version ", infra(i))), "{out}");
    }
    assert!(out.contains("drift         2 drifted, 2 would write"), "{out}");
    let (code, out, err) = cli(&["sweep", "--policy", &set, "--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["clusters"].as_array().map(Vec::len), Some(2), "{json}");
    assert_eq!((json["written"].as_u64(), json["clusters"][0]["written"].as_u64()), (Some(2), Some(1)), "{json}");
    let (code, out, err) = cli_status(&["status", "--policy", &set]);
    assert_eq!(code, 0, "both clusters in force, nothing failed: {out}{err}");
    assert!(
        out.contains(&format!("== cluster {}", infra(0))) && out.contains(&format!("== cluster {}", infra(1))),
        "{out}"
    );

    // A third cluster whose only document is refused: the summary lists it, with why (exit 1).
    let body = policy(INVALID);
    assert!(body.contains("aws:"), "the refusal must come from an aws: key: {body}");
    let key = format!("clusters/{refused}/10-cluster.yaml");
    clients.s3.put_object().bucket(&bucket).key(key).body(body.into_bytes().into()).send().await.expect("policy");
    let (code, out, err) = cli3(&["sweep", "--policy", &set, "--json"]);
    assert_eq!(code, 1, "a rejected policy is an invalid policy: {err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("json");
    let clusters = json["clusters"].as_array().cloned().unwrap_or_default();
    let third = clusters.iter().find(|c| c["infraID"] == refused.as_str()).expect("the rejected cluster is listed");
    assert!(
        third["rejected"].as_array().is_some_and(|e| e.iter().any(|e| e.as_str().is_some_and(|e| e.contains("aws:")))),
        "{third}"
    );
    assert_eq!(
        (third["policy_version"].as_str(), third["owned"].as_u64()),
        (None, Some(0)),
        "nothing of it is enforced: {third}"
    );
    let (_, out, _) = cli3(&["sweep", "--policy", &set]);
    assert!(
        out.contains(&format!("cluster       {refused} (version -)"))
            && out.contains("nothing of this cluster is enforced"),
        "{out}"
    );
}

/// An S3 notification of `keys`, written at `at_ms`, as the policy bucket sends it to the Lambda.
pub(crate) fn written(keys: &[&str], at_ms: u64) -> String {
    let at = tagwarden::events::format_rfc3339_ms(at_ms);
    let records: Vec<_> =
        keys.iter().map(|k| json!({"eventSource": "aws:s3", "eventTime": at, "s3": {"object": {"key": k}}})).collect();
    json!({"Records": records}).to_string()
}

pub(crate) fn now_ms() -> u64 {
    tagwarden::report::epoch_ms()
}

/// The whole-account listings (IAM, Route 53).
fn global_listings(c: &Clients) -> u64 {
    let s = c.calls.snapshot();
    let global = |op: &str| {
        op.starts_with("IAM:List") || op == "IAM:GetAccountAuthorizationDetails" || op.starts_with("Route 53:List")
    };
    s.iter().filter(|(op, _)| global(op)).map(|(_, n)| n).sum()
}

/// Policy-change storms: objects written under the set's prefix that are no policy
/// document (`x.txt`, the status report) cost no call; a burst of writes of one cluster's layer
/// sweeps that cluster once (every notification after the sweep started is already covered by
/// it), never the other nine. Before and after are printed (`--nocapture`).
#[tokio::test]
async fn policy_notifications_sweep_only_policy_documents_only_their_cluster_once() {
    let a = account().await;
    let rec = reconciler(&a, &format!("s3://{}/clusters/*/", a.bucket));
    let c = &a.clients;
    let layer = format!("clusters/{}/10-cluster.yaml", infra(0));
    let not_policies = [
        "x.txt".to_string(),
        "clusters/x.txt".to_string(),
        format!("clusters/{}/x.txt", infra(0)),
        format!("clusters/{}/tagwarden-status.json", infra(0)),
    ];
    c.calls.reset();
    for key in &not_policies {
        let inv = function::handle(&rec, written(&[key], now_ms())).await;
        assert!(inv.error.is_none(), "{key}: {:?}", inv.error);
    }
    let for_nothing = c.calls.total();

    // Five writes of cluster 0's layer, notified a moment later (each notification after the
    // first sweep started): one sweep of cluster 0.
    let at = now_ms() - 3_000;
    c.calls.reset();
    let mut swept = 0;
    for n in 0..5 {
        let inv = function::handle(&rec, written(&[&layer], at + n)).await;
        assert!(inv.error.is_none(), "{:?}", inv.error);
        swept += inv.response["sweep"].as_u64().unwrap_or_default();
    }
    let (burst, burst_global, burst_writes) = (c.calls.total(), global_listings(c), c.calls.writes());
    println!(
        "STORM: 4 non-policy notifications: {for_nothing} calls; 5 notifications of one cluster's layer: \
         {swept} resources swept, {burst} calls ({burst_global} IAM/Route 53 listings, {burst_writes} writes)"
    );
    assert_eq!(for_nothing, 0, "a notification of something that is no policy document costs nothing");
    assert_eq!(swept, (INSTANCES + 1) as u64, "cluster 0's resources, swept once: {swept}");
    assert_eq!(burst_writes, 2, "cluster 0 alone: its instances in one CreateTags, its bucket in one put");
    for (id, resources) in &a.owned {
        for r in resources {
            let tags = a.tags(r).await;
            let expected = if *id == infra(0) { "t-0" } else { "someone-else" };
            assert_eq!(tags.get("team").map(String::as_str), Some(expected), "{r} of {id}");
        }
    }
}

/// A change after a cluster's policy-change sweep started waits out the window (one sweep per
/// cluster per window), is then swept without listing IAM and Route 53 again (what they found
/// the cluster owning is re-read instead), and a drift on the cluster's IAM role is still fixed.
#[tokio::test]
async fn a_later_change_waits_for_the_window_and_reuses_the_account_listings() {
    let a = account().await;
    let mut rec = reconciler(&a, &format!("s3://{}/clusters/*/", a.bucket));
    rec.policy_window = Duration::from_secs(5);
    let c = &a.clients;
    let role = c
        .iam
        .create_role()
        .role_name("cl00-worker")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
        .tags(
            tagwarden::aws::sdk::iam::types::Tag::builder()
                .key(owner_key(&infra(0)))
                .value("owned")
                .build()
                .expect("tag"),
        )
        .send()
        .await
        .expect("role");
    let role = ResourceRef::from_arn(role.role().expect("role").arn()).expect("arn");
    let layer = format!("clusters/{}/10-cluster.yaml", infra(0));

    c.calls.reset();
    let started = std::time::Instant::now();
    let inv = function::handle(&rec, written(&[&layer], now_ms())).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    let (first, first_global) = (c.calls.total(), global_listings(c));
    assert_eq!(a.tags(&role).await.get("team").map(String::as_str), Some("t-0"));

    // The role drifts; the layer is written again, after the first sweep started.
    let drift = tagwarden::aws::sdk::iam::types::Tag::builder().key("team").value("drifted").build().expect("tag");
    c.iam.tag_role().role_name("cl00-worker").tags(drift).send().await.expect("drift");
    c.calls.reset();
    let second_at = std::time::Instant::now();
    let inv = function::handle(&rec, written(&[&layer], now_ms())).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    let (second, second_global) = (c.calls.total(), global_listings(c));
    println!(
        "STORM: first policy sweep of one cluster {first} calls ({first_global} IAM/Route 53 listings); a second \
         within the window took {:?}, {second} calls ({second_global} IAM/Route 53 listings)",
        second_at.elapsed()
    );
    assert!(started.elapsed() >= rec.policy_window, "waited out the window: {:?}", started.elapsed());
    assert!(first_global > 0 && second_global == 0, "{first_global} then {second_global}");
    assert_eq!(a.tags(&role).await.get("team").map(String::as_str), Some("t-0"), "the role re-read and fixed");
}

/// a set's trust boundaries on a cold deployment: a layer another publisher writes into
/// a cluster's folder naming no infraID (it would add its tags) or a third one (it would get the
/// cluster's whole policy rejected, so nothing of it enforced), and a folder of a cluster the
/// deployment does not list (it would be enforced). Each is refused alone and reported; the
/// clusters' own layers stay in force; the unlisted folder gets no status report.
#[tokio::test]
async fn a_foreign_layer_or_an_unlisted_folder_changes_no_cluster() {
    let a = account().await;
    let put = |key: String, body: String| {
        let s3 = a.clients.s3.clone();
        let bucket = a.bucket.clone();
        async move { s3.put_object().bucket(bucket).key(key).body(body.into_bytes().into()).send().await.expect("put") }
    };
    let (nameless, third) = (infra(1), infra(2));
    put(format!("clusters/{nameless}/20-extra.yaml"), "version: 1\ntags: {team: evil, env: evil}\n".into()).await;
    put(
        format!("clusters/{third}/20-extra.yaml"),
        format!("version: 1\ninfraID: {}\ntags: {{team: evil}}\n", infra(0)),
    )
    .await;
    put(
        format!("clusters/{FOREIGN}/10-cluster.yaml"),
        format!("version: 1\ninfraID: {FOREIGN}\ntags: {{team: evil}}\n"),
    )
    .await;
    let set = reconciler(&a, &format!("s3://{}/clusters/*/", a.bucket));
    let out = set.sweep(true, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    a.check().await;

    let errors = |id: &str| -> String {
        out.rejected.iter().filter(|r| r.cluster.as_deref() == Some(id)).flat_map(|r| r.errors.clone()).collect()
    };
    assert!(errors(&nameless).contains("\"20-extra.yaml\"") && errors(&nameless).contains("names no infraID"));
    assert!(errors(&third).contains(&format!("names infraID \"{}\", not {third}", infra(0))), "{}", errors(&third));
    assert!(errors(FOREIGN).contains("does not list") && errors(FOREIGN).contains("infra_ids"), "{}", errors(FOREIGN));
    for id in [&nameless, &third] {
        let r = out.rejected.iter().find(|r| r.cluster.as_deref() == Some(id.as_str())).expect("reported");
        assert!(r.in_force.is_some(), "{id}'s own layers are in force: {r:?}");
    }
    let status = |key: String| {
        let s3 = a.clients.s3.clone();
        let bucket = a.bucket.clone();
        async move { s3.get_object().bucket(bucket).key(key).send().await.ok() }
    };
    assert!(status(format!("clusters/{FOREIGN}/tagwarden-status.json")).await.is_none(), "no report for it");
    let report = status(format!("clusters/{nameless}/tagwarden-status.json")).await.expect("its report");
    let text = String::from_utf8(report.body.collect().await.expect("body").to_vec()).expect("utf-8");
    assert!(text.contains("rejected-keeping-last-good") && text.contains("names no infraID"), "{text}");

    // Reported once: the next re-check says nothing new of the unlisted folder.
    let again = set.sweep(true, None, None).await;
    assert!(again.rejected.iter().all(|r| r.cluster.as_deref() != Some(FOREIGN)), "{:?}", again.rejected);
}
