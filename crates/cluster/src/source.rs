//! Where the cluster publishes its tags, and the policy document read from there.

use std::fmt;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, ResourceExt};

use super::infrastructure::{self, Infrastructure};
use super::{api_error, ClusterError};

/// The ConfigMap key that holds a native policy.
pub const CONFIGMAP_KEY: &str = "tagwarden.yaml";

/// The object whose content is the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterSource {
    /// OpenShift's `Infrastructure` object (`infrastructures.config.openshift.io/cluster`).
    Infrastructure,
    /// A ConfigMap holding a `tagwarden.yaml` under [`CONFIGMAP_KEY`], for clusters without one.
    ConfigMap { namespace: String, name: String },
}

impl ClusterSource {
    /// `NS/NAME`, as `--configmap` takes it.
    pub fn configmap(spec: &str) -> Option<ClusterSource> {
        let (namespace, name) = spec.split_once('/')?;
        let valid = |s: &str| !s.is_empty() && !s.contains('/');
        (valid(namespace) && valid(name))
            .then(|| ClusterSource::ConfigMap { namespace: namespace.to_string(), name: name.to_string() })
    }

    /// The object's name: what the watch selects on.
    pub(crate) fn object_name(&self) -> &str {
        match self {
            ClusterSource::Infrastructure => infrastructure::NAME,
            ClusterSource::ConfigMap { name, .. } => name,
        }
    }
}

impl fmt::Display for ClusterSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterSource::Infrastructure => {
                write!(f, "{}.{}/{}", infrastructure::PLURAL, infrastructure::GROUP, infrastructure::NAME)
            }
            ClusterSource::ConfigMap { namespace, name } => write!(f, "configmap {namespace}/{name}"),
        }
    }
}

/// One complete policy document as read from the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDocument {
    /// The document's name for the policy loader and its messages, e.g.
    /// `infrastructures.config.openshift.io/cluster`.
    pub name: String,
    /// The document: the Infrastructure object as YAML, or the ConfigMap's `tagwarden.yaml` as is.
    pub text: String,
    /// `metadata.resourceVersion` of the object it was read from.
    pub resource_version: String,
}

pub(crate) const NOT_OPENSHIFT: &str =
    ": is this an OpenShift cluster? Elsewhere publish a tagwarden.yaml from a ConfigMap (--configmap NS/NAME)";

/// Read the source once.
pub async fn read_once(client: &Client, source: &ClusterSource) -> Result<SourceDocument, ClusterError> {
    let what = source.to_string();
    match source {
        ClusterSource::Infrastructure => {
            let api: Api<Infrastructure> = Api::all(client.clone());
            match api.get(infrastructure::NAME).await {
                Ok(infra) => document_of_infrastructure(&infra),
                Err(kube::Error::Api(s)) if s.code == 404 => Err(ClusterError::NotFound { what, hint: NOT_OPENSHIFT }),
                Err(e) => Err(api_error(&what, "get", e)),
            }
        }
        ClusterSource::ConfigMap { namespace, name } => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            match api.get(name).await {
                Ok(cm) => document_of_configmap(source, &cm),
                Err(kube::Error::Api(s)) if s.code == 404 => Err(ClusterError::NotFound {
                    what,
                    hint: ": create it with the policy under data.\"tagwarden.yaml\"",
                }),
                Err(e) => Err(api_error(&what, "get", e)),
            }
        }
    }
}

pub(crate) fn document_of_infrastructure(infra: &Infrastructure) -> Result<SourceDocument, ClusterError> {
    let name = ClusterSource::Infrastructure.to_string();
    let text = infra.to_document().map_err(|e| ClusterError::Encode { what: name.clone(), message: e.to_string() })?;
    Ok(SourceDocument { name, text, resource_version: infra.resource_version().unwrap_or_default() })
}

pub(crate) fn document_of_configmap(source: &ClusterSource, cm: &ConfigMap) -> Result<SourceDocument, ClusterError> {
    let data = cm.data.as_ref();
    match data.and_then(|d| d.get(CONFIGMAP_KEY)) {
        Some(text) => Ok(SourceDocument {
            name: format!("{source} {CONFIGMAP_KEY}"),
            text: text.clone(),
            resource_version: cm.resource_version().unwrap_or_default(),
        }),
        None => {
            let keys: Vec<&str> = data.map(|d| d.keys().map(String::as_str).collect()).unwrap_or_default();
            Err(ClusterError::MissingKey {
                configmap: source.to_string().trim_start_matches("configmap ").to_string(),
                key: CONFIGMAP_KEY.to_string(),
                keys: if keys.is_empty() { "none".to_string() } else { keys.join(", ") },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmap_spec_is_namespace_slash_name() {
        assert_eq!(
            ClusterSource::configmap("tagwarden/policy"),
            Some(ClusterSource::ConfigMap { namespace: "tagwarden".into(), name: "policy".into() })
        );
        for bad in ["policy", "/policy", "ns/", "a/b/c", ""] {
            assert_eq!(ClusterSource::configmap(bad), None, "{bad:?}");
        }
    }
}
