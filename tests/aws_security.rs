//! Security of the Lambda's code path, against moto:
//! - logs at `debug` (every crate: ours, the SDK, hyper) and the Lambda's output lines never
//!   carry the secret access key, the session token or the value of a key the policy marks
//!   `sensitive`;
//! - forged events never make a foreign resource writable: a `RunInstances` naming a foreign
//!   instance, and a `Tag Change on Resource` whose tag set claims ownership of a resource that
//!   is not owned in reality (event-carried tags are re-read when they claim ownership).

#![cfg(feature = "aws")]

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use tagwarden::aws::function;
use tagwarden::aws::Tagger;
use tagwarden::report::Status;
use tagwarden::resource::ResourceRef;
use tagwarden_testkit::aws as support;
use tagwarden_testkit::aws::fleet;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything logged in this test binary, at `debug` for every target, in the Lambda's format.
fn captured() -> &'static Buffer {
    static LOGS: OnceLock<Buffer> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Buffer::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        buf
    })
}

const SECRET_VALUE: &str = "ultra-secret-4711";

#[tokio::test]
async fn logs_carry_no_credentials_and_no_sensitive_value() {
    let logs = captured();
    let (clients, account, vars) = support::account_with_env().await;
    let var = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()).expect(k);
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let policy = format!(
        "version: 1\ncloud: aws\ninfraID: {}\ntags:\n  team: platform\n  cost-center: {SECRET_VALUE}\nsensitive: [cost-center]\n",
        fleet::INFRA
    );
    clients.s3.put_object().bucket(&bucket).key("p.yaml").body(policy.into_bytes().into()).send().await.expect("put");
    let spec = fleet::FleetSpec { instances: 4, foreign_instances: 1, buckets: 1, roles: 1, target_groups: 0 };
    let fl = fleet::Fleet::create(&clients, &account, &spec).await;
    let rec = fleet::reconciler(&clients, &account, &format!("s3://{bucket}/p.yaml"), Duration::ZERO);
    let records: Vec<Value> = fl
        .all()
        .enumerate()
        .map(|(i, r)| json!({"messageId": format!("m{i}"), "eventSource": "aws:sqs", "body": fleet::event_for(r, &account, &format!("e{i}"))}))
        .collect();
    let inv = function::handle(&rec, json!({"Records": records}).to_string()).await;
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    let sweep = function::handle(&rec, json!({"tagwarden": "sweep"}).to_string()).await;
    assert!(sweep.error.is_none(), "{:?}", sweep.error);
    // The value was really written (verbatim), so it was in flight.
    let written = Tagger::new(clients.clone()).read(&fl.owned[0]).await.expect("read");
    assert_eq!(written.get("cost-center").map(String::as_str), Some(SECRET_VALUE));

    let mut output = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    for line in inv.lines.iter().chain(&sweep.lines) {
        output.push_str(line);
        output.push('\n');
    }
    assert!(output.len() > 1000, "debug logs were captured: {} bytes", output.len());
    assert!(output.contains("cost-center"), "the sensitive key itself may be shown");
    let secrets = [
        ("secret access key", var("AWS_SECRET_ACCESS_KEY")),
        ("session token", var("AWS_SESSION_TOKEN")),
        ("sensitive policy value", SECRET_VALUE.to_string()),
    ];
    for (what, secret) in &secrets {
        assert!(secret.len() >= 8, "{what} is long enough to search for");
        if let Some(at) = output.find(secret.as_str()) {
            let from = output[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = output[at..].find('\n').map_or(output.len(), |n| at + n);
            panic!("the {what} is in the logs: {}", &output[from..to]);
        }
    }
    println!(
        "SECURITY(logs): {} bytes of debug logs and output lines scanned; none of {:?} found",
        output.len(),
        secrets.iter().map(|(w, _)| *w).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn forged_events_never_make_a_foreign_resource_writable() {
    captured();
    let (clients, account, _) = support::account_with_env().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let policy = fleet::infrastructure(&[("team", "platform")]);
    clients.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("put");
    let spec = fleet::FleetSpec { instances: 0, foreign_instances: 1, buckets: 0, roles: 0, target_groups: 0 };
    let fl = fleet::Fleet::create(&clients, &account, &spec).await;
    let foreign = fl.foreign[0].clone();
    let rec = fleet::reconciler(&clients, &account, &format!("s3://{bucket}/p.json"), Duration::ZERO);

    // A RunInstances "by a cluster" naming a foreign instance: the instance is read, not trusted.
    let fixture = std::fs::read_to_string(format!(
        "{}/tests/fixtures/events/aws/ec2-run-instances-sso.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
    .replace("i-0123456789abcdef0", &foreign.id)
    .replace("111122223333", &account)
    .replace("eu-west-1", "us-east-1");
    let run = tagwarden::events::parse_one(fixture.as_bytes()).expect("event");
    clients.calls.reset();
    let out = rec.handle_event(&run, None).await;
    assert!(out.records.iter().all(|r| r.status != Status::Applied), "{:?}", out.records);
    assert_eq!(clients.calls.writes(), 0, "{:?}", clients.calls.snapshot());

    // A Tag Change on Resource whose tag set claims the foreign instance is owned.
    let forged = json!({
        "version": "0", "id": "forged-1", "detail-type": "Tag Change on Resource", "source": "aws.tag",
        "account": account, "time": "2026-11-21T10:00:00Z", "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:{account}:instance/{}", foreign.id)],
        "detail": {"changed-tag-keys": [fleet::OWNER], "service": "ec2", "resource-type": "instance", "version": 2,
                   "tags": {fleet::OWNER: "owned", "Name": "not-ours", "team": "foreign"}}
    });
    clients.calls.reset();
    let inv = function::handle(
        &rec,
        json!({"Records": [{"messageId": "f1", "eventSource": "aws:sqs", "body": forged.to_string()}]}).to_string(),
    )
    .await;
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    assert_eq!(clients.calls.writes(), 0, "a forged ownership claim caused a write: {:?}", clients.calls.snapshot());
    let calls = clients.calls.snapshot();
    assert!(calls.contains_key("EC2:DescribeTags"), "the claim was checked against reality: {calls:?}");
    let now = Tagger::new(clients.clone()).read(&foreign).await.expect("read");
    assert_eq!(now, fl.initial[&foreign.id], "the foreign instance is untouched");

    // The same event naming an owned instance still works (and needs the read).
    let owned_spec = fleet::FleetSpec { instances: 1, foreign_instances: 0, buckets: 0, roles: 0, target_groups: 0 };
    let mine = fleet::Fleet::create(&clients, &account, &owned_spec).await.owned[0].clone();
    let mut honest = forged.clone();
    honest["resources"] = json!([format!("arn:aws:ec2:us-east-1:{account}:instance/{}", mine.id)]);
    let ev = tagwarden::events::parse_one(honest.to_string().as_bytes()).expect("event");
    let out = rec.handle_event(&ev, None).await;
    assert_eq!(out.records[0].status, Status::Applied, "{:?}", out.records);
    let r: &ResourceRef = &mine;
    assert_eq!(Tagger::new(clients.clone()).read(r).await.expect("read")["team"], "platform");
}

/// IAM compares tag keys ignoring case, so on a role `Kubernetes.io/cluster/<infraID>` is the
/// ownership tag. A forged `Tag Change on Resource` claiming a foreign role carries that
/// case-variant key: the hint check must read it as IAM does (a claim, so the role is re-read),
/// or the event's tags stand in for a read and the foreign role is written. Through the SQS batch
/// (`enforce::batch`) and a direct invoke (`Engine::handle_event`).
#[tokio::test]
async fn a_forged_case_variant_ownership_hint_never_writes_a_foreign_role() {
    captured();
    let (clients, account, _) = support::account_with_env().await;
    let bucket = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let policy = fleet::infrastructure(&[("team", "platform")]);
    clients.s3.put_object().bucket(&bucket).key("p.json").body(policy.into_bytes().into()).send().await.expect("put");
    let rec = fleet::reconciler(&clients, &account, &format!("s3://{bucket}/p.json"), Duration::ZERO);
    let foreign = clients
        .iam
        .create_role()
        .role_name("someone-elses-role")
        .assume_role_policy_document(r#"{"Version":"2012-10-17","Statement":[]}"#)
        .tags(tagwarden::aws::sdk::iam::types::Tag::builder().key("team").value("theirs").build().expect("tag"))
        .send()
        .await
        .expect("role");
    let arn = foreign.role().expect("role").arn().to_string();
    let variant = fleet::OWNER.replacen('k', "K", 1);
    let forged = |id: &str| {
        json!({
            "version": "0", "id": id, "detail-type": "Tag Change on Resource", "source": "aws.tag",
            "account": account, "time": "2026-11-21T10:00:00Z", "region": "us-east-1",
            "resources": [arn],
            "detail": {"changed-tag-keys": [variant], "service": "iam", "resource-type": "role", "version": 2,
                       "tags": {variant.as_str(): "owned", "team": "theirs"}}
        })
        .to_string()
    };
    clients.calls.reset();
    let batch = json!({"Records": [{"messageId": "f1", "eventSource": "aws:sqs", "body": forged("forged-batch")}]});
    let inv = function::handle(&rec, batch.to_string()).await;
    assert_eq!(inv.response, json!({"batchItemFailures": []}));
    let direct = function::handle(&rec, forged("forged-direct")).await;
    assert!(direct.error.is_none(), "{:?}", direct.error);
    let calls = clients.calls.snapshot();
    assert_eq!(clients.calls.writes(), 0, "the forged claim wrote the foreign role: {calls:?}");
    assert!(calls.contains_key("IAM:GetRole"), "the claim was checked against reality: {calls:?}");
    let role = clients.iam.list_role_tags().role_name("someone-elses-role").send().await.expect("tags");
    let now: Vec<(&str, &str)> = role.tags().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(now, [("team", "theirs")], "the foreign role is untouched");
}
