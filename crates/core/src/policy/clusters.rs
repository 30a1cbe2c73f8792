//! Many clusters, one deployment (a *cluster set*): each cluster publishes its own policy under its
//! own key of one store, and a resource answers to the cluster its ownership tag names. Pure: the
//! store lists and fetches, this decides which policy a resource gets.
//!
//! - One cluster's policy is validated, cached, accepted or rejected on its own: an invalid one
//!   never blocks another cluster.
//! - A resource owned by two clusters is a conflict: reported, never written.
//! - A resource owned by a cluster that published no valid policy here is ignored and counted.

use std::sync::Arc;

use super::cache::LoadedPolicy;
use crate::cloud::{owners, Cloud};
use crate::TagMap;

/// The policies in force at a location: one for a single policy, one per cluster for a set.
#[derive(Debug, Clone)]
pub struct Policies {
    clusters: Vec<Arc<LoadedPolicy>>,
    set: bool,
}

/// Which policy a resource answers to.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner<'a> {
    Cluster(&'a Arc<LoadedPolicy>),
    /// Owned by no cluster (or, for a single policy, not by its cluster: the plan says so).
    NotOwned,
    /// Owned by a cluster that published no valid policy here.
    Unpublished(String),
    /// Owned by more than one cluster.
    Conflict(Vec<String>),
}

impl PartialEq for LoadedPolicy {
    fn eq(&self, other: &Self) -> bool {
        self.infra_id == other.infra_id && self.fingerprint == other.fingerprint
    }
}

impl Eq for LoadedPolicy {}

impl Policies {
    /// A single policy: everything it does not own is `NotOwned`, planned as before.
    pub fn one(policy: Arc<LoadedPolicy>) -> Self {
        Policies { clusters: vec![policy], set: false }
    }

    /// The valid policies of a cluster set.
    pub fn set(clusters: Vec<Arc<LoadedPolicy>>) -> Self {
        Policies { clusters, set: true }
    }

    pub fn is_set(&self) -> bool {
        self.set
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<LoadedPolicy>> {
        self.clusters.iter()
    }

    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// The policy of a single-policy deployment: the one its resources are planned against even
    /// when they turn out not to be owned.
    pub fn single(&self) -> Option<&Arc<LoadedPolicy>> {
        (!self.set).then(|| self.clusters.first()).flatten()
    }

    /// The version in force, as records show it: a set's is each cluster's, `infraID@version`.
    pub fn version(&self) -> String {
        match self.single() {
            Some(p) => p.policy.version.clone(),
            None => self
                .clusters
                .iter()
                .map(|p| format!("{}@{}", p.infra_id, p.policy.version))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The policy of cluster `infra_id`.
    pub fn get(&self, infra_id: &str) -> Option<&Arc<LoadedPolicy>> {
        self.clusters.iter().find(|p| p.infra_id == infra_id)
    }

    /// The policy a resource with `tags` answers to, from its ownership tags alone.
    pub fn owner(&self, cloud: Cloud, resource_type: &str, tags: &TagMap) -> Owner<'_> {
        let ids = owners(cloud, resource_type, tags);
        let same =
            |a: &str, b: &str| if cloud.keys_ignore_case(resource_type) { a.eq_ignore_ascii_case(b) } else { a == b };
        match ids.as_slice() {
            [] => Owner::NotOwned,
            [id] => match self.clusters.iter().find(|p| same(&p.infra_id, id)) {
                Some(p) => Owner::Cluster(p),
                None if self.set => Owner::Unpublished(id.clone()),
                None => Owner::NotOwned,
            },
            _ => Owner::Conflict(ids),
        }
    }
}

/// The cluster a listed name of a set belongs to: its first folder under the set's `prefix`
/// (`<infraID>/…`, layered as a single prefix is), or a document directly under it named for the
/// cluster (`<infraID>.yaml`, or an SSM parameter `<infraID>`).
pub fn cluster_of(prefix: &str, name: &str) -> Option<String> {
    let rest = name.strip_prefix(prefix)?;
    let cluster = match rest.split_once('/') {
        Some((folder, _)) => folder,
        None => [".yaml", ".yml", ".json"].iter().find_map(|e| rest.strip_suffix(e)).unwrap_or(rest),
    };
    (!cluster.is_empty()).then(|| cluster.to_string())
}

/// The longest infraID taken: OpenShift's are 27 characters (a cluster name cut to 21, `-`, 5
/// random); a set's folder or parameter of any other length is no cluster's.
pub const MAX_INFRA_ID_LEN: usize = 64;

/// Whether `id` can be a cluster's infraID, and so the one path segment of its folder (and of
/// its status report) in a set: a letter or digit, then letters, digits, `-`, `_` or `.`.
/// OpenShift's are lowercase letters, digits and `-`. Nothing else (no `/`, `..`, `%`, `?`,
/// spaces), so a name a publisher chose can never lead a write outside the set's
/// `<prefix><infraID>/`.
pub fn valid_infra_id(id: &str) -> Result<(), NotAnInfraId> {
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if first_ok && rest_ok && id.len() <= MAX_INFRA_ID_LEN {
        Ok(())
    } else {
        Err(NotAnInfraId(id.to_string()))
    }
}

/// A name that cannot be a cluster's infraID (`valid_infra_id`): the name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not an infraID: expected a letter or digit, then letters, digits, '-', '_' or '.', at most {MAX_INFRA_ID_LEN} characters (the cluster's status.infrastructureName, e.g. mycluster-7xk2p)"
)]
pub struct NotAnInfraId(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::cache::check;

    fn loaded(infra_id: &str) -> Arc<LoadedPolicy> {
        let doc = format!("version: 1\ninfraID: {infra_id}\ntags: {{team: t-{infra_id}}}\n");
        let (policy, infra_id) = check(Cloud::Aws, vec![("p.yaml".into(), doc)]).expect("valid");
        Arc::new(LoadedPolicy { policy, infra_id, fingerprint: "fp".into() })
    }

    fn tags(pairs: &[(&str, &str)]) -> TagMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_resource_answers_to_the_cluster_that_owns_it() {
        let set = Policies::set(vec![loaded("a-1"), loaded("b-2")]);
        let owned = |id: &str| tags(&[(&format!("kubernetes.io/cluster/{id}"), "owned")]);
        assert!(
            matches!(set.owner(Cloud::Aws, "ec2:instance", &owned("b-2")), Owner::Cluster(p) if p.infra_id == "b-2")
        );
        assert_eq!(set.owner(Cloud::Aws, "ec2:instance", &owned("z-9")), Owner::Unpublished("z-9".into()));
        assert_eq!(set.owner(Cloud::Aws, "ec2:instance", &tags(&[("team", "x")])), Owner::NotOwned);
        let shared = tags(&[("kubernetes.io/cluster/a-1", "shared")]);
        assert_eq!(set.owner(Cloud::Aws, "ec2:subnet", &shared), Owner::NotOwned);
        let both = tags(&[("kubernetes.io/cluster/a-1", "owned"), ("kubernetes.io/cluster/z-9", "owned")]);
        assert_eq!(set.owner(Cloud::Aws, "ec2:instance", &both), Owner::Conflict(vec!["a-1".into(), "z-9".into()]));

        // A single policy plans what it does not own as before (the plan says not-owned).
        let one = Policies::one(loaded("a-1"));
        assert_eq!(one.owner(Cloud::Aws, "ec2:instance", &owned("z-9")), Owner::NotOwned);
        assert!(one.single().is_some() && set.single().is_none());
    }

    #[test]
    fn a_sets_listing_groups_by_cluster() {
        assert_eq!(cluster_of("clusters/", "clusters/a-1/10-cluster.yaml").as_deref(), Some("a-1"));
        assert_eq!(cluster_of("clusters/", "clusters/a-1/sub/20.yaml").as_deref(), Some("a-1"));
        assert_eq!(cluster_of("clusters/", "clusters/b-2.yaml").as_deref(), Some("b-2"));
        assert_eq!(cluster_of("/tagwarden/clusters/", "/tagwarden/clusters/c-3").as_deref(), Some("c-3"));
        assert_eq!(cluster_of("clusters/", "clusters//x.yaml"), None);
        assert_eq!(cluster_of("clusters/", "other/a-1/x.yaml"), None);
    }

    #[test]
    fn an_infra_id_is_one_plain_path_segment() {
        for ok in ["mycluster-7xk2p", "a", "A1.b_c-d", &"x".repeat(MAX_INFRA_ID_LEN)] {
            assert_eq!(valid_infra_id(ok), Ok(()), "{ok}");
        }
        for bad in ["", "..", ".", "../b-2", "a/b", "a%2Fb", "-a", "a b", "a?x", "a#x", "é", "a\\b", &"x".repeat(65)] {
            let e = valid_infra_id(bad).expect_err(bad).to_string();
            assert!(e.contains("not an infraID") && e.contains("status.infrastructureName"), "{e}");
        }
    }
}
