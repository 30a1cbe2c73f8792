//! Management clusters on Google Cloud publish their sets. A HyperShift management cluster with two
//! GCP `HostedCluster`s (and their `NodePool`s) and a Cluster API management cluster with one CAPG
//! `GCPCluster`, on the fake API server serving the real CRDs (HyperShift's TechPreviewNoUpgrade
//! set, the one with `spec.platform.gcp`; CAPG's `GCPCluster`): `tagwarden publish --from-cluster
//! --cluster-set hypershift|capg` writes one folder per cluster under `gs://…/clusters/*/` in the
//! GCS emulator, and `tagwarden sweep` enforces every published cluster on the fake Google APIs.
//! Every owned resource ends with its own cluster's labels (and CAPG's Resource Manager tag), nothing
//! of another cluster is written, and a day-2 edit of a `HostedCluster`'s `resourceLabels` (mutable,
//! unlike OpenShift's) reaches every resource of that cluster in one publish and one sweep.

use serde_json::{json, Value};
use tagwarden_testkit::kube_api::FakeApi;

use crate::support::{json_of, stderr, Env};

const NS: &str = "clusters";
const FLEET: &str = "fleet";

fn labels(pairs: &[(&str, &str)]) -> Value {
    json!(pairs.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>())
}

/// A GCP HostedCluster as the TechPreviewNoUpgrade CRD admits it (the required `project`, `region`,
/// `networkConfig` and `workloadIdentity`, whose service accounts must be the project's).
fn hosted_cluster(name: &str, infra: &str, resource_labels: Value) -> Value {
    let sa = |who: &str| format!("{who}@my-project-123.iam.gserviceaccount.com");
    let publish = |service: &str, kind: &str| json!({"service": service, "servicePublishingStrategy": {"type": kind}});
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
            "pullSecret": {"name": format!("{name}-pull-secret")},
            "infraID": infra,
            "platform": {"type": "GCP", "gcp": {
                "project": "my-project-123", "region": "us-central1",
                "networkConfig": {"network": {"name": "hcp-network"}, "privateServiceConnectSubnet": {"name": "hcp-psc"}},
                "workloadIdentity": {"projectNumber": "123456789012", "poolID": "hcp-wif-pool", "providerID": "hcp-wif-provider",
                    "serviceAccountsEmails": {"nodePool": sa("nodepool"), "controlPlane": sa("controlplane"),
                        "cloudController": sa("cloudcontroller"), "storage": sa("storage"),
                        "imageRegistry": sa("imageregistry"), "network": sa("network")}},
                "resourceLabels": resource_labels}},
            "services": [publish("APIServer", "LoadBalancer"), publish("OAuthServer", "Route"),
                         publish("Konnectivity", "Route"), publish("Ignition", "Route")]
        }
    })
}

/// `resource_labels`: `null` leaves the field out (the CRD refuses an empty list: `minItems: 1`).
fn node_pool(name: &str, cluster: &str, resource_labels: Value) -> Value {
    let mut gcp = json!({"machineType": "n2-standard-4", "subnet": "hcp-subnet", "zone": "us-central1-a"});
    if !resource_labels.is_null() {
        gcp["resourceLabels"] = resource_labels;
    }
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterName": cluster, "replicas": 2, "management": {"upgradeType": "Replace"},
                 "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
                 "platform": {"type": "GCP", "gcp": gcp}}
    })
}

/// A CAPG GCPCluster of Cluster API `Cluster` `cluster`, with a Resource Manager tag.
fn gcp_cluster(cluster: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "GCPCluster",
        "metadata": {"name": format!("{cluster}-x8d2q"), "namespace": FLEET,
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": cluster, "uid": format!("uid-{cluster}")}]},
        "spec": {"project": "p-1", "region": "us-central1", "network": {},
                 "additionalLabels": {"team": "capg", "cost-center": "cc-7"},
                 "resourceManagerTags": [{"parentID": "123456789012", "key": "environment", "value": "production"}]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypershift_and_capg_management_clusters_publish_their_sets_and_each_cluster_is_enforced() {
    // --- the management clusters, through the real CRDs ---
    let api = FakeApi::start().await;
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-1", "hcg1-7xk2p", labels(&[("team", "one")])));
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-2", "hcg2-7xk2p", labels(&[("team", "two")])));
    api.put_custom("nodepools", NS, node_pool("hc-1-workers", "hc-1", labels(&[("tier", "gpu")])));
    api.put_custom("nodepools", NS, node_pool("hc-2-workers", "hc-2", Value::Null));
    // HyperShift's CRD refuses a label Google reserves, as the API server would.
    let refused =
        api.create_custom("hostedclusters", NS, hosted_cluster("hc-x", "hcgx-7xk2p", labels(&[("goog-x", "y")])));
    assert!(refused.is_err_and(|s| s["code"] == 422), "the CRD's rule: !self.startsWith('goog')");
    api.put_custom("gcpclusters", FLEET, gcp_cluster("w-g"));

    // --- the projects: each cluster's resources, drifted, and another cluster's ---
    let env = Env::new().await;
    let f = &env.fake;
    let production = f.add_tag_value("123456789012/environment/production");
    let drift = [("team", "someone-else")];
    let owned = |key: &str| -> Vec<(String, String)> {
        std::iter::once((key.to_string(), "owned".to_string()))
            .chain(drift.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect()
    };
    let add = |project: &str, zone: &str, name: &str, key: &str| {
        let pairs = owned(key);
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        f.add_instance(project, zone, name, &pairs)
    };
    // HyperShift on GCP creates through CAPG (`capg-cluster-<infraID>`); the hosted cluster's own
    // cloud provider labels what it creates `kubernetes-io-cluster-<infraID>`.
    let hc1_node = add("p-1", "us-central1-a", "hcg1-7xk2p-workers-abcde", "capg-cluster-hcg1-7xk2p");
    let hc1_lb = add("p-1", "us-central1-b", "hcg1-7xk2p-ingress", "kubernetes-io-cluster-hcg1-7xk2p");
    let hc2_node = add("p-2", "us-central1-a", "hcg2-7xk2p-workers-fghij", "capg-cluster-hcg2-7xk2p");
    let wg_node = add("p-1", "us-central1-a", "w-g-md-0-xk2vp", "capg-cluster-w-g");
    let other = add("p-2", "us-central1-b", "other-0", "kubernetes-io-cluster-other-1");

    // --- publish both sets ---
    let kubeconfig = std::env::temp_dir().join(format!("tagwarden-gcp-kinds-{}.kubeconfig", std::process::id()));
    std::fs::write(&kubeconfig, api.kubeconfig("tagwarden", None)).expect("kubeconfig");
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let set = format!("gs://{}/clusters/*/", env.bucket);
    let publish = |kind: &str| {
        env.run(&[
            "publish",
            "--from-cluster",
            "--cluster-set",
            kind,
            "--kubeconfig",
            &kubeconfig,
            "--to",
            &set,
            "--json",
        ])
    };
    let out = publish("hypershift");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written: Vec<String> = json_of(&out)["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["outcome"]["result"] == "written")
        .filter_map(|r| r["cluster"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(written, ["hcg1-7xk2p", "hcg2-7xk2p"], "{}", String::from_utf8_lossy(&out.stdout));
    let doc = env.object("clusters/hcg1-7xk2p/10-cluster.yaml").await.expect("hc-1's document");
    let doc = String::from_utf8(doc).expect("UTF-8");
    assert!(doc.contains("clusterKind: HyperShift") && doc.contains("team: one"), "{doc}");
    assert!(doc.contains("NodePool clusters/hc-1-workers"), "the pool's label is left out, and said: {doc}");
    let out = publish("capg");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = env.object("clusters/w-g/10-cluster.yaml").await.expect("w-g's document");
    let doc = String::from_utf8(doc).expect("UTF-8");
    assert!(doc.contains("123456789012/environment: production"), "CAPG's tag is the policy's: {doc}");

    // --- one sweep of every published cluster ---
    let sweep = || {
        env.run(&[
            "sweep",
            "--policy",
            &set,
            "--scope",
            "folders/7",
            "--cluster",
            "hcg1-7xk2p",
            "--cluster",
            "hcg2-7xk2p",
            "--cluster",
            "w-g",
            "--json",
        ])
    };
    let out = sweep();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = json_of(&out);
    assert_eq!((summary["owned"].as_u64(), summary["written"].as_u64()), (Some(4), Some(4)), "{summary:#}");
    let team = |r: &str| env.labels(r).get("team").cloned().unwrap_or_default();
    assert_eq!([team(&hc1_node), team(&hc1_lb), team(&hc2_node), team(&wg_node)], ["one", "one", "two", "capg"]);
    assert_eq!(env.labels(&wg_node).get("cost-center").map(String::as_str), Some("cc-7"));
    assert!(!env.labels(&hc1_node).contains_key("tier"), "a pool's labels name no resource: not enforced");
    assert_eq!(f.tag_bindings(&wg_node), vec![production], "CAPG's Resource Manager tag, bound");
    assert!(f.tag_bindings(&hc1_node).is_empty(), "HyperShift on GCP has no Resource Manager tags");
    assert_eq!(team(&other), "someone-else", "another cluster's: untouched");

    // --- day 2: hc-1's labels change (HyperShift's are mutable); one publish, one sweep ---
    api.edit_custom("hostedclusters", NS, "hc-1", |o| {
        o["spec"]["platform"]["gcp"]["resourceLabels"] = labels(&[("team", "one"), ("env", "prod")]);
    })
    .expect("resourceLabels are mutable");
    let out = publish("hypershift");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    f.clear_log();
    let out = env.run(&["sweep", "--policy", &set, "--scope", "folders/7", "--cluster", "hcg1-7xk2p", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for r in [&hc1_node, &hc1_lb] {
        assert_eq!(env.labels(r).get("env").map(String::as_str), Some("prod"), "{r}");
    }
    assert_eq!(f.counters().writes, 2, "one write per resource of hc-1, nothing else");
    assert!(!env.labels(&hc2_node).contains_key("env"), "hc-2 is not edited");
}
