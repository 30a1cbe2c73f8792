//! Policy: where a resource's desired tags come from (docs/src/concepts/policy.md).
//!
//! Three layers, lowest precedence first: the Infrastructure object's `status` resource tags, its
//! `spec` resource tags, then resource-level overrides in document order. A later layer wins on the
//! same key; the value it replaces is reported as superseded, never treated as an error.
//! Loading documents is in [`load`]; checking the tags against the cloud's rules is in
//! [`validate`].

pub mod cache;
pub mod clusters;
mod installer_yaml;
pub mod load;
pub mod validate;

use std::borrow::Cow;
use std::collections::BTreeSet;

use globset::GlobMatcher;
use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::cloud::{Cloud, ClusterKind};
use crate::resource::ResourceRef;
use crate::TagMap;

pub use load::{load, load_one, PolicyError};

/// The status report tagwarden writes next to the policy; never read back as a policy layer.
pub const STATUS_REPORT_NAME: &str = "tagwarden-status.json";

/// One desired tag as a document gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tag {
    pub key: String,
    pub value: String,
    /// Index into [`Policy::documents`].
    pub doc: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Override {
    pub name: Option<String>,
    pub selector: Selector,
    pub tags: Vec<Tag>,
    pub doc: usize,
}

impl Override {
    /// `override[N]`, or `override "name"` when the document names it.
    pub fn label(&self, index: usize) -> String {
        match &self.name {
            Some(n) => format!("override {n:?}"),
            None => format!("override[{index}]"),
        }
    }
}

/// Which resources an override applies to. Every criterion given must match.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Selector {
    /// Glob on the resource type (`ec2:*`, `Microsoft.Compute/*`).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<Pattern>,
    /// Glob on the resource ID or its ARN / ARM ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Pattern>,
    /// A tag the resource already carries; without a value, any value matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<TagSelector>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TagSelector {
    pub key: String,
    pub value: Option<String>,
    /// A glob the value must match, case-sensitively (a tag value is compared exactly).
    #[serde(rename = "valuePattern", skip_serializing_if = "Option::is_none")]
    pub value_pattern: Option<Pattern>,
}

/// A case-insensitive glob (`*` also crosses `/`), kept with its source text.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub source: String,
    matcher: GlobMatcher,
}

impl Pattern {
    pub fn new(source: &str) -> Result<Self, globset::Error> {
        let glob = globset::GlobBuilder::new(source).case_insensitive(true).build()?;
        Ok(Pattern { source: source.to_string(), matcher: glob.compile_matcher() })
    }

    /// A glob that tells case apart, for tag values.
    pub fn case_sensitive(source: &str) -> Result<Self, globset::Error> {
        let glob = globset::GlobBuilder::new(source).build()?;
        Ok(Pattern { source: source.to_string(), matcher: glob.compile_matcher() })
    }

    pub fn is_match(&self, s: &str) -> bool {
        self.matcher.is_match(s)
    }
}

impl Serialize for Pattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl Selector {
    pub fn matches(&self, cloud: Cloud, resource: &ResourceRef, current: &TagMap) -> bool {
        if let Some(p) = &self.resource_type {
            if !p.is_match(&resource.kind) {
                return false;
            }
        }
        if let Some(p) = &self.id {
            let by_arn = resource.arn.as_deref().is_some_and(|a| p.is_match(a));
            if !by_arn && !p.is_match(&resource.id) {
                return false;
            }
        }
        if let Some(t) = &self.tag {
            match cloud.get(current, &t.key) {
                None => return false,
                Some((_, v)) => {
                    if t.value.as_ref().is_some_and(|want| want != v) {
                        return false;
                    }
                    if t.value_pattern.as_ref().is_some_and(|p| !p.is_match(v)) {
                        return false;
                    }
                }
            }
        }
        true
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Limits {
    /// How many user tags the policy may define (default: 25 on AWS, 10 on Azure).
    pub user_tags: Option<usize>,
    /// How many tags a resource may carry in total (default: the service's limit).
    pub resource_tags: Option<usize>,
    /// Per resource type (glob) overrides of `resource_tags`; the first match wins.
    pub resource_tags_by_type: Vec<(Pattern, usize)>,
}

/// A merged, not yet validated policy.
#[derive(Debug, Clone, Serialize)]
pub struct Policy {
    /// Names of the documents it was merged from, in merge order.
    pub documents: Vec<String>,
    pub cloud: Option<Cloud>,
    pub infra_id: Option<String>,
    /// What provisioned the cluster, which decides its ownership keys. Left out of the version
    /// when OpenShift (the default), so that versions published before kinds existed still hold.
    #[serde(skip_serializing_if = "ClusterKind::is_openshift")]
    pub kind: ClusterKind,
    /// `enforce: false`: this cluster is audited — every resource is evaluated exactly as when
    /// enforced, its drift reported, and nothing written (`crate::mode`). True by default.
    pub enforce: bool,
    pub status: Vec<Tag>,
    pub spec: Vec<Tag>,
    pub overrides: Vec<Override>,
    pub limits: Limits,
    /// Keys whose values are printed only as hashes in logs.
    pub sensitive: BTreeSet<String>,
    /// Keys tagwarden never yields on (`neverYield`): corrected every time, whoever changes them,
    /// never contested (`crate::contest`). Each must be a key the policy manages. Left out of the
    /// version when empty, so versions published before it existed still hold.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub never_yield: BTreeSet<String>,
    /// Keys audited beside enforced ones (`auditKeys`): evaluated and reported, never written, while
    /// the policy's other keys are (`crate::mode`). Each must be a key the policy manages. Left
    /// out of the version when empty, so versions published before it existed still hold.
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub audit_keys: BTreeSet<String>,
    /// Short content hash of everything above; stamped on every outcome record.
    #[serde(skip)]
    pub version: String,
}

/// Which layer of which document a desired value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Status,
    Spec,
    /// Index into [`Policy::overrides`].
    Override(usize),
}

/// Where a desired value comes from: a layer of one of the policy's documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagOrigin {
    pub layer: Layer,
    pub doc: usize,
}

/// One desired tag, borrowed from the policy so that planning allocates only for drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DesiredTag<'p> {
    pub key: &'p str,
    pub value: &'p str,
    pub source: TagOrigin,
}

/// The desired tags for one resource, with where each came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired<'p> {
    pub tags: Vec<DesiredTag<'p>>,
    pub superseded: Vec<Superseded>,
}

impl<'p> Desired<'p> {
    /// Desired tags from a plain map (all attributed to `status`), for callers without a policy.
    pub fn from_map(tags: &'p TagMap) -> Self {
        let source = TagOrigin { layer: Layer::Status, doc: 0 };
        Desired {
            tags: tags.iter().map(|(k, v)| DesiredTag { key: k, value: v, source }).collect(),
            superseded: Vec::new(),
        }
    }

    pub fn get(&self, cloud: Cloud, key: &str) -> Option<&DesiredTag<'p>> {
        self.tags.iter().find(|t| cloud.keys_equal(t.key, key))
    }

    pub fn to_map(&self) -> TagMap {
        self.tags.iter().map(|t| (t.key.to_string(), t.value.to_string())).collect()
    }
}

/// A value that a higher-precedence layer replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Superseded {
    pub key: String,
    /// The value that lost.
    pub value: String,
    /// The layer it came from.
    pub from: String,
    /// The layer whose value won.
    pub by: String,
}

impl Policy {
    /// `layer`, plus the document name when the policy was merged from several.
    pub fn label(&self, layer: &str, doc: usize) -> String {
        match self.documents.get(doc) {
            Some(name) if self.documents.len() > 1 => format!("{layer} ({name})"),
            _ => layer.to_string(),
        }
    }

    pub(crate) fn seal(mut self) -> Self {
        let canonical = serde_json::to_vec(&self).unwrap_or_default();
        let digest = Sha256::digest(&canonical);
        self.version = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        self
    }

    /// How a source reads in reports: `status`, `spec`, `override "name"`, plus the document
    /// when the policy was merged from several.
    pub fn source_label(&self, source: TagOrigin) -> String {
        match source.layer {
            Layer::Status => self.label("status", source.doc),
            Layer::Spec => self.label("spec", source.doc),
            Layer::Override(i) => {
                let layer = self.overrides.get(i).map(|o| o.label(i)).unwrap_or_else(|| format!("override[{i}]"));
                self.label(&layer, source.doc)
            }
        }
    }

    /// Desired tags for `resource`, whose current tags (for tag selectors) are `current`.
    pub fn desired_for<'p>(&'p self, cloud: Cloud, resource: &ResourceRef, current: &TagMap) -> Desired<'p> {
        let mut desired =
            Desired { tags: Vec::with_capacity(self.status.len() + self.spec.len()), superseded: Vec::new() };
        self.merge_layer(cloud, &mut desired, &self.status, Layer::Status);
        self.merge_layer(cloud, &mut desired, &self.spec, Layer::Spec);
        for (i, o) in self.overrides.iter().enumerate() {
            if o.selector.matches(cloud, resource, current) {
                self.merge_layer(cloud, &mut desired, &o.tags, Layer::Override(i));
            }
        }
        desired
    }

    /// The tags every owned resource gets (status, then spec), before any override.
    pub fn base_tags(&self, cloud: Cloud) -> TagMap {
        let mut desired = Desired { tags: Vec::new(), superseded: Vec::new() };
        self.merge_layer(cloud, &mut desired, &self.status, Layer::Status);
        self.merge_layer(cloud, &mut desired, &self.spec, Layer::Spec);
        desired.to_map()
    }

    /// Lay `tags` over `desired`, recording every value a later one replaces.
    fn merge_layer<'p>(&'p self, cloud: Cloud, desired: &mut Desired<'p>, tags: &'p [Tag], layer: Layer) {
        for t in tags {
            let source = TagOrigin { layer, doc: t.doc };
            match desired.tags.iter_mut().find(|d| cloud.keys_equal(d.key, &t.key)) {
                Some(d) if d.value == t.value => {}
                Some(d) => {
                    desired.superseded.push(Superseded {
                        key: d.key.to_string(),
                        value: d.value.to_string(),
                        from: self.source_label(d.source),
                        by: self.source_label(source),
                    });
                    *d = DesiredTag { key: &t.key, value: &t.value, source };
                }
                None => desired.tags.push(DesiredTag { key: &t.key, value: &t.value, source }),
            }
        }
    }

    /// The most tags a resource of `resource_type` may carry.
    pub fn resource_tag_limit(&self, cloud: Cloud, resource_type: &str) -> usize {
        self.limits
            .resource_tags_by_type
            .iter()
            .find(|(pattern, _)| pattern.is_match(resource_type))
            .map(|(_, n)| *n)
            .or(self.limits.resource_tags)
            .unwrap_or_else(|| cloud.default_resource_tag_limit(resource_type))
    }

    /// Whether `key` is one of the policy's `auditKeys`, compared as `cloud` compares keys.
    pub fn audits_key(&self, cloud: Cloud, key: &str) -> bool {
        self.audit_keys.iter().any(|k| cloud.keys_equal(k, key))
    }

    /// A value as logs may show it: a hash for keys the policy marks sensitive.
    pub fn loggable<'a>(&self, key: &str, value: &'a str) -> Cow<'a, str> {
        if self.sensitive.iter().any(|k| k.eq_ignore_ascii_case(key)) {
            let digest = Sha256::digest(value.as_bytes());
            Cow::Owned(format!("sha256:{}", digest.iter().take(6).map(|b| format!("{b:02x}")).collect::<String>()))
        } else {
            Cow::Borrowed(value)
        }
    }
}
