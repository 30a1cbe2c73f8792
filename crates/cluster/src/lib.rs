//! The cluster side: read the tags the cluster publishes straight from the Kubernetes API, watch
//! them, and show tagwarden's status back in the cluster.
//!
//! - [`source`]: the OpenShift `Infrastructure` object (`config.openshift.io/v1`, `cluster`) or a
//!   ConfigMap holding a `tagwarden.yaml` → the policy document bytes `tagwarden validate` and the
//!   function read ([`tagwarden_core::policy::load`]), so the same validation applies to both paths.
//! - [`watch`]: list + watch on that one object, resuming after disconnects and re-listing after
//!   `410 Gone`; it yields only complete objects, and a new document only when its bytes change.
//! - [`cluster_set`]: on a HyperShift or Cluster API management cluster, one policy per hosted or
//!   workload cluster (`HostedCluster` + `NodePool`s, `AWSCluster`, `AzureCluster`, `GCPCluster`).
//! - [`mirror`]: the status report into a ConfigMap, with a Kubernetes Event when the state changes.
//! - [`publisher`]: `publish --from-cluster --watch` as kube-runtime controllers, one cluster's or
//!   a cluster set's, generic over the policy store ([`publisher::Publish`]).
//!
//! Everything here speaks to the API server through `kube` (in-cluster config or a kubeconfig).

pub mod cluster_set;
pub mod conditions;
pub mod health;
pub mod infrastructure;
pub mod mirror;
pub mod publisher;
pub mod source;
pub mod watch;

use std::path::Path;

pub use conditions::{Conditions, Facts, PublishFailure};
pub use kube::Client;
pub use mirror::{warn_member, MirrorOutcome, StatusMirror};
pub use source::{read_once, ClusterSource, SourceDocument};
pub use watch::{watch, watch_counting, Change};

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubeconfig {path}: {source}; pass a readable kubeconfig with --kubeconfig, or run in a pod with a service account")]
    Kubeconfig { path: String, source: kube::config::KubeconfigError },
    #[error("no Kubernetes configuration found ({0}); set --kubeconfig or KUBECONFIG, or run in a pod with a service account")]
    NoConfig(#[source] kube::config::InferConfigError),
    #[error("Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    #[error("{what} not found{hint}")]
    NotFound { what: String, hint: &'static str },
    /// 401: the API server does not know who is asking; no Role can fix that.
    #[error("{what}: the API server did not accept the credentials ({status}); the kubeconfig's token or certificate is wrong or expired, or in a pod the service account token is not mounted (automountServiceAccountToken: false)")]
    Unauthorized { what: String, status: String },
    #[error("{what}: access denied ({status}); grant the service account {verbs} on it (deploy/kubernetes/base/status-rbac.yaml; the Infrastructure reader in components/openshift/infrastructure-reader.yaml)")]
    Forbidden { what: String, verbs: &'static str, status: String },
    /// `detail` is the whole chain of causes: kube's own message for a failed connection is only
    /// "client error (Connect)", and the cause (refused, certificate not trusted …) is below it.
    #[error("{what}: {detail}")]
    Api { what: String, detail: String },
    #[error("configmap {configmap} has no key {key:?} (keys: {keys}); put the policy under data.{key}")]
    MissingKey { configmap: String, key: String, keys: String },
    #[error("{what}: could not encode the document: {message}")]
    Encode { what: String, message: String },
}

/// A client from the kubeconfig at `kubeconfig`, or else the usual inference: `KUBECONFIG` or
/// `~/.kube/config`, then the pod's service account (in-cluster config).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClusterError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |source| ClusterError::Kubeconfig { path: path.display().to_string(), source };
            let file = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => kube::Config::infer().await.map_err(ClusterError::NoConfig)?,
    };
    Client::try_from(without_env_proxy(config)).map_err(ClusterError::Client)
}

/// kube applies `HTTPS_PROXY` to the API server when a kubeconfig names no `proxy-url`
/// (kube-client 5 `file_loader.rs`), and fails without its `http-proxy` feature. The cluster-wide
/// proxy is for the way out to the cloud: OpenShift's `Proxy` object always puts the API server
/// and the service network in `noProxy`. So only a kubeconfig's own `proxy-url` is kept.
fn without_env_proxy(mut config: kube::Config) -> kube::Config {
    let from_env = ["HTTPS_PROXY", "https_proxy"].iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()));
    if let (Some(proxy), Some(env)) = (&config.proxy_url, from_env) {
        if proxy.to_string().trim_end_matches('/') == env.trim_end_matches('/') {
            config.proxy_url = None;
        }
    }
    config
}

/// An API error, named after `what` was asked, with the fix for the two a user can act on.
fn api_error(what: &str, verbs: &'static str, e: kube::Error) -> ClusterError {
    match &e {
        kube::Error::Api(s) if s.code == 401 => {
            ClusterError::Unauthorized { what: what.to_string(), status: s.message.clone() }
        }
        kube::Error::Api(s) if s.code == 403 => {
            ClusterError::Forbidden { what: what.to_string(), verbs, status: s.message.clone() }
        }
        _ => ClusterError::Api { what: what.to_string(), detail: tagwarden_core::error_chain(&e) },
    }
}
