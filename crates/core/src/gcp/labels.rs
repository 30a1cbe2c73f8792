//! Label keys and values: Google's rules and OpenShift's narrower ones.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::*;
use crate::policy::validate::bad_chars;

// Google's classes (inferred from the API references' regex, module docs). The regex crate's
// Unicode tables give the general categories, which std's `char::is_lowercase` does not.
static GOOGLE_BAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^\p{Ll}\p{Lo}\p{N}_-]").expect("static regex"));
static GOOGLE_KEY_FIRST: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[\p{Ll}\p{Lo}]").expect("static regex"));
// openshift/api `GCPResourceLabel`: key `^[a-z][0-9a-z_-]{0,62}$`, value `^[0-9a-z_-]{1,63}$`.
static OPENSHIFT_LABEL_BAD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^0-9a-z_-]").expect("static regex"));
// openshift/api `GCPResourceTag.key` `^[a-zA-Z0-9]([0-9A-Za-z_.-]{0,61}[a-zA-Z0-9])?$`.

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
