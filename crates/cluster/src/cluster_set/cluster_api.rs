//! Cluster API: a CAPA `AWSCluster` or a CAPZ `AzureCluster` → its workload cluster's policy.
//!
//! - The cluster is the Cluster API `Cluster` that owns the object (its `ownerReferences` entry
//!   of kind `Cluster`, else the `cluster.x-k8s.io/cluster-name` label): CAPA and CAPZ name the
//!   ownership keys after it (`ClusterTagKey(scope.Name())`, the `Cluster`'s name), and mark what
//!   they create `owned` under their own key and, for the cloud provider, under
//!   `kubernetes.io/cluster/<name>` (AWS) or `kubernetes.io_cluster_<name>` (Azure)
//!   (`ClusterKind::ClusterApi`).
//! - `spec.additionalTags` (a map; CAPA `Tags`, CAPZ `Tags`) are every owned resource's tags.
//!   Machine-level additional tags (`AWSMachineTemplate`, `AzureMachineTemplate`) are not read
//!   yet: no tag on an instance names its template, so they would need the machines' instance
//!   IDs (see the closing note).

use serde_json::{json, Value};

use super::{native_document, string_map, Resource, Translated};

pub const AWS_CLUSTERS: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "AWSCluster",
    plural: "awsclusters",
};
pub const AZURE_CLUSTERS: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta1",
    kind: "AzureCluster",
    plural: "azureclusters",
};

/// The label Cluster API puts on the objects of a cluster (`clusterv1.ClusterNameLabel`).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// The workload cluster and its document, from a CAPA `AWSCluster`.
pub fn aws_document(object: &Value) -> Translated {
    document(object, "aws", "AWSCluster")
}

/// The workload cluster and its document, from a CAPZ `AzureCluster`.
pub fn azure_document(object: &Value) -> Translated {
    document(object, "azure", "AzureCluster")
}

fn document(object: &Value, cloud: &str, kind: &str) -> Translated {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let Some(cluster) = owning_cluster(object) else {
        return Err((
            None,
            format!(
                "{kind} {namespace}/{name} has no owning Cluster yet (no ownerReference of kind Cluster, no {CLUSTER_NAME_LABEL} label): its ownership tags are named after that Cluster"
            ),
        ));
    };
    let tags = string_map(object.pointer("/spec/additionalTags"), "spec.additionalTags")
        .map_err(|e| (Some(cluster.clone()), e))?;
    let policy = json!({
        "version": 1,
        "cloud": cloud,
        "clusterKind": "ClusterAPI",
        "infraID": cluster,
        "tags": tags,
    });
    let sources = [format!("{kind} {namespace}/{name} (spec.additionalTags) of Cluster {namespace}/{cluster}")];
    native_document(&sources, &policy).map(|text| (cluster.clone(), text)).map_err(|e| (Some(cluster.clone()), e))
}

/// The name of the `Cluster` that owns `object`.
fn owning_cluster(object: &Value) -> Option<String> {
    let owners = object.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    let by_owner = owners.into_iter().flatten().find(|o| {
        o.get("kind").and_then(Value::as_str) == Some("Cluster")
            && o.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("cluster.x-k8s.io/"))
    });
    by_owner
        .and_then(|o| o.get("name"))
        .or_else(|| object.pointer("/metadata/labels").and_then(|l| l.get(CLUSTER_NAME_LABEL)))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::cloud::{Cloud, ClusterKind};
    use tagwarden_core::policy::load::load_one;

    #[test]
    fn an_aws_cluster_is_its_clusters_policy() {
        let object = json!({
            "metadata": {"name": "w-1-abcde", "namespace": "fleet",
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "w-1", "uid": "u"}]},
            "spec": {"region": "eu-west-1", "additionalTags": {"team": "a", "cost": "7"}}
        });
        let (cluster, text) = aws_document(&object).expect("a document");
        assert_eq!(cluster, "w-1", "named after the owning Cluster, not the AWSCluster");
        let policy = load_one("w-1", &text).expect("the loader takes it");
        assert_eq!((policy.kind, policy.cloud), (ClusterKind::ClusterApi, Some(Cloud::Aws)));
        assert_eq!(policy.status.len(), 2);
    }

    #[test]
    fn a_name_cannot_add_lines_to_the_document() {
        let object = json!({
            "metadata": {"name": "w", "namespace": "n",
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "w-1\ntags: {evil: x}"}]},
            "spec": {"additionalTags": {"team": "a"}}
        });
        let (_, text) = aws_document(&object).expect("a document");
        assert!(!text.lines().any(|l| l.starts_with("tags: {evil")), "{text}");
        // The cluster name itself is the folder, which the publish refuses unless it is an infraID.
        assert!(tagwarden_core::policy::clusters::valid_infra_id("w-1\ntags: {evil: x}").is_err());
    }

    #[test]
    fn the_label_names_the_cluster_when_no_owner_does_and_neither_is_refused() {
        let labelled = json!({"metadata": {"name": "z", "namespace": "n", "labels": {CLUSTER_NAME_LABEL: "z-1"}},
                              "spec": {"location": "westeurope", "additionalTags": {"team": "b"}}});
        let (cluster, text) = azure_document(&labelled).expect("a document");
        assert_eq!(cluster, "z-1");
        assert_eq!(load_one("z", &text).expect("valid").cloud, Some(Cloud::Azure));
        let orphan = json!({"metadata": {"name": "z", "namespace": "n"}, "spec": {}});
        assert!(azure_document(&orphan).expect_err("no cluster").1.contains("no owning Cluster"));
        let bad = json!({"metadata": {"name": "z", "namespace": "n", "labels": {CLUSTER_NAME_LABEL: "z-1"}},
                         "spec": {"additionalTags": ["team=b"]}});
        assert!(azure_document(&bad).expect_err("not a map").1.contains("spec.additionalTags"));
    }
}
