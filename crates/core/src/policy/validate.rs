//! The exact tag rules of docs/src/lookup/policy.md, for AWS and Azure.
//!
//! Every violation is reported, not only the first, each naming the key, the rule and the limit.
//! Deliberate deviations from OpenShift's installer (see README, "Deviations"): `+-@` are three
//! literal characters, not the accidental `+`..`@` range; lengths count characters, not bytes;
//! AWS's own `aws:` prefix is reserved; the `kubernetes.io/` and `openshift.io/` namespaces are
//! reserved in any case (IAM compares tag keys case-insensitively); and on AWS so is `k8s.io/`,
//! which the function's role may not write either (infra/aws/iam.tf, DenyReservedTagKeys).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::cloud::{starts_with_ignore_case, Cloud};
use crate::policy::{Policy, Tag};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    KeyLength,
    ValueLength,
    KeyCharacters,
    ValueCharacters,
    KeyFormat,
    ReservedKey,
    ReservedPrefix,
    DuplicateKey,
    TooManyTags,
    /// A `neverYield` key the policy does not manage.
    UnmanagedNeverYield,
    /// An `auditKeys` key the policy does not manage.
    UnmanagedAuditKey,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned));
        f.write_str(s.as_deref().unwrap_or("?"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The offending key; `*` for a rule about a whole tag set.
    pub key: String,
    pub rule: Rule,
    pub message: String,
    /// Where the tag came from: `status`, `spec`, `override[N]`, with the document when layered.
    pub source: String,
}

const AWS_KEY_MAX: usize = 128;
const AWS_VALUE_MAX: usize = 256;
const AZURE_KEY_MAX: usize = 128;
const AZURE_VALUE_MAX: usize = 256;

// Letters and digits are ASCII only, as in the installer; separators are Unicode category Z.
static AWS_BAD_CHAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[^0-9A-Za-z_.:/=+\-@\p{Z}]").expect("static regex"));
// Case-insensitive, unlike the installer's regexes: IAM compares tag keys case-insensitively, so on
// a role `Kubernetes.io/cluster/<infraID>` *is* the ownership tag (a deliberate deviation, README).
static AWS_RESERVED_NS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^([^/]*\.)?(kubernetes|openshift|k8s)\.io/").expect("static regex"));
static AZURE_KEY_BAD_CHAR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^0-9A-Za-z_.\-]").expect("static regex"));
static AZURE_VALUE_BAD_CHAR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[^0-9A-Za-z_.=+\-@,/:;<>?]").expect("static regex"));
const AZURE_RESERVED_PREFIXES: &[&str] = &["kubernetes.io", "openshift.io", "microsoft", "azure", "windows"];

/// Check one tag against the cloud's rules.
/// Whether `key` lies in the `k8s.io/` namespace (or a subdomain's), in any case: other
/// controllers' working tags, which the function's AWS role may not write (the loader refuses
/// them on AWS; a cluster's translator leaves them out of its document, naming them).
pub fn is_k8s_io_key(key: &str) -> bool {
    AWS_RESERVED_NS.captures(key).and_then(|m| m.get(2)).is_some_and(|ns| ns.as_str().eq_ignore_ascii_case("k8s"))
}

pub fn check_tag(cloud: Cloud, key: &str, value: &str, source: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut push = |rule: Rule, message: String| {
        out.push(Violation {
            key: key.to_string(),
            rule,
            message: format!("tag {key:?} ({source}): {message}"),
            source: source.to_string(),
        })
    };
    // On Google Cloud a `<parentID>/<key>` key is a Resource Manager tag, judged by OpenShift's
    // tag rules (`crate::gcp::check_tag`), not a label.
    if cloud == Cloud::Gcp && crate::gcp::is_tag_key(key) {
        let found = match crate::gcp::TagRef::from_entry(key, value) {
            Ok(tag) => crate::gcp::check_tag(&tag),
            Err(v) => vec![v],
        };
        for v in found {
            push(from_gcp(v.rule), v.message);
        }
        return out;
    }
    let (key_max, value_max) = match cloud {
        Cloud::Aws => (AWS_KEY_MAX, AWS_VALUE_MAX),
        Cloud::Azure => (AZURE_KEY_MAX, AZURE_VALUE_MAX),
        Cloud::Gcp => (crate::gcp::LABEL_KEY_MAX, crate::gcp::LABEL_VALUE_MAX),
    };
    let key_len = key.chars().count();
    if key_len == 0 || key_len > key_max {
        push(Rule::KeyLength, format!("key must be 1 to {key_max} characters long, is {key_len}"));
    }
    let value_len = value.chars().count();
    if value_len == 0 || value_len > value_max {
        push(Rule::ValueLength, format!("value must be 1 to {value_max} characters long, is {value_len}"));
    }
    match cloud {
        Cloud::Aws => {
            if let Some(bad) = bad_chars(&AWS_BAD_CHAR, key) {
                push(
                    Rule::KeyCharacters,
                    format!("key contains {bad}; allowed are ASCII letters and digits, spaces and _ . : / = + - @"),
                );
            }
            if let Some(bad) = bad_chars(&AWS_BAD_CHAR, value) {
                push(
                    Rule::ValueCharacters,
                    format!("value contains {bad}; allowed are ASCII letters and digits, spaces and _ . : / = + - @"),
                );
            }
            if key.eq_ignore_ascii_case("name") {
                push(
                    Rule::ReservedKey,
                    "the key \"Name\" (any case) is reserved for the resource's own name; remove the tag or \
                     choose another key"
                        .to_string(),
                );
            }
            if starts_with_ignore_case(key, "aws:") {
                push(
                    Rule::ReservedPrefix,
                    "keys starting with \"aws:\" (any case) are reserved by AWS; remove the tag or choose a key \
                     without that prefix"
                        .to_string(),
                );
            }
            let cluster_api = reserve_cluster_api(cloud, key, &mut push);
            if let Some(m) = AWS_RESERVED_NS.captures(key).filter(|_| !cluster_api) {
                let ns = m.get(2).map_or(String::new(), |g| g.as_str().to_ascii_lowercase());
                // k8s.io/ holds other controllers' working tags (the cluster autoscaler discovers
                // node groups by `k8s.io/cluster-autoscaler/enabled`): writing one on every owned
                // resource would change what they manage, so the role's DenyReservedTagKeys
                // refuses it, and a write carrying it would fail whole (ForAnyValue).
                let why = if ns == "k8s" {
                    "are reserved for Kubernetes controllers' own tags (e.g. the cluster autoscaler's \
                     k8s.io/cluster-autoscaler/...), which tagwarden's role may not write"
                } else {
                    "are reserved for the cluster and its ownership tag"
                };
                push(
                    Rule::ReservedPrefix,
                    format!(
                        "keys in the {ns}.io/ namespace (including its subdomains, in any case: IAM compares tag \
                         keys case-insensitively) {why}; remove the tag or choose a key outside that namespace"
                    ),
                );
            }
        }
        Cloud::Azure => {
            if let Some(bad) = bad_chars(&AZURE_KEY_BAD_CHAR, key) {
                push(
                    Rule::KeyCharacters,
                    format!("key contains {bad}; allowed are ASCII letters and digits and _ . -"),
                );
            } else if key_len > 0 {
                let first_ok = key.starts_with(|c: char| c.is_ascii_alphabetic());
                let last_ok = key.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
                if !first_ok || !last_ok {
                    push(
                        Rule::KeyFormat,
                        "key must begin with a letter and end with a letter, digit or underscore".to_string(),
                    );
                }
            }
            if let Some(bad) = bad_chars(&AZURE_VALUE_BAD_CHAR, value) {
                push(
                    Rule::ValueCharacters,
                    format!("value contains {bad}; allowed are ASCII letters and digits and _ . = + - @ , / : ; < > ?"),
                );
            }
            if key.eq_ignore_ascii_case("name") {
                push(Rule::ReservedKey, "the key \"name\" (any case) is reserved; choose another key".to_string());
            }
            let _ = reserve_cluster_api(cloud, key, &mut push);
            if let Some(p) = AZURE_RESERVED_PREFIXES.iter().find(|p| starts_with_ignore_case(key, p)) {
                push(
                    Rule::ReservedPrefix,
                    format!("keys starting with {p:?} (any case) are reserved; choose a key without that prefix"),
                );
            }
        }
        // A policy's labels are OpenShift's user labels (`crate::gcp`: ASCII lowercase, the
        // reserved `kubernetes-io`/`openshift-io` prefixes and CAPG's `capg-`); lengths are
        // checked above, so only the other rules are taken from there.
        Cloud::Gcp => {
            use crate::gcp::Rule as G;
            for v in crate::gcp::check_label(crate::gcp::Rules::OpenShift, key, value) {
                if !matches!(v.rule, G::KeyLength | G::ValueLength) {
                    push(from_gcp(v.rule), v.message);
                }
            }
            if key.starts_with(crate::gcp::GOOGLE_RESERVED_PREFIX) {
                push(
                    Rule::ReservedPrefix,
                    "keys starting with \"goog-\" are set by Google Cloud's own services; choose another key"
                        .to_string(),
                );
            }
        }
    }
    out
}

/// The policy rule a Google Cloud label or tag rule is reported as.
fn from_gcp(rule: crate::gcp::Rule) -> Rule {
    use crate::gcp::Rule as G;
    match rule {
        G::KeyLength => Rule::KeyLength,
        G::ValueLength => Rule::ValueLength,
        G::KeyCharacters => Rule::KeyCharacters,
        G::ValueCharacters | G::ValueFormat => Rule::ValueCharacters,
        G::ReservedPrefix => Rule::ReservedPrefix,
        G::DuplicateKey => Rule::DuplicateKey,
        G::TooManyLabels | G::TooManyTags | G::TooManyBindings => Rule::TooManyTags,
        G::KeyFormat | G::ParentId | G::NamespacedName => Rule::KeyFormat,
    }
}

/// Cluster API's ownership namespace for `cloud` (and so HyperShift's: `Cloud::cluster_api_namespace`
/// cites the providers' sources) is reserved as the ownership tag is, in any case: a user tag
/// there would claim or disown a resource for a CAPA/CAPZ cluster. Whether it was.
fn reserve_cluster_api(cloud: Cloud, key: &str, push: &mut impl FnMut(Rule, String)) -> bool {
    let ns = cloud.cluster_api_namespace();
    let reserved = starts_with_ignore_case(key, ns);
    if reserved {
        push(
            Rule::ReservedPrefix,
            format!(
                "keys starting with {ns:?} (any case) are reserved for Cluster API's ownership and role tags \
                 (also HyperShift's); remove the tag or choose a key outside that namespace"
            ),
        );
    }
    reserved
}

/// Describe the characters a rule rejects, e.g. `"*" and "#"`.
pub(crate) fn bad_chars(re: &Regex, s: &str) -> Option<String> {
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

/// Validate a whole policy for `cloud`: every tag, duplicates within one document, and the
/// user-tag limit for the cluster-wide tags and for each override combined with them.
pub fn policy(policy: &Policy, cloud: Cloud) -> Vec<Violation> {
    let mut out = Vec::new();
    let limit = policy.limits.user_tags.unwrap_or_else(|| cloud.default_user_tag_limit());

    let mut check_layer = |tags: &[Tag], label: &dyn Fn(&Tag) -> String| {
        for t in tags {
            out.extend(check_tag(cloud, &t.key, &t.value, &label(t)));
        }
        // Duplicates are only an error inside one document; across documents, later wins.
        let mut seen: BTreeMap<(usize, String), &str> = BTreeMap::new();
        for t in tags {
            let norm = normalise_key(cloud, &t.key);
            if let Some(first) = seen.insert((t.doc, norm), &t.key) {
                let how = if first == t.key {
                    "more than once".to_string()
                } else {
                    format!("again as {first:?} (tag keys are case-insensitive on Azure)")
                };
                out.push(Violation {
                    key: t.key.clone(),
                    rule: Rule::DuplicateKey,
                    message: format!("tag {:?} ({}): key appears {how}", t.key, label(t)),
                    source: label(t),
                });
            }
        }
    };
    check_layer(&policy.status, &|t| policy.label("status", t.doc));
    check_layer(&policy.spec, &|t| policy.label("spec", t.doc));
    for (i, o) in policy.overrides.iter().enumerate() {
        check_layer(&o.tags, &|_| policy.label(&o.label(i), o.doc));
    }

    // `neverYield` and `auditKeys` name keys the policy manages: anything else is a typo that
    // would protect (or audit) nothing.
    let lists = [
        (&policy.never_yield, "neverYield", Rule::UnmanagedNeverYield, "protect"),
        (&policy.audit_keys, "auditKeys", Rule::UnmanagedAuditKey, "audit"),
    ];
    for (keys, field, rule, what) in lists {
        for key in keys {
            let mut managed =
                policy.status.iter().chain(&policy.spec).chain(policy.overrides.iter().flat_map(|o| &o.tags));
            let norm = normalise_key(cloud, key);
            if !managed.any(|t| normalise_key(cloud, &t.key) == norm) {
                out.push(Violation {
                    key: key.clone(),
                    rule,
                    message: format!(
                        "{field} names {key:?}, which the policy does not manage, so it would {what} nothing: list only keys under tags or an override's tags"
                    ),
                    source: field.to_string(),
                });
            }
        }
    }

    // On Google Cloud the labels and the Resource Manager tags are two sets with their own limits
    // (OpenShift: 32 labels, 50 tags, `crate::gcp`).
    let count = |tags: &mut dyn Iterator<Item = &Tag>| -> [usize; 2] {
        let (labels, gcp_tags): (Vec<&Tag>, Vec<&Tag>) =
            tags.partition(|t| cloud != Cloud::Gcp || !crate::gcp::is_tag_key(&t.key));
        [distinct_keys(cloud, labels.into_iter()), distinct_keys(cloud, gcp_tags.into_iter())]
    };
    let limits = [(limit, "user tags"), (crate::gcp::OPENSHIFT_MAX_USER_TAGS, "Resource Manager tags")];
    let mut check = |source: &str, counted: [usize; 2]| {
        for (n, (limit, what)) in counted.into_iter().zip(limits) {
            if n > limit {
                out.push(too_many(source, n, limit, what));
            }
        }
    };
    check("status+spec", count(&mut policy.status.iter().chain(&policy.spec)));
    for (i, o) in policy.overrides.iter().enumerate() {
        check(&o.label(i), count(&mut policy.status.iter().chain(&policy.spec).chain(&o.tags)));
    }
    out
}

fn too_many(source: &str, n: usize, limit: usize, what: &str) -> Violation {
    Violation {
        key: "*".to_string(),
        rule: Rule::TooManyTags,
        message: format!("{source}: {n} {what}, at most {limit} are allowed"),
        source: source.to_string(),
    }
}

fn normalise_key(cloud: Cloud, key: &str) -> String {
    match cloud {
        Cloud::Aws | Cloud::Gcp => key.to_string(),
        Cloud::Azure => key.to_ascii_lowercase(),
    }
}

fn distinct_keys<'a>(cloud: Cloud, tags: impl Iterator<Item = &'a Tag>) -> usize {
    tags.map(|t| normalise_key(cloud, &t.key)).collect::<std::collections::BTreeSet<_>>().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(cloud: Cloud, k: &str, v: &str) -> Vec<Rule> {
        check_tag(cloud, k, v, "test").into_iter().map(|v| v.rule).collect()
    }

    #[test]
    fn google_cloud_labels_follow_openshift_user_label_rules() {
        assert!(rules(Cloud::Gcp, "cost-center", "cc_42").is_empty());
        assert_eq!(rules(Cloud::Gcp, "Team", "x"), vec![Rule::KeyCharacters]);
        assert_eq!(rules(Cloud::Gcp, "team", "Platform"), vec![Rule::ValueCharacters]);
        assert_eq!(rules(Cloud::Gcp, "openshift-io-x", "y"), vec![Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Gcp, "kubernetes-io-cluster-c-1", "owned"), vec![Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Gcp, "goog-managed-by", "x"), vec![Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Gcp, "team", ""), vec![Rule::ValueLength]);
        assert_eq!(rules(Cloud::Gcp, &"k".repeat(64), "v"), vec![Rule::KeyLength]);
    }

    #[test]
    fn never_yield_names_only_managed_keys() {
        let load = |text: &str| crate::policy::load::load_one("p.yaml", text).expect("parsed");
        let ok = load("version: 1\ntags: {cost-center: cc}\noverrides: [{selector: {type: 'ec2:*'}, tags: {team: a}}]\nneverYield: [cost-center, team]\n");
        assert!(policy(&ok, Cloud::Aws).is_empty(), "a key under tags, and one under an override's tags");
        let typo = load("version: 1\ntags: {cost-center: cc}\nneverYield: [cost-centre]\n");
        let v = policy(&typo, Cloud::Aws);
        assert_eq!(
            v.iter().map(|v| (v.rule, v.key.as_str())).collect::<Vec<_>>(),
            [(Rule::UnmanagedNeverYield, "cost-centre")]
        );
        assert!(v[0].message.contains("does not manage"), "{}", v[0].message);
        // Azure compares keys without case.
        let azure = load("version: 1\ntags: {CostCenter: cc}\nneverYield: [costcenter]\n");
        assert!(policy(&azure, Cloud::Azure).is_empty());
        assert_eq!(policy(&azure, Cloud::Aws).len(), 1, "AWS keys are case-sensitive");
    }

    #[test]
    fn audit_keys_name_only_managed_keys() {
        let load = |text: &str| crate::policy::load::load_one("p.yaml", text).expect("parsed");
        let ok = load("version: 1\ntags: {cost-center: cc}\noverrides: [{selector: {type: 'ec2:*'}, tags: {team: a}}]\nauditKeys: [cost-center, team]\n");
        assert!(policy(&ok, Cloud::Aws).is_empty(), "a key under tags, and one under an override's tags");
        assert_eq!(ok.audit_keys.len(), 2);
        let typo = load("version: 1\ntags: {cost-center: cc}\nauditKeys: [cost-centre]\n");
        let v = policy(&typo, Cloud::Aws);
        assert_eq!(
            v.iter().map(|v| (v.rule, v.key.as_str(), v.source.as_str())).collect::<Vec<_>>(),
            [(Rule::UnmanagedAuditKey, "cost-centre", "auditKeys")]
        );
        assert!(
            v[0].message.contains("auditKeys names") && v[0].message.contains("does not manage"),
            "{}",
            v[0].message
        );
        let azure = load("version: 1\ntags: {CostCenter: cc}\nauditKeys: [costcenter]\n");
        assert!(policy(&azure, Cloud::Azure).is_empty());
        assert_eq!(policy(&azure, Cloud::Aws).len(), 1, "AWS keys are case-sensitive");
        // A policy version with auditKeys differs from one without; one without keeps its old version.
        let plain = load("version: 1\ntags: {cost-center: cc}\n");
        let audited = load("version: 1\ntags: {cost-center: cc}\nauditKeys: [cost-center]\n");
        assert_ne!(plain.version, audited.version);
    }

    #[test]
    fn aws_installer_table() {
        // TestValidateTag rows of openshift/installer, plus our deliberate deviations.
        assert!(rules(Cloud::Aws, "test-key", "test-value").is_empty());
        assert!(rules(Cloud::Aws, "otheropenshift.io/some-key", "v").is_empty());
        assert!(rules(Cloud::Aws, "some-domain/openshift.io/some-key", "v").is_empty());
        assert_eq!(rules(Cloud::Aws, "bad-key***", "v"), [Rule::KeyCharacters]);
        assert_eq!(rules(Cloud::Aws, "k", "bad-value***"), [Rule::ValueCharacters]);
        assert_eq!(rules(Cloud::Aws, "", "v"), [Rule::KeyLength]);
        assert_eq!(rules(Cloud::Aws, "k", ""), [Rule::ValueLength]);
        assert_eq!(rules(Cloud::Aws, &"a".repeat(129), "v"), [Rule::KeyLength]);
        assert_eq!(rules(Cloud::Aws, "k", &"a".repeat(257)), [Rule::ValueLength]);
        assert!(rules(Cloud::Aws, &"a".repeat(128), &"a".repeat(256)).is_empty());
        assert_eq!(rules(Cloud::Aws, "kubernetes.io/cluster/some-cluster", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Aws, "openshift.io/some-key", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Aws, "other.openshift.io/some-key", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Aws, "NAME", "v"), [Rule::ReservedKey]);
        assert_eq!(rules(Cloud::Aws, "Aws:x", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Aws, "usage-user", "cloud-team-rebase-bot[bot]"), [Rule::ValueCharacters]);
        assert!(rules(Cloud::Aws, "test-key", "this test has spaces").is_empty());
        // Deviation: the installer's `+-@` range admits these; we do not.
        for c in [",", ";", "<", ">", "?"] {
            assert_eq!(rules(Cloud::Aws, "k", &format!("a{c}b")), [Rule::ValueCharacters], "{c}");
        }
        // \p{Z} admits a no-break space but not tab; lengths count characters.
        assert!(rules(Cloud::Aws, "k", "a\u{a0}b").is_empty());
        assert_eq!(rules(Cloud::Aws, "k", "a\tb"), [Rule::ValueCharacters]);
        assert!(rules(Cloud::Aws, "k", &"a\u{a0}".repeat(86)).is_empty());
        // The dot is literal (the installer's unescaped dot also rejects "kubernetesXio/").
        assert!(rules(Cloud::Aws, "kubernetesXio/foo", "v").is_empty());
        // Deviation: the namespaces are reserved in any case (the installer's check is case-sensitive),
        // because IAM compares keys case-insensitively: on a role this key is the ownership tag.
        for k in ["Kubernetes.io/cluster/mycluster-7xk2p", "KUBERNETES.IO/foo", "OpenShift.io/x", "x.Kubernetes.IO/y"] {
            assert_eq!(rules(Cloud::Aws, k, "owned"), [Rule::ReservedPrefix], "{k}");
        }
        assert!(rules(Cloud::Aws, "Kubernetes.io", "v").is_empty(), "no slash, no namespace");
        assert!(rules(Cloud::Aws, "some-domain/OpenShift.io/x", "v").is_empty(), "a path segment, not a domain");
    }

    #[test]
    fn reserved_messages_name_the_key_the_namespace_and_the_fix() {
        let v = check_tag(Cloud::Aws, "x.Kubernetes.IO/y", "v", "status");
        assert_eq!(v.len(), 1);
        let m = &v[0].message;
        for part in ["\"x.Kubernetes.IO/y\"", "kubernetes.io/ namespace", "any case", "choose a key"] {
            assert!(m.contains(part), "{part:?} missing in {m}");
        }
        assert_eq!(v[0].rule.to_string(), "reserved-prefix");
    }

    /// Cluster API's ownership namespaces (CAPA on AWS, CAPZ on Azure; HyperShift uses them too)
    /// are reserved like the ownership tag, in any case, naming the key, the rule and the fix.
    /// The role denies k8s.io/ keys (and its subdomains) on AWS, so the loader refuses
    /// them rather than let every write carrying one fail whole.
    #[test]
    fn k8s_io_is_reserved_on_aws_as_the_role_denies_it() {
        for k in ["k8s.io/cluster-autoscaler/enabled", "K8S.io/x", "sigs.k8s.io/other", "x.k8s.io/y"] {
            assert_eq!(rules(Cloud::Aws, k, "true"), [Rule::ReservedPrefix], "{k}");
        }
        let v = check_tag(Cloud::Aws, "k8s.io/cluster-autoscaler/enabled", "true", "spec");
        assert!(
            v[0].message.contains("cluster autoscaler") && v[0].message.contains("choose a key"),
            "{}",
            v[0].message
        );
        assert!(rules(Cloud::Aws, "notk8s.io/x", "v").is_empty() && rules(Cloud::Aws, "team/k8s.io/x", "v").is_empty());
        assert!(rules(Cloud::Azure, "k8s.io_x", "v").is_empty(), "Azure has no such deny");
        assert!(is_k8s_io_key("k8s.io/cluster-autoscaler/enabled") && is_k8s_io_key("SIGS.K8S.IO/x"));
        assert!(!is_k8s_io_key("kubernetes.io/cluster/x") && !is_k8s_io_key("team"));
    }

    #[test]
    fn cluster_api_ownership_namespaces_are_reserved() {
        for k in [
            "sigs.k8s.io/cluster-api-provider-aws/cluster/mycluster-7xk2p",
            "sigs.k8s.io/cluster-api-provider-aws/role",
            "Sigs.K8s.IO/Cluster-API-Provider-AWS/cluster/x",
        ] {
            assert_eq!(rules(Cloud::Aws, k, "owned"), [Rule::ReservedPrefix], "{k}");
        }
        for k in
            ["sigs.k8s.io_cluster-api-provider-azure_cluster_my-cluster", "SIGS.k8s.io_cluster-api-provider-azure_role"]
        {
            assert_eq!(rules(Cloud::Azure, k, "owned"), [Rule::ReservedPrefix], "{k}");
        }
        // On AWS the rest of k8s.io/ is reserved too (below), with its own reason.
        assert!(rules(Cloud::Azure, "sigs.k8s.io_other", "v").is_empty(), "only the provider's namespace");
        let v = check_tag(Cloud::Azure, "sigs.k8s.io_cluster-api-provider-azure_cluster_c", "owned", "spec");
        let m = &v[0].message;
        for part in ["\"sigs.k8s.io_cluster-api-provider-azure_cluster_c\"", "Cluster API", "any case", "choose a key"]
        {
            assert!(m.contains(part), "{part:?} missing in {m}");
        }
        assert_eq!(v[0].rule.to_string(), "reserved-prefix");
    }

    #[test]
    fn aws_reports_every_violation() {
        let v = check_tag(Cloud::Aws, "aws:Name*", "", "status");
        let r: Vec<Rule> = v.iter().map(|v| v.rule).collect();
        assert_eq!(r, [Rule::ValueLength, Rule::KeyCharacters, Rule::ReservedPrefix]);
        assert!(v[1].message.contains("\"*\""), "{}", v[1].message);
        assert!(v[0].message.contains("256"), "{}", v[0].message);
    }

    #[test]
    fn azure_installer_table() {
        for k in ["key-4._", "Key.-_7", "key8_", "name123", "resourcename"] {
            assert!(rules(Cloud::Azure, k, "v").is_empty(), "{k}");
        }
        for v in ["value=4", "value@7", "a,b;c<d>e?f/g:h"] {
            assert!(rules(Cloud::Azure, "k", v).is_empty(), "{v}");
        }
        assert_eq!(rules(Cloud::Azure, "1key", "v"), [Rule::KeyFormat]);
        assert_eq!(rules(Cloud::Azure, "_key", "v"), [Rule::KeyFormat]);
        assert_eq!(rules(Cloud::Azure, "key-", "v"), [Rule::KeyFormat]);
        assert_eq!(rules(Cloud::Azure, "key@", "v"), [Rule::KeyCharacters]);
        assert_eq!(rules(Cloud::Azure, "key/test", "v"), [Rule::KeyCharacters]);
        assert_eq!(rules(Cloud::Azure, "k", "value*^%"), [Rule::ValueCharacters]);
        assert_eq!(rules(Cloud::Azure, "k", "has space"), [Rule::ValueCharacters]);
        assert_eq!(rules(Cloud::Azure, "name", "v"), [Rule::ReservedKey]);
        assert_eq!(rules(Cloud::Azure, "Azure", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Azure, "kubernetes.io_cluster", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Azure, "WindowsThing", "v"), [Rule::ReservedPrefix]);
        assert_eq!(rules(Cloud::Azure, &"a".repeat(129), "v"), [Rule::KeyLength]);
    }
}
