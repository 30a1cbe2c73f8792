//! tagwarden's AWS Lambda (`bootstrap`): wires configuration and clients once, then hands every
//! payload to `tagwarden::aws::function::handle`.
//!
//! Configuration (validated at start-up):
//! - `TAGWARDEN_POLICY`: `s3://bucket/key`, `s3://bucket/prefix/` or `ssm:/parameter/name`;
//! - `POLICY_TTL`: seconds between policy re-checks on a warm function (default 60);
//! - `TAGWARDEN_SELF_ROLE_ARN`: the function's role, whose own calls are not reconciled;
//! - `TAGWARDEN_CONCURRENCY`: resources reconciled at once across an SQS batch (default 10, 1–64);
//! - the standard AWS SDK environment (region, credentials, `AWS_ENDPOINT_URL`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use serde_json::Value;
use tagwarden::aws::function;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::reconcile::{Reconciler, DEFAULT_CONCURRENCY};
use tagwarden::aws::tags::Tagger;
use tagwarden::aws::Clients;

struct Config {
    policy: PolicyLocation,
    ttl: Duration,
    own: Vec<String>,
    concurrency: usize,
}

fn config_from_env() -> anyhow::Result<Config> {
    let policy = std::env::var("TAGWARDEN_POLICY").context(
        "TAGWARDEN_POLICY is not set: set it to s3://bucket/key, s3://bucket/prefix/ or ssm:/parameter/name",
    )?;
    let policy = policy.parse::<PolicyLocation>().map_err(anyhow::Error::msg).context("TAGWARDEN_POLICY")?;
    let ttl = match std::env::var("POLICY_TTL") {
        Err(_) => 60,
        Ok(s) => match s.parse::<u64>() {
            Ok(n) => n,
            Err(_) => bail!("POLICY_TTL={s:?} is not a number of seconds"),
        },
    };
    let own = std::env::var("TAGWARDEN_SELF_ROLE_ARN").ok().filter(|s| !s.is_empty()).into_iter().collect::<Vec<_>>();
    if own.is_empty() {
        tracing::warn!("TAGWARDEN_SELF_ROLE_ARN is not set: own writes are recognised by idempotent planning only");
    }
    let concurrency = match std::env::var("TAGWARDEN_CONCURRENCY") {
        Err(_) => DEFAULT_CONCURRENCY,
        Ok(s) => match s.parse::<usize>() {
            Ok(n @ 1..=64) => n,
            _ => bail!("TAGWARDEN_CONCURRENCY={s:?} is not a number from 1 to 64 (resources reconciled at once)"),
        },
    };
    Ok(Config { policy, ttl: Duration::from_secs(ttl), own, concurrency })
}

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
    let config = match config_from_env() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "invalid configuration");
            return Err(format!("{e:#}").into());
        }
    };
    let clients = Clients::from_env().await;
    let reconciler = Arc::new(
        Reconciler::new(Tagger::new(clients.clone()), policy_store(&clients, config.policy, config.ttl), config.own)
            .with_concurrency(config.concurrency),
    );
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| {
        let reconciler = reconciler.clone();
        async move {
            // Boxed: the SDK's nested futures are too deep to lay out inline.
            let deadline = deadline_of(event.context.deadline);
            let handling: std::pin::Pin<Box<dyn std::future::Future<Output = function::Invocation> + Send + '_>> =
                Box::pin(function::handle_until(&reconciler, &event.payload, deadline));
            let inv = handling.await;
            // Records and EMF metrics go to stdout, one JSON document per line.
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
    }))
    .await
}
