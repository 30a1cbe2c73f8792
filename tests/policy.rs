//! Policy documents under tests/fixtures/policies: detection, layers, precedence and validation.

use std::path::Path;

use tagwarden::cloud::Cloud;
use tagwarden::policy::{self, load::DocumentKind, Policy};
use tagwarden::resource::ResourceRef;
use tagwarden::validate::{self, Rule};
use tagwarden::TagMap;

fn fixture(name: &str) -> (String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies").join(name);
    (name.to_string(), std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn load(names: &[&str]) -> Policy {
    policy::load(names.iter().map(|n| fixture(n)).collect()).expect("policy loads")
}

fn tags(pairs: &[(&str, &str)]) -> TagMap {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn instance() -> ResourceRef {
    ResourceRef::parse("arn:aws:ec2:eu-west-1:111122223333:instance/i-0abc").expect("arn")
}

#[test]
fn document_kinds_are_detected_by_content() {
    for (name, kind) in [
        ("infrastructure-aws.yaml", DocumentKind::Infrastructure),
        ("infrastructure-azure.json", DocumentKind::Infrastructure),
        ("infrastructure-list.yaml", DocumentKind::Infrastructure),
        ("install-config-aws.yaml", DocumentKind::InstallConfig),
        ("install-config-azure.yaml", DocumentKind::InstallConfig),
        ("tagwarden.yaml", DocumentKind::Native),
        ("tags.json", DocumentKind::TagMap),
    ] {
        let (n, text) = fixture(name);
        assert_eq!(policy::load::detect(&n, &text).expect(name), kind, "{name}");
    }
    let (n, text) = fixture("unrecognised.yaml");
    let err = policy::load::detect(&n, &text).expect_err("a Deployment is no policy").to_string();
    assert!(err.contains("unrecognised.yaml") && err.contains("Infrastructure") && err.contains("apiVersion"), "{err}");
}

#[test]
fn infrastructure_status_and_spec() {
    let p = load(&["infrastructure-aws.yaml"]);
    assert_eq!(p.cloud, Some(Cloud::Aws));
    assert_eq!(p.infra_id.as_deref(), Some("mycluster-7xk2p"));
    assert_eq!(p.status.len(), 3);
    assert_eq!(p.spec.len(), 2);
    let d = p.desired_for(Cloud::Aws, &instance(), &TagMap::new());
    assert_eq!(
        d.to_map(),
        tags(&[("key_infra1", "value_spec"), ("cost-center", "4242"), ("team", "platform"), ("env", "prod")])
    );
    assert_eq!(d.superseded.len(), 1);
    let s = &d.superseded[0];
    assert_eq!(
        (s.key.as_str(), s.value.as_str(), s.from.as_str(), s.by.as_str()),
        ("key_infra1", "value_status", "status", "spec")
    );
    assert_eq!(p.source_label(d.get(Cloud::Aws, "key_infra1").expect("key").source), "spec");
    assert_eq!(p.source_label(d.get(Cloud::Aws, "team").expect("key").source), "status");
    assert!(validate::policy(&p, Cloud::Aws).is_empty());

    let p = load(&["infrastructure-list.yaml"]);
    assert_eq!(p.infra_id.as_deref(), Some("listed-abcde"));
    let p = load(&["infrastructure-azure.json"]);
    assert_eq!((p.cloud, p.infra_id.as_deref(), p.status.len()), (Some(Cloud::Azure), Some("azcluster-x2b9q"), 2));
}

#[test]
fn install_config_propagation_flags() {
    let p = load(&["install-config-aws.yaml"]);
    assert!(p.enforce);
    assert_eq!(p.infra_id, None, "install-config names the cluster, not its infraID");
    assert_eq!(p.status.len(), 2);
    // Both flags set: experimentalPropagateUserTags=false wins over propagateUserTags=true.
    assert!(!load(&["install-config-aws-disabled.yaml"]).enforce);
    for (yaml, enforce) in [
        ("platform: {aws: {userTags: {a: b}}}", true),
        ("platform: {aws: {propagateUserTags: false, userTags: {a: b}}}", false),
        ("platform: {aws: {experimentalPropagateUserTags: true, propagateUserTags: false, userTags: {a: b}}}", true),
    ] {
        assert_eq!(policy::load_one("ic.yaml", yaml).expect(yaml).enforce, enforce, "{yaml}");
    }
    let err = policy::load_one("ic.yaml", "platform: {gcp: {region: x}}").expect_err("gcp").to_string();
    assert!(err.contains("gcp") && err.contains("not supported"), "{err}");
}

#[test]
fn azure_duplicate_keys_differing_in_case() {
    let p = load(&["install-config-azure.yaml"]);
    let v = validate::policy(&p, Cloud::Azure);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::DuplicateKey);
}

#[test]
fn native_overrides_match_by_type_tag_and_id() {
    let p = load(&["tagwarden.yaml"]);
    assert!(validate::policy(&p, Cloud::Aws).is_empty());
    let worker = tags(&[("role", "worker")]);
    let d = p.desired_for(Cloud::Aws, &instance(), &worker);
    assert_eq!(d.to_map()["env"], "prod-workers");
    assert_eq!(d.to_map()["pool"], "general");
    assert_eq!(d.superseded[0].by, "override \"workers\"");
    // Not a worker: cluster tags only.
    let d = p.desired_for(Cloud::Aws, &instance(), &tags(&[("role", "master")]));
    assert_eq!(d.to_map(), tags(&[("team", "platform"), ("env", "prod")]));
    // The id glob matches the ARN.
    let bucket = ResourceRef::parse("arn:aws:s3:::kind-prod-1-registry").expect("arn");
    assert_eq!(p.desired_for(Cloud::Aws, &bucket, &TagMap::new()).to_map()["data-class"], "internal");
    assert_eq!(p.loggable("Cost-Center", "4242").len(), "sha256:".len() + 12);
    assert_eq!(p.loggable("team", "platform"), "platform");
}

#[test]
fn native_rejects_typos_and_unknown_versions() {
    let err = policy::load_one("t.yaml", "version: 1\ntags: {a: b}\noverides: []\n").expect_err("typo").to_string();
    assert!(err.contains("overides"), "{err}");
    let err = policy::load_one("t.yaml", "version: 2\ntags: {a: b}\n").expect_err("v2").to_string();
    assert!(err.contains("version 2"), "{err}");
    let err = policy::load_one("t.yaml", "version: 1\noverrides: [{selector: {}, tags: {a: b}}]\n")
        .expect_err("empty selector")
        .to_string();
    assert!(err.contains("overrides[0].selector"), "{err}");
    let err = policy::load_one("t.yaml", "a: [1\n").expect_err("syntax").to_string();
    assert!(err.contains("t.yaml") && err.contains("YAML"), "{err}");
}

#[test]
fn every_violation_is_reported() {
    let p = load(&["invalid-aws.yaml"]);
    let v = validate::policy(&p, Cloud::Aws);
    let found: Vec<(&str, Rule)> = v.iter().map(|v| (v.key.as_str(), v.rule)).collect();
    for expected in [
        ("Name", Rule::ReservedKey),
        ("aws:owner", Rule::ReservedPrefix),
        ("kubernetes.io/cluster/bad-1", Rule::ReservedPrefix),
        ("x.openshift.io/thing", Rule::ReservedPrefix),
        ("cost,center", Rule::KeyCharacters),
        ("ok-key", Rule::ValueLength),
        ("bucket-class", Rule::ValueCharacters),
    ] {
        assert!(found.contains(&expected), "missing {expected:?} in {found:?}");
    }
    assert_eq!(v.len(), 7, "{found:?}");
    assert!(v.iter().all(|v| v.message.contains(&format!("{:?}", v.key))), "messages name the key");
}

#[test]
fn user_tag_limits() {
    let many: String = (0..26).map(|i| format!("  k{i}: v\n")).collect();
    let p = policy::load_one("t.yaml", &format!("version: 1\ntags:\n{many}")).expect("loads");
    let v = validate::policy(&p, Cloud::Aws);
    assert_eq!(v.iter().map(|v| v.rule).collect::<Vec<_>>(), [Rule::TooManyTags]);
    assert!(v[0].message.contains("26") && v[0].message.contains("25"), "{}", v[0].message);
    let eleven: String = (0..11).map(|i| format!("  k{i}: v\n")).collect();
    let p = policy::load_one("t.yaml", &format!("version: 1\ntags:\n{eleven}")).expect("loads");
    assert_eq!(validate::policy(&p, Cloud::Azure).len(), 1);
    let p =
        policy::load_one("t.yaml", &format!("version: 1\nlimits: {{userTags: 11}}\ntags:\n{eleven}")).expect("loads");
    assert!(validate::policy(&p, Cloud::Azure).is_empty());
}

#[test]
fn layered_documents_merge_in_name_order() {
    // Given out of order on purpose: names decide.
    let p = load(&["layered/20-overrides.yaml", "layered/00-defaults.yaml", "layered/10-cluster.yaml"]);
    assert_eq!(p.documents, ["layered/00-defaults.yaml", "layered/10-cluster.yaml", "layered/20-overrides.yaml"]);
    assert_eq!(p.infra_id.as_deref(), Some("mycluster-7xk2p"));
    let d = p.desired_for(Cloud::Aws, &instance(), &TagMap::new());
    let m = d.to_map();
    assert_eq!(m["team"], "platform", "the cluster document overrides the defaults");
    assert_eq!(m["backup"], "daily");
    let bucket = ResourceRef::parse("arn:aws:s3:::mycluster-7xk2p-image-registry").expect("arn");
    let d = p.desired_for(Cloud::Aws, &bucket, &TagMap::new());
    let m = d.to_map();
    assert_eq!((m["team"].as_str(), m["backup"].as_str()), ("registry", "none"));
    let by: Vec<&str> = d.superseded.iter().filter(|s| s.key == "team").map(|s| s.by.as_str()).collect();
    assert_eq!(by, ["status (layered/10-cluster.yaml)", "override \"registry-bucket\" (layered/20-overrides.yaml)"]);
    assert!(validate::policy(&p, Cloud::Aws).is_empty());
    // The version is a content hash: same content, same version, whatever the order.
    let again = load(&["layered/00-defaults.yaml", "layered/10-cluster.yaml", "layered/20-overrides.yaml"]);
    assert_eq!(p.version, again.version);
    assert_ne!(p.version, load(&["infrastructure-aws.yaml"]).version);
}

#[test]
fn conflicting_documents_are_an_error() {
    let err = policy::load(vec![
        ("a.yaml".into(), "version: 1\ncloud: aws\n".into()),
        ("b.yaml".into(), "version: 1\ncloud: azure\n".into()),
    ])
    .expect_err("clouds disagree")
    .to_string();
    assert!(err.contains("a.yaml") && err.contains("b.yaml") && err.contains("cloud"), "{err}");
}

#[test]
fn oversized_documents_are_refused() {
    let big = format!("team: {}\n", "a".repeat(policy::load::MAX_DOCUMENT_BYTES));
    assert!(matches!(policy::load_one("big.yaml", &big), Err(policy::PolicyError::TooLarge { .. })));
}

#[test]
fn reserved_and_ownership_keys_are_rejected_in_any_case_on_aws() {
    // IAM compares tag keys case-insensitively: on a role, `Kubernetes.io/cluster/<infraID>` is the
    // ownership tag itself, so a policy must not be able to set it in any spelling.
    for key in [
        "Kubernetes.io/cluster/mycluster-7xk2p",
        "KUBERNETES.IO/foo",
        "OpenShift.io/x",
        "x.Kubernetes.IO/y",
        "kubernetes.io/cluster/mycluster-7xk2p",
    ] {
        let yaml = format!("version: 1\ncloud: aws\ntags:\n  {key:?}: owned\n");
        let p = policy::load_one("t.yaml", &yaml).expect("loads");
        let v = validate::policy(&p, Cloud::Aws);
        assert_eq!(v.len(), 1, "{key}: {v:?}");
        assert_eq!((v[0].key.as_str(), v[0].rule), (key, Rule::ReservedPrefix), "{key}");
        assert_eq!(v[0].rule.to_string(), "reserved-prefix");
        let m = &v[0].message;
        assert!(m.contains(&format!("{key:?}")), "the message names the key: {m}");
        assert!(m.contains(".io/ namespace") && m.contains("any case"), "the message names the rule: {m}");
        assert!(m.contains("remove the tag or choose a key"), "the message names the fix: {m}");
    }
    // `Name` and `aws:` were case-insensitive already; they stay so.
    for (key, rule) in [("NAME", Rule::ReservedKey), ("nAmE", Rule::ReservedKey), ("AWS:x", Rule::ReservedPrefix)] {
        let p = policy::load_one("t.yaml", &format!("{key:?}: v\n")).expect("loads");
        let rules: Vec<Rule> = validate::policy(&p, Cloud::Aws).iter().map(|v| v.rule).collect();
        assert_eq!(rules, [rule], "{key}");
    }
}

#[test]
fn an_empty_tag_map_is_a_valid_policy_that_writes_nothing() {
    // As the installer treats "no userTags": an empty set of desired tags is valid and a no-op.
    let owned = tags(&[("kubernetes.io/cluster/mycluster-7xk2p", "owned"), ("team", "ops")]);
    for (name, text) in [
        fixture("empty.json"),
        fixture("empty.yaml"),
        ("inline.yaml".to_string(), "--- {}\n".to_string()),
        ("inline.json".to_string(), " { } ".to_string()),
    ] {
        assert_eq!(policy::load::detect(&name, &text).expect(&name), DocumentKind::TagMap, "{name}");
        let p = policy::load_one(&name, &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(p.status.is_empty() && p.spec.is_empty() && p.overrides.is_empty(), "{name}");
        assert!(p.enforce, "{name}: empty is not `propagation disabled`, just nothing to propagate");
        for cloud in [Cloud::Aws, Cloud::Azure] {
            assert!(validate::policy(&p, cloud).is_empty(), "{name} on {cloud}");
        }
        let plan = tagwarden::plan::plan(&p, Cloud::Aws, "mycluster-7xk2p", &instance(), &owned);
        assert!(!plan.writes(), "{name}: {plan:?}");
        assert_eq!(plan.outcome, tagwarden::plan::Outcome::Unchanged, "{name}");
        assert!(plan.set.is_empty() && plan.changes.is_empty(), "{name}");
    }
    // Layered: an empty document contributes nothing and takes nothing away.
    let p = policy::load(vec![fixture("empty.yaml"), fixture("tags.json")]).expect("loads");
    assert_eq!(p.status.len(), load(&["tags.json"]).status.len());

    // An empty *file* is refused, not read as "no tags" (more likely a truncated upload), and the
    // error says how to ask for no tags.
    let err = policy::load_one("blank.yaml", "# nothing\n").expect_err("blank").to_string();
    assert!(err.contains("blank.yaml") && err.contains("{}"), "{err}");
}

/// Run the `tagwarden` binary from tests/fixtures; (exit code, stdout, stderr).
fn cli(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
        .output()
        .expect("tagwarden runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn an_empty_tag_map_validates_and_plans_no_write_in_the_cli() {
    let (code, out, err) = cli(&["validate", "--cloud", "aws", "policies/empty.yaml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.lines().any(|l| l == "valid"), "{out}");
    let (code, out, err) = cli(&["validate", "--json", "--cloud", "azure", "policies/empty.json"]);
    assert_eq!(code, 0, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!((json["valid"].as_bool(), json["violations"].as_array().map(Vec::len)), (Some(true), Some(0)));

    let current = std::env::temp_dir().join(format!("tagwarden-policy-empty-{}.json", std::process::id()));
    std::fs::write(&current, r#"{"kubernetes.io/cluster/mycluster-7xk2p": "owned", "team": "ops"}"#).expect("write");
    let current_arg = current.to_str().expect("utf-8 path");
    let arn = "arn:aws:ec2:eu-west-1:111122223333:instance/i-0abc";
    let args =
        ["plan", "--policy", "policies/empty.yaml", "--infra-id", "mycluster-7xk2p", "--resource", arn, "--current"];
    let (code, out, err) = cli(&[&args[..], &[current_arg, "--json"]].concat());
    let _ = std::fs::remove_file(&current);
    assert_eq!(code, 0, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!((json["owned"].as_bool(), json["outcome"].as_str()), (Some(true), Some("unchanged")), "{out}");
    assert_eq!(json["set"], serde_json::json!({}));
}
