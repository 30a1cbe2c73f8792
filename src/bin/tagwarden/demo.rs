//! `tagwarden demo`: a small cluster's worth of owned and foreign resources with drift, in a local
//! AWS emulator; the policy published as an Infrastructure object; real-shaped CloudTrail events
//! sent through the Lambda's own code path; a before/after table and the metrics.

use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::sdk::{ec2, elbv2, iam, s3};
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::enforce::Engine;
use tagwarden::publish::TagChanges;
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

use crate::Failure;

const INFRA: &str = "demo-7xk2p";
const OWNER: &str = "kubernetes.io/cluster/demo-7xk2p";
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const POLICY_BUCKET: &str = "tagwarden-demo-policy";
const OWN_ROLE: &str = "arn:aws:iam::123456789012:role/tagwarden-demo";

const INFRASTRUCTURE: &str = r#"apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata:
  name: cluster
spec:
  platformSpec:
    type: AWS
    aws:
      resourceTags:
        - {key: env, value: production}
status:
  infrastructureName: demo-7xk2p
  platformStatus:
    type: AWS
    aws:
      region: us-east-1
      resourceTags:
        - {key: team, value: platform}
        - {key: cost-center, value: "4242"}
        - {key: env, value: prod}
"#;

const FIXTURES: &[(&str, &str)] = &[
    ("run-instances", include_str!("../../../tests/fixtures/events/aws/ec2-run-instances-sso.json")),
    ("create-tags", include_str!("../../../tests/fixtures/events/aws/ec2-create-tags-console.json")),
    ("create-bucket", include_str!("../../../tests/fixtures/events/aws/s3-create-bucket.json")),
    ("create-target-group", include_str!("../../../tests/fixtures/events/aws/elbv2-create-target-group.json")),
    ("create-role", include_str!("../../../tests/fixtures/events/aws/iam-create-role.json")),
    ("own-create-tags", include_str!("../../../tests/fixtures/events/aws/ec2-create-tags-by-reconciler.json")),
];

/// A fixture event naming the demo's resources, stamped with the time it is sent: the compliance
/// lag runs from the event's time, and a fixture's own date would make it years long.
fn fixture(name: &str, ids: &[(&str, &str)]) -> String {
    let mut text = FIXTURES.iter().find(|(n, _)| *n == name).map(|(_, t)| t.to_string()).unwrap_or_default();
    for (from, to) in ids {
        text = text.replace(from, to);
    }
    let text = text
        .replace("111122223333", ACCOUNT)
        .replace("eu-west-1", REGION)
        .replace("tagdrift-reconciler-role", "tagwarden-demo");
    let Ok(mut event) = serde_json::from_str::<serde_json::Value>(&text) else { return text };
    let now = tagwarden::events::format_rfc3339_ms(tagwarden::report::epoch_ms());
    event["time"] = now.clone().into();
    if event.get("detail").is_some_and(|d| d.get("eventTime").is_some()) {
        event["detail"]["eventTime"] = now.into();
    }
    event.to_string()
}

#[derive(clap::Args)]
pub struct Args {
    /// Print the outcome records and EMF metric lines as they are emitted.
    #[arg(long)]
    verbose: bool,
}

struct Demo {
    clients: Clients,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    if !(endpoint.starts_with("http://127.") || endpoint.starts_with("http://localhost")) {
        return Err(anyhow::anyhow!(
            "the demo creates resources, so it runs only against a local emulator: start one (scripts/demo does) and set AWS_ENDPOINT_URL=http://127.0.0.1:PORT (now {endpoint:?})"
        )
        .into());
    }
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    runtime.block_on(Box::pin(demo(args)))?;
    Ok(())
}

async fn demo(args: Args) -> anyhow::Result<()> {
    let clients = Clients::from_env().await?;
    let d = Demo { clients: clients.clone() };
    println!("== 1. a cluster's resources in the emulator ({INFRA}), with drift");
    d.clients.s3.create_bucket().bucket(POLICY_BUCKET).send().await.context("create the policy bucket")?;
    let image = d
        .clients
        .ec2
        .describe_images()
        .send()
        .await?
        .images()
        .first()
        .and_then(|i| i.image_id())
        .map(str::to_owned)
        .context("no AMI")?;
    let new_node = d.instance(&image, &[(OWNER, "owned"), ("Name", "demo-worker-a")]).await?;
    let drifted = d
        .instance(&image, &[(OWNER, "owned"), ("Name", "demo-worker-b"), ("team", "legacy"), ("owner", "alice")])
        .await?;
    let foreign = d.instance(&image, &[("kubernetes.io/cluster/other-cluster", "owned"), ("Name", "not-ours")]).await?;
    let shared = d.instance(&image, &[(OWNER, "shared"), ("Name", "shared-bastion")]).await?;
    let registry = format!("{INFRA}-image-registry");
    d.bucket(&registry, &[(OWNER, "owned"), ("backup", "daily"), ("team", "old")]).await?;
    d.bucket("someone-elses-bucket", &[("team", "data")]).await?;
    let vpc = d.clients.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).context("vpc id")?.to_string();
    let tg = d
        .clients
        .elbv2
        .create_target_group()
        .name("demo-ingress")
        .protocol(elbv2::types::ProtocolEnum::Http)
        .port(80)
        .vpc_id(vpc_id)
        .tags(elbv2::types::Tag::builder().key(OWNER).value("owned").build())
        .send()
        .await?;
    let tg_arn = tg.target_groups().first().and_then(|t| t.target_group_arn()).context("target group arn")?.to_string();
    let role = d
        .clients
        .iam
        .create_role()
        .role_name("demo-7xk2p-worker-role")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
        .tags(iam::types::Tag::builder().key(OWNER).value("owned").build()?)
        .send()
        .await?;
    let role_arn = role.role().map(|r| r.arn().to_string()).context("role arn")?;

    let resources: Vec<(&str, ResourceRef)> = vec![
        ("new worker (owned)", ResourceRef::ec2(&new_node, REGION, ACCOUNT)),
        ("drifted worker (owned)", ResourceRef::ec2(&drifted, REGION, ACCOUNT)),
        ("other cluster's instance", ResourceRef::ec2(&foreign, REGION, ACCOUNT)),
        ("shared bastion", ResourceRef::ec2(&shared, REGION, ACCOUNT)),
        ("image registry bucket (owned)", ResourceRef::s3_bucket(&registry, REGION)),
        ("ingress target group (owned)", ResourceRef::from_arn(&tg_arn)?),
        ("worker role (owned)", ResourceRef::from_arn(&role_arn)?),
    ];
    let tagger = Tagger::new(clients.clone());
    let mut before = Vec::new();
    for (_, r) in &resources {
        before.push(tagger.read(r).await?);
    }

    println!("== 2. the cluster publishes its Infrastructure object: tagwarden publish --to s3://{POLICY_BUCKET}/cluster/infrastructure.yaml");
    let location: PolicyLocation =
        format!("s3://{POLICY_BUCKET}/cluster/infrastructure.yaml").parse().map_err(anyhow::Error::msg)?;
    let target = policy_store(&clients, location.clone(), Duration::ZERO);
    let published = target.publish(INFRASTRUCTURE, None, false).await?;
    println!(
        "   {} (version {}): {}",
        published.result,
        published.version.as_deref().unwrap_or("-"),
        changes(&published.changes)
    );
    let engine = Engine::new(
        Tagger::new(clients.clone()),
        policy_store(&clients, location.clone(), Duration::from_secs(60)),
        vec![OWN_ROLE.to_string()],
    );

    println!("== 3. CloudTrail events through the Lambda's handler (one SQS batch)");
    let bodies = [
        fixture("run-instances", &[("i-0123456789abcdef0", &new_node)]),
        fixture("run-instances", &[("i-0123456789abcdef0", &foreign)]),
        fixture("run-instances", &[("i-0123456789abcdef0", &shared)]),
        fixture("create-tags", &[("i-0123456789abcdef0", &drifted), ("vol-0123456789abcdef0", &drifted)]),
        fixture("create-bucket", &[("acme-data-eu", &registry)]),
        fixture(
            "create-target-group",
            &[("arn:aws:elasticloadbalancing:eu-west-1:111122223333:targetgroup/web-tg/73e2d6bc24d8a067", &tg_arn)],
        ),
        fixture("create-role", &[("arn:aws:iam::111122223333:role/app-task-role", &role_arn)]),
    ];
    let batch = sqs_batch(&bodies);
    clients.calls.reset();
    let inv = function::handle(&engine, batch.clone()).await;
    if args.verbose {
        for line in &inv.lines {
            println!("   {line}");
        }
    }
    let calls = clients.calls.snapshot();
    println!(
        "   {} events, {} API calls ({} tag writes), response {}",
        bodies.len(),
        clients.calls.total(),
        clients.calls.writes(),
        inv.response
    );

    println!("\n== 4. before → after");
    let keys = ["team", "cost-center", "env", "owner", "backup"];
    println!("{:<31} {:<46} after", "resource", "before");
    for ((label, r), before) in resources.iter().zip(&before) {
        let after = tagger.read(r).await?;
        println!("{label:<31} {:<46} {}", show(before, &keys), show(&after, &keys));
    }
    println!("   env: status says \"prod\", spec says \"production\": spec wins and the conflict is reported");
    println!("   owner/backup: not in the policy, never touched; other cluster's and shared resources: read only");

    println!("\n== 5. metrics (CloudWatch EMF, namespace TagWarden)");
    for line in inv.lines.iter().filter(|l| l.contains("\"_aws\"")) {
        let v: Value = serde_json::from_str(line)?;
        let dims = ["ResourceType"]
            .iter()
            .filter_map(|d| v.get(*d))
            .map(|d| d.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("");
        let metrics: Vec<String> = v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["Name"].as_str())
            .map(|n| format!("{n}={}", v[n]))
            .collect();
        println!("   {:<34} {}", if dims.is_empty() { "(events)" } else { dims.as_str() }, metrics.join(" "));
    }
    let _ = calls;

    println!("\n== 6. loop safety: the function's own CreateTags, then the same events again");
    clients.calls.reset();
    let own =
        function::handle(&engine, sqs_batch(&[fixture("own-create-tags", &[("i-0123456789abcdef0", &new_node)])]))
            .await;
    println!(
        "   own CreateTags: {} API calls, {} tag writes ({})",
        clients.calls.total(),
        clients.calls.writes(),
        own.response
    );
    clients.calls.reset();
    let again = function::handle(&engine, batch).await;
    println!(
        "   all events again: {} API calls, {} tag writes ({})",
        clients.calls.total(),
        clients.calls.writes(),
        again.response
    );
    if clients.calls.writes() != 0 {
        bail!("the second pass wrote tags: reconcile is not idempotent");
    }

    println!(
        "\n== 7. day 2: the cluster's admin edits the status tags (oc edit infrastructure cluster --subresource=status: cost-center=5151, add owner-team=sre); publish, sweep, status"
    );
    // OpenShift's day-2 field is status.platformStatus.aws.resourceTags (openshift/api has no
    // spec.platformSpec.aws.resourceTags; the API server prunes it).
    let edited = INFRASTRUCTURE.replace(
        "- {key: cost-center, value: \"4242\"}",
        "- {key: cost-center, value: \"5151\"}\n        - {key: owner-team, value: sre}",
    );
    let invalid = edited.replace("owner-team", "aws:owner-team");
    let refused = target.publish(&invalid, None, false).await?;
    println!("   a typo'd edit (aws:owner-team) is {}: {}", refused.result, refused.violations.join("; "));
    let republished = target.publish(&edited, None, false).await?;
    println!(
        "   {} (version {}): {}",
        republished.result,
        republished.version.as_deref().unwrap_or("-"),
        changes(&republished.changes)
    );
    clients.calls.reset();
    // What S3 sends EventBridge for the publisher's PutObject: the policy changed, sweep now.
    let object_created = json!({"detail-type": "Object Created", "source": "aws.s3",
        "detail": {"bucket": {"name": POLICY_BUCKET}, "object": {"key": "cluster/infrastructure.yaml"}}});
    let swept = function::handle(&engine, object_created.to_string()).await;
    println!(
        "   S3 Object Created → sweep: {} ({} API calls, {} tag writes)",
        swept.response,
        clients.calls.total(),
        clients.calls.writes()
    );
    let after = tagger.read(&resources[1].1).await?;
    println!("   drifted worker now: {}", show(&after, &["cost-center", "owner-team", "team"]));
    let status = tagwarden::status_store::read(&policy_store(&clients, location, Duration::ZERO), None)
        .await?
        .context("no status report")?;
    println!(
        "   tagwarden status: state {}, version {} in force, {} failure(s)",
        status.policy.state,
        status.policy.version.as_deref().unwrap_or("-"),
        status.failures.len()
    );
    if after.get("cost-center").map(String::as_str) != Some("5151") || !after.contains_key("owner-team") {
        bail!("the edited tags did not reach the drifted worker");
    }
    Ok(())
}

fn changes(c: &TagChanges) -> String {
    let mut parts: Vec<String> = c.added.iter().map(|(k, v)| format!("+{k}={v}")).collect();
    parts.extend(c.changed.iter().map(|(k, [o, n])| format!("~{k}: {o} -> {n}")));
    parts.extend(c.removed.keys().map(|k| format!("-{k}")));
    if parts.is_empty() {
        "no tag changes".to_string()
    } else {
        parts.join(" ")
    }
}

fn sqs_batch(bodies: &[String]) -> String {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": b}))
        .collect();
    json!({ "Records": records }).to_string()
}

fn show(tags: &TagMap, keys: &[&str]) -> String {
    let shown: Vec<String> = keys.iter().filter_map(|k| tags.get(*k).map(|v| format!("{k}={v}"))).collect();
    if shown.is_empty() {
        "-".to_string()
    } else {
        shown.join(" ")
    }
}

impl Demo {
    async fn instance(&self, image: &str, tags: &[(&str, &str)]) -> anyhow::Result<String> {
        let mut spec = ec2::types::TagSpecification::builder().resource_type(ec2::types::ResourceType::Instance);
        for (k, v) in tags {
            spec = spec.tags(ec2::types::Tag::builder().key(*k).value(*v).build());
        }
        let out = self
            .clients
            .ec2
            .run_instances()
            .image_id(image)
            .min_count(1)
            .max_count(1)
            .tag_specifications(spec.build())
            .send()
            .await?;
        out.instances().first().and_then(|i| i.instance_id()).map(str::to_owned).context("instance id")
    }

    async fn bucket(&self, name: &str, tags: &[(&str, &str)]) -> anyhow::Result<()> {
        self.clients.s3.create_bucket().bucket(name).send().await?;
        let set = tags
            .iter()
            .map(|(k, v)| s3::types::Tag::builder().key(*k).value(*v).build())
            .collect::<Result<Vec<_>, _>>()?;
        self.clients
            .s3
            .put_bucket_tagging()
            .bucket(name)
            .tagging(s3::types::Tagging::builder().set_tag_set(Some(set)).build()?)
            .send()
            .await?;
        Ok(())
    }
}
