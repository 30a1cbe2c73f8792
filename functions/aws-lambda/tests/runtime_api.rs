//! The built `bootstrap` binary, driven through the real Lambda Runtime API (`cargo lambda watch
//! --only-lambda-apis`, installed by scripts/install-tools), against moto.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tagwarden::aws::sdk::{ec2, s3};
use tagwarden_testkit::aws as support;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cargo_lambda() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/venv/bin/cargo-lambda");
    assert!(p.exists(), "{} not found: run scripts/install-tools", p.display());
    p
}

/// POST `body` to `http://127.0.0.1:port{path}`; (status, body).
fn post(port: u16, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("read");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

/// `cargo lambda watch --only-lambda-apis` on a free port: (invoke port, `AWS_LAMBDA_RUNTIME_API`, the process).
fn runtime_api() -> (u16, String, Killed) {
    let port = support::free_port();
    let mut watch = Command::new(cargo_lambda())
        .args([
            "lambda",
            "watch",
            "--only-lambda-apis",
            "--invoke-address",
            "127.0.0.1",
            "--invoke-port",
            &port.to_string(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cargo lambda watch");
    let stdout = watch.stdout.take().expect("stdout");
    let watch = Killed(watch);
    let mut runtime_api = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("watch output");
        if let Some(v) = line.split("AWS_LAMBDA_RUNTIME_API=").nth(1) {
            runtime_api = Some(v.trim().to_string());
        }
        if line.contains("starting Runtime server") {
            break;
        }
    }
    (port, runtime_api.expect("cargo lambda printed AWS_LAMBDA_RUNTIME_API"), watch)
}

/// The built bootstrap against `runtime_api`, with a session in `account` (moto) and `env`.
async fn bootstrap(runtime_api: &str, account: &str, region: &str, env: &[(&str, String)]) -> Child {
    let moto = support::moto();
    let (key, secret, token) = {
        let sts = aws_sdk_sts::Client::new(
            &tagwarden::aws::config_loader()
                .expect("network settings")
                .endpoint_url(&moto.endpoint)
                .region(aws_sdk_sts::config::Region::new("us-east-1"))
                .credentials_provider(aws_sdk_sts::config::Credentials::new("testing", "testing", None, None, "t"))
                .load()
                .await,
        );
        let out = sts
            .assume_role()
            .role_arn(format!("arn:aws:iam::{account}:role/fn"))
            .role_session_name("fn")
            .send()
            .await
            .expect("assume");
        let c = out.credentials().expect("creds");
        (c.access_key_id().to_string(), c.secret_access_key().to_string(), c.session_token().to_string())
    };
    Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "_")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_REGION", region)
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_ACCESS_KEY_ID", key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_SESSION_TOKEN", token)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bootstrap")
}

#[tokio::test(flavor = "multi_thread")]
async fn bootstrap_handles_events_through_the_runtime_api() {
    let (clients, account) = support::account().await;
    // The policy and an owned instance without the cluster's tags.
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let policy = json!({"kind": "Infrastructure", "status": {"infrastructureName": "rt-1", "platformStatus": {"type": "AWS", "aws": {"resourceTags": [{"key": "team", "value": "platform"}]}}}});
    clients
        .s3
        .put_object()
        .bucket(&bucket)
        .key("infra.json")
        .body(s3::primitives::ByteStream::from(policy.to_string().into_bytes()))
        .send()
        .await
        .expect("policy");
    let image =
        clients.ec2.describe_images().send().await.expect("images").images()[0].image_id().expect("ami").to_string();
    let owned = ec2::types::TagSpecification::builder()
        .resource_type(ec2::types::ResourceType::Instance)
        .tags(ec2::types::Tag::builder().key("kubernetes.io/cluster/rt-1").value("owned").build())
        .build();
    let run = clients
        .ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .tag_specifications(owned)
        .send()
        .await
        .expect("instance");
    let instance = run.instances()[0].instance_id().expect("id").to_string();

    // The Runtime API, then the function itself with the credentials of this test's account.
    let (port, runtime_api, _watch) = runtime_api();
    let started = Instant::now();
    let function = bootstrap(
        &runtime_api,
        &account,
        "us-east-1",
        &[
            ("TAGWARDEN_POLICY", format!("s3://{bucket}/infra.json")),
            ("TAGWARDEN_SELF_ROLE_ARN", format!("arn:aws:iam::{account}:role/tagdrift-reconciler-role")),
        ],
    )
    .await;
    let mut function = Killed(function);

    let fixture = |name: &str| {
        std::fs::read_to_string(format!("{}/../../tests/fixtures/events/aws/{name}.json", env!("CARGO_MANIFEST_DIR")))
            .expect("fixture")
            .replace("i-0123456789abcdef0", &instance)
            .replace("111122223333", &account)
            .replace("eu-west-1", "us-east-1")
    };
    let invoke = "/2015-03-31/functions/_/invocations";
    let (status, body) = post(port, invoke, &fixture("ec2-run-instances-sso"));
    eprintln!("first event handled {:?} after the process started", started.elapsed());
    assert_eq!(status, 200, "{body}");
    let tags = clients
        .ec2
        .describe_tags()
        .filters(ec2::types::Filter::builder().name("resource-id").values(&instance).build())
        .send()
        .await
        .expect("tags");
    assert!(tags.tags().iter().any(|t| t.key() == Some("team") && t.value() == Some("platform")), "{:?}", tags.tags());

    // Its own CreateTags comes back: ignored. A non-event payload is an error the caller sees.
    let (status, _) = post(port, invoke, &fixture("ec2-create-tags-by-reconciler"));
    assert_eq!(status, 200);
    let (status, body) = post(port, invoke, r#"{"hello": "world"}"#);
    assert_eq!(status, 500, "{body}");
    let error: Value = serde_json::from_str(&body).expect("error json");
    assert_eq!(error["errorType"], "Permanent", "a malformed payload: a retry cannot help");

    // A sweep's status report names the build that wrote it: package, version and commit.
    let (status, body) = post(port, invoke, r#"{"tagwarden": "sweep"}"#);
    assert_eq!(status, 200, "{body}");
    let report = clients.s3.get_object().bucket(&bucket).key("tagwarden-status.json").send().await.expect("report");
    let report: Value = serde_json::from_slice(&report.body.collect().await.expect("body").into_bytes()).expect("json");
    let commit = support::git_commit();
    assert_eq!(
        report["written_by"],
        format!("tagwarden-aws-lambda {} (commit {commit})", env!("CARGO_PKG_VERSION")),
        "{report}"
    );

    // stdout carries one JSON record per outcome and the EMF metrics.
    let _ = function.0.kill();
    let mut out = String::new();
    function.0.stdout.take().expect("stdout").read_to_string(&mut out).expect("stdout");
    let lines: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(lines.iter().any(|l| l["record"] == "reconcile" && l["status"] == "applied"), "{out}");
    assert!(
        lines.iter().any(|l| l["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "TagWarden" && l["EventsIgnored"] == 1),
        "{out}"
    );
}

/// The hub's bootstrap through the Runtime API. The schedule's invocation sends one
/// shard per member account and region to the shard queue; each shard, handed back as the SQS
/// event source would, is swept in its own account and region through the member role.
#[tokio::test(flavor = "multi_thread")]
async fn the_hub_bootstrap_sweeps_an_organization_in_shards() {
    const REGIONS: [&str; 2] = ["eu-west-1", "us-east-1"];
    let moto = support::moto();
    let (hub, hub_account) = support::account().await;
    let bucket = format!("hub-{hub_account}");
    hub.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let sqs = tagwarden::aws::sdk::sqs::Client::new(&support::config_in(&hub_account, "us-east-1").await);
    let queue = sqs.create_queue().queue_name("shards").send().await.expect("queue");
    let queue = queue.queue_url().expect("url").to_string();
    let mut members = Vec::new();
    for a in 0..3 {
        let account = support::new_account();
        let cluster = format!("m{a}-7xk2p");
        let policy = format!("version: 1\ninfraID: {cluster}\ntags:\n  team: t-{a}\n");
        let key = format!("accounts/{account}/{cluster}/policy.yaml");
        hub.s3.put_object().bucket(&bucket).key(key).body(policy.into_bytes().into()).send().await.expect("policy");
        let mut instances = Vec::new();
        for region in REGIONS {
            let c = tagwarden::aws::Clients::new(&support::config_in(&account, region).await);
            if region == "us-east-1" {
                c.iam
                    .create_role()
                    .role_name("tagwarden-member")
                    .assume_role_policy_document("{}")
                    .send()
                    .await
                    .expect("role");
            }
            let image =
                c.ec2.describe_images().send().await.expect("images").images()[0].image_id().expect("ami").to_string();
            let owned = ec2::types::TagSpecification::builder()
                .resource_type(ec2::types::ResourceType::Instance)
                .tags(ec2::types::Tag::builder().key(format!("kubernetes.io/cluster/{cluster}")).value("owned").build())
                .build();
            let run = c.ec2.run_instances().image_id(image).min_count(1).max_count(1).tag_specifications(owned);
            let run = run.send().await.expect("instance");
            instances.push((c, run.instances()[0].instance_id().expect("id").to_string()));
        }
        moto.strict.require_roles_in(&account);
        members.push((account, cluster, instances));
    }
    let clusters: Vec<String> = members.iter().map(|(a, c, _)| format!("{a}/{c}")).collect();

    let (port, runtime_api, _watch) = runtime_api();
    let function = bootstrap(
        &runtime_api,
        &hub_account,
        "us-east-1",
        &[
            ("TAGWARDEN_ORGANIZATION", format!("s3://{bucket}/accounts/")),
            ("TAGWARDEN_MEMBER_ROLE", "tagwarden-member".into()),
            ("TAGWARDEN_MEMBER_REGIONS", REGIONS.join(",")),
            ("TAGWARDEN_CLUSTERS", clusters.join(",")),
            ("TAGWARDEN_SHARD_QUEUE_URL", queue.clone()),
            ("TAGWARDEN_SELF_ROLE_ARN", format!("arn:aws:iam::{hub_account}:role/tagwarden-hub")),
        ],
    )
    .await;
    let _function = Killed(function);
    let invoke = "/2015-03-31/functions/_/invocations";
    let (status, body) = post(port, invoke, r#"{"tagwarden": "sweep"}"#);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).expect("json")["shards"], 6, "{body}");

    let mut swept = 0;
    loop {
        let got = sqs.receive_message().queue_url(&queue).max_number_of_messages(10).send().await.expect("receive");
        if got.messages().is_empty() {
            break;
        }
        for m in got.messages() {
            // As the event source mapping with batch size 1 delivers it.
            let batch = json!({"Records": [{"messageId": m.message_id(), "eventSource": "aws:sqs", "body": m.body()}]});
            let (status, body) = post(port, invoke, &batch.to_string());
            assert_eq!(status, 200, "{body}");
            assert_eq!(serde_json::from_str::<Value>(&body).expect("json")["batchItemFailures"], json!([]), "{body}");
            sqs.delete_message()
                .queue_url(&queue)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .expect("delete");
            swept += 1;
        }
    }
    assert_eq!(swept, 6);
    for (account, _, instances) in &members {
        for (c, instance) in instances {
            let tags = c
                .ec2
                .describe_tags()
                .filters(ec2::types::Filter::builder().name("resource-id").values(instance).build())
                .send()
                .await
                .expect("tags");
            assert!(tags.tags().iter().any(|t| t.key() == Some("team")), "{account} {instance}: {:?}", tags.tags());
        }
    }
    let summary = tagwarden::aws::organization::read_summary(&hub, &bucket, "accounts/").await.expect("summary");
    assert_eq!((summary.accounts, summary.owned, summary.in_line, summary.failed), (3, 6, 6, 0), "{summary:?}");
}
