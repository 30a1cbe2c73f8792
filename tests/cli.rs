//! The `tagwarden` binary's stable interface: arguments, JSON shapes and exit codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Run tagwarden; return (exit code, stdout as JSON or Null, stderr).
fn run(args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tagwarden")).args(args).current_dir(fixtures()).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tagwarden-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// `--version` names the version and the commit the binary was built from (`build.rs`), the
/// same commit `git` names for this checkout, so a bug report can name both.
#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_tagwarden")).arg("--version").output().expect("runs");
    assert!(out.status.success());
    let want = std::env::var("TAGWARDEN_COMMIT").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| {
        let git = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().expect("git");
        String::from_utf8_lossy(&git.stdout).trim().to_string()
    });
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("tagwarden {} (commit {want})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn validate_exit_codes_and_json() {
    let (code, json, _) = run(&["validate", "--json", "policies/infrastructure-aws.yaml"]);
    assert_eq!(code, 0);
    assert_eq!(json["valid"], true);
    assert_eq!(json["violations"], Value::Array(vec![]));

    let (code, json, _) = run(&["validate", "--json", "policies/invalid-aws.yaml"]);
    assert_eq!(code, 1);
    assert_eq!(json["valid"], false);
    let v = json["violations"].as_array().expect("violations");
    assert_eq!(v.len(), 7);
    assert!(v.iter().all(|v| v["key"].is_string() && v["rule"].is_string() && v["message"].is_string()));

    // Exit 3: the input could not be read (it was not judged).
    let (code, json, _) = run(&["validate", "--json", "policies/no-such-file.yaml"]);
    assert_eq!(code, 3);
    assert_eq!(json["valid"], false);
    assert!(json["error"].as_str().unwrap_or_default().contains("no-such-file.yaml"));

    // Exit 1: the input was read and refused.
    let (code, _, err) = run(&["validate", "policies/unrecognised.yaml"]);
    assert_eq!(code, 1);
    assert!(err.contains("unrecognised document"), "{err}");

    // A bare tag map names no cloud: --cloud decides, and the rules differ.
    let (code, _, err) = run(&["validate", "policies/tags.json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--cloud"), "{err}");
    assert_eq!(run(&["validate", "--cloud", "azure", "policies/tags.json"]).0, 0);
    let (code, _, err) = run(&["validate", "--cloud", "azure", "policies/infrastructure-aws.yaml"]);
    assert_eq!(code, 1, "{err}");

    // A directory is a layered policy; the status report beside it is not read.
    let (code, json, _) = run(&["validate", "--json", "policies/layered"]);
    assert_eq!(code, 0);
    assert_eq!(json["documents"].as_array().map(Vec::len), Some(3));

    // Usage errors exit 3 (clap's own default, 2, would read as "resources failed").
    assert_eq!(run(&["validate"]).0, 3);
    assert_eq!(run(&["validate", "--cloud", "oci", "policies/tags.json"]).0, 3);
    // --help is an answer, and documents the codes.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden")).arg("--help").output().expect("runs");
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    for line in ["0  all in line", "1  invalid input or policy", "2  resources not in line", "3  could not run"] {
        assert!(text.contains(line), "--help lacks {line:?}:\n{text}");
    }
}

#[test]
fn explain_contract() {
    let (code, json, _) = run(&["explain", "--json", "events/aws/ec2-run-instances-sso.json"]);
    assert_eq!(code, 0);
    for field in ["cloud", "kind", "reason", "service", "event_name", "account", "region", "actor", "resources"] {
        assert!(json.get(field).is_some(), "missing {field}");
    }
    assert_eq!(json["kind"], "create");
    assert_eq!(json["resources"][0]["type"], "ec2:instance");

    let (code, json, _) = run(&["explain", "--json", "events/aws/ec2-run-instances-failed.json"]);
    assert_eq!((code, json["kind"].as_str(), json["reason"].as_str()), (0, Some("ignored"), Some("failed-call")));

    let bad = write_temp("bad.json", "{\"hello\": 1}");
    let (code, json, _) = run(&["explain", "--json", bad.to_str().expect("utf-8 path")]);
    assert_eq!(code, 1);
    assert!(json["error"].is_string());
    assert_eq!(run(&["explain", "does-not-exist.json"]).0, 3);
}

#[test]
fn plan_contract() {
    let current = write_temp(
        "current.json",
        r#"{"kubernetes.io/cluster/mycluster-7xk2p": "owned", "Name": "web-1", "team": "platform", "key_infra1": "old", "mine": "kept"}"#,
    );
    let current = current.to_str().expect("utf-8 path");
    let arn = "arn:aws:ec2:eu-west-1:111122223333:instance/i-0123456789abcdef0";
    let (code, json, err) = run(&[
        "plan",
        "--policy",
        "policies/infrastructure-aws.yaml",
        "--resource",
        arn,
        "--current",
        current,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json["resource"], arn);
    assert_eq!(json["owned"], true);
    assert_eq!(json["outcome"], "apply");
    assert_eq!(json["set"], serde_json::json!({"key_infra1": "value_spec", "cost-center": "4242", "env": "prod"}));
    assert_eq!(
        json["superseded"],
        serde_json::json!([{"key": "key_infra1", "value": "value_status", "from": "status", "by": "spec"}])
    );

    let foreign = write_temp("foreign.json", r#"{"kubernetes.io/cluster/mycluster-7xk2p": "shared"}"#);
    let (code, json, _) = run(&[
        "plan",
        "--policy",
        "policies/infrastructure-aws.yaml",
        "--resource",
        "i-0abc",
        "--current",
        foreign.to_str().expect("path"),
        "--json",
    ]);
    assert_eq!((code, json["owned"].as_bool(), json["outcome"].as_str()), (0, Some(false), Some("not-owned")));
    assert_eq!(json["set"], serde_json::json!({}));

    // propagateUserTags: false → the cluster is audited: the drift is planned and reported, nothing
    // is set; the infraID comes from the flag.
    let owned = write_temp("owned.json", r#"{"kubernetes.io/cluster/mycluster-abcde": "owned"}"#);
    let (code, json, err) = run(&[
        "plan",
        "--policy",
        "policies/install-config-aws-disabled.yaml",
        "--infra-id",
        "mycluster-abcde",
        "--resource",
        "i-0abc",
        "--current",
        owned.to_str().expect("path"),
        "--json",
    ]);
    assert_eq!((code, json["outcome"].as_str()), (0, Some("audited")), "{err}");
    assert_eq!(json["set"], serde_json::json!({}), "an audited plan writes nothing");
    assert!(json["audited"].as_array().is_some_and(|a| !a.is_empty()), "the drift is reported: {json}");
    // Without the infraID there is no telling what the cluster owns.
    let (code, _, err) = run(&[
        "plan",
        "--policy",
        "policies/install-config-aws.yaml",
        "--resource",
        "i-0abc",
        "--current",
        owned.to_str().expect("path"),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("--infra-id"), "{err}");
    // An invalid policy plans nothing.
    let (code, _, _) = run(&[
        "plan",
        "--policy",
        "policies/invalid-aws.yaml",
        "--resource",
        "i-0abc",
        "--current",
        owned.to_str().expect("path"),
    ]);
    assert_eq!(code, 1);
    // Unreadable inputs.
    assert_eq!(
        run(&["plan", "--policy", "policies/tagwarden.yaml", "--resource", "i-0abc", "--current", "nope.json"]).0,
        3
    );
    // A resource that names nothing tagwarden knows is invalid input.
    assert_eq!(
        run(&[
            "plan",
            "--policy",
            "policies/tagwarden.yaml",
            "--resource",
            "bucket-name",
            "--current",
            owned.to_str().expect("path")
        ])
        .0,
        1
    );
}

/// A laptop without AWS settings: each missing setting is one line that names it and the fix,
/// exit 3; the SDK's chain of attempts (IMDS among them) only with -v.
#[cfg(feature = "aws")]
#[test]
fn missing_aws_settings_are_one_line_each() {
    let sweep = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tagwarden"));
        for (k, _) in std::env::vars() {
            if k.starts_with("AWS_") || k.to_ascii_lowercase().ends_with("_proxy") {
                cmd.env_remove(k);
            }
        }
        cmd.env("AWS_CONFIG_FILE", "/nonexistent/tagwarden-config")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/tagwarden-credentials")
            .env("RUST_LOG", "")
            .envs(env.iter().copied())
            .args(["sweep", "--policy", "s3://tagwarden-no-such-bucket/p.yaml"]);
        let out = cmd.output().expect("runs");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = sweep(&[]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.lines().count(), 1, "one line:\n{err}");
    assert!(err.contains("no AWS region") && err.contains("AWS_REGION"), "{err}");

    let (code, err) = sweep(&[("AWS_REGION", "eu-west-1")]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.lines().count(), 1, "one line, no IMDS warnings:\n{err}");
    assert!(err.contains("no AWS credentials") && err.contains("AWS_PROFILE"), "{err}");
    assert!(!err.contains("DispatchFailure {") && err.len() < 600, "no debug chain: {err}");

    let (code, err) = sweep(&[
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
    ]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.lines().count(), 1, "one line:\n{err}");
    assert!(err.contains("AWS_ENDPOINT_URL=http://127.0.0.1:9") && err.contains("reachable"), "{err}");
    assert!(!err.contains("DispatchFailure {"), "no debug chain: {err}");
}

/// What would exhaust the function's memory or time is refused before it is parsed or
/// compiled, naming the limit: too many overrides (9,863 globs took 270 MB and 24 s), a glob with
/// too many wildcards, too many documents, too many bytes together.
#[test]
fn validate_refuses_what_passes_a_limit_naming_it() {
    let mut big = String::from("version: 1\ncloud: aws\ninfraID: c-1\ntags: {team: a}\noverrides:\n");
    for i in 0..9863 {
        big.push_str(&format!("  - selector: {{type: 'ec2:*{i}*', id: 'arn:aws:ec2:*:*:instance/i-*{i:05}*x*y*'}}\n    tags: {{pool: p{i}}}\n"));
    }
    let started = std::time::Instant::now();
    let (code, _, err) = run(&["validate", write_temp("overrides.yaml", &big).to_str().expect("path")]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("9863 overrides and resourceTagsByType entries is over the limit of 200 (MAX_OVERRIDES)"),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "refused before compiling: {:?}",
        started.elapsed()
    );

    let glob = "version: 1\ncloud: aws\ninfraID: c-1\noverrides:\n  - selector: {id: 'a*b*c*d*e*f*g*h*i*'}\n    tags: {a: b}\n";
    let (code, _, err) = run(&["validate", write_temp("glob.yaml", glob).to_str().expect("path")]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(
            "overrides[0].selector.id: 9 wildcards in one glob is over the limit of 8 (MAX_PATTERN_WILDCARDS)"
        ),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("tagwarden-cli-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for i in 0..21 {
        std::fs::write(dir.join(format!("{i:02}.yaml")), format!("k{i}: v\n")).expect("write");
    }
    let (code, _, err) = run(&["validate", "--cloud", "aws", dir.to_str().expect("path")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("21 documents is over the limit of 20 (MAX_CLUSTER_DOCUMENTS)"), "{err}");
    let half = format!("pad: {}\n", "x".repeat(600 * 1024));
    let (a, b) = (write_temp("a.yaml", &half), write_temp("b.yaml", &half));
    let (code, _, err) = run(&["validate", "--cloud", "aws", a.to_str().expect("a"), b.to_str().expect("b")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is over the limit of 1048576 (MAX_CLUSTER_BYTES)"), "{err}");
}

/// `plan` prints a value the policy marks sensitive as a hash, as the function logs it.
#[test]
fn plan_hashes_sensitive_values() {
    let policy = write_temp(
        "sensitive.yaml",
        "version: 1\ncloud: aws\ninfraID: c-1\nsensitive: [cost-center]\ntags: {cost-center: '4711-secret', team: a}\n",
    );
    let current =
        write_temp("sensitive-current.json", r#"{"kubernetes.io/cluster/c-1": "owned", "cost-center": "0000-old"}"#);
    let args = [
        "plan",
        "--policy",
        policy.to_str().expect("p"),
        "--resource",
        "i-0abc",
        "--current",
        current.to_str().expect("c"),
    ];
    for json in [true, false] {
        let out = Command::new(env!("CARGO_BIN_EXE_tagwarden"))
            .args(args)
            .args(json.then_some("--json"))
            .output()
            .expect("runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(!stdout.contains("4711-secret") && !stdout.contains("0000-old"), "{stdout}");
        assert!(stdout.contains("sha256:") && stdout.contains("team"), "{stdout}");
    }
}

/// The in-cluster publisher takes `--to` from the ConfigMap `policy-location`, which
/// anyone with view reads: a SAS there is refused with the fix, before anything else is done.
#[test]
fn the_in_cluster_publisher_refuses_a_sas_in_its_location() {
    let to = "https://acct.blob.core.windows.net/policy/clusters/*/?sv=2022-11-02&sig=SECRET";
    let (code, _, err) = run(&["publish", "--from-cluster", "--watch", "--to", to, "--cluster", "c-1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("Workload Identity") && err.contains("tagwarden-blob-sas") && !err.contains("SECRET"),
        "{err}"
    );
}
