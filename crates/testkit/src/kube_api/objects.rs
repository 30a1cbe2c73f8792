//! Custom resources the tests put on the fake API server, as the tools that make them leave them.

use serde_json::{json, Value};

/// A HostedCluster in `namespace` as `hcp create cluster aws` leaves it: the roles named after
/// the cluster, `tags` (a `resourceTags` list of `{"key", "value"}`) and the ownership tag
/// HyperShift's controller adds to `resourceTags` itself (`reconcileAWSResourceTags`).
pub fn hosted_cluster(name: &str, namespace: &str, infra: &str, tags: Value) -> Value {
    let role = |r: &str| format!("arn:aws:iam::111122223333:role/{name}-{r}");
    let mut tags = tags.as_array().cloned().unwrap_or_default();
    tags.push(json!({"key": format!("kubernetes.io/cluster/{infra}"), "value": "owned"}));
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
            "pullSecret": {"name": format!("{name}-pull-secret")},
            "infraID": infra,
            "platform": {"type": "AWS", "aws": {
                "region": "us-east-1",
                "rolesRef": {"controlPlaneOperatorARN": role("cpo"), "imageRegistryARN": role("ir"), "ingressARN": role("ingress"),
                             "kubeCloudControllerARN": role("kcc"), "networkARN": role("net"),
                             "nodePoolManagementARN": role("npm"), "storageARN": role("storage")},
                "resourceTags": tags}},
            "services": [
                {"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}},
                {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route"}},
                {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route"}},
                {"service": "Ignition", "servicePublishingStrategy": {"type": "Route"}}]
        }
    })
}
