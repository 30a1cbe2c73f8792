//! One document's fields read into a [`Layer`]: an Infrastructure object's, an install-config's
//! (as [`installer_yaml`] decodes it), a native tagwarden.yaml's; and the serde shapes of the last.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::*;
use crate::gcp::TagRef;

/// Said of a platform the loader does not read.
const UNSUPPORTED: &str =
    "is not supported: tagwarden enforces tags on AWS and Azure, and labels on Google Cloud (GCP)";

pub(super) struct Doc<'a> {
    pub(super) name: &'a str,
}

impl Doc<'_> {
    pub(super) fn field(&self, path: &str, message: impl Into<String>) -> PolicyError {
        PolicyError::Field { doc: self.name.to_string(), path: path.to_string(), message: message.into() }
    }

    pub(super) fn infrastructure(&self, obj: &Map<String, Value>) -> Result<Layer, PolicyError> {
        let status = obj.get("status");
        let spec = obj.get("spec");
        let platform_type = status.and_then(|s| s.pointer("/platformStatus/type")).and_then(Value::as_str);
        let has = |root: Option<&Value>, ptr: &str| root.and_then(|r| r.pointer(ptr)).is_some();
        let cloud = match platform_type {
            Some("AWS") => Cloud::Aws,
            Some("Azure") => Cloud::Azure,
            Some("GCP") => Cloud::Gcp,
            Some(other) => {
                return Err(self.field("status.platformStatus.type", format!("platform {other:?} {UNSUPPORTED}")));
            }
            None if has(status, "/platformStatus/aws") || has(spec, "/platformSpec/aws") => Cloud::Aws,
            None if has(status, "/platformStatus/azure") || has(spec, "/platformSpec/azure") => Cloud::Azure,
            None if has(status, "/platformStatus/gcp") => Cloud::Gcp,
            None => {
                return Err(self.field("status.platformStatus", "names no platform: expected type AWS, Azure or GCP"))
            }
        };
        let c = cloud.as_str();
        let infra_id = match status.and_then(|s| s.get("infrastructureName")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(other) => {
                return Err(self.field(
                    "status.infrastructureName",
                    format!("expected a non-empty string, found {}", describe(other)),
                ))
            }
        };
        let layer = Layer { cloud: Some(cloud), infra_id, kind: Some(ClusterKind::OpenShift), ..Layer::default() };
        if cloud == Cloud::Gcp {
            // openshift/api `GCPPlatformStatus`: `resourceLabels` ({key, value}) are the labels
            // the installer put on what it created; `resourceTags` ({parentID, key, value}) the
            // Resource Manager tags it bound, each the policy entry `<parentID>/<key>: <value>`
            // (`crate::gcp::TagRef::entry`). `GCPPlatformSpec` holds neither.
            let mut labels = self.resource_tags(status, "status.platformStatus.gcp.resourceLabels")?;
            labels.extend(self.gcp_tags(status, "status.platformStatus.gcp.resourceTags")?.iter().map(TagRef::entry));
            return Ok(Layer { status: labels, ..layer });
        }
        Ok(Layer {
            status: self.resource_tags(status, &format!("status.platformStatus.{c}.resourceTags"))?,
            spec: self.resource_tags(spec, &format!("spec.platformSpec.{c}.resourceTags"))?,
            ..layer
        })
    }

    /// A Google Cloud `resourceTags` list of `{parentID, key, value}` at `path` (dotted, below `root`).
    fn gcp_tags(&self, root: Option<&Value>, path: &str) -> Result<Vec<TagRef>, PolicyError> {
        let pointer: String = path.split('.').skip(1).map(|p| format!("/{p}")).collect();
        let items = match root.and_then(|r| r.pointer(&pointer)) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(
                    self.field(path, format!("expected a list of {{parentID, key, value}}, found {}", describe(other)))
                )
            }
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let field = |f: &str| item.get(f).and_then(Value::as_str).map(str::to_owned);
                match (field("parentID"), field("key"), field("value")) {
                    (Some(parent_id), Some(key), Some(value)) => Ok(TagRef { parent_id, key, value }),
                    _ => {
                        Err(self
                            .field(&format!("{path}[{i}]"), "expected {parentID: string, key: string, value: string}"))
                    }
                }
            })
            .collect()
    }

    /// A `resourceTags` list of `{key, value}` at `path` (dotted, below `root`).
    fn resource_tags(&self, root: Option<&Value>, path: &str) -> Result<Vec<(String, String)>, PolicyError> {
        let pointer: String = path.split('.').skip(1).map(|p| format!("/{p}")).collect();
        let Some(list) = root.and_then(|r| r.pointer(&pointer)) else { return Ok(Vec::new()) };
        let Value::Array(items) = list else {
            if list.is_null() {
                return Ok(Vec::new());
            }
            return Err(self.field(path, format!("expected a list of {{key, value}}, found {}", describe(list))));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let key = item.get("key").and_then(scalar);
                let value = item.get("value").and_then(scalar);
                match (key, value) {
                    (Some(k), Some(v)) => Ok((k, v)),
                    _ => Err(self.field(&format!("{path}[{i}]"), "expected {key: string, value: string}")),
                }
            })
            .collect()
    }

    pub(super) fn install_config(&self, ic: installer_yaml::InstallConfig) -> Result<Layer, PolicyError> {
        let Some(p) = ic.platform else {
            return Err(self.field("platform", format!("platform {} {UNSUPPORTED}", ic.platforms.join(", "))));
        };
        let cloud = match p.name {
            "aws" => Cloud::Aws,
            "azure" => Cloud::Azure,
            _ => Cloud::Gcp,
        };
        // The deprecated experimental flag wins when both are set; an omitted flag propagates.
        let enforce = match cloud {
            Cloud::Aws => p.experimental_propagate_user_tags.or(p.propagate_user_tags).unwrap_or(true),
            Cloud::Azure | Cloud::Gcp => true,
        };
        // On GCP `user_tags` are `userLabels`, which `validate` checks by the installer's rules
        // (`crate::gcp::Rules::OpenShift`), and `gcp_tags` are `userTags`, each the policy entry
        // `<parentID>/<key>: <value>` (`crate::gcp::TagRef::entry`).
        let mut status = p.user_tags;
        status.extend(p.gcp_tags.iter().map(TagRef::entry));
        Ok(Layer { cloud: Some(cloud), enforce: Some(enforce), status, ..Layer::default() })
    }

    /// A tag criterion: a value, or a glob the value must match (case-sensitively; each `?`
    /// stands for one character and is not counted as a wildcard: a pattern such as a machine
    /// name's `workers-?????-?????` costs what its literal would).
    fn tag_selector(&self, path: &str, t: NativeTagSelector) -> Result<TagSelector, PolicyError> {
        let value_pattern = match (&t.value, t.value_pattern) {
            (Some(_), Some(_)) => return Err(self.field(path, "give value or valuePattern, not both")),
            (_, None) => None,
            (None, Some(p)) => {
                let costly = p.replace('?', "");
                self.glob(&format!("{path}.valuePattern"), &costly)?;
                if p.len() > MAX_PATTERN_BYTES {
                    self.glob(&format!("{path}.valuePattern"), &p)?;
                }
                Some(
                    Pattern::case_sensitive(&p)
                        .map_err(|e| self.field(&format!("{path}.valuePattern"), e.to_string()))?,
                )
            }
        };
        Ok(TagSelector { key: t.key, value: t.value, value_pattern })
    }

    /// A glob at `path`, refused before it is compiled when it is longer or has more wildcards
    /// than the limits allow.
    fn glob(&self, path: &str, p: &str) -> Result<Pattern, PolicyError> {
        let wildcards = p.chars().filter(|c| matches!(c, '*' | '?' | '[' | '{')).count();
        let scope = format!("policy {}: {path}", self.name);
        let fix = "a resource type or name pattern needs a few wildcards: write a simpler glob";
        if p.len() > MAX_PATTERN_BYTES {
            return Err(PolicyError::OverLimit(over_limit(
                &scope,
                p.len(),
                "bytes of glob",
                "MAX_PATTERN_BYTES",
                MAX_PATTERN_BYTES,
                fix,
            )));
        }
        if wildcards > MAX_PATTERN_WILDCARDS {
            return Err(PolicyError::OverLimit(over_limit(
                &scope,
                wildcards,
                "wildcards in one glob",
                "MAX_PATTERN_WILDCARDS",
                MAX_PATTERN_WILDCARDS,
                fix,
            )));
        }
        Pattern::new(p).map_err(|e| self.field(path, format!("bad glob {p:?}: {e}")))
    }

    fn tag_map(&self, m: &Map<String, Value>, path: &str) -> Result<Vec<(String, String)>, PolicyError> {
        m.iter()
            .map(|(k, v)| {
                scalar(v).map(|v| (k.clone(), v)).ok_or_else(|| {
                    self.field(&format!("{path}.{k}"), format!("expected a string value, found {}", describe(v)))
                })
            })
            .collect()
    }

    pub(super) fn native(&self, value: Value, globs: usize) -> Result<Layer, PolicyError> {
        // Counted before anything is compiled: globs are what costs.
        let entries = |p: &str| match value.pointer(p) {
            Some(Value::Array(a)) => a.len(),
            Some(Value::Object(o)) => o.len(),
            _ => 0,
        };
        let found = entries("/overrides") + entries("/limits/resourceTagsByType");
        if found > globs {
            let earlier = MAX_OVERRIDES - globs;
            let what = match earlier {
                0 => "overrides and resourceTagsByType entries".to_string(),
                n => format!("overrides and resourceTagsByType entries (with the {n} of earlier documents)"),
            };
            let fix = "merge overrides that set the same tags (one glob covers many resources)";
            let scope = format!("policy {}", self.name);
            return Err(PolicyError::OverLimit(over_limit(
                &scope,
                found + earlier,
                &what,
                "MAX_OVERRIDES",
                MAX_OVERRIDES,
                fix,
            )));
        }
        let doc: NativeDoc = serde_json::from_value(value).map_err(|e| self.field("tagwarden.yaml", e.to_string()))?;
        if doc.version != 1 {
            return Err(self.field(
                "version",
                format!("version {} is not supported: this tagwarden reads version 1", doc.version),
            ));
        }
        let status = self.tag_map(&doc.tags, "tags")?;
        let mut overrides = Vec::with_capacity(doc.overrides.len());
        for (i, o) in doc.overrides.into_iter().enumerate() {
            let path = format!("overrides[{i}]");
            let pattern = |p: Option<String>, field: &str| -> Result<Option<Pattern>, PolicyError> {
                p.map(|p| self.glob(&format!("{path}.selector.{field}"), &p)).transpose()
            };
            let s = o.selector;
            if s.resource_type.is_none() && s.id.is_none() && s.tag.is_none() {
                return Err(self.field(
                    &format!("{path}.selector"),
                    "names no criterion: give type, id or tag (an override for every resource belongs in tags)",
                ));
            }
            let selector = Selector {
                resource_type: pattern(s.resource_type, "type")?,
                id: pattern(s.id, "id")?,
                tag: s.tag.map(|t| self.tag_selector(&format!("{path}.selector.tag"), t)).transpose()?,
            };
            overrides.push((o.name, selector, self.tag_map(&o.tags, &format!("{path}.tags"))?));
        }
        let limits = doc.limits.unwrap_or_default();
        let mut by_type = Vec::new();
        for (p, n) in limits.resource_tags_by_type {
            let pat = self.glob("limits.resourceTagsByType", &p)?;
            by_type.push((pat, n));
        }
        for (field, n) in [("limits.userTags", limits.user_tags), ("limits.resourceTags", limits.resource_tags)] {
            if n == Some(0) {
                return Err(self.field(field, "must be at least 1"));
            }
        }
        Ok(Layer {
            cloud: doc.cloud,
            infra_id: doc.infra_id,
            kind: doc.cluster_kind,
            enforce: doc.enforce,
            status,
            overrides,
            user_tags: limits.user_tags,
            resource_tags: limits.resource_tags,
            resource_tags_by_type: by_type,
            sensitive: doc.sensitive,
            never_yield: doc.never_yield,
            audit_keys: doc.audit_keys,
            ..Layer::default()
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NativeDoc {
    version: u32,
    cloud: Option<Cloud>,
    #[serde(rename = "infraID", alias = "infraId")]
    infra_id: Option<String>,
    /// `OpenShift` (default), `HyperShift` or `ClusterAPI`: which ownership keys mark what the
    /// cluster owns ([`ClusterKind`]); the publisher writes it from the object it read.
    cluster_kind: Option<ClusterKind>,
    enforce: Option<bool>,
    #[serde(default)]
    tags: Map<String, Value>,
    #[serde(default)]
    overrides: Vec<NativeOverride>,
    limits: Option<NativeLimits>,
    #[serde(default)]
    sensitive: Vec<String>,
    /// Keys never yielded to another controller: corrected every time (`crate::contest`).
    #[serde(default)]
    never_yield: Vec<String>,
    /// Keys evaluated and reported but not written while the others are (`crate::mode`).
    #[serde(default)]
    audit_keys: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeOverride {
    name: Option<String>,
    selector: NativeSelector,
    tags: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeSelector {
    #[serde(rename = "type")]
    resource_type: Option<String>,
    id: Option<String>,
    tag: Option<NativeTagSelector>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NativeTagSelector {
    key: String,
    value: Option<String>,
    #[serde(rename = "valuePattern")]
    value_pattern: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NativeLimits {
    user_tags: Option<usize>,
    resource_tags: Option<usize>,
    #[serde(default)]
    resource_tags_by_type: BTreeMap<String, usize>,
}

pub(super) fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// Tag values are strings; YAML's unquoted numbers and booleans are taken as serde reads them (YAML
/// 1.2: `yes` stays "yes", `1e3` is "1000.0"). This is deliberate for tagwarden.yaml and bare tag
/// maps, which only tagwarden reads; an Infrastructure object's values are strings from the API
/// server. install-config userTags are read as the installer reads them instead (`installer_yaml`).
pub(super) fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(super) fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod schema_tests {
    use serde::de::DeserializeOwned;
    use serde_json::{json, Value};

    use super::{NativeDoc, NativeLimits, NativeOverride, NativeSelector, NativeTagSelector};

    /// The JSON Schema users' editors check tagwarden.yaml with.
    const SCHEMA: &str = include_str!("../../../../../schema/tagwarden.schema.json");

    /// The fields `T` takes, as serde itself lists them when it refuses an unknown one.
    fn fields<T: DeserializeOwned>() -> Vec<String> {
        let Err(e) = serde_json::from_value::<T>(json!({ "\u{1}": 0 })) else { panic!("an unknown field was taken") };
        let e = e.to_string();
        let listed = e.split_once("expected ").map_or("", |(_, l)| l);
        let mut names: Vec<String> = listed.split('`').skip(1).step_by(2).map(str::to_string).collect();
        names.sort();
        names
    }

    /// A value of the right type for a field the schema requires.
    fn sample(field: &str) -> Value {
        match field {
            "version" => json!(1),
            "selector" => json!({ "type": "ec2:*" }),
            "tags" => json!({}),
            "key" => json!("role"),
            other => panic!("no sample for required field {other:?}"),
        }
    }

    /// At `pointer` the schema describes `T`: the same fields, unknown ones refused, and exactly
    /// the required ones required.
    fn same<T: DeserializeOwned>(schema: &Value, pointer: &str) {
        let at = schema.pointer(pointer).unwrap_or_else(|| panic!("schema has no {pointer}"));
        let mut named: Vec<String> = at["properties"].as_object().expect("properties").keys().cloned().collect();
        named.sort();
        let what = if pointer.is_empty() { "the document" } else { pointer };
        assert_eq!(named, fields::<T>(), "{what}: the schema's properties and the reader's fields");
        assert_eq!(at["additionalProperties"], json!(false), "{pointer}: unknown fields are refused");
        let required: Vec<&str> =
            at["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let minimal: serde_json::Map<String, Value> = required.iter().map(|f| (f.to_string(), sample(f))).collect();
        if let Err(e) = serde_json::from_value::<T>(Value::Object(minimal.clone())) {
            panic!("{pointer}: the schema's required fields alone are refused: {e}");
        }
        for f in &required {
            let mut less = minimal.clone();
            less.remove(*f);
            let e = serde_json::from_value::<T>(Value::Object(less)).err().map(|e| e.to_string());
            assert!(e.is_some_and(|e| e.contains("missing field")), "{pointer}: {f} is required by the schema only");
        }
    }

    #[test]
    fn the_published_schema_describes_exactly_what_the_reader_takes() {
        let schema: Value = serde_json::from_str(SCHEMA).expect("schema/tagwarden.schema.json is JSON");
        same::<NativeDoc>(&schema, "");
        same::<NativeLimits>(&schema, "/properties/limits");
        same::<NativeOverride>(&schema, "/$defs/override");
        same::<NativeSelector>(&schema, "/$defs/override/properties/selector");
        same::<NativeTagSelector>(&schema, "/$defs/override/properties/selector/properties/tag");
        let max = schema.pointer("/properties/overrides/maxItems").and_then(Value::as_u64);
        assert_eq!(max, Some(super::super::MAX_OVERRIDES as u64), "overrides' maxItems is MAX_OVERRIDES");
    }
}
