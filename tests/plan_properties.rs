//! The planner's invariants (DESIGN.md §4), for arbitrary current and desired tags:
//! no plan deletes, unmanaged keys survive, an applied plan re-plans empty, protected keys and
//! resources the cluster does not own are never written, and no write passes the tag limit.

use proptest::prelude::*;
use tagwarden::cloud::{Cloud, OWNED};
use tagwarden::plan::{plan_desired, Outcome, Plan};
use tagwarden::policy::Desired;
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

const INFRA: &str = "c1-abcde";

fn key() -> impl Strategy<Value = String> {
    // A small alphabet so keys collide often, plus the protected keys and case variants.
    prop_oneof![
        "[a-cA-C]{1,2}",
        Just("Name".to_string()),
        Just("aws:x".to_string()),
        Just("kubernetes.io/cluster/other-1".to_string()),
        Just(format!("kubernetes.io/cluster/{INFRA}")),
        Just(format!("kubernetes.io_cluster.{INFRA}")),
    ]
}

fn tag_map(max: usize) -> impl Strategy<Value = TagMap> {
    prop::collection::btree_map(key(), "[xyz]{1,2}", 0..max)
}

fn cloud() -> impl Strategy<Value = Cloud> {
    prop_oneof![Just(Cloud::Aws), Just(Cloud::Azure)]
}

/// What the cloud does with a plan's write: set each key, replacing a same-named key (by the
/// cloud's comparison), and delete nothing.
fn apply(cloud: Cloud, current: &TagMap, plan: &Plan) -> TagMap {
    let mut out = current.clone();
    for (k, v) in &plan.set {
        out.retain(|ek, _| !cloud.keys_equal(ek, k));
        out.insert(k.clone(), v.clone());
    }
    out
}

fn dedupe(cloud: Cloud, tags: &mut TagMap) {
    let mut seen = Vec::<String>::new();
    tags.retain(|k, _| {
        let dup = seen.iter().any(|s| cloud.keys_equal(s, k));
        seen.push(k.clone());
        !dup
    });
}

fn plan_for(cloud: Cloud, current: &TagMap, desired: &TagMap, limit: usize) -> Plan {
    let resource = ResourceRef { id: "r".into(), kind: "ec2:instance".into(), arn: None };
    plan_desired(cloud, INFRA, true, &resource, current, Desired::from_map(desired), limit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn invariants(cloud in cloud(), mut current in tag_map(12), mut desired in tag_map(10), owned in any::<bool>(), limit in 1usize..20) {
        // Neither a resource nor a merged policy holds two keys the cloud considers equal.
        dedupe(cloud, &mut current);
        dedupe(cloud, &mut desired);
        if owned {
            current.insert(cloud.ownership_key(INFRA), OWNED.to_string());
        }
        let plan = plan_for(cloud, &current, &desired, limit);
        let after = apply(cloud, &current, &plan);

        // No plan ever deletes: every key survives (by the cloud's key comparison).
        for k in current.keys() {
            prop_assert!(after.keys().any(|a| cloud.keys_equal(a, k)), "{k} was deleted");
        }
        // Unmanaged keys keep their values.
        for (k, v) in &current {
            if !desired.keys().any(|d| cloud.keys_equal(d, k)) {
                prop_assert_eq!(cloud.get(&after, k).map(|(_, v)| v), Some(v));
            }
        }
        // Only desired values are written, never protected keys.
        for (k, v) in &plan.set {
            prop_assert_eq!(desired.get(k), Some(v));
            prop_assert!(!cloud.is_protected_key(k), "wrote protected key {}", k);
        }
        // Not owned: nothing written.
        if !plan.owned {
            prop_assert_eq!(plan.outcome, Outcome::NotOwned);
            prop_assert!(plan.set.is_empty());
        }
        // All or nothing at the limit.
        if plan.outcome == Outcome::LimitExceeded {
            prop_assert!(plan.set.is_empty());
            prop_assert!(plan.tags_after > limit);
        }
        if plan.outcome == Outcome::Apply {
            let counted = after.keys().filter(|k| cloud.counts_against_limit(k)).count();
            prop_assert!(counted <= limit || counted == plan.tags_before, "{counted} tags > limit {limit}");
        }
        // Empty write ⇔ no write call.
        prop_assert_eq!(plan.set.is_empty(), plan.outcome != Outcome::Apply);
        // Applied, then re-planned: nothing left to do.
        let again = plan_for(cloud, &after, &desired, limit);
        if plan.outcome == Outcome::Apply {
            prop_assert_eq!(again.outcome, Outcome::Unchanged, "re-plan after apply wrote {:?}", again.set);
        }
        prop_assert!(again.set.is_empty() || plan.outcome != Outcome::Apply);
    }

    #[test]
    fn disabled_writes_nothing(cloud in cloud(), mut current in tag_map(8), desired in tag_map(8)) {
        current.insert(cloud.ownership_key(INFRA), OWNED.to_string());
        let resource = ResourceRef { id: "r".into(), kind: "ec2:instance".into(), arn: None };
        let plan = plan_desired(cloud, INFRA, false, &resource, &current, Desired::from_map(&desired), 50);
        prop_assert_eq!(plan.outcome, Outcome::Disabled);
        prop_assert!(plan.set.is_empty());
    }
}

#[test]
fn seed_scenarios() {
    // The AWS seed's update scenarios, one resource.
    let owned = |extra: &[(&str, &str)]| {
        let mut t: TagMap = extra.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        t.insert(format!("kubernetes.io/cluster/{INFRA}"), OWNED.into());
        t
    };
    let desired: TagMap = [("key_infra1".to_string(), "value_new".to_string())].into();
    // Drifted value → overwritten; an unmanaged key stays.
    let p = plan_for(Cloud::Aws, &owned(&[("key_infra1", "value_old"), ("mine", "x")]), &desired, 50);
    assert_eq!(p.outcome, Outcome::Apply);
    assert_eq!(p.set, desired);
    assert_eq!(p.changes[0].old.as_deref(), Some("value_old"));
    // Already right → no write at all.
    let p = plan_for(Cloud::Aws, &owned(&[("key_infra1", "value_new")]), &desired, 50);
    assert_eq!(p.outcome, Outcome::Unchanged);
    // Key removed from policy → stays on the resource, no write.
    let p = plan_for(Cloud::Aws, &owned(&[("removed", "kept")]), &TagMap::new(), 50);
    assert_eq!(p.outcome, Outcome::Unchanged);
    // At the limit: 49 tags + owner = 50, one more key → nothing written.
    let full: Vec<(String, String)> = (0..49).map(|i| (format!("k{i}"), "v".to_string())).collect();
    let full_refs: Vec<(&str, &str)> = full.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let p = plan_for(Cloud::Aws, &owned(&full_refs), &desired, 50);
    assert_eq!((p.outcome, p.tags_after), (Outcome::LimitExceeded, 51));
    // `aws:` tags do not count against the limit.
    let mut with_system = owned(&full_refs[..48]);
    with_system.insert("aws:cloudformation:stack-name".into(), "s".into());
    assert_eq!(plan_for(Cloud::Aws, &with_system, &desired, 50).outcome, Outcome::Apply);
    // Shared resources are read-only.
    let shared: TagMap = [(format!("kubernetes.io/cluster/{INFRA}"), "shared".to_string())].into();
    assert_eq!(plan_for(Cloud::Aws, &shared, &desired, 50).outcome, Outcome::NotOwned);
    // Azure compares keys case-insensitively: same value under another case is no drift.
    let mut az: TagMap = [("Key_Infra1".to_string(), "value_new".to_string())].into();
    az.insert(format!("kubernetes.io_cluster.{INFRA}"), OWNED.into());
    assert_eq!(plan_for(Cloud::Azure, &az, &desired, 50).outcome, Outcome::Unchanged);
}
