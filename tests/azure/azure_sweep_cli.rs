//! `tagwarden sweep` on Azure, as a person runs it: the built binary, a blob policy read with its
//! SAS (real Azurite), owned resources listed and written through the faithful fake of ARM's Tags
//! API with an access token obtained elsewhere (here from the fake identity endpoint, as `az
//! account get-access-token` would give one). Dry run first, then the writes, then nothing left;
//! and the errors a user meets without a token or a scope. And the preview of a policy directory
//! on this machine, with no store, which writes nothing (the fake ARM's request log).

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

/// The Azure counterpart of `tests/aws_preview.rs`: `tagwarden sweep --dry-run --policy ./dir/`
/// (a directory of layers on this machine, no blob store at all) plans the owned resources through
/// the fake ARM, lists the would-be writes (JSON records, the audit table, the CSV), and sends no
/// write: the fake's own request log holds reads only (GET, and Resource Graph's query POST).
#[tokio::test]
async fn a_local_policy_directory_is_previewed_on_azure_with_no_store_and_writes_nothing() {
    let fake = FakeAzure::start(None);
    let http = reqwest::Client::new();
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    let disk = rid("Microsoft.Compute/disks", "master-0-os");
    let foreign = rid("Microsoft.Compute/disks", "someone-elses");
    fake.put_resource(&vm, &[(OWNER, "owned"), ("team", "legacy"), ("mine", "kept")]);
    fake.put_resource(&disk, &[(OWNER, "owned"), ("team", "platform"), ("env", "prod")]);
    fake.put_resource(&foreign, &[("team", "other")]);
    let token = arm_token(&fake, &http).await;
    fake.clear_log();

    let dir = std::env::temp_dir().join(format!("tagwarden-azure-preview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("layers")).expect("mkdir");
    let layer = |name: &str, tags: &str| {
        let text = format!("version: 1\ncloud: azure\ninfraID: {INFRA}\ntags:\n{tags}");
        std::fs::write(dir.join("layers").join(name), text).expect("write layer");
    };
    layer("00-defaults.yaml", "  team: platform\n");
    layer("10-cluster.yaml", "  env: prod\n");
    let policy = format!("{}/", dir.join("layers").display());
    let scope = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    let run = |extra: &[&str]| {
        let mut a = vec!["--dry-run", "--policy", &policy, "--scope", &scope, "--arm-endpoint", &fake.arm];
        a.extend_from_slice(extra);
        sweep(&a, Some(&token))
    };

    let dry = run(&["--json"]);
    assert_eq!(dry.status.code(), Some(2), "drift under --dry-run exits 2: {}", String::from_utf8_lossy(&dry.stderr));
    let s = json_of(&dry);
    assert_eq!(
        (s["dry_run"].as_bool(), s["owned"].as_u64(), s["drifted"].as_u64(), s["written"].as_u64()),
        (Some(true), Some(2), Some(1), Some(1)),
        "{s:#}"
    );
    let record = s["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["status"] == "would-apply")
        .cloned()
        .expect("a would-be write");
    assert!(record["resource"].as_str().is_some_and(|r| r.eq_ignore_ascii_case(&vm)), "{record:#}");
    let changes: Vec<Value> =
        ["changes", "audited"].iter().flat_map(|k| record[*k].as_array().cloned().unwrap_or_default()).collect();
    for want in [
        serde_json::json!({"key": "team", "old": "legacy", "new": "platform"}),
        serde_json::json!({"key": "env", "old": null, "new": "prod"}),
    ] {
        assert!(changes.contains(&want), "{want} in {changes:?}");
    }
    assert!(
        s["api_calls"].as_object().expect("calls").keys().all(|op| !op.to_ascii_lowercase().contains("blob")),
        "no store is read: {s:#}"
    );

    // The audit table and the CSV list the would-be writes, key by key.
    let table = run(&["--format", "table"]);
    assert_eq!(table.status.code(), Some(2));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("team: legacy → platform") && table.contains("env: (none) → prod"), "{table}");
    let csv = run(&["--format", "csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    let rows: Vec<&str> = csv.lines().filter(|l| l.contains(",would-write,")).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(
        rows.iter()
            .any(|l| l.starts_with(&format!("{INFRA},{SUB},")) && l.contains(",team,legacy,platform,would-write,")),
        "{csv}"
    );

    // Zero writes, by the fake's own request log: every ARM request a read (a GET, or Resource
    // Graph's query, which is a POST that reads).
    let calls = fake.arm_calls();
    assert!(calls.iter().any(|c| c == "GET tags" || c == "POST graph" || c == "GET list"), "{calls:?}");
    let writes: Vec<&String> = calls.iter().filter(|c| !(c.starts_with("GET ") || *c == "POST graph")).collect();
    assert!(writes.is_empty(), "a preview sends no write: {writes:?} (all: {calls:?})");
    assert_eq!((fake.count("PATCH tags"), fake.count("PUT tags")), (0, 0));
    let tags = fake.tags(&vm).expect("vm");
    assert_eq!((tags.get("team").map(String::as_str), tags.get("env")), (Some("legacy"), None), "nothing written");

    // Nothing is written beside the local policy either (no status report).
    let mut names: Vec<String> = std::fs::read_dir(dir.join("layers"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["00-defaults.yaml", "10-cluster.yaml"]);

    // Without --dry-run, a local policy is refused before any request.
    fake.clear_log();
    let refused = sweep(&["--policy", &policy, "--scope", &scope, "--arm-endpoint", &fake.arm], Some(&token));
    assert_eq!(refused.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--dry-run"));
    assert!(fake.log().iter().all(|l| l.api != "arm"), "refused before any ARM request");
}
