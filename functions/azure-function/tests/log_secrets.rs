//! The built `tagwarden-azure-function` binary at `RUST_LOG=debug` (every crate: tagwarden,
//! hyper, reqwest, rustls), driven over HTTP as the Functions host and Event Grid drive it, against
//! the fake ARM / identity / metrics endpoints and a real Azurite holding a policy that marks a key
//! `sensitive`: its stdout and stderr, and its HTTP answers, never carry a bearer token, the
//! `IDENTITY_HEADER` secret, the policy SAS signature or the sensitive value — through writes, a
//! sweep, ARM 401 and 403, a rejected policy, a request that is not an event, and two cold starts
//! that cannot read the policy (store unreachable; signature refused).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::azurite;
use support::env::{
    cloud_event, eg_event, envelope, rid, sas_signatures, tampered_sas, timer, Env, INFRA, OWNER, SOMEONE, SUB,
};
use support::fake::{Fault, IDENTITY_HEADER};
use tagwarden_azure::reqwest;
use tagwarden_testkit::azure as support;

const SECRET_VALUE: &str = "ultra-secret-4711-binary";
const VM: &str = "Microsoft.Compute/virtualMachines";
const VM_WRITE: &str = "Microsoft.Compute/virtualMachines/write";

struct Running {
    child: Child,
    base: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the binary with `env`'s configuration (the policy at `policy_url`), output to `log`.
async fn start(env: &Env, policy_url: &str, log: &Path) -> Running {
    let port = support::free_port();
    let out = File::create(log).expect("log file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tagwarden-azure-function"));
    cmd.env_clear();
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    let child = cmd
        .env("TAGWARDEN_POLICY", policy_url)
        .env("FUNCTIONS_CUSTOMHANDLER_PORT", port.to_string())
        .env("RUST_LOG", "debug")
        .stdout(out.try_clone().expect("log file"))
        .stderr(out)
        .spawn()
        .expect("spawn the handler");
    let running = Running { child, base: format!("http://127.0.0.1:{port}") };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !env.http.get(format!("{}/", running.base)).send().await.is_ok_and(|r| r.status().is_success()) {
        assert!(Instant::now() < deadline, "the handler did not answer GET / within 30 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running
}

/// POST `body` to `path`; (status, body text).
async fn post(http: &reqwest::Client, run: &Running, path: &str, body: String) -> (u16, String) {
    let resp = http
        .post(format!("{}{path}", run.base))
        .header("content-type", "application/json")
        .header("x-azure-functions-invocationid", support::suffix())
        .body(body)
        .send()
        .await
        .expect("POST");
    (resp.status().as_u16(), resp.text().await.expect("body"))
}

fn drift(event: Value) -> String {
    envelope("drift", "eventGridEvent", event)
}

fn by_status(text: &str) -> Value {
    let v: Value = serde_json::from_str(text).expect("JSON");
    v.get("ReturnValue").unwrap_or(&v)["by_status"].clone()
}

#[tokio::test]
async fn the_binary_logs_no_token_identity_secret_sas_or_sensitive_value() {
    let policy = |value: &str, extra: &str| {
        format!("version: 1\ncloud: azure\ninfraID: {INFRA}\ntags:\n  team: platform\n  cost-center: {value}\n{extra}sensitive: [cost-center]\n")
    };
    let env = Env::new("p.yaml", &[("p.yaml", &policy(SECRET_VALUE, ""))]).await;
    let vms: Vec<String> = (0..5).map(|i| rid(VM, &format!("vm-{i}"))).collect();
    for vm in &vms[..3] {
        env.fake.put_resource(vm, &[(OWNER, "owned")]);
    }
    let rg = format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg");
    env.fake.put_resource(&rg, &[(OWNER, "owned")]);
    let dir: PathBuf = std::env::temp_dir().join(format!("tagwarden-log-secrets-{}", support::suffix()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let logs = [dir.join("warm.log"), dir.join("unreachable.log"), dir.join("refused.log")];
    let http = env.http.clone();
    let mut answers = Vec::new();

    let warm = start(&env, &env.policy_url(None), &logs[0]).await;
    // A drift event that writes, a CloudEvents batch straight from Event Grid, the timer.
    let (status, text) = post(&http, &warm, "/drift", drift(eg_event(&vms[0], VM_WRITE, SOMEONE))).await;
    assert_eq!((status, by_status(&text)), (200, json!({"applied": 1})), "{text}");
    answers.push(text);
    let batch =
        json!([cloud_event(&eg_event(&vms[1], VM_WRITE, SOMEONE)), cloud_event(&eg_event(&vms[2], VM_WRITE, SOMEONE))]);
    let (status, text) = post(&http, &warm, "/api/events", batch.to_string()).await;
    assert_eq!((status, by_status(&text)), (200, json!({"applied": 2})), "{text}");
    answers.push(text);
    let (status, text) = post(&http, &warm, "/sweep", envelope("sweep", "timer", timer())).await;
    assert_eq!((status, by_status(&text)), (200, json!({"applied": 1, "unchanged": 3})), "{text}");
    answers.push(text);
    for vm in &vms[3..] {
        env.fake.put_resource(vm, &[(OWNER, "owned")]);
    }
    // ARM refuses a read (401: handed back) and a write (403: reported, permanent); then the
    // write goes through.
    env.fake.inject("GET", Fault::Status { status: 401, code: "InvalidAuthenticationToken" });
    let (status, text) = post(&http, &warm, "/drift", drift(eg_event(&vms[3], VM_WRITE, SOMEONE))).await;
    assert!(status == 500 && text.contains("InvalidAuthenticationToken"), "{status} {text}");
    answers.push(text);
    env.fake.inject("PATCH", Fault::Status { status: 403, code: "AuthorizationFailed" });
    let (status, text) = post(&http, &warm, "/drift", drift(eg_event(&vms[3], VM_WRITE, SOMEONE))).await;
    assert!(status == 200 && text.contains("AuthorizationFailed"), "{status} {text}");
    answers.push(text);
    let (status, text) = post(&http, &warm, "/drift", drift(eg_event(&vms[3], VM_WRITE, SOMEONE))).await;
    assert_eq!((status, by_status(&text)), (200, json!({"applied": 1})), "{text}");
    answers.push(text);
    // A rejected version (the secret inside an invalid value, a reserved key): the last good one stays.
    env.publish("p.yaml", &policy(&format!("{SECRET_VALUE}#2"), "  azure-owner: x\n")).await;
    let (status, text) = post(&http, &warm, "/drift", drift(eg_event(&vms[4], VM_WRITE, SOMEONE))).await;
    assert_eq!((status, by_status(&text)), (200, json!({"applied": 1})), "{text}");
    answers.push(text);
    // Not an event.
    let (status, text) = post(&http, &warm, "/drift", drift(json!({"hello": "world"}))).await;
    assert_eq!(status, 500, "{text}");
    answers.push(text);

    // Two cold starts that cannot read the policy: fail closed, and say why without the SAS.
    let unreachable = start(&env, &env.unreachable_policy_url(), &logs[1]).await;
    let (status, text) = post(&http, &unreachable, "/drift", drift(eg_event(&vms[0], VM_WRITE, SOMEONE))).await;
    assert!(status == 500 && text.contains("Transport"), "{status} {text}");
    answers.push(text);
    let tampered = tampered_sas();
    let refused = start(&env, &env.policy_url(Some(&tampered)), &logs[2]).await;
    let (status, text) = post(&http, &refused, "/drift", drift(eg_event(&vms[0], VM_WRITE, SOMEONE))).await;
    assert!(status == 500 && text.contains("AuthorizationFailure"), "{status} {text}");
    answers.push(text);
    drop((warm, unreachable, refused));

    for vm in &vms {
        assert_eq!(env.fake.tags(vm).expect("vm").get("cost-center").map(String::as_str), Some(SECRET_VALUE), "{vm}");
    }
    assert!(env.fake.posted_metrics().iter().any(|(_, b)| b.contains("\"PolicyRejected\"")), "metrics were sent");
    let (tokens, issued) = env.tokens_in_flight();
    assert!(tokens.len() >= 2 && tokens.len() == issued, "tokens presented {tokens:?}, issued {issued}");
    let mut secrets: Vec<(String, String)> = vec![
        ("identity header".into(), IDENTITY_HEADER.into()),
        ("sensitive policy value".into(), SECRET_VALUE.into()),
        ("SAS query".into(), "sig=".into()),
    ];
    secrets.extend(tokens.iter().map(|t| (format!("bearer token {t}"), t.clone())));
    for sas in [azurite::account_sas(), tampered] {
        secrets.extend(sas_signatures(&sas).into_iter().map(|s| ("SAS signature".to_string(), s)));
    }

    let mut scanned = 0;
    for (i, log) in logs.iter().enumerate() {
        let text = std::fs::read_to_string(log).expect("the binary's output");
        assert!(text.contains("\"level\":\"DEBUG\""), "{}: debug logging is on", log.display());
        assert!(text.contains("listening"), "{}", log.display());
        if i == 0 {
            assert!(text.len() > 10_000, "the warm binary logged {} bytes", text.len());
            assert!(text.contains("cost-center"), "the sensitive key itself may be shown");
            assert!(text.contains("keeping the last known good version"), "the rejection was logged");
        } else {
            assert!(text.contains("fail closed"), "{}: {text}", log.display());
        }
        scan(&text, &log.display().to_string(), &secrets);
        scanned += text.len();
    }
    let answered = answers.join("\n");
    scan(&answered, "HTTP answers", &secrets);
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "SECURITY(logs, binary): {scanned} bytes of stdout+stderr from 3 runs + {} bytes of HTTP answers scanned; {} secrets ({} tokens, identity header, SAS signatures, sensitive value) not found",
        answered.len(),
        secrets.len(),
        tokens.len()
    );
}

fn scan(text: &str, whose: &str, secrets: &[(String, String)]) {
    for (what, secret) in secrets {
        assert!(secret.len() >= 4, "{what} is long enough to search for");
        if let Some(at) = text.find(secret.as_str()) {
            let from = text[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = text[at..].find('\n').map_or(text.len(), |n| at + n);
            panic!("the {what} is in {whose}: {}", &text[from..to]);
        }
    }
}
