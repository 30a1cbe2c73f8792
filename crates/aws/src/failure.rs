//! Why an invocation failed, with whether another delivery can help: the class the Lambda's
//! answer carries (`functions/aws-lambda` maps it to the Runtime API's `errorType`).
//!
//! The class is read from the typed reasons the outcomes already carry
//! (`tagwarden_core::reason::StopKind`, and each failed record's `Failure`), never from words.
//!
//! Deliberately not here: whether a single record or SQS message is retried (the records'
//! `failure`, `Outcome::must_retry`, `batchItemFailures`).

use std::fmt;

use tagwarden_core::reason::StopKind;
use tagwarden_core::report::{Failure, Outcome, Status};

use crate::organization::EnqueueError;

/// Whether another delivery of the invocation can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// A throttle, a timeout, a 5xx, an unreachable endpoint, work handed back before the
    /// deadline: the same payload again can succeed.
    Retryable,
    /// No valid policy, a refused member account, nowhere to sweep, a malformed payload: the
    /// same payload again fails the same way until someone changes something.
    Permanent,
}

impl FailureClass {
    /// Retryable when either is.
    pub fn or(self, other: FailureClass) -> FailureClass {
        match (self, other) {
            (FailureClass::Permanent, FailureClass::Permanent) => FailureClass::Permanent,
            _ => FailureClass::Retryable,
        }
    }

    /// The class of a typed reason (`StopKind::is_retryable`: only work handed back before the
    /// deadline is; of several, retryable when any is).
    pub fn of_stop(kind: &StopKind) -> FailureClass {
        if kind.is_retryable() {
            FailureClass::Retryable
        } else {
            FailureClass::Permanent
        }
    }

    /// The class of an outcome: retryable when a failed record may be retried (its `failure` is
    /// not permanent, as `Outcome::must_retry` reads it) or its reason is; otherwise permanent.
    pub fn of_outcome(out: &Outcome) -> FailureClass {
        let records = out.records.iter().any(|r| r.status == Status::Failed && r.failure != Some(Failure::Permanent));
        let records = if records { FailureClass::Retryable } else { FailureClass::Permanent };
        out.error.as_ref().map_or(records, |why| records.or(FailureClass::of_stop(why.kind())))
    }

    /// The class of shards not sent to the shard queue: the SQS call's own class.
    pub fn of_enqueue(e: &EnqueueError) -> FailureClass {
        let retryable = match e {
            EnqueueError::NoQueue | EnqueueError::Entry(_) => false,
            EnqueueError::Call { error, .. } => error.class.is_retryable(),
            EnqueueError::Refused { code, .. } => crate::error::classify(code).is_retryable(),
        };
        if retryable {
            FailureClass::Retryable
        } else {
            FailureClass::Permanent
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureClass::Retryable => "retryable",
            FailureClass::Permanent => "permanent",
        })
    }
}

/// An invocation's failure: what the caller is told (its text, as the invocation's answer has
/// always carried it; `&str` through `Deref` for readers that match on words) and its class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvocationError {
    pub class: FailureClass,
    pub message: String,
}

impl InvocationError {
    pub fn retryable(message: impl Into<String>) -> Self {
        InvocationError { class: FailureClass::Retryable, message: message.into() }
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        InvocationError { class: FailureClass::Permanent, message: message.into() }
    }

    /// For an outcome that must fail the invocation: its reason's text, or `otherwise` when it
    /// has none (only failed records), classed by [`FailureClass::of_outcome`].
    pub fn of_outcome(out: &Outcome, otherwise: impl FnOnce() -> String) -> Self {
        let message = out.error.as_ref().map_or_else(otherwise, ToString::to_string);
        InvocationError { class: FailureClass::of_outcome(out), message }
    }
}

impl std::ops::Deref for InvocationError {
    type Target = str;
    fn deref(&self) -> &str {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::cloud::Cloud;
    use tagwarden_core::reason::{Deferred, Stop};
    use tagwarden_core::report::Record;
    use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

    fn stopped(kind: StopKind) -> Outcome {
        Outcome { error: Some(Stop::new(kind)), ..Outcome::default() }
    }

    fn failed(failure: Failure) -> Outcome {
        let r = tagwarden_core::resource::ResourceRef::ec2("i-0123456789abcdef0", "us-east-1", "111122223333");
        let mut record = Record::failed(Cloud::Aws, &r, "v1", "ec2:CreateTags: boom".into());
        record.failure = Some(failure);
        let mut out = Outcome::default();
        out.push(record);
        out
    }

    #[test]
    fn handed_back_work_is_retryable_and_what_a_retry_cannot_fix_is_permanent() {
        use FailureClass::{Permanent, Retryable};
        let cases = [
            (StopKind::Deferred(Deferred::EventHandedBack), Retryable),
            (StopKind::Deferred(Deferred::NextSweep), Retryable),
            (StopKind::Deferred(Deferred::SweepWindow), Retryable),
            (StopKind::Deferred(Deferred::BeforeClusters(vec!["a-1".into()])), Retryable),
            (StopKind::NoPolicy("no valid policy".into()), Permanent),
            (StopKind::Member("account 111122223333: AccessDenied".into()), Permanent),
            (StopKind::CannotSweep("nowhere to list".into()), Permanent),
            (StopKind::Unreadable("not an event tagwarden reads".into()), Permanent),
            (StopKind::Several(vec![StopKind::Member("m".into()), StopKind::NoPolicy("p".into())]), Permanent),
            (StopKind::Several(vec![StopKind::Member("m".into()), StopKind::Deferred(Deferred::NextSweep)]), Retryable),
        ];
        for (kind, class) in cases {
            assert_eq!(FailureClass::of_stop(&kind), class, "{kind}");
            let e = InvocationError::of_outcome(&stopped(kind.clone()), || "unused".into());
            assert_eq!((e.class, e.message.as_str()), (class, kind.to_string().as_str()));
        }
    }

    #[test]
    fn failed_records_class_the_outcome_by_their_failure() {
        // A throttled or 5xx write (Transient) can succeed again; AccessDenied (Permanent) cannot.
        let e = InvocationError::of_outcome(&failed(Failure::Transient), || "1 resource(s) failed".into());
        assert_eq!(e, InvocationError::retryable("1 resource(s) failed"));
        assert_eq!(FailureClass::of_outcome(&failed(Failure::Permanent)), FailureClass::Permanent);
        // A retryable record beside a permanent reason: a retry can still help it.
        let mut both = failed(Failure::Transient);
        both.error = Some(Stop::new(StopKind::NoPolicy("p".into())));
        assert_eq!(FailureClass::of_outcome(&both), FailureClass::Retryable);
        assert_eq!(ErrorClass::Throttled.failure(Cloud::Aws), Failure::Transient);
        assert_eq!(ErrorClass::Fatal.failure(Cloud::Aws), Failure::Permanent);
    }

    #[test]
    fn shards_not_sent_take_the_sqs_calls_class() {
        let call = |code: &str, class| EnqueueError::Call {
            error: CloudError::aws("sqs:SendMessageBatch", "q", code, "", class),
            sent: 0,
        };
        assert_eq!(
            FailureClass::of_enqueue(&call("ThrottlingException", ErrorClass::Throttled)),
            FailureClass::Retryable
        );
        assert_eq!(FailureClass::of_enqueue(&call("DispatchFailure", ErrorClass::Transient)), FailureClass::Retryable);
        assert_eq!(FailureClass::of_enqueue(&call("AccessDenied", ErrorClass::Fatal)), FailureClass::Permanent);
        let refused =
            |code: &str| EnqueueError::Refused { refused: 1, sent: 0, code: code.into(), message: String::new() };
        assert_eq!(FailureClass::of_enqueue(&refused("InternalError")), FailureClass::Retryable);
        assert_eq!(FailureClass::of_enqueue(&refused("InvalidParameterValue")), FailureClass::Permanent);
        assert_eq!(FailureClass::of_enqueue(&EnqueueError::Entry("no body".into())), FailureClass::Permanent);
    }

    #[test]
    fn the_error_reads_as_its_message() {
        let e = InvocationError::permanent("not a payload tagwarden reads: x");
        assert_eq!(e.to_string(), "not a payload tagwarden reads: x");
        assert!(e.contains("not a payload"));
        assert_eq!(FailureClass::Retryable.or(FailureClass::Permanent), FailureClass::Retryable);
    }
}
