//! The publisher on Azure the OpenShift way: Workload Identity (the projected service-account
//! token in `AZURE_FEDERATED_TOKEN_FILE`, exchanged at a local fake of Entra's documented token
//! endpoint for a Storage token) against a real Azurite that checks bearer tokens
//! (`--oauth basic`, over HTTPS), every call through the cluster's CONNECT proxy trusting its CA.
//! An expired projected token is refused as Entra refuses it, and `oc` is told the fix.

#![cfg(all(feature = "azure", feature = "kube"))]

use crate::{egress, kube_api, publisher, support};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egress::{ConnectProxy, Pki};
use kube_api::FakeApi;
use publisher::Publisher;
use serde_json::{json, Value};
use support::azurite;
use tagwarden::azure::reqwest;

const PATIENCE: Duration = Duration::from_secs(40);
/// The production-style blob host (Azurite takes the account from its first label) and Entra's
/// authority: both resolve only inside the proxy.
const BLOB_HOST: &str = "devstoreaccount1.blob.core.windows.net";
const LOGIN_HOST: &str = "tagwarden-login";
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const CLIENT_ID: &str = "5c5d4f8e-9d0b-4a53-9c3e-7a0f7bd2f0a1";

fn temp(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("tagwarden-wi-{}-{name}", std::process::id()));
    std::fs::write(&path, text).expect("temp file");
    path
}

fn condition(api: &FakeApi, type_: &str) -> Option<Value> {
    publisher::condition(api.get("configmaps", "tagwarden", "tagwarden-status"), type_)
}

/// The `Degraded` condition once its reason is `reason`.
async fn until_degraded(api: &FakeApi, publisher: &Publisher, reason: &str) -> Value {
    let started = Instant::now();
    loop {
        if let Some(d) = condition(api, "Degraded").filter(|d| d["reason"] == reason) {
            return d;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "never Degraded with {reason}: {:?}; log:\n{}",
            condition(api, "Degraded"),
            publisher.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn infrastructure() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies/infrastructure-azure.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_identity_through_the_proxy_and_an_expired_token_is_degraded_with_the_fix() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf(&[BLOB_HOST, "127.0.0.1"]);
    let azurite = azurite::azurite_oauth(&temp("azurite.crt", &cert), &temp("azurite.key", &key));
    let azurite_port: u16 = azurite
        .endpoint
        .trim_start_matches("https://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("azurite port");
    // The test's own client trusts the same CA to make the container (with the account SAS).
    let http = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).expect("CA"))
        .no_proxy()
        .build()
        .expect("client");
    let container_url = azurite::container_at(&http, &azurite.endpoint).await;
    let container = container_url.rsplit('/').next().expect("container name").to_string();
    // Tokens that are due for renewal a second after they are issued (the publisher renews 300 s
    // ahead), so the rotation of the projected token below is seen within seconds.
    let (entra_port, token_requests) = egress::fake_entra(&pki, LOGIN_HOST, TENANT, 301).await;
    let proxy = ConnectProxy::start(HashMap::from([
        (format!("{BLOB_HOST}:443"), azurite_port),
        (format!("{LOGIN_HOST}:443"), entra_port),
    ]))
    .await;

    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    api.put_configmap("tagwarden", json!({"metadata": {"name": "tagwarden-status"}}));
    let projected = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6dGFnd2FyZGVuOnRhZ3dhcmRlbiJ9.c2ln";
    let token_file = temp("token", projected);
    let env = |token_file: &Path| {
        vec![
            ("AZURE_CLIENT_ID", CLIENT_ID.to_string()),
            ("AZURE_TENANT_ID", TENANT.to_string()),
            ("AZURE_FEDERATED_TOKEN_FILE", token_file.display().to_string()),
            ("AZURE_AUTHORITY_HOST", format!("https://{LOGIN_HOST}/")),
            ("HTTPS_PROXY", proxy.url.clone()),
            ("TAGWARDEN_CA_BUNDLE", pki.ca_file("wi").display().to_string()),
        ]
    };
    let to = format!("https://{BLOB_HOST}/{container}/cluster/infrastructure.yaml");
    let started = Instant::now();
    let kubeconfig = api.kubeconfig("tagwarden", None);
    let publisher = Publisher::spawn(&kubeconfig, &to, &env(&token_file), &[]);
    let first = publisher.next(&format!("the first publish (tunnels {:?})", proxy.tunnels()), PATIENCE);
    println!("WI: start → published in {} ms", started.elapsed().as_millis());
    assert_eq!(first["result"], "written", "{first}");
    let blob = azurite::get_blob(&http, &container_url, "cluster/infrastructure.yaml").await;
    assert!(blob.is_some_and(|b| b.contains("Infrastructure")), "the document is in the blob");

    let seen = token_requests.lock().expect("requests").clone();
    let exchange = seen.first().expect("a token request");
    assert_eq!(exchange.get("client_assertion").map(String::as_str), Some(projected));
    assert_eq!(exchange.get("client_id").map(String::as_str), Some(CLIENT_ID));
    assert_eq!(exchange.get("grant_type").map(String::as_str), Some("client_credentials"));
    assert_eq!(exchange.get("scope").map(String::as_str), Some("https://storage.azure.com/.default"));
    assert_eq!(
        exchange.get("client_assertion_type").map(String::as_str),
        Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    );
    let tunnels = proxy.tunnels();
    for host in [BLOB_HOST, LOGIN_HOST] {
        assert!(tunnels.contains(&format!("CONNECT {host}:443")), "{host} through the proxy: {tunnels:?}");
    }

    // The kubelet rotates the projected token: the next exchange sends the new one.
    let rotated = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyb3RhdGVkIn0.c2ln";
    std::fs::write(&token_file, rotated).expect("rotate the token");
    let rotated_at = Instant::now();
    while !token_requests
        .lock()
        .expect("requests")
        .iter()
        .any(|f| f.get("client_assertion").map(String::as_str) == Some(rotated))
    {
        assert!(rotated_at.elapsed() < PATIENCE, "the rotated token was never exchanged; log:\n{}", publisher.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("WI: token file rotated → exchanged in {} ms", rotated_at.elapsed().as_millis());

    // A token the kubelet no longer refreshes: Entra refuses it, and the cluster is told why.
    drop(publisher);
    let expired = temp("expired-token", "expired");
    let started = Instant::now();
    let publisher = Publisher::spawn(&kubeconfig, &to, &env(&expired), &[]);
    let degraded = until_degraded(&api, &publisher, "CredentialsRejected").await;
    println!("WI: expired token → Degraded in {} ms: {}", started.elapsed().as_millis(), degraded["message"]);
    let message = degraded["message"].as_str().unwrap_or_default();
    assert!(message.contains("AADSTS700024"), "Entra's code: {message}");
    assert!(message.contains("has expired") && message.contains(&expired.display().to_string()), "the fix: {message}");
}

/// Neither Workload Identity nor a SAS: the publisher does not crash-loop; it says so in the
/// cluster and keeps trying (the Secret may come after the pod).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_the_cluster_is_told_and_the_publisher_keeps_trying() {
    let api = FakeApi::start().await;
    api.put_infrastructure(infrastructure());
    let to = format!("https://{BLOB_HOST}/policy/cluster/infrastructure.yaml");
    let publisher = Publisher::spawn(&api.kubeconfig("tagwarden", None), &to, &[], &[]);
    let degraded = until_degraded(&api, &publisher, "CredentialsRejected").await;
    let message = degraded["message"].as_str().unwrap_or_default();
    for setting in ["AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE", "TAGWARDEN_BLOB_SAS"] {
        assert!(message.contains(setting), "{setting} named: {message}");
    }
    assert!(!message.contains('?'), "no SAS or query shown: {message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        publisher.log().matches("cannot reach the policy location; retrying").count() >= 2,
        "it retries:\n{}",
        publisher.log()
    );
}
