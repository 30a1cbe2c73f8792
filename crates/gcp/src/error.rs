//! Google Cloud's answers as [`CloudError`]s, classed once, here.
//!
//! Statuses and codes: Google's API design guide, "Errors" (HTTP 400 `INVALID_ARGUMENT`/
//! `FAILED_PRECONDITION`, 403 `PERMISSION_DENIED`, 404 `NOT_FOUND`, 409 `ABORTED`/`ALREADY_EXISTS`,
//! 412 for a failed precondition on Compute Engine's fingerprints and Cloud Storage's
//! `if*Match`, 429 `RESOURCE_EXHAUSTED`, 500/503 `INTERNAL`/`UNAVAILABLE`, 504
//! `DEADLINE_EXCEEDED`).

use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// The status of a precondition that no longer holds: another writer changed the labels since
/// they were read (Compute Engine `labelFingerprint`, Cloud Storage `ifMetagenerationMatch`).
pub const PRECONDITION_FAILED: u16 = 412;

/// Compute Engine answers an exhausted rate quota with 403 and the reason `rateLimitExceeded`
/// ("Compute Engine rate quotas": "you receive a 403 error with the reason rateLimitExceeded"),
/// Cloud Storage with 429 or 403 `rateLimitExceeded`/`userRateLimitExceeded`: throttling, not a
/// missing grant.
fn is_rate_limit(said: &str) -> bool {
    ["rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED", "Quota exceeded"]
        .iter()
        .any(|r| said.contains(r))
}

pub fn class_of(status: Option<u16>) -> ErrorClass {
    match status {
        Some(429) => ErrorClass::Throttled,
        Some(401 | 403) => ErrorClass::Denied,
        Some(404) => ErrorClass::NotFound,
        Some(409 | 500..=599) | None => ErrorClass::Transient,
        Some(_) => ErrorClass::Fatal,
    }
}

/// An error of an official client call.
pub fn from_gax(operation: &'static str, target: &str, e: &google_cloud_gax::error::Error) -> CloudError {
    let status = e.http_status_code();
    let (code, message) = match e.status() {
        Some(s) => (format!("{:?}", s.code), s.message.clone()),
        None if e.is_timeout() => ("Timeout".to_string(), e.to_string()),
        None if e.is_connect() || e.is_io() || e.is_transport() => ("Transport".to_string(), e.to_string()),
        None => ("Error".to_string(), e.to_string()),
    };
    let said = format!("{:?}", e.status());
    let class = match status {
        Some(403 | 429) if is_rate_limit(&said) => ErrorClass::Throttled,
        None if e.status().is_some() => ErrorClass::Fatal,
        _ => class_of(status),
    };
    CloudError::gcp(operation, target, status, &code, &message, class)
}

/// An error of a plain JSON API call (Cloud Storage): the status and Google's error body
/// (`{"error": {"code", "message", "errors": [{"reason"}]}}`).
pub fn from_response(operation: &'static str, target: &str, status: u16, body: &str) -> CloudError {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = error.and_then(|e| e.get("message")).and_then(|m| m.as_str()).unwrap_or(body);
    let code =
        error.and_then(|e| e.pointer("/errors/0/reason")).and_then(|r| r.as_str()).unwrap_or("Error").to_string();
    let class = if status == 403 && is_rate_limit(&code) { ErrorClass::Throttled } else { class_of(Some(status)) };
    CloudError::gcp(operation, target, Some(status), &code, message.trim(), class)
}

/// A request that got no answer.
pub fn transport(operation: &'static str, target: &str, e: &reqwest::Error) -> CloudError {
    let code = if e.is_timeout() { "Timeout" } else { "Transport" };
    CloudError::gcp(operation, target, None, code, &e.to_string(), ErrorClass::Transient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_is_throttling_and_a_refusal_is_a_denial() {
        let body =
            r#"{"error":{"code":403,"message":"Rate Limit Exceeded","errors":[{"reason":"rateLimitExceeded"}]}}"#;
        assert_eq!(from_response("storage:PatchLabels", "b", 403, body).class, ErrorClass::Throttled);
        let body = r#"{"error":{"code":403,"message":"denied","errors":[{"reason":"forbidden"}]}}"#;
        assert_eq!(from_response("storage:PatchLabels", "b", 403, body).class, ErrorClass::Denied);
        assert_eq!(from_response("storage:GetBucket", "b", 412, "{}").status, Some(PRECONDITION_FAILED));
        assert_eq!(class_of(Some(503)), ErrorClass::Transient);
    }
}
