//! A whole AWS Organization from one hub, on moto through the strict layer: member
//! accounts × 2 regions, each account's clusters published under its own folder of the hub's
//! bucket, a spoke role in every account but one. The schedule's sweep goes out as one SQS
//! message per account and region; the shards are handed to the function as SQS batches, as
//! Lambda's event source mapping would. Every owned resource of every enforced account ends in
//! line; nothing foreign, shared, or of another account's cluster is written; the account without
//! the role is refused and named (a record, not a shard handed back), and the others are in line;
//! the organization summary says so, and
//! `tagwarden organization status` shows it. The figures (calls per owned resource, writes,
//! `AssumeRole` calls, shards) are printed (`--nocapture`); the size comes from
//! `TAGWARDEN_ORG_{ACCOUNTS,CLUSTERS,INSTANCES,DRIFT_PERCENT}` (`scripts/bench-organization`).
//!
//! moto's EventBridge does not deliver across accounts (AWS's documentation): the events a spoke's
//! rule would forward to the hub are handed to the function as the hub's queue would.

#![cfg(feature = "aws")]

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};
use tagwarden::aws::function::handle_organization_until;
use tagwarden::aws::organization::{pack, session_policy, OrgConfig, Organization, Settings, SESSION_POLICY_MAX};
use tagwarden::aws::{Clients, Tagger};
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

use crate::aws_clusters::{ec2_tags, run_instances};
use crate::load::env_usize;
use crate::{fleet, support};

const REGIONS: [&str; 2] = ["eu-west-1", "us-east-1"];
const ROLE: &str = "tagwarden-member";
/// The account the hub enforces as `<account>/*`: every cluster it publishes.
const EVERY: usize = 1;
/// Account 0 holds this many clusters at least: more than one session policy holds (about 9), so
/// its clusters are swept in two groups, each its own session and shard.
const MANY: usize = 12;

/// How many clusters account `a` has, `base` for the others.
fn clusters_of(a: usize, base: usize) -> usize {
    if a == 0 {
        base.max(MANY)
    } else {
        base
    }
}

fn infra(account: usize, cluster: usize) -> String {
    format!("a{account:02}c{cluster}-7xk2p")
}

fn owner_key(id: &str) -> String {
    format!("kubernetes.io/cluster/{id}")
}

fn policy(id: &str, account: usize) -> String {
    format!("version: 1\ninfraID: {id}\ntags:\n  team: t-{account}\n  env: prod\n")
}

/// One member account: its id, its clients per region, and its instances by what they should end as.
struct Member {
    id: String,
    clients: BTreeMap<&'static str, Clients>,
    /// (instance, region, the team it must end with: `None` for untouched, its owner's infraID).
    instances: Vec<(String, &'static str, Option<String>, String)>,
}

struct Org {
    hub: tagwarden::aws::sdk::config::SdkConfig,
    hub_env: Vec<(&'static str, String)>,
    bucket: String,
    queue: String,
    members: Vec<Member>,
    /// The account with no spoke role.
    refused: usize,
    /// Owned instances that must end in line, and how many of them drifted.
    owned: usize,
    drifted: usize,
    /// Account-regions with a drifted resource: the least writes a sweep can make (an account's
    /// clusters share one delta here, so their resources share one `CreateTags`).
    deltas: usize,
}

async fn organization(accounts: usize) -> Org {
    let clusters = env_usize("TAGWARDEN_ORG_CLUSTERS", 1);
    let instances = env_usize("TAGWARDEN_ORG_INSTANCES", 3);
    let drift_percent = env_usize("TAGWARDEN_ORG_DRIFT_PERCENT", 100);
    let moto = support::moto();
    let (_, hub_account, hub_env) = support::account_with_env().await;
    let hub = support::config_in(&hub_account, "us-east-1").await;
    let hub_clients = Clients::new(&hub);
    let bucket = format!("hub-{hub_account}");
    hub_clients.s3.create_bucket().bucket(&bucket).send().await.expect("hub bucket");
    let sqs = tagwarden::aws::sdk::sqs::Client::new(&hub);
    let queue = sqs.create_queue().queue_name(format!("shards-{hub_account}")).send().await.expect("queue");
    let queue = queue.queue_url().expect("queue url").to_string();
    let refused = accounts - 1;
    let (mut owned, mut drifted, mut deltas) = (0, 0, std::collections::BTreeSet::new());
    let mut members = Vec::new();
    for a in 0..accounts {
        let id = support::new_account();
        let mut member = Member { id: id.clone(), clients: BTreeMap::new(), instances: Vec::new() };
        for region in REGIONS {
            member.clients.insert(region, Clients::new(&support::config_in(&id, region).await));
        }
        // From here on, a role must exist to be assumed in this account (the test's own session,
        // above, is an administrator's).
        moto.strict.require_roles_in(&id);
        if a != refused {
            let iam = &member.clients["us-east-1"].iam;
            iam.create_role().role_name(ROLE).assume_role_policy_document("{}").send().await.expect("spoke role");
        }
        for c in 0..clusters_of(a, clusters) {
            let cluster = infra(a, c);
            let key = format!("accounts/{id}/{cluster}/policy.yaml");
            let body = policy(&cluster, a).into_bytes();
            hub_clients.s3.put_object().bucket(&bucket).key(key).body(body.into()).send().await.expect("policy");
            let enforced = a != refused;
            for region in REGIONS {
                let ec2 = &member.clients[region];
                let n_drifted = (instances * drift_percent).div_ceil(100).min(instances);
                let stale = [(owner_key(&cluster), "owned".into()), ("team".into(), "someone-else".into())];
                let in_line = [
                    (owner_key(&cluster), "owned".into()),
                    ("team".into(), format!("t-{a}")),
                    ("env".into(), "prod".into()),
                ];
                let want = enforced.then(|| format!("t-{a}"));
                for i in run_instances(ec2, n_drifted, &stale).await {
                    member.instances.push((i, region, want.clone(), cluster.clone()));
                }
                for i in run_instances(ec2, instances - n_drifted, &in_line).await {
                    member.instances.push((i, region, Some(format!("t-{a}")), cluster.clone()));
                }
                if enforced {
                    owned += instances;
                    drifted += n_drifted;
                    if n_drifted > 0 {
                        deltas.insert((a, region));
                    }
                }
            }
        }
        // Never written: a resource another account's cluster owns, one this account's cluster
        // only shares, and one of a cluster published in this folder that the hub does not list
        // (but for the account enforced as `<account>/*`, where it is listed by being published).
        let ec2 = &member.clients["eu-west-1"];
        let other = infra((a + 1) % accounts, 0);
        let unlisted = format!("unlisted{a}-1x2y3");
        let every = a == EVERY && a != refused;
        for (pairs, want) in [
            (vec![(owner_key(&other), "owned".to_string()), ("team".into(), "someone-else".into())], None),
            (vec![(owner_key(&infra(a, 0)), "shared".to_string()), ("team".into(), "someone-else".into())], None),
            (
                vec![(owner_key(&unlisted), "owned".to_string()), ("team".into(), "x".into())],
                every.then(|| format!("t-{a}")),
            ),
        ] {
            for i in run_instances(ec2, 1, &pairs).await {
                member.instances.push((i, "eu-west-1", want.clone(), String::new()));
            }
        }
        if every {
            owned += 1;
            drifted += 1;
            deltas.insert((a, "eu-west-1"));
        }
        let key = format!("accounts/{id}/{unlisted}/policy.yaml");
        hub_clients
            .s3
            .put_object()
            .bucket(&bucket)
            .key(key)
            .body(policy(&unlisted, a).into_bytes().into())
            .send()
            .await
            .expect("policy");
        members.push(member);
    }
    Org { hub, hub_env, bucket, queue, members, refused, owned, drifted, deltas: deltas.len() }
}

impl Org {
    fn config(&self, clusters: usize) -> OrgConfig {
        let listed: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .flat_map(|(a, m)| match a {
                EVERY => vec![format!("{}/*", m.id)],
                _ => (0..clusters_of(a, clusters)).map(|c| format!("{}/{}", m.id, infra(a, c))).collect(),
            })
            .collect();
        let vars = [
            ("TAGWARDEN_ORGANIZATION", format!("s3://{}/accounts/", self.bucket)),
            ("TAGWARDEN_MEMBER_ROLE", ROLE.to_string()),
            ("TAGWARDEN_MEMBER_REGIONS", REGIONS.join(",")),
            ("TAGWARDEN_CLUSTERS", listed.join(",")),
            ("TAGWARDEN_SHARD_QUEUE_URL", self.queue.clone()),
        ];
        OrgConfig::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
            .expect("valid")
            .expect("an organization")
    }

    async fn tags(&self, m: &Member, instance: &str, region: &str) -> TagMap {
        let r = ResourceRef::ec2(instance, region, &m.id);
        Tagger::new(m.clients[region].clone()).read(&r).await.expect("read")
    }

    /// Every instance ends as it must: its account's team where enforced, untouched elsewhere.
    async fn check(&self) {
        self.check_but(None).await
    }

    /// [`Org::check`], but for the account `skip` (one the hub refused).
    async fn check_but(&self, skip: Option<&str>) {
        for m in self.members.iter().filter(|m| Some(m.id.as_str()) != skip) {
            for (i, region, want, _) in &m.instances {
                let tags = self.tags(m, i, region).await;
                match want {
                    Some(team) => {
                        assert_eq!(tags.get("team"), Some(team), "{}/{region} {i}: {tags:?}", m.id);
                        assert_eq!(tags.get("env").map(String::as_str), Some("prod"), "{}/{region} {i}", m.id);
                    }
                    None => assert!(!tags.contains_key("env"), "{}/{region} {i} was written: {tags:?}", m.id),
                }
            }
        }
    }

    async fn drain(&self, org: &Organization) -> (usize, Vec<String>) {
        drain(&self.hub, &self.queue, org).await
    }
}

/// Hand every shard message on `queue` to the function, ten a batch, as Lambda's event source
/// mapping does; the message ids it handed back (SQS would redeliver them, then dead-letter them).
async fn drain(hub: &tagwarden::aws::sdk::config::SdkConfig, queue: &str, org: &Organization) -> (usize, Vec<String>) {
    let sqs = tagwarden::aws::sdk::sqs::Client::new(hub);
    let (mut handled, mut failed) = (0, Vec::new());
    loop {
        let got = sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .message_system_attribute_names(tagwarden::aws::sdk::sqs::types::MessageSystemAttributeName::MessageGroupId)
            .send()
            .await
            .expect("receive");
        let messages = got.messages();
        if messages.is_empty() {
            return (handled, failed);
        }
        if queue.ends_with(".fifo") {
            // Each shard in its account-region's message group, which the queue delivers (and
            // Lambda invokes) one at a time.
            for m in messages {
                let body: Value = serde_json::from_str(m.body().unwrap_or_default()).expect("a shard");
                let group = m
                    .attributes()
                    .and_then(|a| a.get(&tagwarden::aws::sdk::sqs::types::MessageSystemAttributeName::MessageGroupId));
                let want = format!(
                    "{}/{}",
                    body["account"].as_str().unwrap_or_default(),
                    body["region"].as_str().unwrap_or_default()
                );
                assert_eq!(group, Some(&want), "{body}");
            }
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| json!({"messageId": m.message_id(), "eventSource": "aws:sqs", "body": m.body()}))
            .collect();
        let inv = handle_organization_until(org, json!({"Records": records}).to_string(), None).await;
        let back: Vec<String> = inv.response["batchItemFailures"]
            .as_array()
            .map(|f| f.iter().filter_map(|f| f["itemIdentifier"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        for m in messages {
            handled += 1;
            let id = m.message_id().unwrap_or_default().to_string();
            if back.contains(&id) {
                failed.push(m.body().unwrap_or_default().to_string());
            } else {
                let receipt = m.receipt_handle().unwrap_or_default();
                sqs.delete_message().queue_url(queue).receipt_handle(receipt).send().await.expect("delete");
            }
        }
    }
}

fn settings(hub_account_role: String) -> Settings {
    Settings {
        policy_ttl: std::time::Duration::from_secs(300),
        own: vec![hub_account_role],
        concurrency: 10,
        ec2_writes_per_second: 100,
        dry_run: false,
        mode: tagwarden::mode::Mode::Enforce,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hub_enforces_every_member_account_and_names_the_refused_one() {
    let started = Instant::now();
    let o = organization(env_usize("TAGWARDEN_ORG_ACCOUNTS", 10)).await;
    let clusters = env_usize("TAGWARDEN_ORG_CLUSTERS", 1);
    let config = o.config(clusters);
    let per_account_region = config.shards().len();
    let org = Organization::new(&o.hub, config, settings("arn:aws:iam::000000000000:role/tagwarden-hub".into()));
    // Account 0's clusters need two sessions: a shard per group in each region.
    let shards = org.shards().await.len();
    assert_eq!(shards, per_account_region + REGIONS.len());
    let set_up = started.elapsed();

    // The schedule: one message per account and region, nothing swept in this invocation.
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None);
    assert_eq!(inv.response["shards"], shards, "{}", inv.response);
    org.calls.reset();
    let sweep_started = Instant::now();
    let (handled, failed) = o.drain(&org).await;
    let sweep_took = sweep_started.elapsed();
    let refused = &o.members[o.refused].id;
    assert_eq!(handled, shards);
    // A refused account is a record (its shards' outcomes, the summary below), not shards handed
    // back: on the FIFO queue they would hold its account-region's group at every redelivery.
    assert!(failed.is_empty(), "no shard is handed back, the refused account's neither: {failed:?}");
    o.check().await;

    let calls = org.calls.snapshot();
    let count = |op: &str| calls.get(op).copied().unwrap_or(0);
    let listings = count("Resource Groups Tagging API:GetResources");
    let writes = count("EC2:CreateTags");
    let assumed = org.sessions.assumed();
    println!(
        "organization: {} accounts x {} regions, {} clusters each, {} owned ({} drifted); set up in {:.1} s",
        o.members.len(),
        REGIONS.len(),
        clusters,
        o.owned,
        o.drifted,
        set_up.as_secs_f64()
    );
    println!(
        "first sweep: {shards} shards in {:.1} s; {listings} GetResources ({:.4} per owned), {writes} CreateTags (distinct deltas {}), {assumed} AssumeRole, {} calls in all: {calls:?}",
        sweep_took.as_secs_f64(),
        listings as f64 / o.owned.max(1) as f64,
        o.deltas,
        calls.values().sum::<u64>()
    );
    // One CreateTags per account-region with drift, and per session: account 0's two groups write
    // the same delta apart.
    assert_eq!(writes as usize, o.deltas + REGIONS.len(), "one CreateTags per account-region and session with drift");
    assert!(assumed <= o.members.len() as u64 + 1, "at most one AssumeRole per session: {assumed}");
    let sts: u64 = calls.iter().filter(|(op, _)| op.ends_with(":AssumeRole")).map(|(_, n)| n).sum();
    assert_eq!(sts, assumed, "{calls:?}");

    // The summary: every account, the refused one named with its fix; every owned resource in line.
    let summary = org.summary().await.expect("summary");
    let largest = summary.shards.iter().map(|s| s.api_calls).max().unwrap_or(0);
    println!(
        "largest shard: {largest} calls; summary: {} accounts, {} owned, {} in line, {} failed",
        summary.accounts, summary.owned, summary.in_line, summary.failed
    );
    assert_eq!(summary.accounts, o.members.len());
    assert_eq!((summary.owned, summary.in_line, summary.failed), (o.owned, o.owned, 0));
    let why = summary.refused.get(refused.as_str()).expect("the refused account is named");
    assert!(why.contains("AccessDenied") && why.contains("deploy the spoke"), "{why}");
    // Each cluster's own report holds both regions' parts.
    let hub = Clients::new(&o.hub);
    let key = format!("accounts/{}/{}/{}", o.members[0].id, infra(0, 0), tagwarden::policy::STATUS_REPORT_NAME);
    let report = hub.s3.get_object().bucket(&o.bucket).key(&key).send().await.expect("a cluster's status report");
    let report: Value = serde_json::from_slice(&report.body.collect().await.expect("body").into_bytes()).expect("json");
    assert_eq!(report["parts"].as_object().map(|p| p.len()), Some(REGIONS.len()), "{report}");

    // A second sweep finds nothing to write, and assumes no role again.
    let before = org.sessions.assumed();
    org.calls.reset();
    let again = org.sweep_shards(&org.shards().await, None, &|_| {}).await;
    let calls = org.calls.snapshot();
    println!("second sweep: {} calls, {} writes: {calls:?}", calls.values().sum::<u64>(), org.calls.writes());
    assert_eq!(org.calls.writes(), 0, "{calls:?}");
    assert_eq!(org.sessions.assumed(), before, "sessions are reused (the refused account waits out its retry)");
    assert_eq!(again.iter().filter(|(out, _)| out.must_retry()).count(), 0);
    let refused_again = again.iter().filter(|(_, r)| r.refused.as_deref().is_some_and(|w| w.contains("AccessDenied")));
    assert_eq!(refused_again.count(), REGIONS.len(), "the refused account's shards say so again");

    // `tagwarden status` shows the summary, and exits 2 for the refused account.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(["status", "--organization", &format!("s3://{}/accounts/", o.bucket), "--json"])
        .envs(o.hub_env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("tagwarden runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(json["accounts"], o.members.len());
    assert!(json["refused"][refused.as_str()].is_string(), "{json}");

    // The CLI sweeps one account by hand as the shards do (a dry run: in line, nothing written).
    let (a, one) = (2, &o.members[2].id);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(["organization", "sweep", "--organization", &format!("s3://{}/accounts/", o.bucket)])
        .args(REGIONS.iter().flat_map(|r| ["--member-region", r]))
        .args(["--cluster", &format!("{one}/{}", infra(a, 0)), "--account", one, "--dry-run", "--json"])
        .envs(o.hub_env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("tagwarden runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_str(&stdout).expect("json");
    let shards = json["summary"]["shards"].as_array().cloned().unwrap_or_default();
    assert_eq!(shards.len(), REGIONS.len(), "{json}");
    assert!(shards.iter().all(|s| s["account"] == one.as_str() && s["failed"] == 0), "{json}");
    let instances = env_usize("TAGWARDEN_ORG_INSTANCES", 3);
    assert_eq!(json["summary"]["in_line"], instances * REGIONS.len(), "the one cluster named: {json}");
}

/// Events of three member accounts at once, in one SQS batch beside one of an account the hub
/// does not enforce: each is corrected in its own account and region, the stranger is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_of_several_accounts_each_go_to_their_own_account() {
    let o = organization(4).await;
    let org = Organization::new(&o.hub, o.config(env_usize("TAGWARDEN_ORG_CLUSTERS", 1)), settings(String::new()));
    let mut bodies = Vec::new();
    for (n, m) in o.members.iter().take(3).enumerate() {
        // Account 0's clusters are grouped in name order: its last (a00c9) is in the second
        // group, where its event must be routed.
        let last = infra(0, 9);
        let found =
            m.instances.iter().find(|(_, r, want, c)| *r == "us-east-1" && want.is_some() && (n > 0 || *c == last));
        let (instance, region, _, _) = found.expect("one");
        let r = ResourceRef::ec2(instance, region, &m.id);
        let mut event: Value = serde_json::from_str(&fleet::event_for(&r, &m.id, &format!("e{n}"))).expect("json");
        event["region"] = json!(region);
        event["detail"]["awsRegion"] = json!(region);
        bodies.push((format!("m{n}"), event.to_string(), Some((m, instance.clone(), *region))));
    }
    let stranger = support::new_account();
    let r = ResourceRef::ec2("i-0123456789abcdef0", "us-east-1", &stranger);
    bodies.push(("m9".into(), fleet::event_for(&r, &stranger, "e9"), None));
    let records: Vec<Value> =
        bodies.iter().map(|(id, body, _)| json!({"messageId": id, "eventSource": "aws:sqs", "body": body})).collect();
    let inv = handle_organization_until(&org, json!({"Records": records}).to_string(), None).await;
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    let calls = org.calls.snapshot();
    println!("3 accounts' events: {} calls: {calls:?}", calls.values().sum::<u64>());
    for (_, _, named) in &bodies {
        let Some((m, instance, region)) = named else { continue };
        let tags = o.tags(m, instance, region).await;
        assert_eq!(tags.get("env").map(String::as_str), Some("prod"), "{} {instance}: {tags:?}", m.id);
    }
    assert_eq!(org.sessions.assumed(), 4, "one session per account whose events came, two for account 0's two groups");
    assert!(calls.keys().all(|op| !op.contains("GetResources")), "events list nothing: {calls:?}");
}

/// A `RunInstances` CloudTrail event naming `instance` (the fixture, one instance, no network
/// interfaces) in `account` and `region`.
fn run_instances_event(instance: &str, account: &str, region: &str, id: &str) -> String {
    let path =
        format!("{}/tests/fixtures/events/aws/ec2-run-instances-three-with-enis.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("fixture");
    let mut v: Value =
        serde_json::from_str(&text.replace("111122223333", account).replace("eu-west-1", region)).expect("json");
    let items = v["detail"]["responseElements"]["instancesSet"]["items"].as_array_mut().expect("items");
    items.truncate(1);
    items[0]["instanceId"] = json!(instance);
    items[0].as_object_mut().expect("item").remove("networkInterfaceSet");
    v["id"] = json!(id);
    v.to_string()
}

/// A scale-up in three member accounts at once: each account's new instances
/// and their root volumes, named by one `RunInstances` event each, arrive in one SQS batch (the
/// member-events mapping takes 100). Each account's resources are read and written in shared calls
/// of its own session, paced by its own account-region's write bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_in_three_accounts_costs_what_one_account_does() {
    let per_account = env_usize("TAGWARDEN_ORG_SCALE_UP", 30);
    // The fourth account (the last) is the one without the spoke role: not used here.
    let o = organization(4).await;
    let org = Organization::new(&o.hub, o.config(1), settings(String::new()));
    let mut bodies = Vec::new();
    let mut launched = Vec::new();
    // Account 0 holds 12 clusters in two groups; its scale-up is of its first.
    for (a, m) in o.members.iter().enumerate().take(3) {
        let ec2 = &m.clients["us-east-1"].ec2;
        let image = ec2.describe_images().send().await.expect("images");
        let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
        let pairs = [(owner_key(&infra(a, 0)), "owned".to_string()), ("keep".to_string(), "me".to_string())];
        let spec = |t: tagwarden::aws::sdk::ec2::types::ResourceType| {
            tagwarden::aws::sdk::ec2::types::TagSpecification::builder()
                .resource_type(t)
                .set_tags(Some(ec2_tags(&pairs)))
                .build()
        };
        let run = ec2
            .run_instances()
            .image_id(&image)
            .min_count(per_account as i32)
            .max_count(per_account as i32)
            .tag_specifications(spec(tagwarden::aws::sdk::ec2::types::ResourceType::Instance))
            .tag_specifications(spec(tagwarden::aws::sdk::ec2::types::ResourceType::Volume))
            .send()
            .await
            .expect("scale-up");
        for (i, instance) in run.instances().iter().filter_map(|i| i.instance_id()).enumerate() {
            bodies.push(run_instances_event(instance, &m.id, "us-east-1", &format!("a{a}-{i}")));
            launched.push((a, instance.to_string()));
        }
    }
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": body}))
        .collect();
    let inv = handle_organization_until(&org, json!({"Records": records}).to_string(), None).await;
    assert_eq!(inv.response["batchItemFailures"], json!([]), "{}", inv.response);
    let calls = org.calls.snapshot();
    let ec2: u64 = calls.iter().filter(|(op, _)| op.starts_with("EC2:")).map(|(_, n)| n).sum();
    let corrected = launched.len() * 2; // each instance and its root volume
    println!(
        "scale-up in 3 accounts: {} events, {corrected} resources corrected, {ec2} EC2 calls ({:.3} a resource), {} calls in all ({:.3} a resource, the policy loads and sessions included): {calls:?}",
        bodies.len(),
        ec2 as f64 / corrected as f64,
        calls.values().sum::<u64>(),
        calls.values().sum::<u64>() as f64 / corrected as f64
    );
    for (a, instance) in &launched {
        let m = &o.members[*a];
        let tags = o.tags(m, instance, "us-east-1").await;
        assert_eq!(tags.get("team"), Some(&format!("t-{a}")), "{} {instance}: {tags:?}", m.id);
        assert_eq!(tags.get("keep").map(String::as_str), Some("me"), "unmanaged key kept");
    }
    // Each account's instances and volumes share its writes: at most one CreateTags per account
    // for the identical delta (1,000 ids a call), and one DescribeTags and DescribeVolumes each.
    assert!(calls.get("EC2:CreateTags").copied().unwrap_or(0) <= 3, "{calls:?}");
    assert_eq!(org.sessions.assumed(), 3, "one session per account");
}

/// A thousand clusters in one account: the account is listed as `<account>/*`, its
/// clusters are packed into session policies of at most 2,048 characters, each one session and one
/// shard, and the strict layer holds every tag write to its session's policy, as IAM would. So each
/// cluster's resource is written only through the session of its own group, and a group's session
/// cannot write another group's resource. `TAGWARDEN_ORG_ONE_ACCOUNT_CLUSTERS` sets the number of
/// clusters (30 by default; `scripts/bench-organization one-account 1000`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_clusters_in_one_account_each_written_only_under_its_own_session() {
    let n = env_usize("TAGWARDEN_ORG_ONE_ACCOUNT_CLUSTERS", 30);
    let region = "eu-west-1";
    let started = Instant::now();
    let moto = support::moto();
    let (_, hub_account, _) = support::account_with_env().await;
    let hub = support::config_in(&hub_account, "us-east-1").await;
    let hub_s3 = Clients::new(&hub).s3;
    let bucket = format!("hub-{hub_account}");
    hub_s3.create_bucket().bucket(&bucket).send().await.expect("hub bucket");
    // FIFO, as the organization module makes it: an account-region's shards one at a time.
    let sqs = tagwarden::aws::sdk::sqs::Client::new(&hub);
    let queue = sqs
        .create_queue()
        .queue_name(format!("shards-{hub_account}.fifo"))
        .attributes(tagwarden::aws::sdk::sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("queue");
    let queue = queue.queue_url().expect("queue url").to_string();

    let id = support::new_account();
    let member = Clients::new(&support::config_in(&id, region).await);
    moto.strict.require_roles_in(&id);
    member.iam.create_role().role_name(ROLE).assume_role_policy_document("{}").send().await.expect("spoke role");
    // One launch of every cluster's instance, then each one's tags: at a thousand clusters, a
    // launch per cluster would spend the set-up in moto's image listing.
    let launched = run_instances(&member, n, &[("team".to_string(), "someone-else".to_string())]).await;
    let mut instances = Vec::new();
    for (c, instance) in launched.into_iter().enumerate() {
        let cluster = format!("k{c:04}-7xk2p");
        let body = format!("version: 1\ninfraID: {cluster}\ntags:\n  team: {cluster}\n").into_bytes();
        let key = format!("accounts/{id}/{cluster}/policy.yaml");
        hub_s3.put_object().bucket(&bucket).key(key).body(body.into()).send().await.expect("policy");
        let owned = ec2_tags(&[(owner_key(&cluster), "owned".to_string())]);
        member.ec2.create_tags().resources(&instance).set_tags(Some(owned)).send().await.expect("owned");
        instances.push((instance, cluster));
    }
    // Never written: a cluster of the account that published nothing, and a resource one only shares.
    let unpublished = run_instances(&member, 1, &[(owner_key("unpublished-1x2y3"), "owned".to_string())]).await;
    let shared = run_instances(&member, 1, &[(owner_key(&instances[0].1), "shared".to_string())]).await;
    let set_up = started.elapsed();

    let vars = [
        ("TAGWARDEN_ORGANIZATION", format!("s3://{bucket}/accounts/")),
        ("TAGWARDEN_MEMBER_ROLE", ROLE.to_string()),
        ("TAGWARDEN_MEMBER_REGIONS", region.to_string()),
        ("TAGWARDEN_CLUSTERS", format!("{id}/*")),
        ("TAGWARDEN_SHARD_QUEUE_URL", queue.clone()),
    ];
    let config = OrgConfig::from_lookup(|k| vars.iter().find(|(v, _)| *v == k).map(|(_, x)| x.clone()))
        .expect("valid")
        .expect("an organization");
    let org = Organization::new(&hub, config, settings(String::new()));
    // The groups the hub packs the account's clusters into (in name order, as S3 lists them).
    let keyed: Vec<(String, Vec<String>)> = instances.iter().map(|(_, c)| (c.clone(), vec![owner_key(c)])).collect();
    let groups = pack("aws", &keyed);
    let largest = groups
        .iter()
        .map(|g| session_policy("aws", &g.iter().map(|&i| keyed[i].clone()).collect::<Vec<_>>()).len())
        .max()
        .unwrap_or_default();
    assert!(largest <= SESSION_POLICY_MAX, "{largest}");
    assert_eq!(org.shards().await.len(), groups.len(), "one shard per cluster group");

    let refused_before = moto.strict.fired().get("sts-session-policy").copied().unwrap_or(0);
    let (policies_before, checked_before) = moto.strict.session_checks(&id);
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None);
    org.calls.reset();
    let sweep_started = Instant::now();
    let (handled, failed) = drain(&hub, &queue, &org).await;
    let sweep_took = sweep_started.elapsed();
    assert_eq!((handled, failed.len()), (groups.len(), 0), "{failed:?}");
    let calls = org.calls.snapshot();
    let refused = moto.strict.fired().get("sts-session-policy").copied().unwrap_or(0) - refused_before;
    assert_eq!(refused, 0, "no write of the sweep was outside its session's policy");
    let (policies, checked) = moto.strict.session_checks(&id);
    assert_eq!(policies - policies_before, groups.len(), "every session passed its group's policy");
    assert_eq!(checked - checked_before, n as u64, "every CreateTags was checked against its session's policy");

    let tags = |i: &str| {
        let r = ResourceRef::ec2(i, region, &id);
        let tagger = Tagger::new(member.clone());
        async move { tagger.read(&r).await.expect("read") }
    };
    for (i, cluster) in &instances {
        assert_eq!(tags(i).await.get("team"), Some(cluster), "{i} of {cluster}");
    }
    for i in unpublished.iter().chain(&shared) {
        assert!(!tags(i).await.contains_key("team"), "{i} was written");
    }
    let writes = org.calls.writes();
    assert_eq!(writes as usize, n, "one CreateTags per cluster: each cluster's own tags are its own delta");
    assert_eq!(org.sessions.assumed(), groups.len() as u64, "one AssumeRole per cluster group");
    println!(
        "one account, {n} clusters: {} groups (sessions and shards), largest session policy {largest} of \
         {SESSION_POLICY_MAX} characters; sweep: {} calls, {} GetResources, {writes} CreateTags, {} AssumeRole, \
         {:.1} s (set-up {:.0} s); writes refused by a session policy: {refused}",
        groups.len(),
        calls.values().sum::<u64>(),
        calls.iter().filter(|(op, _)| op.contains("GetResources")).map(|(_, c)| c).sum::<u64>(),
        org.sessions.assumed(),
        sweep_took.as_secs_f64(),
        set_up.as_secs_f64(),
    );

    // What keeps a group to its own clusters is its session policy: the first group's session can
    // write its own cluster's resource, and is refused the last group's.
    let first: Vec<(String, Vec<String>)> = groups[0].iter().map(|&i| keyed[i].clone()).collect();
    let (own, _) = &instances[groups[0][0]];
    let (other, other_cluster) = instances.last().expect("clusters");
    assert!(groups.len() > 1 && !first.iter().any(|(c, _)| c == other_cluster), "two groups at least");
    let narrowed = Clients::new(&support::config_with_policy(&id, region, ROLE, &session_policy("aws", &first)).await);
    let write = |i: &str| {
        let tag = tagwarden::aws::sdk::ec2::types::Tag::builder().key("probe").value("x").build();
        narrowed.ec2.create_tags().resources(i).tags(tag).send()
    };
    write(own).await.expect("a group's session writes its own cluster's resource");
    use tagwarden::aws::sdk::ec2::error::ProvideErrorMetadata;
    let e = write(other).await.expect_err("and not another group's");
    assert_eq!(e.code(), Some("UnauthorizedOperation"), "{e:?}");
}

/// The EMF documents of an invocation's lines that carry metric `name`.
fn emf_with(lines: &[String], name: &str) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|d| {
            d["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().is_some_and(|m| m.iter().any(|m| m["Name"] == name))
        })
        .collect()
}

/// `folders` empty folders (`accounts/<account>/fNNNNN/`, as the console's "Create folder" makes
/// them; no notification fires for them) in `account`'s own area, 64 `PutObject`s at once.
async fn flood(hub: &Clients, bucket: &str, account: &str, folders: usize) -> std::time::Duration {
    use futures_util::stream::{self, StreamExt};
    let started = Instant::now();
    stream::iter(0..folders)
        .map(|i| {
            let key = format!("accounts/{account}/f{i:05}/");
            async move { hub.s3.put_object().bucket(bucket).key(key).body(Vec::new().into()).send().await.expect("folder") }
        })
        .buffer_unordered(64)
        .for_each(|_| async {})
        .await;
    started.elapsed()
}

/// One member account floods its own area with empty folders: the scheduled run refuses that
/// account alone (naming it, the count and the fix; `MemberOverCap`), at a bounded cost, and every
/// other account's shards are sent in the same run, within a short deadline; they are then swept
/// and in line. `folders` from `TAGWARDEN_ORG_FLOOD` (6,000 by default; the ignored test below
/// takes 60,000).
async fn a_flood_of(folders: usize) {
    let o = organization(4).await;
    let config = o.config(1);
    let hub = Clients::new(&o.hub);
    // The account sorted first, so that every other one came after it in the old name order.
    let flooded =
        o.members.iter().enumerate().filter(|(a, _)| *a != o.refused).map(|(_, m)| m.id.clone()).min().expect("one");
    let took = flood(&hub, &o.bucket, &flooded, folders).await;
    println!("{folders} empty folders created in {:.1} s", took.as_secs_f64());

    let org = Organization::new(&o.hub, config.clone(), settings(String::new()));
    let started = Instant::now();
    let deadline = started + std::time::Duration::from_secs(10);
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), Some(deadline)).await;
    let took = started.elapsed();
    let calls = org.calls.snapshot();
    let census: u64 = calls.iter().filter(|(op, _)| op.contains("ListObjectsV2")).map(|(_, n)| n).sum();
    println!(
        "scheduled run with {folders} empty folders in one account: {} calls ({census} ListObjectsV2) in {:.2} s: {}",
        calls.values().sum::<u64>(),
        took.as_secs_f64(),
        inv.response
    );
    assert_eq!(inv.error, None, "{}", inv.response);
    assert!(took < std::time::Duration::from_secs(10), "within the deadline: {took:?}");
    let why = inv.response["over_cap"][flooded.as_str()].as_str().unwrap_or_default();
    assert!(
        why.contains(&flooded) && why.contains("TAGWARDEN_MEMBER_FOLDERS_MAX") && why.contains("folder"),
        "{}",
        inv.response
    );
    assert_eq!(inv.response["unreached"], json!([]), "{}", inv.response);
    // Every other account's shards (account 0's two groups in each region), sent in this run.
    let others = o.members.iter().filter(|m| m.id != flooded).count();
    let flooded_is_0 = o.members[0].id == flooded;
    let want = others * REGIONS.len() + if flooded_is_0 { 0 } else { REGIONS.len() };
    assert_eq!(inv.response["shards"], want, "{}", inv.response);
    // The flood is listed one page past the cap at most: at most 3 calls at 2,000 folders.
    let pages = (config.folders_max + 1).div_ceil(1000) as u64;
    // Each other account: its count and its store's listing; and the hub's own folder's.
    assert!(census <= pages + (others as u64) * 2 + 1, "{calls:?}");
    let over = emf_with(&inv.lines, "MemberOverCap");
    assert!(over.iter().any(|d| d["Account"] == flooded.as_str() && d["MemberOverCap"] == 1), "{:?}", inv.lines);
    assert!(over.iter().any(|d| d.get("Account").is_none() && d["MemberOverCap"] == 1), "{:?}", inv.lines);

    let (handled, failed) = o.drain(&org).await;
    assert_eq!((handled, failed.len()), (want, 0), "{failed:?}");
    o.check_but(Some(&flooded)).await;

    // The summary names it, as `tagwarden status --organization` does (exit 2).
    let summary = org.summary().await.expect("summary");
    assert!(summary.refused[flooded.as_str()].contains("TAGWARDEN_MEMBER_FOLDERS_MAX"), "{:?}", summary.refused);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(["status", "--organization", &format!("s3://{}/accounts/", o.bucket)])
        .envs(o.hub_env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("tagwarden runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains(&flooded) && stdout.contains("REFUSED"), "{stdout}");

    // A run whose deadline has passed reaches no account: each is named, counted, and recorded
    // to be taken first next run.
    let cut = Organization::new(&o.hub, config.clone(), settings(String::new()));
    let inv = handle_organization_until(&cut, r#"{"tagwarden": "sweep"}"#.into(), Some(Instant::now())).await;
    let unreached = inv.response["unreached"].as_array().cloned().unwrap_or_default();
    assert_eq!(unreached.len(), o.members.len(), "{}", inv.response);
    let not = emf_with(&inv.lines, "MemberNotReached");
    assert!(
        not.iter().any(|d| d.get("Account").is_none() && d["MemberNotReached"] == o.members.len()),
        "{:?}",
        inv.lines
    );
    let state = cut.read_state().await.expect("the hub's state");
    assert_eq!(state.unreached.len(), o.members.len());
    let next = Organization::new(&o.hub, config, settings(String::new()));
    let inv = handle_organization_until(&next, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!((inv.response["shards"].clone(), inv.response["unreached"].clone()), (json!(want), json!([])));
    let _ = o.drain(&next).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_flooding_its_folder_slows_no_other_account() {
    a_flood_of(env_usize("TAGWARDEN_ORG_FLOOD", 6_000)).await;
}

/// `cargo test --all-features --test aws sixty_thousand -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "60,000 objects in moto: minutes of set-up"]
async fn sixty_thousand_folders_in_one_member_account() {
    a_flood_of(60_000).await;
}

/// A member whose spoke role is deleted is a failed shard: the hub's invocation says so in its
/// response and its `MemberRefused` metric (not handed back), `tagwarden organization sweep` exits
/// 2 naming the account, and the summary counts its clusters. Once the account is no longer
/// listed, the next sweep records that, and `tagwarden status --organization` exits 0 without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_member_role_is_a_failed_shard_until_the_account_is_unlisted() {
    let o = organization(3).await;
    let (gone, gone_id) = (2, o.members[2].id.clone());
    assert_eq!(o.refused, gone, "the last account has no role: the one deleted");
    let mut config = o.config(1);
    config.shard_queue = None;
    // With its role: swept, nothing refused.
    let iam = &o.members[gone].clients["us-east-1"].iam;
    iam.create_role().role_name(ROLE).assume_role_policy_document("{}").send().await.expect("spoke role");
    let org = Organization::new(&o.hub, config.clone(), settings(String::new()));
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.response["refused"], json!([]), "{}", inv.response);
    assert!(emf_with(&inv.lines, "MemberRefused").iter().all(|d| d["MemberRefused"] == 0), "{:?}", inv.lines);

    // Deleted: a failed shard in each region, counted, not the invocation's error.
    iam.delete_role().role_name(ROLE).send().await.expect("role deleted");
    let org = Organization::new(&o.hub, config, settings(String::new()));
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None, "a retry of the whole sweep cannot help: {}", inv.response);
    assert_eq!(inv.response["refused"], json!([gone_id]), "{}", inv.response);
    assert_eq!(inv.response["failed"], REGIONS.len(), "{}", inv.response);
    let refused = emf_with(&inv.lines, "MemberRefused");
    assert!(
        refused.iter().any(|d| d["Account"] == gone_id.as_str() && d["MemberRefused"] == REGIONS.len()),
        "{:?}",
        inv.lines
    );
    assert!(
        refused.iter().any(|d| d.get("Account").is_none() && d["MemberRefused"] == REGIONS.len()),
        "{:?}",
        inv.lines
    );

    let location = format!("s3://{}/accounts/", o.bucket);
    let cli = |args: Vec<String>| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
            .args(args)
            .envs(o.hub_env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("tagwarden runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), stdout.to_string(), format!("{stdout}{stderr}"))
    };
    let sweep = |accounts: usize| {
        let mut args: Vec<String> = ["organization", "sweep", "--organization", &location].map(String::from).to_vec();
        for r in REGIONS {
            args.extend(["--member-region".to_string(), r.to_string()]);
        }
        for (a, m) in o.members.iter().enumerate().take(accounts) {
            let listed = match a {
                EVERY => format!("{}/*", m.id),
                _ => format!("{}/{}", m.id, infra(a, 0)),
            };
            args.extend(["--cluster".to_string(), listed]);
        }
        args
    };
    let (code, _, text) = cli(sweep(3));
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains(&format!("account {gone_id} refused")) && text.contains("AccessDenied"), "{text}");
    // Its cluster is counted: account 0's and 2's one listed, account 1's two published.
    let status = vec!["status".to_string(), "--organization".into(), location.clone(), "--json".into()];
    let (code, stdout, text) = cli(status.clone());
    assert_eq!(code, Some(2), "{text}");
    let json: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!((json["accounts"].clone(), json["clusters"].clone()), (json!(3), json!(4)), "{json}");

    // The account unlisted: the next sweep exits 0, and the summary no longer names it.
    let (code, _, text) = cli(sweep(2));
    assert_eq!(code, Some(0), "{text}");
    let (code, _, text) = cli(status);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains(&gone_id), "{text}");
}

/// An account with more clusters than one member role holds has several roles, each bounded in
/// IAM to its share (Terraform renders them and the table `_tagwarden/member-roles.json`):
/// each cluster's group assumes its own cluster's role, and every owned instance ends in line. A
/// person's preview through the read-only auditor role (`--member-role <role>-auditor`) plans the
/// same and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cluster_is_written_under_its_own_member_role_and_a_preview_writes_nothing() {
    let o = organization(2).await;
    let moto = support::moto();
    let (m, a) = (&o.members[0], 0);
    let hub = Clients::new(&o.hub);
    // Account 0's clusters in two shares: the first cluster's role is the plain one, the others'
    // `tagwarden-member-1`; the auditor role beside them.
    let iam = &m.clients["us-east-1"].iam;
    for role in [format!("{ROLE}-1"), format!("{ROLE}-auditor")] {
        iam.create_role().role_name(role).assume_role_policy_document("{}").send().await.expect("role");
    }
    let clusters: Vec<String> = (0..clusters_of(a, 1)).map(|c| infra(a, c)).collect();
    let table: BTreeMap<String, String> = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| (c.clone(), if i == 0 { ROLE.to_string() } else { format!("{ROLE}-1") }))
        .collect();
    let body = serde_json::to_vec(&json!({ m.id.clone(): table })).expect("json");
    let key = "_tagwarden/member-roles.json";
    hub.s3.put_object().bucket(&o.bucket).key(key).body(body.into()).send().await.expect("roles table");
    let mut config = o.config(1);
    config.shard_queue = None;

    // The preview first: a person's credentials, the auditor role in every account, no write.
    let drifted_before: usize = {
        let mut n = 0;
        for (i, region, want, _) in &m.instances {
            if want.is_some() && !o.tags(m, i, region).await.contains_key("env") {
                n += 1;
            }
        }
        n
    };
    assert!(drifted_before > 0, "the fixture has drift");
    let mut preview = config.clone();
    preview.role_name = format!("{ROLE}-auditor");
    let mut person = settings(String::new());
    person.dry_run = true;
    let org = Organization::new(&o.hub, preview, person);
    let (writes_before, roles_before) = (moto.strict.session_checks(&m.id).1, moto.strict.assumed_roles(&m.id));
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None, "{}", inv.response);
    assert_eq!(moto.strict.session_checks(&m.id).1, writes_before, "a preview makes no tag write");
    let roles = moto.strict.assumed_roles(&m.id);
    assert_eq!(
        roles.difference(&roles_before).cloned().collect::<Vec<_>>(),
        vec![format!("arn:aws:iam::{}:role/{ROLE}-auditor", m.id)],
        "the preview reads through the auditor role alone, whatever the table says"
    );
    let mut still = 0;
    for (i, region, want, _) in &m.instances {
        if want.is_some() && !o.tags(m, i, region).await.contains_key("env") {
            still += 1;
        }
    }
    assert_eq!(still, drifted_before, "nothing was written by the preview");

    // Enforced: each group under its own cluster's role; every instance in line.
    let org = Organization::new(&o.hub, config, settings(String::new()));
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None, "{}", inv.response);
    let roles = moto.strict.assumed_roles(&m.id);
    for role in [ROLE.to_string(), format!("{ROLE}-1")] {
        assert!(roles.contains(&format!("arn:aws:iam::{}:role/{role}", m.id)), "{role} assumed: {roles:?}");
    }
    o.check_but(Some(&o.members[o.refused].id)).await;
}

/// A hub deployed in audit (`TAGWARDEN_MODE=audit`, the Terraform default): the schedule's shards,
/// sent through the queue and swept as Lambda would, and a member's events make no tag write in
/// any member account (counted at the emulator's door by the strict layer's request log), while
/// the clusters' status reports list what would be written; enforced, the same sweep writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audited_hub_writes_nothing_in_any_member_account() {
    let o = organization(2).await;
    let moto = support::moto();
    let m = &o.members[0];
    let mut audit = settings(String::new());
    audit.mode = tagwarden::mode::Mode::Audit;
    let org = Organization::new(&o.hub, o.config(1), audit);
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None, "{}", inv.response);
    let (handled, _) = o.drain(&org).await;
    assert!(handled > 0, "shards were swept");
    // An event too: a member's instance launched, reconciled in audit.
    let (i, region, _, _) = m.instances.iter().find(|(_, _, w, _)| w.is_some()).expect("an owned instance");
    let event = run_instances_event(i, &m.id, region, "audit-1");
    let batch = json!({"Records": [{"messageId": "m-1", "body": event, "eventSource": "aws:sqs"}]}).to_string();
    let inv = handle_organization_until(&org, batch, None).await;
    assert_eq!(inv.error, None, "{}", inv.response);
    for member in &o.members {
        assert!(
            moto.strict.tag_writes(&member.id).is_empty(),
            "{}: {:?}",
            member.id,
            moto.strict.tag_writes(&member.id)
        );
    }
    let mut drifted = 0;
    for (i, region, want, _) in &m.instances {
        if want.is_some() && !o.tags(m, i, region).await.contains_key("env") {
            drifted += 1;
        }
    }
    assert!(drifted > 0, "the drift is still there");
    // The report beside a cluster's policy lists what would be written.
    let hub = Clients::new(&o.hub);
    let key = format!("accounts/{}/{}/tagwarden-status.json", m.id, infra(0, 0));
    let body = hub.s3.get_object().bucket(&o.bucket).key(&key).send().await.expect("status report");
    let report: Value = serde_json::from_slice(&body.body.collect().await.expect("body").into_bytes()).expect("json");
    assert!(report["audit"]["would_write"].as_u64().unwrap_or(0) > 0, "{}", report["audit"]);

    // Enforced: the same sweep writes.
    let org = Organization::new(&o.hub, o.config(1), settings(String::new()));
    let inv = handle_organization_until(&org, r#"{"tagwarden": "sweep"}"#.into(), None).await;
    assert_eq!(inv.error, None, "{}", inv.response);
    o.drain(&org).await;
    assert!(!moto.strict.tag_writes(&m.id).is_empty(), "enforced, the hub writes");
}
