//! `tagwarden sweep`, `status` and `publish` on Google Cloud, as the person who owns the
//! deployment runs them: the built binary, the policy in Cloud Storage (the real
//! gcp-storage-emulator), owned resources found through Cloud Asset Inventory and written through
//! the fake's Compute and Storage APIs. The preview (`--dry-run`) shows every would-be write and
//! writes nothing (the fake counts writes); the sweep writes them; a second writes nothing; an
//! audited deployment refuses to write; the errors a user meets name the input and the fix.

use serde_json::Value;

use crate::support::{corrected, json_of, stderr, Env, INFRA, POLICY};

fn args<'a>(policy: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["sweep", "--policy", policy, "--scope", "folders/7", "--json"];
    a.extend_from_slice(extra);
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_writes_nothing_then_the_sweep_writes_and_status_reads_its_report() {
    let env = Env::new().await;
    let fleet = env.fleet();
    let policy = env.put_policy("cluster/policy.yaml").await;
    let before: Vec<_> = fleet.drifted.iter().map(|r| env.labels(r)).collect();
    let (in_line, other) = (env.labels(&fleet.in_line), env.labels(&fleet.other));

    // The preview: drift found (exit 2), every would-be write listed, nothing written.
    let dry = env.run(&args(&policy, &["--dry-run"]));
    assert_eq!(dry.status.code(), Some(2), "drift under --dry-run exits 2: {}", stderr(&dry));
    let s = json_of(&dry);
    assert_eq!(
        (s["dry_run"].as_bool(), s["owned"].as_u64(), s["drifted"].as_u64(), s["written"].as_u64()),
        (Some(true), Some(4), Some(3), Some(3)),
        "{s:#}"
    );
    assert_eq!(env.fake.counters().writes, 0, "a preview writes nothing: {:?}", env.fake.counters());
    assert!(
        !env.fake.calls().iter().any(|c| c.path.ends_with("/setLabels") || c.method == "PATCH"),
        "no label write reached the fake: {:?}",
        env.fake.calls()
    );
    let record = s["records"]
        .as_array()
        .expect("records")
        .iter()
        .find(|r| r["status"] == "would-apply" && r["resource"] == fleet.drifted[0].as_str())
        .cloned()
        .unwrap_or_else(|| panic!("a would-be write on {}: {s:#}", fleet.drifted[0]));
    let changes: Vec<Value> =
        ["changes", "audited"].iter().flat_map(|k| record[*k].as_array().cloned().unwrap_or_default()).collect();
    for want in [
        serde_json::json!({"key": "team", "old": "wrong", "new": "platform"}),
        serde_json::json!({"key": "cost-center", "old": null, "new": "cc-42"}),
    ] {
        assert!(changes.contains(&want), "{want} in {changes:?}");
    }
    let calls = s["api_calls"].as_object().expect("api_calls");
    assert!(calls.keys().any(|op| op.starts_with("gcs:")), "the policy is read from Cloud Storage: {s:#}");
    assert!(calls.len() > 1, "the Asset Inventory search and the reads are counted too: {s:#}");
    assert!(env.object("cluster/tagwarden-status.json").await.is_none(), "a preview writes no status report");
    let table = env.run(&["sweep", "--policy", &policy, "--scope", "folders/7", "--dry-run"]);
    assert_eq!(table.status.code(), Some(2), "{}", stderr(&table));
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("would write") && text.contains("API calls"), "{text}");

    // The sweep: the three drifted resources written, the rest untouched.
    let run = env.run(&args(&policy, &[]));
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let s = json_of(&run);
    assert_eq!(
        (s["owned"].as_u64(), s["written"].as_u64(), s["failed"].as_u64()),
        (Some(4), Some(3), Some(0)),
        "{s:#}"
    );
    assert!(stderr(&run).contains("writing as"), "says whose credentials write: {}", stderr(&run));
    assert_eq!(env.fake.counters().writes, 3, "one write per drifted resource: {:?}", env.fake.counters());
    for (r, had) in fleet.drifted.iter().zip(&before) {
        assert_eq!(env.labels(r), corrected(had), "{r}");
    }
    assert_eq!(env.labels(&fleet.in_line), in_line, "in line: not written");
    assert_eq!(env.labels(&fleet.other), other, "another cluster's: not written");

    // In line now: a second sweep plans nothing and writes nothing.
    env.fake.clear_log();
    let again = env.run(&args(&policy, &[]));
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(json_of(&again)["drifted"].as_u64(), Some(0));
    assert_eq!(env.fake.counters().writes, 0);

    // The status report beside the policy, as `tagwarden status` reads it. It is put here by
    // the test: gcp-storage-emulator (2026.7.19) fails a media upload whose Content-Type is
    // application/json (it parses the body and checksums the dict: TypeError, connection closed),
    // which is the type a report is written with, so the sweep's own write is not checked here.
    let failing = &fleet.drifted[0];
    let report = serde_json::json!({
        "generated_at": 1795531200u64,
        "cloud": "gcp",
        "policy": {"location": policy, "state": "ok", "version": "5a1dc8091245", "errors": []},
        "failures": [{
            "name": "master-0",
            "resource": failing,
            "type": "compute.googleapis.com/Instance",
            "error": "the write would exceed the resource's 64 labels; nothing was written"
        }],
    });
    let emulator = tagwarden_testkit::gcp::emulator::gcs_emulator();
    emulator
        .put_object(&env.bucket, "cluster/tagwarden-status.json", report.to_string().as_bytes(), "text/plain")
        .await;
    let status = env.run(&["status", "--policy", &policy, "--json"]);
    assert_eq!(status.status.code(), Some(2), "a failed resource is not in line: {}", stderr(&status));
    let read = json_of(&status);
    assert_eq!((&read["cloud"], &read["policy"]["state"]), (&Value::from("gcp"), &Value::from("ok")), "{read:#}");
    assert_eq!(read["failures"][0]["resource"], failing.as_str(), "{read:#}");
    let human = env.run(&["status", "--policy", &policy]);
    assert_eq!(human.status.code(), Some(2), "{}", stderr(&human));
    let shown = String::from_utf8_lossy(&human.stdout);
    assert!(shown.contains(&format!("{policy} (gcp)")) && shown.contains("failures   1"), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audited_deployment_is_previewed_never_written() {
    let env = Env::new().await;
    let fleet = env.fleet();
    let policy = env.put_policy("audited/policy.yaml").await;
    let before: Vec<_> = fleet.drifted.iter().map(|r| env.labels(r)).collect();

    let flag = env.run(&args(&policy, &["--mode", "audit"]));
    assert_eq!(flag.status.code(), Some(1), "{}", stderr(&flag));
    assert!(stderr(&flag).contains("--dry-run"), "names the preview: {}", stderr(&flag));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"));
    let from_env = cmd
        .args(args(&policy, &[]))
        .env("TAGWARDEN_MODE", "audit")
        .env("TAGWARDEN_GCP_ENDPOINT", &env.fake.endpoint)
        .env("STORAGE_EMULATOR_HOST", &tagwarden_testkit::gcp::emulator::gcs_emulator().endpoint)
        .output()
        .expect("run tagwarden");
    assert_eq!(from_env.status.code(), Some(1), "{}", stderr(&from_env));
    assert_eq!(env.fake.counters().writes, 0, "audit: no write anywhere");
    for (r, had) in fleet.drifted.iter().zip(&before) {
        assert_eq!(&env.labels(r), had, "{r}");
    }
    // The preview itself runs, and still writes nothing.
    let dry = env.run(&args(&policy, &["--mode", "audit", "--dry-run"]));
    assert_eq!(dry.status.code(), Some(2), "{}", stderr(&dry));
    assert_eq!(env.fake.counters().writes, 0);
}

/// A policy on this machine, previewed with no store: the same adapter and its calls, no Cloud
/// Storage call, no write; and refused without --dry-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_policy_is_previewed_on_gcp_with_no_store() {
    let env = Env::new().await;
    let fleet = env.fleet();
    let dir = std::env::temp_dir().join(format!("tagwarden-gcp-preview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("00-base.yaml"), POLICY).expect("write policy");
    let policy = format!("{}/", dir.display());

    let dry = env.run(&args(&policy, &["--dry-run"]));
    assert_eq!(dry.status.code(), Some(2), "{}", stderr(&dry));
    let s = json_of(&dry);
    assert_eq!((s["owned"].as_u64(), s["drifted"].as_u64()), (Some(4), Some(3)), "{s:#}");
    assert!(s["api_calls"].as_object().expect("calls").keys().all(|op| !op.starts_with("gcs:")), "no store: {s:#}");
    assert_eq!(env.fake.counters().writes, 0);
    assert_eq!(env.labels(&fleet.drifted[0])["team"], "wrong");

    let write = env.run(&args(&policy, &[]));
    assert_eq!(write.status.code(), Some(3), "{}", stderr(&write));
    assert!(stderr(&write).contains("tagwarden publish"), "{}", stderr(&write));
    assert_eq!(env.fake.counters().writes, 0);

    // A policy that does not say its cloud: the scope's form says it.
    let unsaid = dir.join("unsaid.yaml");
    std::fs::write(&unsaid, format!("version: 1\ninfraID: {INFRA}\ntags: {{team: platform}}\n")).expect("write");
    let unsaid = unsaid.display().to_string();
    let scoped = env.run(&args(&unsaid, &["--dry-run"]));
    assert_eq!(scoped.status.code(), Some(2), "the scope says Google Cloud: {}", stderr(&scoped));
    assert_eq!(json_of(&scoped)["drifted"].as_u64(), Some(3), "team wrong or missing: {}", stderr(&scoped));
    assert_eq!(env.fake.counters().writes, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_errors_name_the_input_and_the_fix() {
    let env = Env::new().await;
    let policy = env.put_policy("errors/policy.yaml").await;

    let no_scope = env.run(&["sweep", "--policy", &policy, "--dry-run"]);
    assert_eq!(no_scope.status.code(), Some(3));
    assert!(stderr(&no_scope).contains("--scope") && stderr(&no_scope).contains("projects/"), "{}", stderr(&no_scope));

    let bad_scope = env.run(&["sweep", "--policy", &policy, "--scope", "/subscriptions/x", "--dry-run"]);
    assert_eq!(bad_scope.status.code(), Some(3));
    assert!(stderr(&bad_scope).contains("projects/PROJECT_ID"), "{}", stderr(&bad_scope));

    let bad_location = env.run(&["sweep", "--policy", "gs://B/p.yaml", "--scope", "folders/7", "--dry-run"]);
    assert_eq!(bad_location.status.code(), Some(3));
    assert!(stderr(&bad_location).contains("gs://BUCKET/"), "{}", stderr(&bad_location));

    // No test server, and credentials that cannot be loaded: named, with the fix.
    let home = std::env::temp_dir().join(format!("tagwarden-gcp-nohome-{}", std::process::id()));
    let no_adc = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(["sweep", "--policy", &policy, "--scope", "folders/7", "--dry-run"])
        .env_remove("TAGWARDEN_GCP_ENDPOINT")
        .env("HOME", &home)
        .env("GOOGLE_APPLICATION_CREDENTIALS", home.join("missing-key.json"))
        .output()
        .expect("run tagwarden");
    assert_eq!(no_adc.status.code(), Some(3), "{}", stderr(&no_adc));
    assert!(stderr(&no_adc).contains("Application Default Credentials"), "{}", stderr(&no_adc));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_writes_the_policy_to_gcs_once() {
    let env = Env::new().await;
    let dir = std::env::temp_dir().join(format!("tagwarden-gcp-publish-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let from = dir.join("tagwarden.yaml");
    std::fs::write(&from, POLICY).expect("write policy");
    let from = from.display().to_string();
    let to = format!("gs://{}/published/policy.yaml", env.bucket);

    let dry = env.run(&["publish", "--from", &from, "--to", &to, "--dry-run", "--json"]);
    assert_eq!(dry.status.code(), Some(0), "{}", stderr(&dry));
    assert_eq!(json_of(&dry)["result"], "would-write");
    assert!(env.object("published/policy.yaml").await.is_none(), "a dry run writes nothing");

    let first = env.run(&["publish", "--from", &from, "--to", &to, "--json"]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(json_of(&first)["result"], "written");
    assert_eq!(env.object("published/policy.yaml").await.as_deref(), Some(POLICY.as_bytes()));

    let again = env.run(&["publish", "--from", &from, "--to", &to, "--json"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(json_of(&again)["result"], "unchanged");

    // A document the function would reject is refused, and nothing is written over the published one.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, format!("version: 1\ncloud: gcp\ninfraID: {INFRA}\ntags: {{Team: x}}\n")).expect("write");
    let refused = env.run(&["publish", "--from", &bad.display().to_string(), "--to", &to, "--json"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert_eq!(env.object("published/policy.yaml").await.as_deref(), Some(POLICY.as_bytes()));
    let _ = std::fs::remove_dir_all(&dir);
}
