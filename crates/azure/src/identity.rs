//! Managed-identity tokens from the App Service / Functions identity endpoint (Azure's documentation
//! §4.1): `GET $IDENTITY_ENDPOINT?resource=<audience>&api-version=2019-08-01[&client_id=…]` with
//! header `X-IDENTITY-HEADER: $IDENTITY_HEADER`. Tokens are cached per audience until
//! [`REFRESH_MARGIN`] before their `expires_on`, so a warm function asks once per audience per
//! token lifetime.
//!
//! In a cluster, the publisher uses Workload Identity ([`ManagedIdentity::workload_from_env`]):
//! the projected service-account token in `AZURE_FEDERATED_TOKEN_FILE` is exchanged at
//! `$AZURE_AUTHORITY_HOST/$AZURE_TENANT_ID/oauth2/v2.0/token` for an Entra token — the client
//! credentials grant with a federated assertion (Microsoft identity platform,
//! "access token request with a federated credential": `grant_type=client_credentials`,
//! `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer`,
//! `scope=<resource>/.default`; the answer carries `expires_in` seconds). The file is read again
//! for every exchange: the kubelet rotates it.
//!
//! The CLI, run by a person, has no managed identity: it takes an ARM access token obtained
//! elsewhere (`az account get-access-token`) as [`ManagedIdentity::given`].
//!
//! Deliberately not here: IMDS, the 2017 `MSI_ENDPOINT` protocol, client secrets.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::sync::Mutex;

use tagwarden_core::calls::CallCounter;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::retry::Backoff;

pub const API_VERSION: &str = "2019-08-01";
/// Audience of Azure Resource Manager.
pub const ARM_AUDIENCE: &str = "https://management.azure.com/";
/// Audience of Blob storage.
pub const STORAGE_AUDIENCE: &str = "https://storage.azure.com/";
/// Audience of Azure Monitor custom metrics (the trailing slash matters).
pub const MONITORING_AUDIENCE: &str = "https://monitoring.azure.com/";
/// A cached token is renewed this long before it expires.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(300);

pub const OP_TOKEN: &str = "identity:Token";

#[derive(Clone)]
struct Cached {
    token: String,
    expires_on: u64,
}

/// The function's managed identity, or a token given for one audience.
pub struct ManagedIdentity {
    source: TokenSource,
    calls: CallCounter,
    cache: Mutex<HashMap<String, Cached>>,
}

enum TokenSource {
    Endpoint {
        endpoint: reqwest::Url,
        header: String,
        /// The user-assigned identity to act as (`TAGWARDEN_SELF_CLIENT_ID`); `None`: system-assigned.
        client_id: Option<String>,
        http: reqwest::Client,
    },
    Given {
        audience: String,
        token: String,
    },
    Federated(Federated),
}

/// Workload Identity's settings, as the webhook (or OpenShift's cloud-credential operator in
/// manual mode) puts them in the pod's environment.
pub struct Federated {
    /// `…/{tenant}/oauth2/v2.0/token`.
    token_url: reqwest::Url,
    client_id: String,
    token_file: std::path::PathBuf,
    http: reqwest::Client,
}

/// The settings Workload Identity reads.
pub const WORKLOAD_IDENTITY_ENV: [&str; 3] = ["AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE"];
/// The public cloud's authority, when `AZURE_AUTHORITY_HOST` is not set.
pub const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com/";

impl std::fmt::Debug for ManagedIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the identity header or a token: they are secrets.
        match &self.source {
            TokenSource::Endpoint { endpoint, client_id, .. } => f
                .debug_struct("ManagedIdentity")
                .field("endpoint", &endpoint.as_str())
                .field("client_id", client_id)
                .finish(),
            TokenSource::Given { audience, .. } => f.debug_struct("GivenToken").field("audience", audience).finish(),
            TokenSource::Federated(w) => f
                .debug_struct("WorkloadIdentity")
                .field("token_url", &w.token_url.as_str())
                .field("client_id", &w.client_id)
                .field("token_file", &w.token_file)
                .finish(),
        }
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// Epoch seconds, as a string in the documented sample, a number elsewhere (managed identity).
    #[serde(default)]
    expires_on: Option<serde_json::Value>,
    /// Seconds from now (Entra's token endpoint).
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
}

/// Entra's error answer (`{"error": "invalid_client", "error_description": "AADSTS700024: …"}`).
#[derive(Deserialize)]
struct EntraError {
    error: String,
    #[serde(default)]
    error_description: String,
}

impl ManagedIdentity {
    pub fn new(
        endpoint: reqwest::Url,
        header: String,
        client_id: Option<String>,
        http: reqwest::Client,
        calls: CallCounter,
    ) -> Self {
        let source = TokenSource::Endpoint { endpoint, header, client_id, http };
        ManagedIdentity { source, calls, cache: Mutex::new(HashMap::new()) }
    }

    /// `token`, an access token for `audience` obtained elsewhere, used as given (no refresh).
    pub fn given(audience: &str, token: String, calls: CallCounter) -> Self {
        let source = TokenSource::Given { audience: audience.to_string(), token };
        ManagedIdentity { source, calls, cache: Mutex::new(HashMap::new()) }
    }

    /// Workload Identity from `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`
    /// and `AZURE_AUTHORITY_HOST`; `None` when the pod has none of the first three, an error
    /// naming what is missing when it has only some.
    pub fn workload_from_env(http: reqwest::Client, calls: CallCounter) -> Option<Result<Self, CloudError>> {
        let values: Vec<Option<String>> =
            WORKLOAD_IDENTITY_ENV.iter().map(|n| std::env::var(n).ok().filter(|v| !v.is_empty())).collect();
        if values.iter().all(Option::is_none) {
            return None;
        }
        let missing: Vec<&str> =
            WORKLOAD_IDENTITY_ENV.iter().zip(&values).filter(|(_, v)| v.is_none()).map(|(n, _)| *n).collect();
        let [Some(client_id), Some(tenant), Some(file)] = <[Option<String>; 3]>::try_from(values).ok()? else {
            let why = format!(
                "Workload Identity needs {}; {} not set (the Workload Identity webhook, or the Secret ccoctl writes, provides them)",
                WORKLOAD_IDENTITY_ENV.join(", "),
                missing.join(", ")
            );
            return Some(Err(CloudError::azure(
                OP_TOKEN,
                "workload identity",
                None,
                "MissingSetting",
                &why,
                ErrorClass::Denied,
            )));
        };
        let authority = std::env::var("AZURE_AUTHORITY_HOST").ok().filter(|v| !v.is_empty());
        let authority = authority.as_deref().unwrap_or(DEFAULT_AUTHORITY);
        let token_url =
            match reqwest::Url::parse(&format!("{}/{tenant}/oauth2/v2.0/token", authority.trim_end_matches('/'))) {
                Ok(u) => u,
                Err(e) => {
                    let why = format!("AZURE_AUTHORITY_HOST={authority} with AZURE_TENANT_ID={tenant} is no URL: {e}");
                    return Some(Err(CloudError::azure(
                        OP_TOKEN,
                        "workload identity",
                        None,
                        "BadSetting",
                        &why,
                        ErrorClass::Fatal,
                    )));
                }
            };
        let source = TokenSource::Federated(Federated { token_url, client_id, token_file: file.into(), http });
        Some(Ok(ManagedIdentity { source, calls, cache: Mutex::new(HashMap::new()) }))
    }

    /// A bearer token for `audience`, from the cache while it has more than [`REFRESH_MARGIN`] left.
    pub async fn token(&self, audience: &str) -> Result<String, CloudError> {
        if let TokenSource::Given { audience: given, token } = &self.source {
            return if given == audience {
                Ok(token.clone())
            } else {
                let why = format!("only a token for {given} was given");
                Err(CloudError::azure(OP_TOKEN, audience, None, "NoToken", &why, ErrorClass::Denied))
            };
        }
        let mut cache = self.cache.lock().await;
        let now = now_secs();
        if let Some(c) = cache.get(audience) {
            if c.expires_on > now + REFRESH_MARGIN.as_secs() {
                return Ok(c.token.clone());
            }
        }
        let fresh = self.fetch(audience).await?;
        let token = fresh.token.clone();
        cache.insert(audience.to_string(), fresh);
        Ok(token)
    }

    async fn fetch(&self, audience: &str) -> Result<Cached, CloudError> {
        let target = match &self.source {
            TokenSource::Endpoint { endpoint, .. } => format!("{endpoint} for {audience}"),
            TokenSource::Federated(w) => format!("{} for {audience}", w.token_url),
            TokenSource::Given { .. } => {
                let why = "no identity endpoint";
                return Err(CloudError::azure(OP_TOKEN, audience, None, "NoToken", why, ErrorClass::Denied));
            }
        };
        let target = &target;
        // Not retried: a token file unreadable or the identity refused (`Denied`), a bad answer (`Fatal`).
        let retryable = |e: &CloudError| e.class.is_retryable();
        let exchange = |_| async move {
            let request = self.request(audience)?;
            self.calls.record(OP_TOKEN);
            let resp = request.send().await.map_err(|e| crate::error::transport(OP_TOKEN, target, &e))?;
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            match status {
                200 => parse_token(target, &body),
                _ => Err(self.refused(target, status, &body)),
            }
        };
        Backoff::TOKEN.retry(retryable, exchange).await
    }

    /// One token request; for Workload Identity the projected token is read afresh each time.
    fn request(&self, audience: &str) -> Result<reqwest::RequestBuilder, CloudError> {
        match &self.source {
            TokenSource::Endpoint { endpoint, header, client_id, http } => {
                let mut url = endpoint.clone();
                {
                    let mut q = url.query_pairs_mut();
                    q.append_pair("resource", audience).append_pair("api-version", API_VERSION);
                    if let Some(id) = client_id {
                        q.append_pair("client_id", id);
                    }
                }
                Ok(http.get(url).header("X-IDENTITY-HEADER", header))
            }
            TokenSource::Federated(w) => {
                let assertion = std::fs::read_to_string(&w.token_file).map_err(|e| {
                    let why = format!(
                        "AZURE_FEDERATED_TOKEN_FILE={}: {e}; the pod needs the projected service-account token mounted there (audience `openshift` as ccoctl sets the federated credential, or api://AzureADTokenExchange with the AKS webhook)",
                        w.token_file.display()
                    );
                    CloudError::azure(OP_TOKEN, "workload identity", None, "FederatedTokenUnreadable", &why, ErrorClass::Denied)
                })?;
                let scope = format!("{}/.default", audience.trim_end_matches('/'));
                let form = [
                    ("client_id", w.client_id.as_str()),
                    ("scope", scope.as_str()),
                    ("grant_type", "client_credentials"),
                    ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    ("client_assertion", assertion.trim()),
                ];
                Ok(w.http.post(w.token_url.clone()).form(&form))
            }
            TokenSource::Given { .. } => {
                Err(CloudError::azure(OP_TOKEN, audience, None, "NoToken", "no identity endpoint", ErrorClass::Denied))
            }
        }
    }

    /// A refused token request, classified: refusals of the identity itself are not retried, and
    /// Entra's refusals of a federated token name the setting to fix.
    fn refused(&self, target: &str, status: u16, body: &str) -> CloudError {
        if let (TokenSource::Federated(w), Ok(e)) = (&self.source, serde_json::from_str::<EntraError>(body)) {
            let class = if status >= 500 || status == 429 { ErrorClass::Transient } else { ErrorClass::Denied };
            let code = e.error_description.split(':').next().filter(|c| c.starts_with("AADSTS")).unwrap_or(&e.error);
            let fix = match code {
                // AADSTS700024: the assertion is outside its validity; AADSTS700027: its signature
                // cannot be verified (reference: Entra's AADSTS error code list).
                "AADSTS700024" => format!(
                    "the service-account token in {} has expired: the kubelet refreshes projected tokens, so check that the volume is projected (not a copied Secret) and that the pod's clock is right",
                    w.token_file.display()
                ),
                "AADSTS70021" | "AADSTS700213" | "AADSTS700211" => format!(
                    "no federated credential of client {} matches this token: its issuer must be the cluster's service-account issuer and its subject system:serviceaccount:NAMESPACE:SERVICEACCOUNT",
                    w.client_id
                ),
                _ => format!("check AZURE_CLIENT_ID={} and AZURE_TENANT_ID, and the identity's federated credential", w.client_id),
            };
            let message = format!("{}: {}; {fix}", e.error, e.error_description.lines().next().unwrap_or_default());
            return CloudError::azure(OP_TOKEN, target, Some(status), code, &message, class);
        }
        let mut err = crate::error::from_response(OP_TOKEN, target, status, None, body);
        if matches!(status, 400 | 401 | 403) {
            err.class = ErrorClass::Denied;
        }
        err
    }
}

fn parse_token(target: &str, body: &str) -> Result<Cached, CloudError> {
    let bad = |why: &str| CloudError::azure(OP_TOKEN, target, Some(200), "BadTokenResponse", why, ErrorClass::Fatal);
    let parsed: TokenResponse = serde_json::from_str(body).map_err(|e| bad(&e.to_string()))?;
    let seconds = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.parse::<u64>().ok(),
        serde_json::Value::Number(n) => n.as_u64(),
        _ => None,
    };
    let expires_on = match (&parsed.expires_on, &parsed.expires_in) {
        (Some(on), _) => seconds(on),
        (None, Some(within)) => seconds(within).map(|s| now_secs() + s),
        (None, None) => None,
    }
    .ok_or_else(|| bad("neither expires_on (epoch seconds) nor expires_in (seconds)"))?;
    Ok(Cached { token: parsed.access_token, expires_on })
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}
