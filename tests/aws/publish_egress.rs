//! The deployed publisher as an OpenShift cluster runs it: credentials from the cloud-credential
//! operator's Secret in STS mode (a shared-credentials file naming `role_arn` and
//! `web_identity_token_file`, the projected service-account token), every cloud call through the
//! cluster-wide proxy (CONNECT, `HTTPS_PROXY`) trusting the proxy's CA from `TAGWARDEN_CA_BUNDLE`,
//! and its health told to `oc`: conditions in the status ConfigMap, probes and metrics on `--listen`.
//!
//! The cloud's host names exist only inside the proxy (`tagwarden-aws`), so a call that
//! bypasses it cannot connect at all: these tests fail if the proxy is not used.

#![cfg(all(feature = "aws", feature = "kube"))]

use crate::{egress, kube_api, publisher, support};

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egress::{ConnectProxy, Pki};
use kube_api::FakeApi;
use publisher::Publisher;
use serde_json::{json, Value};

/// How long a condition may take to appear: an STS exchange through a proxy that is down goes
/// through the SDK's retries and the publisher's backoff, which a loaded two-core runner (every
/// test binary at once) stretched past 40 s once. Only a failure waits this long.
const PATIENCE: Duration = Duration::from_secs(90);
// Single-label names: moto takes a dotted Host for a virtual-hosted bucket (`moto/s3/responses.py`
// `subdomain_based_buckets`), and these resolve nowhere but in the proxy.
const CLOUD_HOST: &str = "tagwarden-aws";
const STS_HOST: &str = "tagwarden-sts";

/// Clients with the credentials `sts:AssumeRoleWithWebIdentity` gives for `role` and `jwt`.
async fn web_identity_clients(role: &str, jwt: &str) -> tagwarden::aws::Clients {
    use aws_sdk_sts::config::{Credentials, Region};
    let moto = &support::moto().endpoint;
    let base = tagwarden::aws::config_loader()
        .expect("network settings")
        .endpoint_url(moto)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .load()
        .await;
    let out = aws_sdk_sts::Client::new(&base)
        .assume_role_with_web_identity()
        .role_arn(role)
        .role_session_name("test")
        .web_identity_token(jwt)
        .send()
        .await
        .expect("sts:AssumeRoleWithWebIdentity in moto");
    let c = out.credentials().expect("credentials");
    let creds =
        Credentials::new(c.access_key_id(), c.secret_access_key(), Some(c.session_token().to_string()), None, "web");
    let config = tagwarden::aws::config_loader()
        .expect("network settings")
        .endpoint_url(moto)
        .region(Region::new("us-east-1"))
        .credentials_provider(creds)
        .load()
        .await;
    tagwarden::aws::Clients::new(&config)
}

fn infrastructure() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies/infrastructure-aws.yaml");
    serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture parses")
}

fn temp(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("tagwarden-egress-{}-{name}", std::process::id()));
    std::fs::write(&path, text).expect("temp file");
    path
}

/// The publisher with only `env` for cloud settings, serving probes and metrics on `listen`.
fn spawn(api: &FakeApi, env: &[(&str, String)], to: &str, listen: u16, args: &[&str]) -> Publisher {
    let listen = format!("127.0.0.1:{listen}");
    let args: Vec<&str> = ["--listen", listen.as_str()].into_iter().chain(args.iter().copied()).collect();
    Publisher::spawn(&api.kubeconfig("tagwarden", None), to, env, &args)
}

fn http_get(port: u16, path: &str) -> (u16, String) {
    let attempt = || -> std::io::Result<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    };
    let out = attempt().unwrap_or_else(|e| panic!("GET {path} on 127.0.0.1:{port}: {e}"));
    let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

fn condition(api: &FakeApi, type_: &str) -> Option<Value> {
    publisher::condition(api.get("configmaps", "tagwarden", "tagwarden-status"), type_)
}

async fn until_condition(api: &FakeApi, type_: &str, what: &str, ok: impl Fn(&Value) -> bool) -> (Value, Duration) {
    let start = Instant::now();
    loop {
        if let Some(c) = condition(api, type_).filter(|c| ok(c)) {
            return (c, start.elapsed());
        }
        assert!(start.elapsed() < PATIENCE, "{what}: {type_} is {:?}", condition(api, type_));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sts_mode_through_the_cluster_proxy_trusting_its_ca() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    api.put_configmap("tagwarden", json!({"metadata": {"name": "tagwarden-status"}}));
    let (_, account, _static_keys) = support::account_with_env().await;
    let role = format!("arn:aws:iam::{account}:role/tagwarden-publisher");
    let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6dGFnd2FyZGVuOnRhZ3dhcmRlbiJ9.c2ln";
    // The bucket is made with what the same exchange yields, in whichever account moto maps it to.
    let clients = web_identity_clients(&role, jwt).await;
    let bucket = format!("policy-sts-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let pki = Pki::new();
    let front = egress::tls_front(
        &pki,
        &[CLOUD_HOST, STS_HOST],
        support::moto().endpoint.trim_start_matches("http://").to_string(),
    )
    .await;
    let proxy =
        ConnectProxy::start(HashMap::from([(format!("{CLOUD_HOST}:443"), front), (format!("{STS_HOST}:443"), front)]))
            .await;

    // What the cloud-credential operator writes in STS mode, and the projected token it names.
    let token = temp("token", jwt);
    let credentials = temp(
        "credentials",
        &format!(
            "[default]\nsts_regional_endpoints = regional\nrole_arn = {role}\nweb_identity_token_file = {}\n",
            token.display()
        ),
    );
    let env = [
        ("AWS_SHARED_CREDENTIALS_FILE", credentials.display().to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL", format!("https://{CLOUD_HOST}")),
        ("AWS_ENDPOINT_URL_STS", format!("https://{STS_HOST}")),
        ("HTTPS_PROXY", proxy.url.clone()),
        ("NO_PROXY", "kubernetes.default.svc,.cluster.local".to_string()),
        ("TAGWARDEN_CA_BUNDLE", pki.ca_file("sts").display().to_string()),
    ];
    let listen = support::free_port();
    let to = format!("s3://{bucket}/cluster/policy.yaml");
    let started = Instant::now();
    let publisher = spawn(&api, &env, &to, listen, &[]);
    let first = publisher.next(&format!("the first publish (tunnels {:?})", proxy.tunnels()), PATIENCE);
    println!("EGRESS(sts+proxy): start → published in {} ms", started.elapsed().as_millis());
    assert_eq!(first["result"], "written", "{first}");

    // The bucket is only in the account the web-identity exchange maps to.
    let object = clients.s3.get_object().bucket(&bucket).key("cluster/policy.yaml").send().await;
    assert!(object.is_ok(), "the policy is in the role's account: {object:?}");
    let tunnels = proxy.tunnels();
    assert!(
        tunnels.contains(&format!("CONNECT {STS_HOST}:443")),
        "the web-identity exchange went through the proxy: {tunnels:?}"
    );
    assert!(tunnels.contains(&format!("CONNECT {CLOUD_HOST}:443")), "S3 went through the proxy: {tunnels:?}");
    assert!(tunnels.iter().all(|t| t.starts_with("CONNECT ")), "{tunnels:?}");

    let (_, took) = until_condition(&api, "Available", "published", |c| c["status"] == "True").await;
    println!("EGRESS(sts+proxy): Available=True {} ms after the publish", took.as_millis());
    let (ready, _) = http_get(listen, "/readyz");
    assert_eq!(ready, 200);
    let (code, metrics) = http_get(listen, "/metrics");
    assert_eq!(code, 200);
    let last = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tagwarden_publish_last_success_timestamp_seconds "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(last.is_some_and(|t| t > 1.0e9), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_proxy_down_the_cluster_is_told_which_proxy() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    api.put_configmap("tagwarden", json!({"metadata": {"name": "tagwarden-status"}}));
    let (_clients, account, static_keys) = support::account_with_env().await;
    let pki = Pki::new();
    let down = format!("http://127.0.0.1:{}", support::free_port());
    let common = [
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL", format!("https://{CLOUD_HOST}")),
        ("AWS_ENDPOINT_URL_STS", format!("https://{STS_HOST}")),
        ("HTTPS_PROXY", down.clone()),
        ("TAGWARDEN_CA_BUNDLE", pki.ca_file("down").display().to_string()),
    ];
    // Static keys, and STS mode, where the first call to fail is the web-identity exchange: in
    // both, no answer through the proxy is `Unreachable` naming it, not a credential problem.
    let keys: Vec<(&str, String)> = static_keys
        .into_iter()
        .filter(|(k, _)| k.starts_with("AWS_") && k.contains("KEY") || *k == "AWS_SESSION_TOKEN")
        .collect();
    let token = temp("down-token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln");
    let sts = temp(
        "down-credentials",
        &format!(
            "[default]\nrole_arn = arn:aws:iam::{account}:role/x\nweb_identity_token_file = {}\n",
            token.display()
        ),
    );
    let modes: [(&str, Vec<(&str, String)>); 2] =
        [("static keys", keys), ("STS", vec![("AWS_SHARED_CREDENTIALS_FILE", sts.display().to_string())])];
    for (mode, credentials) in modes {
        let env: Vec<(&str, String)> = common.iter().cloned().chain(credentials).collect();
        let listen = support::free_port();
        let publisher = spawn(&api, &env, &format!("s3://policy-down-{account}/p.yaml"), listen, &[]);
        let (degraded, took) =
            until_condition(&api, "Degraded", &format!("{mode}, the proxy is down; log:\n{}", publisher.log()), |c| {
                c["status"] == "True" && c["reason"] == "Unreachable"
            })
            .await;
        println!("EGRESS(proxy down, {mode}): start → Degraded in {} ms: {}", took.as_millis(), degraded["message"]);
        assert!(
            degraded["message"].as_str().is_some_and(|m| m.contains(&format!("through the proxy HTTPS_PROXY={down}"))),
            "{mode}: the message names the proxy: {degraded}"
        );
        drop(publisher);
        api.put_configmap("tagwarden", json!({"metadata": {"name": "tagwarden-status"}}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_cluster_document_is_degraded_before_any_sweep_naming_the_tag() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    api.put_configmap("tagwarden", json!({"metadata": {"name": "tagwarden-status"}}));
    let (clients, account, env) = support::account_with_env().await;
    let bucket = format!("policy-refused-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let listen = support::free_port();
    let publisher = spawn(&api, &env, &format!("s3://{bucket}/p.yaml"), listen, &[]);
    let first = publisher.next("the first publish", PATIENCE);
    assert_eq!(first["result"], "written", "{first}");

    // `aws:` keys pass the CRD's pattern (the API server stores them) but AWS reserves the prefix.
    let edited = Instant::now();
    api.edit_status(|o| {
        o["status"]["platformStatus"]["aws"]["resourceTags"] = json!([{"key": "aws:team", "value": "x"}])
    })
    .expect("the API server accepts the key: its pattern allows ':'");
    let refused = publisher.next("the refusal", PATIENCE);
    assert_eq!(refused["result"], "refused", "{refused}");
    let (degraded, _) = until_condition(&api, "Degraded", "refused", |c| c["reason"] == "PolicyRefused").await;
    println!("EGRESS(refused): edit → Degraded in {} ms", edited.elapsed().as_millis());
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(message.contains("aws:team") && message.contains("stays in force"), "{message}");
    let available = condition(&api, "Available").expect("Available");
    assert_eq!(available["status"], "True", "the last good document is still in force: {available}");
    let (_, metrics) = http_get(listen, "/metrics");
    assert!(metrics.contains("tagwarden_policy_refused 1"), "{metrics}");
    // The Event is posted after the condition is written: wait for it as for the condition.
    let start = Instant::now();
    loop {
        let reasons: Vec<Value> = api.list("events", "tagwarden").into_iter().map(|e| e["reason"].clone()).collect();
        if reasons.contains(&json!("PolicyRefused")) {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "an Event for the transition: {reasons:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_object_changed_or_deleted_at_the_store_is_repaired_on_resync() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    let (clients, account, env) = support::account_with_env().await;
    let bucket = format!("policy-resync-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let listen = support::free_port();
    let publisher = spawn(&api, &env, &format!("s3://{bucket}/p.yaml"), listen, &["--resync", "1"]);
    let first = publisher.next("the first publish", PATIENCE);
    assert_eq!(first["result"], "written", "{first}");
    let read = || async {
        match clients.s3.get_object().bucket(&bucket).key("p.yaml").send().await {
            Ok(o) => Some(String::from_utf8_lossy(&o.body.collect().await.expect("body").into_bytes()).into_owned()),
            Err(_) => None,
        }
    };
    let published = read().await.expect("published");
    for (what, damage) in [("deleted", None), ("overwritten", Some("version: 1\ntags: {team: someone-else}\n"))] {
        match damage {
            None => drop(clients.s3.delete_object().bucket(&bucket).key("p.yaml").send().await.expect("delete")),
            Some(text) => drop(
                clients
                    .s3
                    .put_object()
                    .bucket(&bucket)
                    .key("p.yaml")
                    .body(text.as_bytes().to_vec().into())
                    .send()
                    .await
                    .expect("put"),
            ),
        }
        let damaged = Instant::now();
        while read().await.as_deref() != Some(published.as_str()) {
            assert!(damaged.elapsed() < PATIENCE, "the {what} object was never repaired; log:\n{}", publisher.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!("EGRESS(resync): {what} at the store → repaired in {} ms", damaged.elapsed().as_millis());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_aws_credentials_the_cluster_is_told_where_they_come_from() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    let env = [
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL", support::moto().endpoint.clone()),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/tagwarden-credentials".to_string()),
    ];
    let listen = support::free_port();
    let publisher = spawn(&api, &env, "s3://policy-nocreds/p.yaml", listen, &[]);
    let (degraded, took) =
        until_condition(&api, "Degraded", &format!("no credentials; log:\n{}", publisher.log()), |c| {
            c["reason"] == "CredentialsRejected"
        })
        .await;
    println!("EGRESS(no credentials): start → Degraded in {} ms", took.as_millis());
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(message.contains("AWS_SHARED_CREDENTIALS_FILE") && message.contains("CredentialsRequest"), "{message}");
}
