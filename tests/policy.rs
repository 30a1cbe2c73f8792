//! Policy documents under tests/fixtures/policies: detection, layers, precedence and validation.

use std::path::Path;

use tagwarden::cloud::Cloud;
use tagwarden::policy::validate::{self, Rule};
use tagwarden::policy::{self, load::DocumentKind, Policy};
use tagwarden::resource::ResourceRef;
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
        // YAML 1.1 booleans, as the installer reads the flags.
        ("platform: {aws: {propagateUserTags: no, userTags: {a: b}}}", false),
        ("platform: {aws: {experimentalPropagateUserTags: on, propagateUserTags: off}}", true),
    ] {
        assert_eq!(policy::load_one("ic.yaml", yaml).expect(yaml).enforce, enforce, "{yaml}");
    }
    // GCP install-configs are read (their userLabels); a platform without tags is not.
    let err = policy::load_one("ic.yaml", "platform: {vsphere: {vcenters: []}}").expect_err("vsphere").to_string();
    assert!(err.contains("vsphere") && err.contains("not supported"), "{err}");
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
        assert_eq!(plan.outcome, tagwarden::plan::Decision::Unchanged, "{name}");
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

// install-config userTags as the OpenShift installer reads them.
//
// The installer decodes install-config.yaml with sigs.k8s.io/yaml `UnmarshalStrict`
// (openshift/installer pkg/asset/installconfig/installconfigbase.go): go-yaml v2 resolves each
// scalar (YAML 1.1, go.yaml.in/yaml/v2 resolve.go `resolve`), then sigs.k8s.io/yaml yaml.go
// `convertToJSONableObject` turns numbers and booleans into strings for the `map[string]string`:
// ints with strconv.FormatInt, uint64s with FormatUint, floats with FormatFloat(f, 'g', -1, 32),
// bools as "true"/"false". Every expected string below is what that code produces; the table was
// also run through sigs.k8s.io/yaml itself (Go, `UnmarshalStrict` into a map[string]string field).

/// (value as written in YAML, the installer's string, where it comes from)
const VALUE_VECTORS: &[(&str, &str, &str)] = &[
    // YAML 1.1 booleans: resolve.go resolveMap; yaml.go writes a bool as "true"/"false".
    ("y", "true", "resolveMap y"),
    ("Y", "true", "resolveMap Y"),
    ("yes", "true", "resolveMap yes"),
    ("Yes", "true", "resolveMap Yes"),
    ("YES", "true", "resolveMap YES"),
    ("on", "true", "resolveMap on"),
    ("On", "true", "resolveMap On"),
    ("ON", "true", "resolveMap ON"),
    ("true", "true", "resolveMap true"),
    ("True", "true", "resolveMap True"),
    ("TRUE", "true", "resolveMap TRUE"),
    ("n", "false", "resolveMap n"),
    ("N", "false", "resolveMap N"),
    ("no", "false", "resolveMap no"),
    ("No", "false", "resolveMap No"),
    ("NO", "false", "resolveMap NO"),
    ("off", "false", "resolveMap off"),
    ("Off", "false", "resolveMap Off"),
    ("OFF", "false", "resolveMap OFF"),
    ("false", "false", "resolveMap false"),
    ("False", "false", "resolveMap False"),
    ("FALSE", "false", "resolveMap FALSE"),
    ("yES", "yES", "not in resolveMap: a string"),
    ("tRUE", "tRUE", "not in resolveMap: a string"),
    ("oN", "oN", "not in resolveMap: a string"),
    ("yes please", "yes please", "not in resolveMap: a string"),
    // Integers: resolve drops every `_`, then strconv.ParseInt(plain, 0, 64); yaml.go FormatInt.
    ("0x1F", "31", "ParseInt base 0: hex"),
    ("0X1f", "31", "ParseInt base 0: hex, either case"),
    ("-0x1F", "-31", "ParseInt base 0: signed hex"),
    ("017", "15", "ParseInt base 0: a leading 0 is octal"),
    ("0042", "34", "ParseInt base 0: octal, so a zero-padded cost centre changes"),
    ("0o17", "15", "ParseInt base 0: 0o octal"),
    ("0b101", "5", "ParseInt base 0: binary"),
    ("0b-101", "-5", "resolve's 0b branch: ParseInt(plain[2:], 2, 64) takes a sign"),
    ("1_000", "1000", "resolve drops `_` before ParseInt"),
    ("1__0_", "10", "resolve drops every `_`, wherever it is"),
    ("+12", "12", "ParseInt takes a sign"),
    ("-0", "0", "an int: v2 has no negative zero"),
    ("9223372036854775807", "9223372036854775807", "ParseInt: int64 max"),
    // Past int64: strconv.ParseUint(plain, 0, 64); yaml.go FormatUint.
    ("9223372036854775808", "9223372036854775808", "ParseUint"),
    ("0xFFFFFFFFFFFFFFFF", "18446744073709551615", "ParseUint: hex"),
    // Floats: yamlStyleFloat + strconv.ParseFloat(plain, 64), or ParseFloat(in, 64) for a leading
    // `.`; yaml.go FormatFloat(f, 'g', -1, 32): rounded to float32, shortest digits, %e when the
    // exponent is < -4 or >= 6.
    ("1e3", "1000", "FormatFloat 'g' -1 32"),
    ("1E3", "1000", "FormatFloat 'g' -1 32"),
    ("3.14159265", "3.1415927", "FormatFloat 'g' -1 32: float32 precision"),
    ("4.10", "4.1", "a version number is a float"),
    ("1.0", "1", "FormatFloat: no trailing zeros"),
    ("1.", "1", "yamlStyleFloat allows a bare dot"),
    (".5", "0.5", "leading `.`: ParseFloat(in, 64)"),
    (".5_5", "0.55", "leading `.`: ParseFloat allows `_` between digits"),
    ("+.5", "0.5", "yamlStyleFloat with a sign"),
    ("-0.0", "-0", "FormatFloat keeps the sign of zero"),
    ("1e6", "1e+06", "FormatFloat: exponent >= 6 is %e"),
    ("1234567.0", "1.234567e+06", "FormatFloat: %e with every digit"),
    ("16777217.0", "1.6777216e+07", "FormatFloat rounds to float32"),
    ("16777217", "16777217", "an int is not rounded"),
    ("2352156.25", "2.3521562e+06", "FormatFloat: a tie between shortest digits goes to even"),
    ("495651.625", "495651.62", "FormatFloat: a tie goes to even"),
    ("0.0001", "0.0001", "FormatFloat: exponent -4 is %f"),
    ("0.00001", "1e-05", "FormatFloat: exponent < -4 is %e"),
    ("08", "8", "not octal (ParseInt fails), but yamlStyleFloat: a float"),
    ("1_000.5", "1000.5", "resolve drops `_` before the float"),
    ("1e39", "+Inf", "a float64, but past float32's range"),
    ("1e400", "1e400", "ParseFloat out of range is an error: the text stays a string"),
    ("1e-400", "0", "ParseFloat underflow is 0, not an error"),
    ("+18446744073709551615", "1.8446744e+19", "v2 ParseUint takes no sign: a float"),
    ("18446744073709551616", "1.8446744e+19", "past uint64: yamlStyleFloat"),
    ("-9223372036854775809", "-9.223372e+18", "past int64: a float"),
    (".inf", "+Inf", "resolveMap .inf; FormatFloat"),
    (".Inf", "+Inf", "resolveMap .Inf"),
    ("+.INF", "+Inf", "resolveMap +.INF"),
    ("-.inf", "-Inf", "resolveMap -.inf"),
    (".nan", "NaN", "resolveMap .nan"),
    (".NaN", "NaN", "resolveMap .NaN"),
    (".iNf", ".iNf", "not in resolveMap and not a float: a string"),
    // Not numbers: strings as written.
    ("1.2.3", "1.2.3", "not a float"),
    ("12e", "12e", "not a float"),
    ("0x", "0x", "ParseInt fails, not a float"),
    ("0b2", "0b2", "not binary"),
    ("2001-12-14", "2001-12-14", "a timestamp decodes to its text (decode.go scalar)"),
    ("v1", "v1", "no hint: a string"),
    // Quoted and block scalars are strings as written (decode.go scalar: not implicit).
    ("\"yes\"", "yes", "double-quoted"),
    ("'on'", "on", "single-quoted"),
    ("\"1e3\"", "1e3", "double-quoted"),
    ("'0x1F'", "0x1F", "single-quoted"),
    ("\"~\"", "~", "double-quoted"),
    ("\"\"", "", "double-quoted empty string"),
    // Null: resolveMap; JSON null into a map[string]string leaves "" (encoding/json literalStore).
    ("~", "", "resolveMap ~"),
    ("null", "", "resolveMap null"),
    ("NULL", "", "resolveMap NULL"),
    ("", "", "an empty value"),
    // Explicit tags: resolve(tag, in), then its deferred check.
    ("!!str 1e3", "1e3", "!!str: any text as written"),
    ("!!str yes", "yes", "!!str"),
    ("!!int \"0x1F\"", "31", "!!int resolves even quoted text"),
    ("!!float 1", "1", "an int satisfies !!float"),
    ("!!float \"1e3\"", "1000", "!!float"),
    ("!!bool \"yes\"", "true", "!!bool"),
    ("! yes", "yes", "the non-specific tag `!` is not resolvable: a string"),
    ("!custom 12", "12", "an unknown tag is not resolvable: a string"),
];

fn install_config_tags(text: &str) -> Result<Vec<(String, String)>, String> {
    let p = policy::load_one("install-config.yaml", text).map_err(|e| e.to_string())?;
    Ok(p.status.into_iter().map(|t| (t.key, t.value)).collect())
}

#[test]
fn install_config_values_are_the_installers_strings() {
    for (written, want, source) in VALUE_VECTORS {
        let doc = format!("platform:\n  aws:\n    userTags:\n      k: {written}\n");
        let got = install_config_tags(&doc).unwrap_or_else(|e| panic!("{written:?} ({source}): {e}"));
        assert_eq!(got, [("k".to_string(), want.to_string())], "{written:?} ({source})");
    }
    // Block scalars are strings as written, like quoted ones.
    let doc = "platform:\n  aws:\n    userTags:\n      a: |-\n        yes\n      b: >-\n        1e3\n";
    assert_eq!(install_config_tags(doc), Ok(vec![("a".into(), "yes".into()), ("b".into(), "1e3".into())]));
    // Azure userTags are decoded the same way; so is a JSON install-config (go-yaml reads JSON too).
    let doc = "platform:\n  azure:\n    userTags: {env: on, cost: 1e3, quoted: \"on\"}\n";
    let want = [("env", "true"), ("cost", "1000"), ("quoted", "on")].map(|(k, v)| (k.to_string(), v.to_string()));
    assert_eq!(install_config_tags(doc), Ok(want.to_vec()));
    let doc = r#"{"platform": {"aws": {"userTags": {"a": 1e3, "b": true, "c": "yes", "d": 0.1}}}}"#;
    let want = [("a", "1000"), ("b", "true"), ("c", "yes"), ("d", "0.1")].map(|(k, v)| (k.to_string(), v.to_string()));
    assert_eq!(install_config_tags(doc), Ok(want.to_vec()));
}

/// (key as written, the installer's key, where it comes from): yaml.go convertToJSONableObject's
/// map-key switch, which also spells float infinities and NaN as YAML.
const KEY_VECTORS: &[(&str, &str, &str)] = &[
    ("yes", "true", "a bool key"),
    ("\"yes\"", "yes", "a quoted key"),
    ("1e3", "1000", "a float key: FormatFloat 'g' -1 32"),
    ("0x1F", "31", "an int key: strconv.Itoa"),
    ("012", "10", "an octal int key"),
    ("1.0", "1", "a float key"),
    (".inf", ".inf", "a float key: +Inf spelled .inf"),
    ("-.Inf", "-.inf", "a float key: -Inf spelled -.inf"),
    (".NaN", ".nan", "a float key: NaN spelled .nan"),
];

#[test]
fn install_config_keys_are_the_installers_strings() {
    for (written, want, source) in KEY_VECTORS {
        let doc = format!("platform:\n  aws:\n    userTags:\n      {written}: v\n");
        let got = install_config_tags(&doc).unwrap_or_else(|e| panic!("{written:?} ({source}): {e}"));
        assert_eq!(got, [(want.to_string(), "v".to_string())], "{written:?} ({source})");
    }
}

#[test]
fn install_config_usertags_the_installer_refuses_are_refused() {
    for (tags, expect) in [
        // Strict decoding: a key set twice, also once resolved (`yes` and `on` are both true).
        ("{team: a, team: b}", "both become \"team\""),
        ("{yes: a, on: b}", "both become \"true\""),
        // And keys that only meet as strings (int 1 and "1"): the installer keeps either one.
        ("{1: a, \"1\": b}", "both become \"1\""),
        ("{~: a}", "null key"),
        ("{9223372036854775808: a}", "above 2^63-1"),
        ("{a: [b]}", "expected a string value, found a list"),
        ("{a: {b: c}}", "expected a string value, found a mapping"),
        // An explicit tag that does not fit the text: resolve's deferred check.
        ("{a: !!int abc}", "cannot decode !!str `abc` as a !!int"),
        ("{a: !!bool 1}", "cannot decode !!int `1` as a !!bool"),
        ("{a: !!float 18446744073709551615}", "cannot decode !!int"),
        ("[a, b]", "expected a map of tag keys to values, found a list"),
    ] {
        let doc = format!("platform:\n  aws:\n    userTags: {tags}\n");
        let err = install_config_tags(&doc).expect_err(tags);
        assert!(err.contains("install-config.yaml") && err.contains("platform.aws.userTags"), "{tags}: {err}");
        assert!(err.contains(expect), "{tags}: {err}");
    }
    // Validation then sees the installer's strings: `~` is the empty value the installer rejects.
    let p = policy::load_one("ic.yaml", "platform: {aws: {userTags: {team: ~}}}").expect("loads");
    let rules: Vec<Rule> = validate::policy(&p, Cloud::Aws).iter().map(|v| v.rule).collect();
    assert_eq!(rules, [Rule::ValueLength]);
}
