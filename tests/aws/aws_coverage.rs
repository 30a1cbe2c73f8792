//! Every resource the cluster owns: one owned resource of each covered type, with
//! drift, in moto behind the strict layer. The sweep and the event path bring all of them in line
//! at the first run and write nothing at the second; nothing owned is dropped.

#![cfg(feature = "aws")]

use crate::{fleet, support};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use fleet::{infrastructure, reconciler, tags, INFRA, OWNER};
use serde_json::{json, Value};
use tagwarden::aws::sdk::{elb, elbv2, kms, route53, sns};
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::events;
use tagwarden::report::Status;
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

const DESIRED: &[(&str, &str)] = &[("team", "platform"), ("env", "prod")];

/// The ownership tag plus one unmanaged tag and one drifted managed tag.
const START: &[(&str, &str)] = &[(OWNER, "owned"), ("keep", "1"), ("team", "legacy")];

struct Fleet {
    clients: Clients,
    account: String,
    location: String,
    vars: Vec<(&'static str, String)>,
    owned: Vec<ResourceRef>,
}

/// EFS has no SDK client in tagwarden (it is written through the Tagging API): made with boto3
/// from the pinned moto venv, in the same account.
fn efs(vars: &[(&'static str, String)]) -> (String, String) {
    let py = support::workspace_root().join(".tools/venv/bin/python");
    let script = format!(
        r#"
import boto3, json
c = boto3.client("efs", region_name="us-east-1")
tags = [{{"Key": k, "Value": v}} for k, v in {start}]
fs = c.create_file_system(CreationToken="cov", Tags=tags)
ap = c.create_access_point(FileSystemId=fs["FileSystemId"], Tags=tags)
print(json.dumps([fs["FileSystemArn"], ap["AccessPointArn"]]))
"#,
        start = serde_json::to_string(&START.iter().map(|(k, v)| (k, v)).collect::<Vec<_>>()).expect("json")
    );
    let out = Command::new(py).arg("-c").arg(script).envs(vars.iter().cloned()).output().expect("python");
    assert!(out.status.success(), "boto3 efs: {}", String::from_utf8_lossy(&out.stderr));
    let arns: Vec<String> = serde_json::from_slice(&out.stdout).expect("arns");
    (arns[0].clone(), arns[1].clone())
}

impl Fleet {
    async fn new() -> Self {
        let (clients, account, vars) = support::account_with_env().await;
        let bucket = format!("policy-{account}");
        clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
        let policy = infrastructure(DESIRED);
        clients.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("p");
        let location = format!("s3://{bucket}/p.json");
        let mut f = Fleet { clients, account, location, vars, owned: Vec::new() };
        f.build().await;
        f
    }

    async fn build(&mut self) {
        let c = &self.clients;
        let (region, account) = ("us-east-1", self.account.clone());
        let ec2_tags: Vec<_> = START
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::ec2::types::Tag::builder().key(*k).value(*v).build())
            .collect();
        let spec = |t| {
            tagwarden::aws::sdk::ec2::types::TagSpecification::builder()
                .resource_type(t)
                .set_tags(Some(ec2_tags.clone()))
                .build()
        };
        use tagwarden::aws::sdk::ec2::types::ResourceType;
        let vpc =
            c.ec2.create_vpc().cidr_block("10.20.0.0/16").tag_specifications(spec(ResourceType::Vpc)).send().await;
        let vpc = vpc.expect("vpc").vpc().and_then(|v| v.vpc_id()).expect("vpc id").to_string();
        self.owned.push(ResourceRef::ec2(&vpc, region, &account));
        let mut subnets = Vec::new();
        for (i, az) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
            let s = c.ec2.create_subnet().vpc_id(&vpc).cidr_block(format!("10.20.{i}.0/24")).availability_zone(*az);
            let s = s.send().await.expect("subnet");
            subnets.push(s.subnet().and_then(|s| s.subnet_id()).expect("subnet id").to_string());
        }

        // Classic load balancer: OpenShift's default ingress on AWS.
        let clb_tags: Vec<_> =
            START.iter().map(|(k, v)| elb::types::Tag::builder().key(*k).value(*v).build().expect("tag")).collect();
        let listener = elb::types::Listener::builder().protocol("HTTP").load_balancer_port(80).instance_port(8080);
        c.elb
            .create_load_balancer()
            .load_balancer_name("cov-ingress")
            .listeners(listener.build().expect("listener"))
            .availability_zones("us-east-1a")
            .set_tags(Some(clb_tags))
            .send()
            .await
            .expect("classic load balancer");
        let clb = format!("arn:aws:elasticloadbalancing:{region}:{account}:loadbalancer/cov-ingress");
        self.owned.push(ResourceRef::from_arn(&clb).expect("arn"));

        // ELBv2: load balancer, target group, listener, rule.
        let v2_tags: Vec<_> =
            START.iter().map(|(k, v)| elbv2::types::Tag::builder().key(*k).value(*v).build()).collect();
        let lb = c
            .elbv2
            .create_load_balancer()
            .name("cov-api")
            .set_subnets(Some(subnets.clone()))
            .set_tags(Some(v2_tags.clone()))
            .send()
            .await
            .expect("alb");
        let lb = lb.load_balancers()[0].load_balancer_arn().expect("arn").to_string();
        let tg = c
            .elbv2
            .create_target_group()
            .name("cov-tg")
            .protocol(elbv2::types::ProtocolEnum::Http)
            .port(80)
            .vpc_id(&vpc)
            .set_tags(Some(v2_tags.clone()))
            .send()
            .await
            .expect("target group");
        let tg = tg.target_groups()[0].target_group_arn().expect("arn").to_string();
        let forward =
            elbv2::types::Action::builder().r#type(elbv2::types::ActionTypeEnum::Forward).target_group_arn(&tg).build();
        let listener = c
            .elbv2
            .create_listener()
            .load_balancer_arn(&lb)
            .protocol(elbv2::types::ProtocolEnum::Http)
            .port(80)
            .default_actions(forward.clone())
            .set_tags(Some(v2_tags.clone()))
            .send()
            .await
            .expect("listener");
        let listener = listener.listeners()[0].listener_arn().expect("arn").to_string();
        let condition = elbv2::types::RuleCondition::builder().field("path-pattern").values("/api/*").build();
        let rule = c
            .elbv2
            .create_rule()
            .listener_arn(&listener)
            .priority(10)
            .conditions(condition)
            .actions(forward)
            .set_tags(Some(v2_tags))
            .send()
            .await
            .expect("rule");
        let rule = rule.rules()[0].rule_arn().expect("arn").to_string();
        for arn in [&lb, &tg, &listener, &rule] {
            self.owned.push(ResourceRef::from_arn(arn).expect("arn"));
        }

        // Route 53: the installer's private hosted zone, and a health check.
        let r53_tags: Vec<_> =
            START.iter().map(|(k, v)| route53::types::Tag::builder().key(*k).value(*v).build()).collect();
        let vpc_ref =
            route53::types::Vpc::builder().vpc_id(&vpc).vpc_region(route53::types::VpcRegion::UsEast1).build();
        let zone = c
            .route53
            .create_hosted_zone()
            .name(format!("{INFRA}.example.com"))
            .caller_reference(format!("cov-{account}"))
            .vpc(vpc_ref)
            .send()
            .await
            .expect("hosted zone");
        let zone = zone.hosted_zone().map(|z| z.id().trim_start_matches("/hostedzone/").to_string()).expect("zone id");
        let check_config = route53::types::HealthCheckConfig::builder()
            .r#type(route53::types::HealthCheckType::Https)
            .fully_qualified_domain_name(format!("api.{INFRA}.example.com"))
            .port(443)
            .build()
            .expect("health check config");
        let check = c
            .route53
            .create_health_check()
            .caller_reference(format!("hc-{account}"))
            .health_check_config(check_config)
            .send()
            .await
            .expect("health check");
        let check = check.health_check().map(|h| h.id().to_string()).expect("check id");
        for (rtype, id, kind) in [
            (route53::types::TagResourceType::Hostedzone, &zone, "hostedzone"),
            (route53::types::TagResourceType::Healthcheck, &check, "healthcheck"),
        ] {
            c.route53
                .change_tags_for_resource()
                .resource_type(rtype)
                .resource_id(id)
                .set_add_tags(Some(r53_tags.clone()))
                .send()
                .await
                .expect("route53 tags");
            self.owned.push(ResourceRef::from_arn(&format!("arn:aws:route53:::{kind}/{id}")).expect("arn"));
        }

        // EFS: file system and access point (the generic path: TagResources).
        let (fs, ap) = efs(&self.vars);
        self.owned.push(ResourceRef::from_arn(&fs).expect("arn"));
        self.owned.push(ResourceRef::from_arn(&ap).expect("arn"));

        // KMS: a customer managed key, read and written through KMS's own API (crates/core/src/services/catalogue.rs).
        let kms_tags: Vec<_> = START
            .iter()
            .map(|(k, v)| kms::types::Tag::builder().tag_key(*k).tag_value(*v).build().expect("tag"))
            .collect();
        let key = c.kms.create_key().description("cov").set_tags(Some(kms_tags)).send().await.expect("kms key");
        let key = key.key_metadata().and_then(|m| m.arn()).expect("key arn").to_string();
        self.owned.push(ResourceRef::from_arn(&key).expect("arn"));

        // SNS: a topic, read and written through SNS's own API.
        let sns_tags: Vec<_> =
            START.iter().map(|(k, v)| sns::types::Tag::builder().key(*k).value(*v).build().expect("tag")).collect();
        let topic = c.sns.create_topic().name("cov-topic").set_tags(Some(sns_tags)).send().await.expect("topic");
        self.owned.push(ResourceRef::from_arn(topic.topic_arn().expect("topic arn")).expect("arn"));

        // S3 and IAM.
        let bucket = format!("cov-{account}");
        c.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
        let s3_tags = START
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::s3::types::Tag::builder().key(*k).value(*v).build().expect("tag"));
        let tagging = tagwarden::aws::sdk::s3::types::Tagging::builder()
            .set_tag_set(Some(s3_tags.collect()))
            .build()
            .expect("tagging");
        c.s3.put_bucket_tagging().bucket(&bucket).tagging(tagging).send().await.expect("bucket tags");
        self.owned.push(ResourceRef::s3_bucket(&bucket, region));
        let doc = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
        let iam_tags: Vec<_> = START
            .iter()
            .map(|(k, v)| tagwarden::aws::sdk::iam::types::Tag::builder().key(*k).value(*v).build().expect("tag"))
            .collect();
        let role = c.iam.create_role().role_name("cov-role").assume_role_policy_document(doc).set_tags(Some(iam_tags));
        let role = role.send().await.expect("role");
        self.owned.push(ResourceRef::from_arn(role.role().expect("role").arn()).expect("arn"));
    }

    async fn check(&self, what: &str) {
        let tagger = Tagger::new(self.clients.clone());
        for r in &self.owned {
            let now = tagger.read(r).await.expect("read back");
            let want: TagMap = tags(&[(OWNER, "owned"), ("keep", "1"), ("team", "platform"), ("env", "prod")]);
            assert_eq!(now, want, "{what}: {} ({})", r, r.kind);
        }
    }

    /// Drift every resource again, through tagwarden's own writer.
    async fn drift(&self) {
        let tagger = Tagger::new(self.clients.clone());
        for r in &self.owned {
            tagger.write(r, &tags(&[("team", "legacy")]), &tagger.read(r).await.expect("read")).await.expect("drift");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_owned_resource_is_enforced_by_sweep_and_events() {
    let fleet = Fleet::new().await;
    let kinds: BTreeMap<&str, usize> = fleet.owned.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.kind.as_str()).or_default() += 1;
        m
    });
    eprintln!("owned resources by type: {kinds:?}");
    let rec = reconciler(&fleet.clients, &fleet.account, &fleet.location, Duration::ZERO);

    // What the Tagging API returns for the cluster, and what tagwarden enforces of it.
    let listed = fleet
        .clients
        .tagging
        .get_resources()
        .tag_filters(tagwarden::aws::sdk::tagging::types::TagFilter::builder().key(OWNER).values("owned").build())
        .send()
        .await
        .expect("get resources");
    let listed: Vec<String> =
        listed.resource_tag_mapping_list().iter().filter_map(|m| m.resource_arn()).map(str::to_owned).collect();

    // The sweep: everything in line at the first run, nothing failed, nothing dropped.
    fleet.clients.calls.reset();
    let out = rec.sweep(false, None, None).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let by_status: BTreeMap<String, usize> = out.records.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(format!("{} {}", r.resource_type, r.status.as_str())).or_default() += 1;
        m
    });
    eprintln!("first sweep: {by_status:?}");
    let calls = fleet.clients.calls.snapshot();
    eprintln!("first sweep calls: {calls:?}");
    // The key and the topic went through their services' own writes, one call each, and not
    // through the Tagging API.
    for write in ["kms:TagResource", "sns:TagResource"] {
        let writes: u64 = calls.iter().filter(|(op, _)| op.eq_ignore_ascii_case(write)).map(|(_, n)| n).sum();
        assert_eq!(writes, 1, "{write}: {calls:?}");
    }
    for r in &fleet.owned {
        let record = out.records.iter().find(|x| x.resource == r.to_string());
        let record = record.unwrap_or_else(|| panic!("the sweep dropped {r} ({})", r.kind));
        assert_eq!(record.status, Status::Applied, "{r}: {:?}", record.error);
    }
    let enforced =
        listed.iter().filter(|a| out.records.iter().any(|r| &r.resource == *a && r.status == Status::Applied)).count();
    eprintln!(
        "GetResources lists {} owned resources; the sweep enforced {enforced} of them, and {} owned in all",
        listed.len(),
        fleet.owned.len()
    );
    assert_eq!(enforced, listed.len(), "every owned ARN the Tagging API lists is enforced");
    fleet.check("after the first sweep").await;

    fleet.clients.calls.reset();
    let again = rec.sweep(false, None, None).await;
    assert_eq!(fleet.clients.calls.writes(), 0, "second sweep wrote: {:?}", fleet.clients.calls.snapshot());
    assert!(again.records.iter().all(|r| r.status == Status::Unchanged || r.status == Status::NotOwned));

    // The event path: a `Tag Change on Resource` per resource (any service's ARN), after drift.
    fleet.drift().await;
    for (i, r) in fleet.owned.iter().enumerate() {
        let service = r.kind.split(':').next().unwrap_or_default();
        let event = json!({
            "version": "0", "id": format!("tc-{i}"), "detail-type": "Tag Change on Resource", "source": "aws.tag",
            "account": fleet.account, "region": "us-east-1", "resources": [r.arn.clone().unwrap_or_else(|| r.id.clone())],
            "detail": {"changed-tag-keys": ["team"], "service": service, "resource-type": r.kind, "version": 2,
                       "tags": {OWNER: "owned", "keep": "1", "team": "legacy", "env": "prod"}}
        });
        let event = events::parse_one(event.to_string().as_bytes()).expect("tag change event");
        let out = rec.handle_event(&event, None).await;
        assert_eq!(out.records.len(), 1, "{r}");
        assert_eq!(out.records[0].status, Status::Applied, "{r}: {:?}", out.records[0].error);
    }
    fleet.check("after the events").await;
    let value: Value = serde_json::to_value(&kinds).expect("json");
    assert!(value.as_object().is_some_and(|m| m.len() >= 13), "{value}");
}

/// A type no path can tag (here SQS, whose `TagResources` moto answers with "Service not yet
/// supported" in `FailedResourcesMap`; AWS supports it) is reported `unsupported`: a record, the
/// `Unsupported` metric and the status report's list. It is not a failure and does not fail the
/// sweep, and the rest is still enforced.
#[tokio::test(flavor = "multi_thread")]
async fn unsupported_types_are_reported_not_dropped() {
    let (clients, account, vars) = support::account_with_env().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let policy = infrastructure(DESIRED);
    clients.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("p");
    let py = support::workspace_root().join(".tools/venv/bin/python");
    let script = format!(
        r#"import boto3; print(boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="cov-q", tags={{"{OWNER}": "owned"}})["QueueUrl"])"#
    );
    let out = Command::new(py).arg("-c").arg(script).envs(vars.iter().cloned()).output().expect("python");
    assert!(out.status.success(), "boto3 sqs: {}", String::from_utf8_lossy(&out.stderr));
    let vpc = clients.ec2.create_vpc().cidr_block("10.30.0.0/16").send().await.expect("vpc");
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc").to_string();
    let owned = tagwarden::aws::sdk::ec2::types::Tag::builder().key(OWNER).value("owned").build();
    clients.ec2.create_tags().resources(&vpc).tags(owned).send().await.expect("tag vpc");

    let rec = reconciler(&clients, &account, &format!("s3://{bucket}/p.json"), Duration::ZERO);
    let out = rec.sweep(false, None, None).await;
    assert!(out.error.is_none() && !out.must_retry(), "{:?}", out.records);
    let queue = out.records.iter().find(|r| r.resource_type == "sqs:queue").expect("the queue is reported");
    assert_eq!(queue.status, Status::Unsupported, "{queue:?}");
    assert!(queue.error.as_deref().unwrap_or_default().contains("not yet supported"), "{queue:?}");
    assert_eq!(out.failed(), 0);
    let vpc_record = out.records.iter().find(|r| r.resource.contains(&vpc)).expect("vpc record");
    assert_eq!(vpc_record.status, Status::Applied);
    assert_eq!(out.metrics.by_type.values().map(|c| c.unsupported).sum::<u64>(), 1);
    let report =
        clients.s3.get_object().bucket(&bucket).key("tagwarden-status.json").send().await.expect("status report");
    let report: Value = serde_json::from_slice(&report.body.collect().await.expect("body").into_bytes()).expect("json");
    assert_eq!(report["failures"], json!([]));
    assert_eq!(report["unsupported"].as_array().map(Vec::len), Some(1), "{report}");
}
