//! A management cluster's *cluster set*: one policy per HyperShift hosted cluster or Cluster API
//! workload cluster, each published under its own cluster's folder of a set location.
//!
//! Reading is [`read_set`]; turning one object (and the objects that refine it) into a tagwarden
//! policy document is pure, in [`hypershift`], [`cluster_api`] and [`capg`], where each kind's rules are
//! cited. The document is a native `tagwarden.yaml` naming its `clusterKind`, so the function
//! judges it with the same loader as any other, and a reader of the store sees where it came from
//! (its header comment names the objects).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use futures_util::stream::{self, Stream, StreamExt};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, ResourceExt};
use serde_json::{json, Map, Value};

use super::source::SourceDocument;
use super::{api_error, ClusterError};

pub mod capg;
pub mod cluster_api;
pub mod hypershift;

/// Which management cluster's objects make the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetKind {
    /// HyperShift: `HostedCluster`s and their `NodePool`s.
    HyperShift,
    /// Cluster API on AWS (CAPA): `AWSCluster`s and EKS `AWSManagedControlPlane`s, with their
    /// machines' tags (`MachineDeployment`s' and `KubeadmControlPlane`s' `AWSMachineTemplate`s,
    /// `AWSMachinePool`s).
    Capa,
    /// Cluster API on Azure (CAPZ): `AzureCluster`s.
    Capz,
    /// Cluster API on Google Cloud (CAPG): `GCPCluster`s, whose labels are the policy's.
    Capg,
}

/// A `--cluster-set` kind that is none of those read (the text as given, lower-cased).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown cluster set kind {0:?}: expected hypershift (HostedClusters), capa (AWSClusters), capz (AzureClusters) or capg (GCPClusters)"
)]
pub struct UnknownSetKind(pub String);

impl FromStr for SetKind {
    type Err = UnknownSetKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "hypershift" => Ok(SetKind::HyperShift),
            "capa" => Ok(SetKind::Capa),
            "capz" => Ok(SetKind::Capz),
            "capg" => Ok(SetKind::Capg),
            other => Err(UnknownSetKind(other.to_string())),
        }
    }
}

impl fmt::Display for SetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SetKind::HyperShift => "hypershift",
            SetKind::Capa => "capa",
            SetKind::Capz => "capz",
            SetKind::Capg => "capg",
        })
    }
}

/// One custom resource type the set reads.
#[derive(Debug, Clone, Copy)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

impl Resource {
    fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(self.group, self.version, self.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, self.plural);
        match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        }
    }

    fn qualified(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

impl SetKind {
    /// The objects a member comes from, then those that refine it.
    pub fn resources(self) -> (Resource, &'static [Resource]) {
        match self {
            SetKind::HyperShift => (hypershift::HOSTED_CLUSTERS, &[hypershift::NODE_POOLS]),
            SetKind::Capa => (
                cluster_api::AWS_CLUSTERS,
                &[
                    cluster_api::MACHINE_DEPLOYMENTS,
                    cluster_api::AWS_MACHINE_TEMPLATES,
                    cluster_api::KUBEADM_CONTROL_PLANES,
                    cluster_api::AWS_MACHINE_POOLS,
                    // EKS clusters: members of their own (read_set), not refiners of an AWSCluster.
                    cluster_api::AWS_MANAGED_CONTROL_PLANES,
                ],
            ),
            SetKind::Capz => (cluster_api::AZURE_CLUSTERS, &[]),
            SetKind::Capg => (capg::GCP_CLUSTERS, &[]),
        }
    }
}

/// The object a member's tags come from, as an Event's `regarding` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One cluster of the set.
#[derive(Debug, Clone)]
pub struct Member {
    pub object: ObjectRef,
    /// The name its resources' ownership tags carry (the set's folder), when the object names it.
    pub cluster: Option<String>,
    /// The document to publish, or why the object gives none (nothing is published for it; what
    /// was published before stays in force).
    pub document: Result<SourceDocument, NoPolicy>,
}

/// What one member's object yields: the cluster and the document text, or the cluster (when the
/// object names one) and why there is no document.
pub type Translated = Result<(String, String), (Option<String>, NoPolicy)>;

/// Why an object of the set yields no policy. Each names the field (or the objects) at fault and
/// what it needs; the message is the Warning Event's note on the object.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NoPolicy {
    /// A HostedCluster before HyperShift gave it an infraID.
    #[error("spec.infraID is empty: the hosted cluster has no infraID yet, so nothing of it can be owned")]
    NoInfraId,
    /// A HostedCluster on a platform other than AWS or GCP (the platform as written).
    #[error(
        "spec.platform.type is {0}: tagwarden reads the tags of AWS hosted clusters (spec.platform.aws.resourceTags) and the labels of GCP ones (spec.platform.gcp.resourceLabels); HyperShift's other platforms carry no resource tags field to enforce"
    )]
    NotAws(String),
    /// A HostedCluster whose platform is not set.
    #[error("spec.platform.type is not set")]
    NoPlatform,
    /// A Cluster API object no `Cluster` owns yet: its ownership tags would be named after it.
    #[error(
        "{kind} {namespace}/{name} has no owning Cluster yet (no ownerReference of kind Cluster, no {label} label): its ownership tags are named after that Cluster",
        label = cluster_api::CLUSTER_NAME_LABEL
    )]
    NoOwningCluster { kind: String, namespace: String, name: String },
    /// A tags field of the wrong shape.
    #[error(transparent)]
    Field(#[from] TagFieldError),
    /// The policy could not be written as YAML.
    #[error("could not encode the document: {0}")]
    Encode(#[source] Arc<serde_yaml_ng::Error>),
    /// Other objects (`others`, as [`ObjectRef`] shows them) name the same cluster.
    #[error(
        "{} names cluster {cluster} too: one cluster's policy comes from one object; none of them is published until only one names it",
        .others.join(", ")
    )]
    SharedFolder { others: Vec<String>, cluster: String },
}

/// A tags field that is not what its kind's CRD says: `path` names the field (and the entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagFieldError {
    /// An entry of a `{key, value}` list (`path[index]`) without both strings.
    #[error("{path}[{index}]: expected {{key, value}} strings")]
    NotKeyValue { path: String, index: usize },
    /// A `{key, value}` list field holding something else.
    #[error("{path}: expected a list of {{key, value}}")]
    NotAList { path: String },
    /// A tag map's value (`path.key`) that is not a string.
    #[error("{path}.{key}: expected a string")]
    NotAString { path: String, key: String },
    /// A tag map field holding something else.
    #[error("{path}: expected a map of tag keys to values")]
    NotAMap { path: String },
}

/// Read every member of the set (in `namespace`, or all namespaces): each main object with the
/// objects that refine it, translated on its own, so one bad object never hides another cluster.
pub async fn read_set(client: &Client, kind: SetKind, namespace: Option<&str>) -> Result<Vec<Member>, ClusterError> {
    let (main, refining) = kind.resources();
    let list = |r: Resource| async move {
        let what = r.qualified();
        match r.api(client, namespace).list(&ListParams::default()).await {
            Ok(list) => Ok(list.items),
            Err(kube::Error::Api(s)) if s.code == 404 => Err(ClusterError::NotFound {
                what,
                hint: ": is this a management cluster of that kind? Its CRD is not installed here",
            }),
            Err(e) => Err(api_error(&what, "list", e)),
        }
    };
    let objects = list(main).await?;
    let mut refiners = Vec::with_capacity(refining.len());
    for r in refining {
        // A refining kind whose CRD is not installed (a management cluster without the kubeadm
        // control plane provider, or without machine pools) refines nothing; the set is read.
        match list(*r).await {
            Err(ClusterError::NotFound { what, .. }) => {
                tracing::debug!(resource = %what, "not installed here: nothing of it refines the set");
                refiners.push(Vec::new());
            }
            listed => refiners.push(listed?),
        }
    }
    // Each refining resource's objects of namespace `ns`, in `resources()`' order.
    let in_namespace = |ns: &str| -> Vec<Vec<Value>> {
        refiners
            .iter()
            .map(|all| all.iter().filter(|r| r.namespace().unwrap_or_default() == ns).map(as_value).collect())
            .collect()
    };
    let mut members: Vec<Member> = Vec::new();
    for o in &objects {
        let value = as_value(o);
        let same_ns = in_namespace(&o.namespace().unwrap_or_default());
        let of = |i: usize| same_ns.get(i).map(Vec::as_slice).unwrap_or_default();
        let translated = match kind {
            SetKind::HyperShift => hypershift::document(&value, of(0)),
            SetKind::Capa => cluster_api::aws_document(&value, capa_machines(&same_ns)),
            SetKind::Capz => cluster_api::azure_document(&value),
            SetKind::Capg => capg::gcp_document(&value),
        };
        members.push(member(main, o, translated));
    }
    if kind == SetKind::Capa {
        for o in refiners.get(4).into_iter().flatten() {
            let same_ns = in_namespace(&o.namespace().unwrap_or_default());
            for translated in cluster_api::eks_documents(&as_value(o), capa_machines(&same_ns)) {
                members.push(member(cluster_api::AWS_MANAGED_CONTROL_PLANES, o, translated));
            }
        }
    }
    members.sort_by(|a, b| (&a.object.namespace, &a.object.name).cmp(&(&b.object.namespace, &b.object.name)));
    Ok(refuse_shared_folders(members))
}

/// The objects of one namespace that name a CAPA cluster's machines, from the refiners' lists.
fn capa_machines(same_ns: &[Vec<Value>]) -> cluster_api::Machines<'_> {
    let of = |i: usize| same_ns.get(i).map(Vec::as_slice).unwrap_or_default();
    cluster_api::Machines { deployments: of(0), templates: of(1), control_planes: of(2), pools: of(3) }
}

/// The member `translated` from object `o` of `resource`.
fn member(resource: Resource, o: &DynamicObject, translated: Translated) -> Member {
    let object = ObjectRef {
        api_version: format!("{}/{}", resource.group, resource.version),
        kind: resource.kind.to_string(),
        namespace: o.namespace().unwrap_or_default(),
        name: o.name_any(),
        uid: o.uid(),
        resource_version: o.resource_version(),
    };
    let name = format!("{} {}/{}", resource.qualified(), object.namespace, object.name);
    match translated {
        Ok((cluster, text)) => Member {
            document: Ok(SourceDocument {
                name,
                text,
                resource_version: object.resource_version.clone().unwrap_or_default(),
            }),
            cluster: Some(cluster),
            object,
        },
        Err((cluster, why)) => Member { object, cluster, document: Err(why) },
    }
}

/// A cluster's folder is the set's, but the name it comes from is an editable field of a
/// namespaced object: two objects naming the same cluster would each overwrite the other's policy
/// (or one would take over another team's). None of them is published, and each is told why.
fn refuse_shared_folders(mut members: Vec<Member>) -> Vec<Member> {
    let named: Vec<Option<String>> =
        members.iter().map(|m| m.document.is_ok().then(|| m.cluster.clone()).flatten()).collect();
    for i in 0..members.len() {
        let Some(cluster) = &named[i] else { continue };
        let others: Vec<String> = members
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i && named[*j].as_ref() == Some(cluster))
            .map(|(_, m)| m.object.to_string())
            .collect();
        if !others.is_empty() {
            members[i].document = Err(NoPolicy::SharedFolder { others, cluster: cluster.clone() });
        }
    }
    members
}

/// `--watch`: a unit each time any object of the set changes (either resource; after a
/// disconnect, once the re-list is complete), for the caller to read the set again. kube's
/// watcher keeps each watch going (resume, re-list after `410 Gone`) and backs off on errors,
/// which are logged: the caller's periodic resync covers what a long outage hid.
pub fn changes(client: Client, kind: SetKind, namespace: Option<String>) -> impl Stream<Item = ()> + Send {
    let (main, refining) = kind.resources();
    let watch = move |r: Resource| {
        watcher(r.api(&client, namespace.as_deref()), watcher::Config::default())
            .default_backoff()
            .filter_map(move |e| async move {
                match e {
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => Some(()),
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                    // A refining kind whose CRD is not installed (read_set reads it as empty) is
                    // watched with back-off in case it appears, quietly.
                    Err(
                        watcher::Error::InitialListFailed(kube::Error::Api(s))
                        | watcher::Error::WatchFailed(kube::Error::Api(s)),
                    ) if s.code == 404 => {
                        tracing::debug!(resource = %r.qualified(), "not installed here; watched again later");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(resource = %r.qualified(), error = %e, "watch interrupted; retrying");
                        None
                    }
                }
            })
            .boxed()
    };
    let mut all = vec![watch(main)];
    all.extend(refining.iter().copied().map(watch));
    stream::select_all(all)
}

fn as_value(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// `{key, value}` lists (HyperShift's `resourceTags`) as a map, in order, a later key winning as
/// a map would; `path` names the field in the message for anything else.
pub(crate) fn key_value_list(list: Option<&Value>, path: &str) -> Result<Map<String, Value>, TagFieldError> {
    let mut out = Map::new();
    match list {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let key = item.get("key").and_then(Value::as_str);
                let value = item.get("value").and_then(Value::as_str);
                match (key, value) {
                    (Some(k), Some(v)) => drop(out.insert(k.to_string(), json!(v))),
                    _ => return Err(TagFieldError::NotKeyValue { path: path.to_string(), index: i }),
                }
            }
        }
        Some(_) => return Err(TagFieldError::NotAList { path: path.to_string() }),
    }
    Ok(out)
}

/// A string→string map (Cluster API's `additionalTags`).
pub(crate) fn string_map(map: Option<&Value>, path: &str) -> Result<Map<String, Value>, TagFieldError> {
    match map {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => {
            for (k, v) in m {
                if !v.is_string() {
                    return Err(TagFieldError::NotAString { path: path.to_string(), key: k.clone() });
                }
            }
            Ok(m.clone())
        }
        Some(_) => Err(TagFieldError::NotAMap { path: path.to_string() }),
    }
}

/// The native document: a header comment naming its sources, then the policy as YAML.
pub(crate) fn native_document(sources: &[String], policy: &Value) -> Result<String, NoPolicy> {
    let yaml = serde_yaml_ng::to_string(policy).map_err(|e| NoPolicy::Encode(Arc::new(e)))?;
    let mut out = String::from("# Published by `tagwarden publish --from-cluster --cluster-set` from:\n");
    for s in sources {
        // A comment line stays one line whatever an object carries (an ownerReference's name is
        // not validated as a DNS name).
        // Only printable ASCII: YAML also breaks lines at U+0085, U+2028 and U+2029.
        let line: String = s.chars().map(|c| if c == ' ' || c.is_ascii_graphic() { c } else { '?' }).collect();
        out.push_str(&format!("#   {line}\n"));
    }
    out.push_str(&yaml);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(ns: &str, name: &str, cluster: &str) -> Member {
        let object = ObjectRef {
            api_version: "infrastructure.cluster.x-k8s.io/v1beta2".into(),
            kind: "AWSCluster".into(),
            namespace: ns.into(),
            name: name.into(),
            uid: None,
            resource_version: None,
        };
        let document = SourceDocument { name: name.into(), text: "version: 1\n".into(), resource_version: "1".into() };
        Member { object, cluster: Some(cluster.into()), document: Ok(document) }
    }

    #[test]
    fn two_objects_naming_one_cluster_publish_neither() {
        let members = refuse_shared_folders(vec![
            member("team-a", "dev", "dev"),
            member("team-b", "dev", "dev"),
            member("x", "w", "w-1"),
        ]);
        let why = |i: usize| members[i].document.as_ref().err().map(ToString::to_string).unwrap_or_default();
        assert!(why(0).contains("AWSCluster team-b/dev names cluster dev too"), "{}", why(0));
        assert!(why(1).contains("AWSCluster team-a/dev names cluster dev too"), "{}", why(1));
        assert!(members[2].document.is_ok(), "another cluster is published");
    }

    #[test]
    fn a_header_line_is_one_line_of_printable_ascii() {
        let text =
            native_document(&["a\u{2028}enforce: false\nb\u{85}c".into()], &json!({"version": 1})).expect("text");
        assert_eq!(text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(), ["version: 1"], "{text}");
    }
}
