//! HyperShift (`hypershift.openshift.io/v1beta1`): a `HostedCluster` and its `NodePool`s → the
//! hosted cluster's policy.
//!
//! - The cluster is `spec.infraID`; its resources carry `kubernetes.io/cluster/<infraID>=owned`
//!   (`ClusterKind::HyperShift`).
//! - `spec.platform.aws.resourceTags` (at most 25, mutable) are every owned resource's tags. HyperShift
//!   itself updates in place only "VPC Endpoints, EC2 instances, initial EBS volumes and
//!   default/endpoint security groups" (the field's documentation in the CRD): tagwarden carries a
//!   change to everything else it owns.
//! - A `NodePool`'s `spec.platform.aws.resourceTags` go on that pool's instances, "merged with
//!   HostedCluster scoped tags, and HostedCluster tags take precedence in case of conflicts" (the
//!   field's documentation). tagwarden's overrides win over its base tags, so a pool's override
//!   carries only the keys its HostedCluster does not set: the same result, with the reverse
//!   precedence of an ordinary override made explicit.

use serde_json::{json, Value};

use super::{key_value_list, native_document, Resource, Translated};

pub const HOSTED_CLUSTERS: Resource =
    Resource { group: "hypershift.openshift.io", version: "v1beta1", kind: "HostedCluster", plural: "hostedclusters" };
pub const NODE_POOLS: Resource =
    Resource { group: "hypershift.openshift.io", version: "v1beta1", kind: "NodePool", plural: "nodepools" };

/// The tag by which a pool's instances are told apart: CAPA names each instance after its
/// `AWSMachine` (`Name`), which HyperShift names after the pool, but a selector matches a tag's
/// whole value; HyperShift's own pool tag is exact.
pub const NODE_POOL_TAG: &str = "hypershift.openshift.io/nodePool";

/// The hosted cluster's infraID and document, from `hc` and the NodePools of its namespace
/// (`pools`; those of other HostedClusters are skipped by `spec.clusterName`).
pub fn document(hc: &Value, pools: &[Value]) -> Translated {
    let name = hc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let namespace = hc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let infra_id = hc.pointer("/spec/infraID").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let Some(infra_id) = infra_id else {
        return Err((
            None,
            "spec.infraID is empty: the hosted cluster has no infraID yet, so nothing of it can be owned".into(),
        ));
    };
    let refuse = |why: String| Err((Some(infra_id.clone()), why));
    match hc.pointer("/spec/platform/type").and_then(Value::as_str) {
        Some("AWS") => {}
        Some(other) => {
            return refuse(format!(
                "spec.platform.type is {other}: tagwarden reads the tags of AWS hosted clusters (spec.platform.aws.resourceTags); HyperShift's other platforms carry no resource tags field to enforce"
            ))
        }
        None => return refuse("spec.platform.type is not set".into()),
    }
    let tags = match key_value_list(hc.pointer("/spec/platform/aws/resourceTags"), "spec.platform.aws.resourceTags") {
        Ok(t) => t,
        Err(e) => return refuse(e),
    };
    let mut sources = vec![format!("HostedCluster {namespace}/{name} (spec.platform.aws.resourceTags)")];
    let mut overrides = Vec::new();
    let mut mine: Vec<&Value> =
        pools.iter().filter(|p| p.pointer("/spec/clusterName").and_then(Value::as_str) == Some(name)).collect();
    mine.sort_by_key(|p| p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string());
    for pool in mine {
        let pool_name = pool.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let path = format!("NodePool {namespace}/{pool_name} spec.platform.aws.resourceTags");
        let mut pool_tags = match key_value_list(pool.pointer("/spec/platform/aws/resourceTags"), &path) {
            Ok(t) => t,
            Err(e) => return refuse(e),
        };
        // HostedCluster tags take precedence: the pool's own value never reaches a key it sets.
        pool_tags.retain(|k, _| !tags.contains_key(k));
        if pool_tags.is_empty() {
            continue;
        }
        sources.push(format!("NodePool {namespace}/{pool_name} (spec.platform.aws.resourceTags)"));
        overrides.push(json!({
            "name": format!("NodePool {namespace}/{pool_name}"),
            "selector": {"type": "ec2:instance", "tag": {"key": NODE_POOL_TAG, "value": pool_name}},
            "tags": pool_tags,
        }));
    }
    let mut policy = json!({
        "version": 1,
        "cloud": "aws",
        "clusterKind": "HyperShift",
        "infraID": infra_id,
        "tags": tags,
    });
    if !overrides.is_empty() {
        policy["overrides"] = Value::Array(overrides);
    }
    native_document(&sources, &policy).map(|text| (infra_id.clone(), text)).map_err(|e| (Some(infra_id.clone()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::cloud::ClusterKind;
    use tagwarden_core::policy::load::load_one;

    fn hosted(name: &str, infra: &str, tags: Value) -> Value {
        json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
               "metadata": {"name": name, "namespace": "clusters"},
               "spec": {"infraID": infra, "platform": {"type": "AWS", "aws": {"region": "us-east-1", "resourceTags": tags}}}})
    }

    fn pool(name: &str, cluster: &str, tags: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "clusters"},
               "spec": {"clusterName": cluster, "platform": {"type": "AWS", "aws": {"resourceTags": tags}}}})
    }

    #[test]
    fn a_hosted_cluster_is_one_policy_and_its_pools_yield_to_it() {
        let hc = hosted("hc-1", "hc-1-x7k2p", json!([{"key": "team", "value": "a"}, {"key": "cost", "value": "1"}]));
        let pools = [
            pool("workers", "hc-1", json!([{"key": "team", "value": "pool-says"}, {"key": "tier", "value": "gpu"}])),
            pool("other", "hc-2", json!([{"key": "tier", "value": "never"}])),
            pool("plain", "hc-1", json!([{"key": "cost", "value": "pool"}])),
        ];
        let (infra, text) = document(&hc, &pools).expect("a document");
        assert_eq!(infra, "hc-1-x7k2p");
        let policy = load_one("hc", &text).expect("the loader takes it");
        assert_eq!(policy.kind, ClusterKind::HyperShift);
        assert_eq!(policy.infra_id.as_deref(), Some("hc-1-x7k2p"));
        // The HostedCluster's team wins over the pool's; the pool adds only tier; the pool whose
        // tags the HostedCluster all sets adds no override; hc-2's pool is not hc-1's.
        assert_eq!(policy.overrides.len(), 1, "{text}");
        let o = &policy.overrides[0];
        assert_eq!(o.tags.iter().map(|t| (t.key.as_str(), t.value.as_str())).collect::<Vec<_>>(), [("tier", "gpu")]);
        assert!(text.contains("NodePool clusters/workers") && !text.contains("never"), "{text}");
    }

    #[test]
    fn what_cannot_be_a_policy_says_why() {
        let mut hc = hosted("hc-1", "", json!([]));
        assert!(document(&hc, &[]).expect_err("no infraID").1.contains("spec.infraID"));
        hc["spec"]["infraID"] = json!("hc-1-x");
        hc["spec"]["platform"]["type"] = json!("KubeVirt");
        let (cluster, why) = document(&hc, &[]).expect_err("not AWS");
        assert_eq!((cluster.as_deref(), why.contains("KubeVirt")), (Some("hc-1-x"), true));
    }
}
