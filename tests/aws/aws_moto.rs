//! The AWS seed's scenarios end to end: real-shaped CloudTrail events through the Lambda's code
//! path, against a real moto server, through the real SDK clients. API calls are counted at the
//! SDK's HTTP layer.

#![cfg(feature = "aws")]

use crate::support;
use std::time::Duration;

use serde_json::{json, Value};
use tagwarden::aws::function::{self, Payload};
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::enforce::{Cause, Current, Engine};
use tagwarden::events::{self, Event};
use tagwarden::policy::clusters::Policies;
use tagwarden::report::{Record, Status};
use tagwarden::resource::ResourceRef;
use tagwarden::retry::Backoff;
use tagwarden::TagMap;

const INFRA: &str = "mycluster-7xk2p";
const OWNER: &str = "kubernetes.io/cluster/mycluster-7xk2p";
const OWN_ROLE: &str = "tagdrift-reconciler-role";

fn tags(pairs: &[(&str, &str)]) -> TagMap {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// An Infrastructure object with status and spec tags.
fn infrastructure(status: &[(&str, &str)], spec: &[(&str, &str)]) -> String {
    let list = |t: &[(&str, &str)]| t.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>();
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": {"platformSpec": {"type": "AWS", "aws": {"resourceTags": list(spec)}}},
        "status": {"infrastructureName": INFRA, "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1", "resourceTags": list(status)}}},
    })
    .to_string()
}

struct Env {
    clients: Clients,
    account: String,
    bucket: String,
    vars: Vec<(&'static str, String)>,
}

impl Env {
    async fn new() -> Self {
        let (clients, account, vars) = support::account_with_env().await;
        let bucket = format!("policy-{account}");
        clients.s3.create_bucket().bucket(&bucket).send().await.expect("create policy bucket");
        Env { clients, account, bucket, vars }
    }

    async fn publish(&self, key: &str, text: &str) {
        self.clients
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(text.as_bytes().to_vec().into())
            .send()
            .await
            .expect("put policy");
    }

    /// An engine reading `s3://<bucket>/<key>`, re-checking the policy on every call.
    fn reconciler(&self, location: &str) -> Engine<Tagger> {
        let store = policy_store(&self.clients, location.parse::<PolicyLocation>().expect("location"), Duration::ZERO);
        let mut tagger = Tagger::new(self.clients.clone());
        tagger.not_found = Backoff { attempts: 3, first: Duration::from_millis(20), max: Duration::from_millis(50) };
        Engine::new(tagger, store, vec![self.own_role()])
    }

    fn own_role(&self) -> String {
        format!("arn:aws:iam::{}:role/{OWN_ROLE}", self.account)
    }

    /// A fixture event with its placeholder ids, account and region replaced.
    fn event(&self, fixture: &str, ids: &[(&str, &str)]) -> Event {
        let path = format!("{}/tests/fixtures/events/aws/{fixture}.json", env!("CARGO_MANIFEST_DIR"));
        let mut text = std::fs::read_to_string(&path).expect("fixture");
        for (from, to) in ids {
            text = text.replace(from, to);
        }
        text = text.replace("111122223333", &self.account).replace("eu-west-1", "us-east-1");
        events::parse_one(text.as_bytes()).expect("fixture parses")
    }

    async fn tags(&self, r: &ResourceRef) -> TagMap {
        Tagger::new(self.clients.clone()).read(r).await.expect("read tags")
    }

    async fn instance(&self, extra: &[(&str, &str)], owned: Option<&str>) -> ResourceRef {
        let image = self.clients.ec2.describe_images().send().await.expect("images");
        let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
        let mut spec = tagwarden::aws::sdk::ec2::types::TagSpecification::builder()
            .resource_type(tagwarden::aws::sdk::ec2::types::ResourceType::Instance);
        let mut vol = tagwarden::aws::sdk::ec2::types::TagSpecification::builder()
            .resource_type(tagwarden::aws::sdk::ec2::types::ResourceType::Volume);
        let mut all: Vec<(&str, &str)> = extra.to_vec();
        all.push(("Name", "web-1"));
        if let Some(v) = owned {
            all.push((OWNER, v));
        }
        for (k, v) in &all {
            spec = spec.tags(tagwarden::aws::sdk::ec2::types::Tag::builder().key(*k).value(*v).build());
            if *k == OWNER {
                vol = vol.tags(tagwarden::aws::sdk::ec2::types::Tag::builder().key(*k).value(*v).build());
            }
        }
        let mut run =
            self.clients.ec2.run_instances().image_id(image).min_count(1).max_count(1).tag_specifications(spec.build());
        if owned.is_some() {
            run = run.tag_specifications(vol.build());
        }
        let out = run.send().await.expect("run instance");
        let id = out.instances()[0].instance_id().expect("instance id").to_string();
        ResourceRef::ec2(&id, "us-east-1", &self.account)
    }
}

async fn run(r: &Engine<Tagger>, event: &Event) -> tagwarden::report::Outcome {
    let out = r.handle_event(event, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    out
}

#[tokio::test]
async fn create_event_applies_policy_to_instance_and_its_volume() {
    let env = Env::new().await;
    env.publish("cluster/infrastructure.json", &infrastructure(&[("team", "platform"), ("env", "prod")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/cluster/infrastructure.json", env.bucket));
    let instance = env.instance(&[], Some("owned")).await;
    let event = env.event("ec2-run-instances-sso", &[("i-0123456789abcdef0", &instance.id)]);

    env.clients.calls.reset();
    let out = run(&rec, &event).await;
    assert_eq!(out.records.len(), 2, "the instance and its root volume: {:?}", out.records);
    assert!(out.records.iter().all(|r| r.status == Status::Applied), "{:?}", out.records);
    // One write per resource, and nothing else writes.
    let calls = env.clients.calls.snapshot();
    assert_eq!(calls.get("EC2:CreateTags"), Some(&2), "{calls:?}");
    assert_eq!(env.clients.calls.writes(), 2);
    let t = env.tags(&instance).await;
    assert_eq!((t["team"].as_str(), t["env"].as_str(), t["Name"].as_str()), ("platform", "prod", "web-1"));

    // The same event again: reads only.
    env.clients.calls.reset();
    let out = run(&rec, &event).await;
    assert!(out.records.iter().all(|r| r.status == Status::Unchanged));
    assert_eq!(env.clients.calls.writes(), 0, "{:?}", env.clients.calls.snapshot());
}

#[tokio::test]
async fn drift_is_reverted_and_unmanaged_and_removed_keys_stay() {
    let env = Env::new().await;
    let key = "cluster/infrastructure.json";
    env.publish(key, &infrastructure(&[("team", "platform"), ("cost-center", "42")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/{key}", env.bucket));
    let instance = env.instance(&[("team", "someone-else"), ("mine", "kept")], Some("owned")).await;
    // An external edit (a console user's CreateTags) drifted a managed key.
    let event = env.event(
        "ec2-create-tags-console",
        &[("i-0123456789abcdef0", &instance.id), ("vol-0123456789abcdef0", &instance.id)],
    );
    run(&rec, &event).await;
    let t = env.tags(&instance).await;
    assert_eq!((t["team"].as_str(), t["cost-center"].as_str(), t["mine"].as_str()), ("platform", "42", "kept"));

    // The key is removed from policy: it stops being managed, and stays on the resource.
    env.publish(key, &infrastructure(&[("team", "platform")], &[])).await;
    env.clients.calls.reset();
    run(&rec, &event).await;
    assert_eq!(env.clients.calls.writes(), 0);
    assert_eq!(env.tags(&instance).await["cost-center"], "42");
}

#[tokio::test]
async fn resource_level_overrides_win_and_conflicts_are_reported() {
    let env = Env::new().await;
    let policy = format!(
        "version: 1\ncloud: aws\ninfraID: {INFRA}\ntags: {{team: platform}}\noverrides:\n  - name: workers\n    selector: {{type: 'ec2:instance', tag: {{key: role, value: worker}}}}\n    tags: {{team: compute}}\n"
    );
    env.publish("layers/00-base.json", &infrastructure(&[("team", "from-status")], &[("team", "from-spec")])).await;
    env.publish("layers/10-tagwarden.yaml", &policy).await;
    let rec = env.reconciler(&format!("s3://{}/layers/", env.bucket));
    let worker = env.instance(&[("role", "worker")], Some("owned")).await;
    let other = env.instance(&[("role", "master")], Some("owned")).await;
    for r in [&worker, &other] {
        let policy = Policies::one(rec.store.current(false).await.0.expect("policy"));
        let out = rec.reconcile(&policy, r, Current::Read, Cause::Other).await;
        assert_eq!(out.status, Status::Applied, "{out:?}");
        assert!(!out.superseded.is_empty());
    }
    // status ("from-status") < a later document's cluster tags ("platform") < spec ("from-spec")
    // < the matching override ("compute").
    assert_eq!(env.tags(&worker).await["team"], "compute");
    assert_eq!(env.tags(&other).await["team"], "from-spec");
}

#[tokio::test]
async fn not_owned_resources_are_never_written() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    let shared = env.instance(&[], Some("shared")).await;
    let foreign = env.instance(&[("kubernetes.io/cluster/other-cluster", "owned")], None).await;
    env.clients.calls.reset();
    for r in [&shared, &foreign] {
        let event = env.event("ec2-run-instances-sso", &[("i-0123456789abcdef0", &r.id)]);
        let out = run(&rec, &event).await;
        assert!(out.records.iter().all(|r| r.status == Status::NotOwned), "{:?}", out.records);
        assert!(!env.tags(r).await.contains_key("team"));
    }
    assert_eq!(env.clients.calls.writes(), 0);
}

#[tokio::test]
async fn tag_limit_writes_nothing() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform"), ("env", "prod")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    // 47 + Name + owner = 49 tags: one more fits, two do not.
    let filler: Vec<(String, String)> = (0..47).map(|i| (format!("k{i:02}"), "v".to_string())).collect();
    let filler: Vec<(&str, &str)> = filler.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let instance = env.instance(&filler, Some("owned")).await;
    let before = env.tags(&instance).await;
    let policy = rec.store.current(false).await.0.expect("policy");
    env.clients.calls.reset();
    let out = rec.reconcile(&Policies::one(policy), &instance, Current::Read, Cause::Other).await;
    assert_eq!(out.status, Status::LimitExceeded);
    assert_eq!(env.clients.calls.writes(), 0);
    assert_eq!(env.tags(&instance).await, before);
}

#[tokio::test]
async fn s3_bucket_keeps_unmanaged_tags() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    let bucket = format!("{INFRA}-image-registry-{}", env.account);
    env.clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let set = |pairs: &[(&str, &str)]| {
        let t = pairs
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::s3::types::Tag::builder().key(*k).value(*v).build().expect("tag"))
            .collect();
        tagwarden::aws::sdk::s3::types::Tagging::builder().set_tag_set(Some(t)).build().expect("tagging")
    };
    env.clients
        .s3
        .put_bucket_tagging()
        .bucket(&bucket)
        .tagging(set(&[(OWNER, "owned"), ("Name", "registry"), ("backup", "daily"), ("team", "old")]))
        .send()
        .await
        .expect("tag bucket");
    let event = env.event("s3-put-bucket-tagging", &[("acme-data-eu", &bucket)]);
    env.clients.calls.reset();
    let out = run(&rec, &event).await;
    assert_eq!(out.records[0].status, Status::Applied, "{:?}", out.records);
    assert_eq!(env.clients.calls.snapshot().get("S3:PutBucketTagging"), Some(&1));
    let t = env.tags(&ResourceRef::s3_bucket(&bucket, "us-east-1")).await;
    assert_eq!(t, tags(&[(OWNER, "owned"), ("Name", "registry"), ("backup", "daily"), ("team", "platform")]));
}

#[tokio::test]
async fn elbv2_and_iam_resources_are_enforced() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    let ec2 = &env.clients.ec2;
    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.expect("vpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id").to_string();
    let mut subnets = Vec::new();
    for (i, az) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc_id)
            .cidr_block(format!("10.0.{i}.0/24"))
            .availability_zone(*az)
            .send()
            .await
            .expect("subnet");
        subnets.push(s.subnet().and_then(|s| s.subnet_id()).expect("subnet id").to_string());
    }
    let owner = tagwarden::aws::sdk::elbv2::types::Tag::builder().key(OWNER).value("owned").build();
    let lb = env
        .clients
        .elbv2
        .create_load_balancer()
        .name("web-alb")
        .set_subnets(Some(subnets))
        .tags(owner.clone())
        .send()
        .await
        .expect("load balancer");
    let lb_arn = lb.load_balancers()[0].load_balancer_arn().expect("arn").to_string();
    let tg = env
        .clients
        .elbv2
        .create_target_group()
        .name("web-tg")
        .protocol(tagwarden::aws::sdk::elbv2::types::ProtocolEnum::Http)
        .port(80)
        .vpc_id(&vpc_id)
        .tags(owner)
        .send()
        .await
        .expect("target group");
    let tg_arn = tg.target_groups()[0].target_group_arn().expect("arn").to_string();
    let role = env
        .clients
        .iam
        .create_role()
        .role_name("app-task-role")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
        .tags(tagwarden::aws::sdk::iam::types::Tag::builder().key(OWNER).value("owned").build().expect("tag"))
        .send()
        .await
        .expect("role");
    let role_arn = role.role().map(|r| r.arn().to_string()).expect("role arn");

    let lb_event = env.event(
        "elbv2-create-load-balancer",
        &[("arn:aws:elasticloadbalancing:eu-west-1:111122223333:loadbalancer/app/web-alb/50dc6c495c0c9188", &lb_arn)],
    );
    let tg_event = env.event(
        "elbv2-create-target-group",
        &[("arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web-tg/73e2d6bc24d8a067", &tg_arn)],
    );
    let role_event = env.event("iam-create-role", &[("arn:aws:iam::111122223333:role/app-task-role", &role_arn)]);
    env.clients.calls.reset();
    for e in [&lb_event, &tg_event, &role_event] {
        let out = run(&rec, e).await;
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.records[0].status, Status::Applied, "{:?}", out.records);
    }
    let calls = env.clients.calls.snapshot();
    assert_eq!(
        (calls.get("Elastic Load Balancing v2:AddTags"), calls.get("IAM:TagRole")),
        (Some(&2), Some(&1)),
        "{calls:?}"
    );
    for r in [ResourceRef::from_arn(&lb_arn), ResourceRef::from_arn(&tg_arn), ResourceRef::from_arn(&role_arn)] {
        assert_eq!(env.tags(&r.expect("arn")).await["team"], "platform");
    }
}

#[tokio::test]
async fn own_writes_end_in_zero_writes() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("CostCenter", "unassigned")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    let instance = env.instance(&[], Some("owned")).await;
    let create = env.event("ec2-run-instances-sso", &[("i-0123456789abcdef0", &instance.id)]);
    run(&rec, &create).await;

    // The CloudTrail event our own CreateTags causes: recognised by the role, not even read.
    let own = env.event("ec2-create-tags-by-reconciler", &[("i-0123456789abcdef0", &instance.id)]);
    assert!(own.is_from(&[env.own_role()]));
    env.clients.calls.reset();
    let out = run(&rec, &own).await;
    assert_eq!((out.metrics.events_ignored, out.records.len()), (1, 0));
    assert_eq!(env.clients.calls.total(), 0, "{:?}", env.clients.calls.snapshot());

    // The `Tag Change on Resource` event it causes names no caller: idempotent planning ends it.
    let mut after = env.event("tag-change-ec2-instance", &[("i-0123456789abcdef0", &instance.id)]);
    after.tags = Some(env.tags(&instance).await);
    env.clients.calls.reset();
    let out = run(&rec, &after).await;
    assert_eq!(out.records[0].status, Status::Unchanged);
    assert_eq!(env.clients.calls.writes(), 0);
}

#[tokio::test]
async fn policy_cache_last_known_good_and_fail_closed() {
    let env = Env::new().await;
    let location: PolicyLocation = format!("s3://{}/p.json", env.bucket).parse().expect("location");
    let store = policy_store(&env.clients, location.clone(), Duration::from_secs(3600));
    // No policy at all: fail closed.
    let (p, _) = store.current(false).await;
    assert!(p.expect_err("no policy").to_string().contains("nothing is written"));

    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let (p, change) = store.current(true).await;
    let v1 = p.expect("loaded").policy.version.clone();
    assert!(matches!(change, Some(tagwarden::policy::cache::PolicyChange::Loaded { .. })));
    // Within the TTL: no call at all.
    env.clients.calls.reset();
    let _ = store.current(false).await;
    assert_eq!(env.clients.calls.total(), 0);
    // Forced re-check of an unchanged object: one conditional GET, nothing new.
    let (_, change) = store.current(true).await;
    assert_eq!(change, None);
    assert_eq!(env.clients.calls.snapshot().get("S3:GetObject"), Some(&1));

    // An invalid version is rejected; the last good one stays in force.
    env.publish("p.json", &infrastructure(&[("aws:reserved", "x"), ("Name", "y")], &[])).await;
    let (p, change) = store.current(true).await;
    assert_eq!(p.expect("last known good").policy.version, v1);
    match change {
        Some(tagwarden::policy::cache::PolicyChange::Rejected { errors }) => {
            assert_eq!(errors.len(), 2, "{errors:?}")
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // A truncated document, too.
    env.publish("p.json", "{\"kind\": \"Infrastructure\", \"status\": {").await;
    let (p, _) = store.current(true).await;
    assert_eq!(p.expect("last known good").policy.version, v1);
}

#[tokio::test]
async fn rejected_policy_is_reported_and_ssm_source_works() {
    let env = Env::new().await;
    env.clients
        .ssm
        .put_parameter()
        .name("/tagwarden/policy")
        .value(infrastructure(&[("team", "platform")], &[]))
        .r#type(tagwarden::aws::sdk::ssm::types::ParameterType::String)
        .send()
        .await
        .expect("parameter");
    let rec = env.reconciler("ssm:/tagwarden/policy");
    let instance = env.instance(&[], Some("owned")).await;
    let out = rec.sweep(true, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert!(
        out.records.iter().any(|r| r.resource.contains(&instance.id) && r.status == Status::Applied),
        "{:?}",
        out.records
    );
    // The sweep's status report beside the parameter.
    let status = env.clients.ssm.get_parameter().name("/tagwarden/policy-status").send().await.expect("status report");
    let report: Value =
        serde_json::from_str(status.parameter().and_then(|p| p.value()).unwrap_or_default()).expect("json");
    assert_eq!(report["policy"]["state"], "ok");
}

#[tokio::test]
async fn sweep_fixes_everything_then_makes_zero_writes() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    let a = env.instance(&[], Some("owned")).await;
    let b = env.instance(&[("team", "wrong")], Some("owned")).await;
    let foreign = env.instance(&[], None).await;
    env.clients
        .iam
        .create_user()
        .user_name("cluster-user")
        .tags(tagwarden::aws::sdk::iam::types::Tag::builder().key(OWNER).value("owned").build().expect("tag"))
        .send()
        .await
        .expect("user");
    let out = rec.sweep(true, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let applied = out.records.iter().filter(|r| r.status == Status::Applied).count();
    assert_eq!(applied, 5, "two instances, their two volumes, the user: {:?}", out.records);
    for r in [&a, &b] {
        assert_eq!(env.tags(r).await["team"], "platform");
    }
    assert!(!env.tags(&foreign).await.contains_key("team"));
    env.clients.calls.reset();
    let again = rec.sweep(false, None, None).await;
    assert!(again.records.iter().all(|r| r.status == Status::Unchanged));
    // Zero tag writes (the status report is an object write, not a tag write).
    assert_eq!(env.clients.calls.writes(), 0, "{:?}", env.clients.calls.snapshot());
    let report = env
        .clients
        .s3
        .get_object()
        .bucket(&env.bucket)
        .key("tagwarden-status.json")
        .send()
        .await
        .expect("status report");
    let body = report.body.collect().await.expect("body").into_bytes();
    let report: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(report["failures"], json!([]));
}

#[tokio::test]
async fn sqs_batch_reports_partial_failures() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let rec = env.reconciler(&format!("s3://{}/p.json", env.bucket));
    let instance = env.instance(&[], Some("owned")).await;
    let good = env.event("ec2-run-instances-sso", &[("i-0123456789abcdef0", &instance.id)]);
    // An event for an instance that never becomes visible: retried, then handed back.
    let missing = env.event("ec2-run-instances-sso", &[("i-0123456789abcdef0", "i-0000000000000dead")]);
    let body = |e: &str| {
        std::fs::read_to_string(format!("{}/tests/fixtures/events/aws/{e}.json", env!("CARGO_MANIFEST_DIR")))
            .expect("fixture")
    };
    let raw_good = body("ec2-run-instances-sso")
        .replace("i-0123456789abcdef0", &instance.id)
        .replace("111122223333", &env.account)
        .replace("eu-west-1", "us-east-1");
    let raw_missing = raw_good.replace(&instance.id, "i-0000000000000dead");
    assert_eq!(
        (good.resources[0].id.as_str(), missing.resources[0].id.as_str()),
        (instance.id.as_str(), "i-0000000000000dead")
    );
    let batch = json!({"Records": [
        {"messageId": "m1", "eventSource": "aws:sqs", "body": raw_good},
        {"messageId": "m2", "eventSource": "aws:sqs", "body": raw_missing},
        {"messageId": "m3", "eventSource": "aws:sqs", "body": "not json"},
    ]});
    assert!(matches!(serde_json::from_value(batch.clone()), Ok(Payload::SqsBatch { .. })));
    let inv = function::handle(&rec, batch.to_string()).await;
    assert_eq!(inv.response, json!({"batchItemFailures": [{"itemIdentifier": "m2"}, {"itemIdentifier": "m3"}]}));
    assert!(inv.error.is_none());
    // One outcome record per resource, then EMF lines.
    let emf: Vec<Value> = inv
        .lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("_aws").is_some())
        .collect();
    assert!(emf.iter().any(|m| m["EventsReceived"] == 2), "{emf:?}");
    assert_eq!(env.tags(&instance).await["team"], "platform");
}

#[tokio::test]
async fn cli_sweep_dry_run_then_write() {
    let env = Env::new().await;
    env.publish("p.json", &infrastructure(&[("team", "platform")], &[])).await;
    let instance = env.instance(&[], Some("owned")).await;
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
            .args(args)
            .envs(env.vars.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("tagwarden runs");
        (
            out.status.code().unwrap_or(-1),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let policy = format!("s3://{}/p.json", env.bucket);
    let (code, json, err) = cli(&["sweep", "--policy", &policy, "--dry-run", "--json"]);
    assert_eq!(code, 2, "drift found in a dry run: {err}");
    // The instance and its owned root volume.
    assert_eq!((json["drifted"].as_u64(), json["written"].as_u64()), (Some(2), Some(2)), "{json}");
    assert!(!env.tags(&instance).await.contains_key("team"), "a dry run writes nothing");
    let (code, json, err) = cli(&["sweep", "--policy", &policy, "--json"]);
    assert_eq!(code, 0, "{err}");
    // The instance and its volume share one delta: one batched call.
    assert_eq!(json["api_calls"]["EC2:CreateTags"], 1, "{json}");
    let (code, _, err) = cli(&["sweep", "--policy", &policy, "--dry-run"]);
    assert_eq!(code, 0, "no drift left: {err}");
    // plan and validate read the same locations.
    let (code, json, err) = cli(&["validate", "--json", &policy]);
    assert_eq!((code, json["valid"].as_bool()), (0, Some(true)), "{err}");
    let (code, _, err) = cli(&["sweep", "--policy", "s3://no-such-bucket-anywhere/p.json"]);
    assert_eq!(code, 3, "the policy cannot be read: nothing could run");
    assert!(err.contains("no-such-bucket-anywhere"), "{err}");
}

#[tokio::test]
async fn sweep_batches_identical_deltas_and_isolates_a_failing_resource() {
    let env = Env::new().await;
    // The policy allows 60 tags, EC2 allows 50: the service itself refuses one write mid-batch.
    let policy = format!(
        "version: 1\ncloud: aws\ninfraID: {INFRA}\ntags: {{team: platform, env: prod}}\nlimits: {{resourceTags: 60}}\n"
    );
    env.publish("p.yaml", &policy).await;
    let mut rec = env.reconciler(&format!("s3://{}/p.yaml", env.bucket));
    rec.adapter.ec2_batch = 4;
    let mut instances = Vec::new();
    for _ in 0..9 {
        instances.push(env.instance(&[], Some("owned")).await);
    }
    // Name + owner + 48 = 50 tags: two more are refused by EC2.
    let filler: Vec<(String, String)> = (0..48).map(|i| (format!("k{i:02}"), "v".to_string())).collect();
    let filler: Vec<(&str, &str)> = filler.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let full = env.instance(&filler, Some("owned")).await;
    env.clients.calls.reset();
    let out = rec.sweep(true, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    // 10 instances and their 10 volumes share one delta: 5 batches of 4, and the failing batch is
    // split (2 + 2 calls) until only the full instance is left out.
    assert_eq!(out.records.len(), 20);
    let limited: Vec<&Record> = out.records.iter().filter(|r| r.status == Status::LimitExceeded).collect();
    assert_eq!(limited.len(), 1, "{:?}", out.records);
    assert!(limited[0].resource.contains(&full.id));
    assert_eq!(out.records.iter().filter(|r| r.status == Status::Applied).count(), 19);
    assert_eq!(env.clients.calls.snapshot().get("EC2:CreateTags"), Some(&9), "{:?}", env.clients.calls.snapshot());
    for r in &instances {
        assert_eq!(env.tags(r).await["team"], "platform");
    }
    // Make room on the full instance; with the default batch size the same drift is one call.
    let filler_keys = filler.iter().map(|(k, _)| tagwarden::aws::sdk::ec2::types::Tag::builder().key(*k).build());
    env.clients
        .ec2
        .delete_tags()
        .resources(&full.id)
        .set_tags(Some(filler_keys.collect()))
        .send()
        .await
        .expect("delete filler");
    let more: Vec<ResourceRef> = {
        let mut v = Vec::new();
        for _ in 0..5 {
            v.push(env.instance(&[], Some("owned")).await);
        }
        v
    };
    rec.adapter.ec2_batch = 1000;
    env.clients.calls.reset();
    let out = rec.sweep(false, None, None).await;
    let applied = out.records.iter().filter(|r| r.status == Status::Applied).count();
    assert_eq!(applied, 11, "5 instances, their 5 volumes, the formerly full one: {:?}", out.records);
    assert_eq!(env.clients.calls.snapshot().get("EC2:CreateTags"), Some(&1));
    assert_eq!(env.tags(&more[0]).await["env"], "prod");
}
