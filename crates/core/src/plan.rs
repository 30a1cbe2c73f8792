//! The planner (docs/src/design/architecture.md): current tags + desired tags → the one write to make.
//!
//! It writes exactly `{k: v ∈ desired | current[k] ≠ v}`; never deletes, never touches a key
//! outside the desired set, ownership tags or `Name`; writes nothing on a resource the cluster does
//! not own; and writes nothing at all when the write would push the resource past its tag limit.
//!
//! The plan is the full diff whatever the mode: what is audited (`crate::mode`) is taken out of
//! the write at the last moment before it ([`Plan::audit`], [`audit`]) and reported as what would
//! be written, so an audit and an enforce evaluate exactly the same.

use serde::Serialize;

use crate::cloud::{ownership_for, Cloud, ClusterKind, Ownership};
use crate::policy::{Desired, DesiredTag, Policy, Superseded};
use crate::resource::ResourceRef;
use crate::TagMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Drift found; `set` is the write.
    Apply,
    /// Every desired tag already has its value: no write call at all.
    Unchanged,
    /// Not owned by this cluster (`shared`, another cluster's, or untagged): read-only.
    NotOwned,
    /// The write would exceed the resource's tag limit, so nothing is written.
    LimitExceeded,
    /// Drift found, and every drifted key is audited (`crate::mode`): evaluated and reported in
    /// `audited`, nothing written.
    Audited,
    /// Every drifted key is contested (another controller keeps changing it, `crate::contest`):
    /// nothing is written.
    Contested,
}

/// One drifted key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub key: String,
    /// The value on the resource now; `None` when the key is missing.
    pub old: Option<String>,
    pub new: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub resource: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub owned: bool,
    pub ownership: Ownership,
    pub outcome: Decision,
    /// The tags to write; empty unless the outcome is `apply`.
    pub set: TagMap,
    /// The drift, also when it is not written (limit exceeded).
    pub changes: Vec<Change>,
    pub superseded: Vec<Superseded>,
    /// How many tags counting against the limit the resource carries now, and would after the write.
    pub tags_before: usize,
    pub tags_after: usize,
    pub tag_limit: usize,
    /// Drifted keys held back because they are contested (`crate::contest`): not in `set`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<String>,
    /// Drifted keys audited (`crate::mode`): what would be written, before → after; not in `set`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audited: Vec<Change>,
}

impl Plan {
    pub fn writes(&self) -> bool {
        self.outcome == Decision::Apply
    }

    /// Take `key` out of the write (it is contested): with nothing left, the plan writes nothing.
    /// Its drift is no longer a change to make, and a key it would have added no longer counts.
    pub fn hold(&mut self, key: &str) {
        if self.set.remove(key).is_some() {
            if let Some(at) = self.changes.iter().position(|c| c.key == key) {
                if self.changes.remove(at).old.is_none() {
                    self.tags_after = self.tags_after.saturating_sub(1).max(self.tags_before);
                }
            }
            self.held.push(key.to_string());
            if self.set.is_empty() && self.outcome == Decision::Apply {
                self.outcome = Decision::Contested;
            }
        }
    }

    /// Take `key` out of the write because it is audited (`crate::mode`): its change moves to
    /// `audited`, reported as what would be written; with nothing left to write, the plan is
    /// [`Decision::Audited`]. A plan that writes nothing (in line, limit exceeded, contested) is
    /// left as it is: what it reports is what an enforce would report.
    pub fn audit(&mut self, key: &str) {
        if self.set.remove(key).is_none() {
            return;
        }
        if let Some(at) = self.changes.iter().position(|c| c.key == key) {
            let change = self.changes.remove(at);
            if change.old.is_none() {
                self.tags_after = self.tags_after.saturating_sub(1).max(self.tags_before);
            }
            self.audited.push(change);
        }
        if self.set.is_empty() && self.outcome == Decision::Apply {
            self.outcome = Decision::Audited;
        }
    }

    /// [`Plan::audit`] every key of the write.
    pub fn audit_all(&mut self) {
        let keys: Vec<String> = self.set.keys().cloned().collect();
        for key in keys {
            self.audit(&key);
        }
    }
}

/// Take out of `plan` what is audited, the strictest setting winning: everything when the
/// deployment is in `mode` audit (or a dry run) or the policy says `enforce: false`, else the
/// policy's `auditKeys`.
pub fn audit(plan: &mut Plan, policy: &Policy, cloud: Cloud, mode: crate::mode::Mode) {
    if mode == crate::mode::Mode::Audit || !policy.enforce {
        plan.audit_all();
        return;
    }
    if policy.audit_keys.is_empty() {
        return;
    }
    let keys: Vec<String> = plan.set.keys().filter(|k| policy.audits_key(cloud, k)).cloned().collect();
    for key in keys {
        plan.audit(&key);
    }
}

/// The full diff of one resource against a policy for cluster `infra_id` (of the policy's kind),
/// nothing audited yet: the engine holds contested keys, then audits ([`audit`]) what the mode
/// says, right before the write.
pub fn diff(policy: &Policy, cloud: Cloud, infra_id: &str, resource: &ResourceRef, current: &TagMap) -> Plan {
    let owned = ownership_for(cloud, &resource.kind, policy.kind, infra_id, current) == Ownership::Owned;
    // Only owned resources need the desired set; the rest are reported without it.
    let desired = if owned { policy.desired_for(cloud, resource, current) } else { Desired::default() };
    let limit = policy.resource_tag_limit(cloud, &resource.kind);
    plan_desired(cloud, policy.kind, infra_id, true, resource, current, desired, limit)
}

/// Plan one resource against a policy for cluster `infra_id`, in an enforcing deployment: the
/// [`diff`], with what the policy audits (`enforce: false`, `auditKeys`) taken out of the write.
pub fn plan(policy: &Policy, cloud: Cloud, infra_id: &str, resource: &ResourceRef, current: &TagMap) -> Plan {
    let mut plan = diff(policy, cloud, infra_id, resource, current);
    audit(&mut plan, policy, cloud, crate::mode::Mode::Enforce);
    plan
}

/// The planner proper, for a desired set computed elsewhere; `enforce: false` audits every
/// change ([`Plan::audit_all`]): the full diff is computed either way.
#[allow(clippy::too_many_arguments)]
pub fn plan_desired(
    cloud: Cloud,
    kind: ClusterKind,
    infra_id: &str,
    enforce: bool,
    resource: &ResourceRef,
    current: &TagMap,
    desired: Desired<'_>,
    tag_limit: usize,
) -> Plan {
    let own = ownership_for(cloud, &resource.kind, kind, infra_id, current);
    let fold = cloud.keys_ignore_case(&resource.kind);
    let tags_before = current.keys().filter(|k| cloud.counts_against_limit(k)).count();
    let mut plan = Plan {
        resource: resource.to_string(),
        resource_type: resource.kind.clone(),
        owned: own == Ownership::Owned,
        ownership: own,
        outcome: Decision::Unchanged,
        set: TagMap::new(),
        changes: Vec::new(),
        superseded: Vec::new(),
        tags_before,
        tags_after: tags_before,
        tag_limit,
        held: Vec::new(),
        audited: Vec::new(),
    };
    if !plan.owned {
        plan.outcome = Decision::NotOwned;
        return plan;
    }
    plan.superseded = desired.superseded;
    let mut new_keys = 0;
    let tags = desired.tags;
    for (i, &DesiredTag { key, value, .. }) in tags.iter().enumerate() {
        if cloud.is_protected_key(key) || !cloud.takes_key(&resource.kind, key) {
            continue;
        }
        // Where the service folds case (IAM), `team` and `Team` are one key: the later one wins,
        // as it would on the resource, and a write never carries both (IAM refuses that).
        if fold && tags[i + 1..].iter().any(|t| t.key.eq_ignore_ascii_case(key)) {
            continue;
        }
        let old = cloud.get_for(&resource.kind, current, key).map(|(_, v)| v);
        if old.is_some_and(|v| v == value) {
            continue;
        }
        if old.is_none() && cloud.counts_against_limit(key) {
            new_keys += 1;
        }
        plan.changes.push(Change { key: key.to_string(), old: old.cloned(), new: value.to_string() });
        plan.set.insert(key.to_string(), value.to_string());
    }
    plan.changes.sort_by(|a, b| a.key.cmp(&b.key));
    plan.tags_after = tags_before + new_keys;
    if plan.set.is_empty() {
        plan.outcome = Decision::Unchanged;
    } else if new_keys > 0 && plan.tags_after > tag_limit {
        plan.outcome = Decision::LimitExceeded;
        plan.set.clear();
    } else {
        plan.outcome = Decision::Apply;
    }
    if !enforce {
        plan.audit_all();
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> TagMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Even if validation were bypassed, no plan writes an ownership key of any provisioner:
    /// OpenShift's, or Cluster API's (CAPA on AWS, CAPZ on Azure, also HyperShift's), in any
    /// case (IAM and Azure compare keys ignoring it).
    #[test]
    fn ownership_namespaces_are_never_written_whatever_the_desired_set() {
        let cases = [
            (
                Cloud::Aws,
                "arn:aws:iam::111122223333:role/r",
                "kubernetes.io/cluster/c-1",
                "Sigs.k8s.io/Cluster-Api-Provider-Aws/cluster/other",
            ),
            (
                Cloud::Aws,
                "arn:aws:ec2:us-east-1:111122223333:instance/i-1",
                "kubernetes.io/cluster/c-1",
                "sigs.k8s.io/cluster-api-provider-aws/cluster/c-1",
            ),
            (
                Cloud::Azure,
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d",
                "kubernetes.io_cluster.c-1",
                "SIGS.K8S.IO_cluster-api-provider-azure_cluster_other",
            ),
        ];
        for (cloud, id, owner, reserved) in cases {
            let r = match cloud {
                Cloud::Aws => ResourceRef::from_arn(id),
                Cloud::Azure => ResourceRef::from_arm_id(id),
                Cloud::Gcp => unreachable!("no Google Cloud case here"),
            }
            .expect("resource");
            let current = tags(&[(owner, "owned")]);
            let want = tags(&[(reserved, "owned"), ("team", "platform")]);
            let plan =
                plan_desired(cloud, ClusterKind::OpenShift, "c-1", true, &r, &current, Desired::from_map(&want), 50);
            assert_eq!(plan.set, tags(&[("team", "platform")]), "{cloud} {reserved}");
        }
    }
}
