//! The Azure side (docs/src/design/architecture.md): the ARM Tags API client, managed-identity tokens, the policy
//! store on Blob storage, Azure Monitor custom metrics, the engine's adapter, and the Functions
//! custom-handler protocol that the `tagwarden-azure-function` binary serves.
//!
//! Everything talks plain HTTPS through one `reqwest` client (rustls on ring). No Azure SDK crate:
//! none covers the Tags API (Azure's documentation), and for tokens and blobs Microsoft's
//! `azure_identity` 1.0 / `azure_storage_blob` 1.1 were measured against this code (release
//! builds, same profile, a managed-identity token then a conditional blob GET): with their
//! defaults +2.8 MiB and +40 ms to the first blob response (aws-lc's entropy seeding at the first
//! TLS handshake), with a ring transport of our own still +0.8 MiB, a second reqwest, and
//! settings we need only through our own transport (extra CA, timeouts, retries that would
//! stack on ours); their blob client refuses plain-HTTP endpoints with a credential and their
//! Workload Identity caches the token file for 10 minutes. Every endpoint comes from
//! configuration, so the same code runs against Azure, against Azurite and against the fakes in
//! `tests/`.
//!
//! Deliberately not here: event parsing (`tagwarden_core::events`), the tag rules (`tagwarden_core::policy::validate`) and the
//! decision what to write (`tagwarden_core::plan`) — this module only moves bytes and applies decisions.

pub mod adapter;
pub mod arm;
pub mod blob_store;
pub mod config;
pub mod error;
pub mod function;
pub mod identity;
pub mod metrics;
pub mod resource_graph;
/// The custom handler's HTTP/1 server, shared with the Google Cloud function.
pub use tagwarden_engine::server;
mod xml;

use std::time::Duration;

pub use config::Config;
/// The HTTP client crate, for callers (tests, tools) that build requests of their own.
pub use reqwest;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// The one HTTP client every Azure call goes through: rustls with the ring provider and the
/// webpki roots plus `TAGWARDEN_CA_BUNDLE`, the environment's proxy (`HTTPS_PROXY`, `NO_PROXY`,
/// which reqwest reads itself), a short connect timeout, and a request timeout well inside the
/// Functions host's own.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, CloudError> {
    let fatal = |code: &str, message: String| {
        CloudError::azure("http:Client", "reqwest", None, code, &message, ErrorClass::Fatal)
    };
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(Duration::from_secs(3))
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(50))
        .user_agent(concat!("tagwarden/", env!("CARGO_PKG_VERSION")));
    let bundle = tagwarden_engine::network::extra_ca_bundle().map_err(|e| fatal("CaBundle", e.to_string()))?;
    if let Some(bundle) = bundle {
        for cert in reqwest::Certificate::from_pem_bundle(&bundle.pem).map_err(|e| fatal("CaBundle", e.to_string()))? {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| fatal("ClientBuild", format!("cannot build the HTTP client: {e}")))
}
