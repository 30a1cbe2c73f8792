//! The official clients tagwarden calls, built once per process, and where they point.

use google_cloud_auth::credentials::{self, CacheableResource, Credentials};
use google_cloud_compute_v1::client as compute;
use google_cloud_dns_v1::client::ManagedZones;
use google_cloud_resourcemanager_v3::client::{TagBindings, TagValues};
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// `s` as one URL path segment: everything but unreserved characters percent-encoded, `/` as
/// `%2F` (a Cloud Storage object name; a tag binding's parent inside its name).
pub fn encode_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Resource Manager's global endpoint.
pub const RESOURCE_MANAGER: &str = "https://cloudresourcemanager.googleapis.com";

/// The services' endpoints: Google's own unless overridden (tests, Private Service Connect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub compute: String,
    pub asset: String,
    pub dns: String,
    /// Cloud Storage's JSON API for bucket labels.
    pub storage: String,
    /// Resource Manager's global endpoint, for tag bindings; a zonal or regional resource's go to
    /// its location's endpoint (the tags module's `endpoint_for`).
    pub resource_manager: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            compute: "https://compute.googleapis.com".into(),
            asset: "https://cloudasset.googleapis.com".into(),
            dns: "https://dns.googleapis.com".into(),
            storage: "https://storage.googleapis.com".into(),
            resource_manager: RESOURCE_MANAGER.into(),
        }
    }
}

impl Endpoints {
    /// Every service at one base URL (a test server that answers for all of them).
    pub fn all_at(base: &str) -> Self {
        let base = base.trim_end_matches('/').to_string();
        Endpoints {
            compute: base.clone(),
            asset: base.clone(),
            dns: base.clone(),
            storage: base.clone(),
            resource_manager: base,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientsError {
    #[error("cannot build the Google Cloud {service} client: {source}")]
    Build { service: &'static str, source: google_cloud_gax::client_builder::Error },
    #[error("cannot load Application Default Credentials: {0} (on Cloud Run the service's own account is used; elsewhere run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS)")]
    Credentials(String),
}

pub struct ComputeClients {
    pub instances: compute::Instances,
    pub disks: compute::Disks,
    pub forwarding_rules: compute::ForwardingRules,
    pub global_forwarding_rules: compute::GlobalForwardingRules,
    pub addresses: compute::Addresses,
    pub global_addresses: compute::GlobalAddresses,
    pub images: compute::Images,
    pub snapshots: compute::Snapshots,
}

pub struct Clients {
    pub endpoints: Endpoints,
    pub compute: ComputeClients,
    pub asset: google_cloud_asset_v1::client::AssetService,
    pub dns: ManagedZones,
    pub http: reqwest::Client,
    /// Resource Manager's tag-binding clients, one per endpoint, built as first needed.
    tag_bindings: tokio::sync::Mutex<std::collections::HashMap<String, TagBindings>>,
    /// Resource Manager's tag values (global), built as first needed.
    tag_values: tokio::sync::OnceCell<TagValues>,
    credentials: Credentials,
}

/// rustls' ring provider as the process default, which the Google clients (built without a
/// provider of their own) and the AWS side share. Idempotent.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

macro_rules! build {
    ($client:ty, $service:literal, $endpoint:expr, $creds:expr) => {
        <$client>::builder()
            .with_endpoint($endpoint)
            .with_credentials($creds.clone())
            .build()
            .await
            .map_err(|source| ClientsError::Build { service: $service, source })?
    };
}

impl Clients {
    /// Clients with Application Default Credentials (`anonymous`: none, for a test server).
    pub async fn new(endpoints: Endpoints, anonymous: bool) -> Result<Self, ClientsError> {
        install_crypto();
        let creds = if anonymous {
            credentials::anonymous::Builder::new().build()
        } else {
            credentials::Builder::default().build().map_err(|e| ClientsError::Credentials(e.to_string()))?
        };
        let c = &endpoints.compute;
        let compute = ComputeClients {
            instances: build!(compute::Instances, "Compute Engine", c, creds),
            disks: build!(compute::Disks, "Compute Engine", c, creds),
            forwarding_rules: build!(compute::ForwardingRules, "Compute Engine", c, creds),
            global_forwarding_rules: build!(compute::GlobalForwardingRules, "Compute Engine", c, creds),
            addresses: build!(compute::Addresses, "Compute Engine", c, creds),
            global_addresses: build!(compute::GlobalAddresses, "Compute Engine", c, creds),
            images: build!(compute::Images, "Compute Engine", c, creds),
            snapshots: build!(compute::Snapshots, "Compute Engine", c, creds),
        };
        let asset = build!(google_cloud_asset_v1::client::AssetService, "Cloud Asset", &endpoints.asset, creds);
        let dns = build!(ManagedZones, "Cloud DNS", &endpoints.dns, creds);
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| ClientsError::Credentials(e.to_string()))?;
        Ok(Clients {
            endpoints,
            compute,
            asset,
            dns,
            http,
            tag_bindings: Default::default(),
            tag_values: Default::default(),
            credentials: creds,
        })
    }

    /// The tag-values client, at the global endpoint, built the first time it is asked for.
    pub async fn tag_values(&self) -> Result<&TagValues, ClientsError> {
        self.tag_values
            .get_or_try_init(|| async {
                Ok(build!(TagValues, "Resource Manager", &self.endpoints.resource_manager, self.credentials))
            })
            .await
    }

    /// The tag-binding client for `endpoint`, built the first time it is asked for.
    pub async fn tag_bindings(&self, endpoint: &str) -> Result<TagBindings, ClientsError> {
        let mut clients = self.tag_bindings.lock().await;
        if let Some(c) = clients.get(endpoint) {
            return Ok(c.clone());
        }
        let c = build!(TagBindings, "Resource Manager", endpoint, self.credentials);
        clients.insert(endpoint.to_string(), c.clone());
        Ok(c)
    }

    /// `req` with the credentials' headers (none when anonymous).
    pub async fn authorized(&self, req: reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, CloudError> {
        match self.credentials.headers(http::Extensions::new()).await {
            Ok(CacheableResource::New { data, .. }) => Ok(req.headers(data)),
            Ok(CacheableResource::NotModified) => Ok(req),
            Err(e) => Err(CloudError::gcp(
                "identity:Token",
                "Application Default Credentials",
                None,
                "Credentials",
                &e.to_string(),
                ErrorClass::Transient,
            )),
        }
    }
}
