//! The labels that mark what a cluster owns.

use super::*;
use crate::cluster_kind::ClusterKind;

/// The prefixes of the labels that mark a resource as owned (`=owned`) by a cluster of `kind`,
/// the writer's own first.
/// - OpenShift: `kubernetes-io-cluster-` (installer `ClusterIDLabelFmt`); an install through
///   Cluster API also gets CAPG's `capg-cluster-<infraID>`, the installer's GCP cluster manifest
///   setting both, and its destroy code (`capgProviderOwnedLabelFmt`) looking for the latter.
/// - HyperShift: inferred the same as OpenShift: its GCP platform (behind the `GCPPlatform` feature
///   gate at openshift/hypershift `3ee96155`) provisions through CAPG and names the Cluster API
///   `Cluster` after the infraID, so CAPG writes `capg-cluster-<infraID>`.
/// - Cluster API: CAPG's `capg-cluster-` alone (`ClusterTagKey`); CAPG's cloud-provider key
///   (`ClusterGCPCloudProviderTagKey`) is commented out in its source.
pub fn ownership_label_prefixes(kind: ClusterKind) -> &'static [&'static str] {
    match kind {
        ClusterKind::OpenShift | ClusterKind::HyperShift => &[OPENSHIFT_OWNERSHIP_PREFIX, CAPG_OWNERSHIP_PREFIX],
        ClusterKind::ClusterApi => &[CAPG_OWNERSHIP_PREFIX],
    }
}

/// The label key by which a cluster of `kind` marks what it owns: `kubernetes-io-cluster-<infraID>`
/// (OpenShift, HyperShift) or `capg-cluster-<name>` (Cluster API). An error if the key would not
/// be a valid label key (an uppercase or too long ID), naming the ID.
pub fn ownership_label_key(infra_id: &str, kind: ClusterKind) -> Result<String, Violation> {
    let prefix = ownership_label_prefixes(kind)[0];
    owned_key(prefix, infra_id)
}

/// Every label key that marks a resource as owned by cluster `infra_id` of `kind`.
pub fn ownership_label_keys(infra_id: &str, kind: ClusterKind) -> Result<Vec<String>, Violation> {
    ownership_label_prefixes(kind).iter().map(|p| owned_key(p, infra_id)).collect()
}

/// True for any cluster's ownership label, whoever provisioned it: tagwarden never writes one.
pub fn is_ownership_label(key: &str) -> bool {
    [OPENSHIFT_OWNERSHIP_PREFIX, CAPG_OWNERSHIP_PREFIX].iter().any(|p| key.starts_with(p))
}

fn owned_key(prefix: &str, infra_id: &str) -> Result<String, Violation> {
    let key = format!("{prefix}{infra_id}");
    match check_label_key(Rules::Google, &key).into_iter().next() {
        None if !infra_id.is_empty() => Ok(key),
        None => Err(Violation::new(&key, Rule::KeyLength, "the cluster's infraID is empty".to_string())),
        Some(v) => Err(Violation {
            message: format!("ownership label for infraID {infra_id:?} is not a valid label key: {}", v.message),
            ..v
        }),
    }
}
