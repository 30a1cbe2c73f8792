//! What is retried and what is reported instead, for both clouds.
//!
//! Every failed cloud call is one [`CloudError`]: the call, its target, the service's answer, a
//! hint that names the fix, and an [`ErrorClass`] given once, where the error is made
//! (`aws::error` reads SDK error codes, `azure::error` HTTP statuses and ARM/Storage codes). The
//! class decides what is retried; how often and how long is the one table in [`crate::retry`]:
//!
//! | class | retried in the call | then |
//! |---|---|---|
//! | `Throttled` | SDK standard mode (AWS), [`Backoff::ARM_BUSY`](crate::retry::Backoff::ARM_BUSY) or ARM's `Retry-After` | the event is handed back (SQS / Event Grid redelivers); a sweep's write is reported failed, retryable, for the next sweep (one retry layer: the client's) |
//! | `Transient` (network, timeout, 5xx, ARM 409 busy, S3 `OperationAborted`) | the same; ARM by [`Backoff::ARM_BUSY`](crate::retry::Backoff::ARM_BUSY), S3 `OperationAborted` by [`Backoff::NOT_FOUND`](crate::retry::Backoff::NOT_FOUND) | handed back |
//! | `NotFound` right after a create | [`Backoff::NOT_FOUND`](crate::retry::Backoff::NOT_FOUND) (AWS), [`Backoff::ARM_NOT_FOUND`](crate::retry::Backoff::ARM_NOT_FOUND) | handed back: eventual consistency outlasts one invocation |
//! | `Denied` | no | AWS: recorded as a permanent failure with the missing grant; Azure (a token refused, 401/403 without a permanent code below): handed back, since a new token or a role still propagating fixes it and Event Grid's retries outlast it |
//! | `TagLimit` | no | recorded as `limit-exceeded`: nothing is written |
//! | `Unsupported` | no | recorded as `unsupported`: reported, never a failure |
//! | `Fatal` (invalid, and everything else) | no | recorded as a permanent failure and reported in the status report |
//! | ARM's permanent codes (`ScopeLocked` 409, `ReadOnlyDisabledSubscription`, `AuthorizationFailed`, `LinkedAuthorizationFailed`, `InvalidResourceType`, `DenyAssignmentAuthorizationFailed`) | no: classified by code before status (`azure::error::PERMANENT_ARM_CODES`) | `Fatal`: recorded, with the fix (remove the lock, grant the role) |
//!
//! A permanent failure never fails the delivery (it would be retried for a day to the same end);
//! a transient one always does, so nothing is dropped.

use std::fmt;

use tagwarden_core::cloud::Cloud;
use tagwarden_core::report::{Failure, Record, Status};
// The one backoff, where the AWS tagger and the tests name it.
use crate::retry::RetryAfter;

/// A failed call to either cloud.
#[derive(Debug, Clone, thiserror::Error)]
pub struct CloudError {
    pub cloud: Cloud,
    /// `ec2:CreateTags`, `arm:GetTags`, `blob:GetBlob`, `identity:Token`…
    pub operation: &'static str,
    /// The resource ID or ARN, blob URL (without its SAS) or endpoint the call was about.
    pub target: String,
    /// The HTTP status, where one is known (the AWS SDK's error codes say as much).
    pub status: Option<u16>,
    /// The service's error code (`UnauthorizedOperation`, `ResourceNotFound`, `BlobNotFound`…).
    pub code: String,
    pub message: String,
    pub class: ErrorClass,
    /// The service's ids of the failed request, for a support case (ARM: `x-ms-request-id`,
    /// `x-ms-correlation-request-id`, and the `x-ms-client-request-id` tagwarden sent).
    pub request_ids: Vec<(&'static str, String)>,
}

// ARM's `Retry-After` is read where the answer is (`azure::arm`).
impl RetryAfter for CloudError {}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: ", self.operation, self.target)?;
        if let Some(s) = self.status {
            write!(f, "HTTP {s} ")?;
        }
        f.write_str(&self.code)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(hint) = self.hint() {
            write!(f, " (fix: {hint})")?;
        }
        if !self.request_ids.is_empty() {
            let ids: Vec<String> = self.request_ids.iter().map(|(k, v)| format!("{k} {v}")).collect();
            write!(f, " [{}]", ids.join(", "))?;
        }
        Ok(())
    }
}

impl CloudError {
    /// An AWS error (the SDK's, see `aws::error`, or one of tagwarden's own checks).
    pub fn aws(operation: &'static str, target: &str, code: &str, message: &str, class: ErrorClass) -> Self {
        CloudError {
            cloud: Cloud::Aws,
            operation,
            target: target.to_string(),
            status: None,
            code: code.to_string(),
            message: message.to_string(),
            class,
            request_ids: Vec::new(),
        }
    }

    /// An Azure error, with the HTTP status of the answer when there was one.
    pub fn azure(
        operation: &'static str,
        target: &str,
        status: Option<u16>,
        code: &str,
        message: &str,
        class: ErrorClass,
    ) -> Self {
        CloudError { cloud: Cloud::Azure, status, ..CloudError::aws(operation, target, code, message, class) }
    }

    /// A Google Cloud error, with the HTTP status of the answer when there was one.
    pub fn gcp(
        operation: &'static str,
        target: &str,
        status: Option<u16>,
        code: &str,
        message: &str,
        class: ErrorClass,
    ) -> Self {
        CloudError { cloud: Cloud::Gcp, status, ..CloudError::aws(operation, target, code, message, class) }
    }

    /// Whether another delivery of the event is worth it.
    pub fn failure(&self) -> Failure {
        self.class.failure(self.cloud)
    }

    /// `record`, ended by this error: over the tag limit (the service's own check: a concurrent
    /// writer got there first), unsupported, or failed (permanently or not).
    pub fn into_record(self, record: Record) -> Record {
        match self.class {
            ErrorClass::TagLimit => Record { status: Status::LimitExceeded, error: Some(self.to_string()), ..record },
            ErrorClass::Unsupported => record.unsupported(self.to_string()),
            _ => record.failing(self.failure(), self.to_string()),
        }
    }

    /// Whether no service answered: a connection refused or reset, a timeout, a proxy or DNS
    /// failure. The AWS SDK reports a credential chain that found nothing as a dispatch failure
    /// too; that one names credentials, not a connection.
    pub fn got_no_answer(&self) -> bool {
        let said = self.message.to_ascii_lowercase();
        let connection = ["connect", "tunnel", "dns error", "timed out", "connection"].iter().any(|w| said.contains(w));
        self.status.is_none() && (matches!(self.code.as_str(), "Timeout" | "Transport") || connection)
    }

    /// What the operator reading the log or the status report can do about it.
    pub fn hint(&self) -> Option<String> {
        match self.cloud {
            Cloud::Aws => self.aws_hint(),
            Cloud::Azure => self.azure_hint().map(str::to_owned),
            Cloud::Gcp => self.gcp_hint().map(str::to_owned),
        }
    }

    /// Google Cloud answers a refusal with 403 `PERMISSION_DENIED` and a stale `labelFingerprint`
    /// or `ifMetagenerationMatch` with 412 `conditionNotMet` (Compute Engine and Cloud Storage
    /// error references); the operations are named `compute:…`, `storage:…`, `dns:…`, `asset:…`,
    /// `tags:…` (tagwarden_gcp).
    fn gcp_hint(&self) -> Option<&'static str> {
        match (self.class, self.operation) {
            (ErrorClass::Denied, op) if op.starts_with("asset:") => Some(
                "grant the function's service account cloudasset.assets.searchAllResources at the sweep's scope (infra/gcp iam.tf: the custom role at the project, folder or organization)",
            ),
            (ErrorClass::Denied, op) if op.starts_with("tags:") => Some(
                "grant the function's service account resourcemanager.tagValueBindings.create on the tag value and the resource's createTagBinding permission (infra/gcp iam.tf)",
            ),
            (ErrorClass::Denied, op) if op.starts_with("gcs:") => {
                Some("grant the function's service account storage.objects.get and storage.objects.list on the policy bucket")
            }
            (ErrorClass::Denied, _) => Some(
                "grant the function's service account the custom role of infra/gcp (get and setLabels/update per enforced type) at the resource's project, folder or organization",
            ),
            (ErrorClass::Unsupported, _) => {
                Some("this resource type takes no labels; it is reported as unsupported, not written")
            }
            _ => None,
        }
    }

    fn aws_hint(&self) -> Option<String> {
        const DENIED: &[&str] =
            &["AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError"];
        if DENIED.contains(&self.code.as_str()) {
            let grant = format!("grant {} to the function's role (infra/aws iam.tf)", self.operation);
            // Tag writes are granted only on resources carrying the ownership tag, except Route 53's,
            // which IAM cannot condition on tags.
            Some(if tagwarden_core::calls::is_write(self.operation) && !self.operation.starts_with("route53:") {
                format!("{grant}, and check that the resource carries this cluster's ownership tag, which the grant is conditioned on")
            } else {
                grant
            })
        } else if self.class == ErrorClass::Unsupported {
            Some("no tagging API takes this resource type; it is reported as unsupported, not written".to_string())
        } else if self.code == "DispatchFailure" && self.message.to_ascii_lowercase().contains("credential") {
            Some("no usable AWS credentials: see where the SDK's chain looked, above".to_string())
        } else if self.got_no_answer() {
            // No answer at all: the endpoint, the network or the proxy, not the request.
            let endpoint = std::env::var("AWS_ENDPOINT_URL")
                .map_or_else(|_| "the region's AWS endpoint".to_string(), |e| format!("AWS_ENDPOINT_URL={e}"));
            Some(format!("check that {endpoint} is reachable from here (network, HTTPS_PROXY/NO_PROXY)"))
        } else {
            None
        }
    }

    fn azure_hint(&self) -> Option<&'static str> {
        // The codes ARM answers whatever the status (tagwarden_azure::error::PERMANENT_ARM_CODES).
        let by_code = match (self.code.as_str(), self.operation) {
            ("ScopeLocked", _) => Some(
                "remove the ReadOnly lock on the resource or a parent scope (az lock list --resource ID), or exclude the resource from the cluster; not retried",
            ),
            ("ReadOnlyDisabledSubscription", _) => {
                Some("the subscription is disabled or expired, so read-only: re-enable it; not retried")
            }
            ("AuthorizationFailed" | "LinkedAuthorizationFailed", "arm:MergeTags") => Some(
                "grant the function's identity the tagwarden tag writer role (infra/azure: Microsoft.Resources/tags/write) on the resource's scope; not retried: the next sweep writes it once granted",
            ),
            ("AuthorizationFailed" | "LinkedAuthorizationFailed", op) if op.starts_with("arm:") => {
                Some("grant the function's identity Reader on the resource's scope; not retried")
            }
            ("DenyAssignmentAuthorizationFailed", _) => Some(
                "a deny assignment on the scope (named in the message) refuses this to every principal it does not exclude, whatever roles are granted: only its owner can lift it, or leave the resource out of the cluster's scopes; not retried",
            ),
            ("InvalidResourceType", _) => {
                Some("ARM serves no such resource type here (a typo'd scope, or a provider not registered); not retried")
            }
            _ => None,
        };
        if by_code.is_some() {
            return by_code;
        }
        match (self.class, self.operation) {
            (ErrorClass::Denied, op) if op.starts_with("arm:MergeTags") => {
                Some("grant the function's identity the tagwarden tag writer role (infra/azure: Microsoft.Resources/tags/write) on the resource's scope")
            }
            (ErrorClass::Denied, op) if op.starts_with("arm:") => {
                Some("grant the function's identity Reader on the resource's scope")
            }
            (ErrorClass::Denied, "blob:PutBlob") => {
                Some("grant the function's identity Storage Blob Data Contributor on the policy container")
            }
            (ErrorClass::Denied, op) if op.starts_with("blob:") => Some(
                "grant the function's identity Storage Blob Data Reader on the policy container, or check the SAS",
            ),
            (ErrorClass::Denied, op) if op.starts_with("monitor:") => {
                Some("grant the function's identity Monitoring Metrics Publisher on TAGWARDEN_METRICS_RESOURCE_ID")
            }
            (ErrorClass::Denied, op) if op.starts_with("identity:") => {
                Some("check IDENTITY_ENDPOINT/IDENTITY_HEADER and that TAGWARDEN_SELF_CLIENT_ID names an identity assigned to the app")
            }
            (ErrorClass::TagLimit, _) => Some("the resource is at its tag limit, so nothing was written: remove unmanaged tags from it, or tags from the policy"),
            (ErrorClass::Unsupported, _) => Some(
                "this resource type refuses the Tags API's PATCH; set its tags with the resource's own update (e.g. az network ip-group update); not retried",
            ),
            (ErrorClass::Fatal, op) if op.starts_with("arm:MergeTags") => Some(
                "ARM refuses these tags on this resource type (the message says which rule); change the policy for this type; not retried",
            ),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Throttled even after the client's own retries (429, `Throttling`, `SlowDown`…).
    Throttled,
    /// Network, timeout, 5xx, an ARM 202 that never finished: worth retrying later.
    Transient,
    /// The resource does not exist (yet): eventual consistency right after a create.
    NotFound,
    /// The service refused the write for the resource's tag limit.
    TagLimit,
    /// The identity lacks a permission (Azure 401/403; AWS denials are `Fatal` with a hint).
    Denied,
    /// No API tagwarden has can tag this type.
    Unsupported,
    /// Validation and everything else a retry cannot fix.
    Fatal,
}

impl ErrorClass {
    /// Whether a retry within the invocation can fix it.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorClass::Throttled | ErrorClass::Transient | ErrorClass::NotFound)
    }

    /// Whether another delivery of the event is worth it (see the table above).
    pub fn failure(self, cloud: Cloud) -> Failure {
        match (self, cloud) {
            _ if self.is_retryable() => Failure::Transient,
            (ErrorClass::Denied, Cloud::Azure) => Failure::Transient,
            _ => Failure::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_retried_and_what_is_reported() {
        use ErrorClass::*;
        for c in [Throttled, Transient, NotFound] {
            assert!(c.is_retryable());
            assert_eq!((c.failure(Cloud::Aws), c.failure(Cloud::Azure)), (Failure::Transient, Failure::Transient));
        }
        for c in [TagLimit, Unsupported, Fatal] {
            assert!(!c.is_retryable());
            assert_eq!((c.failure(Cloud::Aws), c.failure(Cloud::Azure)), (Failure::Permanent, Failure::Permanent));
        }
        assert_eq!(
            (Denied.failure(Cloud::Aws), Denied.failure(Cloud::Azure)),
            (Failure::Permanent, Failure::Transient)
        );
    }

    #[test]
    fn one_error_type_names_the_call_and_the_fix_on_both_clouds() {
        let denied = CloudError::aws("s3:GetObject", "s3://b/p.yaml", "AccessDenied", "no", ErrorClass::Fatal);
        assert_eq!(
            denied.to_string(),
            "s3:GetObject s3://b/p.yaml: AccessDenied: no (fix: grant s3:GetObject to the function's role (infra/aws iam.tf))"
        );
        assert_eq!(denied.failure(), Failure::Permanent);
        let write = CloudError::aws("ec2:CreateTags", "i-1", "UnauthorizedOperation", "", ErrorClass::Fatal);
        assert!(write.to_string().contains("ownership tag"), "a write's grant is conditioned on ownership: {write}");

        // ARM's code decides (azure::error::PERMANENT_ARM_CODES): a missing role is permanent.
        let mut azure = CloudError::azure(
            "arm:MergeTags",
            "/subscriptions/s/x",
            Some(403),
            "AuthorizationFailed",
            "",
            ErrorClass::Fatal,
        );
        azure.request_ids = vec![("x-ms-request-id", "r-1".into())];
        assert_eq!(
            azure.to_string(),
            "arm:MergeTags /subscriptions/s/x: HTTP 403 AuthorizationFailed (fix: grant the function's identity the tagwarden tag writer role (infra/azure: Microsoft.Resources/tags/write) on the resource's scope; not retried: the next sweep writes it once granted) [x-ms-request-id r-1]"
        );
        assert_eq!(azure.failure(), Failure::Permanent);
        let locked = CloudError::azure("arm:MergeTags", "/s", Some(409), "ScopeLocked", "", ErrorClass::Fatal);
        assert!(locked.to_string().contains("remove the ReadOnly lock"), "{locked}");
        let token =
            CloudError::azure("arm:GetTags", "/s", Some(401), "ExpiredAuthenticationToken", "", ErrorClass::Denied);
        assert_eq!(token.failure(), Failure::Transient, "a new token fixes it");

        let record = Record::failed(
            Cloud::Azure,
            &tagwarden_core::resource::ResourceRef::ec2("i-1", "r", "a"),
            "v1",
            String::new(),
        );
        let limit = CloudError::azure("arm:MergeTags", "x", Some(400), "InvalidTags", "", ErrorClass::TagLimit);
        assert_eq!(limit.into_record(record.clone()).status, Status::LimitExceeded);
        let unsupported = CloudError::aws("tag:TagResources", "arn", "X", "not supported", ErrorClass::Unsupported);
        assert_eq!(unsupported.into_record(record).status, Status::Unsupported);
    }
}
