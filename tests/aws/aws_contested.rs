//! Never fight another controller (issue 33), on moto through the Lambda's SQS-batch path: the AWS
//! Load Balancer Controller removes every tag it did not put on its target groups ("unsolicited
//! tags are removed", aws-load-balancer-operator's API). tagwarden corrects the key
//! `tagwarden::contest::CORRECTIONS` times, then stops, reports the key contested naming the
//! controller's role, and makes no further write of it; an ordinary drift on another key is still
//! corrected, and an operator's `--lift` or a policy change lets it correct again.

use crate::support;
use std::time::Duration;

use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::{Clients, Tagger};
use tagwarden::contest::CORRECTIONS;
use tagwarden::enforce::Engine;
use tagwarden::resource::ResourceRef;
use tagwarden::retry::Backoff;

const OWNER: &str = "kubernetes.io/cluster/mycluster-7xk2p";
const FIXTURE_TG: &str = "arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web-tg/73e2d6bc24d8a067";
const FIXTURE_CALLER: &str = "arn:aws:iam::111122223333:user/ci-deployer";

fn policy(team: &str) -> String {
    format!("version: 1\ninfraID: mycluster-7xk2p\ntags:\n  team: {team}\n  env: prod\n",)
}

struct Env {
    clients: Clients,
    account: String,
    bucket: String,
    tg: String,
}

impl Env {
    async fn new() -> Self {
        let (clients, account) = support::account().await;
        let bucket = format!("policy-{account}");
        clients.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
        let vpc = clients.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.expect("vpc");
        let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id").to_string();
        let owner = tagwarden::aws::sdk::elbv2::types::Tag::builder().key(OWNER).value("owned").build();
        let tg = clients
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
        let tg = tg.target_groups()[0].target_group_arn().expect("arn").to_string();
        let env = Env { clients, account, bucket, tg };
        env.publish(&policy("platform")).await;
        env
    }

    async fn publish(&self, text: &str) {
        let put = self.clients.s3.put_object().bucket(&self.bucket).key("p.yaml");
        put.body(text.as_bytes().to_vec().into()).send().await.expect("put policy");
    }

    /// The function's engine; `role`: its own role's name (the controller's is another).
    fn engine(&self) -> Engine<Tagger> {
        let location = format!("s3://{}/p.yaml", self.bucket).parse::<PolicyLocation>().expect("location");
        let store = policy_store(&self.clients, location, Duration::ZERO);
        let mut tagger = Tagger::new(self.clients.clone());
        tagger.not_found = Backoff { attempts: 3, first: Duration::from_millis(20), max: Duration::from_millis(50) };
        Engine::new(tagger, store, vec![format!("arn:aws:iam::{}:role/tagwarden", self.account)])
    }

    fn controller(&self) -> String {
        format!("arn:aws:sts::{}:assumed-role/aws-load-balancer-controller/1700000000", self.account)
    }

    /// A CloudTrail fixture for the target group, made by `caller`, as one SQS batch.
    fn batch(&self, fixture: &str, caller: &str) -> String {
        let path = format!("{}/tests/fixtures/events/aws/{fixture}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).expect("fixture");
        let body = text
            .replace(FIXTURE_TG, &self.tg)
            .replace(FIXTURE_CALLER, caller)
            .replace("111122223333", &self.account)
            .replace("eu-west-1", "us-east-1");
        json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs", "body": body}]}).to_string()
    }

    /// What the controller does after every write: removes the key it did not put there.
    async fn controller_removes(&self, key: &str) {
        self.clients.elbv2.remove_tags().resource_arns(&self.tg).tag_keys(key).send().await.expect("remove tags");
    }

    async fn tags(&self) -> tagwarden::TagMap {
        let r = ResourceRef::from_arn(&self.tg).expect("arn");
        Tagger::new(self.clients.clone()).read(&r).await.expect("read")
    }

    fn add_tags(&self) -> u64 {
        self.clients.calls.get("Elastic Load Balancing v2:AddTags")
    }
}

/// The `Contested` EMF count of an invocation's lines.
fn contested_metric(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("Contested").and_then(Value::as_u64))
        .sum()
}

#[tokio::test]
async fn a_controller_that_removes_the_key_is_out_waited_then_reported_and_ordinary_drift_still_corrected() {
    let env = Env::new().await;
    let engine = env.engine();
    let lbc = env.controller();
    // The target group's creation: the first tagging, not a correction.
    let create = env.batch("elbv2-create-target-group", &lbc);
    let inv = function::handle(&engine, create).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    assert_eq!((env.tags().await["team"].as_str(), env.add_tags()), ("platform", 1));

    // The controller removes `team` after every write; each removal's CloudTrail event comes back.
    let remove = env.batch("elbv2-remove-tags", &lbc);
    for round in 1..=CORRECTIONS + 3 {
        env.controller_removes("team").await;
        env.clients.calls.reset();
        let before = env.add_tags();
        let inv = function::handle(&engine, remove.clone()).await;
        let calls = env.clients.calls.snapshot();
        println!("CONTESTED round {round}: {calls:?}");
        assert!(inv.error.is_none(), "round {round}: {:?}", inv.error);
        assert_eq!(inv.response, json!({"batchItemFailures": []}), "round {round}: a contest is not retried");
        let wrote = env.add_tags() - before;
        if round <= CORRECTIONS {
            assert_eq!(wrote, 1, "round {round}: corrected");
            assert_eq!(env.tags().await["team"], "platform");
            assert_eq!(contested_metric(&inv.lines), 0, "round {round}");
        } else {
            assert_eq!(wrote, 0, "round {round}: a contested key costs no write");
            if round > CORRECTIONS + 1 {
                // Marked in the report once; after that the instance's copy holds it back.
                assert_eq!(calls.get("S3:PutObject"), None, "round {round}: nothing more to keep: {calls:?}");
            }
            assert!(!env.tags().await.contains_key("team"));
            assert_eq!(contested_metric(&inv.lines), 1, "round {round}: counted in the metric: {:?}", inv.lines);
            let record = inv.lines.iter().find(|l| l.contains("\"status\":\"contested\"")).expect("a contested record");
            assert!(record.contains("tagwarden status --lift"), "{record}");
        }
    }

    // The status report names the resource, the key and the controller's role.
    let report = tagwarden::status_store::read(&engine.store, None).await.expect("read").expect("a report");
    let contested: Vec<_> = report.contests.iter().filter(|c| c.is_contested()).collect();
    assert_eq!(contested.len(), 1, "{:?}", report.contests);
    assert_eq!((contested[0].resource.as_str(), contested[0].key.as_str()), (env.tg.as_str(), "team"));
    assert_eq!(contested[0].writer(), lbc);

    // An ordinary drift on another key, by a person: corrected at once, the contest untouched.
    let user = format!("arn:aws:iam::{}:user/bob", env.account);
    let tag = tagwarden::aws::sdk::elbv2::types::Tag::builder().key("env").value("staging").build();
    env.clients.elbv2.add_tags().resource_arns(&env.tg).tags(tag).send().await.expect("edit");
    env.clients.calls.reset();
    let before = env.add_tags();
    let inv = function::handle(&engine, env.batch("elbv2-add-tags", &user)).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    assert_eq!((env.add_tags() - before, env.tags().await["env"].as_str()), (1, "prod"));
    assert!(!env.tags().await.contains_key("team"), "the contested key is still not written");

    // The operator settles the fight and lifts the contest: corrected again, counted anew.
    let lifted = tagwarden::status_store::lift_contests(&engine.store, None, &env.tg, Some("team")).await;
    assert_eq!(lifted, Ok(1));
    let fresh = env.engine();
    let before = env.add_tags();
    function::handle(&fresh, remove.clone()).await;
    assert_eq!((env.add_tags() - before, env.tags().await["team"].as_str()), (1, "platform"));

    // Contested again after the count; then a new policy version lifts it.
    for _ in 0..CORRECTIONS + 1 {
        env.controller_removes("team").await;
        function::handle(&fresh, remove.clone()).await;
    }
    assert!(!env.tags().await.contains_key("team"), "contested again");
    env.publish(&policy("platform-2")).await;
    let before = env.add_tags();
    let inv = function::handle(&fresh, remove.clone()).await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    assert_eq!((env.add_tags() - before, env.tags().await["team"].as_str()), (1, "platform-2"));
}

/// The count lives in the status report: a cold start (a new engine, nothing in memory) carries
/// on from it, and a sweep neither counts nor writes a contested key.
#[tokio::test]
async fn the_count_outlives_the_instance_and_a_sweep_holds_a_contested_key() {
    let env = Env::new().await;
    let lbc = env.controller();
    function::handle(&env.engine(), env.batch("elbv2-create-target-group", &lbc)).await;
    let remove = env.batch("elbv2-remove-tags", &lbc);
    for _ in 0..CORRECTIONS + 1 {
        env.controller_removes("team").await;
        // Every round a new instance: only the report remembers.
        function::handle(&env.engine(), remove.clone()).await;
    }
    assert!(!env.tags().await.contains_key("team"), "contested across instances");
    let engine = env.engine();
    let before = env.add_tags();
    let out = engine.sweep(false, None, None).await;
    assert_eq!(env.add_tags() - before, 0, "the sweep holds it: {:?}", out.records);
    let record = out.records.iter().find(|r| r.resource == env.tg).expect("swept");
    assert_eq!((record.status.as_str(), record.contested.as_slice()), ("contested", ["team".to_string()].as_slice()));
    // The sweep's own report keeps the contest.
    let report = tagwarden::status_store::read(&engine.store, None).await.expect("read").expect("a report");
    assert!(report.contests.iter().any(|c| c.is_contested() && c.key == "team"), "{:?}", report.contests);
}
