//! AWS errors, classified the way the cluster-api-provider-aws seed does: what a retry can fix
//! (throttling, transient faults, a resource not yet visible after its creation) and what it cannot.
//!
//! Deliberately not here: what each class leads to (retried, handed back, reported), which is the
//! one table in `crate::error_policy` for both clouds.

use std::fmt;

use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};

pub use crate::error_policy::ErrorClass;

/// Codes that mean the function's role lacks a permission (or the ownership condition refused).
const DENIED: &[&str] = &["AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError"];

#[derive(Debug, Clone, thiserror::Error)]
pub struct AwsError {
    pub operation: &'static str,
    pub resource: String,
    pub code: String,
    pub message: String,
    pub class: ErrorClass,
}

impl fmt::Display for AwsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.operation, self.resource, self.code)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(hint) = self.hint() {
            write!(f, " (fix: {hint})")?;
        }
        Ok(())
    }
}

impl AwsError {
    pub fn new(operation: &'static str, resource: &str, code: &str, message: &str, class: ErrorClass) -> Self {
        AwsError {
            operation,
            resource: resource.to_string(),
            code: code.to_string(),
            message: message.to_string(),
            class,
        }
    }

    /// Whether trying again can help, for the records and the retry decision.
    pub fn failure(&self) -> crate::report::Failure {
        self.class.failure(crate::cloud::Cloud::Aws)
    }

    /// `record`, ended by this error: over the tag limit (the service's own check, e.g. a
    /// concurrent tagger got there first), unsupported, or failed (permanently or not).
    pub fn into_record(self, record: crate::report::Record) -> crate::report::Record {
        use crate::report::{Record, Status};
        match self.class {
            ErrorClass::TagLimit => Record { status: Status::LimitExceeded, error: Some(self.to_string()), ..record },
            ErrorClass::Unsupported => record.unsupported(self.to_string()),
            _ => record.failing(self.failure(), self.to_string()),
        }
    }

    /// What a user can do about a permanent error.
    pub fn hint(&self) -> Option<String> {
        if DENIED.contains(&self.code.as_str()) {
            let grant = format!("grant {} to the function's role (infra/aws iam.tf)", self.operation);
            // Tag writes are granted only on resources carrying the ownership tag.
            Some(if super::calls::is_write(self.operation) {
                format!("{grant}, and check that the resource carries this cluster's ownership tag, which the grant is conditioned on")
            } else {
                grant
            })
        } else if self.class == ErrorClass::Unsupported {
            Some("no tagging API takes this resource type; it is reported as unsupported, not written".to_string())
        } else {
            None
        }
    }

    pub fn from_sdk<E, R>(operation: &'static str, resource: &str, err: SdkError<E, R>) -> Self
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
        AwsError::new(operation, resource, &code, &message, class)
    }
}

/// The error and its sources on one line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    aws_smithy_types::error::display::DisplayErrorContext(err).to_string()
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
