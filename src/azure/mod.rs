//! The Azure side (DESIGN.md §4–§8): the ARM Tags API client, managed-identity tokens, the policy
//! store on Blob storage, Azure Monitor custom metrics, the reconciler, and the Functions
//! custom-handler protocol that the `tagwarden-azure-function` binary serves.
//!
//! Everything talks plain HTTPS through one `reqwest` client (rustls on ring): no Azure SDK crate,
//! because no maintained one covers the Tags API (reference/azure.md §4.2). Every endpoint comes
//! from configuration, so the same code runs against Azure, against Azurite and against the fakes
//! in `tests/`.
//!
//! Deliberately not here: event parsing (`crate::events`), the tag rules (`crate::validate`) and the
//! decision what to write (`crate::plan`) — this module only moves bytes and applies decisions.

pub mod arm;
pub mod blob_store;
pub mod config;
pub mod error;
pub mod function;
pub mod identity;
pub mod metrics;
pub mod reconcile;
pub mod server;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use config::{Config, ConfigError};
pub use error::{AzureError, ErrorClass};
/// The HTTP client crate, for callers (tests, tools) that build requests of their own.
pub use reqwest;

/// Counts every HTTP request the Azure clients send, by `service:Operation` (`arm:MergeTags`,
/// `blob:GetBlob`, `identity:Token`…). API calls are the real cost of an enforcer; tests and the
/// measurements use the counts to prove "no drift, no write".
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CallCounter {
    pub fn record(&self, op: &str) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry(op.to_string()).or_default() += 1;
        }
    }

    /// `service:Operation` → requests so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub fn get(&self, op: &str) -> u64 {
        self.snapshot().get(op).copied().unwrap_or_default()
    }

    pub fn reset(&self) {
        if let Ok(mut c) = self.counts.lock() {
            c.clear();
        }
    }

    /// Requests that change tags (`arm:MergeTags`).
    pub fn writes(&self) -> u64 {
        self.get(arm::OP_MERGE)
    }

    /// Requests to ARM (reads, writes, polls, listings).
    pub fn arm(&self) -> u64 {
        self.snapshot().iter().filter(|(op, _)| op.starts_with("arm:")).map(|(_, n)| n).sum()
    }

    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}

/// The one HTTP client every Azure call goes through: rustls with the ring provider and the
/// webpki roots, short connect timeout, and a request timeout well inside the Functions host's own.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, AzureError> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(Duration::from_secs(3))
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(50))
        .user_agent(concat!("tagwarden/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            AzureError::new(
                "http:Client",
                "reqwest",
                None,
                "ClientBuild",
                &format!("cannot build the HTTP client: {e}"),
                ErrorClass::Fatal,
            )
        })
}
