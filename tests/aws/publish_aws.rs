//! `tagwarden publish` and `tagwarden status` against moto (behind the strict layer): S3 objects,
//! an S3 prefix's cluster layer and SSM parameters; conditional-write conflicts, an invalid
//! document refused with nothing written, an unchanged document not rewritten, and the function
//! reading what was published.

#![cfg(feature = "aws")]

use crate::support;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::Clients;
use tagwarden::cloud::Cloud;
use tagwarden::policy_store::PolicySource;
use tagwarden::policy_store::PutError;
use tagwarden::publish::PublishResult;
use tagwarden::status::{ResourceFailure, StatusReport};

fn doc(infra: &str, tags: &str) -> String {
    format!("version: 1\ninfraID: {infra}\ntags: {{{tags}}}\n")
}

fn puts(clients: &Clients, op: &str) -> u64 {
    clients.calls.snapshot().get(op).copied().unwrap_or_default()
}

async fn bucket(clients: &Clients, account: &str) -> String {
    let b = format!("policy-{account}");
    clients.s3.create_bucket().bucket(&b).send().await.expect("bucket");
    b
}

#[tokio::test]
async fn s3_object_create_unchanged_update_and_refusal() {
    let (clients, account) = support::account().await;
    let b = bucket(&clients, &account).await;
    let loc: PolicyLocation = format!("s3://{b}/cluster/policy.yaml").parse().expect("location");
    let store = policy_store(&clients, loc.clone(), Duration::ZERO);

    let v1 = doc("c-1", "team: a, env: dev, gone: x");
    let created = store.publish(&v1, None, false).await.expect("created");
    assert_eq!((created.result, created.infra_id.as_deref()), (PublishResult::Written, Some("c-1")));
    assert_eq!(created.changes.added.len(), 3);
    assert_eq!(puts(&clients, "S3:PutObject"), 1);

    // The function reads exactly what was published, with its own rules.
    let function = policy_store(&clients, loc.clone(), Duration::ZERO);
    let (loaded, _) = function.current(true).await;
    assert_eq!(loaded.expect("the function accepts it").infra_id, "c-1");

    let again = store.publish(&v1, None, false).await.expect("unchanged");
    assert_eq!((again.result, again.version.clone()), (PublishResult::Unchanged, created.version.clone()));
    assert_eq!(puts(&clients, "S3:PutObject"), 1, "an unchanged document is not rewritten");

    let v2 = doc("c-1", "team: b, env: dev, cost: '1'");
    let dry = store.publish(&v2, None, true).await.expect("dry run");
    assert_eq!(dry.result, PublishResult::WouldWrite);
    assert_eq!(puts(&clients, "S3:PutObject"), 1, "--dry-run writes nothing");
    let updated = store.publish(&v2, None, false).await.expect("updated");
    assert_eq!(updated.result, PublishResult::Written);
    assert_ne!(updated.version, created.version);
    assert_eq!(updated.changes.changed["team"], ["a".to_string(), "b".to_string()]);
    assert_eq!(updated.changes.added.keys().collect::<Vec<_>>(), ["cost"]);
    assert_eq!(updated.changes.removed.keys().collect::<Vec<_>>(), ["gone"]);

    // Invalid: every violation listed, nothing written, the published version untouched.
    let invalid = store.publish(&doc("c-1", "aws:team: a, Name: n"), None, false).await.expect("refused");
    assert_eq!(invalid.result, PublishResult::Refused);
    assert!(!invalid.violations.is_empty(), "{invalid:?}");
    assert_eq!(puts(&clients, "S3:PutObject"), 2);
    assert_eq!(store.read("cluster/policy.yaml").await.expect("read").expect("still there").text, v2);
}

#[tokio::test]
async fn s3_conditional_writes_never_overwrite_another_publisher() {
    let (clients, account) = support::account().await;
    let b = bucket(&clients, &account).await;
    let loc: PolicyLocation = format!("s3://{b}/p.yaml").parse().expect("location");
    let store = policy_store(&clients, loc, Duration::ZERO);

    // Two publishers read "nothing there"; the second create loses.
    assert!(store.read("p.yaml").await.expect("read").is_none());
    store.source.put("p.yaml", &doc("c-1", "a: '1'"), None).await.expect("first create");
    let lost = store.source.put("p.yaml", &doc("c-1", "a: '2'"), None).await.expect_err("second create");
    assert!(matches!(lost, PutError::Conflict { .. }), "{lost}");

    // Both read version 1; one replaces it; the other's write, conditional on version 1, loses.
    let read = store.read("p.yaml").await.expect("read").expect("v1");
    store.source.put("p.yaml", &doc("c-1", "a: '3'"), Some(&read.etag)).await.expect("first replace");
    let lost = store.source.put("p.yaml", &doc("c-1", "a: '4'"), Some(&read.etag)).await.expect_err("stale replace");
    assert!(matches!(lost, PutError::Conflict { .. }), "{lost}");
    assert_eq!(
        store.read("p.yaml").await.expect("read").expect("v2").text,
        doc("c-1", "a: '3'"),
        "nothing overwritten unseen"
    );
}

#[tokio::test]
async fn s3_prefix_layer_is_checked_with_the_other_layers() {
    let (clients, account) = support::account().await;
    let b = bucket(&clients, &account).await;
    let defaults = doc("c-1", "owner: platform");
    clients
        .s3
        .put_object()
        .bucket(&b)
        .key("layers/00-defaults.yaml")
        .body(defaults.into_bytes().into())
        .send()
        .await
        .expect("layer");
    let loc: PolicyLocation = format!("s3://{b}/layers/").parse().expect("location");
    let store = policy_store(&clients, loc.clone(), Duration::ZERO);

    let clash = store.publish(&doc("c-2", "a: b"), None, false).await.expect("refused");
    assert_eq!(clash.result, PublishResult::Refused, "the layers would name two clusters: {clash:?}");
    let ok = store.publish(&doc("c-1", "team: a"), None, false).await.expect("written");
    assert_eq!(
        (ok.result, ok.location.as_str()),
        (PublishResult::Written, format!("s3://{b}/layers/10-cluster.yaml").as_str())
    );
    assert_eq!(ok.changes.added.keys().collect::<Vec<_>>(), ["team"], "the defaults were in force already");
    let (loaded, _) = policy_store(&clients, loc, Duration::ZERO).current(true).await;
    let tags = loaded.expect("the function accepts the layers").policy.base_tags(Cloud::Aws);
    assert_eq!(tags.keys().collect::<Vec<_>>(), ["owner", "team"]);
}

#[tokio::test]
async fn ssm_versions_guard_the_parameter() {
    let (clients, _) = support::account().await;
    let loc: PolicyLocation = "ssm:/tagwarden/policy".parse().expect("location");
    let store = policy_store(&clients, loc.clone(), Duration::ZERO);

    let v1 = doc("c-1", "team: a");
    assert_eq!(store.publish(&v1, None, false).await.expect("created").version.as_deref(), Some("1"));
    assert_eq!(store.publish(&v1, None, false).await.expect("same").result, PublishResult::Unchanged);
    assert_eq!(puts(&clients, "SSM:PutParameter"), 1);
    let v2 = doc("c-1", "team: b");
    assert_eq!(store.publish(&v2, None, false).await.expect("updated").version.as_deref(), Some("2"));

    // A stale reader is refused before its put; a creator racing another creator too.
    let stale = store.read("/tagwarden/policy").await.expect("read").expect("v2");
    store.source.put("/tagwarden/policy", &doc("c-1", "team: c"), Some(&stale.etag)).await.expect("v3");
    let lost =
        store.source.put("/tagwarden/policy", &doc("c-1", "team: d"), Some(&stale.etag)).await.expect_err("stale");
    assert!(matches!(&lost, PutError::Conflict { found } if found == "3"), "{lost}");
    let lost = store.source.put("/tagwarden/policy", &v1, None).await.expect_err("exists");
    assert!(matches!(lost, PutError::Conflict { .. }), "{lost}");
    assert_eq!(store.read("/tagwarden/policy").await.expect("read").expect("v3").text, doc("c-1", "team: c"));

    let (loaded, _) = policy_store(&clients, loc, Duration::ZERO).current(true).await;
    assert_eq!(loaded.expect("the function reads the parameter").fingerprint, "/tagwarden/policy@3");
}

fn cli(env: &[(&'static str, String)], args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tagwarden"));
    cmd.args(args).envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("the CLI runs");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.unwrap_or_default().as_bytes()).expect("stdin written");
    drop(input);
    let out = child.wait_with_output().expect("the CLI ends");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_publishes_refuses_and_shows_the_status() {
    let (clients, account, env) = support::account_with_env().await;
    let b = bucket(&clients, &account).await;
    let to = format!("s3://{b}/policy.yaml");

    let (code, out, err) = cli(&env, &["publish", "--from", "-", "--to", &to], Some(&doc("c-1", "team: a")));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("published") && out.contains("+ team=a"), "{out}");
    let (code, out, _) = cli(&env, &["publish", "--from", "-", "--to", &to, "--json"], Some(&doc("c-1", "team: a")));
    let json: Value = serde_json::from_str(&out).expect("--json");
    assert_eq!((code, json["result"].as_str()), (0, Some("unchanged")));

    let (code, out, _) =
        cli(&env, &["publish", "--from", "-", "--to", &to, "--json"], Some(&doc("c-1", "aws:team: a, Name: n")));
    let json: Value = serde_json::from_str(&out).expect("--json");
    assert_eq!((code, json["result"].as_str()), (1, Some("refused")), "{out}");
    assert!(json["violations"].as_array().is_some_and(|v| !v.is_empty()), "{out}");

    let (code, _, err) = cli(&env, &["publish", "--to", &to], None);
    assert_eq!(code, 3, "a source is required (usage): {err}");
    assert!(err.contains("--from"), "{err}");

    // No report yet: exit 3 (nothing to judge), saying how to get one.
    let (code, _, err) = cli(&env, &["status", "--policy", &to], None);
    assert!(code == 3 && err.contains("sweep"), "{code} {err}");
    let loc: PolicyLocation = to.parse().expect("location");
    let failure = ResourceFailure::new(
        &format!("arn:aws:ec2:us-east-1:{account}:instance/i-0abc"),
        "ec2:instance",
        "ec2:CreateTags i-0abc: UnauthorizedOperation (fix: grant ec2:CreateTags to the function's role)",
    );
    let report = StatusReport::new(Cloud::Aws, &loc, Some("v1".into()), vec![], vec![failure]);
    tagwarden::status_store::write(&policy_store(&clients, loc, Duration::ZERO), None, &report)
        .await
        .expect("status written");
    let (code, out, _) = cli(&env, &["status", "--policy", &to], None);
    assert_eq!(code, 2, "a failed resource makes status exit 2: {out}");
    assert!(
        out.contains("state      ok") && out.contains("i-0abc") && out.contains("fix: grant ec2:CreateTags"),
        "{out}"
    );
    let (_, out, _) = cli(&env, &["status", "--policy", &to, "--json"], None);
    let json: Value = serde_json::from_str(&out).expect("--json");
    assert_eq!(json["failures"][0]["name"], "i-0abc");

    // A contested key: kept in the contest state (apart from the report, which shows a copy),
    // shown with its writer and how to lift it; lifted by hand, the lift recorded with who.
    let lb = format!("arn:aws:elasticloadbalancing:us-east-1:{account}:targetgroup/web-tg/73e2d6bc24d8a067");
    let lbc = format!("arn:aws:sts::{account}:assumed-role/aws-load-balancer-controller/1700000000");
    let loc: PolicyLocation = to.parse().expect("location");
    let mut report = StatusReport::new(Cloud::Aws, &loc, Some("v1".into()), vec![], vec![]);
    report.contests = vec![tagwarden::contest::Contest {
        resource: lb.clone(),
        key: "team".into(),
        policy: "fp".into(),
        corrections: vec![1, 2, 3],
        writer: Some(lbc.clone()),
        contested_since: Some(4),
        hold_until: Some(u64::MAX / 2),
        holds: 1,
    }];
    let state = tagwarden::contest::ContestState {
        cluster: "c-1".into(),
        updated_at: 4,
        contests: report.contests.clone(),
        lifts: Vec::new(),
    };
    let state_key = "_tagwarden/contests/c-1.json";
    let text = serde_json::to_vec(&state).expect("json");
    clients.s3.put_object().bucket(&b).key(state_key).body(text.into()).send().await.expect("state");
    tagwarden::status_store::write(&policy_store(&clients, loc, Duration::ZERO), None, &report)
        .await
        .expect("status written");
    let (code, out, _) = cli(&env, &["status", "--policy", &to], None);
    assert_eq!(code, 2, "a contested key is not in line: {out}");
    assert!(
        out.contains("contested  1") && out.contains(&lbc) && out.contains(&format!("--lift {lb} --key team")),
        "{out}"
    );
    // The writer, classified from its role session, and the documented way to end the fight.
    assert!(
        out.contains(&format!("writer: aws-load-balancer-controller ({lbc})"))
            && out.contains("--default-tags")
            && out.contains("alb.ingress.kubernetes.io/tags"),
        "{out}"
    );
    let (_, csv, _) = cli(&env, &["status", "--policy", &to, "--format", "csv"], None);
    assert!(
        csv.contains(&format!(
            ",team,,,would-fail,contested: changed again and again by {lbc},aws-load-balancer-controller: {lbc},"
        )),
        "{csv}"
    );
    let (code, out, err) = cli(&env, &["status", "--policy", &to, "--lift", &lb, "--key", "team", "--json"], None);
    let json: Value = serde_json::from_str(&out).expect("--json");
    assert_eq!((code, json["lifted"].as_u64()), (0, Some(1)), "{out} {err}");
    let got = clients.s3.get_object().bucket(&b).key(state_key).send().await.expect("state");
    let state: tagwarden::contest::ContestState =
        serde_json::from_slice(&got.body.collect().await.expect("body").into_bytes()).expect("a state");
    assert!(state.contests.is_empty(), "{state:?}");
    let lift = &state.lifts[0];
    assert!(lift.by.starts_with("arn:aws:") && lift.key.as_deref() == Some("team"), "who lifted it: {lift:?}");
    let (_, out, _) = cli(&env, &["status", "--policy", &to], None);
    assert!(out.contains("lifts      1") && out.contains(&lift.by), "the report shows the lift: {out}");
    let (code, _, err) = cli(&env, &["status", "--policy", &to, "--lift", &lb], None);
    assert!(code == 1 && err.contains("no contest on"), "nothing left to lift: {code} {err}");
    let (code, out, _) = cli(&env, &["status", "--policy", &to], None);
    assert_eq!(code, 0, "lifted: in line again: {out}");
}

/// A cluster set: each cluster's publisher writes under its own infraID (S3: its folder's
/// cluster layer; SSM: its parameter), the function reads both, and a folder that names another
/// cluster's policy is rejected on its own while the other cluster stays enforced.
#[tokio::test]
async fn publish_into_a_cluster_set_s3_and_ssm() {
    let (clients, account) = support::account().await;
    let b = bucket(&clients, &account).await;
    for set in [format!("s3://{b}/clusters/*/"), format!("ssm:/tw-{account}/clusters/*")] {
        let loc: PolicyLocation = set.parse().expect("location");
        let store = policy_store(&clients, loc.clone(), Duration::ZERO);
        for id in ["c-1", "c-2"] {
            let out = store.publish(&doc(id, &format!("team: t-{id}")), Some(id), false).await.expect("published");
            assert_eq!((out.result, out.infra_id.as_deref()), (PublishResult::Written, Some(id)), "{set}");
            let expected = match &loc {
                PolicyLocation::S3Set { .. } => format!("s3://{b}/clusters/{id}/10-cluster.yaml"),
                _ => format!("ssm:/tw-{account}/clusters/{id}"),
            };
            assert_eq!(out.location, expected);
        }
        let nameless = store.publish("version: 1\ntags: {team: x}\n", Some("c-3"), false).await.expect("refused");
        assert!(nameless.violations[0].contains("names no infraID"), "{:?}", nameless.violations);
        // The document alone never picks the folder; one for another cluster is refused.
        let unnamed = store.publish(&doc("c-2", "team: evil"), None, false).await.expect("refused");
        assert!(unnamed.violations[0].contains("--cluster c-2"), "{:?}", unnamed.violations);
        let other = store.publish(&doc("c-2", "team: evil"), Some("c-1"), false).await.expect("refused");
        assert_eq!(other.result, PublishResult::Refused);
        assert!(
            other.violations[0].contains("names infraID \"c-2\", but it is published for cluster c-1"),
            "{other:?}"
        );
        let hostile = store.publish(&doc("../c-2", "team: evil"), Some("../c-2"), false).await.expect("refused");
        assert!(hostile.violations[0].contains("is not an infraID"), "{hostile:?}");

        let function =
            policy_store(&clients, loc.clone(), Duration::ZERO).with_clusters(Some(vec!["c-1".into(), "c-2".into()]));
        let (policies, changes) = function.policies(true).await;
        let policies = policies.expect("both clusters are in force");
        assert_eq!(policies.iter().map(|p| p.infra_id.as_str()).collect::<Vec<_>>(), ["c-1", "c-2"], "{set}");
        assert_eq!(changes.len(), 2);
        assert_eq!(function.clusters().await.expect("listed"), ["c-1", "c-2"]);

        // c-2's key now holds c-3's policy: c-2 is rejected, c-1 stays in force.
        match &loc {
            PolicyLocation::S3Set { .. } => {
                let key = "clusters/c-2/10-cluster.yaml";
                let body = doc("c-3", "team: x").into_bytes();
                clients.s3.put_object().bucket(&b).key(key).body(body.into()).send().await.expect("put");
            }
            _ => {
                let name = format!("/tw-{account}/clusters/c-2");
                let put = clients.ssm.put_parameter().name(name).value(doc("c-3", "team: x")).overwrite(true);
                put.r#type(tagwarden::aws::sdk::ssm::types::ParameterType::String).send().await.expect("put");
            }
        }
        let (policies, changes) = function.policies(true).await;
        let policies = policies.expect("c-1 is still in force");
        assert_eq!(policies.len(), 2, "c-2 keeps its last good version");
        let rejected = changes.iter().find(|(c, _)| c == "c-2").expect("c-2 changed");
        assert!(format!("{:?}", rejected.1).contains("names infraID \\\"c-3\\\", not c-2"), "{rejected:?}");

        // Each cluster's status report beside its own policy.
        let report = StatusReport::new(Cloud::Aws, &set, Some("v".into()), Vec::new(), Vec::new());
        tagwarden::status_store::write(&function, Some("c-1"), &report).await.expect("status written");
        assert!(tagwarden::status_store::read(&function, Some("c-1")).await.expect("read").is_some(), "{set}");
        assert!(tagwarden::status_store::read(&function, Some("c-2")).await.expect("read").is_none(), "{set}");
        // A name a publisher chose never leads the report anywhere else.
        for hostile in ["../c-1", "c-1/../../x", "c-9", "c-1%2F..", ""] {
            tagwarden::status_store::write(&function, Some(hostile), &report).await.expect("nothing to write");
        }
        let keys = match &loc {
            PolicyLocation::S3Set { .. } => {
                let listed = clients.s3.list_objects_v2().bucket(&b).send().await.expect("list");
                listed.contents().iter().filter_map(|o| o.key()).map(str::to_owned).collect::<Vec<_>>()
            }
            _ => {
                let path = format!("/tw-{account}");
                let listed =
                    clients.ssm.get_parameters_by_path().path(path).recursive(true).send().await.expect("list");
                listed.parameters().iter().filter_map(|p| p.name()).map(str::to_owned).collect()
            }
        };
        let statuses: Vec<&String> = keys.iter().filter(|k| k.contains("status")).collect();
        assert_eq!(statuses.len(), 1, "only c-1's report: {keys:?}");
        assert_eq!(function.clusters().await.expect("listed"), ["c-1", "c-2"], "a status report is not a cluster");
    }
}

/// through the binary: `publish --to <set>` never lets the document pick its folder. A
/// file needs --cluster, which the document must name too; a sensitive value is printed hashed.
#[tokio::test]
async fn the_cli_publishes_into_a_set_only_where_it_is_told() {
    let (clients, account, env) = support::account_with_env().await;
    let b = bucket(&clients, &account).await;
    let set = format!("s3://{b}/clusters/*/");
    let evil = doc("c-2", "team: evil");
    let (code, out, _) = cli(&env, &["publish", "--from", "-", "--to", &set], Some(&evil));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused") && out.contains("pass --cluster c-2"), "{out}");
    let (code, out, _) = cli(&env, &["publish", "--from", "-", "--to", &set, "--cluster", "c-1"], Some(&evil));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("names infraID \"c-2\", but it is published for cluster c-1"), "{out}");
    let listed = clients.s3.list_objects_v2().bucket(&b).send().await.expect("list");
    assert_eq!(listed.key_count(), Some(0), "nothing was written");

    let own = "version: 1\ninfraID: c-1\nsensitive: [cost-center]\ntags: {team: a, cost-center: '4711-secret'}\n";
    let (code, out, err) = cli(&env, &["publish", "--from", "-", "--to", &set, "--cluster", "c-1"], Some(own));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("published s3://{b}/clusters/c-1/10-cluster.yaml")), "{out}");
    assert!(out.contains("+ team=a") && out.contains("+ cost-center=sha256:") && !out.contains("4711"), "{out}");
}
