//! The Azure policy blob under faults, against a real Azurite: deleted, truncated, replaced by an
//! invalid version, unreadable (403 from Azurite: a tampered signature, a SAS without the
//! permission), unreachable, too large, and changed in the middle of a sweep — for one blob and for
//! a prefix of layered blobs. A warm function keeps its last known good version, still applies it,
//! and reports the problem (status report + `PolicyRejected` for a rejected version, a warning
//! naming the location and the cause for an unreadable one); a cold function fails closed: non-2xx
//! (Event Grid retries, then dead-letters), no ARM call at all, and an error that names the
//! location without its SAS and says why.

#![cfg(feature = "azure")]

use crate::support;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;
use support::azurite;
use support::env::{
    blob_created, captured, eg_event, infrastructure, invoke, queue_message, records, rid, sas_signatures,
    tampered_sas, timer, Env, OWNER, SOMEONE,
};
use support::fake::Fault as ArmFault;
use tagwarden::policy::load::MAX_DOCUMENT_BYTES;

/// What goes wrong with the published policy.
enum Fault {
    /// These blobs are deleted.
    Delete(Vec<&'static str>),
    /// This blob is (re)published with this text.
    Publish(&'static str, String),
    /// The function reads the policy with this SAS (query string) instead.
    Sas(String),
    /// The storage endpoint does not answer (nothing listens on the port).
    Unreachable,
}

struct Case {
    what: &'static str,
    fault: Fault,
    /// A new version was read and rejected (else: nothing could be read).
    rejected: bool,
    /// What the error must say.
    why: Vec<&'static str>,
}

const WRITE: &str = "Microsoft.Compute/disks/write";

/// Run one case against a warm function (it has `v1` in force) and a cold one, then restore
/// the published policy (`docs`) and check the warm function is back to normal.
async fn check(env: &mut Env, v1: &str, docs: &[(&'static str, String)], case: &Case) {
    let what = case.what;
    let slug: String = what.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    // Apply the fault; `url`: where a function configured now would read the policy.
    let url = match &case.fault {
        Fault::Delete(names) => {
            for n in names {
                env.delete(n).await;
            }
            env.policy_url(None)
        }
        Fault::Publish(name, text) => {
            env.publish(name, text).await;
            env.policy_url(None)
        }
        Fault::Sas(sas) => env.policy_url(Some(sas)),
        Fault::Unreachable => env.unreachable_policy_url(),
    };
    if matches!(case.fault, Fault::Sas(_) | Fault::Unreachable) {
        env.repoint(Some(&url));
    }
    // The location as it may be shown: the URL without its query.
    let shown = url.split('?').next().unwrap_or_default().to_string();
    let signatures: Vec<String> =
        sas_signatures(url.split_once('?').map(|(_, q)| q).expect("a SAS")).into_iter().collect();
    let no_sas = |text: &str, context: &str| {
        assert!(!text.contains("sig="), "{what}: a SAS in the {context}: {text}");
        for s in &signatures {
            assert!(!text.contains(s.as_str()), "{what}: the SAS signature in the {context}: {text}");
        }
    };

    // Warm: the last known good version is applied, and the problem is reported.
    let disk = rid("Microsoft.Compute/disks", &format!("{slug}-warm"));
    env.fake.put_resource(&disk, &[(OWNER, "owned")]);
    let metrics_before = env.fake.posted_metrics().len();
    env.fake.clear_log();
    let body = env.drift(eg_event(&disk, WRITE, SOMEONE)).await;
    let recs = records(&body);
    assert_eq!(recs.len(), 1, "{what}: {body:#}");
    assert_eq!((recs[0]["status"].as_str(), recs[0]["policy_version"].as_str()), (Some("applied"), Some(v1)), "{what}");
    assert_eq!(env.fake.tags(&disk).expect("disk").get("team").map(String::as_str), Some("platform"), "{what}");
    assert_eq!(env.fake.arm_calls(), ["GET tags", "PATCH tags"], "{what}");
    no_sas(&body.to_string(), "warm response");
    if case.rejected {
        let report = env.report().await.expect("a status report");
        assert_eq!(report["policy"]["state"], "rejected-keeping-last-good", "{what}: {report:#}");
        assert_eq!(report["policy"]["version"], v1, "{what}");
        let errors = report["policy"]["errors"].to_string();
        for w in &case.why {
            assert!(errors.contains(w), "{what}: the report says {w:?}: {errors}");
        }
        no_sas(&report.to_string(), "status report");
        let posted: Vec<String> = env.fake.posted_metrics().into_iter().skip(metrics_before).map(|(_, b)| b).collect();
        let posted = posted.join("\n");
        assert!(posted.contains("\"PolicyRejected\""), "{what}: PolicyRejected reached Azure Monitor: {posted}");
    } else {
        // Nothing new was read, so nothing was rejected: the warning says where and why.
        let logs = captured().text();
        let warning = logs
            .lines()
            .filter(|l| l.contains("keeping the last known good version") && l.contains(&shown))
            .find(|l| case.why.iter().all(|w| l.contains(w)));
        let warning = warning.unwrap_or_else(|| panic!("{what}: no warning naming {shown} and {:?}", case.why));
        no_sas(warning, "warning");
    }

    // A sweep while the problem lasts: its status report must not say `ok` (checked where the
    // store still takes writes; a forbidden or unreachable one cannot take the report either).
    if matches!(case.fault, Fault::Delete(_) | Fault::Publish(..)) {
        let (status, sweep) = env.invoke("sweep", "timer", timer()).await;
        assert_eq!(status, 200, "{what}: the warm sweep runs on the last good version: {sweep:#}");
        let report = env.report().await.expect("a status report");
        let want = if case.rejected { "rejected-keeping-last-good" } else { "unreadable-keeping-last-good" };
        assert_eq!(report["policy"]["state"], want, "{what}: {report:#}");
        assert_eq!(report["policy"]["version"], v1, "{what}");
        let errors = report["policy"]["errors"].to_string();
        for w in &case.why {
            assert!(errors.contains(w), "{what}: the sweep's report says {w:?}: {errors}");
        }
        no_sas(&report.to_string(), "status report of a sweep");
    }

    // Cold: nothing is known, so nothing is written and the event goes back to Event Grid.
    let cold = env.cold(Some(&url));
    let disk = rid("Microsoft.Compute/disks", &format!("{slug}-cold"));
    env.fake.put_resource(&disk, &[(OWNER, "owned")]);
    env.fake.clear_log();
    let (status, body) = invoke(&cold, "drift", "eventGridEvent", eg_event(&disk, WRITE, SOMEONE)).await;
    assert!(!(200..300).contains(&status), "{what}: a cold function must fail the invocation: {status} {body:#}");
    let error = body["ReturnValue"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("no valid policy from") && error.contains("nothing is written"), "{what}: {error}");
    assert!(error.contains(&shown), "{what}: the error names the location {shown}: {error}");
    for w in &case.why {
        assert!(error.contains(w), "{what}: the error says {w:?}: {error}");
    }
    if case.rejected {
        assert!(error.contains("the published version is invalid"), "{what}: {error}");
    }
    no_sas(&body.to_string(), "cold response");
    // The timer too.
    let (status, sweep) = invoke(&cold, "sweep", "timer", timer()).await;
    assert_eq!(status, 500, "{what}: {sweep:#}");
    no_sas(&sweep.to_string(), "cold sweep response");
    assert!(env.fake.arm_calls().is_empty(), "{what}: no ARM call at all: {:?}", env.fake.arm_calls());
    assert_eq!(env.fake.count("PATCH tags"), 0);
    assert_eq!(env.fake.tags(&disk).expect("disk").len(), 1, "{what}: untouched");
    if case.rejected {
        let report = env.report().await.expect("a status report");
        assert_eq!(report["policy"]["state"], "unavailable", "{what}: {report:#}");
    }
    println!("POLICY-FAULT {what}: warm kept {v1}; cold failed closed with HTTP {status}: {error}");

    // Restore: the same documents as before, read through the configured URL.
    env.repoint(None);
    let originals: Vec<&str> = docs.iter().map(|(n, _)| *n).collect();
    if let Fault::Publish(name, _) = &case.fault {
        if !originals.contains(name) {
            env.delete(name).await;
        }
    }
    for (name, text) in docs {
        env.publish(name, text).await;
    }
    // The restored policy's own BlobCreated event: `drift` re-checks the policy and answers at
    // once; the sweep from the queue picks up the resource the cold function left alone, and
    // rewrites the status report.
    // (A document's: a notification of anything else, the prefix included, sweeps nothing.)
    let written = docs.first().map_or(env.policy.as_str(), |(name, _)| *name);
    let (status, body) = env.invoke("drift", "eventGridEvent", blob_created(written)).await;
    assert_eq!(status, 200, "{what}: {body:#}");
    let (status, body) = env.invoke("sweep-queue", "message", queue_message(&blob_created(written))).await;
    assert_eq!(status, 200, "{what}: {body:#}");
    let recs = records(&body);
    assert!(recs.iter().all(|r| r["policy_version"] == v1), "{what}: restored: {body:#}");
    assert_eq!(env.fake.tags(&disk).expect("disk").get("team").map(String::as_str), Some("platform"));
    assert_eq!(env.report().await.map(|r| r["policy"]["state"].clone()), Some(json!("ok")), "{what}: report restored");
}

/// Warm up `env` with one applied event; the version in force.
async fn warm_up(env: &Env) -> String {
    let disk = rid("Microsoft.Compute/disks", "warm-up");
    env.fake.put_resource(&disk, &[(OWNER, "owned")]);
    let body = env.drift(eg_event(&disk, WRITE, SOMEONE)).await;
    let recs = records(&body);
    assert_eq!(recs[0]["status"], "applied", "{body:#}");
    // A sweep writes the status report: the restore checks it says `ok` again.
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    recs[0]["policy_version"].as_str().expect("a version").to_string()
}

#[tokio::test]
async fn single_blob_faults_keep_the_last_good_version_warm_and_fail_closed_cold() {
    captured();
    let name = "cluster/infrastructure.json";
    let good = infrastructure(&[("team", "platform")], &[]);
    let docs = vec![(name, good.clone())];
    let mut env = Env::new(name, &[(name, &good)]).await;
    let v1 = warm_up(&env).await;

    let huge = format!("{{\"pad\": \"{}\"}}", "x".repeat(MAX_DOCUMENT_BYTES));
    let invalid = infrastructure(&[("team", "platform")], &[("microsoft.costcenter", "1"), ("env", "prod#1")]);
    let cases = vec![
        Case {
            what: "deleted",
            fault: Fault::Delete(vec![name]),
            rejected: false,
            why: vec!["HTTP 404", "BlobNotFound"],
        },
        Case {
            what: "truncated",
            fault: Fault::Publish(name, good[..good.len() / 2].to_string()),
            rejected: true,
            why: vec!["infrastructure.json", "not valid JSON"],
        },
        Case {
            what: "invalid version (reserved key, bad value)",
            fault: Fault::Publish(name, invalid),
            rejected: true,
            why: vec!["microsoft.costcenter", "reserved", "env", "invalid character"],
        },
        Case {
            what: "too large",
            fault: Fault::Publish(name, huge),
            rejected: false,
            why: vec!["PolicyTooLarge", "1048576"],
        },
        Case {
            what: "unreadable (403, wrong signature)",
            fault: Fault::Sas(tampered_sas()),
            rejected: false,
            why: vec!["HTTP 403", "AuthorizationFailure", "check the SAS"],
        },
        Case {
            what: "unreadable (403, SAS without read permission)",
            fault: Fault::Sas(azurite::account_sas_with("wl", "2099-01-01T00:00:00Z")),
            rejected: false,
            why: vec!["HTTP 403", "AuthorizationPermissionMismatch"],
        },
        Case {
            what: "unreachable (connection refused)",
            fault: Fault::Unreachable,
            rejected: false,
            why: vec!["Transport"],
        },
    ];
    for case in &cases {
        check(&mut env, &v1, &docs, case).await;
    }

    // A valid new version is in force at once.
    env.publish(name, &infrastructure(&[("team", "compute")], &[])).await;
    let disk = rid("Microsoft.Compute/disks", "v2");
    env.fake.put_resource(&disk, &[(OWNER, "owned")]);
    let body = env.drift(eg_event(&disk, WRITE, SOMEONE)).await;
    assert_ne!(records(&body)[0]["policy_version"], v1.as_str());
    assert_eq!(env.fake.tags(&disk).expect("disk")["team"], "compute");
    println!("POLICY-FAULTS single blob: {} cases, warm and cold", cases.len());
}

#[tokio::test]
async fn layered_prefix_faults_keep_the_last_good_version_warm_and_fail_closed_cold() {
    captured();
    let base = "layers/00-base.json";
    let env_layer = "layers/10-env.yaml";
    let docs = vec![(base, infrastructure(&[("team", "platform")], &[])), (env_layer, "env: prod\n".to_string())];
    let refs: Vec<(&str, &str)> = docs.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let mut env = Env::new("layers/", &refs).await;
    let v1 = warm_up(&env).await;

    let cases = vec![
        Case {
            what: "every layer deleted",
            fault: Fault::Delete(vec![base, env_layer]),
            rejected: false,
            why: vec!["NoPolicyDocuments"],
        },
        Case {
            what: "a layer truncated",
            fault: Fault::Publish(env_layer, "env: prod\nteam: [plat".to_string()),
            rejected: true,
            why: vec!["10-env.yaml", "not valid YAML"],
        },
        Case {
            what: "a layer with a reserved key and a bad value",
            fault: Fault::Publish(env_layer, "env: prod\nWindows-build: x\nowner: \"a#b\"\n".to_string()),
            rejected: true,
            why: vec!["Windows-build", "reserved", "owner", "invalid character"],
        },
        Case {
            what: "a new layer naming another cluster",
            fault: Fault::Publish(
                "layers/20-other.yaml",
                "version: 1\ninfraID: othercluster-a1b2c\ntags: {env: prod}\n".to_string(),
            ),
            rejected: true,
            why: vec!["infraID", "othercluster-a1b2c"],
        },
        Case {
            what: "a new layer too large",
            fault: Fault::Publish("layers/15-big.yaml", format!("pad: {}\n", "x".repeat(MAX_DOCUMENT_BYTES))),
            // The listing sizes it, so it is refused before it is downloaded, and
            // reported as a rejection naming the limit.
            rejected: true,
            why: vec!["15-big.yaml", "MAX_DOCUMENT_BYTES"],
        },
        Case {
            what: "unlistable (403, SAS without list permission)",
            fault: Fault::Sas(azurite::account_sas_with("r", "2099-01-01T00:00:00Z")),
            rejected: false,
            why: vec!["blob:ListBlobs", "HTTP 403", "AuthorizationPermissionMismatch"],
        },
        Case {
            what: "unlistable (403, wrong signature)",
            fault: Fault::Sas(tampered_sas()),
            rejected: false,
            why: vec!["blob:ListBlobs", "HTTP 403", "AuthorizationFailure"],
        },
    ];
    for case in &cases {
        check(&mut env, &v1, &docs, case).await;
    }
    println!("POLICY-FAULTS layered prefix: {} cases, warm and cold", cases.len());
}

#[tokio::test]
async fn a_policy_change_mid_sweep_applies_one_version_per_sweep() {
    let docs = [("layers/00-base.json", infrastructure(&[("team", "platform"), ("env", "prod")], &[]))];
    let refs: Vec<(&str, &str)> = docs.iter().map(|(n, t)| (*n, t.as_str())).collect();
    let mut env = Env::new("layers/", &refs).await;
    env.handler.engine.set_concurrency(1);
    const N: usize = 12;
    let disks: Vec<String> = (0..N).map(|i| rid("Microsoft.Compute/disks", &format!("disk-{i:02}"))).collect();
    for d in &disks {
        env.fake.put_resource(d, &[(OWNER, "owned")]);
    }
    // The sweep's first write is throttled for a second: the change is published meanwhile.
    env.fake.inject("PATCH", ArmFault::Throttle { retry_after: 1 });
    let publish_mid_sweep = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !env.fake.log().iter().any(|l| l.status == 429) {
            assert!(Instant::now() < deadline, "the sweep never reached its first write");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        env.publish("layers/10-change.yaml", "team: compute\n").await;
        env.fake.count("PATCH tags")
    };
    let ((status, body), patches_at_publish) = tokio::join!(env.invoke("sweep", "timer", timer()), publish_mid_sweep);
    assert_eq!(status, 200, "{body:#}");
    assert!(patches_at_publish < N, "the change landed mid-sweep ({patches_at_publish} of {N} writes done)");
    let recs = records(&body);
    assert_eq!(recs.len(), N, "{body:#}");
    let versions: BTreeSet<&str> = recs.iter().filter_map(|r| r["policy_version"].as_str()).collect();
    assert_eq!(versions.len(), 1, "one sweep, one policy version: {versions:?}");
    let v1 = versions.into_iter().next().expect("a version").to_string();
    assert!(recs.iter().all(|r| r["status"] == "applied"), "{body:#}");
    for d in &disks {
        assert_eq!(env.fake.tags(d).expect("disk")["team"], "platform", "the version the sweep started with");
    }
    assert_eq!(env.report().await.expect("report")["policy"]["version"], v1.as_str());

    // The next sweep applies the new version to every resource, with one Merge each.
    env.fake.clear_log();
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    let recs = records(&body);
    let versions: BTreeSet<&str> = recs.iter().filter_map(|r| r["policy_version"].as_str()).collect();
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_ne!(versions.first().copied(), Some(v1.as_str()), "the new version");
    assert_eq!(env.fake.count("PATCH tags"), N);
    for d in &disks {
        assert_eq!(env.fake.tags(d).expect("disk")["team"], "compute");
    }
    assert_ne!(env.report().await.expect("report")["policy"]["version"], v1.as_str());
    println!("POLICY-FAULT mid-sweep: {N} resources, change published after {patches_at_publish} writes; one version per sweep");
}
