//! Managed-identity tokens from the App Service / Functions identity endpoint (reference/azure.md
//! §4.1): `GET $IDENTITY_ENDPOINT?resource=<audience>&api-version=2019-08-01[&client_id=…]` with
//! header `X-IDENTITY-HEADER: $IDENTITY_HEADER`. Tokens are cached per audience until
//! [`REFRESH_MARGIN`] before their `expires_on`, so a warm function asks once per audience per
//! token lifetime.
//!
//! The CLI, run by a person, has no managed identity: it takes an ARM access token obtained
//! elsewhere (`az account get-access-token`) as [`ManagedIdentity::given`].
//!
//! Deliberately not here: IMDS, the 2017 `MSI_ENDPOINT` protocol, client secrets or workload
//! identity — the function runs in App Service with `IDENTITY_ENDPOINT`, and tests run a fake of it.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::sync::Mutex;

use crate::calls::CallCounter;
use crate::error_policy::{CloudError, ErrorClass};

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
}

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
        }
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    /// Epoch seconds, as a string in the documented sample, a number elsewhere.
    expires_on: serde_json::Value,
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
        let TokenSource::Endpoint { endpoint, header, client_id, http } = &self.source else {
            return Err(CloudError::azure(
                OP_TOKEN,
                audience,
                None,
                "NoToken",
                "no identity endpoint",
                ErrorClass::Denied,
            ));
        };
        let mut url = endpoint.clone();
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("resource", audience).append_pair("api-version", API_VERSION);
            if let Some(id) = client_id {
                q.append_pair("client_id", id);
            }
        }
        let target = format!("{endpoint} for {audience}");
        let mut last = None;
        for attempt in 0..3u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            self.calls.record(OP_TOKEN);
            let resp = match http.get(url.clone()).header("X-IDENTITY-HEADER", header).send().await {
                Ok(r) => r,
                Err(e) => {
                    last = Some(CloudError::transport(OP_TOKEN, &target, &e));
                    continue;
                }
            };
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            if status != 200 {
                let mut err = CloudError::from_response(OP_TOKEN, &target, status, None, &body);
                if matches!(status, 400 | 401 | 403) {
                    err.class = ErrorClass::Denied;
                }
                if !err.class.is_retryable() {
                    return Err(err);
                }
                last = Some(err);
                continue;
            }
            let parsed: TokenResponse = serde_json::from_str(&body).map_err(|e| {
                CloudError::azure(OP_TOKEN, &target, Some(200), "BadTokenResponse", &e.to_string(), ErrorClass::Fatal)
            })?;
            let expires_on = match &parsed.expires_on {
                serde_json::Value::String(s) => s.parse::<u64>().ok(),
                serde_json::Value::Number(n) => n.as_u64(),
                _ => None,
            }
            .ok_or_else(|| {
                CloudError::azure(
                    OP_TOKEN,
                    &target,
                    Some(200),
                    "BadTokenResponse",
                    "expires_on is not epoch seconds",
                    ErrorClass::Fatal,
                )
            })?;
            return Ok(Cached { token: parsed.access_token, expires_on });
        }
        Err(last.unwrap_or_else(|| CloudError::azure(OP_TOKEN, &target, None, "NoAttempt", "", ErrorClass::Transient)))
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}
