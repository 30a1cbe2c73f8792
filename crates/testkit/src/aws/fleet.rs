//! A fleet of real resources in moto, the CloudTrail events that name them, a simulated SQS queue
//! in front of the Lambda handler (partial batch failures, redelivery, `maxReceiveCount`, a
//! dead-letter queue that keeps the original body) and the final check of every resource.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use aws_sdk_sts::config::Credentials;
use serde_json::{json, Value};
use tagwarden_aws::function;
use tagwarden_aws::policy_store::{policy_store, PolicyLocation};
use tagwarden_aws::Clients;
use tagwarden_aws::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::enforce::Engine;
use tagwarden_engine::retry::Backoff;

pub use crate::Rng;

pub const INFRA: &str = "mycluster-7xk2p";
pub const OWNER: &str = "kubernetes.io/cluster/mycluster-7xk2p";
pub const OWN_ROLE: &str = "tagdrift-reconciler-role";

/// An Infrastructure object with these status tags.
pub fn infrastructure(status: &[(&str, &str)]) -> String {
    let list: Vec<Value> = status.iter().map(|(k, v)| json!({"key": k, "value": v})).collect();
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "status": {"infrastructureName": INFRA, "platformStatus": {"type": "AWS", "aws": {"region": "us-east-1", "resourceTags": list}}},
    })
    .to_string()
}

pub fn tags(pairs: &[(&str, &str)]) -> TagMap {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Resources, by whether the cluster owns them, with the tags each started with.
#[derive(Debug, Default)]
pub struct Fleet {
    pub owned: Vec<ResourceRef>,
    pub foreign: Vec<ResourceRef>,
    pub initial: BTreeMap<String, TagMap>,
}

pub struct FleetSpec {
    pub instances: usize,
    pub foreign_instances: usize,
    pub buckets: usize,
    pub roles: usize,
    pub target_groups: usize,
}

fn ec2_tags(pairs: &[(&str, &str)]) -> Vec<tagwarden_aws::sdk::ec2::types::Tag> {
    pairs.iter().map(|(k, v)| tagwarden_aws::sdk::ec2::types::Tag::builder().key(*k).value(*v).build()).collect()
}

impl Fleet {
    /// Create the resources through `c` (direct to moto). Every other owned resource starts
    /// drifted (`team=someone-else`); every resource has an unmanaged tag that must survive.
    pub async fn create(c: &Clients, account: &str, spec: &FleetSpec) -> Fleet {
        let mut fleet = Fleet::default();
        let image = c.ec2.describe_images().send().await.expect("images");
        let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
        let run = |n: usize, pairs: Vec<(&'static str, &'static str)>| {
            let image = image.clone();
            async move {
                let mut ids = Vec::new();
                let mut left = n;
                while left > 0 {
                    let count = left.min(500) as i32;
                    let spec = tagwarden_aws::sdk::ec2::types::TagSpecification::builder()
                        .resource_type(tagwarden_aws::sdk::ec2::types::ResourceType::Instance)
                        .set_tags(Some(ec2_tags(&pairs)))
                        .build();
                    let out = c
                        .ec2
                        .run_instances()
                        .image_id(&image)
                        .min_count(count)
                        .max_count(count)
                        .tag_specifications(spec)
                        .send()
                        .await
                        .expect("run instances");
                    ids.extend(out.instances().iter().filter_map(|i| i.instance_id()).map(str::to_owned));
                    left -= count as usize;
                }
                ids
            }
        };
        let half = spec.instances / 2;
        for (n, pairs) in [
            (half, vec![(OWNER, "owned"), ("Name", "web"), ("team", "someone-else")]),
            (spec.instances - half, vec![(OWNER, "owned"), ("Name", "web")]),
        ] {
            for id in run(n, pairs.clone()).await {
                let r = ResourceRef::ec2(&id, "us-east-1", account);
                fleet.initial.insert(r.id.clone(), tags(&pairs));
                fleet.owned.push(r);
            }
        }
        let foreign = vec![("Name", "not-ours"), ("team", "foreign")];
        for id in run(spec.foreign_instances, foreign.clone()).await {
            let r = ResourceRef::ec2(&id, "us-east-1", account);
            fleet.initial.insert(r.id.clone(), tags(&foreign));
            fleet.foreign.push(r);
        }
        for i in 0..spec.buckets {
            let name = format!("data-{account}-{i}");
            c.s3.create_bucket().bucket(&name).send().await.expect("bucket");
            let pairs = if i % 2 == 0 {
                vec![(OWNER, "owned"), ("keep", "me"), ("team", "someone-else")]
            } else {
                vec![(OWNER, "owned"), ("keep", "me")]
            };
            let set: Vec<_> = pairs
                .iter()
                .map(|(k, v)| tagwarden_aws::sdk::s3::types::Tag::builder().key(*k).value(*v).build().expect("tag"))
                .collect();
            c.s3.put_bucket_tagging()
                .bucket(&name)
                .tagging(
                    tagwarden_aws::sdk::s3::types::Tagging::builder().set_tag_set(Some(set)).build().expect("tagging"),
                )
                .send()
                .await
                .expect("bucket tags");
            let r = ResourceRef::s3_bucket(&name, "us-east-1");
            fleet.initial.insert(r.id.clone(), tags(&pairs));
            fleet.owned.push(r);
        }
        for i in 0..spec.roles {
            let name = format!("role-{i}");
            let pairs = vec![(OWNER, "owned"), ("keep", "me")];
            let out = c
                .iam
                .create_role()
                .role_name(&name)
                .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
                .set_tags(Some(
                    pairs
                        .iter()
                        .map(|(k, v)| {
                            tagwarden_aws::sdk::iam::types::Tag::builder().key(*k).value(*v).build().expect("tag")
                        })
                        .collect(),
                ))
                .send()
                .await
                .expect("role");
            let r = ResourceRef::from_arn(out.role().expect("role").arn()).expect("role arn");
            fleet.initial.insert(r.id.clone(), tags(&pairs));
            fleet.owned.push(r);
        }
        if spec.target_groups > 0 {
            let vpc = c.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.expect("vpc");
            let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id").to_string();
            for i in 0..spec.target_groups {
                let pairs = vec![(OWNER, "owned"), ("keep", "me")];
                let out = c
                    .elbv2
                    .create_target_group()
                    .name(format!("tg-{i}"))
                    .protocol(tagwarden_aws::sdk::elbv2::types::ProtocolEnum::Http)
                    .port(80)
                    .vpc_id(&vpc_id)
                    .set_tags(Some(
                        pairs
                            .iter()
                            .map(|(k, v)| tagwarden_aws::sdk::elbv2::types::Tag::builder().key(*k).value(*v).build())
                            .collect(),
                    ))
                    .send()
                    .await
                    .expect("target group");
                let arn = out.target_groups()[0].target_group_arn().expect("arn");
                let r = ResourceRef::from_arn(arn).expect("tg arn");
                fleet.initial.insert(r.id.clone(), tags(&pairs));
                fleet.owned.push(r);
            }
        }
        fleet
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceRef> {
        self.owned.iter().chain(&self.foreign)
    }

    /// Re-read every resource and compare with the policy: an owned resource must carry
    /// `desired` (where `must_be_applied`) or, at worst, still its initial value of a managed key;
    /// every unmanaged tag must be unchanged; a foreign resource must be exactly as it was.
    /// Returns the wrong values found, and how many owned resources carry `desired`.
    pub async fn check(
        &self,
        tagger: &Tagger,
        desired: &TagMap,
        must_be_applied: &dyn Fn(&ResourceRef) -> bool,
    ) -> (Vec<String>, usize) {
        let mut wrong = Vec::new();
        let mut applied = 0;
        for r in &self.owned {
            let now = tagger.read(r).await.expect("read back");
            let initial = &self.initial[&r.id];
            let fully = desired.iter().all(|(k, v)| now.get(k) == Some(v));
            if fully {
                applied += 1;
            }
            for (k, v) in desired {
                let ok = now.get(k) == Some(v) || (!must_be_applied(r) && now.get(k) == initial.get(k));
                if !ok {
                    wrong.push(format!("{r}: {k}={:?}, want {v:?} (initially {:?})", now.get(k), initial.get(k)));
                }
            }
            for (k, v) in initial.iter().filter(|(k, _)| !desired.contains_key(*k)) {
                if now.get(k) != Some(v) {
                    wrong.push(format!("{r}: unmanaged {k}={:?}, was {v:?}", now.get(k)));
                }
            }
        }
        for r in &self.foreign {
            let now = tagger.read(r).await.expect("read back");
            if now != self.initial[&r.id] {
                wrong.push(format!("{r} is not owned, yet its tags changed: {now:?}"));
            }
        }
        (wrong, applied)
    }
}

fn fixture(name: &str) -> String {
    let path = crate::workspace::workspace_root().join(format!("tests/fixtures/events/aws/{name}.json"));
    std::fs::read_to_string(path).expect("fixture")
}

/// Test-speed client settings: the SDK's standard retry (5 attempts, as deployed) with a short
/// backoff, and short timeouts so an injected delay costs about a second, not minutes.
pub fn fast_loader(endpoint: &str, attempt_timeout: Duration) -> aws_config::ConfigLoader {
    use aws_config::retry::RetryConfig;
    use aws_config::timeout::TimeoutConfig;
    tagwarden_aws::config_loader()
        .expect("network settings")
        .endpoint_url(endpoint)
        .region(aws_sdk_sts::config::Region::new("us-east-1"))
        .retry_config(
            RetryConfig::standard()
                .with_max_attempts(5)
                .with_initial_backoff(Duration::from_millis(10))
                .with_max_backoff(Duration::from_millis(200)),
        )
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_attempt_timeout(attempt_timeout)
                .operation_timeout(attempt_timeout * 6)
                .build(),
        )
}

/// A fresh account, with two sets of clients: `via` sends everything to `endpoint` (a fault proxy
/// in front of moto) with [`fast_loader`] settings; `direct` talks to moto itself (set-up, checks).
pub async fn account_via(endpoint: &str, attempt_timeout: Duration) -> (Clients, Clients, String) {
    let (direct, account, env) = super::account_with_env().await;
    let var = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()).expect(k);
    let creds = Credentials::new(
        var("AWS_ACCESS_KEY_ID"),
        var("AWS_SECRET_ACCESS_KEY"),
        Some(var("AWS_SESSION_TOKEN")),
        None,
        "assumed",
    );
    let config = fast_loader(endpoint, attempt_timeout).credentials_provider(creds).load().await;
    (Clients::new(&config), direct, account)
}

/// A real-shaped CloudTrail event (from the fixtures) by someone else, naming `r`.
pub fn event_for(r: &ResourceRef, account: &str, id: &str) -> String {
    let text = match r.kind.as_str() {
        k if k.starts_with("ec2:") => fixture("ec2-create-tags-console")
            .replace("i-0123456789abcdef0", &r.id)
            .replace("vol-0123456789abcdef0", &r.id),
        "s3:bucket" => fixture("s3-put-bucket-tagging").replace("acme-data-eu", &r.id),
        "iam:role" => fixture("iam-tag-role").replace("app-task-role", &r.id),
        k if k.starts_with("elasticloadbalancing:") => fixture("elbv2-add-tags")
            .replace(
                "arn:aws:elasticloadbalancing:eu-west-1:111122223333:loadbalancer/app/web-alb/50dc6c495c0c9188",
                &r.id,
            )
            .replace("arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web-tg/73e2d6bc24d8a067", &r.id),
        other => panic!("no event template for {other}"),
    };
    let mut v: Value =
        serde_json::from_str(&text.replace("111122223333", account).replace("eu-west-1", "us-east-1")).expect("json");
    v["id"] = json!(id);
    v.to_string()
}

/// A policy bucket holding `doc` as `p.json`, made through `c` (direct to moto); its location.
pub async fn publish_policy(c: &Clients, account: &str, doc: &str) -> String {
    let bucket = format!("policy-{account}");
    c.s3.create_bucket().bucket(&bucket).send().await.expect("policy bucket");
    c.s3.put_object().bucket(&bucket).key("p.json").body(doc.as_bytes().to_vec().into()).send().await.expect("policy");
    format!("s3://{bucket}/p.json")
}

/// An engine over `clients` reading `s3://bucket/key`, re-checking the policy on every event.
pub fn reconciler(clients: &Clients, account: &str, location: &str, ttl: Duration) -> Engine<Tagger> {
    let store = policy_store(clients, location.parse::<PolicyLocation>().expect("location"), ttl);
    let mut tagger = Tagger::new(clients.clone());
    tagger.not_found = Backoff { attempts: 3, first: Duration::from_millis(10), max: Duration::from_millis(40) };
    Engine::new(tagger, store, vec![format!("arn:aws:iam::{account}:role/{OWN_ROLE}")])
}

/// SQS in front of the Lambda: batches of up to 10, `batchItemFailures` redelivered until
/// `max_receive` receives, then moved to the dead-letter queue with the original body.
pub struct Sqs {
    pub max_receive: u32,
    pub batch: usize,
    queue: VecDeque<(String, String, u32)>,
    pub sent: BTreeMap<String, String>,
    pub done: BTreeMap<String, u32>,
    pub dead: Vec<(String, String)>,
    pub receives: u64,
    pub invocations: u64,
}

impl Sqs {
    pub fn new(max_receive: u32, batch: usize) -> Self {
        Sqs {
            max_receive,
            batch,
            queue: VecDeque::new(),
            sent: BTreeMap::new(),
            done: BTreeMap::new(),
            dead: Vec::new(),
            receives: 0,
            invocations: 0,
        }
    }

    pub fn send(&mut self, id: &str, body: String) {
        self.sent.insert(id.to_string(), body.clone());
        self.queue.push_back((id.to_string(), body, 0));
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Receive one batch (each message's receive count goes up).
    pub fn receive(&mut self) -> Vec<(String, String, u32)> {
        let n = self.batch.min(self.queue.len());
        let batch: Vec<_> = self.queue.drain(..n).map(|(id, b, c)| (id, b, c + 1)).collect();
        self.receives += batch.len() as u64;
        batch
    }

    pub fn payload(batch: &[(String, String, u32)]) -> Value {
        let records: Vec<Value> = batch
            .iter()
            .map(|(id, body, count)| {
                json!({"messageId": id, "eventSource": "aws:sqs", "body": body,
                       "attributes": {"ApproximateReceiveCount": count.to_string()}})
            })
            .collect();
        json!({"Records": records})
    }

    /// Settle a batch with the handler's response: failures go back (or to the DLQ).
    pub fn settle(&mut self, batch: Vec<(String, String, u32)>, response: &Value) {
        let failed: Vec<&str> = response["batchItemFailures"]
            .as_array()
            .expect("an SQS batch is answered with batchItemFailures")
            .iter()
            .filter_map(|f| f["itemIdentifier"].as_str())
            .collect();
        for (id, body, count) in batch {
            if !failed.contains(&id.as_str()) {
                self.done.insert(id, count);
            } else if count >= self.max_receive {
                self.dead.push((id, body));
            } else {
                self.queue.push_back((id, body, count));
            }
        }
    }

    /// Drain the queue through the handler, one batch at a time.
    pub async fn drain(&mut self, rec: &Engine<Tagger>) {
        while !self.is_empty() {
            let batch = self.receive();
            let inv = function::handle(rec, Self::payload(&batch).to_string()).await;
            self.invocations += 1;
            assert!(inv.error.is_none(), "an SQS batch invocation itself never fails: {:?}", inv.error);
            self.settle(batch, &inv.response);
        }
    }

    /// Messages received more than once.
    pub fn redelivered(&self) -> usize {
        self.done.values().filter(|c| **c > 1).count() + self.dead.len()
    }
}
