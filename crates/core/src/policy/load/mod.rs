//! Policy documents → [`Policy`]. The kind of each document is detected by its content:
//!
//! - an OpenShift `Infrastructure` object (JSON or YAML, alone or as the only item of a `List`); on
//!   Google Cloud its `status.platformStatus.gcp.resourceLabels` are the policy's labels;
//! - an `install-config.yaml` (`platform.aws.userTags` / `platform.azure.userTags` /
//!   `platform.gcp.userLabels`);
//!
//! On Google Cloud the Resource Manager tags OpenShift binds (`status.platformStatus.gcp.resourceTags`,
//! install-config `platform.gcp.userTags`) join the labels as `<parentID>/<key>: <value>` entries
//! (`crate::gcp::TagRef::entry`), which no label key can be.
//! - a native `tagwarden.yaml` (`version: 1` with tags, overrides, limits …);
//! - a bare map of tag keys to values; `{}` is a valid policy with no desired tags (a no-op, as the
//!   installer treats an absent or empty `userTags`).
//!
//! Several documents (the objects under a policy prefix) merge in lexicographic order of name,
//! the later winning on the same key within a layer.

use serde_json::{Map, Value};

use super::{installer_yaml, Limits, Override, Pattern, Policy, Selector, Tag, TagSelector};
use crate::cloud::{Cloud, ClusterKind};

mod document;

use document::{describe, is_scalar, scalar, Doc};

// The limits on what one deployment reads, the one place they are set. A real policy
// is a few kilobytes in one to three documents with a handful of overrides; these leave two orders
// of magnitude of room and keep the worst case a deployment can be sent well inside the Lambda's
// default 256 MB: a set's text at most `MAX_SET_BYTES`, one policy's parse at most
// `MAX_CLUSTER_BYTES` and `MAX_OVERRIDES` globs of at most `MAX_PATTERN_BYTES`. The store refuses
// what a listing already shows over a limit before it downloads anything, and counts while it reads
// what the listing does not size; `load` refuses before parsing. Every refusal names its limit.

/// Larger documents are refused: a real policy is a few kilobytes.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// Documents in one policy: a single prefix's, or one cluster's folder in a set.
pub const MAX_CLUSTER_DOCUMENTS: usize = 20;
/// Bytes of all the documents of one policy together.
pub const MAX_CLUSTER_BYTES: usize = 1024 * 1024;
/// Documents of every cluster a set deployment enforces, together.
pub const MAX_SET_DOCUMENTS: usize = 1000;
/// Bytes of every cluster a set deployment enforces, together.
pub const MAX_SET_BYTES: usize = 16 * 1024 * 1024;
/// Overrides (and `limits.resourceTagsByType` entries) in one policy, all documents together.
pub const MAX_OVERRIDES: usize = 200;
/// Bytes of one glob (an override's `type` or `id`, a `resourceTagsByType` key).
pub const MAX_PATTERN_BYTES: usize = 256;
/// Wildcards (`*`, `?`, `[`, `{`) in one glob.
pub const MAX_PATTERN_WILDCARDS: usize = 8;

/// A limit that was passed: `{scope}: {found} {what} is over the limit of {limit} ({name}); {fix}`.
pub fn over_limit(scope: &str, found: usize, what: &str, name: &str, limit: usize, fix: &str) -> String {
    format!("{scope}: {found} {what} is over the limit of {limit} ({name}); {fix}")
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("policy has no documents")]
    Empty,
    #[error("policy {doc}: {size} bytes is larger than the {max}-byte limit for a policy document")]
    TooLarge { doc: String, size: usize, max: usize },
    #[error("policy {doc}: not valid {format}: {message}")]
    Syntax { doc: String, format: &'static str, message: String },
    #[error("policy {doc}: unrecognised document (top-level keys: {keys}); expected an Infrastructure object (kind: Infrastructure), an install-config.yaml (platform.aws.userTags, platform.azure.userTags or platform.gcp.userLabels), a tagwarden.yaml (version: 1 with tags/overrides), or a map of tag keys to values")]
    Unrecognised { doc: String, keys: String },
    #[error("policy {doc}: {path}: {message}")]
    Field { doc: String, path: String, message: String },
    #[error(
        "policy documents disagree on {field}: {first} says {a:?}, {second} says {b:?}; make them agree or drop one"
    )]
    Conflict { field: &'static str, first: String, a: String, second: String, b: String },
    /// One of the limits above: the message names it and the fix ([`over_limit`]).
    #[error("{0}")]
    OverLimit(String),
}

/// The document kinds tagwarden reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DocumentKind {
    Infrastructure,
    InstallConfig,
    Native,
    TagMap,
}

type Pairs = Vec<(String, String)>;

/// What one document contributes before merging.
#[derive(Debug, Default)]
struct Layer {
    cloud: Option<Cloud>,
    infra_id: Option<String>,
    kind: Option<ClusterKind>,
    enforce: Option<bool>,
    status: Vec<(String, String)>,
    spec: Vec<(String, String)>,
    /// (name, selector, tags)
    overrides: Vec<(Option<String>, Selector, Pairs)>,
    user_tags: Option<usize>,
    resource_tags: Option<usize>,
    resource_tags_by_type: Vec<(Pattern, usize)>,
    sensitive: Vec<String>,
    never_yield: Vec<String>,
    audit_keys: Vec<String>,
}

/// Load one document.
pub fn load_one(name: &str, text: &str) -> Result<Policy, PolicyError> {
    load(vec![(name.to_string(), text.to_string())])
}

/// Load and merge documents, in lexicographic order of name whatever order they come in.
pub fn load(mut docs: Vec<(String, String)>) -> Result<Policy, PolicyError> {
    if docs.is_empty() {
        return Err(PolicyError::Empty);
    }
    // Refused before anything is parsed.
    if docs.len() > MAX_CLUSTER_DOCUMENTS {
        let fix = "merge documents: a policy is usually one to three";
        return Err(PolicyError::OverLimit(over_limit(
            "policy",
            docs.len(),
            "documents",
            "MAX_CLUSTER_DOCUMENTS",
            MAX_CLUSTER_DOCUMENTS,
            fix,
        )));
    }
    if let Some((doc, text)) = docs.iter().find(|(_, t)| t.len() > MAX_DOCUMENT_BYTES) {
        return Err(PolicyError::TooLarge { doc: doc.clone(), size: text.len(), max: MAX_DOCUMENT_BYTES });
    }
    let bytes: usize = docs.iter().map(|(_, t)| t.len()).sum();
    if bytes > MAX_CLUSTER_BYTES {
        let fix = "a real policy is a few kilobytes: drop what the cluster does not need";
        return Err(PolicyError::OverLimit(over_limit(
            "policy",
            bytes,
            "bytes in all its documents",
            "MAX_CLUSTER_BYTES",
            MAX_CLUSTER_BYTES,
            fix,
        )));
    }
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut policy = Policy {
        documents: Vec::with_capacity(docs.len()),
        cloud: None,
        infra_id: None,
        kind: ClusterKind::OpenShift,
        enforce: true,
        status: Vec::new(),
        spec: Vec::new(),
        overrides: Vec::new(),
        limits: Limits::default(),
        sensitive: Default::default(),
        never_yield: Default::default(),
        audit_keys: Default::default(),
        version: String::new(),
    };
    let mut cloud_from: Option<String> = None;
    let mut infra_from: Option<String> = None;
    let mut kind_from: Option<String> = None;
    for (doc_index, (name, text)) in docs.into_iter().enumerate() {
        let globs = policy.overrides.len() + policy.limits.resource_tags_by_type.len();
        let layer = parse_document(&name, &text, MAX_OVERRIDES.saturating_sub(globs))?.1;
        if let Some(c) = layer.cloud {
            match (policy.cloud, &cloud_from) {
                (Some(prev), Some(first)) if prev != c => {
                    return Err(PolicyError::Conflict {
                        field: "cloud",
                        first: first.clone(),
                        a: prev.to_string(),
                        second: name,
                        b: c.to_string(),
                    });
                }
                _ => {
                    policy.cloud = Some(c);
                    cloud_from.get_or_insert_with(|| name.clone());
                }
            }
        }
        if let Some(id) = layer.infra_id {
            match (&policy.infra_id, &infra_from) {
                (Some(prev), Some(first)) if *prev != id => {
                    return Err(PolicyError::Conflict {
                        field: "infraID",
                        first: first.clone(),
                        a: prev.clone(),
                        second: name,
                        b: id,
                    });
                }
                _ => {
                    policy.infra_id = Some(id);
                    infra_from.get_or_insert_with(|| name.clone());
                }
            }
        }
        if let Some(k) = layer.kind {
            match &kind_from {
                Some(first) if policy.kind != k => {
                    return Err(PolicyError::Conflict {
                        field: "clusterKind",
                        first: first.clone(),
                        a: format!("{:?}", policy.kind),
                        second: name,
                        b: format!("{k:?}"),
                    });
                }
                _ => {
                    policy.kind = k;
                    kind_from.get_or_insert_with(|| name.clone());
                }
            }
        }
        if let Some(e) = layer.enforce {
            policy.enforce = e;
        }
        let tags =
            |pairs: Vec<(String, String)>| pairs.into_iter().map(|(key, value)| Tag { key, value, doc: doc_index });
        policy.status.extend(tags(layer.status));
        policy.spec.extend(tags(layer.spec));
        for (oname, selector, otags) in layer.overrides {
            policy.overrides.push(Override { name: oname, selector, tags: tags(otags).collect(), doc: doc_index });
        }
        policy.limits.user_tags = layer.user_tags.or(policy.limits.user_tags);
        policy.limits.resource_tags = layer.resource_tags.or(policy.limits.resource_tags);
        // A later document's per-type limits are consulted first.
        let mut by_type = layer.resource_tags_by_type;
        by_type.append(&mut policy.limits.resource_tags_by_type);
        policy.limits.resource_tags_by_type = by_type;
        policy.sensitive.extend(layer.sensitive);
        policy.never_yield.extend(layer.never_yield);
        policy.audit_keys.extend(layer.audit_keys);
        policy.documents.push(name);
    }
    Ok(policy.seal())
}

/// Detect a document's kind; exposed for `tagwarden validate` to say what it read.
pub fn detect(name: &str, text: &str) -> Result<DocumentKind, PolicyError> {
    parse_document(name, text, MAX_OVERRIDES).map(|(k, _)| k)
}

/// The infraID one document names by itself (`status.infrastructureName`, or `infraID` in a
/// tagwarden.yaml), if any: a set's layer must name its folder's.
pub fn declared_infra_id(name: &str, text: &str) -> Result<Option<String>, PolicyError> {
    parse_document(name, text, MAX_OVERRIDES).map(|(_, layer)| layer.infra_id)
}

/// One document, with room for `globs` more overrides and per-type limits in its policy.
fn parse_document(name: &str, text: &str, globs: usize) -> Result<(DocumentKind, Layer), PolicyError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(PolicyError::TooLarge { doc: name.to_string(), size: text.len(), max: MAX_DOCUMENT_BYTES });
    }
    let text = text.trim_start_matches('\u{feff}');
    // An install-config is read as the installer reads it (YAML 1.1 scalars, Go's formatting of
    // numbers; `installer_yaml`), not through serde, which cannot tell `yes` from "yes".
    let unreadable = match installer_yaml::read(text) {
        installer_yaml::Read::InstallConfig(ic) => {
            let ic = ic.map_err(|e| PolicyError::Field { doc: name.to_string(), path: e.path, message: e.message })?;
            return Ok((DocumentKind::InstallConfig, Doc { name }.install_config(ic)?));
        }
        installer_yaml::Read::Unreadable(message) => Some(message),
        installer_yaml::Read::Other => None,
    };
    let trimmed = text.trim_start();
    let value: Value = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(text).map_err(|e| PolicyError::Syntax {
            doc: name.to_string(),
            format: "JSON",
            message: e.to_string(),
        })?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| PolicyError::Syntax {
            doc: name.to_string(),
            format: "YAML",
            message: e.to_string(),
        })?
    };
    let d = Doc { name };
    let Value::Object(obj) = value else {
        // An empty document is more likely a truncated upload than a decision to manage no tags:
        // refused, with the way to say the latter.
        let hint = if value.is_null() { "; for a policy with no tags write {}" } else { "" };
        return Err(d.field("(top level)", format!("expected a mapping, found {}{hint}", describe(&value))));
    };
    let kind_field = obj.get("kind").and_then(Value::as_str);
    if kind_field == Some("Infrastructure") {
        return Ok((DocumentKind::Infrastructure, d.infrastructure(&obj)?));
    }
    if kind_field == Some("List") {
        let items = obj.get("items").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let infra: Vec<&Map<String, Value>> = items
            .iter()
            .filter_map(Value::as_object)
            .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Infrastructure"))
            .collect();
        return match infra.as_slice() {
            [one] => Ok((DocumentKind::Infrastructure, d.infrastructure(one)?)),
            _ => Err(
                d.field("items", format!("a List must hold exactly one Infrastructure object, found {}", infra.len()))
            ),
        };
    }
    if obj.get("platform").is_some_and(Value::is_object) {
        // serde sees an install-config that the installer's YAML reader above could not read.
        return Err(PolicyError::Syntax {
            doc: name.to_string(),
            format: "YAML",
            message: format!(
                "reads as an install-config, but not as the installer reads YAML: {}",
                unreadable.as_deref().unwrap_or("write platform, the platform and userTags as plain keys")
            ),
        });
    }
    const NATIVE_KEYS: &[&str] = &[
        "tags",
        "overrides",
        "infraID",
        "cloud",
        "limits",
        "sensitive",
        "neverYield",
        "auditKeys",
        "enforce",
        "clusterKind",
    ];
    if obj.contains_key("version") && NATIVE_KEYS.iter().any(|k| obj.contains_key(*k)) {
        return Ok((DocumentKind::Native, d.native(Value::Object(obj), globs)?));
    }
    // Also `{}`: an empty set of desired tags is valid and plans no write.
    if obj.values().all(is_scalar) {
        let status = obj.iter().map(|(k, v)| (k.clone(), scalar(v).unwrap_or_default())).collect();
        return Ok((DocumentKind::TagMap, Layer { status, ..Layer::default() }));
    }
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).take(8).collect();
    if obj.len() > 8 {
        keys.push("…");
    }
    Err(PolicyError::Unrecognised {
        doc: name.to_string(),
        keys: if keys.is_empty() { "none".to_string() } else { keys.join(", ") },
    })
}

#[cfg(test)]
mod kind_tests {
    use super::*;
    use crate::resource::ResourceRef;

    #[test]
    fn a_tag_value_pattern_selects_by_the_values_shape_exactly() {
        let doc = |tag: &str| {
            format!("version: 1\ntags: {{}}\noverrides:\n  - selector: {{type: 'ec2:instance', tag: {tag}}}\n    tags: {{tier: gpu}}\n")
        };
        let p = load_one("p.yaml", &doc("{key: Name, valuePattern: 'workers-?????-?????'}"))
            .expect("ten ? are not ten wildcards");
        let sel = &p.overrides[0].selector;
        let r = ResourceRef { id: "i-1".into(), kind: "ec2:instance".into(), arn: None };
        let named = |n: &str| sel.matches(Cloud::Aws, &r, &[("Name".to_string(), n.to_string())].into());
        assert!(named("workers-abcde-12345"));
        assert!(!named("Workers-abcde-12345"), "values are compared with their case");
        assert!(!named("workers-gpu-abcde-12345"));
        let e = load_one("p.yaml", &doc("{key: Name, value: a, valuePattern: 'a*'}")).expect_err("both");
        assert!(e.to_string().contains("not both"), "{e}");
        let e = load_one("p.yaml", &doc("{key: Name, valuePattern: '*a*b*c*d*e*f*g*h*i*'}")).expect_err("stars count");
        assert!(e.to_string().contains("MAX_PATTERN_WILDCARDS"), "{e}");
    }

    fn pairs(tags: &[crate::policy::Tag]) -> Vec<String> {
        tags.iter().map(|t| format!("{}={}", t.key, t.value)).collect()
    }

    /// openshift/api `GCPPlatformStatus`: `resourceLabels` are the policy's labels, and each of
    /// `resourceTags` its `<parentID>/<key>: <value>` entry.
    #[test]
    fn an_openshift_cluster_on_gcp_is_its_resource_labels() {
        let infra = r#"{"kind": "Infrastructure", "spec": {"platformSpec": {"type": "GCP"}},
            "status": {"infrastructureName": "g-1", "platformStatus": {"type": "GCP", "gcp": {"projectID": "my-project", "region": "us-central1",
              "resourceLabels": [{"key": "team", "value": "platform"}, {"key": "cost-center", "value": "cc_42"}],
              "resourceTags": [{"parentID": "123456789012", "key": "env", "value": "prod"}]}}}}"#;
        let p = load_one("infra.json", infra).expect("valid");
        assert_eq!((p.cloud, p.infra_id.as_deref(), p.kind), (Some(Cloud::Gcp), Some("g-1"), ClusterKind::OpenShift));
        assert_eq!(
            (pairs(&p.status), pairs(&p.spec)),
            (vec!["team=platform".into(), "cost-center=cc_42".into(), "123456789012/env=prod".into()], vec![])
        );
        assert!(crate::policy::validate::policy(&p, Cloud::Gcp).is_empty());
        // A tag is judged by OpenShift's tag rules, named with its fix.
        let p = load_one("i", &infra.replace("123456789012", "0123")).expect("loads");
        let v = crate::policy::validate::policy(&p, Cloud::Gcp);
        assert_eq!(v.len(), 1, "{v:#?}");
        assert!(v[0].key == "0123/env" && v[0].message.contains("parentID \"0123\""), "{v:#?}");

        // Shapes the API server would refuse are refused where they stand.
        let labels_as_map = infra.replace(
            r#"[{"key": "team", "value": "platform"}, {"key": "cost-center", "value": "cc_42"}]"#,
            r#"{"team": "platform"}"#,
        );
        let e = load_one("i", &labels_as_map).expect_err("a map");
        assert!(
            e.to_string().contains("status.platformStatus.gcp.resourceLabels: expected a list of {key, value}"),
            "{e}"
        );
        let e = load_one("i", &infra.replace(r#""parentID": "123456789012", "#, "")).expect_err("no parentID");
        assert!(e.to_string().contains("status.platformStatus.gcp.resourceTags[0]"), "{e}");

        // A label the API server takes but tagwarden must not write: named, with the fix.
        let p = load_one("i", &infra.replace(r#""key": "team""#, r#""key": "goog-team""#)).expect("loads");
        let v = crate::policy::validate::policy(&p, Cloud::Gcp);
        assert_eq!(
            v.iter().map(|v| (v.key.as_str(), v.rule)).collect::<Vec<_>>(),
            [("goog-team", crate::policy::validate::Rule::ReservedPrefix)]
        );
        assert!(v[0].message.contains("choose another key"), "{}", v[0].message);

        // Other platforms are still refused, naming what is read.
        let e = load_one("i", &infra.replace(r#""type": "GCP", "gcp""#, r#""type": "VSphere", "gcp""#))
            .expect_err("vSphere");
        assert!(
            e.to_string().contains("\"VSphere\" is not supported") && e.to_string().contains("labels on Google Cloud"),
            "{e}"
        );
        // Without a type, the gcp section names the platform.
        let untyped = infra.replace(r#""type": "GCP", "gcp""#, r#""gcp""#);
        assert_eq!(load_one("i", &untyped).expect("valid").cloud, Some(Cloud::Gcp));
    }

    /// openshift/installer `pkg/types/gcp/platform.go`: `userLabels` `[]UserLabel`, `userTags` `[]UserTag`.
    #[test]
    fn an_install_config_on_gcp_is_its_user_labels() {
        let ic = "apiVersion: v1\nmetadata: {name: g}\nplatform:\n  gcp:\n    projectID: my-project\n    region: us-central1\n    userLabels:\n    - {key: team, value: platform}\n    - {key: cost, value: 42}\n    userTags:\n    - {parentID: my-project-123, key: env, value: prod}\n";
        assert_eq!(detect("install-config.yaml", ic).expect("read"), DocumentKind::InstallConfig);
        let p = load_one("install-config.yaml", ic).expect("valid");
        assert_eq!((p.cloud, p.enforce, p.infra_id.as_deref()), (Some(Cloud::Gcp), true, None));
        assert_eq!(pairs(&p.status), ["team=platform", "cost=42", "my-project-123/env=prod"]);
        assert!(crate::policy::validate::policy(&p, Cloud::Gcp).is_empty());

        // The installer's rules (`crate::gcp::Rules::OpenShift`): lowercase ASCII, its prefixes reserved.
        let bad = ic
            .replace("{key: team, value: platform}", "{key: Team, value: platform}")
            .replace("key: cost,", "key: openshift-io-cost,");
        let p = load_one("install-config.yaml", &bad).expect("loads");
        let v = crate::policy::validate::policy(&p, Cloud::Gcp);
        let found: Vec<(&str, crate::policy::validate::Rule)> = v.iter().map(|v| (v.key.as_str(), v.rule)).collect();
        use crate::policy::validate::Rule as R;
        assert_eq!(found, [("Team", R::KeyCharacters), ("openshift-io-cost", R::ReservedPrefix)], "{v:#?}");
        assert!(v[0].message.contains("lowercased: \"team\""), "{}", v[0].message);
        let e = load_one("ic.yaml", "platform: {gcp: {userLabels: {team: a}}}").expect_err("AWS's shape");
        assert!(e.to_string().contains("platform.gcp.userLabels: expected a list of {key, value}"), "{e}");
    }

    #[test]
    fn the_cluster_kind_comes_from_the_document_and_documents_agree_on_it() {
        let native = |kind: &str| format!("version: 1\ninfraID: w-1\nclusterKind: {kind}\ntags: {{team: a}}\n");
        let p = load_one("p.yaml", &native("ClusterAPI")).expect("valid");
        assert_eq!(p.kind, ClusterKind::ClusterApi);
        assert_eq!(load_one("p.yaml", "version: 1\ntags: {team: a}\n").expect("valid").kind, ClusterKind::OpenShift);
        let e = load_one("p.yaml", &native("Kops")).expect_err("unknown kind");
        assert!(e.to_string().contains("clusterKind") || e.to_string().contains("Kops"), "{e}");

        // An Infrastructure object is OpenShift's: a document saying otherwise is a conflict.
        let infra =
            r#"{"kind": "Infrastructure", "status": {"infrastructureName": "w-1", "platformStatus": {"type": "AWS"}}}"#;
        let e = load(vec![("00.json".into(), infra.into()), ("10.yaml".into(), native("HyperShift"))])
            .expect_err("two kinds");
        assert!(e.to_string().contains("clusterKind"), "{e}");
        // A layer that names no kind takes the other's.
        let both = load(vec![
            ("00.yaml".into(), native("HyperShift")),
            ("10.yaml".into(), "version: 1\ntags: {b: c}\n".into()),
        ])
        .expect("one kind");
        assert_eq!(both.kind, ClusterKind::HyperShift);
        // The version of an OpenShift policy is what it was before kinds existed.
        let plain = load_one("p.yaml", "version: 1\ninfraID: w-1\ntags: {team: a}\n").expect("valid");
        let said = load_one("p.yaml", &native("OpenShift")).expect("valid");
        assert_eq!(plain.version, said.version);
        assert_ne!(plain.version, load_one("p.yaml", &native("ClusterAPI")).expect("valid").version);
    }
}
