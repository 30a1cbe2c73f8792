use super::*;
use crate::cluster_kind::ClusterKind;
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
    let ok =
        [("key1", "value1"), ("key_2", "value_2"), ("key-3", "value-3"), ("key4_", "value4_"), ("key5-", "value5-")];
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
    for k in ["ключ", "clé", "straße", "ωμέγα", "東京", "かぎ", "가나", "مفتاح", "東京-1_٣"] {
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
    for p in ["0123", "r2-d2", "my-project-", "1project", "My-project", "", long_org.as_str(), long_project.as_str()] {
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
