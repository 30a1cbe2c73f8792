//! The Cloud Run function's configuration, read from the environment once at start-up into typed
//! values (a bad value stops it before it serves anything, naming the variable and the fix). The
//! Terraform module (infra/gcp `function.tf`) sets every one.

use std::time::Duration;

use tagwarden_engine::config::ConfigError;

use crate::adapter::DEFAULT_CONCURRENCY;
use crate::clients::Endpoints;
use crate::gcs::{storage_endpoint, GcsLocation};
use crate::metrics::MetricsConfig;

/// Cloud Run's default port; it sets `PORT` ("the container must listen on the port defined by
/// the PORT environment variable", Cloud Run container runtime contract).
pub const DEFAULT_PORT: u16 = 8080;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    /// `TAGWARDEN_POLICY`: `gs://BUCKET/…`.
    pub policy: GcsLocation,
    /// The JSON API the policy is read from (`STORAGE_EMULATOR_HOST`, else Google's).
    pub policy_endpoint: String,
    pub policy_ttl: Duration,
    /// `TAGWARDEN_CLUSTERS`: the clusters enforced; a set's others are never loaded.
    pub clusters: Option<Vec<String>>,
    /// `TAGWARDEN_SWEEP_SCOPES`: Cloud Asset Inventory scopes, comma-separated.
    pub sweep_scopes: Vec<String>,
    /// `TAGWARDEN_SELF_PRINCIPAL`: the function's service account email; events it caused are
    /// its own writes, never drift (loop safety).
    pub own: Vec<String>,
    /// `TAGWARDEN_GCP_ENDPOINT`: every Google API at one base URL (a test server); unset, Google's.
    pub endpoints: Endpoints,
    /// Credentials: none when `TAGWARDEN_GCP_ENDPOINT` points at a test server.
    pub anonymous: bool,
    pub concurrency: usize,
    pub yield_to: tagwarden_core::contest::YieldTo,
    pub mode: tagwarden_core::mode::Mode,
    /// `TAGWARDEN_METRICS_PROJECT`: where the custom metrics go; unset, none are written.
    pub metrics: Option<MetricsConfig>,
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// The same, from any variable lookup (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let port = match var("PORT") {
            None => DEFAULT_PORT,
            Some(p) => p.parse::<u16>().map_err(|_| ConfigError::Invalid {
                var: "PORT",
                value: p.clone(),
                problem: "is not a TCP port".into(),
                fix: "Cloud Run sets it; unset it to use 8080".into(),
            })?,
        };
        let raw = var("TAGWARDEN_POLICY").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_POLICY",
            fix: "set it to gs://BUCKET/PREFIX*/ (a cluster set), gs://BUCKET/PREFIX/ or gs://BUCKET/OBJECT.yaml"
                .into(),
        })?;
        let policy = GcsLocation::parse(&raw).map_err(|e| ConfigError::Invalid {
            var: "TAGWARDEN_POLICY",
            value: raw.clone(),
            problem: e.why.to_string(),
            fix: "set it to gs://BUCKET/PREFIX*/ (a cluster set), gs://BUCKET/PREFIX/ or gs://BUCKET/OBJECT.yaml"
                .into(),
        })?;
        let policy_endpoint = storage_endpoint(var("STORAGE_EMULATOR_HOST").as_deref());
        let policy_ttl = tagwarden_engine::config::policy_ttl(var("POLICY_TTL"))?;
        let clusters = tagwarden_engine::config::clusters(var("TAGWARDEN_CLUSTERS"), policy.is_set)?;
        let sweep_scopes: Vec<String> = var("TAGWARDEN_SWEEP_SCOPES")
            .map(|s| {
                s.split(',').map(|x| x.trim().trim_end_matches('/').to_string()).filter(|x| !x.is_empty()).collect()
            })
            .unwrap_or_default();
        if let Some(bad) = sweep_scopes.iter().find(|s| !is_scope(s)) {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_SWEEP_SCOPES",
                value: bad.clone(),
                problem: "is not a Cloud Asset Inventory scope".into(),
                fix: "name projects/PROJECT_ID, projects/PROJECT_NUMBER, folders/FOLDER_NUMBER or organizations/ORG_NUMBER, comma-separated".into(),
            });
        }
        let own = var("TAGWARDEN_SELF_PRINCIPAL").into_iter().collect();
        let (endpoints, anonymous) = match var("TAGWARDEN_GCP_ENDPOINT") {
            Some(base) => (Endpoints::all_at(&base), true),
            None => (Endpoints::default(), false),
        };
        let concurrency = tagwarden_engine::config::concurrency(var("TAGWARDEN_CONCURRENCY"), DEFAULT_CONCURRENCY)?;
        let yield_to =
            tagwarden_engine::config::yield_to(var("TAGWARDEN_YIELD_TO"), tagwarden_core::cloud::Cloud::Gcp)?;
        let mode = tagwarden_engine::config::mode(var("TAGWARDEN_MODE"))?;
        let metrics = var("TAGWARDEN_METRICS_PROJECT").map(|project| MetricsConfig {
            project,
            endpoint: var("TAGWARDEN_GCP_ENDPOINT").unwrap_or_else(|| crate::metrics::DEFAULT_ENDPOINT.into()),
            location: var("TAGWARDEN_METRICS_LOCATION").unwrap_or_else(|| "global".into()),
            job: var("K_SERVICE").unwrap_or_else(|| "tagwarden".into()),
        });
        Ok(Config {
            port,
            policy,
            policy_endpoint,
            policy_ttl,
            clusters,
            sweep_scopes,
            own,
            endpoints,
            anonymous,
            concurrency,
            yield_to,
            mode,
            metrics,
        })
    }
}

/// `SearchAllResourcesRequest.scope`'s forms.
fn is_scope(s: &str) -> bool {
    match s.split_once('/') {
        Some(("projects" | "folders" | "organizations", id)) => {
            !id.is_empty() && !id.contains('/') && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn reads_what_terraform_sets_and_names_the_fix() {
        let c = config(&[
            ("TAGWARDEN_POLICY", "gs://tw-policies/clusters/*/"),
            ("TAGWARDEN_CLUSTERS", "c-1,c-2"),
            ("TAGWARDEN_SWEEP_SCOPES", "folders/123, projects/p-1"),
            ("TAGWARDEN_SELF_PRINCIPAL", "tw@p.iam.gserviceaccount.com"),
            ("TAGWARDEN_MODE", "audit"),
            ("PORT", "9090"),
        ])
        .expect("valid");
        assert_eq!((c.port, c.sweep_scopes.len(), c.own.len(), c.anonymous), (9090, 2, 1, false));
        assert!(c.policy.is_set);
        let e = config(&[]).expect_err("no policy");
        assert!(e.to_string().contains("TAGWARDEN_POLICY is not set"), "{e}");
        let e = config(&[("TAGWARDEN_POLICY", "gs://tw-policies/p.yaml"), ("TAGWARDEN_SWEEP_SCOPES", "project/p")])
            .expect_err("bad scope");
        assert!(e.to_string().contains("folders/FOLDER_NUMBER"), "{e}");
    }
}
