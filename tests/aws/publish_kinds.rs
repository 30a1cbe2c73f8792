//! Every kind of cluster publishes its tags. A HyperShift management cluster (three
//! `HostedCluster`s with `NodePool`s, and one whose tags tagwarden must refuse) and a Cluster API
//! management cluster (two `AWSCluster`s) on the fake API server, which serves the real CRDs
//! (`tests/fixtures/hypershift/`, `tests/fixtures/cluster-api/`: pruning, defaulting, OpenAPI and
//! CEL validation). `tagwarden publish --from-cluster --cluster-set` publishes each set into one
//! S3 cluster set in moto; `tagwarden sweep` enforces it. Every owned resource ends with its own
//! cluster's tags and each kind's precedence, a Cluster API cluster's resources are owned by
//! either of its keys, nothing of another cluster, a shared resource or a refused cluster is
//! written, and a day-2 edit of a `HostedCluster`'s `resourceTags` reaches what HyperShift itself
//! leaves behind (an S3 bucket) in one publish and the function's one policy-change sweep.

#![cfg(all(feature = "aws", feature = "kube"))]

use crate::{kube_api, support};

use kube_api::FakeApi;
use serde_json::{json, Value};
use tagwarden::aws::sdk::ec2::types::{ResourceType, Tag as Ec2Tag, TagSpecification};
use tagwarden::aws::{Clients, Tagger};
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

const NS: &str = "clusters";
const FLEET: &str = "fleet";

fn tag_list(tags: &[(&str, &str)]) -> Value {
    json!(tags.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>())
}

/// A HostedCluster as `hcp create cluster aws` leaves it, with a field the CRD does not know.
fn hosted_cluster(name: &str, infra: &str, tags: Value) -> Value {
    let mut hc = kube_api::objects::hosted_cluster(name, NS, infra, tags);
    // Unknown to the CRD: pruned by the API server, never published.
    hc["spec"]["notAField"] = json!(true);
    hc
}

fn node_pool(name: &str, cluster: &str, tags: Value) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"clusterName": cluster, "replicas": 2, "management": {"upgradeType": "Replace"},
                 "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
                 "platform": {"type": "AWS", "aws": {"instanceType": "m5.large", "subnet": {"id": "subnet-0123456789abcdef0"},
                                                    "resourceTags": tags}}}
    })
}

/// A CAPA AWSCluster of Cluster API `Cluster` `cluster`, as Cluster API leaves it (owner, label).
fn aws_cluster(cluster: &str, tags: Value) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSCluster",
        "metadata": {"name": format!("{cluster}-x8d2q"), "namespace": FLEET,
                     "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": cluster, "uid": format!("uid-{cluster}")}]},
        "spec": {"region": "us-east-1", "additionalTags": tags}
    })
}

fn ec2_tags(pairs: &[(&str, &str)]) -> Vec<Ec2Tag> {
    pairs.iter().map(|(k, v)| Ec2Tag::builder().key(*k).value(*v).build()).collect()
}

async fn instance(c: &Clients, account: &str, pairs: &[(&str, &str)]) -> ResourceRef {
    let image = c.ec2.describe_images().send().await.expect("images");
    let image = image.images().first().and_then(|i| i.image_id()).expect("moto ships AMIs").to_string();
    let spec =
        TagSpecification::builder().resource_type(ResourceType::Instance).set_tags(Some(ec2_tags(pairs))).build();
    let run = c.ec2.run_instances().image_id(&image).min_count(1).max_count(1).tag_specifications(spec);
    let out = run.send().await.expect("instance");
    let id = out.instances().first().and_then(|i| i.instance_id()).expect("an instance").to_string();
    ResourceRef::ec2(&id, "us-east-1", account)
}

async fn bucket(c: &Clients, name: &str, pairs: &[(&str, &str)]) -> ResourceRef {
    use tagwarden::aws::sdk::s3::types::{Tag, Tagging};
    c.s3.create_bucket().bucket(name).send().await.expect("bucket");
    let set = pairs.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build().expect("tag")).collect();
    let tagging = Tagging::builder().set_tag_set(Some(set)).build().expect("tagging");
    c.s3.put_bucket_tagging().bucket(name).tagging(tagging).send().await.expect("bucket tags");
    ResourceRef::s3_bucket(name, "us-east-1")
}

async fn tags(c: &Clients, r: &ResourceRef) -> TagMap {
    Tagger::new(c.clone()).read(r).await.expect("read")
}

fn cli(env: &[(&'static str, String)], args: &[&str]) -> (i32, Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("tagwarden runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
}

fn assert_tags(what: &str, got: &TagMap, want: &[(&str, Option<&str>)]) {
    for (k, v) in want {
        assert_eq!(got.get(*k).map(String::as_str), *v, "{what}: {k} in {got:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypershift_and_cluster_api_management_clusters_publish_their_sets_and_each_cluster_is_enforced() {
    // --- the management clusters, through the real CRDs ---
    let api = FakeApi::start().await;
    let hc_tags = |team: &str| tag_list(&[("team", team), ("cost-center", "42")]);
    let mut a_tags = hc_tags("a").as_array().cloned().unwrap_or_default();
    a_tags.push(json!({"key": "env", "value": "prod", "overridePolicy": "Allow"}));
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-a", "hca-7xk2p", Value::Array(a_tags)));
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-b", "hcb-7xk2p", hc_tags("b")));
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-c", "hcc-7xk2p", hc_tags("c")));
    // A key the CRD takes (':' is in its pattern) and AWS reserves: tagwarden refuses this cluster.
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-bad", "hcx-7xk2p", tag_list(&[("aws:team", "x")])));
    // hc-a's pool: its team loses to the HostedCluster's, its env wins (overridePolicy Allow).
    api.put_custom(
        "nodepools",
        NS,
        node_pool("hc-a-workers", "hc-a", tag_list(&[("team", "pool"), ("env", "dev"), ("tier", "gpu")])),
    );
    api.put_custom("nodepools", NS, node_pool("hc-b-workers", "hc-b", tag_list(&[("tier", "cpu")])));
    api.put_custom("nodepools", NS, node_pool("hc-c-workers", "hc-c", json!([])));
    // The real CRD refuses what HyperShift's would: a 26th tag.
    let many: Vec<(String, String)> = (0..26).map(|i| (format!("k{i}"), "v".to_string())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let refused = api.create_custom("hostedclusters", NS, hosted_cluster("hc-many", "hcm-7xk2p", tag_list(&many)));
    assert!(refused.is_err_and(|s| s["code"] == 422), "the CRD's maxItems: 25");
    for (cluster, team) in [("w-1", "w1"), ("w-2", "w2")] {
        api.put_custom("awsclusters", FLEET, aws_cluster(cluster, json!({"team": team, "cost-center": "7"})));
    }
    // w-1's workers: a MachineDeployment whose AWSMachineTemplate's tags win on its machines (CAPA).
    api.put_custom("awsmachinetemplates", FLEET, json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate",
        "metadata": {"name": "w-1-md-0-t", "namespace": FLEET},
        "spec": {"template": {"spec": {"instanceType": "m5.large", "additionalTags": {"team": "w1-machines", "tier": "gpu"}}}}
    }));
    api.put_custom("machinedeployments", FLEET, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "w-1-md-0", "namespace": FLEET},
        "spec": {"clusterName": "w-1", "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "w-1-md-0"}},
                 "template": {"metadata": {"labels": {"cluster.x-k8s.io/deployment-name": "w-1-md-0"}},
                              "spec": {"clusterName": "w-1",
                                       "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "w-1-md-0"}},
                                       "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": "w-1-md-0-t"}}}}
    }));
    // w-1's control plane: a KubeadmControlPlane whose template's tags win on its machines, and a
    // machine pool whose own tags win on its instances (CAPA).
    api.put_custom("awsmachinetemplates", FLEET, json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate",
        "metadata": {"name": "w-1-cp-t", "namespace": FLEET},
        "spec": {"template": {"spec": {"instanceType": "m5.xlarge", "additionalTags": {"team": "w1-control-plane", "tier": "cp"}}}}
    }));
    api.put_custom("kubeadmcontrolplanes", FLEET, json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
        "metadata": {"name": "w-1-cp", "namespace": FLEET, "labels": {"cluster.x-k8s.io/cluster-name": "w-1"},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "w-1", "uid": "u-w-1"}]},
        "spec": {"version": "v1.33.0", "replicas": 3,
                 "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": "w-1-cp-t"}}}}
    }));
    api.put_custom(
        "awsmachinepools",
        FLEET,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachinePool",
            "metadata": {"name": "w-1-mp-0", "namespace": FLEET, "labels": {"cluster.x-k8s.io/cluster-name": "w-1"}},
            "spec": {"minSize": 1, "maxSize": 3, "awsLaunchTemplate": {"instanceType": "m5.large"},
                     "additionalTags": {"team": "w1-pool", "spot": "true"}}
        }),
    );
    // w-3: an EKS cluster (no AWSCluster), whose EKS name differs from its Cluster's, as CAPA's
    // webhook defaults it (<namespace>_<name>).
    api.put_custom("awsmanagedcontrolplanes", FLEET, json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "AWSManagedControlPlane",
        "metadata": {"name": "w-3-cp", "namespace": FLEET, "labels": {"cluster.x-k8s.io/cluster-name": "w-3"},
                     "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "w-3", "uid": "u-w-3"}]},
        "spec": {"eksClusterName": "fleet_w-3-cp", "region": "us-east-1", "additionalTags": {"team": "w3", "cost-center": "9"}}
    }));
    let stored = api.get("hostedclusters", NS, "hc-a").expect("stored");
    assert!(stored["spec"].get("notAField").is_none(), "pruned by the CRD");
    assert_eq!(stored["spec"]["issuerURL"], "https://kubernetes.default.svc", "defaulted by the CRD");

    // --- the account: each cluster's resources, drifted, and what is not theirs ---
    let (c, account, env) = support::account_with_env().await;
    let policy_bucket = format!("policy-{account}");
    c.s3.create_bucket().bucket(&policy_bucket).send().await.expect("policy bucket");
    let owned = |infra: &str| format!("kubernetes.io/cluster/{infra}");
    let (a, b, cc, bad) = (owned("hca-7xk2p"), owned("hcb-7xk2p"), owned("hcc-7xk2p"), owned("hcx-7xk2p"));
    let drift = ("team", "someone-else");
    let a_node = instance(&c, &account, &[(&a, "owned"), ("Name", "hc-a-workers-7xk2p-9bq4z"), drift]).await;
    let a_other = instance(&c, &account, &[(&a, "owned"), ("Name", "hc-a-workers-gpu-7xk2p-9bq4z"), drift]).await;
    let a_bucket = bucket(&c, &format!("hca-7xk2p-image-registry-{account}"), &[(&a, "owned"), drift]).await;
    let b_node = instance(&c, &account, &[(&b, "owned"), ("Name", "hc-b-workers-abcde-fghij"), drift]).await;
    let b_bucket = bucket(&c, &format!("hcb-7xk2p-image-registry-{account}"), &[(&b, "owned"), drift]).await;
    let c_node = instance(&c, &account, &[(&cc, "owned"), ("Name", "hc-c-workers-abcde-fghij"), drift]).await;
    let bad_node = instance(&c, &account, &[(&bad, "owned"), drift]).await;
    // What CAPA creates carries its own key; what the workload's cloud provider creates, the other.
    let w1_by_capa =
        instance(&c, &account, &[("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"), drift]).await;
    let w1_by_ccm = bucket(&c, &format!("w-1-pvc-{account}"), &[("kubernetes.io/cluster/w-1", "owned"), drift]).await;
    let w1_machine = instance(
        &c,
        &account,
        &[("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"), ("Name", "w-1-md-0-xk2vp-9btqz"), drift],
    )
    .await;
    let w1_control_plane = instance(
        &c,
        &account,
        &[("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"), ("Name", "w-1-cp-8zk2q"), drift],
    )
    .await;
    let w1_pool = instance(
        &c,
        &account,
        &[
            ("sigs.k8s.io/cluster-api-provider-aws/cluster/w-1", "owned"),
            ("kubernetes.io/cluster/w-1", "owned"),
            ("Name", "w-1-mp-0"),
            drift,
        ],
    )
    .await;
    let w2_by_capa =
        instance(&c, &account, &[("sigs.k8s.io/cluster-api-provider-aws/cluster/w-2", "owned"), drift]).await;
    // EKS: the network CAPA names after the Cluster, the nodes after the EKS cluster.
    let w3_network =
        instance(&c, &account, &[("sigs.k8s.io/cluster-api-provider-aws/cluster/w-3", "owned"), drift]).await;
    let w3_node = instance(
        &c,
        &account,
        &[
            ("sigs.k8s.io/cluster-api-provider-aws/cluster/fleet_w-3-cp", "owned"),
            ("kubernetes.io/cluster/fleet_w-3-cp", "owned"),
            drift,
        ],
    )
    .await;
    let shared = instance(&c, &account, &[(&a, "shared"), drift]).await;
    let foreign = instance(&c, &account, &[("kubernetes.io/cluster/other-9zz9z", "owned"), drift]).await;

    // --- publish both sets ---
    let kubeconfig = std::env::temp_dir().join(format!("tagwarden-kinds-{account}.kubeconfig"));
    std::fs::write(&kubeconfig, api.kubeconfig("tagwarden", None)).expect("kubeconfig");
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let set = format!("s3://{policy_bucket}/clusters/*/");
    let publish = |kind: &str| {
        cli(
            &env,
            &["publish", "--from-cluster", "--cluster-set", kind, "--kubeconfig", &kubeconfig, "--to", &set, "--json"],
        )
    };
    let (code, out, text) = publish("hypershift");
    assert_eq!(code, 1, "one HostedCluster refused, the others published: {text}");
    let rows = out["clusters"].as_array().cloned().unwrap_or_default();
    let result = |cluster: &str| {
        rows.iter().find(|r| r["cluster"] == cluster).map(|r| r["outcome"]["result"].clone()).unwrap_or(Value::Null)
    };
    assert_eq!(
        [result("hca-7xk2p"), result("hcb-7xk2p"), result("hcc-7xk2p"), result("hcx-7xk2p")],
        [json!("written"), json!("written"), json!("written"), json!("refused")],
        "{out}"
    );
    let warned: Vec<Value> = api.list("events", NS).into_iter().filter(|e| e["type"] == "Warning").collect();
    assert!(
        warned.iter().any(|e| e["regarding"]["name"] == "hc-bad"
            && e["reason"] == "PolicyRefused"
            && e["note"].as_str().is_some_and(|n| n.contains("aws:"))),
        "the refused HostedCluster is told why, on its own object: {warned:?}"
    );
    assert_eq!(warned.len(), 1, "only the refused one: {warned:?}");
    let (code, out, text) = publish("capa");
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["clusters"].as_array().map(Vec::len), Some(4), "w-1, w-2, and w-3 under both its names: {out}");
    let (code, _, text) = publish("capa");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\"unchanged\""), "a second publish writes nothing: {text}");

    // --- one sweep of every published cluster ---
    let clusters = ["hca-7xk2p", "hcb-7xk2p", "hcc-7xk2p", "w-1", "w-2", "w-3", "fleet_w-3-cp", "hcx-7xk2p"];
    let sweep = || {
        let mut args = vec!["sweep", "--policy", set.as_str(), "--json"];
        for id in &clusters {
            args.extend(["--cluster", id]);
        }
        cli(&env, &args)
    };
    let (code, out, text) = sweep();
    assert_eq!(code, 1, "hcx-7xk2p published nothing valid: {text}");
    let hcx = out["clusters"].as_array().and_then(|c| c.iter().find(|c| c["infraID"] == "hcx-7xk2p").cloned());
    assert!(
        hcx.is_some_and(|c| c["unpublished"].as_str().is_some_and(|u| u.contains("no policy of this cluster"))),
        "a named cluster without a policy is reported, not left out: {out}"
    );
    eprintln!("KINDS: sweep of 7 clusters: written {} (owned {})", out["written"], out["owned"]);
    assert_eq!((out["owned"].as_u64(), out["written"].as_u64()), (Some(14), Some(14)), "{out}");

    let team = |v: &'static str| ("team", Some(v));
    assert_tags("hc-a's node", &tags(&c, &a_node).await, &[team("a"), ("env", Some("dev")), ("tier", Some("gpu"))]);
    assert_tags(
        "hc-a's node of another pool (hc-a-workers-gpu-…)",
        &tags(&c, &a_other).await,
        &[team("a"), ("env", Some("prod")), ("tier", None)],
    );
    assert_tags(
        "hc-a's bucket (no pool's)",
        &tags(&c, &a_bucket).await,
        &[team("a"), ("env", Some("prod")), ("cost-center", Some("42")), ("tier", None)],
    );
    assert_tags("hc-b's node", &tags(&c, &b_node).await, &[team("b"), ("tier", Some("cpu"))]);
    assert_tags("hc-b's bucket", &tags(&c, &b_bucket).await, &[team("b"), ("tier", None)]);
    assert_tags("hc-c's node", &tags(&c, &c_node).await, &[team("c")]);
    assert_tags("w-1 (CAPA's key)", &tags(&c, &w1_by_capa).await, &[team("w1"), ("cost-center", Some("7"))]);
    assert_tags("w-1 (the cloud provider's key)", &tags(&c, &w1_by_ccm).await, &[team("w1")]);
    assert_tags(
        "w-1's machine (its template's tags win)",
        &tags(&c, &w1_machine).await,
        &[team("w1-machines"), ("tier", Some("gpu")), ("cost-center", Some("7"))],
    );
    assert_tags(
        "w-1's control-plane machine (its KubeadmControlPlane's template wins)",
        &tags(&c, &w1_control_plane).await,
        &[team("w1-control-plane"), ("tier", Some("cp")), ("cost-center", Some("7")), ("spot", None)],
    );
    assert_tags(
        "w-1's machine pool instance (the pool's tags win)",
        &tags(&c, &w1_pool).await,
        &[team("w1-pool"), ("spot", Some("true")), ("cost-center", Some("7")), ("tier", None)],
    );
    assert_tags(
        "w-1's CAPA instance of no deployment",
        &tags(&c, &w1_by_capa).await,
        &[("tier", None), ("spot", None)],
    );
    assert_tags("w-2", &tags(&c, &w2_by_capa).await, &[team("w2")]);
    for (what, r) in [("w-3's network (the Cluster's name)", &w3_network), ("w-3's node (the EKS name)", &w3_node)] {
        assert_tags(what, &tags(&c, r).await, &[team("w3"), ("cost-center", Some("9"))]);
    }
    for (what, r) in [("the refused cluster's", &bad_node), ("a shared", &shared), ("another cluster's", &foreign)] {
        assert_tags(what, &tags(&c, r).await, &[team("someone-else"), ("cost-center", None)]);
    }

    // --- day 2: hc-b's team changes; HyperShift would not retag its bucket, tagwarden does ---
    api.edit_custom("hostedclusters", NS, "hc-b", |o| {
        o["spec"]["platform"]["aws"]["resourceTags"] =
            hosted_cluster("hc-b", "hcb-7xk2p", hc_tags("b2"))["spec"]["platform"]["aws"]["resourceTags"].clone();
    })
    .expect("a tag edit the CRD takes");
    let (_, out, text) = publish("hypershift");
    let b_row = out["clusters"].as_array().and_then(|r| r.iter().find(|r| r["cluster"] == "hcb-7xk2p").cloned());
    assert_eq!(b_row.map(|r| r["outcome"]["changes"]["changed"]["team"].clone()), Some(json!(["b", "b2"])), "{text}");
    // The function, as deployed for the set, gets the policy bucket's notification of hc-b's new
    // layer: one policy-change sweep of hc-b.
    let mut function = crate::fleet::reconciler(&c, &account, &set, std::time::Duration::from_secs(300));
    let store = std::sync::Arc::get_mut(&mut function.store).expect("a new engine's store is its own");
    store.set_clusters(Some(clusters.iter().map(|c| c.to_string()).collect()));
    c.calls.reset();
    let layer = "clusters/hcb-7xk2p/10-cluster.yaml";
    let inv = tagwarden::aws::function::handle(
        &function,
        crate::aws_clusters::written(&[layer], crate::aws_clusters::now_ms()),
    )
    .await;
    assert!(inv.error.is_none(), "{:?}", inv.error);
    assert_tags("hc-b's bucket after the edit", &tags(&c, &b_bucket).await, &[team("b2")]);
    assert_tags("hc-b's node after the edit", &tags(&c, &b_node).await, &[team("b2"), ("tier", Some("cpu"))]);
    assert_tags("hc-a's node, untouched by hc-b's edit", &tags(&c, &a_node).await, &[team("a")]);
    let writes = c.calls.writes();
    eprintln!(
        "KINDS: day-2 edit of hc-b: one publish, one policy-change sweep ({} resources) making {writes} writes, {} calls",
        inv.response["sweep"],
        c.calls.total()
    );
    assert_eq!(inv.response["sweep"], 2, "hc-b's resources alone are swept: {}", inv.response);
    assert_eq!(writes, 2, "hc-b's node (CreateTags) and bucket (PutBucketTagging), nothing else");
}

/// `--cluster-set hypershift --watch`, as the Deployment runs it: each member published once, then
/// only what changes (a NodePool edit republishes its HostedCluster's policy alone), a member that
/// leaves keeps its last policy, and a new one is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_set_publisher_follows_the_management_cluster() {
    use std::time::Duration;
    let patience = Duration::from_secs(30);
    let api = FakeApi::start().await;
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-a", "hca-7xk2p", tag_list(&[("team", "a")])));
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-b", "hcb-7xk2p", tag_list(&[("team", "b")])));
    api.put_custom("nodepools", NS, node_pool("hc-b-workers", "hc-b", tag_list(&[("tier", "cpu")])));
    let (c, account, env) = support::account_with_env().await;
    let policy_bucket = format!("policy-{account}");
    c.s3.create_bucket().bucket(&policy_bucket).send().await.expect("policy bucket");
    let set = format!("s3://{policy_bucket}/clusters/*/");
    let publisher = crate::publisher::Publisher::spawn(
        &api.kubeconfig("tagwarden", None),
        &set,
        &env,
        &["--cluster-set", "hypershift", "--namespace", NS],
    );
    let mut first: Vec<String> = (0..2)
        .map(|_| publisher.next("each member's first publish", patience))
        .map(|l| format!("{} {}", l["infra_id"].as_str().unwrap_or_default(), l["result"].as_str().unwrap_or_default()))
        .collect();
    first.sort();
    assert_eq!(first, ["hca-7xk2p written", "hcb-7xk2p written"]);

    // Each member's status report (the function writes it beside the policy) is mirrored into
    // tagwarden-status-<cluster> in the publisher's namespace (tagwarden, its default).
    let failed = tagwarden::status::ResourceFailure::new(
        &format!("arn:aws:ec2:us-east-1:{account}:instance/i-0123456789abcdef0"),
        "ec2:instance",
        "UnauthorizedOperation",
    );
    let report = tagwarden::status::StatusReport::new(
        tagwarden::cloud::Cloud::Aws,
        &set,
        Some("v1".into()),
        vec![],
        vec![failed],
    );
    let body = serde_json::to_vec(&report).expect("json");
    let status_key = "clusters/hcb-7xk2p/tagwarden-status.json";
    c.s3.put_object().bucket(&policy_bucket).key(status_key).body(body.into()).send().await.expect("report");
    let started = std::time::Instant::now();
    let mirrored = loop {
        if let Some(cm) = api.get("configmaps", "tagwarden", "tagwarden-status-hcb-7xk2p") {
            break cm;
        }
        assert!(started.elapsed() < patience, "hc-b's status report is mirrored");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(mirrored["data"]["failures"], "1", "{mirrored}");
    assert!(api.get("configmaps", "tagwarden", "tagwarden-status-hca-7xk2p").is_none(), "hc-a has no report yet");
    assert!(api.list("configmaps", NS).is_empty(), "nothing is written into the members' namespace");

    // A NodePool edit changes hc-b's policy alone.
    api.edit_custom("nodepools", NS, "hc-b-workers", |o| {
        o["spec"]["platform"]["aws"]["resourceTags"] = tag_list(&[("tier", "gpu")]);
    })
    .expect("a NodePool tag edit");
    let line = publisher.next("the NodePool edit", patience);
    assert_eq!((line["infra_id"].as_str(), line["result"].as_str()), (Some("hcb-7xk2p"), Some("written")), "{line}");
    assert!(publisher.lines.recv_timeout(Duration::from_secs(2)).is_err(), "hc-a's policy did not change");
    let key = "clusters/hcb-7xk2p/10-cluster.yaml";
    let body = c.s3.get_object().bucket(&policy_bucket).key(key).send().await.expect("published");
    let text = String::from_utf8(body.body.collect().await.expect("body").to_vec()).expect("utf-8");
    assert!(text.contains("tier: gpu") && text.contains("hc-b-workers-?????-?????"), "{text}");

    // A burst of edits (a controller writing one field after another) is read as one: the set is
    // listed once for it, not once per watch event, and only its last document is published.
    let lists = |api: &FakeApi| {
        api.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/hostedclusters") && !r.is_watch())
            .count()
    };
    let before = lists(&api);
    const BURST: usize = 10;
    for n in 0..BURST {
        api.edit_custom("nodepools", NS, "hc-b-workers", |o| {
            o["spec"]["platform"]["aws"]["resourceTags"] = tag_list(&[("tier", &format!("gpu-{n}"))]);
        })
        .expect("a NodePool tag edit");
    }
    let line = publisher.next("the burst", patience);
    assert_eq!(line["infra_id"], "hcb-7xk2p", "{line}");
    assert!(publisher.lines.recv_timeout(Duration::from_secs(2)).is_err(), "one publish for the burst");
    let body = c.s3.get_object().bucket(&policy_bucket).key(key).send().await.expect("published");
    let text = String::from_utf8(body.body.collect().await.expect("body").to_vec()).expect("utf-8");
    assert!(text.contains(&format!("tier: gpu-{}", BURST - 1)), "the burst's last edit: {text}");
    let read = lists(&api) - before;
    println!("a burst of {BURST} NodePool edits: the set listed {read} time(s), published once");
    assert!(read <= 2, "{read} lists of the set for one burst of {BURST} edits");

    // hc-a leaves the set: its last policy stays; a new HostedCluster is published.
    api.delete_custom("hostedclusters", NS, "hc-a");
    api.put_custom("hostedclusters", NS, hosted_cluster("hc-c", "hcc-7xk2p", tag_list(&[("team", "c")])));
    let line = publisher.next("the new member", patience);
    assert_eq!(line["infra_id"], "hcc-7xk2p", "{line}");
    let kept = c.s3.get_object().bucket(&policy_bucket).key("clusters/hca-7xk2p/10-cluster.yaml").send().await;
    assert!(kept.is_ok(), "a cluster that left keeps its last policy (never an empty one)");
}
