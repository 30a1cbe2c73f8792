//! What real AWS does and moto does not, through the strict layer (`tagwarden_testkit::aws::strict`): each test
//! here failed before the fix it names.

#![cfg(feature = "aws")]

use crate::{fleet, support};
use support::fault_proxy;

use std::time::{Duration, Instant};

use fault_proxy::{Fault, FaultProxy, Rule, When};
use fleet::{event_for, infrastructure, reconciler, tags, INFRA, OWNER};
use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::Clients;
use tagwarden::events;
use tagwarden::report::{Failure, Status};
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

const DESIRED: &[(&str, &str)] = &[("team", "platform"), ("env", "prod")];

struct Env {
    clients: Clients,
    account: String,
    akid: String,
    location: String,
}

impl Env {
    async fn new(policy: &str) -> Self {
        let (clients, account, vars) = support::account_with_env().await;
        let akid = vars.iter().find(|(k, _)| *k == "AWS_ACCESS_KEY_ID").map(|(_, v)| v.clone()).expect("akid");
        let bucket = format!("policy-{account}");
        clients.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
        clients
            .s3
            .put_object()
            .bucket(&bucket)
            .key("infra.json")
            .body(policy.as_bytes().to_vec().into())
            .send()
            .await
            .expect("policy");
        Env { clients, account, akid, location: format!("s3://{bucket}/infra.json") }
    }

    async fn bucket(&self, name: &str, initial: &[(&str, &str)]) -> ResourceRef {
        let name = format!("{name}-{}", self.account);
        self.clients.s3.create_bucket().bucket(&name).send().await.expect("bucket");
        self.put_bucket_tags(&name, initial).await;
        ResourceRef::s3_bucket(&name, "us-east-1")
    }

    async fn put_bucket_tags(&self, bucket: &str, pairs: &[(&str, &str)]) {
        let set = pairs
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::s3::types::Tag::builder().key(*k).value(*v).build().expect("tag"));
        let tagging = tagwarden::aws::sdk::s3::types::Tagging::builder()
            .set_tag_set(Some(set.collect()))
            .build()
            .expect("tagging");
        self.clients.s3.put_bucket_tagging().bucket(bucket).tagging(tagging).send().await.expect("put tags");
    }

    async fn read(&self, r: &ResourceRef) -> TagMap {
        tagwarden::aws::Tagger::new(self.clients.clone()).read(r).await.expect("read")
    }
}

fn has(t: &TagMap, pairs: &[(&str, &str)]) -> bool {
    pairs.iter().all(|(k, v)| t.get(*k).map(String::as_str) == Some(*v))
}

/// Fix: the sweep re-reads a bucket right before its replace-style `PutBucketTagging`, and
/// re-checks ownership and the plan. The Tagging API's index lags: here it still shows the buckets
/// as they were at the first listing. Before the fix the stale set was PUT back: the tag added
/// since was deleted, and a bucket since handed over (`shared`) was made `owned` again.
#[tokio::test(flavor = "multi_thread")]
async fn sweep_rereads_a_bucket_before_replacing_its_tags() {
    let env = Env::new(&infrastructure(DESIRED)).await;
    let late = env.bucket("late", &[(OWNER, "owned"), ("keep", "1")]).await;
    let handed = env.bucket("handed", &[(OWNER, "owned"), ("keep", "1")]).await;
    let strict = &support::moto().strict;
    strict.set_tagging_lag(&env.akid, Duration::from_secs(3600));
    let mut rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    rec.dry_run = true;
    let listed = rec.sweep(true, None, None).await;
    assert_eq!(listed.records.iter().filter(|r| r.status == Status::WouldApply).count(), 2);
    // Changes after the listing, which the lagging index does not show yet.
    env.put_bucket_tags(&late.id, &[(OWNER, "owned"), ("keep", "1"), ("late", "added")]).await;
    env.put_bucket_tags(&handed.id, &[(OWNER, "shared"), ("keep", "1")]).await;

    rec.dry_run = false;
    let fired = strict.fired().get("tagging-index-lag").copied().unwrap_or(0);
    let out = rec.sweep(false, None, None).await;
    assert!(strict.fired()["tagging-index-lag"] > fired, "the sweep listed from the lagging index");
    let after = env.read(&late).await;
    assert!(has(&after, &[("late", "added"), ("keep", "1"), (OWNER, "owned")]), "{after:?}");
    assert!(has(&after, DESIRED), "{after:?}");
    let after = env.read(&handed).await;
    assert_eq!(after, tags(&[(OWNER, "shared"), ("keep", "1")]), "a bucket no longer owned is not written");
    let handed_record = out.records.iter().find(|r| r.resource.contains("handed")).expect("record");
    assert_eq!(handed_record.status, Status::NotOwned);
}

/// Fix: `aws:` system tags are sent back unchanged. S3 refuses a PUT without them; before the fix
/// they were stripped, so no bucket made by CloudFormation could ever be written.
#[tokio::test(flavor = "multi_thread")]
async fn bucket_with_system_tags_is_written_and_keeps_them() {
    let env = Env::new(&infrastructure(DESIRED)).await;
    let b = env.bucket("cfn", &[(OWNER, "owned"), ("keep", "1")]).await;
    let system = [("aws:cloudformation:stack-name", "infra"), ("aws:cloudformation:logical-id", "Bucket")];
    support::moto().strict.add_s3_system_tags(&b.id, &system);
    let rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    let event = events::parse_one(event_for(&b, &env.account, "e-cfn").as_bytes()).expect("event");
    let out = rec.handle_event(&event, None).await;
    assert_eq!(out.records[0].status, Status::Applied, "{:?}", out.records[0].error);
    let after = env.read(&b).await;
    assert!(has(&after, &system) && has(&after, DESIRED) && has(&after, &[("keep", "1")]), "{after:?}");
    // And through the sweep.
    env.put_bucket_tags(
        &b.id,
        &[
            (OWNER, "owned"),
            ("keep", "1"),
            ("aws:cloudformation:stack-name", "infra"),
            ("aws:cloudformation:logical-id", "Bucket"),
        ],
    )
    .await;
    let out = rec.sweep(false, None, None).await;
    let r = out.records.iter().find(|r| r.resource.contains("cfn")).expect("record");
    assert_eq!(r.status, Status::Applied, "{:?}", r.error);
}

async fn role(c: &Clients, name: &str, path: &str, pairs: &[(&str, &str)]) -> ResourceRef {
    let doc = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let t = pairs
        .iter()
        .map(|(k, v)| tagwarden::aws::sdk::iam::types::Tag::builder().key(*k).value(*v).build().expect("tag"));
    let out = c
        .iam
        .create_role()
        .role_name(name)
        .path(path)
        .assume_role_policy_document(doc)
        .set_tags(Some(t.collect()))
        .send()
        .await
        .expect("role");
    ResourceRef::from_arn(out.role().expect("role").arn()).expect("arn")
}

/// Fix: IAM compares tag keys ignoring case. `team=platform` against `Team=ops` is drift on that
/// one key, written once; the role ends with one `team` key, and re-planning finds nothing.
#[tokio::test(flavor = "multi_thread")]
async fn iam_keys_compare_ignoring_case() {
    let env = Env::new(&infrastructure(DESIRED)).await;
    let r = role(&env.clients, "case-role", "/", &[(OWNER, "owned"), ("Team", "ops"), ("ENV", "prod")]).await;
    let rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    let event = events::parse_one(event_for(&r, &env.account, "e-case").as_bytes()).expect("event");
    let out = rec.handle_event(&event, None).await;
    let record = &out.records[0];
    assert_eq!(record.status, Status::Applied, "{:?}", record.error);
    let changed: Vec<&str> = record.changes.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(changed, ["team"], "ENV=prod already is env=prod on IAM; Team=ops is the drift");
    assert_eq!(record.changes[0].old.as_deref(), Some("ops"));
    let after = env.read(&r).await;
    let teams: Vec<_> = after.iter().filter(|(k, _)| k.eq_ignore_ascii_case("team")).collect();
    assert_eq!(teams, [(&"team".to_string(), &"platform".to_string())], "{after:?}");
    env.clients.calls.reset();
    let again = rec.handle_event(&event, None).await;
    assert_eq!(again.records[0].status, Status::Unchanged);
    assert_eq!(env.clients.calls.writes(), 0);
}

/// Fix: IAM `Tag*` events name a role without its path; the read (GetRole) gives the real ARN, so
/// an override on `role/openshift/*` applies on the event path as it does in the sweep.
#[tokio::test(flavor = "multi_thread")]
async fn iam_event_uses_the_real_arn_with_its_path() {
    let policy = json!({
        "version": 1, "cloud": "aws", "infraID": INFRA, "tags": {"team": "platform"},
        "overrides": [{"name": "openshift roles", "selector": {"id": "arn:aws:iam::*:role/openshift/*"}, "tags": {"pool": "control"}}]
    });
    let env = Env::new(&policy.to_string()).await;
    let r = role(&env.clients, "pathed-role", "/openshift/", &[(OWNER, "owned")]).await;
    assert!(r.arn.as_deref().is_some_and(|a| a.contains("/openshift/")));
    let rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    let event = events::parse_one(event_for(&r, &env.account, "e-path").as_bytes()).expect("event");
    assert!(!event.resources[0].arn.as_deref().unwrap_or_default().contains("/openshift/"), "the event has no path");
    let out = rec.handle_event(&event, None).await;
    assert_eq!(out.records[0].status, Status::Applied, "{:?}", out.records[0].error);
    let after = env.read(&r).await;
    assert!(has(&after, &[("team", "platform"), ("pool", "control")]), "{after:?}");
    // The sweep agrees: nothing left to write.
    let out = rec.sweep(false, None, None).await;
    assert!(out.records.iter().all(|r| r.status != Status::Applied), "{:?}", out.records);
}

/// Fix: ELBv2 `AddTags` takes one ARN per call. Before, the sweep sent 20 and (on real AWS) every
/// such call failed before being split down to single ARNs.
#[tokio::test(flavor = "multi_thread")]
async fn elbv2_writes_one_arn_per_call() {
    let env = Env::new(&infrastructure(DESIRED)).await;
    let vpc = env.clients.ec2.create_vpc().cidr_block("10.9.0.0/16").send().await.expect("vpc");
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id").to_string();
    for i in 0..3 {
        env.clients
            .elbv2
            .create_target_group()
            .name(format!("tg-{i}-{}", &env.account[..6]))
            .protocol(tagwarden::aws::sdk::elbv2::types::ProtocolEnum::Http)
            .port(80)
            .vpc_id(&vpc)
            .tags(tagwarden::aws::sdk::elbv2::types::Tag::builder().key(OWNER).value("owned").build())
            .send()
            .await
            .expect("target group");
    }
    let rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    let refused = support::moto().strict.fired().get("elbv2-add-tags-one-arn").copied().unwrap_or(0);
    env.clients.calls.reset();
    let out = rec.sweep(false, None, None).await;
    assert_eq!(out.records.iter().filter(|r| r.status == Status::Applied).count(), 3, "{:?}", out.records);
    let calls = env.clients.calls.snapshot();
    let add_tags: u64 = calls.iter().filter(|(op, _)| op.ends_with(":AddTags")).map(|(_, n)| n).sum();
    assert_eq!(add_tags, 3, "{calls:?}");
    assert_eq!(support::moto().strict.fired().get("elbv2-add-tags-one-arn").copied().unwrap_or(0), refused);
}

async fn managed_policy(c: &Clients, name: &str, pairs: &[(&str, &str)]) -> ResourceRef {
    let doc = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeTags","Resource":"*"}]}"#;
    let t = pairs
        .iter()
        .map(|(k, v)| tagwarden::aws::sdk::iam::types::Tag::builder().key(*k).value(*v).build().expect("tag"));
    let out = c.iam.create_policy().policy_name(name).policy_document(doc).set_tags(Some(t.collect())).send().await;
    let arn = out.expect("policy").policy().and_then(|p| p.arn()).expect("arn").to_string();
    ResourceRef::from_arn(&arn).expect("arn")
}

/// Fix: one IAM entity that cannot be read (denied here) fails alone; the sweep goes on, and the
/// record says it is permanent and how to fix it. (Customer managed policies are read one by one:
/// no bulk listing carries their tags.)
#[tokio::test(flavor = "multi_thread")]
async fn one_unreadable_iam_entity_fails_alone() {
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, Duration::from_secs(5)).await;
    let env = Env { clients: direct, account: account.clone(), akid: String::new(), location: String::new() };
    let location = fleet::publish_policy(&env.clients, &account, &infrastructure(DESIRED)).await;
    let a = managed_policy(&env.clients, "policy-a", &[(OWNER, "owned")]).await;
    let b = managed_policy(&env.clients, "policy-b", &[(OWNER, "owned")]).await;
    let rec = reconciler(&via, &account, &location, Duration::ZERO);
    proxy.set_rules(vec![Rule::new(Some("iam"), Some("ListPolicyTags"), Fault::AccessDenied, When::Always).budget(1)]);
    let out = rec.sweep(false, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let failed: Vec<_> = out.records.iter().filter(|r| r.status == Status::Failed).collect();
    assert_eq!(failed.len(), 1, "{:?}", out.records);
    assert_eq!(failed[0].failure, Some(Failure::Permanent));
    assert!(
        failed[0].error.as_deref().unwrap_or_default().contains("grant iam:ListPolicyTags"),
        "{:?}",
        failed[0].error
    );
    assert!(!out.must_retry(), "a denied read is reported, not retried");
    let applied = [&a, &b]
        .iter()
        .filter(|r| out.records.iter().any(|x| x.resource == r.to_string() && x.status == Status::Applied))
        .count();
    assert_eq!(applied, 1);
}

/// Reads at their lower bound: roles and users come with their tags from one
/// `GetAccountAuthorizationDetails` page (up to 1000 entities), not one tag read each.
#[tokio::test(flavor = "multi_thread")]
async fn iam_roles_and_users_are_listed_with_their_tags_in_bulk() {
    let env = Env::new(&infrastructure(DESIRED)).await;
    for i in 0..12 {
        role(&env.clients, &format!("worker-{i}"), "/openshift/", &[(OWNER, "owned")]).await;
    }
    role(&env.clients, "foreign", "/", &[("kubernetes.io/cluster/other-x9k2p", "owned")]).await;
    let rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    env.clients.calls.reset();
    let out = rec.sweep(false, None, None).await;
    let applied = out.records.iter().filter(|r| r.status == Status::Applied && r.resource_type == "iam:role");
    assert_eq!(applied.count(), 12, "{:?}", out.records);
    let calls = env.clients.calls.snapshot();
    assert_eq!(calls.get("IAM:GetAccountAuthorizationDetails"), Some(&1), "{calls:?}");
    let per_entity: u64 =
        calls.iter().filter(|(op, _)| ["IAM:GetRole", "IAM:ListRoleTags"].contains(&op.as_str())).map(|(_, n)| n).sum();
    assert_eq!(per_entity, 0, "no tag read per role: {calls:?}");
}

/// Fix: a permanent error (denied) is reported, not sent round SQS to the dead-letter queue.
#[tokio::test(flavor = "multi_thread")]
async fn permanent_errors_are_not_batch_item_failures() {
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, Duration::from_secs(5)).await;
    let location = fleet::publish_policy(&direct, &account, &infrastructure(DESIRED)).await;
    let r = role(&direct, "denied-role", "/", &[(OWNER, "owned")]).await;
    let rec = reconciler(&via, &account, &location, Duration::ZERO);
    proxy.set_rules(vec![Rule::new(Some("iam"), Some("TagRole"), Fault::AccessDenied, When::Always)]);
    let payload =
        json!({"Records": [{"eventSource": "aws:sqs", "messageId": "m1", "body": event_for(&r, &account, "e1")}]});
    let inv = function::handle(&rec, payload.to_string()).await;
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    let record: Value = inv
        .lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .find(|v| v["record"] == "reconcile")
        .expect("record");
    assert_eq!((record["status"].as_str(), record["failure"].as_str()), (Some("failed"), Some("permanent")));
    // A transient one still is.
    proxy.set_rules(vec![Rule::new(Some("iam"), Some("TagRole"), Fault::Status(503), When::Always)]);
    let inv = function::handle(&rec, payload.to_string()).await;
    assert_eq!(inv.response, json!({"batchItemFailures": [{"itemIdentifier": "m1"}]}));
}

/// Fix: near the deadline no new work starts. Unstarted messages go back unstarted (no API call),
/// and a sweep defers its writes rather than being cut off mid-way.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_starts_past_the_deadline() {
    let env = Env::new(&infrastructure(DESIRED)).await;
    let b = env.bucket("late-deadline", &[(OWNER, "owned")]).await;
    let rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    // An invocation whose time is up: nothing may start.
    let soon = Instant::now();
    let records: Vec<Value> = (0..3)
        .map(|i| json!({"eventSource": "aws:sqs", "messageId": format!("m{i}"), "body": event_for(&b, &env.account, &format!("e{i}"))}))
        .collect();
    env.clients.calls.reset();
    let inv = function::handle_until(&rec, json!({ "Records": records }).to_string(), Some(soon)).await;
    assert_eq!(inv.response["batchItemFailures"].as_array().map(Vec::len), Some(3));
    assert_eq!(env.clients.calls.total(), 0, "{:?}", env.clients.calls.snapshot());
    let inv = function::handle_until(&rec, json!({"tagwarden": "sweep"}).to_string(), Some(soon)).await;
    assert_eq!(env.clients.calls.writes(), 0);
    assert!(inv.error.is_some(), "the deferred sweep asks to be run again");
    let out = rec.sweep(false, None, None).await;
    assert!(out.records.iter().any(|r| r.status == Status::Applied));
}

/// Fix: a `RunInstances` event can arrive before the instance's EBS volumes are attached. The
/// handler waits for them within the event's budget (then hands the event back) instead of
/// leaving them untagged until the next sweep.
#[tokio::test(flavor = "multi_thread")]
async fn volumes_attached_after_the_event_are_waited_for() {
    use tagwarden::aws::sdk::ec2::types::{Filter, ResourceType, Tag, TagSpecification};
    let env = Env::new(&infrastructure(DESIRED)).await;
    let ec2 = &env.clients.ec2;
    let image = ec2.describe_images().send().await.expect("images");
    let image = image.images().first().and_then(|i| i.image_id()).expect("an AMI").to_string();
    let owned = |t: ResourceType| {
        TagSpecification::builder().resource_type(t).tags(Tag::builder().key(OWNER).value("owned").build()).build()
    };
    let run = ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .tag_specifications(owned(ResourceType::Instance))
        .tag_specifications(owned(ResourceType::Volume))
        .send()
        .await
        .expect("instance");
    let instance = run.instances()[0].instance_id().expect("id").to_string();
    let attached = Filter::builder().name("attachment.instance-id").values(&instance).build();
    let vols = ec2.describe_volumes().filters(attached).send().await.expect("volumes");
    let volume = vols.volumes()[0].volume_id().expect("volume").to_string();
    ec2.detach_volume().volume_id(&volume).instance_id(&instance).force(true).send().await.expect("detach");
    // The volume shows up attached a moment after the event.
    let later = env.clients.clone();
    let (v, i) = (volume.clone(), instance.clone());
    let attach = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        later.ec2.attach_volume().volume_id(&v).instance_id(&i).device("/dev/sda1").send().await.expect("attach");
    });
    let mut rec = reconciler(&env.clients, &env.account, &env.location, Duration::ZERO);
    rec.adapter.not_found =
        tagwarden::retry::Backoff { attempts: 8, first: Duration::from_millis(100), max: Duration::from_millis(400) };
    let path = format!("{}/tests/fixtures/events/aws/ec2-run-instances-sso.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("fixture");
    let text = text
        .replace("i-0123456789abcdef0", &instance)
        .replace("111122223333", &env.account)
        .replace("eu-west-1", "us-east-1");
    let event = events::parse_one(text.as_bytes()).expect("event");
    let out = rec.handle_event(&event, None).await;
    attach.await.expect("attached");
    let record = out.records.iter().find(|r| r.resource_type == "ec2:volume").expect("the volume was reconciled");
    assert_eq!(record.status, Status::Applied, "{:?}", out.records);
    let after = env.read(&ResourceRef::ec2(&volume, "us-east-1", &env.account)).await;
    assert!(has(&after, DESIRED), "{after:?}");
}

/// Fix: one listing denied by a guardrail (a service control policy on
/// `iam:GetAccountAuthorizationDetails`) made the whole sweep exit with nothing written and the
/// status report still `ok`. Now every other owned resource is corrected, the failed listing is a
/// record naming the call and the fix, the status report shows it, and the next sweep lists again.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_listing_is_reported_and_everything_else_is_swept() {
    let proxy = FaultProxy::start(&support::moto().endpoint).await;
    let (via, direct, account) = fleet::account_via(&proxy.endpoint, Duration::from_secs(5)).await;
    let location = fleet::publish_policy(&direct, &account, &infrastructure(DESIRED)).await;
    let spec = fleet::FleetSpec { instances: 4, foreign_instances: 1, buckets: 2, roles: 0, target_groups: 0 };
    let fleet = fleet::Fleet::create(&direct, &account, &spec).await;
    let role = role(&direct, "listed-by-iam-only", "/", &[(OWNER, "owned")]).await;
    let rec = reconciler(&via, &account, &location, Duration::ZERO);
    proxy.set_rules(vec![Rule::new(
        Some("iam"),
        Some("GetAccountAuthorizationDetails"),
        Fault::AccessDenied,
        When::Always,
    )]);

    let out = rec.sweep(true, None, None).await;
    assert!(out.error.is_none(), "the sweep went on: {:?}", out.error);
    let desired = tags(DESIRED);
    let (wrong, applied) = fleet.check(&rec.adapter, &desired, &|_| true).await;
    assert!(wrong.is_empty(), "every listed owned resource is corrected: {wrong:#?}");
    assert_eq!(applied, fleet.owned.len());
    let listing: Vec<_> = out.records.iter().filter(|r| r.is_listing()).collect();
    assert_eq!(listing.len(), 1, "{:#?}", out.records);
    assert_eq!(listing[0].resource_type, "iam:GetAccountAuthorizationDetails");
    let error = listing[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("AccessDenied") && error.contains("fix: grant iam:GetAccountAuthorizationDetails"),
        "{error}"
    );
    assert_eq!(out.metrics.listing_failures, 1);
    let report = tagwarden::status_store::read(&rec.store, None).await.expect("read").expect("a status report");
    assert!(
        report.failures.iter().any(|f| f.resource_type == "iam:GetAccountAuthorizationDetails"),
        "the status report shows the failed listing: {report:?}"
    );
    assert!(!rec.adapter.read(&role).await.expect("role").contains_key("team"), "the role was not listed");

    // The guardrail lifted: the next sweep lists IAM again and corrects the role.
    proxy.clear_rules();
    let out = rec.sweep(true, None, None).await;
    assert_eq!(out.failed(), 0, "{:#?}", out.records);
    assert_eq!(rec.adapter.read(&role).await.expect("role").get("team").map(String::as_str), Some("platform"));
    let report = tagwarden::status_store::read(&rec.store, None).await.expect("read").expect("a status report");
    assert!(report.failures.is_empty(), "{report:?}");
}
