//! How work arrives, for both clouds: what a delivered payload asks a function to do. Pure: each
//! cloud's function reads its own payload shapes into a [`Trigger`] (`aws::function`,
//! `azure::function`); what stays with each cloud is only its host protocol (SQS batches and their
//! partial failures; the Functions host's invocations and its sweep queue).

use crate::policy::STATUS_REPORT_NAME;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Events naming resources, as delivered (one event, or an array of them): reconcile them.
    Events(Vec<u8>),
    /// The scheduled sweep.
    Sweep,
    /// Objects were written where the policy is (S3 keys, SSM parameter names, blob names), the
    /// last at `at_ms` (ms since the epoch, by the storage service's clock) when the notification
    /// says: re-read the policy now, and sweep what it changed (`Engine::policy_changed`).
    PolicyChanged { objects: Vec<String>, at_ms: Option<u64> },
    /// Only the function's own status report was written: nothing to do.
    OwnStatusReport,
}

impl Trigger {
    /// A notification that `objects` were written where the policy is: a policy change, unless
    /// every one of them is the status report the function itself writes beside the policy.
    /// `at` is each notification's time (RFC 3339), if it has one.
    pub fn written(objects: Vec<String>, at: &[Option<&str>]) -> Trigger {
        let own = |o: &String| o.rsplit('/').next() == Some(STATUS_REPORT_NAME);
        if !objects.is_empty() && objects.iter().all(own) {
            Trigger::OwnStatusReport
        } else {
            let at_ms = at.iter().map(|t| t.and_then(crate::events::parse_rfc3339_ms)).collect::<Option<Vec<u64>>>();
            Trigger::PolicyChanged { objects, at_ms: at_ms.and_then(|t| t.into_iter().max()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_beside_the_policy_is_a_change_unless_it_is_our_report() {
        let written = |names: &[&str]| Trigger::written(names.iter().map(|n| n.to_string()).collect(), &[None]);
        assert_eq!(written(&["cluster/tagwarden-status.json"]), Trigger::OwnStatusReport);
        assert!(matches!(
            written(&["p/10.yaml", "p/tagwarden-status.json"]),
            Trigger::PolicyChanged { objects, at_ms: None } if objects.len() == 2
        ));
        let at = [Some("2026-11-21T10:00:01.5Z"), Some("2026-11-21T10:00:00Z")];
        let Trigger::PolicyChanged { at_ms, .. } = Trigger::written(vec!["a.yaml".into(), "b.yaml".into()], &at) else {
            panic!("a change")
        };
        assert_eq!(at_ms, crate::events::parse_rfc3339_ms("2026-11-21T10:00:01.5Z"), "the last write");
        let unknown = Trigger::written(vec!["a.yaml".into()], &[Some("2026-11-21T10:00:00Z"), None]);
        assert!(matches!(unknown, Trigger::PolicyChanged { at_ms: None, .. }), "one time unknown: now");
    }
}
