//! tagwarden's AWS Lambda (`bootstrap`): builds its handler once
//! (`tagwarden_aws::handler::Handler::from_env`: one account's engine, or an organization's hub
//! when `TAGWARDEN_ORGANIZATION` is set), then runs the Runtime API, handing every payload to it
//! with the invocation's deadline and answering with its outcome. This binary only wires things
//! together.
//!
//! Configuration (validated at start-up; a bad value stops the function with the variable and the
//! fix): `tagwarden_aws::handler` and `tagwarden_aws::config`, and the standard AWS SDK
//! environment (region, credentials, `AWS_ENDPOINT_URL`).

use std::io::Write;
use std::sync::Arc;

use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};
use serde_json::value::RawValue;
use tagwarden_aws::deadline::Deadline;
use tagwarden_aws::failure::{FailureClass, InvocationError};
use tagwarden_aws::function::Invocation;
use tagwarden_aws::handler::Handler;

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
    let handler = match Handler::from_env().await {
        Ok(h) => Arc::new(h),
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration");
            return Err(e.into());
        }
    };
    // The payload as its JSON text: the handler reads it once into its `Payload` and hands a bare
    // event's text on as it came.
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Box<RawValue>>| {
        let handler = handler.clone();
        async move {
            let deadline = Deadline::from_epoch_ms(event.context.deadline);
            answer(handler.handle(Box::<str>::from(event.payload).into_string(), deadline).await)
        }
    }))
    .await
}

/// Print the invocation's lines (records, then EMF metrics) to stdout, one JSON document a line,
/// and answer it.
fn answer(inv: Invocation) -> Result<serde_json::Value, Diagnostic> {
    let mut out = std::io::stdout().lock();
    for line in &inv.lines {
        let _ = writeln!(out, "{line}");
    }
    drop(out);
    match inv.error {
        Some(e) => Err(diagnostic(e)),
        None => Ok(inv.response),
    }
}

/// The invocation error's `errorType`, as the Lambda Runtime API's invocation error
/// (`POST /2018-06-01/runtime/invocation/{AwsRequestId}/error`, body `{"errorMessage", "errorType"}`)
/// carries it to the caller: `"Retryable"` when the same payload again can succeed (a throttle, a
/// timeout, a 5xx, an unreachable endpoint, work handed back before the deadline), `"Permanent"`
/// when it cannot (no valid policy, a refused member account, a malformed payload).
fn error_type(class: FailureClass) -> &'static str {
    match class {
        FailureClass::Retryable => "Retryable",
        FailureClass::Permanent => "Permanent",
    }
}

fn diagnostic(e: InvocationError) -> Diagnostic {
    Diagnostic { error_type: error_type(e.class).to_string(), error_message: e.message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_types_are_named_exactly() {
        let d = diagnostic(InvocationError::retryable("sweep: deferred"));
        assert_eq!((d.error_type.as_str(), d.error_message.as_str()), ("Retryable", "sweep: deferred"));
        let d = diagnostic(InvocationError::permanent("not a payload tagwarden reads: x"));
        assert_eq!(d.error_type, "Permanent");
        let inv = Invocation { response: serde_json::json!({"sweep": 0}), ..Invocation::default() };
        assert_eq!(answer(inv).ok(), Some(serde_json::json!({"sweep": 0})));
    }
}
