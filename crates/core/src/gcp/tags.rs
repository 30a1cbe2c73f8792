//! Resource Manager tags as OpenShift names them, and the direct bindings a resource may hold.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;

use super::*;
use crate::policy::validate::bad_chars;

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

    /// The tag as a policy holds it: one entry of its tag map, the namespaced key to the value's
    /// short name. A label key never holds a `/` (labels' keys are letters, digits, `_` and `-`),
    /// so a tag's entry can never be mistaken for a label's ([`is_tag_key`]).
    pub fn entry(&self) -> (String, String) {
        (self.namespaced_key(), self.value.clone())
    }

    /// The tag a policy entry names: `key` is `<parentID>/<key>`, `value` the value's short name.
    pub fn from_entry(key: &str, value: &str) -> Result<Self, Violation> {
        format!("{key}/{value}").parse().map_err(|mut v: Violation| {
            v.key = key.to_string();
            v
        })
    }
}

/// Whether a policy or resource key names a Resource Manager tag (`<parentID>/<key>`) rather than
/// a label: labels' keys hold no `/`, tags' namespaced keys always one.
pub fn is_tag_key(key: &str) -> bool {
    key.contains('/')
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
