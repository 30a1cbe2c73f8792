//! The fake API server (`tagwarden_testkit::kube_api` and its `crd`) against what a real one does with
//! the Infrastructure object, so the cluster tests cannot lean on anything a cluster would not
//! allow:
//!
//! - its rules come from openshift/api's CRD (vendored in `tests/fixtures/openshift/`), and every
//!   CEL rule on the tag paths is one it implements;
//! - openshift/api's own CRD tests for the object (run there against a real kube-apiserver) give
//!   the same answers against the fake;
//! - a day-2 tag edit the CRD refuses is a 422 shaped as the API server's, naming the field; the
//!   Azure tags are immutable; the main resource and `/status` are written separately;
//! - a verb denied to the service account is a 403 with the RBAC authoriser's message, and
//!   tagwarden's error names the verbs to grant.

#![cfg(feature = "kube")]

use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use kube_api::crd::{self, Crd, CEL_RULES, NOT_ENFORCED};
use kube_api::{FakeApi, ADMIN_TOKEN, TOKEN};
use serde_json::{json, Value};
use tagwarden::cloud::Cloud;
use tagwarden::cluster::{self, Change, ClusterError, ClusterSource, StatusMirror};
use tagwarden::status::StatusReport;
use tagwarden_testkit::kube_api;

const INFRA: &str = "/apis/config.openshift.io/v1/infrastructures/cluster";
const STATUS: &str = "/apis/config.openshift.io/v1/infrastructures/cluster/status";
const NS: &str = "tagwarden";
const AWS_KEY_MESSAGE: &str = "invalid AWS resource tag key. The string can contain only the set of alphanumeric characters, space (' '), '_', '.', '/', '=', '+', '-', ':', '@'";
const AWS_VALUE_MESSAGE: &str = "invalid AWS resource tag value. The string can contain only the set of alphanumeric characters, space (' '), '_', '.', '/', '=', '+', '-', ':', '@'";
const NOT_CHECKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policies").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).expect("fixture parses")
}

fn tag_list(tags: &[(&str, &str)]) -> Value {
    json!(tags.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>())
}

/// The stored object with other AWS status tags.
fn with_aws_tags(api: &FakeApi, tags: Value) -> Value {
    let mut o = api.infrastructure().expect("the Infrastructure object");
    o["status"]["platformStatus"]["aws"]["resourceTags"] = tags;
    o
}

/// `Infrastructure.config.openshift.io "cluster" is invalid: <errors>`.
fn invalid(errors: &str) -> String {
    format!("Infrastructure.config.openshift.io \"cluster\" is invalid: {errors}")
}

async fn client_for(api: &FakeApi) -> cluster::Client {
    let dir = std::env::temp_dir().join(format!("tagwarden-kube-crd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path: PathBuf = dir.join(format!("kubeconfig-{}", api.url.rsplit(':').next().unwrap_or("0")));
    std::fs::write(&path, api.kubeconfig(NS, None)).expect("kubeconfig");
    cluster::client(Some(&path)).await.expect("client from kubeconfig")
}

/// Where the tags live, and the schema nodes above them (whose rules run on every tag edit).
fn on_tag_paths(path: &str) -> bool {
    const ABOVE: [&str; 7] = [
        "",
        "spec",
        "spec.platformSpec",
        "status",
        "status.platformStatus",
        "status.platformStatus.aws",
        "status.platformStatus.azure",
    ];
    ABOVE.contains(&path)
        || path.starts_with("status.platformStatus.aws.resourceTags")
        || path.starts_with("status.platformStatus.azure.resourceTags")
}

#[test]
fn the_rules_on_the_tag_paths_come_from_the_crd_and_are_all_implemented() {
    let crd = Crd::infrastructures();
    assert_eq!(
        (crd.group.as_str(), crd.kind.as_str(), crd.plural.as_str(), crd.version.as_str(), crd.status_subresource),
        ("config.openshift.io", "Infrastructure", "infrastructures", "v1", true)
    );
    // The premise of the day-2 path: there is no spec tag field to edit.
    let aws_spec = crd.schema_at("spec.platformSpec.aws").expect("spec.platformSpec.aws");
    let fields: Vec<&String> = aws_spec["properties"].as_object().expect("properties").keys().collect();
    assert_eq!(fields, ["serviceEndpoints"], "AWSPlatformSpec has only serviceEndpoints");
    assert!(crd.schema_at("spec.platformSpec.azure.resourceTags").is_none());

    // The limits the tests below rely on, as the CRD states them.
    let limits = |path: &str, keyword: &str| crd.schema_at(path).and_then(|s| s[keyword].as_u64());
    for (path, keyword, want) in [
        ("status.platformStatus.aws.resourceTags", "maxItems", 25),
        ("status.platformStatus.aws.resourceTags[].key", "minLength", 1),
        ("status.platformStatus.aws.resourceTags[].key", "maxLength", 128),
        ("status.platformStatus.aws.resourceTags[].value", "minLength", 1),
        ("status.platformStatus.aws.resourceTags[].value", "maxLength", 256),
        ("status.platformStatus.azure.resourceTags", "maxItems", 10),
    ] {
        assert_eq!(limits(path, keyword), Some(want), "{path} {keyword}");
    }

    let rules = crd.rules();
    let unknown: Vec<String> = rules
        .iter()
        .filter(|r| on_tag_paths(&r.path) && !CEL_RULES.contains(&r.rule.as_str()))
        .map(|r| format!("{:?} at {:?}", r.rule, r.path))
        .collect();
    assert!(unknown.is_empty(), "CEL rules on the tag paths the fake API server does not implement: {unknown:#?}");
    let on_paths: Vec<String> =
        rules.iter().filter(|r| on_tag_paths(&r.path)).map(|r| format!("{}: {}", r.path, r.rule)).collect();
    assert!(on_paths.len() >= 4, "the AWS key and value rules and the two Azure ones at least: {on_paths:#?}");
    for known in CEL_RULES {
        let somewhere = Crd::served().iter().any(|c| c.rules().iter().any(|r| r.rule == *known));
        assert!(somewhere, "{known:?} is no rule of a served CRD any more");
    }
    let elsewhere = rules.iter().filter(|r| crd::runnable(&r.rule).is_err()).count();
    eprintln!(
        "CRD: {} CEL rules; {} on the tag paths, all implemented by hand; {elsewhere} elsewhere cel-rust cannot parse (a 500 if ever reached)",
        rules.len(),
        on_paths.len()
    );

    let unenforced: Vec<String> = crd
        .keywords()
        .into_iter()
        .filter(|(path, keyword, value)| {
            on_tag_paths(path)
                && NOT_ENFORCED.contains(&keyword.as_str())
                && !(keyword == "x-kubernetes-list-type" && value == "atomic")
        })
        .filter(|(path, _, _)| path.contains("resourceTags"))
        .map(|(path, keyword, value)| format!("{path}: {keyword} = {value}"))
        .collect();
    assert!(unenforced.is_empty(), "keywords on the tag lists the fake does not enforce: {unenforced:#?}");
}

/// How one upstream test case went.
enum Outcome {
    Pass,
    Fail(String),
    /// The fake stopped at a CEL rule it does not implement (HTTP 500): no verdict.
    Unimplemented(String),
}

fn parse(yaml: &str) -> Value {
    let mut v: Value = serde_yaml_ng::from_str(yaml).expect("test object");
    v["metadata"]["name"] = json!("cluster");
    v
}

/// `err` (a Status) contains `want`, as the upstream runner's `MatchError(ContainSubstring(…))`.
fn error_outcome(result: Result<u64, Value>, want: &str, step: &str) -> Option<Outcome> {
    match result {
        Err(s) if s["code"] == 500 => Some(Outcome::Unimplemented(s["message"].as_str().unwrap_or_default().into())),
        Err(s) if s["message"].as_str().is_some_and(|m| m.contains(want)) => Some(Outcome::Pass),
        Err(s) => Some(Outcome::Fail(format!("{step}: expected an error containing {want:?}, got {s}"))),
        Ok(_) => Some(Outcome::Fail(format!("{step}: expected an error containing {want:?}, the write was accepted"))),
    }
}

/// A write the case expects to succeed.
fn must_pass(result: Result<u64, Value>, step: &str) -> Result<u64, Outcome> {
    match result {
        Ok(rv) => Ok(rv),
        Err(s) if s["code"] == 500 => Err(Outcome::Unimplemented(s["message"].as_str().unwrap_or_default().into())),
        Err(s) => Err(Outcome::Fail(format!("{step}: refused: {s}"))),
    }
}

/// The stored object equals `expected`, metadata aside (`komega.IgnoreAutogeneratedMetadata`).
fn compare(api: &FakeApi, expected: &str) -> Outcome {
    let strip = |mut v: Value| {
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
        }
        v
    };
    let got = strip(api.infrastructure().expect("stored"));
    let want = strip(parse(expected));
    if got == want {
        Outcome::Pass
    } else {
        Outcome::Fail(format!("stored {got}\nexpected {want}"))
    }
}

async fn on_create(case: &Value) -> Outcome {
    let api = FakeApi::start().await;
    let result = api.create_infrastructure(parse(case["initial"].as_str().expect("initial")));
    if let Some(want) = case["expectedError"].as_str() {
        return error_outcome(result, want, "create").expect("an outcome");
    }
    if let Err(o) = must_pass(result, "create") {
        return o;
    }
    compare(&api, case["expected"].as_str().expect("expected"))
}

/// `generateOnUpdateTable`: create, write the initial status, update the main resource, update
/// the status, compare.
async fn on_update(case: &Value) -> Outcome {
    let api = FakeApi::start().await;
    let initial = parse(case["initial"].as_str().expect("initial"));
    if let Err(o) = must_pass(api.create_infrastructure(initial.clone()), "create") {
        return o;
    }
    if let Some(status) = initial.get("status") {
        let mut o = api.infrastructure().expect("created");
        o["status"] = status.clone();
        if let Err(o) = must_pass(api.update_status(o), "initial status") {
            return o;
        }
    }
    let mut updated = parse(case["updated"].as_str().expect("updated"));
    updated["metadata"]["resourceVersion"] =
        api.infrastructure().expect("stored")["metadata"]["resourceVersion"].clone();
    let result = api.replace_infrastructure(updated.clone());
    if let Some(want) = case["expectedError"].as_str() {
        return error_outcome(result, want, "update").expect("an outcome");
    }
    let rv = match must_pass(result, "update") {
        Ok(rv) => rv,
        Err(o) => return o,
    };
    if updated.get("status").is_some() {
        updated["metadata"]["resourceVersion"] = json!(rv.to_string());
        let result = api.update_status(updated);
        if let Some(want) = case["expectedStatusError"].as_str() {
            return error_outcome(result, want, "status update").expect("an outcome");
        }
        if let Err(o) = must_pass(result, "status update") {
            return o;
        }
    }
    compare(&api, case["expected"].as_str().expect("expected"))
}

#[tokio::test]
async fn openshift_apis_own_crd_tests_give_the_same_answers_against_the_fake() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/openshift/infrastructures.config.openshift.io-AAA_ungated.yaml");
    let suite: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).expect("suite")).expect("suite parses");
    assert_eq!(suite["crdName"], "infrastructures.config.openshift.io");
    let (mut passed, mut failed, mut unimplemented, mut patched) = (vec![], vec![], vec![], vec![]);
    let mut tag_cases = 0;
    for (kind, cases) in [("onCreate", &suite["tests"]["onCreate"]), ("onUpdate", &suite["tests"]["onUpdate"])] {
        for case in cases.as_array().expect("cases") {
            let name = format!("{kind}: {}", case["name"].as_str().unwrap_or_default());
            let about_tags = case.to_string().contains("resourceTags");
            tag_cases += usize::from(about_tags);
            if case.get("initialCRDPatches").is_some() {
                // Run upstream against a CRD patched for the case (ratcheting); the fake serves
                // only the vendored CRD.
                assert!(!about_tags, "{name}: a tag case the fake cannot replay");
                patched.push(name);
                continue;
            }
            let outcome = if kind == "onCreate" { on_create(case).await } else { on_update(case).await };
            match outcome {
                Outcome::Pass => passed.push(name),
                Outcome::Fail(why) => failed.push(format!("{name}: {why}")),
                Outcome::Unimplemented(why) if about_tags => failed.push(format!("{name}: {why}")),
                Outcome::Unimplemented(why) => unimplemented.push((name, why)),
            }
        }
    }
    eprintln!(
        "openshift/api AAA_ungated: {} passed ({tag_cases} about resourceTags), {} stopped at a CEL rule the fake does not implement, {} need a patched CRD",
        passed.len(),
        unimplemented.len(),
        patched.len()
    );
    let mut by_rule = std::collections::BTreeMap::<&str, usize>::new();
    for (_, why) in &unimplemented {
        *by_rule.entry(why.as_str()).or_default() += 1;
    }
    for (why, n) in by_rule {
        eprintln!("  not replayed ({n}): {why}");
    }
    assert!(failed.is_empty(), "the fake answers differently from the API server:\n{}", failed.join("\n\n"));
    assert!(tag_cases >= 10, "the suite's resourceTags cases: {tag_cases}");
    assert!(passed.len() >= tag_cases + 4, "too few cases replayed: {passed:#?}");
}

#[tokio::test]
async fn an_aws_tag_the_crd_refuses_is_a_422_naming_the_field_and_changes_nothing() {
    let api = FakeApi::start().await;
    api.put_infrastructure(fixture("infrastructure-aws.yaml"));
    let stored = api.infrastructure().expect("seeded");
    let events = api.events("infrastructures");

    // A key outside the CRD's pattern (a CEL `matches` rule on AWS tags), the whole answer.
    let reply = api.put_status_as_admin(&with_aws_tags(&api, tag_list(&[("a*b", "x")]))).await;
    let body = format!("Invalid value: \"string\": {AWS_KEY_MESSAGE}");
    assert_eq!(reply.code, 422);
    assert_eq!(
        reply.body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": invalid(&format!("status.platformStatus.aws.resourceTags[0].key: {body}")),
            "reason": "Invalid",
            "details": {"name": "cluster", "group": "config.openshift.io", "kind": "Infrastructure",
                        "causes": [{"reason": "FieldValueInvalid", "message": body,
                                    "field": "status.platformStatus.aws.resourceTags[0].key"}]},
            "code": 422
        })
    );

    // A 26th tag: maxItems 25, which also stops the CEL rules from running.
    let tags: Vec<(String, String)> = (0..26).map(|i| (format!("k{i}"), format!("v{i}"))).collect();
    let pairs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let reply = api.put_status_as_admin(&with_aws_tags(&api, tag_list(&pairs))).await;
    assert_eq!(reply.code, 422, "{}", reply.body);
    assert_eq!(
        reply.body["message"],
        invalid(&format!(
            "[status.platformStatus.aws.resourceTags: Too many: 26: must have at most 25 items, {NOT_CHECKED}]"
        ))
    );
    assert_eq!(
        reply.body["details"]["causes"][0],
        json!({"reason": "FieldValueTooMany", "message": "Too many: 26: must have at most 25 items",
               "field": "status.platformStatus.aws.resourceTags"})
    );
    assert_eq!(reply.body["details"]["causes"][1]["field"], "<nil>");

    // A key of 129 characters, and an empty value (minLength; the CEL rule fails on it too).
    let long = "k".repeat(129);
    let reply = api.put_status_as_admin(&with_aws_tags(&api, tag_list(&[(&long, "v")]))).await;
    assert_eq!(
        reply.body["message"],
        invalid(&format!(
            "[status.platformStatus.aws.resourceTags[0].key: Too long: may not be more than 128 bytes, {NOT_CHECKED}]"
        ))
    );
    assert_eq!(reply.body["details"]["causes"][0]["reason"], "FieldValueTooLong");
    let reply = api.put_status_as_admin(&with_aws_tags(&api, tag_list(&[("k", "")]))).await;
    let field = "status.platformStatus.aws.resourceTags[0].value";
    assert_eq!(
        reply.body["message"],
        invalid(&format!(
            "[{field}: Invalid value: \"\": {field} in body should be at least 1 chars long, {field}: Invalid value: \"string\": {AWS_VALUE_MESSAGE}]"
        ))
    );
    // A tag without its value: required.
    let reply = api.put_status_as_admin(&with_aws_tags(&api, json!([{"key": "k"}]))).await;
    assert_eq!(reply.body["message"], invalid(&format!("[{field}: Required value, {NOT_CHECKED}]")));
    assert_eq!(reply.body["details"]["causes"][0]["reason"], "FieldValueRequired");

    assert_eq!(api.infrastructure(), Some(stored), "nothing refused was stored");
    assert_eq!(api.events("infrastructures"), events, "no revision, no watch event");

    // The boundaries are accepted: 25 tags; 128 and 256 characters; spaces, and the `+-@` range
    // (`,;<>?` and digits: `+-@` in the CRD's brackets is a range, see the reference notes).
    let reply = api.put_status_as_admin(&with_aws_tags(&api, tag_list(&pairs[..25]))).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    let (k128, v256) = ("k".repeat(128), "v".repeat(256));
    let edge = [(k128.as_str(), v256.as_str()), ("key with space", "a<b>c?"), ("cost,center;x", "a:b/c=d+e-f@g")];
    let reply = api.put_status_as_admin(&with_aws_tags(&api, tag_list(&edge))).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    assert_eq!(
        api.infrastructure().expect("stored")["status"]["platformStatus"]["aws"]["resourceTags"],
        tag_list(&edge)
    );
}

#[tokio::test]
async fn azure_status_tags_are_immutable_as_the_crd_says() {
    let api = FakeApi::start().await;
    api.put_infrastructure(fixture("infrastructure-azure.json"));
    let tags = |o: &mut Value, v: Value| o["status"]["platformStatus"]["azure"]["resourceTags"] = v;
    let immutable = invalid(
        "status.platformStatus.azure.resourceTags: Invalid value: \"array\": resourceTags are immutable and may only be configured during installation",
    );
    for (what, new) in [
        ("modified", tag_list(&[("team", "payments"), ("env", "prod")])),
        ("added to", tag_list(&[("team", "platform"), ("env", "prod"), ("owner", "ops")])),
        ("removed from", tag_list(&[("team", "platform")])),
    ] {
        let err = api.edit_status(|o| tags(o, new)).expect_err(what);
        assert_eq!(err["message"], immutable, "a tag {what} the list");
        assert_eq!(err["details"]["causes"][0]["field"], "status.platformStatus.azure.resourceTags");
    }
    let err = api
        .edit_status(|o| drop(o["status"]["platformStatus"]["azure"].as_object_mut().map(|a| a.remove("resourceTags"))))
        .expect_err("the list removed");
    assert_eq!(
        err["message"],
        invalid("status.platformStatus.azure: Invalid value: \"object\": resourceTags may only be configured during installation")
    );
    // The rule compares as sets: the same tags in another order pass (and are a new revision).
    let before = api.resource_version();
    let rv = api.edit_status(|o| tags(o, tag_list(&[("env", "prod"), ("team", "platform")]))).expect("reordered");
    assert!(rv > before);
    // Other fields of the Azure status stay editable.
    api.edit_status(|o| o["status"]["platformStatus"]["azure"]["resourceGroupName"] = json!("moved-rg"))
        .expect("another field");

    // A cluster installed without Azure tags cannot get any on day 2; a bad key is also named.
    api.delete_infrastructure();
    let mut bare = fixture("infrastructure-azure.json");
    bare["status"]["platformStatus"]["azure"].as_object_mut().expect("azure").remove("resourceTags");
    api.put_infrastructure(bare);
    let err = api.edit_status(|o| tags(o, tag_list(&[("1bad", "v")]))).expect_err("added on day 2");
    let field = "status.platformStatus.azure.resourceTags[0].key";
    assert_eq!(
        err["message"],
        invalid(&format!(
            "[{field}: Invalid value: \"1bad\": {field} in body should match '^[a-zA-Z]([0-9A-Za-z_.-]*[0-9A-Za-z_])?$', status.platformStatus.azure: Invalid value: \"object\": resourceTags may only be configured during installation]"
        ))
    );
}

#[tokio::test]
async fn the_main_resource_and_its_status_are_written_separately() {
    let api = FakeApi::start().await;
    api.put_infrastructure(fixture("infrastructure-aws.yaml"));
    let seeded = api.infrastructure().expect("seeded");
    assert_eq!(seeded["metadata"]["generation"], 1);
    let aws_tags = |o: &Value| o["status"]["platformStatus"]["aws"]["resourceTags"].clone();
    let put = |path: &'static str, o: Value| {
        let api = &api;
        async move { api.request(ADMIN_TOKEN, "PUT", path, "application/json", Some(&o)).await }
    };

    // The main resource: the spec change is stored, the status change is not.
    let mut o = seeded.clone();
    o["spec"]["cloudConfig"]["name"] = json!("cloud-provider-config");
    o["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(&[("sneaked", "in")]);
    let reply = put(INFRA, o).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    let after = api.infrastructure().expect("stored");
    assert_eq!(after["spec"]["cloudConfig"]["name"], "cloud-provider-config");
    assert_eq!(aws_tags(&after), aws_tags(&seeded), "a main-resource write cannot change .status");
    assert_eq!(after["metadata"]["generation"], 2, "a spec change is a new generation");

    // `/status`: the status change is stored, the spec change is not, the generation stays.
    let mut o = after.clone();
    o["spec"]["cloudConfig"]["name"] = json!("");
    o["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(&[("team", "b")]);
    let reply = put(STATUS, o).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    let after = api.infrastructure().expect("stored");
    assert_eq!(after["spec"]["cloudConfig"]["name"], "cloud-provider-config", "a status write cannot change .spec");
    assert_eq!((aws_tags(&after), after["metadata"]["generation"].clone()), (tag_list(&[("team", "b")]), json!(2)));

    // A write that changes nothing the strategy keeps is no revision and no event.
    let events = api.events("infrastructures");
    let mut status_only = after.clone();
    status_only["status"]["platformStatus"]["aws"]["resourceTags"] = tag_list(&[("ignored", "yes")]);
    let reply = put(INFRA, status_only).await;
    assert_eq!((reply.code, &reply.body), (200, &after), "the stored object, its resourceVersion unchanged");
    let reply = put(STATUS, after.clone()).await;
    assert_eq!((reply.code, &reply.body), (200, &after));
    assert_eq!(api.events("infrastructures"), events);
    let reply = api.request(ADMIN_TOKEN, "GET", STATUS, "application/json", None).await;
    assert_eq!((reply.code, &reply.body), (200, &after), "GET …/status is the whole object");

    // Optimistic concurrency: a custom resource takes no update without a resourceVersion, and
    // none with a stale one.
    let mut o = after.clone();
    o["metadata"].as_object_mut().expect("metadata").remove("resourceVersion");
    let reply = put(STATUS, o).await;
    assert_eq!(
        (reply.code, &reply.body["message"]),
        (422, &json!(invalid("metadata.resourceVersion: Invalid value: 0x0: must be specified for an update")))
    );
    let mut o = after.clone();
    o["metadata"]["resourceVersion"] = json!("1");
    let reply = put(STATUS, o).await;
    assert_eq!((reply.code, reply.body["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        reply.body["message"],
        "Operation cannot be fulfilled on infrastructures.config.openshift.io \"cluster\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // A JSON merge patch of the status (`oc patch --subresource=status --type=merge`); the
    // strategic merge patch of built-in types does not apply to custom resources.
    let patch = json!({"status": {"platformStatus": {"aws": {"resourceTags": [{"key": "patched", "value": "yes"}]}}}});
    let reply = api.request(ADMIN_TOKEN, "PATCH", STATUS, "application/merge-patch+json", Some(&patch)).await;
    assert_eq!(reply.code, 200, "{}", reply.body);
    assert_eq!(aws_tags(&reply.body), tag_list(&[("patched", "yes")]));
    let reply = api.request(ADMIN_TOKEN, "PATCH", STATUS, "application/strategic-merge-patch+json", Some(&patch)).await;
    assert_eq!(reply.code, 415);
    let spec_patch = json!({"status": {"platformStatus": {"aws": {"resourceTags": []}}}});
    let reply = api.request(ADMIN_TOKEN, "PATCH", INFRA, "application/merge-patch+json", Some(&spec_patch)).await;
    assert_eq!(aws_tags(&reply.body), tag_list(&[("patched", "yes")]), "a patch of the main resource keeps .status");

    // A create keeps no status: it is written through /status afterwards.
    api.delete_infrastructure();
    let reply = api
        .request(ADMIN_TOKEN, "POST", "/apis/config.openshift.io/v1/infrastructures", "application/json", Some(&seeded))
        .await;
    assert_eq!(reply.code, 201, "{}", reply.body);
    assert!(reply.body.get("status").is_none(), "{}", reply.body);
    assert_eq!(reply.warnings, Vec::<String>::new(), "the seeded object has no unknown field left");
    let reply = api
        .request(ADMIN_TOKEN, "POST", "/apis/config.openshift.io/v1/infrastructures", "application/json", Some(&seeded))
        .await;
    assert_eq!(
        (reply.code, &reply.body["message"]),
        (409, &json!("infrastructures.config.openshift.io \"cluster\" already exists"))
    );
}

fn report() -> StatusReport {
    StatusReport::new(Cloud::Aws, &"s3://policy/cluster/infrastructure.yaml", Some("v1".into()), vec![], vec![])
}

#[tokio::test]
async fn a_denied_verb_is_a_403_and_tagwarden_names_the_verbs_to_grant() {
    let api = FakeApi::start().await;
    api.put_infrastructure(fixture("infrastructure-aws.yaml"));
    let client = client_for(&api).await;

    // get: the answer as the RBAC authoriser words it, and the error tagwarden makes of it.
    api.deny("get", "infrastructures");
    let reply = api.request(TOKEN, "GET", INFRA, "application/json", None).await;
    let message = "infrastructures.config.openshift.io \"cluster\" is forbidden: User \"system:serviceaccount:tagwarden:tagwarden\" cannot get resource \"infrastructures\" in API group \"config.openshift.io\" at the cluster scope";
    assert_eq!(
        (reply.code, reply.body),
        (
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                   "reason": "Forbidden", "details": {"name": "cluster", "group": "config.openshift.io", "kind": "infrastructures"},
                   "code": 403})
        )
    );
    let err = cluster::read_once(&client, &ClusterSource::Infrastructure).await.expect_err("denied");
    assert!(matches!(err, ClusterError::Forbidden { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(message) && text.contains("grant the service account get on it"), "{text}");
    // The admin is not denied; an unknown token is still 401.
    assert_eq!(api.request(ADMIN_TOKEN, "GET", INFRA, "application/json", None).await.code, 200);
    let reply = api.request("expired", "GET", INFRA, "application/json", None).await;
    assert_eq!((reply.code, reply.body["reason"].as_str()), (401, Some("Unauthorized")));

    // list (the watch's first step): the name the field selector picks is in the message.
    api.deny("list", "infrastructures");
    let mut changes = std::pin::pin!(cluster::watch(client.clone(), ClusterSource::Infrastructure));
    let err = changes.next().await.expect("an item").expect_err("the watch ends");
    let text = err.to_string();
    assert!(
        text.contains("infrastructures.config.openshift.io \"cluster\" is forbidden: User \"system:serviceaccount:tagwarden:tagwarden\" cannot list resource \"infrastructures\"")
            && text.contains("grant the service account get, list and watch on it"),
        "{text}"
    );

    // watch: the list succeeds, the watch request is refused, the stream ends with the error.
    let api = FakeApi::start().await;
    api.put_infrastructure(fixture("infrastructure-aws.yaml"));
    api.deny("watch", "infrastructures");
    let client = client_for(&api).await;
    let mut changes = std::pin::pin!(cluster::watch(client.clone(), ClusterSource::Infrastructure));
    let first = tokio::time::timeout(std::time::Duration::from_secs(20), changes.next()).await.expect("in time");
    assert!(matches!(first, Some(Ok(Change::Document(_)))), "{first:?}");
    let next = tokio::time::timeout(std::time::Duration::from_secs(20), changes.next()).await.expect("in time");
    let text = next.expect("an item").expect_err("the watch ends").to_string();
    assert!(
        text.contains("cannot watch resource \"infrastructures\"") && text.contains("get, list and watch"),
        "{text}"
    );

    // create on events (the status mirror's Event).
    api.put_configmap(NS, json!({"metadata": {"name": "tagwarden-status"}}));
    api.deny("create", "events");
    let mirror = StatusMirror::new(client, NS, "tagwarden-status", None);
    let err = mirror.mirror(&report()).await.expect_err("no Event may be created");
    let text = err.to_string();
    assert!(
        text.contains("events.events.k8s.io is forbidden: User \"system:serviceaccount:tagwarden:tagwarden\" cannot create resource \"events\" in API group \"events.k8s.io\" in the namespace \"tagwarden\"")
            && text.contains("grant the service account create on it"),
        "{text}"
    );
}

/// HyperShift's and Cluster API's CRDs are served from their own definitions, and every
/// rule where their tags live, and above (each runs on every tag edit), can run: by hand or in
/// cel-rust. Rules elsewhere that cel-rust cannot parse are counted, and would be a 500 if reached.
#[test]
fn every_served_crd_runs_the_rules_on_its_tag_paths() {
    let tag_paths: [(&str, &[&str], &str); 8] = [
        ("hostedclusters", &["", "spec", "spec.platform", "spec.platform.aws"], "spec.platform.aws.resourceTags"),
        ("nodepools", &["", "spec", "spec.platform", "spec.platform.aws"], "spec.platform.aws.resourceTags"),
        ("awsclusters", &["", "spec"], "spec.additionalTags"),
        (
            "awsmachinetemplates",
            &["", "spec", "spec.template", "spec.template.spec"],
            "spec.template.spec.additionalTags",
        ),
        ("azureclusters", &["", "spec"], "spec.additionalTags"),
        ("awsmachinepools", &["", "spec"], "spec.additionalTags"),
        ("awsmanagedcontrolplanes", &["", "spec"], "spec.additionalTags"),
        // A control plane's tags are its template's; the set reads which template.
        (
            "kubeadmcontrolplanes",
            &["", "spec", "spec.machineTemplate", "spec.machineTemplate.spec"],
            "spec.machineTemplate.spec.infrastructureRef",
        ),
    ];
    for (plural, above, tags) in tag_paths {
        let crd = Crd::by_plural(plural).unwrap_or_else(|| panic!("{plural} is served"));
        assert!(crd.namespaced && crd.status_subresource, "{plural}: namespaced, with a status subresource");
        assert!(crd.schema_at(tags).is_some(), "{plural}: {tags} exists in the served version {}", crd.version);
        let rules = crd.rules();
        let on_paths: Vec<_> =
            rules.iter().filter(|r| above.contains(&r.path.as_str()) || r.path.starts_with(tags)).collect();
        let broken: Vec<String> = on_paths
            .iter()
            .filter_map(|r| crd::runnable(&r.rule).err().map(|e| format!("{} at {:?}: {e}", r.rule, r.path)))
            .collect();
        assert!(broken.is_empty(), "{plural}: rules on the tag paths the fake cannot run: {broken:#?}");
        let elsewhere = rules.iter().filter(|r| crd::runnable(&r.rule).is_err()).count();
        eprintln!(
            "{plural} ({}): {} CEL rules, {} on the tag paths, all runnable; {elsewhere} elsewhere cel-rust cannot parse",
            crd.version,
            rules.len(),
            on_paths.len()
        );
    }
    // The limits the set's tests rely on, as the CRDs state them.
    let hc = Crd::by_plural("hostedclusters").expect("served");
    assert_eq!(hc.schema_at("spec.platform.aws.resourceTags").and_then(|s| s["maxItems"].as_u64()), Some(25));
}
