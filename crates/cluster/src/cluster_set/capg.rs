//! Cluster API on Google Cloud: a CAPG `GCPCluster` → its workload cluster's policy of labels, its
//! cluster named as [`super::cluster_api`] names CAPA's and CAPZ's (the owning `Cluster`).
//!
//! CAPG (kubernetes-sigs/cluster-api-provider-gcp, `api/v1beta1`): a `GCPCluster`'s
//! `spec.additionalLabels` (a map, `Labels`) are the labels of everything CAPG creates for the
//! cluster (`cloud/scope/cluster.go` `AdditionalLabels`, merged under each machine's own in
//! `machine.go`), the ownership label `capg-cluster-<Cluster name>: owned` beside them
//! (`labels.go` `Build`, `ClusterTagKey`). `Build` lowercases every additional key and value, so
//! the policy holds them lowercased, as they are on the resources; two keys that lowercase alike
//! are written in Go's map order, which is random, so both are left out. CAPG's own `capg-`
//! keys are left out as the other providers' own are. `spec.resourceManagerTags` (Resource
//! Manager tags, `{parentID, key, value}`, bound to what CAPG creates) join them as the policy's
//! `<parentID>/<key>: <value>` entries, as they are (tags are case-sensitive, and CAPG does not
//! lowercase them). Machine-level labels (`GCPMachineTemplate`) are not read.
//! Read at commit 5e0bb3b249cab59aa2720f03094a172fd153666b, whose `GCPCluster` CRD the tests serve.

use serde_json::{Map, Value};
use tagwarden_core::cloud::Cloud;
use tagwarden_core::gcp::TagRef;

use super::cluster_api::document;
use super::{Resource, Translated};

pub const GCP_CLUSTERS: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta1",
    kind: "GCPCluster",
    plural: "gcpclusters",
};

/// The workload cluster and its document, from a CAPG `GCPCluster`: its labels and tags.
pub fn gcp_document(object: &Value) -> Translated {
    let clean = |labels, path: &str, notes: &mut Vec<String>| {
        let mut out = capg_labels(labels, path, notes);
        let tags = object.pointer("/spec/resourceManagerTags").and_then(Value::as_array).into_iter().flatten();
        for (i, t) in tags.enumerate() {
            let field = |f: &str| t.get(f).and_then(Value::as_str).map(str::to_owned);
            match (field("parentID"), field("key"), field("value")) {
                (Some(parent_id), Some(key), Some(value)) => {
                    let (key, value) = TagRef { parent_id, key, value }.entry();
                    out.insert(key, Value::String(value));
                }
                _ => notes.push(format!(
                    "left out: spec.resourceManagerTags[{i}] (not {{parentID, key, value}}, which CAPG's CRD requires)"
                )),
            }
        }
        out
    };
    document(object, Cloud::Gcp, "GCPCluster", None, clean, |_, _| Ok(Vec::new()))
}

/// CAPG's additional labels as CAPG writes them (`labels.go` `Build`: key and value lowercased),
/// less CAPG's own `capg-` keys and the ownership labels, and less keys that lowercase alike
/// (which one CAPG writes is Go's random map order); each left out or changed is named in `notes`.
pub(super) fn capg_labels(labels: Map<String, Value>, path: &str, notes: &mut Vec<String>) -> Map<String, Value> {
    let mut out = Map::new();
    let mut clashing: Vec<String> = Vec::new();
    for (k, v) in &labels {
        let (key, value) = (k.to_lowercase(), v.as_str().unwrap_or_default().to_lowercase());
        if key.starts_with(tagwarden_core::gcp::CAPG_PREFIX) || tagwarden_core::gcp::is_ownership_label(&key) {
            notes.push(format!("left out: {path}: {k} (the provider sets it; tagwarden never writes it)"));
            continue;
        }
        if labels.keys().any(|other| other != k && other.to_lowercase() == key) {
            clashing.push(k.clone());
            continue;
        }
        if key != *k || value != v.as_str().unwrap_or_default() {
            notes.push(format!("{path}: {k} lowercased as CAPG writes it ({key}: {value})"));
        }
        out.insert(key, Value::String(value));
    }
    if !clashing.is_empty() {
        notes.push(format!(
            "left out: {path}: {} (CAPG lowercases keys, and which of these it writes is random: keep one)",
            clashing.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tagwarden_core::cloud::ClusterKind;
    use tagwarden_core::policy::load::load_one;

    /// CAPG `labels.go` `Build`: additional labels lowercased; `capg-` keys are CAPG's own.
    #[test]
    fn a_gcp_cluster_is_its_clusters_labels_as_capg_writes_them() {
        let object = json!({
            "metadata": {"name": "g-1-abcde", "namespace": "fleet",
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "g-1", "uid": "u"}]},
            "spec": {"project": "my-project", "region": "us-central1", "network": {},
                     "additionalLabels": {"team": "a", "Cost": "CC42", "capg-role": "node", "Env": "x", "env": "y"},
                     "resourceManagerTags": [{"parentID": "123456789012", "key": "env", "value": "prod"}]}
        });
        let (cluster, text) = gcp_document(&object).expect("a document");
        assert_eq!(cluster, "g-1");
        let policy = load_one("g-1", &text).expect("the loader takes it");
        assert_eq!((policy.kind, policy.cloud), (ClusterKind::ClusterApi, Some(Cloud::Gcp)));
        let labels: Vec<String> = policy.status.iter().map(|t| format!("{}={}", t.key, t.value)).collect();
        assert_eq!(labels, ["123456789012/env=prod", "cost=cc42", "team=a"], "{text}");
        assert!(tagwarden_core::policy::validate::policy(&policy, Cloud::Gcp).is_empty(), "{text}");
        assert!(text.contains("GCPCluster fleet/g-1-abcde (spec.additionalLabels) of Cluster fleet/g-1"), "{text}");
        assert!(text.contains("spec.additionalLabels: Cost lowercased as CAPG writes it (cost: cc42)"), "{text}");
        assert!(text.contains("left out: spec.additionalLabels: capg-role (the provider sets it"), "{text}");
        assert!(text.contains("left out: spec.additionalLabels: Env, env (CAPG lowercases keys"), "{text}");
        // An invalid label is the loader's and the validator's to refuse, naming it and the fix.
        let mut bad = object.clone();
        bad["spec"]["additionalLabels"] = json!({"goog-owner": "x", "team": "ü"});
        let (_, text) = gcp_document(&bad).expect("a document");
        let v = tagwarden_core::policy::validate::policy(&load_one("g-1", &text).expect("loads"), Cloud::Gcp);
        let keys: Vec<&str> = v.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(keys, ["goog-owner", "team"], "{v:#?}");
        assert!(v[0].message.contains("choose another key") && v[1].message.contains("allowed are"), "{v:#?}");
    }
}
