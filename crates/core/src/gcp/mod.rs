//! Google Cloud's label and tag rules, as their sources state them, and the labels that mark what a
//! cluster owns there: the rules behind `Cloud::Gcp` (`crate::cloud`). Pure.
//!
//! Two rule sets ([`Rules`]), every violation reported, each naming the key, the rule and the fix:
//! - [`Rules::Google`], what Google Cloud accepts on a resource. Source: Resource Manager,
//!   "Creating and managing labels", Requirements for labels
//!   (<https://cloud.google.com/resource-manager/docs/creating-managing-labels#requirements>): at
//!   most 64 labels a resource; keys 1 to 63 characters, values 0 to 63; only lowercase letters,
//!   numeric characters, underscores and dashes, UTF-8, international characters allowed; keys
//!   start with a lowercase letter or an international character; keys unique on a resource.
//! - [`Rules::OpenShift`], what OpenShift accepts in install-config `platform.gcp.userLabels` and
//!   the Infrastructure's `status.platformStatus.gcp.resourceLabels`: ASCII only, no empty value,
//!   at most 32, two reserved prefixes. Sources: openshift/api `config/v1/types_infrastructure.go`
//!   (`GCPPlatformStatus`, `GCPResourceLabel`, `GCPResourceTag` and their kubebuilder markers),
//!   openshift/installer `pkg/types/gcp/validation/platform.go` (`validateUserLabels`,
//!   `validateUserTags`), and openshift/enhancements `enhancements/api-review/gcp_user_defined_labels.md`.
//!
//! Inferred, not stated by the labels page:
//! - "international characters" and "lowercase": the per-API references state the rule as a regex,
//!   keys `[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}`, values `[\p{Ll}\p{Lo}\p{N}_-]{0,63}`
//!   (Bigtable Admin v2 `Instance.labels`; Backup and DR `LabelKeyValPair`: "a lowercase letter or a
//!   lowercase international character"). So a cased script must be lowercase (`я`, not `Я`), a
//!   script without case is allowed as it is (`東京`, `가`, `ا`), titlecase and modifier letters are
//!   not, and "numeric characters" are any Unicode number (`٣` too), though never first.
//! - "characters" are Unicode code points ("63 characters (Unicode codepoints)", Vision API
//!   `BatchAnnotateFilesRequest.labels`), and since some services also bound the UTF-8 size ("Keys
//!   and values must both be under 128 bytes", Bigtable), Google rules refuse 128 bytes or more,
//!   which only a key or value of many non-ASCII characters reaches.
//!
//! Deliberate deviation (as `policy::validate` reserves CAPA's and CAPZ's namespaces): OpenShift
//! rules also reserve CAPG's `capg-` prefix, whose `capg-cluster-<name>` marks what a Cluster API
//! cluster owns ([`CAPG_PREFIX`]).

use std::fmt;

use serde::Serialize;

mod labels;
mod ownership;
pub mod resources;
mod tags;

pub use labels::{check_label, check_label_key, check_label_value, check_labels};
pub use ownership::{is_ownership_label, ownership_label_key, ownership_label_keys, ownership_label_prefixes};
pub use tags::{check_bindings_fit, check_tag, check_tags, is_tag_key, TagRef};

pub use crate::cluster_kind::OWNED;

/// Labels a resource may carry ("up to a maximum of 64", Requirements for labels).
pub const MAX_LABELS_PER_RESOURCE: usize = 64;
/// User labels OpenShift accepts: openshift/api `GCPPlatformStatus.resourceLabels`
/// `+kubebuilder:validation:MaxItems=32` ("OpenShift reserves 32 labels for internal use"), and
/// the installer's `maxUserLabelLimit = 32`.
pub const OPENSHIFT_MAX_USER_LABELS: usize = 32;
/// Label key length, both rule sets (Google: "maximum length of 63 characters"; openshift/api
/// `GCPResourceLabel.key` `MaxLength=63`).
pub const LABEL_KEY_MAX: usize = 63;
/// Label value length, both rule sets (Google: values "have a maximum length of 63 characters";
/// openshift/api `GCPResourceLabel.value` `MaxLength=63`, `MinLength=1`).
pub const LABEL_VALUE_MAX: usize = 63;
/// UTF-8 size a key or value must stay under on some services (Bigtable: "under 128 bytes").
pub const LABEL_BYTES_LIMIT: usize = 128;
/// Resource Manager tags OpenShift accepts: openshift/api `GCPPlatformStatus.resourceTags`
/// `+kubebuilder:validation:MaxItems=50` ("GCP supports a maximum of 50 tags per resource"), the
/// installer's `maxUserTagLimit = 50`, the enhancement's "A maximum of 50 tags can be configured".
pub const OPENSHIFT_MAX_USER_TAGS: usize = 50;
/// Tag bindings attached directly to one resource (Cloud Storage, "Tags and labels": "a maximum of
/// 50 tag bindings per bucket"; openshift/api: "a maximum of 50 tags per resource"). Inherited
/// bindings are not counted here: they belong to the parent.
pub const MAX_DIRECT_TAG_BINDINGS: usize = 50;
/// Tag key and tag value short names in OpenShift: openshift/api `GCPResourceTag.key` and `.value`
/// `MaxLength=63`. Google's own TagKey short name is "1-63 characters" (Resource Manager v3
/// `TagKey.short_name`), while the tags overview allows tag names of up to 256 characters: the
/// binding names an existing value either way, so OpenShift's 63 is the bound checked.
pub const TAG_SHORT_NAME_MAX: usize = 63;
/// A tag's parent ID: openshift/api `GCPResourceTag.parentID` `MaxLength=32`.
pub const TAG_PARENT_ID_MAX: usize = 32;
/// openshift/api `GCPResourceLabel.key` CEL rule `!self.startsWith('openshift-io') &&
/// !self.startsWith('kubernetes-io')`; installer `userLabelKeyPrefixRegex`.
pub const OPENSHIFT_RESERVED_PREFIXES: &[&str] = &["kubernetes-io", "openshift-io"];
/// The ownership label of an OpenShift cluster, `kubernetes-io-cluster-<infraID>: owned`
/// (installer `pkg/constants/gcp` `ClusterIDLabelFmt = "kubernetes-io-cluster-%s"`; the enhancement:
/// "A label of the form `kubernetes-io-cluster-<cluster_id>:owned` will be added to every resource").
pub const OPENSHIFT_OWNERSHIP_PREFIX: &str = "kubernetes-io-cluster-";
/// CAPG's own prefix, kubernetes-sigs/cluster-api-provider-gcp `api/v1beta1/labels.go`
/// `NameGCPProviderPrefix = "capg-"` (also `capg-role`, `NameGCPClusterAPIRole`).
pub const CAPG_PREFIX: &str = "capg-";
/// CAPG's ownership label, `capg-cluster-<cluster name>: owned` (same file, `NameGCPProviderOwned`,
/// `ClusterTagKey`, written by `Build` on what CAPG creates).
pub const CAPG_OWNERSHIP_PREFIX: &str = "capg-cluster-";
/// Labels Google's own services set and manage (`goog-gke-node`, `goog-managed-by`, …): "Some
/// Google Cloud services … set labels with the prefix `goog-`" (Resource Manager, Creating and
/// managing labels); tagwarden never writes one.
pub const GOOGLE_RESERVED_PREFIX: &str = "goog-";

/// Which rules a label is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rules {
    /// What Google Cloud accepts on any resource.
    Google,
    /// What OpenShift accepts as a user label (stricter: every label it accepts, Google accepts).
    OpenShift,
}

impl Rules {
    /// How many labels a set may hold.
    pub fn max_labels(self) -> usize {
        match self {
            Rules::Google => MAX_LABELS_PER_RESOURCE,
            Rules::OpenShift => OPENSHIFT_MAX_USER_LABELS,
        }
    }
}

/// The rule a label or tag breaks; the names are `policy::validate::Rule`'s where they mean the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    KeyLength,
    ValueLength,
    KeyCharacters,
    ValueCharacters,
    /// What a key must begin (or end) with.
    KeyFormat,
    /// What a tag value must begin and end with.
    ValueFormat,
    ReservedPrefix,
    DuplicateKey,
    TooManyLabels,
    TooManyTags,
    /// A tag's parent is neither an organization ID nor a project ID.
    ParentId,
    /// Not `<parentID>/<key>/<value>`.
    NamespacedName,
    /// A resource's direct tag bindings would exceed [`MAX_DIRECT_TAG_BINDINGS`].
    TooManyBindings,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::KeyLength => "key-length",
            Rule::ValueLength => "value-length",
            Rule::KeyCharacters => "key-characters",
            Rule::ValueCharacters => "value-characters",
            Rule::KeyFormat => "key-format",
            Rule::ValueFormat => "value-format",
            Rule::ReservedPrefix => "reserved-prefix",
            Rule::DuplicateKey => "duplicate-key",
            Rule::TooManyLabels => "too-many-labels",
            Rule::TooManyTags => "too-many-tags",
            Rule::ParentId => "parent-id",
            Rule::NamespacedName => "namespaced-name",
            Rule::TooManyBindings => "too-many-bindings",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule: the key (`*` for a whole set), the rule, and a message naming the fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{message} [{rule}]")]
pub struct Violation {
    pub key: String,
    pub rule: Rule,
    pub message: String,
}

impl Violation {
    pub(super) fn new(key: &str, rule: Rule, message: String) -> Self {
        Violation { key: key.to_string(), rule, message }
    }
}

#[cfg(test)]
mod tests;
