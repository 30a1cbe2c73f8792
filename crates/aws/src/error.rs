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
            let message = e.message().unwrap_or_default().to_string();
            let class = if untaggable(&message) { ErrorClass::Unsupported } else { classify(&code) };
            (code, message, class)
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

/// Classify one entry of `TagResources`' `FailedResourcesMap`: a 4xx that says the type (or the
/// service) cannot be tagged this way is unsupported; a 5xx is worth retrying.
pub fn classify_tagging_failure(code: &str, message: &str, status: Option<i32>) -> ErrorClass {
    if untaggable(message) {
        ErrorClass::Unsupported
    } else if status.is_some_and(|s| s >= 500) {
        ErrorClass::Transient
    } else {
        classify(code)
    }
}

/// Whether an answer says the resource's type cannot be tagged through the API called, in the
/// words real AWS answers use (no code of its own: they come as `InvalidParameterException`):
/// - "'vpc-peering-connection' is not a recognized EC2ResourceType id" — a `TagResources`
///   `FailedResourcesMap` entry, recorded in aws/aws-cli#3434;
/// - "Unrecognized service or resource type for tagging" — `TagResources` on a type it does not
///   serve (cloud-custodian#8449);
/// - "… is not supported" / "unsupported" — the services' own wording for a type or operation;
/// - "Service not yet supported" — the Tagging API's entry for a service it does not serve (as
///   moto answers for SQS).
pub fn untaggable(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "not supported",
        "not yet supported",
        "unsupported",
        "unrecognized service or resource type",
        "is not a recognized",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// Classify an AWS error code. Throttling and transient codes are the SDK's own lists, the ones
/// its standard retry strategy acts on (`aws_runtime::retries::classifiers`), so what the SDK
/// retries and what is reported as throttled agree.
pub fn classify(code: &str) -> ErrorClass {
    use aws_runtime::retries::classifiers::{THROTTLING_ERRORS, TRANSIENT_ERRORS};
    // Beyond the SDK's transient codes: 5xx answers the SDK classifies by status, which an entry
    // of a batch answer (no status of its own for some services) names only by code.
    const TRANSIENT: &[&str] =
        &["InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "OperationAborted"];
    // EC2 `TagLimitExceeded`, IAM `LimitExceeded` (a role's 50 tags), S3 and ELB `TooManyTags`.
    const TAG_LIMIT: &[&str] = &["TagLimitExceeded", "TooManyTags", "LimitExceeded"];
    if THROTTLING_ERRORS.contains(&code) {
        ErrorClass::Throttled
    } else if TRANSIENT_ERRORS.contains(&code) || TRANSIENT.contains(&code) {
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
        // The SDK's throttling codes, which the hand list of ten missed.
        assert_eq!(classify("LimitExceededException"), ErrorClass::Throttled);
        assert_eq!(classify("BandwidthLimitExceeded"), ErrorClass::Throttled);
        assert_eq!(classify("RequestTimeoutException"), ErrorClass::Transient);
    }

    #[test]
    fn untaggable_types_are_unsupported_in_the_words_aws_answers() {
        // aws/aws-cli#3434: a FailedResourcesMap entry of TagResources, as recorded.
        let peering = "'vpc-peering-connection' is not a recognized EC2ResourceType id ";
        assert_eq!(classify_tagging_failure("InvalidParameterException", peering, Some(400)), ErrorClass::Unsupported);
        // cloud-custodian#8449.
        let rgta = "Unrecognized service or resource type for tagging";
        assert_eq!(classify_tagging_failure("InvalidParameterException", rgta, Some(400)), ErrorClass::Unsupported);
        let moto = "Service not yet supported";
        assert_eq!(classify_tagging_failure("InternalServiceException", moto, Some(500)), ErrorClass::Unsupported);
        // Neither a wrong parameter nor a 5xx is taken for an untaggable type.
        assert_eq!(
            classify_tagging_failure("InvalidParameterException", "Invalid tag key", Some(400)),
            ErrorClass::Fatal
        );
        assert_eq!(classify_tagging_failure("InternalServiceException", "", Some(500)), ErrorClass::Transient);
    }
}
