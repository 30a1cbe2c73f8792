//! What is retried, how often, and what is reported instead, for both clouds.
//!
//! Every cloud error is classified once, where it is made (`aws::error`, `azure::error`), into an
//! [`ErrorClass`]:
//!
//! | class | retried in the call | then |
//! |---|---|---|
//! | `Throttled` | SDK standard mode (AWS, 5 attempts), `Retry-After` (ARM) | the event is handed back (SQS / Event Grid redelivers); a sweep batch is re-sent after [`Backoff`] with jitter |
//! | `Transient` (network, timeout, 5xx) | the same | handed back |
//! | `NotFound` right after a create | [`Backoff`]: 6 reads, 250 ms doubling to 4 s (AWS); 4 (ARM) | handed back: eventual consistency outlasts one invocation |
//! | `Denied` | no | AWS: recorded as a permanent failure with the missing grant; Azure: handed back, since a role assignment takes minutes to propagate and Event Grid's retries outlast it |
//! | `TagLimit` | no | recorded as `limit-exceeded`: nothing is written |
//! | `Unsupported` | no | recorded as `unsupported`: reported, never a failure |
//! | `Fatal` (invalid, and everything else) | no | recorded as a permanent failure and reported in the status report |
//!
//! A permanent failure never fails the delivery (it would be retried for a day to the same end);
//! a transient one always does, so nothing is dropped.

use std::time::Duration;

use crate::cloud::Cloud;
use crate::report::Failure;

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

/// Bounded exponential back-off: `first`, doubling, at most `max`, for `attempts` tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub attempts: u32,
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    /// 6 attempts, 250 ms doubling to 4 s: about 8 s before the event is handed back.
    fn default() -> Self {
        Backoff { attempts: 6, first: Duration::from_millis(250), max: Duration::from_secs(4) }
    }
}

impl Backoff {
    /// The wait before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        self.first.saturating_mul(1 << attempt.min(16)).min(self.max)
    }
}

/// Up to a quarter of `wait` more, from the clock's low bits: enough to spread retries apart.
pub fn jitter(wait: Duration) -> Duration {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    wait.mul_f64(f64::from(nanos % 1000) / 4000.0)
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
        let b = Backoff::default();
        let waits: Vec<u128> = (0..6).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 4000]);
        assert!(jitter(Duration::from_secs(4)) <= Duration::from_secs(1));
    }
}
