//! The planner's invariants (docs/src/design/architecture.md), for arbitrary current and desired tags:
//! no plan deletes, unmanaged keys survive, an applied plan re-plans empty, protected keys and
//! resources the cluster does not own are never written, and no write passes the tag limit.

use proptest::prelude::*;
use tagwarden_core::cloud::{Cloud, ClusterKind, OWNED};
use tagwarden_core::plan::{plan_desired, Decision, Plan};
use tagwarden_core::policy::Desired;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

const INFRA: &str = "c1-abcde";
const EC2: (Cloud, &str) = (Cloud::Aws, "ec2:instance");

fn key() -> impl Strategy<Value = String> {
    // A small alphabet so keys collide often, plus the protected keys and case variants.
    prop_oneof![
        "[a-cA-C]{1,2}",
        Just("Name".to_string()),
        Just("aws:x".to_string()),
        Just("kubernetes.io/cluster/other-1".to_string()),
        Just(format!("kubernetes.io/cluster/{INFRA}")),
        Just(format!("Kubernetes.io/Cluster/{INFRA}")),
        Just(format!("kubernetes.io_cluster.{INFRA}")),
        Just(format!("sigs.k8s.io/cluster-api-provider-aws/cluster/{INFRA}")),
        Just(format!("sigs.k8s.io_cluster-api-provider-azure_cluster_{INFRA}")),
        Just(format!("kubernetes.io_cluster_{INFRA}")),
    ]
}

fn cluster_kind() -> impl Strategy<Value = ClusterKind> {
    prop_oneof![Just(ClusterKind::OpenShift), Just(ClusterKind::HyperShift), Just(ClusterKind::ClusterApi)]
}

fn tag_map(max: usize) -> impl Strategy<Value = TagMap> {
    prop::collection::btree_map(key(), "[xyz]{1,2}", 0..max)
}

/// A cloud and a resource type: EC2 compares tag keys exactly, IAM and Azure ignoring case.
fn cloud() -> impl Strategy<Value = (Cloud, &'static str)> {
    prop_oneof![
        Just((Cloud::Aws, "ec2:instance")),
        Just((Cloud::Aws, "iam:role")),
        Just((Cloud::Azure, "Microsoft.Compute/disks"))
    ]
}

/// Keys equal the way the service behind `kind` compares them.
fn same(cloud: Cloud, kind: &str, a: &str, b: &str) -> bool {
    if cloud.keys_ignore_case(kind) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// What the cloud does with a plan's write: set each key, replacing a same-named key (by the
/// service's comparison: IAM's `team` replaces `Team`), and delete nothing.
fn apply((cloud, kind): (Cloud, &str), current: &TagMap, plan: &Plan) -> TagMap {
    let mut out = current.clone();
    for (k, v) in &plan.set {
        out.retain(|ek, _| !same(cloud, kind, ek, k));
        out.insert(k.clone(), v.clone());
    }
    out
}

fn dedupe((cloud, kind): (Cloud, &str), tags: &mut TagMap) {
    let mut seen = Vec::<String>::new();
    tags.retain(|k, _| {
        let dup = seen.iter().any(|s| same(cloud, kind, s, k));
        seen.push(k.clone());
        !dup
    });
}

fn plan_for(target: (Cloud, &str), current: &TagMap, desired: &TagMap, limit: usize) -> Plan {
    plan_kind(target, ClusterKind::OpenShift, current, desired, limit)
}

fn plan_kind(
    (cloud, kind): (Cloud, &str),
    cluster: ClusterKind,
    current: &TagMap,
    desired: &TagMap,
    limit: usize,
) -> Plan {
    let resource = ResourceRef { id: "r".into(), kind: kind.into(), arn: None };
    plan_desired(cloud, cluster, INFRA, true, &resource, current, Desired::from_map(desired), limit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn invariants(
        target in cloud(),
        cluster in cluster_kind(),
        which in 0usize..2,
        mut current in tag_map(12),
        desired in tag_map(10),
        owned in any::<bool>(),
        limit in 1usize..20,
    ) {
        let (cloud, kind) = target;
        // A resource holds no two keys its service considers equal. A policy may (on AWS `team`
        // and `Team` are two EC2 keys); on IAM the planner writes the later one only.
        if owned {
            // Any of the kind's ownership keys (Cluster API has two).
            let keys = cloud.ownership_keys(cluster, INFRA);
            let key = keys[which % keys.len()].clone();
            current.retain(|k, _| !same(cloud, kind, k, &key));
            current.insert(key, OWNED.to_string());
        }
        dedupe(target, &mut current);
        let plan = plan_kind(target, cluster, &current, &desired, limit);
        let after = apply(target, &current, &plan);
        if owned {
            prop_assert!(plan.owned, "owned by {:?}'s key, not seen as owned", cluster);
        }

        // No plan ever deletes: every key survives (by the service's key comparison).
        for k in current.keys() {
            prop_assert!(after.keys().any(|a| same(cloud, kind, a, k)), "{k} was deleted");
        }
        // Unmanaged keys keep their values.
        for (k, v) in &current {
            if !desired.keys().any(|d| same(cloud, kind, d, k)) {
                prop_assert_eq!(cloud.get_for(kind, &after, k).map(|(_, v)| v), Some(v));
            }
        }
        // A write never holds two keys the service considers equal (IAM refuses such a request).
        for a in plan.set.keys() {
            prop_assert_eq!(plan.set.keys().filter(|b| same(cloud, kind, a, b)).count(), 1);
        }
        // Only desired values are written, never protected keys.
        for (k, v) in &plan.set {
            prop_assert_eq!(desired.get(k), Some(v));
            prop_assert!(!cloud.is_protected_key(k), "wrote protected key {}", k);
        }
        // Not owned: nothing written.
        if !plan.owned {
            prop_assert_eq!(plan.outcome, Decision::NotOwned);
            prop_assert!(plan.set.is_empty());
        }
        // All or nothing at the limit.
        if plan.outcome == Decision::LimitExceeded {
            prop_assert!(plan.set.is_empty());
            prop_assert!(plan.tags_after > limit);
        }
        if plan.outcome == Decision::Apply {
            let counted = after.keys().filter(|k| cloud.counts_against_limit(k)).count();
            prop_assert!(counted <= limit || counted == plan.tags_before, "{counted} tags > limit {limit}");
        }
        // Empty write ⇔ no write call.
        prop_assert_eq!(plan.set.is_empty(), plan.outcome != Decision::Apply);
        // Applied, then re-planned: nothing left to do.
        let again = plan_kind(target, cluster, &after, &desired, limit);
        if plan.outcome == Decision::Apply {
            prop_assert_eq!(again.outcome, Decision::Unchanged, "re-plan after apply wrote {:?}", again.set);
        }
        prop_assert!(again.set.is_empty() || plan.outcome != Decision::Apply);
    }

    /// An audited plan (the cluster's `enforce: false`) writes nothing, yet reports exactly the
    /// drift an enforce would write: the same keys, before → after.
    #[test]
    fn an_audited_plan_writes_nothing_and_reports_what_enforce_would_write(
        target in cloud(),
        mut current in tag_map(10),
        desired in tag_map(8),
        limit in 1usize..20,
    ) {
        let (cloud, kind) = target;
        current.insert(cloud.ownership_key(INFRA), OWNED.to_string());
        dedupe(target, &mut current);
        let resource = ResourceRef { id: "r".into(), kind: kind.into(), arn: None };
        let audited = plan_desired(cloud, ClusterKind::OpenShift, INFRA, false, &resource, &current, Desired::from_map(&desired), limit);
        let enforced = plan_kind(target, ClusterKind::OpenShift, &current, &desired, limit);
        prop_assert!(audited.set.is_empty() && !audited.writes(), "an audit wrote {:?}", audited.set);
        prop_assert_eq!(apply(target, &current, &audited), current.clone());
        match enforced.outcome {
            Decision::Apply => {
                prop_assert_eq!(audited.outcome, Decision::Audited);
                prop_assert_eq!(&audited.audited, &enforced.changes);
                prop_assert!(audited.changes.is_empty());
            }
            other => {
                // In line or over the limit: the audit says the same.
                prop_assert_eq!(audited.outcome, other);
                prop_assert_eq!(&audited.changes, &enforced.changes);
                prop_assert!(audited.audited.is_empty());
            }
        }
    }

    /// Some keys audited beside enforced ones: the write holds exactly the enforced keys' drift,
    /// the audited ones are reported; unmanaged keys survive; the write then re-planned leaves only
    /// the audited drift; and once the keys are enforced, the write is exactly what was audited.
    #[test]
    fn audit_then_enforce_writes_exactly_the_audited_set(
        target in cloud(),
        mut current in tag_map(10),
        desired in tag_map(8),
        pick in prop::collection::vec(any::<bool>(), 8),
    ) {
        let (cloud, kind) = target;
        current.insert(cloud.ownership_key(INFRA), OWNED.to_string());
        dedupe(target, &mut current);
        let audit_keys: Vec<String> = desired.keys().zip(&pick).filter(|(_, p)| **p).map(|(k, _)| k.clone()).collect();
        let is_audited = |k: &str| audit_keys.iter().any(|a| a == k);
        let enforced = plan_kind(target, ClusterKind::OpenShift, &current, &desired, 50);
        let mut mixed = enforced.clone();
        for k in &audit_keys {
            mixed.audit(k);
        }
        // Only the enforced keys are written; each audited drift is reported instead.
        for k in mixed.set.keys() {
            prop_assert!(!is_audited(k), "audited key {} written", k);
        }
        for c in &mixed.audited {
            prop_assert!(is_audited(&c.key));
        }
        let mut all: Vec<_> = mixed.changes.iter().chain(&mixed.audited).cloned().collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        prop_assert_eq!(&all, &enforced.changes, "audit lost or invented drift");
        let after = apply(target, &current, &mixed);
        for (k, v) in &current {
            if !desired.keys().any(|d| same(cloud, kind, d, k)) {
                prop_assert_eq!(cloud.get_for(kind, &after, k).map(|(_, v)| v), Some(v), "unmanaged {} lost", k);
            }
        }
        // Re-planned after the write: nothing but the audited drift is left.
        let again = plan_kind(target, ClusterKind::OpenShift, &after, &desired, 50);
        let mut left: Vec<String> = again.changes.iter().map(|c| c.key.clone()).collect();
        left.sort();
        let mut was: Vec<String> = mixed.audited.iter().map(|c| c.key.clone()).collect();
        was.sort();
        if enforced.outcome == Decision::Apply {
            prop_assert_eq!(left, was.clone());
            // The keys switched to enforce: the write is exactly the audited set.
            let want: TagMap = mixed.audited.iter().map(|c| (c.key.clone(), c.new.clone())).collect();
            prop_assert_eq!(&again.set, &want);
            let done = apply(target, &after, &again);
            prop_assert_eq!(plan_kind(target, ClusterKind::OpenShift, &done, &desired, 50).outcome, Decision::Unchanged);
        }
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
    let p = plan_for(EC2, &owned(&[("key_infra1", "value_old"), ("mine", "x")]), &desired, 50);
    assert_eq!(p.outcome, Decision::Apply);
    assert_eq!(p.set, desired);
    assert_eq!(p.changes[0].old.as_deref(), Some("value_old"));
    // Already right → no write at all.
    let p = plan_for(EC2, &owned(&[("key_infra1", "value_new")]), &desired, 50);
    assert_eq!(p.outcome, Decision::Unchanged);
    // Key removed from policy → stays on the resource, no write.
    let p = plan_for(EC2, &owned(&[("removed", "kept")]), &TagMap::new(), 50);
    assert_eq!(p.outcome, Decision::Unchanged);
    // At the limit: 49 tags + owner = 50, one more key → nothing written.
    let full: Vec<(String, String)> = (0..49).map(|i| (format!("k{i}"), "v".to_string())).collect();
    let full_refs: Vec<(&str, &str)> = full.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let p = plan_for(EC2, &owned(&full_refs), &desired, 50);
    assert_eq!((p.outcome, p.tags_after), (Decision::LimitExceeded, 51));
    // `aws:` tags do not count against the limit.
    let mut with_system = owned(&full_refs[..48]);
    with_system.insert("aws:cloudformation:stack-name".into(), "s".into());
    assert_eq!(plan_for(EC2, &with_system, &desired, 50).outcome, Decision::Apply);
    // Shared resources are read-only.
    let shared: TagMap = [(format!("kubernetes.io/cluster/{INFRA}"), "shared".to_string())].into();
    assert_eq!(plan_for(EC2, &shared, &desired, 50).outcome, Decision::NotOwned);
    // Azure compares keys case-insensitively: same value under another case is no drift.
    let mut az: TagMap = [("Key_Infra1".to_string(), "value_new".to_string())].into();
    az.insert(format!("kubernetes.io_cluster.{INFRA}"), OWNED.into());
    assert_eq!(plan_for((Cloud::Azure, "Microsoft.Compute/disks"), &az, &desired, 50).outcome, Decision::Unchanged);
    // IAM folds case: `team=platform` over `Team=ops` is drift on that key, and an ownership
    // key in another case is the ownership key, never written.
    let iam = (Cloud::Aws, "iam:role");
    let role: TagMap = [("Team", "ops"), ("Kubernetes.io/cluster/c1-abcde", "owned")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let want: TagMap = [("team", "platform"), ("kubernetes.io/cluster/c1-abcde", "shared")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let p = plan_for(iam, &role, &want, 50);
    assert!(p.owned, "IAM reads the ownership tag in any case");
    assert_eq!(p.set, [("team".to_string(), "platform".to_string())].into());
    assert_eq!(p.changes[0].old.as_deref(), Some("ops"));
    assert_eq!(p.tags_after, p.tags_before, "replacing Team adds no key");
}
