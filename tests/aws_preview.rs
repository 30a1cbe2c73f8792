//! Previews a person can run, on moto: `tagwarden sweep --dry-run --policy` a file, a directory of
//! layers or a cluster-set directory on this machine (no store at all), which writes nothing; and
//! a person's sweep without `--dry-run`, which says whose credentials write and refuses an
//! audited deployment or cluster.

#![cfg(feature = "aws")]

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tagwarden::aws::{Clients, Tagger};
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;
use tagwarden_testkit::aws as support;

const INFRA: &str = "preview-7xk2p";
const OWNER: &str = "kubernetes.io/cluster/preview-7xk2p";

fn native(enforce: bool) -> String {
    format!("version: 1\ncloud: aws\ninfraID: {INFRA}\nenforce: {enforce}\ntags:\n  team: platform\n  env: prod\n")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    path
}

async fn owned_instance(clients: &Clients, account: &str, extra: &[(&str, &str)]) -> ResourceRef {
    use tagwarden::aws::sdk::ec2::types::{ResourceType, Tag, TagSpecification};
    let image = clients.ec2.describe_images().send().await.expect("images");
    let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Instance);
    for (k, v) in extra.iter().chain([&(OWNER, "owned")]) {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let out = clients
        .ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .tag_specifications(spec.build())
        .send()
        .await
        .expect("run instance");
    let id = out.instances()[0].instance_id().expect("instance id").to_string();
    ResourceRef::ec2(&id, "us-east-1", account)
}

async fn tags(clients: &Clients, r: &ResourceRef) -> TagMap {
    Tagger::new(clients.clone()).read(r).await.expect("read tags")
}

fn cli(vars: &[(&'static str, String)], args: &[&str]) -> (i32, Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(args)
        .env_remove("TAGWARDEN_MODE")
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("tagwarden runs");
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_local_policy_is_previewed_on_aws_with_no_store_and_never_written_from() {
    let (clients, account, vars) = support::account_with_env().await;
    let instance = owned_instance(&clients, &account, &[("team", "legacy")]).await;
    let dir = std::env::temp_dir().join(format!("tagwarden-preview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = write(&dir, "one/policy.yaml", &native(true));
    write(
        &dir,
        "layers/00-defaults.yaml",
        &format!("version: 1\ncloud: aws\ninfraID: {INFRA}\ntags:\n  team: platform\n"),
    );
    write(&dir, "layers/10-cluster.yaml", &format!("version: 1\ncloud: aws\ninfraID: {INFRA}\ntags:\n  env: prod\n"));
    write(&dir, &format!("set/{INFRA}/policy.yaml"), &native(true));
    let set = format!("{}/*/", dir.join("set").display());

    for policy in [file.display().to_string(), dir.join("layers").display().to_string()] {
        let (code, json, err) = cli(&vars, &["sweep", "--dry-run", "--json", "--policy", &policy]);
        assert_eq!(code, 2, "drift under --dry-run exits 2: {err}");
        assert_eq!(
            (json["owned"].as_u64(), json["drifted"].as_u64(), json["written"].as_u64()),
            (Some(1), Some(1), Some(1)),
            "{json}"
        );
        assert_eq!(json["dry_run"], true);
        let record =
            json["records"].as_array().expect("records").iter().find(|r| r["status"] == "would-apply").cloned();
        // What a dry run would write: the record's `audited` changes (`changes` holds only what
        // was written), or its `changes` from a build before audit mode.
        let record = record.expect("a would-be write");
        let changes: Vec<Value> =
            ["changes", "audited"].iter().flat_map(|k| record[*k].as_array().cloned().unwrap_or_default()).collect();
        let changes = Value::Array(changes);
        assert!(
            changes.as_array().expect("changes").contains(&json!({"key": "team", "old": "legacy", "new": "platform"})),
            "{changes}"
        );
        assert!(
            json["api_calls"]
                .as_object()
                .expect("calls")
                .keys()
                .all(|op| !op.contains("CreateTags") && !op.starts_with("S3") && !op.starts_with("SSM")),
            "no store is read, nothing is written: {json}"
        );
    }
    // The preview's audit report: the CSV an auditor reads, and the page.
    let file_arg = file.display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(["sweep", "--dry-run", "--policy", &file_arg, "--format", "csv"])
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("runs");
    let csv = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let row = format!("{INFRA},{account},ec2:instance,{instance},team,legacy,platform,would-write,,,");
    assert!(csv.lines().any(|l| l == row), "{row} in:\n{csv}");
    let page = dir.join("preview.html");
    let page_arg = page.display().to_string();
    let (code, _, err) =
        cli(&vars, &["sweep", "--dry-run", "--policy", &file_arg, "--format", "html", "--out", &page_arg]);
    assert_eq!(code, 2, "{err}");
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("0.0%") && html.contains("platform") && !html.contains("https://"), "{html}");

    // A set is swept only for the clusters named, as a published one.
    let (code, _, err) = cli(&vars, &["sweep", "--dry-run", "--policy", &set]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--cluster"), "{err}");
    let (code, json, err) = cli(&vars, &["sweep", "--dry-run", "--json", "--policy", &set, "--cluster", INFRA]);
    assert_eq!(
        (code, json["clusters"][0]["infraID"].as_str(), json["clusters"][0]["drifted"].as_u64()),
        (2, Some(INFRA), Some(1)),
        "{err} {json}"
    );
    assert_eq!(
        tags(&clients, &instance).await.get("team").map(String::as_str),
        Some("legacy"),
        "a preview writes nothing"
    );

    // Without --dry-run, a local policy is refused (a usage error): it is not what the function enforces.
    let (code, _, err) = cli(&vars, &["sweep", "--policy", &file.display().to_string()]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--dry-run") && err.contains("tagwarden publish"), "{err}");
    // An invalid local policy is refused with every violation, as everywhere (exit 1).
    let bad = write(&dir, "bad.yaml", &format!("version: 1\ncloud: aws\ninfraID: {INFRA}\ntags:\n  aws:team: x\n"));
    let (code, _, err) = cli(&vars, &["sweep", "--dry-run", "--policy", &bad.display().to_string()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("aws:"), "{err}");
    assert_eq!(tags(&clients, &instance).await.get("team").map(String::as_str), Some("legacy"));
}

#[tokio::test]
async fn a_persons_sweep_names_its_credentials_and_refuses_an_audited_cluster() {
    let (clients, account, vars) = support::account_with_env().await;
    let instance = owned_instance(&clients, &account, &[]).await;
    let bucket = format!("preview-{account}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let put = |key: &'static str, text: String| {
        let s3 = clients.s3.clone();
        let bucket = bucket.clone();
        async move {
            s3.put_object().bucket(bucket).key(key).body(text.into_bytes().into()).send().await.expect("put");
        }
    };
    put("audited/policy.yaml", native(false)).await;
    put("enforced/policy.yaml", native(true)).await;
    let audited = format!("s3://{bucket}/audited/policy.yaml");
    let enforced = format!("s3://{bucket}/enforced/policy.yaml");

    let (code, _, err) = cli(&vars, &["sweep", "--policy", &audited]);
    assert_eq!(code, 1, "an audited cluster refuses a write: {err}");
    assert!(err.contains(INFRA) && err.contains("enforce: true") && err.contains("--dry-run"), "{err}");
    let mut audit_env = vars.clone();
    audit_env.push(("TAGWARDEN_MODE", "audit".into()));
    let (code, _, err) = cli(&audit_env, &["sweep", "--policy", &enforced]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("TAGWARDEN_MODE=audit") && err.contains("--dry-run"), "{err}");
    let (code, _, err) = cli(&vars, &["sweep", "--policy", &enforced, "--mode", "audit"]);
    assert_eq!(code, 1, "{err}");
    assert!(!tags(&clients, &instance).await.contains_key("team"), "nothing written by a refused sweep");

    // A status report beside the policy that says the cluster is audited refuses too.
    put("reported/policy.yaml", native(true)).await;
    put("reported/tagwarden-status.json", json!({"generated_at": 1, "cloud": "aws", "policy": {"location": "x", "state": "ok", "version": "v", "errors": []}, "failures": [], "audit": {"mode": "audit"}}).to_string()).await;
    let (code, _, err) = cli(&vars, &["sweep", "--policy", &format!("s3://{bucket}/reported/")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("status report says mode audit"), "{err}");

    let (code, json, err) = cli(&vars, &["sweep", "--policy", &enforced, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("writing as")
            && err.contains(&format!("arn:aws:sts::{account}:assumed-role/"))
            && err.contains("YOUR credentials"),
        "{err}"
    );
    assert_eq!(json["written"], 1, "{json}");
    assert_eq!(tags(&clients, &instance).await.get("team").map(String::as_str), Some("platform"));
}
