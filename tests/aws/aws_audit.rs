//! Audit mode on moto through the strict layer, whose own log counts the tag writes that reach the
//! emulator (not tagwarden's counters): a deployment in audit (`TAGWARDEN_MODE=audit`) writes no
//! tag on the event path (SQS batches), the scheduled sweep or the policy-change sweep, while each
//! cluster's status report lists every drifted owned resource before → after; then, the
//! deployment enforcing, one cluster switched to `enforce: true` gets exactly the report's set
//! and the other (`enforce: false`) nothing; and a key in `auditKeys` is only reported while the
//! policy's other keys are written. A second test measures an audit sweep against an enforce
//! sweep of a 2,000-resource account (`--nocapture`).

#![cfg(feature = "aws")]

use crate::aws_clusters::run_instances;
use crate::{fleet, support};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::enforce::Engine;
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

const A: &str = "audit-a-7xk2p";
const B: &str = "audit-b-7xk2p";
const INSTANCES: usize = 4;

fn policy(id: &str, enforce: bool, extra: &str) -> String {
    format!("version: 1\ninfraID: {id}\nenforce: {enforce}\ntags:\n  team: t-{id}\n  env: prod\n{extra}")
}

struct Account {
    clients: Clients,
    account: String,
    bucket: String,
    owned: BTreeMap<&'static str, Vec<ResourceRef>>,
}

impl Account {
    async fn new() -> Account {
        let (clients, account) = support::account().await;
        let bucket = format!("policy-{account}");
        clients.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
        let mut owned = BTreeMap::new();
        for id in [A, B] {
            let pairs = vec![
                (format!("kubernetes.io/cluster/{id}"), "owned".to_string()),
                ("team".to_string(), "someone-else".to_string()),
                ("keep".to_string(), "me".to_string()),
            ];
            let mut resources: Vec<ResourceRef> = run_instances(&clients, INSTANCES, &pairs)
                .await
                .iter()
                .map(|i| ResourceRef::ec2(i, "us-east-1", &account))
                .collect();
            let name = format!("data-{id}-{account}");
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

    async fn publish(&self, id: &str, text: &str) {
        let key = format!("clusters/{id}/10-cluster.yaml");
        let body = text.as_bytes().to_vec();
        self.clients.s3.put_object().bucket(&self.bucket).key(&key).body(body.into()).send().await.expect("policy");
    }

    async fn tags(&self, r: &ResourceRef) -> TagMap {
        Tagger::new(self.clients.clone()).read(r).await.expect("read")
    }

    async fn snapshot(&self) -> BTreeMap<String, TagMap> {
        let mut out = BTreeMap::new();
        for r in self.owned.values().flatten() {
            out.insert(r.to_string(), self.tags(r).await);
        }
        out
    }

    async fn report(&self, id: &str) -> Value {
        let key = format!("clusters/{id}/tagwarden-status.json");
        let got = self.clients.s3.get_object().bucket(&self.bucket).key(&key).send().await.expect(&key);
        serde_json::from_slice(&got.body.collect().await.expect("body").to_vec()).expect("json")
    }

    /// Tag writes that reached moto for this account since `before` (the strict layer's log).
    fn writes_since(&self, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        let now = support::moto().strict.tag_writes(&self.account);
        now.into_iter()
            .filter_map(|(op, n)| {
                let d = n - before.get(&op).copied().unwrap_or(0);
                (d > 0).then_some((op, d))
            })
            .collect()
    }

    fn engine(&self, mode: &str) -> Engine<Tagger> {
        let location = format!("s3://{}/clusters/*/", self.bucket);
        let clusters = format!("{A},{B}");
        let vars = [
            ("TAGWARDEN_POLICY", location.as_str()),
            ("TAGWARDEN_CLUSTERS", clusters.as_str()),
            ("TAGWARDEN_MODE", mode),
        ];
        let config = tagwarden::aws::config::Config::from_lookup(|k| {
            vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        })
        .expect("config");
        let mut engine = fleet::reconciler(&self.clients, &self.account, &location, Duration::ZERO);
        let store = std::sync::Arc::get_mut(&mut engine.store).expect("a new engine's store is its own");
        store.set_clusters(Some(vec![A.to_string(), B.to_string()]));
        engine.mode = config.mode;
        engine
    }

    /// An S3 notification that `id`'s policy was written.
    fn policy_changed(&self, id: &str) -> String {
        json!({"Records": [{
            "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
            "eventTime": "2026-11-24T12:00:00.000Z", "eventName": "ObjectCreated:Put",
            "s3": {"s3SchemaVersion": "1.0", "configurationId": "policy",
                   "bucket": {"name": self.bucket, "arn": format!("arn:aws:s3:::{}", self.bucket)},
                   "object": {"key": format!("clusters/{id}/10-cluster.yaml"), "size": 120}}
        }]})
        .to_string()
    }
}

/// The would-be writes a report lists: resource → (key → new value), each with its old value.
fn reported(report: &Value) -> BTreeMap<String, TagMap> {
    let writes = report["audit"]["writes"].as_array().cloned().unwrap_or_default();
    writes
        .iter()
        .map(|w| {
            let changes = w["changes"].as_array().expect("changes");
            let set = changes
                .iter()
                .map(|c| (c["key"].as_str().expect("key").to_string(), c["new"].as_str().expect("new").to_string()))
                .collect();
            (w["resource"].as_str().expect("resource").to_string(), set)
        })
        .collect()
}

/// What changed on each resource between two snapshots: resource → (key → new value).
fn delta(before: &BTreeMap<String, TagMap>, after: &BTreeMap<String, TagMap>) -> BTreeMap<String, TagMap> {
    let mut out = BTreeMap::new();
    for (r, was) in before {
        let now = &after[r];
        assert!(was.keys().all(|k| now.contains_key(k)), "{r}: a tag was removed: {was:?} -> {now:?}");
        let d: TagMap =
            now.iter().filter(|(k, v)| was.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone())).collect();
        if !d.is_empty() {
            out.insert(r.clone(), d);
        }
    }
    out
}

#[tokio::test]
async fn an_audit_writes_nothing_then_one_cluster_enforced_writes_exactly_its_report() {
    let a = Account::new().await;
    // Both clusters' policies enforce: the deployment's audit is the strictest and wins.
    a.publish(A, &policy(A, true, "")).await;
    a.publish(B, &policy(B, true, "")).await;
    let audit = a.engine("audit");
    let start = a.snapshot().await;
    let baseline = support::moto().strict.tag_writes(&a.account);

    // Events in SQS batches, through the Lambda's handler.
    let mut sqs = fleet::Sqs::new(3, 10);
    for (n, r) in a.owned.values().flatten().enumerate() {
        sqs.send(&format!("m{n}"), fleet::event_for(r, &a.account, &format!("e{n}")));
    }
    sqs.drain(&audit).await;
    assert!(sqs.dead.is_empty(), "{:?}", sqs.dead);
    assert_eq!(a.writes_since(&baseline), BTreeMap::new(), "the event path wrote in audit");
    // The scheduled sweep.
    let inv = function::handle(&audit, json!({"tagwarden": "sweep"}).to_string()).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    assert_eq!(a.writes_since(&baseline), BTreeMap::new(), "the scheduled sweep wrote in audit");
    // A policy change (A's env changes): its sweep.
    a.publish(A, &policy(A, true, "").replace("env: prod", "env: staging")).await;
    let inv = function::handle(&audit, a.policy_changed(A)).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    assert_eq!(a.writes_since(&baseline), BTreeMap::new(), "the policy-change sweep wrote in audit");
    assert_eq!(a.snapshot().await, start, "nothing changed on any resource");

    // Each cluster's report lists every drifted owned resource, before -> after.
    for id in [A, B] {
        let report = a.report(id).await;
        assert_eq!(report["audit"]["mode"], "audit", "{id}: {report:#}");
        let listed = reported(&report);
        let env = if id == A { "staging" } else { "prod" };
        for r in &a.owned[id] {
            let want: TagMap = [("env".to_string(), env.to_string()), ("team".to_string(), format!("t-{id}"))].into();
            assert_eq!(listed.get(&r.to_string()), Some(&want), "{id}: {r} in {listed:?}");
        }
        assert_eq!(listed.len(), a.owned[id].len(), "{id}: only its own");
        let w = &report["audit"]["writes"][0]["changes"];
        assert!(w.as_array().expect("changes").iter().any(|c| c["old"] == "someone-else"), "{w}");
        assert_eq!(report["audit"]["would_write"], a.owned[id].len(), "{report:#}");
        assert_eq!(report["audit"]["in_line"], 0);
    }
    let last_a = reported(&a.report(A).await);

    // The deployment enforces; A switches to enforce, B stays audited (enforce: false): no redeploy
    // of the policy reader, the next sweep picks both up.
    let staging = policy(A, true, "").replace("env: prod", "env: staging");
    a.publish(A, &staging).await;
    a.publish(B, &policy(B, false, "")).await;
    let enforce = a.engine("enforce");
    let before = a.snapshot().await;
    let baseline = support::moto().strict.tag_writes(&a.account);
    let inv = function::handle(&enforce, json!({"tagwarden": "sweep"}).to_string()).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    let wrote = a.writes_since(&baseline);
    let after = a.snapshot().await;
    let changed = delta(&before, &after);
    assert_eq!(changed, last_a, "the first enforce sweep writes exactly what the last audit reported for A");
    assert!(a.owned[B].iter().all(|r| !changed.contains_key(&r.to_string())), "B (enforce: false) untouched");
    assert!(wrote.get("ec2:CreateTags").is_some_and(|n| *n >= 1), "{wrote:?}");
    assert_eq!(wrote.get("s3:PutBucketTagging"), Some(&1), "A's bucket only: {wrote:?}");
    let report_b = a.report(B).await;
    assert_eq!(report_b["audit"]["mode"], "audit");
    assert_eq!(report_b["audit"]["would_write"], a.owned[B].len());
    let report_a = a.report(A).await;
    assert_eq!(
        (report_a["audit"]["mode"].as_str(), report_a["audit"]["would_write"].as_u64()),
        (Some("enforce"), Some(0))
    );
    assert_eq!(report_a["audit"]["written"], a.owned[A].len());

    // A key in auditKeys beside enforced ones: team is written, env only reported.
    let keyed =
        policy(A, true, "auditKeys: [env]\n").replace("t-audit-a-7xk2p", "t-new").replace("env: prod", "env: qa");
    a.publish(A, &keyed).await;
    let before = a.snapshot().await;
    let inv = function::handle(&enforce, a.policy_changed(A)).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    let changed = delta(&before, &a.snapshot().await);
    let report = a.report(A).await;
    assert_eq!(report["audit"]["mode"], "mixed");
    let listed = reported(&report);
    for r in &a.owned[A] {
        let r = r.to_string();
        assert_eq!(changed.get(&r), Some(&TagMap::from([("team".to_string(), "t-new".to_string())])), "{r}");
        assert_eq!(listed.get(&r), Some(&TagMap::from([("env".to_string(), "qa".to_string())])), "{r}");
    }
    assert_eq!(changed.len(), a.owned[A].len(), "nothing of B: {changed:?}");
}

/// What one sweep cost at the emulator's door: calls and bytes, by operation.
fn cost(calls: &[crate::support::strict::Call]) -> (usize, usize, usize, BTreeMap<String, usize>) {
    let mut by = BTreeMap::new();
    for c in calls {
        *by.entry(format!("{}:{}", c.service, c.operation)).or_default() += 1;
    }
    let bytes_out = calls.iter().map(|c| c.request_bytes).sum();
    let bytes_in = calls.iter().map(|c| c.response_bytes).sum();
    (calls.len(), bytes_out, bytes_in, by)
}

/// An audit sweep of a drifted 2,000-resource account (`TAGWARDEN_AUDIT_RESOURCES`) costs no more
/// list and read calls than an enforce sweep of the same account; its report is measured too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_audit_sweep_costs_no_more_reads_than_an_enforce_sweep() {
    let n = crate::load::env_usize("TAGWARDEN_AUDIT_RESOURCES", 2_000);
    let (clients, account) = support::account().await;
    let id = "measure-7xk2p";
    let pairs = vec![(format!("kubernetes.io/cluster/{id}"), "owned".to_string()), ("team".into(), "other".into())];
    let created = Instant::now();
    for chunk in 0..n.div_ceil(500) {
        run_instances(&clients, (n - chunk * 500).min(500), &pairs).await;
    }
    eprintln!("AUDIT: {n} instances created in {:.1}s", created.elapsed().as_secs_f64());
    let doc = format!("version: 1\ninfraID: {id}\ntags: {{team: platform, env: prod}}\n");
    let location = fleet::publish_policy(&clients, &account, &doc).await;
    let engine = |mode| {
        let mut e = fleet::reconciler(&clients, &account, &location, Duration::from_secs(300));
        e.mode = mode;
        e
    };
    let strict = &support::moto().strict;
    let reads = |by: &BTreeMap<String, usize>| -> usize {
        by.iter()
            .filter(|(op, _)| !fleet_tag_write(op) && !op.ends_with(":PutObject") && !op.ends_with(":AssumeRole"))
            .map(|(_, n)| n)
            .sum()
    };
    let mut rows = Vec::new();
    for (what, mode) in [("audit", tagwarden::enforce::Mode::Audit), ("enforce", tagwarden::enforce::Mode::Enforce)] {
        let e = engine(mode);
        let from = strict.calls(&account).len();
        let started = Instant::now();
        let out = e.sweep(true, None, None).await;
        let secs = started.elapsed().as_secs_f64();
        assert!(out.error.is_none() && out.failed() == 0, "{what}: {:?}", out.error);
        let calls = strict.calls(&account)[from..].to_vec();
        let (total, sent, received, by) = cost(&calls);
        let writes: usize = by.iter().filter(|(op, _)| fleet_tag_write(op)).map(|(_, n)| n).sum();
        let report = clients.s3.get_object().bucket(format!("policy-{account}")).key("tagwarden-status.json");
        let report = report.send().await.expect("report").content_length().unwrap_or_default();
        eprintln!(
            "AUDIT {what:<8} {n} resources: {total} calls ({} list/read, {writes} tag writes), {sent} bytes sent, {received} bytes received, report {report} bytes, {secs:.1}s; {by:?}",
            reads(&by)
        );
        rows.push((what, reads(&by), writes, by));
    }
    let (audit, enforce) = (&rows[0], &rows[1]);
    assert_eq!(audit.2, 0, "an audit sweep writes no tag: {:?}", audit.3);
    assert!(enforce.2 > 0, "the enforce sweep wrote: {:?}", enforce.3);
    assert!(audit.1 <= enforce.1, "audit list/read calls {} > enforce {}", audit.1, enforce.1);
}

fn fleet_tag_write(op: &str) -> bool {
    op.rsplit(':').next().is_some_and(|o| crate::support::strict::TAG_WRITES.contains(&o))
}
