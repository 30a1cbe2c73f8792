//! `tagwarden sweep` on Azure, as a person runs it: the built binary, a blob policy read with its
//! SAS (real Azurite), owned resources listed and written through the faithful fake of ARM's Tags
//! API with an access token obtained elsewhere (here from the fake identity endpoint, as `az
//! account get-access-token` would give one). Dry run first, then the writes, then nothing left;
//! and the errors a user meets without a token or a scope.

#![cfg(feature = "azure")]

use crate::support;
use std::process::{Command, Output};

use serde_json::Value;
use support::azurite;
use support::env::{infrastructure, rid, INFRA, OWNER, SUB};
use support::fake::{FakeAzure, ARM_AUDIENCE, IDENTITY_HEADER};
use tagwarden::azure::reqwest;

/// An ARM token from the fake identity endpoint, which the fake ARM then accepts.
async fn arm_token(fake: &FakeAzure, http: &reqwest::Client) -> String {
    let url = format!("{}?resource={ARM_AUDIENCE}&api-version=2019-08-01", fake.identity);
    let resp = http.get(url).header("X-IDENTITY-HEADER", IDENTITY_HEADER).send().await.expect("token request");
    let body: Value = serde_json::from_str(&resp.text().await.expect("token body")).expect("token JSON");
    body["access_token"].as_str().expect("access_token").to_string()
}

fn sweep(args: &[&str], token: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tagwarden"));
    cmd.arg("sweep").args(args).env_remove("TAGWARDEN_ARM_TOKEN");
    if let Some(t) = token {
        cmd.env("TAGWARDEN_ARM_TOKEN", t);
    }
    cmd.output().expect("run tagwarden")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

#[tokio::test]
async fn cli_sweep_on_azure_dry_run_then_writes_owned_resources_only() {
    let fake = FakeAzure::start(None);
    let http = reqwest::Client::new();
    let container = azurite::container(&http).await;
    let doc = infrastructure(&[("team", "platform"), ("env", "prod")], &[]);
    azurite::put_blob(&http, &container, "cluster/infrastructure.json", &doc).await;
    let policy = format!("{container}/cluster/infrastructure.json?{}", azurite::account_sas());
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    let disk = rid("Microsoft.Compute/disks", "master-0-os");
    let foreign = rid("Microsoft.Compute/disks", "someone-elses");
    fake.put_resource(&vm, &[(OWNER, "owned"), ("mine", "kept")]);
    fake.put_resource(&disk, &[(OWNER, "owned"), ("team", "platform"), ("env", "prod")]);
    fake.put_resource(&foreign, &[("team", "other")]);
    let token = arm_token(&fake, &http).await;
    let scope = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    let args = |extra: &[&'static str]| {
        let mut a = vec!["--policy".to_string(), policy.clone(), "--scope".into(), scope.clone()];
        a.extend(["--arm-endpoint".to_string(), fake.arm.clone(), "--json".into()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };

    // Dry run: drift found (exit 2), nothing written.
    let a = args(&["--dry-run"]);
    let dry = sweep(&a.iter().map(String::as_str).collect::<Vec<_>>(), Some(&token));
    assert_eq!(dry.status.code(), Some(2), "{}", String::from_utf8_lossy(&dry.stderr));
    let s = json_of(&dry);
    assert_eq!(
        (s["owned"].as_u64(), s["drifted"].as_u64(), s["written"].as_u64()),
        (Some(2), Some(1), Some(1)),
        "{s:#}"
    );
    assert!(!fake.tags(&vm).expect("vm").contains_key("team"), "a dry run writes nothing");
    assert_eq!(fake.count("PATCH tags"), 0);

    // The sweep: one Merge, for the drifted VM; the foreign disk is never written.
    let a = args(&[]);
    let run = sweep(&a.iter().map(String::as_str).collect::<Vec<_>>(), Some(&token));
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let s = json_of(&run);
    assert_eq!(
        (s["owned"].as_u64(), s["written"].as_u64(), s["failed"].as_u64()),
        (Some(2), Some(1), Some(0)),
        "{s:#}"
    );
    assert_eq!(fake.count("PATCH tags"), 1);
    let tags = fake.tags(&vm).expect("vm");
    assert_eq!((tags.get("team"), tags.get("mine")), (Some(&"platform".to_string()), Some(&"kept".to_string())));
    assert_eq!(fake.tags(&foreign).expect("foreign").get("team").map(String::as_str), Some("other"));
    assert!(s["api_calls"].as_object().is_some_and(|c| !c.is_empty()), "calls are counted: {s:#}");

    // In line now: a second run plans nothing and writes nothing.
    let again = sweep(&a.iter().map(String::as_str).collect::<Vec<_>>(), Some(&token));
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(json_of(&again)["drifted"].as_u64(), Some(0));
    assert_eq!(fake.count("PATCH tags"), 1);
}

#[tokio::test]
async fn cli_sweep_on_azure_names_what_is_missing() {
    let policy = "https://acct.blob.core.windows.net/policy/cluster/infrastructure.json?sv=2024-08-04&sig=x";
    let scope = format!("/subscriptions/{SUB}");

    let no_token = sweep(&["--policy", policy, "--scope", &scope], None);
    assert_eq!(no_token.status.code(), Some(3));
    let err = String::from_utf8_lossy(&no_token.stderr);
    assert!(err.contains("TAGWARDEN_ARM_TOKEN") && err.contains("az account get-access-token"), "{err}");

    let no_scope = sweep(&["--policy", policy], Some("t"));
    assert_eq!(no_scope.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&no_scope.stderr).contains("--scope"),
        "{}",
        String::from_utf8_lossy(&no_scope.stderr)
    );

    let bad_scope = sweep(&["--policy", policy, "--scope", "rg-name"], Some("t"));
    assert!(String::from_utf8_lossy(&bad_scope.stderr).contains("/subscriptions/ID"));

    let no_sas = sweep(&["--policy", "https://acct.blob.core.windows.net/policy/p.yaml", "--scope", &scope], Some("t"));
    assert!(String::from_utf8_lossy(&no_sas.stderr).contains("SAS"));
}
