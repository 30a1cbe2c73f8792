//! What provisioned a cluster, and the value that marks what it owns: shared by every cloud's
//! rules (`crate::cloud`, `crate::gcp`), so that neither needs the other for them.

use serde::{Deserialize, Serialize};

/// Value of the ownership tag on resources the cluster owns.
pub const OWNED: &str = "owned";

/// What provisioned a cluster, which decides the tags that mark the resources it owns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterKind {
    /// An OpenShift cluster from the installer (`Infrastructure`): `kubernetes.io/cluster/<infraID>`
    /// on AWS, `kubernetes.io_cluster.<infraID>` on Azure (openshift/installer; docs/src/concepts/policy.md).
    #[default]
    OpenShift,
    /// A HyperShift hosted cluster (`HostedCluster`): the same key on its `spec.infraID`, which
    /// HyperShift writes on what it creates and the cloud provider on what it creates for the
    /// hosted cluster (hypershift `nodepool/aws.go` `awsClusterCloudProviderTagKey`).
    HyperShift,
    /// A Cluster API workload cluster, named by its `Cluster`'s name: the provider's own key on
    /// what CAPA/CAPZ create, the cloud provider's key on what the workload cluster's cloud
    /// provider creates (load balancers, volumes). Either marks the resource as the cluster's.
    #[serde(rename = "ClusterAPI")]
    ClusterApi,
}

impl ClusterKind {
    pub fn is_openshift(&self) -> bool {
        *self == ClusterKind::OpenShift
    }
}
