//! Never fight another controller, on moto through the Lambda's SQS-batch path: the AWS Load
//! Balancer Controller removes every tag it did not put on its target groups ("unsolicited tags are
//! removed", aws-load-balancer-operator's API). tagwarden yields to it (its role matches the
//! default `TAGWARDEN_YIELD_TO`): it corrects the key `tagwarden::contest::CORRECTIONS` times, then
//! holds it back for an hour, reports the key contested naming the controller's role, and makes no
//! further write of it until the hold ends; then it corrects again, and holds twice as long if the
//! fight goes on. Anybody else removing the key is drift, corrected every time. The state is kept
//! in its own object (`_tagwarden/contests/<infraID>.json`), never read from the status report: a
//! contest forged into the report changes nothing. An operator's `--lift` (recorded with who) or a
//! policy change lets it correct again at once.
use crate::support;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::{Clients, Tagger};
use tagwarden::contest::{ContestState, CORRECTIONS, FIRST_HOLD_SECS};
use tagwarden::enforce::Engine;
use tagwarden::resource::ResourceRef;
use tagwarden::retry::Backoff;

const OWNER: &str = "kubernetes.io/cluster/mycluster-7xk2p";
const FIXTURE_TG: &str = "arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web-tg/73e2d6bc24d8a067";
const FIXTURE_CALLER: &str = "arn:aws:iam::111122223333:user/ci-deployer";
const INFRA_ID: &str = "mycluster-7xk2p";

fn policy(team: &str) -> String {
    format!("version: 1\ninfraID: mycluster-7xk2p\ntags:\n  team: {team}\n  env: prod\n",)
}

struct Env {
    clients: Clients,
    account: String,
    bucket: String,
    tg: String,
    /// The engines' clock, seconds since the epoch: the tests move it past a hold.
    now: Arc<AtomicU64>,
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
        let now = Arc::new(AtomicU64::new(tagwarden::report::epoch_ms() / 1000));
        let env = Env { clients, account, bucket, tg, now };
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
        let mut engine = Engine::new(tagger, store, vec![format!("arn:aws:iam::{}:role/tagwarden", self.account)]);
        let now = self.now.clone();
        engine.clock = Arc::new(move || now.load(Ordering::Relaxed));
        engine
    }

    /// The contest state as the function keeps it, apart from the status report.
    async fn state(&self) -> ContestState {
        let key = format!("_tagwarden/contests/{INFRA_ID}.json");
        match self.clients.s3.get_object().bucket(&self.bucket).key(&key).send().await {
            Ok(o) => {
                let body = o.body.collect().await.expect("body").into_bytes();
                serde_json::from_slice(&body).expect("a contest state")
            }
            Err(_) => ContestState::default(),
        }
    }

    /// Remove `key` as `caller` after every write, `rounds` times, each removal's CloudTrail event
    /// handled by `engine`: what each round wrote, and the invocations' Contested counts.
    async fn fight(&self, engine: &Engine<Tagger>, key: &str, caller: &str, rounds: usize) -> (Vec<u64>, u64) {
        let remove = self.batch("elbv2-remove-tags", caller);
        let (mut wrote, mut contested) = (Vec::new(), 0);
        for _ in 0..rounds {
            self.controller_removes(key).await;
            let before = self.add_tags();
            let inv = function::handle(engine, remove.clone()).await;
            assert!(inv.error.is_none(), "{:?}", inv.error);
            wrote.push(self.add_tags() - before);
            contested += contested_metric(&inv.lines);
        }
        (wrote, contested)
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

    // The operator settles the fight and lifts the contest: corrected again, counted anew; the
    // lift is recorded in the state with who and when, and shown in the report.
    let operator = format!("arn:aws:sts::{}:assumed-role/platform-admin/jane", env.account);
    let at = env.now.load(Ordering::Relaxed);
    let lifted =
        tagwarden::status_store::lift_contests(&engine.store, None, INFRA_ID, &env.tg, Some("team"), &operator, at)
            .await;
    assert_eq!(lifted, Ok(1));
    let state = env.state().await;
    assert_eq!((state.lifts.len(), state.lifts[0].by.as_str(), state.lifts[0].at), (1, operator.as_str(), at));
    let report = tagwarden::status_store::read(&engine.store, None).await.expect("read").expect("a report");
    assert_eq!(report.lifts, state.lifts, "the report shows the lift");
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

/// The count lives in the contest state: a cold start (a new engine, nothing in memory) carries on
/// from it, and a sweep neither counts nor writes a contested key.
#[tokio::test]
async fn the_count_outlives_the_instance_and_a_sweep_holds_a_contested_key() {
    let env = Env::new().await;
    let lbc = env.controller();
    function::handle(&env.engine(), env.batch("elbv2-create-target-group", &lbc)).await;
    let remove = env.batch("elbv2-remove-tags", &lbc);
    for _ in 0..CORRECTIONS + 1 {
        env.controller_removes("team").await;
        // Every round a new instance: only the contest state remembers.
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

/// An ordinary principal removing a managed key ten times in an hour: corrected ten times, never
/// contested, nothing counted; an assumed role that is not a yielded-to controller likewise.
#[tokio::test]
async fn an_ordinary_principal_removing_a_key_is_corrected_every_time() {
    let env = Env::new().await;
    let engine = env.engine();
    function::handle(&engine, env.batch("elbv2-create-target-group", &env.controller())).await;
    for caller in [
        format!("arn:aws:iam::{}:user/alice", env.account),
        format!("arn:aws:sts::{}:assumed-role/developer/alice", env.account),
    ] {
        let (wrote, contested) = env.fight(&engine, "team", &caller, 10).await;
        assert_eq!((wrote, contested), (vec![1; 10], 0), "{caller}: corrected every time");
        assert_eq!(env.tags().await["team"], "platform");
    }
    assert!(env.state().await.contests.is_empty(), "nothing counted: {:?}", env.state().await);
}

/// The load balancer controller's role: contested after the count (metric, report naming the
/// writer), held for an hour, then corrected again; fought again, held twice as long.
#[tokio::test]
async fn the_controller_is_held_then_retried_with_back_off() {
    let env = Env::new().await;
    let engine = env.engine();
    let lbc = env.controller();
    function::handle(&engine, env.batch("elbv2-create-target-group", &lbc)).await;
    let (wrote, contested) = env.fight(&engine, "team", &lbc, CORRECTIONS + 2).await;
    let mut want = vec![1; CORRECTIONS];
    want.extend([0, 0]);
    assert_eq!((wrote, contested), (want, 2), "held after the count, and alarmed");
    let state = env.state().await;
    let c = state.contests.iter().find(|c| c.is_contested()).expect("contested in the state");
    assert_eq!((c.key.as_str(), c.writer(), c.holds), ("team", lbc.as_str(), 1));
    let until = c.hold_until.expect("a hold");
    assert_eq!(until - c.contested_since.unwrap_or_default(), FIRST_HOLD_SECS);
    let report = tagwarden::status_store::read(&engine.store, None).await.expect("read").expect("a report");
    assert_eq!(report.contests, state.contests, "the report shows the state");

    // The hour passes (a new instance, so nothing kept in memory): corrected again, then held for two.
    env.now.store(until, Ordering::Relaxed);
    let engine = env.engine();
    let (wrote, _) = env.fight(&engine, "team", &lbc, CORRECTIONS + 1).await;
    let mut want = vec![1; CORRECTIONS];
    want.push(0);
    assert_eq!(wrote, want, "retried after the hold");
    let state = env.state().await;
    let c = state.contests.iter().find(|c| c.is_contested()).expect("contested again");
    assert_eq!(
        (c.holds, c.hold_until.unwrap_or_default() - c.contested_since.unwrap_or_default()),
        (2, 2 * FIRST_HOLD_SECS)
    );
}

/// A contest forged into the status report (which the cluster's publisher can write): the next
/// events and sweep still write the key, and nothing fails.
#[tokio::test]
async fn a_contest_forged_into_the_report_changes_nothing() {
    let env = Env::new().await;
    let engine = env.engine();
    function::handle(&engine, env.batch("elbv2-create-target-group", &env.controller())).await;
    let swept = engine.sweep(false, None, None).await;
    assert!(swept.records.iter().all(|r| r.status.as_str() != "failed"), "{:?}", swept.records);
    // The forger adds an entry to the report as the function writes it, under the policy in force.
    let mut report = tagwarden::status_store::read(&engine.store, None).await.expect("read").expect("a report");
    let fingerprint =
        engine.store.policies(false).await.0.expect("policy").iter().next().expect("one").fingerprint.clone();
    report.contests.push(tagwarden::contest::Contest {
        resource: env.tg.clone(),
        key: "team".into(),
        policy: fingerprint,
        corrections: vec![1, 2, 3],
        writer: Some(env.controller()),
        contested_since: Some(env.now.load(Ordering::Relaxed)),
        hold_until: Some(u64::MAX / 2),
        holds: 30,
    });
    let key = "tagwarden-status.json";
    let text = serde_json::to_string(&report).expect("json");
    env.clients
        .s3
        .put_object()
        .bucket(&env.bucket)
        .key(key)
        .body(text.into_bytes().into())
        .send()
        .await
        .expect("forge");

    // A cold start and a warm one alike: the sweep writes the key, failed 0.
    for engine in [env.engine(), engine] {
        env.controller_removes("team").await;
        let before = env.add_tags();
        let out = engine.sweep(false, None, None).await;
        assert!(out.records.iter().all(|r| r.status.as_str() != "failed"), "{:?}", out.records);
        assert_eq!(env.add_tags() - before, 1, "written: {:?}", out.records);
        assert_eq!(env.tags().await["team"], "platform");
    }
    // And an ordinary change is corrected too.
    let (wrote, _) = env.fight(&env.engine(), "team", &format!("arn:aws:iam::{}:user/alice", env.account), 2).await;
    assert_eq!(wrote, [1, 1]);
    // The sweep's report shows the state again: the forged entry is gone.
    let report = tagwarden::status_store::read(&env.engine().store, None).await.expect("read").expect("a report");
    assert!(report.contests.iter().all(|c| !c.is_contested()), "{:?}", report.contests);
}

/// With the policy in SSM, the contest state is the parameter `/_tagwarden/contests/<infraID>`,
/// apart from the policy's and the report's: the load balancer controller is held after the count.
#[tokio::test]
async fn with_the_policy_in_ssm_the_state_is_its_own_parameter() {
    let env = Env::new().await;
    let name = format!("/tagwarden-{}/policy", env.account);
    let put = env.clients.ssm.put_parameter().name(&name).value(policy("platform"));
    put.r#type(tagwarden::aws::sdk::ssm::types::ParameterType::String).send().await.expect("policy parameter");
    let location = format!("ssm:{name}").parse::<PolicyLocation>().expect("location");
    let mut engine = Engine::new(
        Tagger::new(env.clients.clone()),
        policy_store(&env.clients, location, Duration::ZERO),
        vec![format!("arn:aws:iam::{}:role/tagwarden", env.account)],
    );
    let now = env.now.clone();
    engine.clock = Arc::new(move || now.load(Ordering::Relaxed));
    let lbc = env.controller();
    function::handle(&engine, env.batch("elbv2-create-target-group", &lbc)).await;
    let (wrote, _) = env.fight(&engine, "team", &lbc, CORRECTIONS + 1).await;
    assert_eq!(wrote.iter().sum::<u64>(), CORRECTIONS as u64, "{wrote:?}");
    let got = env.clients.ssm.get_parameter().name(format!("/_tagwarden/contests/{INFRA_ID}")).send().await;
    let text = got.expect("the state parameter").parameter().and_then(|p| p.value()).unwrap_or_default().to_string();
    let state: ContestState = serde_json::from_str(&text).expect("a contest state");
    assert!(state.contests.iter().any(|c| c.is_contested() && c.key == "team"), "{state:?}");
}
