//! AWS errors as [`CloudError`]s, classified the way the cluster-api-provider-aws seed does: what a retry can fix
//! (throttling, transient faults, a resource not yet visible after its creation) and what it cannot.
//!
//! Deliberately not here: what each class leads to (retried, handed back, reported), which is the
//! one table in `tagwarden_engine::cloud_error` for both clouds.

use std::fmt;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// An SDK error, classified by its code; a call that got no answer is transient.
pub fn from_sdk<E, R>(operation: &'static str, resource: &str, err: SdkError<E, R>) -> CloudError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: fmt::Debug + 'static,
{
    let (code, message, class) = match &err {
        SdkError::ServiceError(service) => {
            let e = service.err();
            let code = e.code().unwrap_or("Unknown").to_string();
            let class = classify(&code);
            (code, e.message().unwrap_or_default().to_string(), class)
        }
        SdkError::TimeoutError(_) => ("Timeout".to_string(), String::new(), ErrorClass::Transient),
        SdkError::DispatchFailure(_) => ("DispatchFailure".to_string(), chain(&err), ErrorClass::Transient),
        SdkError::ResponseError(_) => ("ResponseError".to_string(), chain(&err), ErrorClass::Transient),
        _ => ("ConstructionFailure".to_string(), chain(&err), ErrorClass::Fatal),
    };
    CloudError::aws(operation, resource, &code, &message, class)
}

/// The error and its sources on one line; the SDK's whole `Debug` chain only in the debug log.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    tracing::debug!(error = %aws_smithy_types::error::display::DisplayErrorContext(err), "AWS SDK error");
    tagwarden_core::error_chain(err)
}

/// Classify one entry of `TagResources`' `FailedResourcesMap`: a 4xx that names the type (or
/// the service) as not supported means nothing can tag it this way; a 5xx is worth retrying.
pub fn classify_tagging_failure(code: &str, message: &str, status: Option<i32>) -> ErrorClass {
    let m = message.to_ascii_lowercase();
    if m.contains("not supported") || m.contains("not yet supported") || m.contains("unsupported") {
        ErrorClass::Unsupported
    } else if status.is_some_and(|s| s >= 500) {
        ErrorClass::Transient
    } else {
        classify(code)
    }
}

/// Classify an AWS error code.
pub fn classify(code: &str) -> ErrorClass {
    const THROTTLED: &[&str] = &[
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "TooManyRequestsException",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    ];
    const TRANSIENT: &[&str] = &[
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
        "RequestTimeout",
        "OperationAborted",
    ];
    const TAG_LIMIT: &[&str] = &["TagLimitExceeded", "TooManyTags", "LimitExceeded"];
    if THROTTLED.contains(&code) {
        ErrorClass::Throttled
    } else if TRANSIENT.contains(&code) {
        ErrorClass::Transient
    } else if TAG_LIMIT.contains(&code) {
        ErrorClass::TagLimit
    } else if code.ends_with(".NotFound")
        || code.ends_with("NotFound")
        || code == "NoSuchBucket"
        || code == "NoSuchEntity"
    {
        ErrorClass::NotFound
    } else {
        ErrorClass::Fatal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify("InvalidInstanceID.NotFound"), ErrorClass::NotFound);
        assert_eq!(classify("LoadBalancerNotFound"), ErrorClass::NotFound);
        assert_eq!(classify("NoSuchEntity"), ErrorClass::NotFound);
        assert_eq!(classify("RequestLimitExceeded"), ErrorClass::Throttled);
        assert_eq!(classify("SlowDown"), ErrorClass::Throttled);
        assert_eq!(classify("OperationAborted"), ErrorClass::Transient);
        assert_eq!(classify("TagLimitExceeded"), ErrorClass::TagLimit);
        assert_eq!(classify("UnauthorizedOperation"), ErrorClass::Fatal);
        assert_eq!(classify("AccessDenied"), ErrorClass::Fatal);
        assert!(!ErrorClass::Fatal.is_retryable());
    }
}
