//! tagwarden's Azure Functions custom handler (`tagwarden-azure-function`): validates its
//! configuration, builds the clients once, then serves the Functions host on
//! `127.0.0.1:$FUNCTIONS_CUSTOMHANDLER_PORT`. Every request goes to
//! `tagwarden_azure::function::Handler::handle`; this binary only wires things together.
//!
//! The app package is this binary plus `host.json`, `drift/function.json` (Event Grid trigger:
//! resource writes, and policy `BlobCreated`, which only re-checks the policy),
//! `sweep/function.json` (timer trigger, `%TAGWARDEN_SWEEP_SCHEDULE%`) and
//! `sweep-queue/function.json` (queue trigger on `%TAGWARDEN_SWEEP_QUEUE%` in the
//! `AzureWebJobsStorage` account: the policy `BlobCreated` events routed there run the sweep,
//! one message at a time per instance; `host.json` reads messages as they are, base64 or JSON).
//!
//! Configuration (validated at start-up; a bad value exits 1 with the variable and the fix):
//! - `TAGWARDEN_POLICY`: the policy blob URL, or a blob-prefix URL ending in `/` (a SAS query
//!   string is passed through; without one, a managed-identity token for storage is used);
//! - `TAGWARDEN_ARM_ENDPOINT`: default `https://management.azure.com`;
//! - `POLICY_TTL`: seconds between policy re-checks on a warm instance (default 60);
//! - `TAGWARDEN_CLUSTERS`: the infraIDs enforced, comma-separated; required for a cluster set
//!   (`…/PREFIX/*/`), whose folders of other clusters are never loaded;
//! - `TAGWARDEN_HTTP_TIMEOUT`: seconds one HTTP request may take before it is retried (default 30);
//! - `TAGWARDEN_CONCURRENCY`: resources reconciled, and calls in flight, at once in an invocation
//!   (default 8, 1–64; each subscription's writes are paced apart from it);
//! - `TAGWARDEN_RESOURCE_GRAPH`: `false` lists sweeps through ARM only (default `true`: Resource
//!   Graph);
//! - `IDENTITY_ENDPOINT`, `IDENTITY_HEADER`: set by App Service for the managed identity;
//! - `TAGWARDEN_SELF_CLIENT_ID`, `TAGWARDEN_SELF_PRINCIPAL_ID`: the function's own identity —
//!   tokens are requested for the client id, and events caused by either id are ignored;
//! - `TAGWARDEN_METRICS_RESOURCE_ID` (the Function App's ID; unset: no metrics) with
//!   `TAGWARDEN_METRICS_REGION` (or App Service's `REGION_NAME`) or `TAGWARDEN_METRICS_ENDPOINT`;
//! - `TAGWARDEN_SWEEP_SCOPES`: comma-separated subscription, resource-group or management-group IDs
//!   to sweep
//!   (default: the subscription of `TAGWARDEN_METRICS_RESOURCE_ID`);
//! - `TAGWARDEN_SWEEP_QUEUE`: read by the host only (`sweep-queue/function.json`), the queue
//!   the policy `BlobCreated` events are routed to;
//! - `FUNCTIONS_CUSTOMHANDLER_PORT` (set by the host; default 8080), `RUST_LOG` (default `info`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use tagwarden_azure::function::Handler;
use tagwarden_azure::{server, Config};

#[tokio::main]
async fn main() -> ExitCode {
    let started = Instant::now();
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
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
        tracing::warn!("TAGWARDEN_SELF_CLIENT_ID and TAGWARDEN_SELF_PRINCIPAL_ID are not set: own writes are recognised by idempotent planning only");
    }
    if config.metrics.is_none() {
        tracing::warn!("TAGWARDEN_METRICS_RESOURCE_ID is not set: no metrics are sent to Azure Monitor");
    }
    let handler = match Handler::new(&config) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            tracing::error!(error = %e, "cannot build the clients");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", config.port)).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(port = config.port, error = %e, "cannot listen (FUNCTIONS_CUSTOMHANDLER_PORT)");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        port = config.port,
        policy = %config.policy,
        arm = %config.arm_endpoint,
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
