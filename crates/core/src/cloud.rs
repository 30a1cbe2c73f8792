//! The three clouds and the tag rules that differ between them: ownership tags, protected keys,
//! key comparison and default limits. On Google Cloud the "tags" tagwarden enforces are labels
//! (Resource Manager tags are bound, not set: [`crate::gcp`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::TagMap;

pub use crate::cluster_kind::{ClusterKind, OWNED};

/// A cluster as the tags on its resources name it: what the sweep lists by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterRef<'a> {
    pub kind: ClusterKind,
    pub infra_id: &'a str,
}

impl ClusterRef<'_> {
    pub fn ownership_keys(&self, cloud: Cloud) -> Vec<String> {
        cloud.ownership_keys(self.kind, self.infra_id)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cloud {
    Aws,
    Azure,
    Gcp,
}

impl Cloud {
    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Azure => "azure",
            Cloud::Gcp => "gcp",
        }
    }

    /// The tag that marks a resource as belonging to OpenShift cluster `infra_id`.
    /// Azure forbids `/` in tag names, so OpenShift spells it differently there.
    pub fn ownership_key(self, infra_id: &str) -> String {
        format!("{}{infra_id}", self.ownership_prefixes(ClusterKind::OpenShift)[0])
    }

    /// Each tag key that marks a resource as owned (`=owned`) by cluster `infra_id` of `kind`.
    pub fn ownership_keys(self, kind: ClusterKind, infra_id: &str) -> Vec<String> {
        self.ownership_prefixes(kind).iter().map(|p| format!("{p}{infra_id}")).collect()
    }

    /// The ownership keys of `kind` less the cluster's name, the writer's own key first.
    /// - CAPA `api/v1beta2/tags.go`: `NameAWSProviderOwned = "sigs.k8s.io/cluster-api-provider-aws/cluster/"`
    ///   on what CAPA creates, and `NameKubernetesAWSCloudProviderPrefix = "kubernetes.io/cluster/"`,
    ///   which CAPA adds for the cloud provider (`ClusterAWSCloudProviderTagKey`) and the AWS
    ///   cloud provider and CSI driver write on what they create.
    /// - CAPZ `api/v1beta1/tags.go`: `NameAzureProviderOwned = "sigs.k8s.io_cluster-api-provider-azure_cluster_"`
    ///   and `NameKubernetesAzureCloudProviderPrefix = "kubernetes.io_cluster_"`.
    pub fn ownership_prefixes(self, kind: ClusterKind) -> &'static [&'static str] {
        match (self, kind) {
            (Cloud::Aws, ClusterKind::OpenShift | ClusterKind::HyperShift) => &["kubernetes.io/cluster/"],
            (Cloud::Azure, ClusterKind::OpenShift | ClusterKind::HyperShift) => &["kubernetes.io_cluster."],
            (Cloud::Aws, ClusterKind::ClusterApi) => {
                &["sigs.k8s.io/cluster-api-provider-aws/cluster/", "kubernetes.io/cluster/"]
            }
            (Cloud::Azure, ClusterKind::ClusterApi) => {
                &["sigs.k8s.io_cluster-api-provider-azure_cluster_", "kubernetes.io_cluster_"]
            }
            // Labels: `kubernetes-io-cluster-` and CAPG's `capg-cluster-` (crate::gcp::ownership).
            (Cloud::Gcp, kind) => crate::gcp::ownership_label_prefixes(kind),
        }
    }

    /// The namespace of the keys by which Cluster API's provider for this cloud marks what its
    /// clusters own, and their roles; HyperShift's hosted clusters are provisioned by these
    /// providers, so this is their namespace too (inferred: HyperShift drives CAPA/CAPZ).
    /// - CAPA (kubernetes-sigs/cluster-api-provider-aws, `api/v1beta2/tags.go`):
    ///   `NameAWSProviderPrefix = "sigs.k8s.io/cluster-api-provider-aws/"`, ownership
    ///   `…/cluster/<name>=owned|shared` (`NameAWSProviderOwned`), also `…/role`, `…/managed`;
    /// - CAPZ (kubernetes-sigs/cluster-api-provider-azure, `api/v1beta1/tags.go`):
    ///   `NameAzureProviderPrefix = "sigs.k8s.io_cluster-api-provider-azure_"`, ownership
    ///   `…cluster_<name>=owned|shared` (`ClusterTagKey`), also `…role`.
    pub fn cluster_api_namespace(self) -> &'static str {
        match self {
            Cloud::Aws => "sigs.k8s.io/cluster-api-provider-aws/",
            Cloud::Azure => "sigs.k8s.io_cluster-api-provider-azure_",
            // kubernetes-sigs/cluster-api-provider-gcp `api/v1beta1/labels.go` `NameGCPProviderPrefix`.
            Cloud::Gcp => crate::gcp::CAPG_PREFIX,
        }
    }

    /// True for any cluster's ownership tag, not only ours, whoever provisioned the cluster
    /// (OpenShift's installer, Cluster API, HyperShift): tagwarden never writes one. In any case,
    /// also on AWS: IAM compares keys case-insensitively, so `Kubernetes.io/cluster/x` is the
    /// ownership tag there. On Azure also the cloud provider's own spelling
    /// `kubernetes.io_cluster_<id>` (CAPZ `NameKubernetesAzureCloudProviderPrefix`).
    pub fn is_ownership_key(self, key: &str) -> bool {
        let openshift: &[&str] = match self {
            Cloud::Aws => &["kubernetes.io/cluster/"],
            Cloud::Azure => &["kubernetes.io_cluster.", "kubernetes.io_cluster_"],
            // Label keys are lowercase only, so the exact prefix is the only spelling.
            Cloud::Gcp => &[crate::gcp::OPENSHIFT_OWNERSHIP_PREFIX],
        };
        openshift.iter().chain([&self.cluster_api_namespace()]).any(|p| starts_with_ignore_case(key, p))
    }

    /// Keys tagwarden must never write, whatever a policy says: ownership tags, `Name`, and the
    /// cloud's own system tags.
    pub fn is_protected_key(self, key: &str) -> bool {
        self.is_ownership_key(key)
            || key.eq_ignore_ascii_case("name")
            || (self == Cloud::Aws && starts_with_ignore_case(key, "aws:"))
            || (self == Cloud::Gcp && key.starts_with(crate::gcp::GOOGLE_RESERVED_PREFIX))
    }

    /// Whether a resource of `resource_type` can carry `key` at all: on Google Cloud a Resource
    /// Manager tag (`crate::gcp::is_tag_key`) only binds to the types that take bindings
    /// (`crate::gcp::resources::ResourceType::binds_tags`); a policy's tags are not planned on the
    /// others, whose labels still are.
    pub fn takes_key(self, resource_type: &str, key: &str) -> bool {
        self != Cloud::Gcp
            || !crate::gcp::is_tag_key(key)
            || crate::gcp::resources::resource_type(resource_type).is_some_and(|t| t.binds_tags())
    }

    /// AWS tag keys and Google label keys are case-sensitive (labels are lowercase only); Azure tag
    /// names are case-insensitive.
    pub fn keys_equal(self, a: &str, b: &str) -> bool {
        match self {
            Cloud::Aws | Cloud::Gcp => a == b,
            Cloud::Azure => a.eq_ignore_ascii_case(b),
        }
    }

    /// Look a key up in a tag map the way the cloud compares keys.
    pub fn get<'m>(self, tags: &'m TagMap, key: &str) -> Option<(&'m String, &'m String)> {
        match self {
            Cloud::Aws | Cloud::Gcp => tags.get_key_value(key),
            Cloud::Azure => tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)),
        }
    }

    /// Whether the service behind `resource_type` compares tag keys ignoring case: every Azure
    /// resource, and IAM on AWS ("tag keys are case insensitive", IAM user guide, Tagging IAM
    /// resources: `team` replaces `Team`, and a request with both is refused).
    pub fn keys_ignore_case(self, resource_type: &str) -> bool {
        self == Cloud::Azure || resource_type.starts_with("iam:")
    }

    /// Look a key up the way the service behind `resource_type` compares keys.
    pub fn get_for<'m>(self, resource_type: &str, tags: &'m TagMap, key: &str) -> Option<(&'m String, &'m String)> {
        if self.keys_ignore_case(resource_type) {
            tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(key))
        } else {
            tags.get_key_value(key)
        }
    }

    /// How many user tags a policy may define (OpenShift's limits).
    pub fn default_user_tag_limit(self) -> usize {
        match self {
            Cloud::Aws => 25,
            Cloud::Azure => 10,
            Cloud::Gcp => crate::gcp::OPENSHIFT_MAX_USER_LABELS,
        }
    }

    /// How many tags a resource of `resource_type` may carry in total.
    pub fn default_resource_tag_limit(self, resource_type: &str) -> usize {
        match self {
            Cloud::Aws => 50,
            Cloud::Gcp => crate::gcp::MAX_LABELS_PER_RESOURCE,
            Cloud::Azure => {
                let t = resource_type.to_ascii_lowercase();
                // Azure documents a 15-tag limit for Automation, CDN, public and private DNS (zones
                // and A records) and Log Analytics saved searches (tag-resources.md, Limitations).
                let small = [
                    "microsoft.network/dnszones",
                    "microsoft.network/privatednszones",
                    "microsoft.cdn/",
                    "microsoft.automation/",
                    "microsoft.operationalinsights/workspaces/savedsearches",
                ];
                if small.iter().any(|p| t.starts_with(p)) {
                    15
                } else {
                    50
                }
            }
        }
    }

    /// Whether a tag counts against the resource's limit (AWS does not count `aws:` tags; on Google
    /// Cloud the limit is the labels' 64, and a Resource Manager tag binding is not a label: its
    /// own limit of 50 direct bindings is the adapter's to check, `crate::gcp::check_bindings_fit`).
    pub fn counts_against_limit(self, key: &str) -> bool {
        match self {
            Cloud::Aws => !starts_with_ignore_case(key, "aws:"),
            Cloud::Azure => true,
            Cloud::Gcp => !crate::gcp::is_tag_key(key),
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Cloud {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "aws" => Ok(Cloud::Aws),
            "azure" => Ok(Cloud::Azure),
            "gcp" => Ok(Cloud::Gcp),
            other => Err(format!("unknown cloud {other:?}: expected \"aws\", \"azure\" or \"gcp\"")),
        }
    }
}

/// How a resource relates to the cluster, read from its ownership tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ownership {
    /// `<ownership key>=owned`: the only resources tagwarden writes.
    Owned,
    /// `<ownership key>=shared`: used by the cluster, owned by someone else.
    Shared,
    /// No ownership tag for this cluster (or another value).
    Unowned,
}

/// [`ownership_for`] of OpenShift cluster `infra_id`, on a service that compares keys exactly.
pub fn ownership(cloud: Cloud, infra_id: &str, current: &TagMap) -> Ownership {
    ownership_for(cloud, "", ClusterKind::OpenShift, infra_id, current)
}

/// How a resource of `resource_type` (whose service may compare keys ignoring case) relates to
/// cluster `infra_id` of `kind`: owned when any of the kind's ownership keys says `owned`.
pub fn ownership_for(
    cloud: Cloud,
    resource_type: &str,
    kind: ClusterKind,
    infra_id: &str,
    current: &TagMap,
) -> Ownership {
    let values = cloud
        .ownership_keys(kind, infra_id)
        .into_iter()
        .filter_map(|key| cloud.get_for(resource_type, current, &key).map(|(_, v)| v.as_str()))
        .collect::<Vec<_>>();
    if values.contains(&OWNED) {
        Ownership::Owned
    } else if values.contains(&"shared") {
        Ownership::Shared
    } else {
        Ownership::Unowned
    }
}

/// Every cluster that owns the resource: the names in its `<ownership key>=owned` tags, of any
/// kind of cluster, read the way the service compares keys. More than one is a conflict no
/// cluster may resolve; a Cluster API cluster's two keys naming it count once.
pub fn owners(cloud: Cloud, resource_type: &str, current: &TagMap) -> Vec<String> {
    let mut prefixes: Vec<&str> = [ClusterKind::OpenShift, ClusterKind::ClusterApi]
        .iter()
        .flat_map(|k| cloud.ownership_prefixes(*k).iter().copied())
        .collect();
    prefixes.dedup();
    let ignore_case = cloud.keys_ignore_case(resource_type);
    let mut ids: Vec<String> = current
        .iter()
        .filter(|(_, v)| v.as_str() == OWNED)
        .filter_map(|(k, _)| {
            prefixes.iter().find_map(|prefix| match ignore_case {
                true if starts_with_ignore_case(k, prefix) => Some(&k[prefix.len()..]),
                false => k.strip_prefix(prefix),
                true => None,
            })
        })
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup_by(|a, b| if ignore_case { a.eq_ignore_ascii_case(b) } else { a == b });
    ids
}

pub(crate) fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> TagMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn ownership_reads_only_this_clusters_tag() {
        let c = tags(&[("kubernetes.io/cluster/other-1", "owned")]);
        assert_eq!(ownership(Cloud::Aws, "mine-1", &c), Ownership::Unowned);
        let c = tags(&[("kubernetes.io/cluster/mine-1", "shared")]);
        assert_eq!(ownership(Cloud::Aws, "mine-1", &c), Ownership::Shared);
        let c = tags(&[("kubernetes.io/cluster/mine-1", "owned")]);
        assert_eq!(ownership(Cloud::Aws, "mine-1", &c), Ownership::Owned);
        // The AWS key is case-sensitive, the Azure one is not.
        let c = tags(&[("Kubernetes.io/cluster/mine-1", "owned")]);
        assert_eq!(ownership(Cloud::Aws, "mine-1", &c), Ownership::Unowned);
        // ... except on IAM, which compares keys ignoring case.
        assert_eq!(ownership_for(Cloud::Aws, "iam:role", ClusterKind::OpenShift, "mine-1", &c), Ownership::Owned);
        let c = tags(&[("Kubernetes.IO_cluster.mine-1", "owned")]);
        assert_eq!(ownership(Cloud::Azure, "mine-1", &c), Ownership::Owned);
    }

    #[test]
    fn every_owner_is_found() {
        let c = tags(&[("kubernetes.io/cluster/a-1", "owned"), ("kubernetes.io/cluster/b-2", "shared"), ("team", "x")]);
        assert_eq!(owners(Cloud::Aws, "ec2:instance", &c), vec!["a-1"]);
        let c = tags(&[("kubernetes.io/cluster/a-1", "owned"), ("Kubernetes.io/cluster/b-2", "owned")]);
        assert_eq!(owners(Cloud::Aws, "ec2:instance", &c), vec!["a-1"], "EC2 keys are case-sensitive");
        assert_eq!(owners(Cloud::Aws, "iam:role", &c), vec!["a-1", "b-2"]);
        let c = tags(&[("Kubernetes.IO_cluster.az-1", "owned"), ("kubernetes.io_cluster.az-2", "owned")]);
        assert_eq!(owners(Cloud::Azure, "Microsoft.Compute/disks", &c), vec!["az-1", "az-2"]);
        assert!(owners(Cloud::Aws, "s3:bucket", &tags(&[("kubernetes.io/cluster/", "owned")])).is_empty());
    }

    #[test]
    fn a_cluster_api_cluster_owns_by_either_of_its_keys() {
        let capa = |k: &str| tags(&[(k, "owned")]);
        for key in ["sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "kubernetes.io/cluster/w-1"] {
            assert_eq!(
                ownership_for(Cloud::Aws, "ec2:instance", ClusterKind::ClusterApi, "w-1", &capa(key)),
                Ownership::Owned
            );
            assert_eq!(owners(Cloud::Aws, "ec2:instance", &capa(key)), vec!["w-1"]);
        }
        // An OpenShift or HyperShift cluster is not owner by Cluster API's key.
        let c = capa("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1");
        assert_eq!(ownership_for(Cloud::Aws, "ec2:instance", ClusterKind::HyperShift, "w-1", &c), Ownership::Unowned);
        // Both keys naming the same cluster are one owner; naming two clusters, a conflict.
        let both = tags(&[
            ("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"),
            ("kubernetes.io/cluster/w-1", "owned"),
        ]);
        assert_eq!(owners(Cloud::Aws, "ec2:instance", &both), vec!["w-1"]);
        let two = tags(&[
            ("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"),
            ("kubernetes.io/cluster/w-2", "owned"),
        ]);
        assert_eq!(owners(Cloud::Aws, "ec2:instance", &two), vec!["w-1", "w-2"]);
        // One key owned, the other shared: owned.
        let mixed = tags(&[
            ("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"),
            ("kubernetes.io/cluster/w-1", "shared"),
        ]);
        assert_eq!(ownership_for(Cloud::Aws, "ec2:vpc", ClusterKind::ClusterApi, "w-1", &mixed), Ownership::Owned);
        let capz = tags(&[("sigs.k8s.io_cluster-api-provider-azure_cluster_z-1", "owned")]);
        assert_eq!(owners(Cloud::Azure, "Microsoft.Network/loadBalancers", &capz), vec!["z-1"]);
        assert_eq!(
            ownership_for(Cloud::Azure, "Microsoft.Network/loadBalancers", ClusterKind::ClusterApi, "Z-1", &capz),
            Ownership::Owned
        );
    }

    #[test]
    fn protected_keys() {
        for k in [
            "Name",
            "name",
            "NAME",
            "kubernetes.io/cluster/x",
            "Kubernetes.IO/Cluster/x",
            "aws:cloudformation:stack",
            "AWS:x",
        ] {
            assert!(Cloud::Aws.is_protected_key(k), "{k}");
        }
        assert!(!Cloud::Aws.is_protected_key("team"));
        assert!(Cloud::Azure.is_protected_key("kubernetes.io_cluster.x"));
        // Cluster API's (and so HyperShift's) ownership namespaces, in any case.
        for k in ["sigs.k8s.io/cluster-api-provider-aws/cluster/c-1", "SIGS.k8s.io/Cluster-API-Provider-AWS/role"] {
            assert!(Cloud::Aws.is_protected_key(k), "{k}");
        }
        for k in ["sigs.k8s.io_cluster-api-provider-azure_cluster_c-1", "Sigs.K8s.io_cluster-api-provider-azure_role"] {
            assert!(Cloud::Azure.is_protected_key(k), "{k}");
        }
        assert!(Cloud::Azure.is_protected_key("kubernetes.io_cluster_c-1"));
        assert!(!Cloud::Aws.is_protected_key("sigs.k8s.io/other"));
        assert!(!Cloud::Azure.is_protected_key("aws:x"));
    }

    #[test]
    fn google_cloud_labels_mark_owners() {
        let c = tags(&[("kubernetes-io-cluster-g-1", "owned"), ("capg-cluster-g-1", "owned"), ("team", "x")]);
        assert_eq!(owners(Cloud::Gcp, "compute.googleapis.com/Instance", &c), vec!["g-1"], "one cluster, two labels");
        assert_eq!(ownership(Cloud::Gcp, "g-1", &c), Ownership::Owned);
        let capg = tags(&[("capg-cluster-w-1", "owned")]);
        assert_eq!(
            ownership_for(Cloud::Gcp, "compute.googleapis.com/Disk", ClusterKind::ClusterApi, "w-1", &capg),
            Ownership::Owned
        );
        // Labels are case-sensitive (and lowercase only): another spelling is no owner.
        assert_eq!(ownership(Cloud::Gcp, "g-1", &tags(&[("Kubernetes-io-cluster-g-1", "owned")])), Ownership::Unowned);
        for k in ["kubernetes-io-cluster-g-1", "capg-cluster-w-1", "capg-role", "goog-managed-by"] {
            assert!(Cloud::Gcp.is_protected_key(k), "{k}");
        }
        assert!(!Cloud::Gcp.is_protected_key("team"));
        assert_eq!(Cloud::Gcp.default_user_tag_limit(), 32);
        assert_eq!(Cloud::Gcp.default_resource_tag_limit("storage.googleapis.com/Bucket"), 64);
        assert_eq!("GCP".parse::<Cloud>(), Ok(Cloud::Gcp));
    }

    #[test]
    fn azure_small_limits() {
        assert_eq!(Cloud::Azure.default_resource_tag_limit("Microsoft.Network/dnszones"), 15);
        assert_eq!(Cloud::Azure.default_resource_tag_limit("Microsoft.Cdn/profiles"), 15);
        assert_eq!(
            Cloud::Azure.default_resource_tag_limit("Microsoft.OperationalInsights/workspaces/savedSearches"),
            15
        );
        assert_eq!(Cloud::Azure.default_resource_tag_limit("Microsoft.Compute/virtualMachines"), 50);
    }
}
