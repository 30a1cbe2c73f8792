//! Google Cloud's label and tag rules, as their sources state them, and the labels that mark what a
//! cluster owns there. Pure and not yet wired in: [`crate::cloud::Cloud`] has no GCP variant.
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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::cloud::ClusterKind;

pub use crate::cloud::OWNED;

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
    fn new(key: &str, rule: Rule, message: String) -> Self {
        Violation { key: key.to_string(), rule, message }
    }
}

// Google's classes (inferred from the API references' regex, module docs). The regex crate's
// Unicode tables give the general categories, which std's `char::is_lowercase` does not.
static GOOGLE_BAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^\p{Ll}\p{Lo}\p{N}_-]").expect("static regex"));
static GOOGLE_KEY_FIRST: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[\p{Ll}\p{Lo}]").expect("static regex"));
// openshift/api `GCPResourceLabel`: key `^[a-z][0-9a-z_-]{0,62}$`, value `^[0-9a-z_-]{1,63}$`.
static OPENSHIFT_LABEL_BAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^0-9a-z_-]").expect("static regex"));
// openshift/api `GCPResourceTag.key` `^[a-zA-Z0-9]([0-9A-Za-z_.-]{0,61}[a-zA-Z0-9])?$`.
static TAG_KEY_BAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^0-9A-Za-z_.-]").expect("static regex"));
// openshift/api `GCPResourceTag.value` `^[a-zA-Z0-9]([0-9A-Za-z_.@%=+:,*#&()\[\]{}\-\s]{0,61}[a-zA-Z0-9])?$`.
// The API server and the installer match with Go's RE2, where `\s` is `[\t\n\f\r ]`, spelled out
// here because Rust's `\s` is Unicode whitespace.
static TAG_VALUE_BAD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[^0-9A-Za-z_.@%=+:,*#&()\[\]{}\-\t\n\x0C\r ]").expect("static regex"));
// openshift/api `GCPResourceTag.parentID` `(^[1-9][0-9]{0,31}$)|(^[a-z][a-z0-9-]{4,28}[a-z0-9]$)`:
// an organization ID, or a project ID (6 to 30 characters).
static TAG_PARENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:[1-9][0-9]{0,31}|[a-z][a-z0-9-]{4,28}[a-z0-9])$").expect("static regex"));

/// Check one label key.
pub fn check_label_key(rules: Rules, key: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let len = key.chars().count();
    if len == 0 || len > LABEL_KEY_MAX {
        out.push(Violation::new(
            key,
            Rule::KeyLength,
            format!("label key {key:?}: must be 1 to {LABEL_KEY_MAX} characters long, is {len}; shorten it"),
        ));
    } else if rules == Rules::Google && key.len() >= LABEL_BYTES_LIMIT {
        out.push(Violation::new(
            key,
            Rule::KeyLength,
            format!(
                "label key {key:?}: is {} bytes in UTF-8, and some services refuse {LABEL_BYTES_LIMIT} or more; \
                 use fewer non-ASCII characters",
                key.len()
            ),
        ));
    }
    let (bad_re, allowed) = match rules {
        Rules::Google => (&*GOOGLE_BAD, GOOGLE_ALLOWED),
        Rules::OpenShift => (&*OPENSHIFT_LABEL_BAD, OPENSHIFT_ALLOWED),
    };
    if let Some(bad) = bad_chars(bad_re, key) {
        out.push(Violation::new(
            key,
            Rule::KeyCharacters,
            format!("label key {key:?}: contains {bad}; allowed are {allowed}{}", lowercase_hint(key)),
        ));
    } else if len > 0 {
        let first_ok = match rules {
            Rules::Google => GOOGLE_KEY_FIRST.is_match(key),
            Rules::OpenShift => key.starts_with(|c: char| c.is_ascii_lowercase()),
        };
        if !first_ok {
            let what = match rules {
                Rules::Google => "a lowercase letter or an international character",
                Rules::OpenShift => "a lowercase letter a-z",
            };
            out.push(Violation::new(
                key,
                Rule::KeyFormat,
                format!("label key {key:?}: must start with {what}, not a digit, _ or -; put a letter first"),
            ));
        }
    }
    if rules == Rules::OpenShift {
        // Case-sensitive as the API's CEL rule; the installer's regex ignores case, which cannot
        // matter here since an uppercase key already breaks key-characters.
        if let Some(p) = OPENSHIFT_RESERVED_PREFIXES.iter().find(|p| key.starts_with(**p)) {
            out.push(Violation::new(
                key,
                Rule::ReservedPrefix,
                format!(
                    "label key {key:?}: keys starting with {p:?} are reserved for OpenShift (its ownership label \
                     is kubernetes-io-cluster-<infraID>); choose a key without that prefix"
                ),
            ));
        } else if key.starts_with(CAPG_PREFIX) {
            out.push(Violation::new(
                key,
                Rule::ReservedPrefix,
                format!(
                    "label key {key:?}: keys starting with {CAPG_PREFIX:?} are reserved for Cluster API's GCP \
                     provider (its ownership label capg-cluster-<name>, and capg-role); choose a key without that prefix"
                ),
            ));
        }
    }
    out
}

/// Check one label value (`key` names it in the messages).
pub fn check_label_value(rules: Rules, key: &str, value: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let len = value.chars().count();
    let min = match rules {
        Rules::Google => 0,
        Rules::OpenShift => 1,
    };
    if len < min || len > LABEL_VALUE_MAX {
        let fix = if len == 0 { "OpenShift refuses an empty value; set one" } else { "shorten it" };
        out.push(Violation::new(
            key,
            Rule::ValueLength,
            format!("label {key:?}: value must be {min} to {LABEL_VALUE_MAX} characters long, is {len}; {fix}"),
        ));
    } else if rules == Rules::Google && value.len() >= LABEL_BYTES_LIMIT {
        out.push(Violation::new(
            key,
            Rule::ValueLength,
            format!(
                "label {key:?}: value is {} bytes in UTF-8, and some services refuse {LABEL_BYTES_LIMIT} or more; \
                 use fewer non-ASCII characters",
                value.len()
            ),
        ));
    }
    let (bad_re, allowed) = match rules {
        Rules::Google => (&*GOOGLE_BAD, GOOGLE_ALLOWED),
        Rules::OpenShift => (&*OPENSHIFT_LABEL_BAD, OPENSHIFT_ALLOWED),
    };
    if let Some(bad) = bad_chars(bad_re, value) {
        out.push(Violation::new(
            key,
            Rule::ValueCharacters,
            format!("label {key:?}: value contains {bad}; allowed are {allowed}{}", lowercase_hint(value)),
        ));
    }
    out
}

/// Check one label.
pub fn check_label(rules: Rules, key: &str, value: &str) -> Vec<Violation> {
    let mut out = check_label_key(rules, key);
    out.extend(check_label_value(rules, key, value));
    out
}

/// Check a label set: every label, each key once (Google: "The key portion of a label must be
/// unique"; openshift/api `+listMapKey=key`), and the set's size against `rules`' limit.
pub fn check_labels<'a>(rules: Rules, labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for (key, value) in labels {
        out.extend(check_label(rules, key, value));
        if !seen.insert(key) {
            out.push(Violation::new(
                key,
                Rule::DuplicateKey,
                format!("label key {key:?}: appears more than once; keep one"),
            ));
        }
    }
    let (n, limit) = (seen.len(), rules.max_labels());
    if n > limit {
        let why = match rules {
            Rules::Google => "Google Cloud's limit per resource",
            Rules::OpenShift => "OpenShift keeps the other 32 of Google Cloud's 64 for its own",
        };
        out.push(Violation::new(
            "*",
            Rule::TooManyLabels,
            format!("{n} labels, at most {limit} are allowed ({why}); remove {}", n - limit),
        ));
    }
    out
}

const GOOGLE_ALLOWED: &str =
    "lowercase letters of any script, letters of scripts without case, digits, _ and - (no uppercase)";
const OPENSHIFT_ALLOWED: &str = "a-z, 0-9, _ and - (ASCII only)";

fn lowercase_hint(s: &str) -> String {
    if s.chars().any(char::is_uppercase) {
        format!(" (lowercased: {:?})", s.to_lowercase())
    } else {
        String::new()
    }
}

/// Describe the characters a rule refuses, e.g. `invalid characters "*", "^"`.
fn bad_chars(re: &Regex, s: &str) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for m in re.find_iter(s) {
        if !seen.contains(&m.as_str()) {
            seen.push(m.as_str());
        }
    }
    if seen.is_empty() {
        return None;
    }
    let shown: Vec<String> = seen.iter().take(5).map(|c| format!("{c:?}")).collect();
    let more = if seen.len() > 5 { format!(" and {} more", seen.len() - 5) } else { String::new() };
    Some(format!("invalid character{} {}{more}", if seen.len() == 1 { "" } else { "s" }, shown.join(", ")))
}

/// A Resource Manager tag as OpenShift names one (openshift/api `GCPResourceTag`): the short names
/// of an existing key and value under an organization or project. Tags are resources of their
/// own: tagwarden only binds existing values and never creates a key or a value (as OpenShift,
/// enhancement: "OpenShift will only create tag bindings and not tag keys or values").
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TagRef {
    #[serde(rename = "parentID")]
    pub parent_id: String,
    pub key: String,
    pub value: String,
}

impl TagRef {
    /// The value's namespaced name, `<parentID>/<key>/<value>` (e.g. `815471563813/color/blue` in
    /// Cloud Storage's "Tags and labels"), which the binding APIs accept.
    pub fn namespaced_value(&self) -> String {
        format!("{}/{}/{}", self.parent_id, self.key, self.value)
    }

    /// The key's namespaced name, `<parentID>/<key>` (Resource Manager v3 `GetNamespacedTagKeyRequest`).
    pub fn namespaced_key(&self) -> String {
        format!("{}/{}", self.parent_id, self.key)
    }
}

impl FromStr for TagRef {
    type Err = Violation;

    /// Parse `<parentID>/<key>/<value>`. No part may hold a `/` (none of OpenShift's patterns
    /// admits one, nor does Google's TagValue short name), so there are exactly three parts; their
    /// contents are [`check_tag`]'s to judge.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('/').collect();
        match parts.as_slice() {
            [parent_id, key, value] => {
                Ok(TagRef { parent_id: parent_id.to_string(), key: key.to_string(), value: value.to_string() })
            }
            _ => Err(Violation::new(
                s,
                Rule::NamespacedName,
                format!(
                    "tag {s:?}: must be <parentID>/<key>/<value> (three parts, no other \"/\"), has {} part{}; \
                     write it as e.g. 123456789012/environment/production",
                    parts.len(),
                    if parts.len() == 1 { "" } else { "s" }
                ),
            )),
        }
    }
}

/// Check one tag against OpenShift's rules (openshift/api `GCPResourceTag`, installer `validateTag`).
pub fn check_tag(tag: &TagRef) -> Vec<Violation> {
    let mut out = Vec::new();
    let name = tag.namespaced_value();
    let mut push = |rule: Rule, message: String| {
        out.push(Violation::new(&tag.key, rule, format!("tag {name:?}: {message}")));
    };
    let p = &tag.parent_id;
    if p.is_empty() || p.chars().count() > TAG_PARENT_ID_MAX || !TAG_PARENT.is_match(p) {
        push(
            Rule::ParentId,
            format!(
                "parentID {p:?} is neither an organization ID (decimal, no leading zero, 1 to 32 digits) nor a \
                 project ID (6 to 30 characters of a-z, 0-9 and -, starting with a letter, not ending with -); use \
                 the ID of the organization or project that defines the tag key"
            ),
        );
    }
    for (what, s, bad_re, allowed, rule_len, rule_chars, rule_format) in [
        (
            "key",
            &tag.key,
            &*TAG_KEY_BAD,
            "A-Z, a-z, 0-9 and . _ -",
            Rule::KeyLength,
            Rule::KeyCharacters,
            Rule::KeyFormat,
        ),
        (
            "value",
            &tag.value,
            &*TAG_VALUE_BAD,
            "A-Z, a-z, 0-9, spaces and . _ - @ % = + : , * # & ( ) [ ] { }",
            Rule::ValueLength,
            Rule::ValueCharacters,
            Rule::ValueFormat,
        ),
    ] {
        let len = s.chars().count();
        if len == 0 || len > TAG_SHORT_NAME_MAX {
            push(
                rule_len,
                format!("{what} must be 1 to {TAG_SHORT_NAME_MAX} characters long, is {len}; use the short name"),
            );
        }
        if let Some(bad) = bad_chars(bad_re, s) {
            push(rule_chars, format!("{what} contains {bad}; allowed are {allowed}"));
        } else if len > 0 {
            let alnum = |c: char| c.is_ascii_alphanumeric();
            if !s.starts_with(alnum) || !s.ends_with(alnum) {
                push(
                    rule_format,
                    format!("{what} must begin and end with an ASCII letter or digit; trim the other characters"),
                );
            }
        }
    }
    out
}

/// Check a tag set: every tag, each key once, at most [`OPENSHIFT_MAX_USER_TAGS`]. Keys are
/// compared by short name alone, as openshift/api's `+listMapKey=key` does: two parents' keys of
/// one short name are one key to OpenShift, though Google would bind both.
pub fn check_tags<'a>(tags: impl IntoIterator<Item = &'a TagRef>) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<&str, &TagRef> = BTreeMap::new();
    for tag in tags {
        out.extend(check_tag(tag));
        if let Some(first) = seen.insert(&tag.key, tag) {
            out.push(Violation::new(
                &tag.key,
                Rule::DuplicateKey,
                format!(
                    "tag {:?}: key {:?} appears again (first as {:?}); a resource takes one value per key, and \
                     OpenShift compares keys by short name only: keep one",
                    tag.namespaced_value(),
                    tag.key,
                    first.namespaced_value()
                ),
            ));
        }
    }
    let n = seen.len();
    if n > OPENSHIFT_MAX_USER_TAGS {
        out.push(Violation::new(
            "*",
            Rule::TooManyTags,
            format!(
                "{n} tags, at most {OPENSHIFT_MAX_USER_TAGS} are allowed (Google Cloud binds at most \
                 {MAX_DIRECT_TAG_BINDINGS} directly to a resource); remove {}",
                n - OPENSHIFT_MAX_USER_TAGS
            ),
        ));
    }
    out
}

/// Whether `adding` new direct bindings fit beside a resource's `direct` ones.
pub fn check_bindings_fit(direct: usize, adding: usize) -> Result<(), Violation> {
    let total = direct.saturating_add(adding);
    if total <= MAX_DIRECT_TAG_BINDINGS {
        return Ok(());
    }
    Err(Violation::new(
        "*",
        Rule::TooManyBindings,
        format!(
            "the resource has {direct} direct tag bindings and {adding} more would make {total}, over Google \
             Cloud's {MAX_DIRECT_TAG_BINDINGS}; remove bindings from the resource or bind the tags on its parent"
        ),
    ))
}

/// The prefixes of the labels that mark a resource as owned (`=owned`) by a cluster of `kind`,
/// the writer's own first.
/// - OpenShift: `kubernetes-io-cluster-` (installer `ClusterIDLabelFmt`); an install through
///   Cluster API also gets CAPG's `capg-cluster-<infraID>`, the installer's GCP cluster manifest
///   setting both, and its destroy code (`capgProviderOwnedLabelFmt`) looking for the latter.
/// - HyperShift: inferred the same as OpenShift (its hosted clusters share the installer's infraID
///   and run on CAPG); its GCP platform was a stub in the source read, so this is unverified.
/// - Cluster API: CAPG's `capg-cluster-` alone (`ClusterTagKey`); CAPG's cloud-provider key
///   (`ClusterGCPCloudProviderTagKey`) is commented out in its source.
pub fn ownership_label_prefixes(kind: ClusterKind) -> &'static [&'static str] {
    match kind {
        ClusterKind::OpenShift | ClusterKind::HyperShift => &[OPENSHIFT_OWNERSHIP_PREFIX, CAPG_OWNERSHIP_PREFIX],
        ClusterKind::ClusterApi => &[CAPG_OWNERSHIP_PREFIX],
    }
}

/// The label key by which a cluster of `kind` marks what it owns: `kubernetes-io-cluster-<infraID>`
/// (OpenShift, HyperShift) or `capg-cluster-<name>` (Cluster API). An error if the key would not
/// be a valid label key (an uppercase or too long ID), naming the ID.
pub fn ownership_label_key(infra_id: &str, kind: ClusterKind) -> Result<String, Violation> {
    let prefix = ownership_label_prefixes(kind)[0];
    owned_key(prefix, infra_id)
}

/// Every label key that marks a resource as owned by cluster `infra_id` of `kind`.
pub fn ownership_label_keys(infra_id: &str, kind: ClusterKind) -> Result<Vec<String>, Violation> {
    ownership_label_prefixes(kind).iter().map(|p| owned_key(p, infra_id)).collect()
}

/// True for any cluster's ownership label, whoever provisioned it: tagwarden never writes one.
pub fn is_ownership_label(key: &str) -> bool {
    [OPENSHIFT_OWNERSHIP_PREFIX, CAPG_OWNERSHIP_PREFIX].iter().any(|p| key.starts_with(p))
}

fn owned_key(prefix: &str, infra_id: &str) -> Result<String, Violation> {
    let key = format!("{prefix}{infra_id}");
    match check_label_key(Rules::Google, &key).into_iter().next() {
        None if !infra_id.is_empty() => Ok(key),
        None => Err(Violation::new(&key, Rule::KeyLength, "the cluster's infraID is empty".to_string())),
        Some(v) => Err(Violation {
            message: format!("ownership label for infraID {infra_id:?} is not a valid label key: {}", v.message),
            ..v
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(r: Rules, k: &str, v: &str) -> Vec<Rule> {
        check_label(r, k, v).into_iter().map(|v| v.rule).collect()
    }

    fn tag_rules(s: &str) -> Vec<Rule> {
        match s.parse::<TagRef>() {
            Ok(t) => check_tag(&t).into_iter().map(|v| v.rule).collect(),
            Err(v) => vec![v.rule],
        }
    }

    /// openshift/installer `TestValidateUserLabels`, row by row, under OpenShift's rules.
    #[test]
    fn openshift_installer_label_table() {
        let ok = [
            ("key1", "value1"),
            ("key_2", "value_2"),
            ("key-3", "value-3"),
            ("key4_", "value4_"),
            ("key5-", "value5-"),
        ];
        assert!(check_labels(Rules::OpenShift, ok).is_empty());
        assert_eq!(rules(Rules::OpenShift, "1key", "1value"), [Rule::KeyFormat]);
        assert_eq!(rules(Rules::OpenShift, "Key", "1value"), [Rule::KeyCharacters]);
        assert_eq!(rules(Rules::OpenShift, "", "value"), [Rule::KeyLength]);
        let long_key = "thisisaverylongkeywithmorethan63characterswhichisnotallowedforgcpresourcelabelkey";
        assert_eq!(rules(Rules::OpenShift, long_key, "value"), [Rule::KeyLength]);
        assert_eq!(rules(Rules::OpenShift, "key/test", "value"), [Rule::KeyCharacters]);
        let long_value = "thisisaverylongvaluewithmorethan63characterswhichisnotallowedforgcpresourcelabelvalue";
        assert_eq!(rules(Rules::OpenShift, "key", long_value), [Rule::ValueLength]);
        assert_eq!(rules(Rules::OpenShift, "key", ""), [Rule::ValueLength]);
        assert_eq!(rules(Rules::OpenShift, "key", "value*^%"), [Rule::ValueCharacters]);
        assert_eq!(rules(Rules::OpenShift, "kubernetes-io_cluster", "value"), [Rule::ReservedPrefix]);
        assert!(rules(Rules::OpenShift, "for_openshift-io", "gcp").is_empty());
        assert_eq!(rules(Rules::OpenShift, "openshift-io-x", "v"), [Rule::ReservedPrefix]);
        // The installer's 33-label row: too many, naming the limit.
        let keys: Vec<String> = (1..=33).map(|i| format!("key{i}")).collect();
        let v = check_labels(Rules::OpenShift, keys.iter().map(|k| (k.as_str(), "value")));
        assert_eq!(v.iter().map(|v| v.rule).collect::<Vec<_>>(), [Rule::TooManyLabels]);
        assert!(v[0].message.contains("33 labels, at most 32"), "{}", v[0].message);
        // Single-character keys: the API's `{0,62}` (an older installer had `{1,62}`).
        assert!(rules(Rules::OpenShift, "a", "b").is_empty());
    }

    /// Google's own requirements, and the inferred reading of "international characters".
    #[test]
    fn google_label_requirements() {
        // The labels page's examples (team:research, environment:production, component:redis …).
        for (k, v) in
            [("team", "research"), ("environment", "production"), ("component", "redis"), ("state", "readytodelete")]
        {
            assert!(rules(Rules::Google, k, v).is_empty(), "{k}");
        }
        assert!(rules(Rules::Google, "key", "").is_empty(), "values can be empty");
        assert_eq!(rules(Rules::Google, "", "v"), [Rule::KeyLength]);
        assert_eq!(rules(Rules::Google, &"k".repeat(64), "v"), [Rule::KeyLength]);
        assert_eq!(rules(Rules::Google, "k", &"v".repeat(64)), [Rule::ValueLength]);
        assert!(rules(Rules::Google, &"k".repeat(63), &"v".repeat(63)).is_empty());
        assert_eq!(rules(Rules::Google, "Key", "v"), [Rule::KeyCharacters]);
        assert_eq!(rules(Rules::Google, "k", "Value"), [Rule::ValueCharacters]);
        assert_eq!(rules(Rules::Google, "1key", "v"), [Rule::KeyFormat]);
        assert_eq!(rules(Rules::Google, "_key", "v"), [Rule::KeyFormat]);
        assert_eq!(rules(Rules::Google, "-key", "v"), [Rule::KeyFormat]);
        assert_eq!(rules(Rules::Google, "k.y", "v"), [Rule::KeyCharacters]);
        assert_eq!(rules(Rules::Google, "k", "a b"), [Rule::ValueCharacters]);
        // Cased scripts lowercase only; caseless scripts as they are; any Unicode digit, not first.
        for k in ["ключ", "clé", "straße", "ωμέγα", "東京", "かぎ", "가나", "مفتاح", "東京-1_٣"]
        {
            assert!(rules(Rules::Google, k, k).is_empty(), "{k}");
        }
        for k in ["Ключ", "Clé", "ΩΜΈΓΑ", "ǅx"] {
            assert_eq!(rules(Rules::Google, k, "v"), [Rule::KeyCharacters], "{k}");
        }
        assert_eq!(rules(Rules::Google, "٣abc", "v"), [Rule::KeyFormat], "a digit of any script is not first");
        assert_eq!(rules(Rules::Google, "ʰx", "v"), [Rule::KeyCharacters], "modifier letters are not Ll or Lo");
        // A consequence of that reading, unverified against the API: the katakana long-vowel mark
        // is a modifier letter (Lm), so "キー" is refused though "キ" is not.
        assert_eq!(rules(Rules::Google, "キー", "v"), [Rule::KeyCharacters]);
        assert!(rules(Rules::Google, "キ", "v").is_empty());
        // Lengths count code points; 128 UTF-8 bytes or more is refused.
        assert!(rules(Rules::Google, &"東".repeat(42), "v").is_empty(), "126 bytes");
        assert_eq!(rules(Rules::Google, &"東".repeat(43), "v"), [Rule::KeyLength], "129 bytes");
        assert_eq!(rules(Rules::Google, "k", &"東".repeat(43)), [Rule::ValueLength]);
        // OpenShift refuses all of these: ASCII only.
        assert_eq!(rules(Rules::OpenShift, "ключ", "v"), [Rule::KeyCharacters]);
        // Keys are unique; at most 64.
        let v = check_labels(Rules::Google, [("a", "1"), ("b", "2"), ("a", "3")]);
        assert_eq!(v.iter().map(|v| (v.rule, v.key.as_str())).collect::<Vec<_>>(), [(Rule::DuplicateKey, "a")]);
        let keys: Vec<String> = (0..65).map(|i| format!("k{i}")).collect();
        assert!(check_labels(Rules::Google, keys[..64].iter().map(|k| (k.as_str(), ""))).is_empty());
        let v = check_labels(Rules::Google, keys.iter().map(|k| (k.as_str(), "")));
        assert_eq!(v.len(), 1);
        assert!(v[0].rule == Rule::TooManyLabels && v[0].message.contains("at most 64"), "{}", v[0].message);
        // Google reserves no prefix; OpenShift's rules reserve its own and CAPG's.
        assert!(rules(Rules::Google, "kubernetes-io-cluster-x", "owned").is_empty());
        assert_eq!(rules(Rules::OpenShift, "capg-role", "node"), [Rule::ReservedPrefix]);
    }

    #[test]
    fn messages_name_the_key_the_rule_and_the_fix() {
        let v = check_label(Rules::Google, "Team", "x");
        assert_eq!(v.len(), 1);
        let shown = v[0].to_string();
        for part in ["\"Team\"", "invalid character \"T\"", "lowercased: \"team\"", "[key-characters]"] {
            assert!(shown.contains(part), "{part:?} missing in {shown}");
        }
        let v = check_label(Rules::OpenShift, "kubernetes-io-cluster-x", "owned");
        assert!(v[0].message.contains("choose a key") && v[0].to_string().ends_with("[reserved-prefix]"));
        let v = check_label(Rules::OpenShift, "capg-cluster-x", "owned");
        assert!(v[0].message.contains("Cluster API"), "{}", v[0].message);
        assert_eq!(serde_json::to_value(Rule::TooManyLabels).ok(), Some(serde_json::json!("too-many-labels")));
        assert_eq!(Rule::ParentId.to_string(), "parent-id");
    }

    /// openshift/api `GCPResourceTag` patterns, with namespaced names from Google's pages.
    #[test]
    fn openshift_tag_rules() {
        // Cloud Storage "Tags and labels": 815471563813/color/blue; DLP `Tag.namespaced_tag_value`:
        // 123456/environment/prod and my-project/environment/prod.
        for s in ["815471563813/color/blue", "123456/environment/prod", "my-project/environment/prod"] {
            assert!(tag_rules(s).is_empty(), "{s}");
        }
        let t: TagRef = "815471563813/color/blue".parse().expect("parses");
        assert_eq!(
            (t.namespaced_key(), t.namespaced_value()),
            ("815471563813/color".into(), "815471563813/color/blue".into())
        );
        // Parent IDs: no leading zero, at most 32 digits; project IDs 6 to 30 characters, so the
        // `r2-d2` of Google's GetNamespacedTagKeyRequest example is too short for OpenShift.
        let (long_org, long_project) = ("1".repeat(33), format!("a{}", "b".repeat(30)));
        for p in
            ["0123", "r2-d2", "my-project-", "1project", "My-project", "", long_org.as_str(), long_project.as_str()]
        {
            assert_eq!(tag_rules(&format!("{p}/env/prod")), [Rule::ParentId], "{p:?}");
        }
        assert!(tag_rules(&format!("{}/env/prod", "1".repeat(32))).is_empty());
        assert!(tag_rules(&format!("a{}/env/prod", "b".repeat(29))).is_empty(), "30 characters");
        // Keys: begin and end alphanumeric, `._-` between, 1 to 63.
        assert!(tag_rules("123/A.b_c-D/v").is_empty());
        assert!(tag_rules("123/k/v").is_empty());
        assert_eq!(tag_rules("123/-env/v"), [Rule::KeyFormat]);
        assert_eq!(tag_rules("123/env./v"), [Rule::KeyFormat]);
        assert_eq!(tag_rules("123/env@x/v"), [Rule::KeyCharacters]);
        assert_eq!(tag_rules("123//v"), [Rule::KeyLength]);
        assert_eq!(tag_rules(&format!("123/{}/v", "k".repeat(64))), [Rule::KeyLength]);
        // Values: the enhancement's special characters and spaces between, alphanumeric at the ends.
        assert!(tag_rules("123/k/a b_c-d.e@f%g=h+i:j,k*l#m&n(o)p[q]r{s}t").is_empty());
        assert_eq!(tag_rules("123/k/ prod"), [Rule::ValueFormat]);
        assert_eq!(tag_rules("123/k/prod!"), [Rule::ValueCharacters]);
        assert_eq!(tag_rules("123/k/"), [Rule::ValueLength]);
        assert_eq!(tag_rules("123/k/a\u{a0}b"), [Rule::ValueCharacters], "RE2's \\s is ASCII");
        // Not three parts.
        assert_eq!(tag_rules("123/env"), [Rule::NamespacedName]);
        assert_eq!(tag_rules("123/env/a/b"), [Rule::NamespacedName]);
        let e = "123/env".parse::<TagRef>().expect_err("two parts");
        assert!(e.message.contains("<parentID>/<key>/<value>"), "{}", e.message);
    }

    #[test]
    fn tag_sets_and_bindings() {
        let a: TagRef = "123/env/prod".parse().expect("parses");
        let b: TagRef = "my-project/env/dev".parse().expect("parses");
        let v = check_tags([&a, &b]);
        assert_eq!(v.iter().map(|v| (v.rule, v.key.as_str())).collect::<Vec<_>>(), [(Rule::DuplicateKey, "env")]);
        assert!(v[0].message.contains("123/env/prod"), "{}", v[0].message);
        let many: Vec<TagRef> =
            (0..51).map(|i| TagRef { parent_id: "123".into(), key: format!("k{i}"), value: "v".into() }).collect();
        assert!(check_tags(&many[..50]).is_empty());
        let v = check_tags(&many);
        assert_eq!(v.iter().map(|v| v.rule).collect::<Vec<_>>(), [Rule::TooManyTags]);
        assert!(v[0].message.contains("at most 50"), "{}", v[0].message);
        assert_eq!(check_bindings_fit(45, 5), Ok(()));
        let e = check_bindings_fit(45, 6).expect_err("51");
        assert!(e.rule == Rule::TooManyBindings && e.message.contains("over Google Cloud's 50"), "{}", e.message);
        assert!(check_bindings_fit(usize::MAX, 1).is_err(), "no overflow");
    }

    #[test]
    fn ownership_labels() {
        let id = "mycluster-7xk2p";
        assert_eq!(
            ownership_label_key(id, ClusterKind::OpenShift).ok().as_deref(),
            Some("kubernetes-io-cluster-mycluster-7xk2p")
        );
        assert_eq!(
            ownership_label_key(id, ClusterKind::HyperShift).ok().as_deref(),
            Some("kubernetes-io-cluster-mycluster-7xk2p")
        );
        assert_eq!(
            ownership_label_keys(id, ClusterKind::OpenShift).ok(),
            Some(vec!["kubernetes-io-cluster-mycluster-7xk2p".to_string(), "capg-cluster-mycluster-7xk2p".to_string()])
        );
        // CAPG's own test fixture labels a machine `capg-cluster-my-cluster: owned`.
        assert_eq!(
            ownership_label_key("my-cluster", ClusterKind::ClusterApi).ok().as_deref(),
            Some("capg-cluster-my-cluster")
        );
        // Every ownership key is a valid label key, reserved under OpenShift's rules, and recognised.
        for kind in [ClusterKind::OpenShift, ClusterKind::HyperShift, ClusterKind::ClusterApi] {
            for k in ownership_label_keys(id, kind).unwrap_or_default() {
                assert!(check_label(Rules::Google, &k, OWNED).is_empty(), "{k}");
                assert_eq!(rules(Rules::OpenShift, &k, OWNED), [Rule::ReservedPrefix], "{k}");
                assert!(is_ownership_label(&k), "{k}");
            }
        }
        assert!(!is_ownership_label("team") && !is_ownership_label("kubernetes-io-other"));
        // An ID that cannot make a label key is an error naming it, not a bad write later.
        let e = ownership_label_key("MyCluster", ClusterKind::OpenShift).expect_err("uppercase");
        assert!(e.rule == Rule::KeyCharacters && e.message.contains("\"MyCluster\""), "{}", e.message);
        let e = ownership_label_key(&"x".repeat(42), ClusterKind::OpenShift).expect_err("64 characters");
        assert_eq!(e.rule, Rule::KeyLength);
        assert!(ownership_label_key("", ClusterKind::OpenShift).is_err());
    }

    const FIRST: &[char] = &['a', 'm', 'z', 'é', 'ß', 'я', 'ω', '東', 'キ', '가', 'ا'];
    const REST: &[char] = &['a', 'b', 'c', 'k', 'q', 'x', 'z', '0', '1', '5', '9', '_', '-', 'é', 'я', '東', '가', '٣'];
    const ASCII_FIRST: &[char] = &['a', 'b', 'k', 'o', 'q', 'z'];
    const ASCII_REST: &[char] = &['a', 'e', 'k', 'o', 's', 'z', '0', '4', '9', '_', '-'];

    fn chars(set: &'static [char], n: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(set), n).prop_map(|v| v.into_iter().collect())
    }

    fn google_key() -> impl Strategy<Value = String> {
        (proptest::sample::select(FIRST), chars(REST, 0..=62))
            .prop_map(|(f, r)| format!("{f}{r}"))
            .prop_filter("under 128 bytes", |s| s.len() < LABEL_BYTES_LIMIT)
    }

    fn google_value() -> impl Strategy<Value = String> {
        chars(REST, 0..=63).prop_filter("under 128 bytes", |s| s.len() < LABEL_BYTES_LIMIT)
    }

    fn openshift_key() -> impl Strategy<Value = String> {
        (proptest::sample::select(ASCII_FIRST), chars(ASCII_REST, 0..=62))
            .prop_map(|(f, r)| format!("{f}{r}"))
            .prop_filter("not reserved", |k| {
                !OPENSHIFT_RESERVED_PREFIXES.iter().chain([&CAPG_PREFIX]).any(|p| k.starts_with(p))
            })
    }

    proptest! {
        #[test]
        fn every_generated_google_label_passes(k in google_key(), v in google_value()) {
            prop_assert!(check_label(Rules::Google, &k, &v).is_empty(), "{:?}={:?}", k, v);
        }

        /// OpenShift's rules are stricter: what they accept, Google accepts.
        #[test]
        fn every_generated_openshift_label_passes_both(k in openshift_key(), v in chars(ASCII_REST, 1..=63)) {
            prop_assert!(check_label(Rules::OpenShift, &k, &v).is_empty(), "{:?}={:?}", k, v);
            prop_assert!(check_label(Rules::Google, &k, &v).is_empty(), "{:?}={:?}", k, v);
        }

        #[test]
        fn a_key_over_63_characters_fails(k in chars(REST, 64..=100)) {
            for r in [Rules::Google, Rules::OpenShift] {
                prop_assert!(check_label_key(r, &k).iter().any(|v| v.rule == Rule::KeyLength), "{:?}", k);
            }
        }

        #[test]
        fn a_key_starting_with_a_digit_fails(d in 0u32..10, rest in chars(ASCII_REST, 0..=62)) {
            let k = format!("{d}{rest}");
            for r in [Rules::Google, Rules::OpenShift] {
                let v = check_label_key(r, &k);
                prop_assert!(v.iter().any(|v| v.rule == Rule::KeyFormat), "{:?}: {:?}", k, v);
            }
        }

        #[test]
        fn a_set_over_the_limit_fails_naming_it(extra in 0usize..20, google in any::<bool>()) {
            let r = if google { Rules::Google } else { Rules::OpenShift };
            let limit = r.max_labels();
            let keys: Vec<String> = (0..=limit + extra).map(|i| format!("key{i}")).collect();
            let v = check_labels(r, keys.iter().map(|k| (k.as_str(), "v")));
            prop_assert_eq!(v.len(), 1);
            prop_assert_eq!(v[0].rule, Rule::TooManyLabels);
            let at_most = format!("at most {limit}");
            prop_assert!(v[0].message.contains(&at_most), "{}", v[0].message);
            prop_assert!(check_labels(r, keys[..limit].iter().map(|k| (k.as_str(), "v"))).is_empty());
        }

        #[test]
        fn generated_tags_pass_and_round_trip(
            org in 1u64..u64::MAX,
            key in (proptest::sample::select(ASCII_FIRST), chars(ASCII_FIRST, 0..=61)).prop_map(|(a, b)| format!("{a}{b}")),
            value in (chars(ASCII_FIRST, 1..=1), chars(&['a', ' ', '@', '(', ']', '.'], 0..=61), chars(ASCII_FIRST, 1..=1))
                .prop_map(|(a, b, c)| format!("{a}{b}{c}")),
        ) {
            let t = TagRef { parent_id: org.to_string(), key, value };
            prop_assert!(check_tag(&t).is_empty(), "{:?}", t);
            prop_assert_eq!(t.namespaced_value().parse::<TagRef>().ok(), Some(t));
        }
    }
}
