//! Cluster API: a CAPA `AWSCluster` or a CAPZ `AzureCluster` → its workload cluster's policy (a
//! CAPG `GCPCluster`'s is [`super::capg`]'s, by the same rules for its owning Cluster).
//!
//! - The cluster is the Cluster API `Cluster` that owns the object (its `ownerReferences` entry
//!   of kind `Cluster`, else the `cluster.x-k8s.io/cluster-name` label): CAPA and CAPZ name the
//!   ownership keys after it (`ClusterTagKey(scope.Name())`, the `Cluster`'s name), and mark what
//!   they create `owned` under their own key and, for the cloud provider, under
//!   `kubernetes.io/cluster/<name>` (AWS) or `kubernetes.io_cluster_<name>` (Azure)
//!   (`ClusterKind::ClusterApi`).
//! - `spec.additionalTags` (a map; CAPA `Tags`, CAPZ `Tags`) are every owned resource's tags.
//! - CAPA machine-level tags: an `AWSMachineTemplate`'s `spec.template.spec.additionalTags` go on
//!   the instances of the machines made from it and win over the AWSCluster's (CAPA
//!   `pkg/cloud/scope/machine.go` `AdditionalTags`): an override, whose precedence is the ordinary
//!   one. No tag names the template; a `MachineDeployment` (cluster.x-k8s.io/v1beta2) names it
//!   (`spec.template.spec.infrastructureRef`), and Cluster API names its machines
//!   `<MachineDeployment>-<5>-<5>` (a MachineSet `<md>-<5>`, `rollout_planner.go`; a Machine
//!   `{{ .machineSet.name }}-{{ .random }}`, `machineset_controller.go`; the AWSMachine takes the
//!   Machine's name and CAPA tags the instance `Name=<AWSMachine name>`, `instances.go`), so the
//!   override selects `Name` by `<md>-?????-?????`. A MachineDeployment with its own
//!   `spec.machineNaming.template` names its machines otherwise: its tags are left out, and the
//!   document says so. `Name` and ownership keys among additional tags are CAPA's to set and never
//!   written by tagwarden: left out, said in the document.
//! - Control-plane machines: a `KubeadmControlPlane` (controlplane.cluster.x-k8s.io/v1beta2) names
//!   its `AWSMachineTemplate` in `spec.machineTemplate.spec.infrastructureRef` and its machines
//!   `{{ .kubeadmControlPlane.name }}-{{ .random }}` (`desired_state.go`), each AWSMachine taking
//!   its Machine's name (`helpers.go` `createInfraMachine`): the override selects `Name` by
//!   `<kcp>-?????`. Names over 57 characters are shortened (`names.go`), and a
//!   `spec.machineNaming.template` names them otherwise: left out, said in the document.
//! - Machine pools: an `AWSMachinePool`'s `spec.additionalTags` are merged over the cluster's, the
//!   pool's winning (`scope/machinepool.go` `AdditionalTags`), onto its launch template's instances
//!   and volumes (`launchtemplate.go` TagSpecifications), each tagged `Name=<AWSMachinePool name>`
//!   (`LaunchTemplateName`): the override selects `Name` by the pool's name. Its cluster is the
//!   `cluster.x-k8s.io/cluster-name` label Cluster API puts on it. A pool whose additional tags set
//!   `Name` renames its instances: left out, said in the document.
//! - EKS: an `AWSManagedControlPlane` (controlplane.cluster.x-k8s.io/v1beta2) holds the cluster's
//!   `spec.additionalTags` (no AWSCluster exists; the AWSManagedCluster has no tags). CAPA names
//!   the ownership keys of what it creates after two names: the network and its security groups
//!   after the Cluster (`ManagedControlPlaneScope.Name()`, `network/vpc.go`, `subnets.go`), the
//!   EKS cluster, its subnets' `kubernetes.io/cluster/` key and the machine pools' nodes after
//!   `spec.eksClusterName` (`KubernetesClusterName()`, `eks/cluster.go`, `eks/tags.go`,
//!   `launchtemplate.go`). A policy is one name's, so an EKS cluster whose two names differ is two
//!   members with the same tags and overrides: one folder per name.

use serde_json::{json, Map, Value};
use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy::validate::is_k8s_io_key;

use super::{native_document, string_map, NoPolicy, Resource, TagFieldError, Translated};

pub const AWS_CLUSTERS: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "AWSCluster",
    plural: "awsclusters",
};
pub const MACHINE_DEPLOYMENTS: Resource =
    Resource { group: "cluster.x-k8s.io", version: "v1beta2", kind: "MachineDeployment", plural: "machinedeployments" };
pub const AWS_MACHINE_TEMPLATES: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "AWSMachineTemplate",
    plural: "awsmachinetemplates",
};
pub const KUBEADM_CONTROL_PLANES: Resource = Resource {
    group: "controlplane.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "KubeadmControlPlane",
    plural: "kubeadmcontrolplanes",
};
pub const AWS_MACHINE_POOLS: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "AWSMachinePool",
    plural: "awsmachinepools",
};
pub const AWS_MANAGED_CONTROL_PLANES: Resource = Resource {
    group: "controlplane.cluster.x-k8s.io",
    version: "v1beta2",
    kind: "AWSManagedControlPlane",
    plural: "awsmanagedcontrolplanes",
};
pub const AZURE_CLUSTERS: Resource = Resource {
    group: "infrastructure.cluster.x-k8s.io",
    version: "v1beta1",
    kind: "AzureCluster",
    plural: "azureclusters",
};

/// The label Cluster API puts on the objects of a cluster (`clusterv1.ClusterNameLabel`).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// What refines an `AWSCluster`'s document: the objects of its namespace that name its machines.
#[derive(Debug, Clone, Copy, Default)]
pub struct Machines<'a> {
    pub deployments: &'a [Value],
    pub templates: &'a [Value],
    pub control_planes: &'a [Value],
    pub pools: &'a [Value],
}

/// The workload cluster and its document, from a CAPA `AWSCluster` and the objects of its
/// namespace that name its machines.
pub fn aws_document(object: &Value, machines: Machines<'_>) -> Translated {
    aws_document_of(object, "AWSCluster", None, machines)
}

/// `name`: the name the resources' ownership keys carry, when not the Cluster's (EKS).
fn aws_document_of(object: &Value, kind: &str, name: Option<&str>, machines: Machines<'_>) -> Translated {
    let clean = |t, p: &str, n: &mut Vec<String>| without_providers_own(Cloud::Aws, t, p, n);
    document(object, Cloud::Aws, kind, name, clean, |cluster, notes| {
        let mut overrides = machine_overrides(cluster, machines.deployments, machines.templates, notes)?;
        overrides.extend(control_plane_overrides(cluster, machines.control_planes, machines.templates, notes)?);
        overrides.extend(pool_overrides(cluster, machines.pools, notes)?);
        Ok(overrides)
    })
}

/// An EKS workload cluster's documents, from a CAPA `AWSManagedControlPlane`: the Cluster's name
/// and its document, then, when `spec.eksClusterName` differs, that name and its document (the
/// same tags and overrides, for what CAPA names after the EKS cluster).
pub fn eks_documents(object: &Value, machines: Machines<'_>) -> Vec<Translated> {
    const KIND: &str = "AWSManagedControlPlane";
    let first = aws_document_of(object, KIND, None, machines);
    let eks = object.pointer("/spec/eksClusterName").and_then(Value::as_str).unwrap_or_default();
    match &first {
        Ok((cluster, _)) if !eks.is_empty() && eks != cluster => {
            let second = aws_document_of(object, KIND, Some(eks), machines);
            vec![first, second]
        }
        _ => vec![first],
    }
}

/// The workload cluster and its document, from a CAPZ `AzureCluster`.
pub fn azure_document(object: &Value) -> Translated {
    let clean = |t, p: &str, n: &mut Vec<String>| without_providers_own(Cloud::Azure, t, p, n);
    document(object, Cloud::Azure, "AzureCluster", None, clean, |_, _| Ok(Vec::new()))
}

/// An additional tag the provider sets itself and tagwarden never writes (`Name`, ownership keys).
fn providers_own(cloud: Cloud, key: &str) -> bool {
    key.eq_ignore_ascii_case("name") || cloud.is_ownership_key(key)
}

/// `tags` less the provider's own keys, each one left out named in `notes`.
fn without_providers_own(
    cloud: Cloud,
    mut tags: Map<String, Value>,
    path: &str,
    notes: &mut Vec<String>,
) -> Map<String, Value> {
    tags.retain(|k, _| {
        let own = providers_own(cloud, k);
        if own {
            notes.push(format!("left out: {path}: {k} (the provider sets it; tagwarden never writes it)"));
        }
        // The rest of the cluster's tags are still enforced: the loader would refuse the whole
        // document for one such key.
        let reserved = !own && cloud == Cloud::Aws && is_k8s_io_key(k);
        if reserved {
            notes.push(format!("left out: {path}: {k} (in k8s.io/, which tagwarden's role may not write)"));
        }
        !own && !reserved
    });
    tags
}

/// An object that makes machines from an `AWSMachineTemplate`, and how Cluster API names them.
struct MachineOwner {
    kind: &'static str,
    /// Where the object names its template.
    template_ref: &'static str,
    /// The longest name its machines keep whole (longer ones are shortened, `names.go`).
    name_kept: usize,
    /// Its machines' names: the owner's name and the random suffixes, as a `valuePattern`.
    suffix: &'static str,
}

/// `<md>-<5>-<5>`: a MachineSet `<md>-<5>`, its Machines `<machineset>-<5>`; 51 characters keep.
const MACHINE_DEPLOYMENT: MachineOwner = MachineOwner {
    kind: "MachineDeployment",
    template_ref: "/spec/template/spec/infrastructureRef",
    name_kept: 51,
    suffix: "-?????-?????",
};

/// `<kcp>-<5>`: a generated name over 63 characters is shortened, so 57 keep.
const CONTROL_PLANE: MachineOwner = MachineOwner {
    kind: "KubeadmControlPlane",
    template_ref: "/spec/machineTemplate/spec/infrastructureRef",
    name_kept: 57,
    suffix: "-?????",
};

/// The overrides of cluster `cluster`'s machine deployments: each deployment's template's tags on
/// its machines.
fn machine_overrides(
    cluster: &str,
    deployments: &[Value],
    templates: &[Value],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>, TagFieldError> {
    let mine = deployments.iter().filter(|d| d.pointer("/spec/clusterName").and_then(Value::as_str) == Some(cluster));
    template_overrides(&MACHINE_DEPLOYMENT, mine.collect(), templates, notes)
}

/// The overrides of cluster `cluster`'s kubeadm control planes: each one's template's tags on its
/// machines.
fn control_plane_overrides(
    cluster: &str,
    control_planes: &[Value],
    templates: &[Value],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>, TagFieldError> {
    let mine = control_planes.iter().filter(|k| owning_cluster(k).as_deref() == Some(cluster));
    template_overrides(&CONTROL_PLANE, mine.collect(), templates, notes)
}

/// For each of `owners` (of one cluster) whose `AWSMachineTemplate` has tags, an override putting
/// them on its machines, by name; one whose machines cannot be told apart is left out, said in
/// `notes`.
fn template_overrides(
    owner: &MachineOwner,
    mut owners: Vec<&Value>,
    templates: &[Value],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>, TagFieldError> {
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    owners.sort_by_key(|o| str_at(o, "/metadata/name"));
    let kind = owner.kind;
    let mut overrides = Vec::new();
    for o in owners {
        let (ns, name) = (str_at(o, "/metadata/namespace"), str_at(o, "/metadata/name"));
        let infra = o.pointer(owner.template_ref).cloned().unwrap_or(Value::Null);
        if str_at(&infra, "/kind") != "AWSMachineTemplate" {
            continue;
        }
        let template_name = str_at(&infra, "/name");
        let Some(template) = templates.iter().find(|t| str_at(t, "/metadata/name") == template_name) else {
            notes.push(format!("left out: {kind} {ns}/{name}: its AWSMachineTemplate {template_name} does not exist"));
            continue;
        };
        let path = format!("AWSMachineTemplate {ns}/{template_name} spec.template.spec.additionalTags");
        let tags = string_map(template.pointer("/spec/template/spec/additionalTags"), &path)?;
        let tags = without_providers_own(Cloud::Aws, tags, &path, notes);
        if tags.is_empty() {
            continue;
        }
        if o.pointer("/spec/machineNaming/template").is_some() {
            notes.push(format!(
                "left out: {path}: {kind} {ns}/{name} names its machines with spec.machineNaming.template, so its instances cannot be told apart"
            ));
            continue;
        }
        if name.len() > owner.name_kept {
            notes.push(format!(
                "left out: {path}: Cluster API shortens the names of {kind} {ns}/{name}'s machines, so its instances cannot be told apart"
            ));
            continue;
        }
        notes.push(format!("{kind} {ns}/{name} with {path}"));
        overrides.push(json!({
            "name": format!("{kind} {ns}/{name}"),
            "selector": {"type": super::hypershift::MACHINE_RESOURCES, "tag": {"key": "Name", "valuePattern": format!("{name}{}", owner.suffix)}},
            "tags": tags,
        }));
    }
    Ok(overrides)
}

/// What a machine pool's launch template tags (`launchtemplate.go` TagSpecifications): its
/// instances and their volumes.
const POOL_RESOURCES: &str = "ec2:{instance,volume}";

/// The overrides of cluster `cluster`'s machine pools: each pool's tags on its instances.
fn pool_overrides(cluster: &str, pools: &[Value], notes: &mut Vec<String>) -> Result<Vec<Value>, TagFieldError> {
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    let mut mine: Vec<&Value> = pools.iter().filter(|p| owning_cluster(p).as_deref() == Some(cluster)).collect();
    mine.sort_by_key(|p| str_at(p, "/metadata/name"));
    let mut overrides = Vec::new();
    for pool in mine {
        let (ns, name) = (str_at(pool, "/metadata/namespace"), str_at(pool, "/metadata/name"));
        let path = format!("AWSMachinePool {ns}/{name} spec.additionalTags");
        let tags = string_map(pool.pointer("/spec/additionalTags"), &path)?;
        if tags.keys().any(|k| k.eq_ignore_ascii_case("name")) {
            notes.push(format!(
                "left out: {path}: it sets Name, which renames the pool's instances, so they cannot be told apart"
            ));
            continue;
        }
        let tags = without_providers_own(Cloud::Aws, tags, &path, notes);
        if tags.is_empty() {
            continue;
        }
        notes.push(format!("AWSMachinePool {ns}/{name} with {path}"));
        overrides.push(json!({
            "name": format!("AWSMachinePool {ns}/{name}"),
            "selector": {"type": POOL_RESOURCES, "tag": {"key": "Name", "valuePattern": name}},
            "tags": tags,
        }));
    }
    Ok(overrides)
}

/// A provider's cluster object as a policy document, cleaned by `clean`: it takes out of the
/// provider's tags (or labels, at a path) what the provider writes itself, saying why in the notes.
pub(super) fn document(
    object: &Value,
    cloud: Cloud,
    kind: &str,
    infra_name: Option<&str>,
    clean: impl FnOnce(Map<String, Value>, &str, &mut Vec<String>) -> Map<String, Value>,
    machines: impl FnOnce(&str, &mut Vec<String>) -> Result<Vec<Value>, TagFieldError>,
) -> Translated {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let Some(cluster) = owning_cluster(object) else {
        let (kind, namespace, name) = (kind.to_string(), namespace.to_string(), name.to_string());
        return Err((None, NoPolicy::NoOwningCluster { kind, namespace, name }));
    };
    let infra = infra_name.map_or_else(|| cluster.clone(), str::to_owned);
    // CAPG calls them labels, as Google Cloud does (`GCPClusterSpec.AdditionalLabels`).
    let path = if cloud == Cloud::Gcp { "spec.additionalLabels" } else { "spec.additionalTags" };
    let tags = string_map(object.pointer(&format!("/{}", path.replace('.', "/"))), path)
        .map_err(|e| (Some(infra.clone()), e.into()))?;
    let mut notes = Vec::new();
    let tags = clean(tags, path, &mut notes);
    let overrides = machines(&cluster, &mut notes).map_err(|e| (Some(infra.clone()), e.into()))?;
    let mut policy = json!({
        "version": 1,
        "cloud": cloud.as_str(),
        "clusterKind": "ClusterAPI",
        "infraID": infra,
        "tags": tags,
    });
    if !overrides.is_empty() {
        policy["overrides"] = Value::Array(overrides);
    }
    let mut sources = vec![format!("{kind} {namespace}/{name} ({path}) of Cluster {namespace}/{cluster}")];
    if infra != cluster {
        sources.push(format!("for what CAPA names after the EKS cluster {infra} (spec.eksClusterName)"));
    }
    sources.extend(notes);
    native_document(&sources, &policy).map(|text| (infra.clone(), text)).map_err(|e| (Some(infra.clone()), e))
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
        let (cluster, text) = aws_document(&object, Machines::default()).expect("a document");
        assert_eq!(cluster, "w-1", "named after the owning Cluster, not the AWSCluster");
        let policy = load_one("w-1", &text).expect("the loader takes it");
        assert_eq!((policy.kind, policy.cloud), (ClusterKind::ClusterApi, Some(Cloud::Aws)));
        assert_eq!(policy.status.len(), 2);
    }

    #[test]
    fn a_machine_deployments_template_tags_win_on_its_machines() {
        let object = json!({
            "metadata": {"name": "w-1-x", "namespace": "fleet", "labels": {CLUSTER_NAME_LABEL: "w-1"}},
            "spec": {"additionalTags": {"team": "cluster", "cost": "7", "Name": "not-ours"}}
        });
        let md = |name: &str, template: &str, naming: bool| {
            let mut d = json!({"metadata": {"name": name, "namespace": "fleet"}, "spec": {"clusterName": "w-1",
                "template": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": template}}}}});
            if naming {
                d["spec"]["machineNaming"] = json!({"template": "{{ .cluster.name }}-{{ .random }}"});
            }
            d
        };
        let template = |name: &str, tags: Value| json!({"metadata": {"name": name, "namespace": "fleet"}, "spec": {"template": {"spec": {"additionalTags": tags}}}});
        let deployments = [
            md("w-1-md-0", "w-1-md-0-t", false),
            md("w-1-md-1", "w-1-md-1-t", true),
            md("w-2-md-0", "w-1-md-0-t", false),
        ];
        let mut other = deployments[2].clone();
        other["spec"]["clusterName"] = json!("w-2");
        let deployments = [deployments[0].clone(), deployments[1].clone(), other];
        let templates = [
            template("w-1-md-0-t", json!({"team": "machines", "tier": "gpu"})),
            template("w-1-md-1-t", json!({"tier": "cpu"})),
        ];
        let (_, text) =
            aws_document(&object, Machines { deployments: &deployments, templates: &templates, ..Machines::default() })
                .expect("a document");
        let policy = load_one("w-1", &text).expect("the loader takes it");
        assert_eq!(policy.overrides.len(), 1, "{text}");
        let o = &policy.overrides[0];
        let machine = |n: &str| {
            let tags = [("Name".to_string(), n.to_string())].into();
            let r = tagwarden_core::resource::ResourceRef { id: "i-1".into(), kind: "ec2:instance".into(), arn: None };
            o.selector.matches(Cloud::Aws, &r, &tags)
        };
        assert!(machine("w-1-md-0-xk2vp-9btqz") && !machine("w-1-md-0-xk2vp") && !machine("w-2-md-0-xk2vp-9btqz"));
        let desired = policy.desired_for(
            Cloud::Aws,
            &tagwarden_core::resource::ResourceRef { id: "i-1".into(), kind: "ec2:instance".into(), arn: None },
            &[("Name".to_string(), "w-1-md-0-xk2vp-9btqz".to_string())].into(),
        );
        assert_eq!(desired.get(Cloud::Aws, "team").map(|t| t.value), Some("machines"), "the machine's wins");
        assert_eq!(desired.get(Cloud::Aws, "cost").map(|t| t.value), Some("7"));
        assert!(desired.get(Cloud::Aws, "Name").is_none());
        assert!(text.contains("left out: spec.additionalTags: Name"), "{text}");
        assert!(
            text.contains("MachineDeployment fleet/w-1-md-1 names its machines with spec.machineNaming.template"),
            "{text}"
        );
    }

    /// A KubeadmControlPlane's template tags go on `<kcp>-?????`, an AWSMachinePool's
    /// on the instances and volumes named after it; both above the cluster's, as CAPA merges them.
    #[test]
    fn control_plane_and_pool_tags_win_on_their_own_machines() {
        let object = json!({
            "metadata": {"name": "w-1-x", "namespace": "fleet", "labels": {CLUSTER_NAME_LABEL: "w-1"}},
            "spec": {"additionalTags": {"team": "cluster", "cost": "7", "k8s.io/cluster-autoscaler/enabled": "true"}}
        });
        let owned_by = |cluster: &str| json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": cluster, "uid": "u"}]);
        let kcp = |name: &str, cluster: &str, template: &str| {
            json!({
                "metadata": {"name": name, "namespace": "fleet", "ownerReferences": owned_by(cluster)},
                "spec": {"machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AWSMachineTemplate", "name": template}}}}
            })
        };
        let template = |name: &str, tags: Value| json!({"metadata": {"name": name, "namespace": "fleet"}, "spec": {"template": {"spec": {"additionalTags": tags}}}});
        let pool = |name: &str, cluster: &str, tags: Value| {
            json!({
                "metadata": {"name": name, "namespace": "fleet", "labels": {CLUSTER_NAME_LABEL: cluster}},
                "spec": {"additionalTags": tags}
            })
        };
        let long = "w-1-control-plane-with-a-name-longer-than-fifty-seven-chars";
        let control_planes =
            [kcp("w-1-cp", "w-1", "w-1-cp-t"), kcp("w-2-cp", "w-2", "w-1-cp-t"), kcp(long, "w-1", "w-1-cp-t")];
        let templates = [template("w-1-cp-t", json!({"team": "control-plane", "role-tier": "cp"}))];
        let pools = [
            pool("w-1-mp-0", "w-1", json!({"team": "pool", "Name": "renamed"})),
            pool("w-1-mp-1", "w-1", json!({"spot": "true"})),
            pool("w-2-mp-0", "w-2", json!({"team": "other"})),
        ];
        let machines =
            Machines { templates: &templates, control_planes: &control_planes, pools: &pools, ..Machines::default() };
        let (_, text) = aws_document(&object, machines).expect("a document");
        let policy = load_one("w-1", &text).expect("the loader takes it");
        assert_eq!(policy.overrides.len(), 2, "w-1's control plane and its second pool: {text}");
        let desired = |kind: &str, name: &str| {
            let r = tagwarden_core::resource::ResourceRef { id: "x-1".into(), kind: kind.into(), arn: None };
            let d = policy.desired_for(Cloud::Aws, &r, &[("Name".to_string(), name.to_string())].into());
            ["team", "role-tier", "spot", "cost"].map(|k| d.get(Cloud::Aws, k).map(|t| t.value.to_string()))
        };
        let some = |v: &str| Some(v.to_string());
        assert_eq!(desired("ec2:instance", "w-1-cp-8zk2q"), [some("control-plane"), some("cp"), None, some("7")]);
        assert_eq!(
            desired("ec2:instance", "w-1-cp-8zk2q-x"),
            [some("cluster"), None, None, some("7")],
            "not a control-plane name"
        );
        assert_eq!(desired("ec2:volume", "w-1-mp-1"), [some("cluster"), None, some("true"), some("7")]);
        assert_eq!(
            desired("ec2:network-interface", "w-1-mp-1"),
            [some("cluster"), None, None, some("7")],
            "a launch template tags no ENI"
        );
        assert_eq!(
            desired("ec2:instance", "w-1-mp-1-abc"),
            [some("cluster"), None, None, some("7")],
            "the pool's name exactly"
        );
        assert!(text.contains("AWSMachinePool fleet/w-1-mp-0 spec.additionalTags: it sets Name"), "{text}");
        assert!(
            text.contains("left out: spec.additionalTags: k8s.io/cluster-autoscaler/enabled (in k8s.io/"),
            "{text}"
        );
        assert!(
            text.contains(&format!("Cluster API shortens the names of KubeadmControlPlane fleet/{long}")),
            "{text}"
        );
        assert!(!text.contains("w-2-mp-0") && !text.contains("w-2-cp"), "another cluster's: {text}");
    }

    /// An EKS cluster's resources carry the Cluster's name or the EKS cluster's in their
    /// ownership keys (CAPA `network/vpc.go` against `eks/tags.go`): one document for each name.
    #[test]
    fn an_eks_cluster_is_two_members_when_its_names_differ() {
        let cp = |eks: Option<&str>| {
            let mut o = json!({
                "metadata": {"name": "w-3-cp", "namespace": "fleet",
                             "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "w-3", "uid": "u"}]},
                "spec": {"additionalTags": {"team": "eks", "Name": "x"}}
            });
            if let Some(eks) = eks {
                o["spec"]["eksClusterName"] = json!(eks);
            }
            o
        };
        let pools =
            [json!({"metadata": {"name": "w-3-mp", "namespace": "fleet", "labels": {CLUSTER_NAME_LABEL: "w-3"}},
                            "spec": {"additionalTags": {"spot": "true"}}})];
        let machines = Machines { pools: &pools, ..Machines::default() };
        let docs = eks_documents(&cp(Some("fleet_w-3-cp")), machines);
        let docs: Vec<(String, String)> = docs.into_iter().map(|d| d.expect("a document")).collect();
        assert_eq!(docs.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["w-3", "fleet_w-3-cp"]);
        for (name, text) in &docs {
            let policy = load_one(name, text).expect("the loader takes it");
            assert_eq!(policy.kind, ClusterKind::ClusterApi);
            assert_eq!(policy.overrides.len(), 1, "the pool's, in both: {text}");
            assert!(text.contains("AWSManagedControlPlane fleet/w-3-cp"), "{text}");
        }
        assert!(docs[1].1.contains("EKS cluster fleet_w-3-cp (spec.eksClusterName)"), "{}", docs[1].1);
        assert_eq!(eks_documents(&cp(None), machines).len(), 1, "not named yet: the Cluster's alone");
        assert_eq!(eks_documents(&cp(Some("w-3")), machines).len(), 1, "one name");
    }

    #[test]
    fn a_name_cannot_add_lines_to_the_document() {
        let object = json!({
            "metadata": {"name": "w", "namespace": "n",
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "w-1\ntags: {evil: x}"}]},
            "spec": {"additionalTags": {"team": "a"}}
        });
        let (_, text) = aws_document(&object, Machines::default()).expect("a document");
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
        assert!(azure_document(&orphan).expect_err("no cluster").1.to_string().contains("no owning Cluster"));
        let bad = json!({"metadata": {"name": "z", "namespace": "n", "labels": {CLUSTER_NAME_LABEL: "z-1"}},
                         "spec": {"additionalTags": ["team=b"]}});
        assert!(azure_document(&bad).expect_err("not a map").1.to_string().contains("spec.additionalTags"));
    }
}
