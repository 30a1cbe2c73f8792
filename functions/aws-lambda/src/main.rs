//! tagwarden's AWS Lambda (`bootstrap`): wires configuration and clients once, then hands every
//! payload to `tagwarden_aws::function::handle_until`, which reads it as its `Payload`.
//!
//! Configuration: `tagwarden_aws::config` (validated at start-up), and the standard AWS SDK
//! environment (region, credentials, `AWS_ENDPOINT_URL`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use serde_json::value::RawValue;
use tagwarden_aws::config::Config;
use tagwarden_aws::function;
use tagwarden_aws::organization::{OrgConfig, Organization, Settings};
use tagwarden_aws::policy_store::policy_store;
use tagwarden_aws::Clients;
use tagwarden_aws::Tagger;
use tagwarden_engine::enforce::Engine;
use tagwarden_engine::rate_limit::RateLimit;

/// The invocation's deadline (milliseconds since the epoch, from the Runtime API's
/// `Lambda-Runtime-Deadline-Ms`) as an `Instant`. One that has passed already at the start is not
/// a deadline the function could meet but a clock or emulator artefact: it is logged and ignored.
fn deadline_of(deadline_ms: u64) -> Option<std::time::Instant> {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    if deadline_ms <= now_ms {
        tracing::warn!(deadline_ms, now_ms, "the invocation's deadline has passed at its start; not enforced");
        return None;
    }
    Some(std::time::Instant::now() + Duration::from_millis(deadline_ms - now_ms))
}

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .without_time()
        .init();
    let build =
        concat!(env!("CARGO_PKG_NAME"), " ", env!("CARGO_PKG_VERSION"), " (commit ", env!("TAGWARDEN_COMMIT"), ")");
    tracing::info!(version = env!("CARGO_PKG_VERSION"), commit = env!("TAGWARDEN_COMMIT"), "{build}");
    tagwarden_engine::status_store::set_written_by(build.to_string());
    match OrgConfig::from_lookup(|k| std::env::var(k).ok()) {
        Ok(Some(org)) => return run_hub(org).await,
        Ok(None) => {}
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.to_string().into());
        }
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.to_string().into());
        }
    };
    if config.own.is_empty() {
        tracing::warn!("TAGWARDEN_SELF_ROLE_ARN is not set: own writes are recognised by idempotent planning only");
    }
    let clients = match Clients::from_env().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid network configuration");
            return Err(e.to_string().into());
        }
    };
    // The function's account, from its role's ARN (`arn:aws:iam::<account>:role/…`): S3 tagging
    // calls name it as the expected bucket owner.
    let account = config.own.iter().find_map(|arn| {
        arn.split(':').nth(4).filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit())).map(str::to_owned)
    });
    let tagger = Tagger {
        ec2_writes: Some(RateLimit::per_second(f64::from(config.ec2_writes_per_second))),
        account,
        ..Tagger::new(clients.clone())
    };
    let store = policy_store(&clients, config.policy, config.policy_ttl).with_clusters(config.clusters);
    let mut engine = Engine::new(tagger, store, config.own);
    engine.set_concurrency(config.concurrency);
    engine.yield_to = config.yield_to;
    engine.mode = config.mode;
    tracing::info!(mode = %config.mode, "deployment mode");
    let engine = Arc::new(engine);
    // The payload as its JSON text: `function` reads it once into its `Payload` (a shape it does
    // not know is its own `TagwardenFailure`) and hands a bare event's text on as it came.
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Box<RawValue>>| {
        let engine = engine.clone();
        async move {
            // Boxed: the SDK's nested futures are too deep to lay out inline.
            let deadline = deadline_of(event.context.deadline);
            let handling: std::pin::Pin<Box<dyn std::future::Future<Output = function::Invocation> + Send + '_>> =
                Box::pin(function::handle_until(&engine, Box::<str>::from(event.payload).into_string(), deadline));
            // Records and EMF metrics go to stdout, one JSON document per line.
            answer(handling.await)
        }
    }))
    .await
}

/// An organization's hub (`TAGWARDEN_ORGANIZATION` set): every member account's clusters through
/// the role it assumes there (`tagwarden_aws::organization`).
async fn run_hub(org: OrgConfig) -> Result<(), lambda_runtime::Error> {
    let var = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let own: Vec<String> = var("TAGWARDEN_SELF_ROLE_ARN").into_iter().collect();
    let settings = (|| {
        Ok::<_, tagwarden_engine::config::ConfigError>(Settings {
            policy_ttl: tagwarden_engine::config::policy_ttl(var("POLICY_TTL"))?,
            own,
            concurrency: tagwarden_engine::config::concurrency(
                var("TAGWARDEN_CONCURRENCY"),
                tagwarden_aws::adapter::DEFAULT_CONCURRENCY,
            )?,
            ec2_writes_per_second: Config::ec2_writes_per_second(var("TAGWARDEN_EC2_WRITES_PER_SECOND"))?,
            dry_run: false,
            mode: tagwarden_engine::config::mode(var("TAGWARDEN_MODE"))?,
        })
    })();
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.to_string().into());
        }
    };
    let hub = match tagwarden_aws::load_config().await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "invalid network configuration");
            return Err(e.to_string().into());
        }
    };
    let yield_to = match Config::yield_to(var("TAGWARDEN_YIELD_TO")) {
        Ok(y) => y,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.to_string().into());
        }
    };
    tracing::info!(accounts = org.clusters.len(), regions = org.regions.len(), "organization hub");
    let mut org = Organization::new(&hub, org, settings);
    org.yield_to = yield_to;
    let org = Arc::new(org);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Box<RawValue>>| {
        let org = org.clone();
        async move {
            let deadline = deadline_of(event.context.deadline);
            let handling: std::pin::Pin<Box<dyn std::future::Future<Output = function::Invocation> + Send + '_>> =
                Box::pin(function::handle_organization_until(
                    &org,
                    Box::<str>::from(event.payload).into_string(),
                    deadline,
                ));
            answer(handling.await)
        }
    }))
    .await
}

/// Print the invocation's lines (records, then EMF metrics) to stdout and answer it.
fn answer(inv: function::Invocation) -> Result<serde_json::Value, Diagnostic> {
    let mut out = std::io::stdout().lock();
    for line in &inv.lines {
        let _ = writeln!(out, "{line}");
    }
    drop(out);
    match inv.error {
        Some(message) => Err(Diagnostic { error_type: "TagwardenFailure".to_string(), error_message: message }),
        None => Ok(inv.response),
    }
}
