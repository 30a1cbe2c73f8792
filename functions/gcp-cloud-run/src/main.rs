//! tagwarden's Cloud Run service (`tagwarden-gcp-function`): validates its configuration, builds
//! the Google clients once, then serves `0.0.0.0:$PORT` (Cloud Run's container contract). Every
//! request goes to `tagwarden_gcp::function::Handler::handle`; this binary only wires things
//! together. The image is this one static binary (`functions/gcp-cloud-run/Dockerfile`).
//!
//! Configuration (infra/gcp `function.tf` sets it; a bad value exits 1 naming the variable and
//! the fix):
//! - `TAGWARDEN_POLICY`: `gs://BUCKET/PREFIX*/` (a cluster set), `gs://BUCKET/PREFIX/` or
//!   `gs://BUCKET/OBJECT.yaml`;
//! - `TAGWARDEN_CLUSTERS`: the infraIDs enforced, comma-separated; required for a cluster set;
//! - `TAGWARDEN_SWEEP_SCOPES`: the Cloud Asset Inventory scopes a sweep searches
//!   (`projects/ID`, `folders/N`, `organizations/N`), comma-separated;
//! - `TAGWARDEN_SELF_PRINCIPAL`: the service account the service runs as; audit-log entries it
//!   caused are its own writes, never drift;
//! - `TAGWARDEN_MODE`: `audit` (evaluate and report everything, write no label) or `enforce`;
//! - `POLICY_TTL`, `TAGWARDEN_CONCURRENCY`, `TAGWARDEN_YIELD_TO`: as on the other clouds;
//! - `TAGWARDEN_GCP_ENDPOINT`, `STORAGE_EMULATOR_HOST`: test servers (no credentials are sent to
//!   the former); unset in a deployment;
//! - `PORT` (set by Cloud Run; default 8080), `RUST_LOG` (default `info`).
//!
//! Credentials: Application Default Credentials, on Cloud Run the service's own account from the
//! metadata server.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use tagwarden_engine::server;
use tagwarden_gcp::config::Config;
use tagwarden_gcp::function::Handler;

#[tokio::main]
async fn main() -> ExitCode {
    let started = Instant::now();
    // JSON lines on stdout, which Cloud Run hands to Cloud Logging as structured entries.
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stdout)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let build =
        concat!(env!("CARGO_PKG_NAME"), " ", env!("CARGO_PKG_VERSION"), " (commit ", env!("TAGWARDEN_COMMIT"), ")");
    tracing::info!(version = env!("CARGO_PKG_VERSION"), commit = env!("TAGWARDEN_COMMIT"), "{build}");
    tagwarden_engine::status_store::set_written_by(build.to_string());
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return ExitCode::FAILURE;
        }
    };
    if config.own.is_empty() {
        tracing::warn!("TAGWARDEN_SELF_PRINCIPAL is not set: own writes are recognised by idempotent planning only");
    }
    let handler = match Handler::new(&config).await {
        Ok(h) => Arc::new(h),
        Err(e) => {
            tracing::error!(error = %e, "cannot build the clients");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(("0.0.0.0", config.port)).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(port = config.port, error = %e, "cannot listen (PORT)");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        port = config.port,
        policy = %config.policy,
        mode = ?config.mode,
        startup_ms = started.elapsed().as_millis() as u64,
        "listening"
    );
    let result = server::serve(listener, move |req| {
        let handler = handler.clone();
        async move { handler.handle(req).await }
    })
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "server stopped");
            ExitCode::FAILURE
        }
    }
}
