//! install-config `userTags` (and on Google Cloud `userLabels`) as the OpenShift installer reads them.
//!
//! The installer decodes install-config.yaml with `sigs.k8s.io/yaml` (v1.6.0 in its go.mod):
//! `AssetBase.LoadFromFile` (openshift/installer `pkg/asset/installconfig/installconfigbase.go`)
//! calls `yaml.UnmarshalStrict(data, &types.InstallConfig{}, yaml.DisallowUnknownFields)`. That is:
//!
//! 1. go-yaml v2 (`go.yaml.in/yaml/v2` v2.4.3, YAML 1.1) decodes the document into `interface{}`
//!    values, strictly (a key set twice in one mapping is an error): `decode.go`
//!    `decoder.scalar`, `resolve.go` `resolve`;
//! 2. `sigs.k8s.io/yaml` `yaml.go` `convertToJSONableObject` turns keys into strings, and turns a
//!    number or boolean into a string where the Go target is a string — as it is for
//!    `UserTags map[string]string` of `platform.aws` / `platform.azure`, and the `key`, `value`
//!    and `parentID` strings of `platform.gcp`'s `userLabels` (`[]UserLabel`) and `userTags`
//!    (`[]UserTag`) lists (openshift/installer `pkg/types/gcp/platform.go`);
//! 3. `encoding/json` fills the map or the structs (a JSON `null` leaves the empty string).
//!
//! So a plain `yes` becomes `"true"`, `1e3` becomes `"1000"` and `0x1F` becomes `"31"`, while
//! `"yes"` stays `yes`. serde's YAML (1.2, no scalar style) cannot tell `yes` from `"yes"`, so an
//! install-config (its userTags and propagation flags) is read here instead, from a YAML event
//! parser that keeps each scalar's style and tag. Only install-configs: an Infrastructure object
//! comes from the API server with its values already strings, and a native tagwarden.yaml or bare
//! tag map is tagwarden's own format, read by serde as YAML 1.2 (`load`'s `scalar`).
//!
//! Deliberately refused rather than guessed, with an error that names the key and the fix:
//! explicit `!!binary` and `!!timestamp` tags (the installer decodes them; nobody writes them in
//! userTags), and keys the installer cannot use or keeps only one of (null, collections, integers
//! above 2^63-1, two keys that become the same string, such as `yes` and `on`).

mod node;
mod resolve;
mod strconv;

use std::rc::Rc;

use node::{merged_entries, parse, Node};
use resolve::{decode, key_string, value_string, GoValue};

/// Deeper documents are refused (serde_json's and serde_yaml_ng's recursion limit).
const MAX_DEPTH: usize = 128;
/// Bounds the work of merge keys (`<<`) that alias one another.
const MAX_MERGED_ENTRIES: usize = 10_000;

const TAG_STR: &str = "tag:yaml.org,2002:str";
const TAG_BOOL: &str = "tag:yaml.org,2002:bool";
const TAG_INT: &str = "tag:yaml.org,2002:int";
const TAG_FLOAT: &str = "tag:yaml.org,2002:float";
const TAG_NULL: &str = "tag:yaml.org,2002:null";
const TAG_TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
const TAG_BINARY: &str = "tag:yaml.org,2002:binary";
const TAG_MERGE: &str = "tag:yaml.org,2002:merge";

/// An error at a dotted path of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub path: String,
    pub message: String,
}

fn error(path: &str, message: impl Into<String>) -> Error {
    Error { path: path.to_string(), message: message.into() }
}

/// Why a document, or one of its userTags entries, cannot be read as the installer reads it. Each
/// message names the line or the value, and the fix where there is one; [`Error`] adds the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("not valid YAML: {0}")]
    NotYaml(saphyr_parser::ScanError),
    #[error("line {line}: alias to an unknown anchor")]
    UnknownAnchor { line: usize },
    #[error("line {line}: nested deeper than {MAX_DEPTH} levels")]
    TooDeep { line: usize },
    #[error("line {line}: unbalanced collection")]
    Unbalanced { line: usize },
    #[error("line {line}: a merge key (<<) needs a mapping or a list of mappings, found {found}")]
    MergeOfNonMapping { line: usize, found: &'static str },
    #[error("too many entries: more than {MAX_MERGED_ENTRIES}, counting those merged with <<")]
    TooManyEntries,
    #[error("explicit {tag} tags are not supported in userTags; write the value as a quoted string")]
    UnsupportedTag { tag: String },
    #[error("the installer cannot decode {resolved} `{input}` as a {tag}")]
    TagMismatch { resolved: String, input: String, tag: String },
    #[error("a tag key must be a scalar, found {found}")]
    KeyNotScalar { found: &'static str },
    #[error(
        "a null key (`~`, `null` or nothing) cannot be a tag key, and the installer refuses it; \
         quote the key if it is meant as text"
    )]
    NullKey,
    #[error("the installer refuses the key {0}, an integer above 2^63-1; quote it")]
    KeyAboveInt64(u64),
    #[error("expected a string value, found {found}; write the value as one string")]
    ValueNotScalar { found: &'static str },
}

/// How [`read`] sees a document.
#[derive(Debug, PartialEq)]
pub(crate) enum Read {
    /// Not an install-config (no `platform` mapping, or `kind: Infrastructure` / `List`).
    Other,
    /// Not YAML this reader can parse; the message says where.
    Unreadable(String),
    /// An install-config, or why the installer would refuse it.
    InstallConfig(Result<InstallConfig, Error>),
}

/// What tagwarden takes from an install-config, decoded as the installer decodes it.
#[derive(Debug, PartialEq)]
pub(crate) struct InstallConfig {
    /// The keys under `platform`, as written (for the error on an unsupported platform).
    pub platforms: Vec<String>,
    /// `platform.aws` when present, else `platform.azure`, else `platform.gcp`.
    pub platform: Option<PlatformConfig>,
}

#[derive(Debug, PartialEq)]
pub(crate) struct PlatformConfig {
    /// `aws`, `azure` or `gcp`.
    pub name: &'static str,
    /// `userTags` as the installer's `map[string]string` (on `gcp`: `userLabels`, a list of
    /// `{key, value}`), in document order; empty when absent.
    pub user_tags: Vec<(String, String)>,
    /// `gcp` only: `userTags`, the Resource Manager tags `{parentID, key, value}` the installer binds.
    pub gcp_tags: Vec<crate::gcp::TagRef>,
    /// `propagateUserTags` (AWS only); `None` when absent or null.
    pub propagate_user_tags: Option<bool>,
    /// `experimentalPropagateUserTags` (AWS only); `None` when absent or null.
    pub experimental_propagate_user_tags: Option<bool>,
}

/// Read `text` as the installer would if it is an install-config (a root mapping with a `platform`
/// mapping and no `kind: Infrastructure` / `kind: List`, the order in which the loader detects kinds).
pub(crate) fn read(text: &str) -> Read {
    let root = match parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => return Read::Other,
        Err(e) => return Read::Unreadable(e.to_string()),
    };
    let Node::Map(entries, _) = root.as_ref() else { return Read::Other };
    let kind = get(entries, "", "kind").ok().flatten().and_then(Node::as_string);
    if matches!(kind.as_deref(), Some("Infrastructure" | "List")) {
        return Read::Other;
    }
    match get(entries, "", "platform") {
        Ok(Some(platform @ Node::Map(..))) => Read::InstallConfig(install_config(platform)),
        Ok(_) => Read::Other,
        Err(e) => Read::InstallConfig(Err(e)),
    }
}

fn install_config(platform: &Node) -> Result<InstallConfig, Error> {
    let Node::Map(entries, _) = platform else { return Err(error("platform", "expected a mapping")) };
    let platforms = entries.iter().filter_map(|(k, _)| k.as_scalar().map(|s| s.value.clone())).collect();
    let chosen = match get(entries, "platform", "aws")? {
        Some(node) => Some(("aws", node)),
        None => match get(entries, "platform", "azure")? {
            Some(node) => Some(("azure", node)),
            None => get(entries, "platform", "gcp")?.map(|node| ("gcp", node)),
        },
    };
    let Some((name, node)) = chosen else { return Ok(InstallConfig { platforms, platform: None }) };
    let path = format!("platform.{name}");
    let fields = match node {
        Node::Map(fields, _) => fields.as_slice(),
        Node::Scalar(s) if decode(s).is_ok_and(|v| v == GoValue::Null) => &[],
        other => return Err(error(&path, format!("expected a mapping, found {}", other.describe()))),
    };
    let (user_tags, gcp_tags) = if name == "gcp" {
        let labels = match get(fields, &path, "userLabels")? {
            Some(list) => structs(list, &format!("{path}.userLabels"), &["key", "value"])?,
            None => Vec::new(),
        };
        let tags = match get(fields, &path, "userTags")? {
            Some(list) => structs(list, &format!("{path}.userTags"), &["parentID", "key", "value"])?,
            None => Vec::new(),
        };
        let labels = labels.into_iter().map(|mut f| (std::mem::take(&mut f[0]), std::mem::take(&mut f[1])));
        let tags = tags.into_iter().map(|mut f| crate::gcp::TagRef {
            parent_id: std::mem::take(&mut f[0]),
            key: std::mem::take(&mut f[1]),
            value: std::mem::take(&mut f[2]),
        });
        (labels.collect(), tags.collect())
    } else {
        match get(fields, &path, "userTags")? {
            Some(tags) => (user_tags(tags, &format!("{path}.userTags"))?, Vec::new()),
            None => (Vec::new(), Vec::new()),
        }
    };
    let flag = |field: &str| -> Result<Option<bool>, Error> {
        if name != "aws" {
            return Ok(None);
        }
        let at = format!("{path}.{field}");
        match get(fields, &path, field)? {
            None => Ok(None),
            Some(Node::Scalar(s)) => match decode(s).map_err(|m| error(&at, m.to_string()))? {
                GoValue::Null => Ok(None),
                GoValue::Bool(b) => Ok(Some(b)),
                other => Err(error(&at, format!("expected true or false, found {}", other.describe()))),
            },
            Some(other) => Err(error(&at, format!("expected true or false, found {}", other.describe()))),
        }
    };
    Ok(InstallConfig {
        platforms,
        platform: Some(PlatformConfig {
            name,
            user_tags,
            gcp_tags,
            propagate_user_tags: flag("propagateUserTags")?,
            experimental_propagate_user_tags: flag("experimentalPropagateUserTags")?,
        }),
    })
}

/// The value of key `name` in a mapping at `path`; the installer decodes strictly, so a key set
/// twice is an error.
fn get<'n>(entries: &'n [(Rc<Node>, Rc<Node>)], path: &str, name: &str) -> Result<Option<&'n Node>, Error> {
    let mut found = entries.iter().filter(|(k, _)| k.as_string().as_deref() == Some(name)).map(|(_, v)| v.as_ref());
    let first = found.next();
    if found.next().is_some() {
        let at = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        return Err(error(&at, "is set twice; the installer refuses a key set twice in one mapping"));
    }
    Ok(first)
}

/// A userTags mapping as the installer's `map[string]string`, in document order.
fn user_tags(node: &Node, path: &str) -> Result<Vec<(String, String)>, Error> {
    let entries = match node {
        Node::Map(..) => merged_entries(node).map_err(|m| error(path, m.to_string()))?,
        Node::Scalar(s) if decode(s).is_ok_and(|v| v == GoValue::Null) => return Ok(Vec::new()),
        other => {
            return Err(error(path, format!("expected a map of tag keys to values, found {}", other.describe())));
        }
    };
    let mut tags: Vec<(String, String)> = Vec::with_capacity(entries.len());
    let mut lines: Vec<usize> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let line = key.line();
        let key = key_string(key).map_err(|m| error(path, format!("key at line {line}: {m}")))?;
        let at = format!("{path}.{key}");
        if let Some(i) = tags.iter().position(|(k, _)| *k == key) {
            return Err(error(
                &at,
                format!(
                    "the keys at lines {} and {line} both become {key:?} as the installer reads YAML \
                     (YAML 1.1: yes/on/true are one boolean, 0x1F and 31 one number), and it refuses or \
                     keeps either one; keep one, or quote the keys to keep them apart",
                    lines[i]
                ),
            ));
        }
        let value = value_string(value).map_err(|m| error(&at, format!("line {}: {m}", value.line())))?;
        tags.push((key, value));
        lines.push(line);
    }
    Ok(tags)
}

/// A list of structs of string fields `fields` (`platform.gcp.userLabels`, `userTags`), each
/// entry's values in `fields`' order, as the installer decodes `[]UserLabel` / `[]UserTag`: a
/// field left out or `null` is the empty string (for its validation to refuse), and a field it
/// does not know is an error (`yaml.DisallowUnknownFields`). Field names are matched exactly,
/// where `encoding/json` would also take another case (`Key`): refused, naming the spelling.
fn structs(node: &Node, path: &str, fields: &[&str]) -> Result<Vec<Vec<String>>, Error> {
    let items = match node {
        Node::Seq(items, _) => items,
        Node::Scalar(s) if decode(s).is_ok_and(|v| v == GoValue::Null) => return Ok(Vec::new()),
        other => {
            let want = fields.join(", ");
            return Err(error(path, format!("expected a list of {{{want}}}, found {}", other.describe())));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let entries = match item.as_ref() {
            Node::Map(..) => merged_entries(item).map_err(|m| error(&at, m.to_string()))?,
            other => {
                let want = fields.join(", ");
                return Err(error(&at, format!("expected {{{want}}}, found {}", other.describe())));
            }
        };
        let mut values = vec![None; fields.len()];
        for (key, value) in entries {
            let line = key.line();
            let key = key_string(key).map_err(|m| error(&at, format!("key at line {line}: {m}")))?;
            let Some(f) = fields.iter().position(|f| *f == key) else {
                return Err(error(
                    &format!("{at}.{key}"),
                    format!("unknown field (line {line}); the installer refuses it: write only {}", fields.join(", ")),
                ));
            };
            if values[f].is_some() {
                return Err(error(&format!("{at}.{key}"), "is set twice; the installer refuses a key set twice"));
            }
            let v = value_string(value)
                .map_err(|m| error(&format!("{at}.{key}"), format!("line {}: {m}", value.line())))?;
            values[f] = Some(v);
        }
        out.push(values.into_iter().map(Option::unwrap_or_default).collect());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::strconv::{format_float32, go_parse_float, go_parse_int, go_parse_uint, underscore_ok, NumError};
    use super::*;

    /// `Ok(None)`: the document has no platform.aws.
    fn tags(yaml: &str) -> Result<Option<Vec<(String, String)>>, Error> {
        match read(yaml) {
            Read::InstallConfig(ic) => Ok(ic?.platform.map(|p| p.user_tags)),
            other => panic!("{yaml}: not read as an install-config: {other:?}"),
        }
    }

    #[test]
    fn format_float32_matches_go() {
        // strconv.FormatFloat(f, 'g', -1, 32), worked through ftoa.go's formatDigits.
        for (f, want) in [
            (1000.0, "1000"),
            (1.23456789, "1.2345679"),
            (0.5, "0.5"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (16777217.0, "1.6777216e+07"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e-40, "1e-40"),
            (1e30, "1e+30"),
            (1e39, "+Inf"),
            (-1e39, "-Inf"),
            (f64::NAN, "NaN"),
            (0.0, "0"),
            (-0.0, "-0"),
            (-2.5, "-2.5"),
            (1.8446744073709552e19, "1.8446744e+19"),
            // Exactly halfway between two shortest candidates: Go rounds to the even digit.
            (2352156.25, "2.3521562e+06"),
            (495651.625, "495651.62"),
            (24826.3125, "24826.312"),
        ] {
            assert_eq!(format_float32(f), want, "{f}");
        }
    }

    #[test]
    fn go_number_parsing() {
        assert_eq!(go_parse_int("0x1F", 0), Ok(31));
        assert_eq!(go_parse_int("-0x1F", 0), Ok(-31));
        assert_eq!(go_parse_int("017", 0), Ok(15));
        assert_eq!(go_parse_int("0o17", 0), Ok(15));
        assert_eq!(go_parse_int("0b101", 0), Ok(5));
        assert_eq!(go_parse_int("0b-101", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("-101", 2), Ok(-5));
        assert_eq!(go_parse_uint("1_0", 2), Err(NumError::Syntax), "underscores only in base 0");
        assert_eq!(go_parse_int("0", 0), Ok(0));
        assert_eq!(go_parse_int("08", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("0x", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("+", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("-9223372036854775808", 0), Ok(i64::MIN));
        assert_eq!(go_parse_int("9223372036854775808", 0), Err(NumError::Range));
        assert_eq!(go_parse_uint("9223372036854775808", 0), Ok(1 << 63));
        assert_eq!(go_parse_uint("+1", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_uint("18446744073709551616", 0), Err(NumError::Range));
        assert_eq!(go_parse_float(".5"), Some(0.5));
        assert_eq!(go_parse_float(".5_5"), Some(0.55));
        assert_eq!(go_parse_float("._5"), None);
        assert_eq!(go_parse_float("5."), Some(5.0));
        assert_eq!(go_parse_float("1E3"), Some(1000.0));
        assert_eq!(go_parse_float("1e400"), None, "out of range is an error in Go");
        assert_eq!(go_parse_float("1e-400"), Some(0.0), "underflow is not");
        assert_eq!(go_parse_float("."), None);
        assert_eq!(go_parse_float(".5."), None);
        assert!(underscore_ok("1_000") && !underscore_ok("1__0") && !underscore_ok("1_") && underscore_ok("0x_1F"));
    }

    #[test]
    fn detection_and_flags() {
        assert_eq!(read("kind: Infrastructure\nplatform: {aws: {}}\n"), Read::Other);
        assert_eq!(read("kind: List\nitems: []\n"), Read::Other);
        assert_eq!(read("team: platform\n"), Read::Other);
        assert_eq!(read("platform: aws\n"), Read::Other, "not a mapping: serde's loader says why");
        assert_eq!(read(""), Read::Other);
        assert!(matches!(read("a: [1\n"), Read::Unreadable(_)));
        let ic = |yaml: &str| match read(yaml) {
            Read::InstallConfig(ic) => ic,
            other => panic!("{yaml}: {other:?}"),
        };
        let p = ic("platform: {aws: {propagateUserTags: yes, experimentalPropagateUserTags: ~}}")
            .expect("reads")
            .platform
            .expect("aws");
        assert_eq!((p.name, p.propagate_user_tags, p.experimental_propagate_user_tags), ("aws", Some(true), None));
        let p = ic("platform: {aws: {experimentalPropagateUserTags: off}}").expect("reads").platform.expect("aws");
        assert_eq!(p.experimental_propagate_user_tags, Some(false));
        // A string is not a bool to encoding/json: the installer refuses it.
        let e = ic("platform: {aws: {propagateUserTags: \"true\"}}").expect_err("a string");
        assert_eq!(e.path, "platform.aws.propagateUserTags");
        assert!(e.message.contains("found a string"), "{e:?}");
        let e = ic("platform: {aws: {}, aws: {}}").expect_err("twice");
        assert_eq!(e.path, "platform.aws");
        let vsphere = ic("platform: {vsphere: {}, none: {}}").expect("reads");
        assert_eq!(
            (vsphere.platforms.as_slice(), vsphere.platform),
            (&["vsphere".to_string(), "none".to_string()][..], None)
        );
        assert_eq!(ic("platform: {azure: ~}").expect("reads").platform.map(|p| p.name), Some("azure"));
    }

    #[test]
    fn gcp_user_labels_and_tags_are_lists_of_string_fields() {
        let gcp = |yaml: &str| match read(yaml) {
            Read::InstallConfig(ic) => ic.map(|ic| ic.platform.expect("a platform")),
            other => panic!("{yaml}: {other:?}"),
        };
        let doc = "platform:\n  gcp:\n    projectID: p-1\n    userLabels:\n    - {key: team, value: 0x1F}\n    - key: env\n      value: prod\n    userTags:\n    - {parentID: 123456789012, key: env, value: production}\n";
        let p = gcp(doc).expect("reads");
        assert_eq!(p.name, "gcp");
        let want = [("team", "31"), ("env", "prod")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(p.user_tags, want.to_vec(), "values as the installer's strings");
        let tag =
            crate::gcp::TagRef { parent_id: "123456789012".into(), key: "env".into(), value: "production".into() };
        assert_eq!(p.gcp_tags, vec![tag]);
        // userTags on GCP are not a map, and an AWS-style map is refused where it stands.
        let e = gcp("platform: {gcp: {userLabels: {team: a}}}").expect_err("a map");
        assert_eq!(e.path, "platform.gcp.userLabels");
        assert!(e.message.contains("expected a list of {key, value}"), "{e:?}");
        let e = gcp("platform: {gcp: {userLabels: [{Key: team, value: a}]}}").expect_err("unknown field");
        assert_eq!(e.path, "platform.gcp.userLabels[0].Key");
        let e = gcp("platform: {gcp: {userTags: [{key: a, key: b}]}}").expect_err("twice");
        assert!(e.message.contains("set twice"), "{e:?}");
        let p = gcp("platform: {gcp: {userLabels: [{key: team}], userTags: ~}}").expect("reads");
        assert_eq!(p.user_tags, vec![("team".to_string(), String::new())], "a missing value is empty");
    }

    #[test]
    fn aliases_merges_and_refusals() {
        let doc = "base: &b {team: a, cost: 10}\nplatform:\n  aws:\n    userTags:\n      <<: *b\n      env: *x\n";
        assert!(matches!(read(doc), Read::Unreadable(ref m) if m.contains("unknown anchor")), "{:?}", read(doc));
        let doc = "x: &x prod\nbase: &b {team: a, cost: 0x10}\nplatform:\n  aws:\n    userTags:\n      <<: *b\n      env: *x\n";
        let want = [("team", "a"), ("cost", "16"), ("env", "prod")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(tags(doc), Ok(Some(want.to_vec())));
        // Strict decoding: a merged key set again is an error, not an override.
        let doc = "b: &b {team: a}\nplatform: {aws: {userTags: {<<: *b, team: b}}}\n";
        assert!(tags(doc).is_err_and(|e| e.message.contains("both become")));
        // A quoted "<<" is an ordinary key.
        assert_eq!(tags("platform: {aws: {userTags: {'<<': x}}}"), Ok(Some(vec![("<<".into(), "x".into())])));
        assert_eq!(tags("platform: {aws: {}}"), Ok(Some(vec![])));
        assert_eq!(tags("platform: {gcp: {}}"), Ok(Some(vec![])));
        assert_eq!(tags("platform: {vsphere: {}}"), Ok(None));
        assert_eq!(tags("platform: {aws: {userTags: ~}}"), Ok(Some(vec![])));
        assert!(tags("platform: {aws: {userTags: [a]}}").is_err_and(|e| e.message.contains("a list")));
        assert!(tags("platform: {aws: {userTags: {a: [b]}}}").is_err_and(|e| e.path == "platform.aws.userTags.a"));
        assert!(tags("platform: {aws: {userTags: {~: b}}}").is_err_and(|e| e.message.contains("null key")));
        assert!(tags("platform: {aws: {userTags: {a: !!binary aGk=}}}").is_err_and(|e| e.message.contains("!!binary")));
        assert!(tags("platform: {aws: {userTags: {a: !!int abc}}}").is_err_and(|e| e.message.contains("!!int")));
        let deep = format!("platform: {{aws: {{userTags: {{a: {}{}}}}}}}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(read(&deep), Read::Unreadable(ref m) if m.contains("deeper")));
        // An exponential chain of merges of empty maps is bounded.
        let mut doc = String::from("m0: &m0 {}\n");
        for i in 1..40 {
            doc.push_str(&format!("m{i}: &m{i} {{<<: [*m{0}, *m{0}]}}\n", i - 1));
        }
        doc.push_str("platform: {aws: {userTags: {<<: *m39}}}\n");
        assert!(tags(&doc).is_err_and(|e| e.message.contains("too many")));
    }
}
