//! HyperShift (`hypershift.openshift.io/v1beta1`): a `HostedCluster` and its `NodePool`s → the
//! hosted cluster's policy.
//!
//! - The cluster is `spec.infraID`; its resources carry `kubernetes.io/cluster/<infraID>=owned`
//!   (`ClusterKind::HyperShift`).
//! - `spec.platform.aws.resourceTags` (at most 25, mutable) are every owned resource's tags. HyperShift
//!   itself updates in place only "VPC Endpoints, EC2 instances, initial EBS volumes and
//!   default/endpoint security groups" (the field's documentation in the CRD): tagwarden carries a
//!   change to everything else it owns.
//! - The HostedCluster controller writes the ownership tag itself into `resourceTags`
//!   (hypershift `hostedcluster_controller.go` `reconcileAWSResourceTags`): an ownership key is
//!   never a tag to enforce (tagwarden never writes one), so it is left out, and the document's
//!   header says so.
//! - A `NodePool`'s `spec.platform.aws.resourceTags` go on that pool's instances, "merged with
//!   HostedCluster scoped tags, and HostedCluster tags take precedence in case of conflicts" (the
//!   field's documentation), unless the HostedCluster's tag says `overridePolicy: Allow`
//!   (hypershift `nodepool/aws.go` `awsAdditionalTags`: `if !isHCTag || allowed`). tagwarden's
//!   overrides win over its base tags, so a pool's override carries the keys its HostedCluster
//!   does not set, and those whose HostedCluster tag allows the override: the same result.
//! - No EC2 tag names the pool. A pool's instances are named after it: CAPA tags each instance
//!   `Name=<AWSMachine name>`, the AWSMachine takes its Machine's name, and Cluster API names a
//!   Machine `<MachineSet>-<5 random>` and a MachineSet `<MachineDeployment>-<5 random>`, where
//!   HyperShift names the MachineDeployment after the pool (hypershift `nodepool/capi.go`; CAPI
//!   `machineset_controller.go`, `machinedeployment_rollout_planner.go`; inferred from their
//!   composition). So the override selects `Name` by `<pool>-?????-?????` (an `InPlace` pool's
//!   machines come from a MachineSet named after the pool: `<pool>-?????`), on the instances, their
//!   volumes and network interfaces, which CAPA tags alike. A pattern that would also select
//!   another pool's machines, or a pool name Cluster API would shorten in its machines' names,
//!   leaves that pool's tags out, and the document says so.
//!
//! On Google Cloud (`spec.platform.type: GCP`, behind HyperShift's `GCPPlatform` feature gate; read
//! at openshift/hypershift 3ee9615567acffaf3e3ee25c2ca2942d650565cf, `api/hypershift/v1beta1/gcp.go`):
//! - `spec.platform.gcp.resourceLabels` (`[]GCPResourceLabel`, `{key, value}`, at most 60, mutable:
//!   "Changes to this field will be propagated in-place to GCP resources where supported") are
//!   every owned resource's labels. HyperShift copies them into its CAPG `GCPCluster`'s
//!   `additionalLabels`, beside its own `hypershift-openshift-io-cluster` and
//!   `hypershift-openshift-io-infra-id` (`hostedcluster/internal/platform/gcp/gcp.go`,
//!   `support/k8sutil/constants.go`), which are never labels to enforce: left out, said in the
//!   document. A label's value may be left out there (`*string`, an empty label); a policy label
//!   needs a value, so such a label is left out and said to be.
//! - A NodePool's `spec.platform.gcp.resourceLabels` win over the HostedCluster's on that pool's
//!   instances and disks (`nodepool/gcp.go` `configureGCPLabels`), but no label names the pool
//!   (only the cluster and infraID labels above): they are left out, and the document says so.
//! - The `gcp` platform is in HyperShift's TechPreviewNoUpgrade CRDs only (the Default set has
//!   none), which the fake API server serves: the end-to-end test publishes two GCP hosted
//!   clusters through them.

use serde_json::{json, Value};

use tagwarden_core::cloud::Cloud;

use super::{key_value_list, native_document, NoPolicy, Resource, TagFieldError, Translated};

pub const HOSTED_CLUSTERS: Resource =
    Resource { group: "hypershift.openshift.io", version: "v1beta1", kind: "HostedCluster", plural: "hostedclusters" };
pub const NODE_POOLS: Resource =
    Resource { group: "hypershift.openshift.io", version: "v1beta1", kind: "NodePool", plural: "nodepools" };

/// The glob a pool's machines' `Name` matches (see the module's documentation): a `Replace` pool's
/// machines come from a MachineDeployment (`<pool>-<5>-<5>`), an `InPlace` pool's from a MachineSet
/// named after it (`<pool>-<5>`; hypershift `nodepool/capi.go`).
pub fn machine_name_pattern(pool: &str, in_place: bool) -> String {
    if in_place {
        format!("{pool}-?????")
    } else {
        format!("{pool}-?????-?????")
    }
}

/// What a pool's tags go on: CAPA tags the instance, its volumes and its network interfaces with
/// the machine's tags, `Name` included (CAPA `instances.go`, `ensureStorageTags`).
pub const MACHINE_RESOURCES: &str = "ec2:{instance,volume,network-interface}";

/// The longest pool name whose machines keep it whole: Cluster API trims a generated name to 58
/// characters before its 5 random ones (`names.go`), so a MachineSet `<pool>-<5>` keeps the pool's
/// name up to 52, and its machines `<pool>-<5>-<5>` up to 51 (inferred from those limits).
fn longest_pool_name(in_place: bool) -> usize {
    if in_place {
        57
    } else {
        51
    }
}

/// A `resourceTags` list less the ownership keys (named in `dropped`), with each key's
/// `overridePolicy`.
fn user_tags(
    list: Option<&Value>,
    path: &str,
    dropped: &mut Vec<String>,
) -> Result<(serde_json::Map<String, Value>, Vec<String>), TagFieldError> {
    let mut tags = key_value_list(list, path)?;
    tags.retain(|k, _| {
        let owner = Cloud::Aws.is_ownership_key(k);
        if owner {
            dropped.push(format!("{path}: {k} (an ownership tag, never enforced)"));
        }
        // Left out rather than the whole document refused by the loader for it.
        let reserved = !owner && tagwarden_core::policy::validate::is_k8s_io_key(k);
        if reserved {
            dropped.push(format!("{path}: {k} (in k8s.io/, which tagwarden's role may not write)"));
        }
        !owner && !reserved
    });
    let allowed = list
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("overridePolicy").and_then(Value::as_str) == Some("Allow"))
        .filter_map(|t| t.get("key").and_then(Value::as_str).map(str::to_owned))
        .collect();
    Ok((tags, allowed))
}

/// The hosted cluster's infraID and document, from `hc` and the NodePools of its namespace
/// (`pools`; those of other HostedClusters are skipped by `spec.clusterName`).
pub fn document(hc: &Value, pools: &[Value]) -> Translated {
    let name = hc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let namespace = hc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let infra_id = hc.pointer("/spec/infraID").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let Some(infra_id) = infra_id else {
        return Err((None, NoPolicy::NoInfraId));
    };
    let refuse = |why: NoPolicy| Err((Some(infra_id.clone()), why));
    match hc.pointer("/spec/platform/type").and_then(Value::as_str) {
        Some("AWS") => {}
        Some("GCP") => return gcp_document(hc, pools, &infra_id),
        Some(other) => return refuse(NoPolicy::NotAws(other.to_string())),
        None => return refuse(NoPolicy::NoPlatform),
    }
    let mut dropped = Vec::new();
    let (tags, allowed) = match user_tags(
        hc.pointer("/spec/platform/aws/resourceTags"),
        "spec.platform.aws.resourceTags",
        &mut dropped,
    ) {
        Ok(t) => t,
        Err(e) => return refuse(e.into()),
    };
    let mut sources = vec![format!("HostedCluster {namespace}/{name} (spec.platform.aws.resourceTags)")];
    let mut overrides = Vec::new();
    let mut mine: Vec<&Value> =
        pools.iter().filter(|p| p.pointer("/spec/clusterName").and_then(Value::as_str) == Some(name)).collect();
    mine.sort_by_key(|p| p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string());
    let shape = |p: &Value| {
        let name = p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let in_place = p.pointer("/spec/management/upgradeType").and_then(Value::as_str) == Some("InPlace");
        (name, in_place)
    };
    // A machine name each pool can give, to find a pattern that would also select another pool's.
    let samples: Vec<(String, String)> = mine
        .iter()
        .map(|p| {
            let (name, in_place) = shape(p);
            let sample = if in_place { format!("{name}-bcdfg") } else { format!("{name}-bcdfg-hjklm") };
            (name, sample)
        })
        .collect();
    for pool in mine {
        let (pool_name, in_place) = shape(pool);
        let pool_name = pool_name.as_str();
        let path = format!("NodePool {namespace}/{pool_name} spec.platform.aws.resourceTags");
        let mut pool_tags = match user_tags(pool.pointer("/spec/platform/aws/resourceTags"), &path, &mut dropped) {
            Ok((t, _)) => t,
            Err(e) => return refuse(e.into()),
        };
        // HostedCluster tags take precedence, unless they allow the pool's.
        pool_tags.retain(|k, _| !tags.contains_key(k) || allowed.contains(k));
        if pool_tags.is_empty() {
            continue;
        }
        let pattern = machine_name_pattern(pool_name, in_place);
        let glob = tagwarden_core::policy::Pattern::case_sensitive(&pattern);
        let clash = samples.iter().find(|(other, sample)| {
            other != pool_name && glob.as_ref().is_ok_and(|g: &tagwarden_core::policy::Pattern| g.is_match(sample))
        });
        if let Some((other, _)) = clash {
            dropped.push(format!(
                "NodePool {namespace}/{pool_name} tags: its machines cannot be told from NodePool {other}'s by name, so they are not enforced"
            ));
            continue;
        }
        if pool_name.len() > longest_pool_name(in_place) {
            dropped.push(format!(
                "NodePool {namespace}/{pool_name} tags: Cluster API shortens the names of its machines, so they are not enforced"
            ));
            continue;
        }
        sources.push(format!("NodePool {namespace}/{pool_name} (spec.platform.aws.resourceTags)"));
        overrides.push(json!({
            "name": format!("NodePool {namespace}/{pool_name}"),
            "selector": {"type": MACHINE_RESOURCES, "tag": {"key": "Name", "valuePattern": pattern}},
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
    sources.extend(dropped.into_iter().map(|d| format!("left out: {d}")));
    native_document(&sources, &policy).map(|text| (infra_id.clone(), text)).map_err(|e| (Some(infra_id.clone()), e))
}

/// The labels HyperShift writes itself on what it creates on Google Cloud (`support/k8sutil/constants.go`
/// `GCPLabelCluster`, `GCPLabelInfraID`).
const HYPERSHIFT_GCP_LABELS: &[&str] = &["hypershift-openshift-io-cluster", "hypershift-openshift-io-infra-id"];

/// A `resourceLabels` list (`{key, value?}`) as a map, less HyperShift's own labels, ownership
/// labels and labels without a value, each named in `dropped`.
fn gcp_labels(
    list: Option<&Value>,
    path: &str,
    dropped: &mut Vec<String>,
) -> Result<serde_json::Map<String, Value>, TagFieldError> {
    let mut out = serde_json::Map::new();
    let items = match list {
        None | Some(Value::Null) => return Ok(out),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(TagFieldError::NotAList { path: path.to_string() }),
    };
    for (index, item) in items.iter().enumerate() {
        let key = item.get("key").and_then(Value::as_str);
        let value = match item.get("value") {
            None | Some(Value::Null) => Some(""),
            Some(v) => v.as_str(),
        };
        let (Some(key), Some(value)) = (key, value) else {
            return Err(TagFieldError::NotKeyValue { path: path.to_string(), index });
        };
        if HYPERSHIFT_GCP_LABELS.contains(&key) || tagwarden_core::gcp::is_ownership_label(key) {
            dropped.push(format!("{path}: {key} (HyperShift's or an ownership label, never enforced)"));
        } else if value.is_empty() {
            dropped.push(format!("{path}: {key} (no value; a policy label needs one)"));
        } else {
            out.insert(key.to_string(), json!(value));
        }
    }
    Ok(out)
}

/// A GCP hosted cluster's document: its labels (see the module's documentation).
fn gcp_document(hc: &Value, pools: &[Value], infra_id: &str) -> Translated {
    let name = hc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let namespace = hc.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let fail = |e: TagFieldError| (Some(infra_id.to_string()), NoPolicy::from(e));
    let path = "spec.platform.gcp.resourceLabels";
    let mut dropped = Vec::new();
    let labels = gcp_labels(hc.pointer("/spec/platform/gcp/resourceLabels"), path, &mut dropped).map_err(fail)?;
    let mut mine: Vec<&Value> =
        pools.iter().filter(|p| p.pointer("/spec/clusterName").and_then(Value::as_str) == Some(name)).collect();
    mine.sort_by_key(|p| p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string());
    for pool in mine {
        let pool_name = pool.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let at = format!("NodePool {namespace}/{pool_name} spec.platform.gcp.resourceLabels");
        let pool_labels =
            gcp_labels(pool.pointer("/spec/platform/gcp/resourceLabels"), &at, &mut dropped).map_err(fail)?;
        if !pool_labels.is_empty() {
            let keys: Vec<&str> = pool_labels.keys().map(String::as_str).collect();
            dropped.push(format!(
                "{at}: {} (no label names the pool's instances, so its labels are not enforced)",
                keys.join(", ")
            ));
        }
    }
    let policy = json!({
        "version": 1,
        "cloud": "gcp",
        "clusterKind": "HyperShift",
        "infraID": infra_id,
        "tags": labels,
    });
    let mut sources = vec![format!("HostedCluster {namespace}/{name} ({path})")];
    sources.extend(dropped.into_iter().map(|d| format!("left out: {d}")));
    native_document(&sources, &policy)
        .map(|text| (infra_id.to_string(), text))
        .map_err(|e| (Some(infra_id.to_string()), e))
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
        let hc = hosted(
            "hc-1",
            "hc-1-x7k2p",
            json!([{"key": "team", "value": "a"}, {"key": "cost", "value": "1"},
                   {"key": "env", "value": "prod", "overridePolicy": "Allow"},
                   {"key": "kubernetes.io/cluster/hc-1-x7k2p", "value": "owned"}]),
        );
        let pools = [
            pool(
                "workers",
                "hc-1",
                json!([{"key": "team", "value": "pool-says"}, {"key": "tier", "value": "gpu"}, {"key": "env", "value": "dev"}]),
            ),
            pool("other", "hc-2", json!([{"key": "tier", "value": "never"}])),
            pool("plain", "hc-1", json!([{"key": "cost", "value": "pool"}])),
        ];
        let (infra, text) = document(&hc, &pools).expect("a document");
        assert_eq!(infra, "hc-1-x7k2p");
        let policy = load_one("hc", &text).expect("the loader takes it");
        assert_eq!(policy.kind, ClusterKind::HyperShift);
        assert_eq!(policy.infra_id.as_deref(), Some("hc-1-x7k2p"));
        // The HostedCluster's team wins over the pool's, its env allows the pool's; the pool adds
        // tier; the pool whose tags the HostedCluster all sets adds no override; hc-2's pool is
        // not hc-1's; the ownership tag HyperShift lists is left out, and said to be.
        assert_eq!(policy.overrides.len(), 1, "{text}");
        let o = &policy.overrides[0];
        let pairs =
            |t: &[tagwarden_core::policy::Tag]| t.iter().map(|t| (t.key.clone(), t.value.clone())).collect::<Vec<_>>();
        assert_eq!(pairs(&o.tags), [("env".into(), "dev".into()), ("tier".into(), "gpu".into())]);
        assert_eq!(pairs(&policy.status).len(), 3, "team, cost, env: {text}");
        assert!(text.contains("NodePool clusters/workers") && !text.contains("tier: never"), "{text}");
        assert!(text.contains("left out: spec.platform.aws.resourceTags: kubernetes.io/cluster/hc-1-x7k2p"), "{text}");

        // The pool's instances, by name; another pool's whose name starts with this one's, not.
        let instance = |name: &str| {
            let tags = [("Name".to_string(), name.to_string())].into();
            let r = tagwarden_core::resource::ResourceRef { id: "i-1".into(), kind: "ec2:instance".into(), arn: None };
            o.selector.matches(Cloud::Aws, &r, &tags)
        };
        assert!(instance("workers-7xk2p-9bq4z"));
        let volume = |name: &str| {
            let tags = [("Name".to_string(), name.to_string())].into();
            let r = tagwarden_core::resource::ResourceRef { id: "vol-1".into(), kind: "ec2:volume".into(), arn: None };
            o.selector.matches(Cloud::Aws, &r, &tags)
        };
        assert!(volume("workers-7xk2p-9bq4z"), "CAPA tags the machine's volumes alike");
        assert!(!instance("workers-gpu-7xk2p-9bq4z") && !instance("Workers-7xk2p-9bq4z") && !instance("workers-7xk2p"));
    }

    #[test]
    fn pools_whose_machines_cannot_be_told_apart_are_left_out_and_said_to_be() {
        let hc = hosted("hc-1", "hc-1-x7k2p", json!([{"key": "team", "value": "a"}]));
        let mut in_place = pool("workers-large", "hc-1", json!([{"key": "tier", "value": "big"}]));
        in_place["spec"]["management"] = json!({"upgradeType": "InPlace"});
        let mut long = pool(&"p".repeat(52), "hc-1", json!([{"key": "tier", "value": "long"}]));
        long["spec"]["management"] = json!({"upgradeType": "Replace"});
        // `workers-?????-?????` would match `workers-large-ab3de`, an InPlace machine of the other.
        let pools = [pool("workers", "hc-1", json!([{"key": "tier", "value": "small"}])), in_place, long];
        let (_, text) = document(&hc, &pools).expect("a document");
        let policy = load_one("hc", &text).expect("valid");
        let names: Vec<_> = policy.overrides.iter().filter_map(|o| o.name.clone()).collect();
        assert_eq!(names, ["NodePool clusters/workers-large"], "{text}");
        let o = &policy.overrides[0];
        let tags = [("Name".to_string(), "workers-large-ab3de".to_string())].into();
        let r = tagwarden_core::resource::ResourceRef { id: "i-1".into(), kind: "ec2:instance".into(), arn: None };
        assert!(o.selector.matches(Cloud::Aws, &r, &tags), "an InPlace pool's machine: <pool>-<5>");
        assert!(
            text.contains(
                "NodePool clusters/workers tags: its machines cannot be told from NodePool clusters/workers-large"
            ) || text.contains("cannot be told from NodePool workers-large"),
            "{text}"
        );
        assert!(text.contains("shortens the names of its machines"), "{text}");
    }

    #[test]
    fn a_gcp_hosted_cluster_is_its_labels() {
        let hc = json!({"metadata": {"name": "hc-g", "namespace": "clusters"},
            "spec": {"infraID": "hc-g-4xk2p", "platform": {"type": "GCP", "gcp": {"project": "my-project", "region": "us-central1",
                "resourceLabels": [{"key": "team", "value": "platform"}, {"key": "cost-center", "value": "cc_42"},
                                   {"key": "empty"}, {"key": "hypershift-openshift-io-cluster", "value": "hc-g"}]}}}});
        let pools = [json!({"metadata": {"name": "workers", "namespace": "clusters"},
            "spec": {"clusterName": "hc-g", "platform": {"type": "GCP", "gcp": {"resourceLabels": [{"key": "tier", "value": "gpu"}]}}}})];
        let (infra, text) = document(&hc, &pools).expect("a document");
        assert_eq!(infra, "hc-g-4xk2p");
        let policy = load_one("hc", &text).expect("the loader takes it");
        assert_eq!((policy.kind, policy.cloud), (ClusterKind::HyperShift, Some(Cloud::Gcp)));
        let labels: Vec<String> = policy.status.iter().map(|t| format!("{}={}", t.key, t.value)).collect();
        assert_eq!(labels, ["cost-center=cc_42", "team=platform"], "{text}");
        assert!(text.contains("left out: spec.platform.gcp.resourceLabels: empty (no value"), "{text}");
        assert!(text.contains("hypershift-openshift-io-cluster (HyperShift's"), "{text}");
        assert!(
            text.contains("NodePool clusters/workers spec.platform.gcp.resourceLabels: tier (no label names"),
            "{text}"
        );
        assert!(policy.overrides.is_empty());
    }

    #[test]
    fn what_cannot_be_a_policy_says_why() {
        let mut hc = hosted("hc-1", "", json!([]));
        assert!(document(&hc, &[]).expect_err("no infraID").1.to_string().contains("spec.infraID"));
        hc["spec"]["infraID"] = json!("hc-1-x");
        hc["spec"]["platform"]["type"] = json!("KubeVirt");
        let (cluster, why) = document(&hc, &[]).expect_err("not AWS");
        assert_eq!((cluster.as_deref(), why.to_string().contains("KubeVirt")), (Some("hc-1-x"), true));
    }
}
