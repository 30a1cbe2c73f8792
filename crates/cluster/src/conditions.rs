//! The publisher's health as ClusterOperator-style conditions (openshift/api
//! `config/v1/types_cluster_operator.go`: `Available`, `Progressing`, `Degraded`, each with
//! `status`, `reason`, `message` and `lastTransitionTime`), so `oc` shows why tagwarden is unhappy
//! without reading logs. Pure: the publisher gathers the facts, [`Conditions::from_facts`] decides,
//! and the mirror writes them and emits an Event on each transition.

use serde::{Deserialize, Serialize};

use tagwarden_core::policy::cache::PolicyState;
use tagwarden_core::status::StatusReport;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";

/// One condition, as `oc get clusteroperator -o yaml` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339; kept while the status stays the same.
    pub last_transition_time: String,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Why the last publish attempt failed, as the publisher classified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishFailure {
    /// `CredentialsRejected`, `AccessDenied`, `Unreachable`, `Conflict`, `PublishFailed`.
    pub reason: &'static str,
    pub message: String,
}

/// What the publisher knows at one moment.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    /// Where it publishes (no credential).
    pub location: String,
    /// The version (ETag, parameter version) the store holds from this publisher's last
    /// successful publish, or found already in line.
    pub published: Option<String>,
    /// Why the cluster's latest document is refused (empty: it is not).
    pub refused: Vec<String>,
    /// The cluster's latest document awaits a retry after this failure.
    pub failure: Option<PublishFailure>,
    /// The cluster publishes no policy now (the object or the key is gone).
    pub absent: Option<String>,
    /// The function's report could not be read.
    pub report_unreadable: Option<String>,
    /// A credential that will stop working soon (e.g. a SAS's expiry).
    pub expiring: Option<String>,
}

/// The three conditions, in the order `oc` shows a ClusterOperator's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditions(pub Vec<Condition>);

impl Conditions {
    /// Decide from the publisher's facts and the function's report (if any). Times are `now`;
    /// [`Conditions::since`] keeps earlier ones where nothing changed.
    pub fn from_facts(facts: &Facts, report: Option<&StatusReport>, now: &str) -> Conditions {
        let condition = |type_: &str, status: bool, reason: &str, message: String| Condition {
            type_: type_.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message,
            last_transition_time: now.to_string(),
        };
        // The function's word, when it has reported; before that, what this publisher wrote.
        let in_force = match report {
            Some(r) if r.policy.state == PolicyState::Unavailable => None,
            Some(r) => r.policy.version.clone(),
            None => facts.published.clone(),
        };
        let available = match &in_force {
            Some(v) => condition(
                AVAILABLE,
                true,
                "PolicyInForce",
                format!("policy version {v} at {} is the one enforced", facts.location),
            ),
            None => condition(
                AVAILABLE,
                false,
                "NoPolicyInForce",
                format!("no valid policy has been published to {} yet", facts.location),
            ),
        };

        let mut causes: Vec<(&str, String)> = Vec::new();
        if let Some(f) = &facts.failure {
            causes.push((f.reason, format!("publishing to {} failed: {}", facts.location, f.message)));
        }
        if !facts.refused.is_empty() {
            let kept = match &in_force {
                Some(v) => format!("version {v} stays in force"),
                None => "nothing is enforced until a valid document is published".to_string(),
            };
            causes.push((
                "PolicyRefused",
                format!("the cluster's tags are refused: {}; {kept}", facts.refused.join("; ")),
            ));
        }
        if let Some(why) = &facts.report_unreadable {
            causes.push(("StatusUnreadable", format!("the function's status report cannot be read: {why}")));
        }
        if let Some(why) = &facts.expiring {
            causes.push(("CredentialsExpiring", why.clone()));
        }
        if let Some(r) = report {
            let errors = r.policy.errors.join("; ");
            match r.policy.state {
                PolicyState::Ok => {}
                PolicyState::RejectedKeepingLastGood => {
                    causes.push(("PolicyRejected", format!("the function rejected the published policy ({errors})")))
                }
                PolicyState::UnreadableKeepingLastGood => {
                    causes.push(("PolicyUnreadable", format!("the function cannot read the policy ({errors})")))
                }
                PolicyState::Unavailable => {
                    causes.push(("PolicyUnavailable", format!("the function has no valid policy ({errors})")))
                }
            }
            if let Some(first) = r.failures.first() {
                causes.push((
                    "TagWriteFailures",
                    format!(
                        "{} resources could not be brought in line, first {} ({}): {}",
                        r.failures.len(),
                        first.name,
                        first.resource_type,
                        first.error
                    ),
                ));
            }
        }
        let degraded = match causes.first() {
            Some((reason, _)) => {
                let message = causes.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>().join("; ");
                condition(DEGRADED, true, reason, message)
            }
            None => condition(DEGRADED, false, "AsExpected", "publishing and enforcement are in line".to_string()),
        };

        // Only the publisher's own progress: the store's object version (ETag, parameter
        // version) and the version the function reports are not the same kind of identifier.
        let progressing = if facts.failure.is_some() {
            condition(
                PROGRESSING,
                true,
                "Retrying",
                "the cluster's latest document is retried with back-off".to_string(),
            )
        } else if let Some(why) = &facts.absent {
            condition(PROGRESSING, false, "NoClusterPolicy", format!("{why}; what was published stays in force"))
        } else {
            condition(PROGRESSING, false, "AsExpected", "the cluster's latest document is published".to_string())
        };
        Conditions(vec![available, progressing, degraded])
    }

    /// Keep each earlier `lastTransitionTime` whose condition kept its status.
    pub fn since(mut self, previous: &[Condition]) -> Conditions {
        for c in &mut self.0 {
            if let Some(p) = previous.iter().find(|p| p.type_ == c.type_ && p.status == c.status) {
                c.last_transition_time.clone_from(&p.last_transition_time);
            }
        }
        self
    }

    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.0.iter().find(|c| c.type_ == type_)
    }

    /// The conditions whose status or reason differ from `previous`: one Event each.
    pub fn transitions<'a>(&'a self, previous: &'a [Condition]) -> impl Iterator<Item = &'a Condition> + 'a {
        self.0.iter().filter(move |c| {
            !previous.iter().any(|p| p.type_ == c.type_ && p.status == c.status && p.reason == c.reason)
        })
    }
}

/// What to say of a credential (`what`, e.g. "the SAS in TAGWARDEN_BLOB_SAS") that stops working
/// at `at_ms`: nothing while more than `warning` is left, then when, and what to do.
pub fn expiry_warning(what: &str, at_ms: u64, now_ms: u64, warning: std::time::Duration) -> Option<String> {
    let left = std::time::Duration::from_millis(at_ms.saturating_sub(now_ms));
    if left > warning {
        return None;
    }
    let when = tagwarden_core::events::format_rfc3339_ms(at_ms);
    Some(if left.is_zero() {
        format!("{what} expired at {when}; put a new SAS in the Secret, or use Workload Identity")
    } else {
        format!(
            "{what} expires at {when} (in {} h); put a new SAS in the Secret before then, or use Workload Identity",
            left.as_secs() / 3600
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::cloud::Cloud;

    fn facts() -> Facts {
        Facts { location: "s3://b/p.yaml".into(), published: Some("v1".into()), ..Facts::default() }
    }

    fn report(version: &str) -> StatusReport {
        StatusReport::new(Cloud::Aws, &"s3://b/p.yaml", Some(version.to_string()), vec![], vec![])
    }

    #[test]
    fn in_line_is_available_not_progressing_not_degraded() {
        let c = Conditions::from_facts(&facts(), Some(&report("v1")), "t0");
        let s: Vec<_> = c.0.iter().map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str())).collect();
        assert_eq!(
            s,
            [
                ("Available", "True", "PolicyInForce"),
                ("Progressing", "False", "AsExpected"),
                ("Degraded", "False", "AsExpected")
            ]
        );
    }

    #[test]
    fn a_refused_document_before_any_report_is_degraded_and_says_what_stays() {
        let f = Facts { refused: vec!["tag 1 (key a*b): invalid character '*'".into()], ..facts() };
        let c = Conditions::from_facts(&f, None, "t0");
        let d = c.get(DEGRADED).expect("degraded");
        assert!(d.is_true() && d.reason == "PolicyRefused", "{d:?}");
        assert!(d.message.contains("a*b") && d.message.contains("version v1 stays in force"), "{}", d.message);
        assert_eq!(c.get(AVAILABLE).map(Condition::is_true), Some(true), "the last good document is in force");
    }

    #[test]
    fn a_credential_is_reported_within_the_warning_and_after_it_expired() {
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        let day_ms = 24 * 3600 * 1000;
        let now = 1_764_000_000_000;
        assert_eq!(expiry_warning("the SAS", now + 8 * day_ms, now, week), None);
        let soon = expiry_warning("the SAS", now + 2 * day_ms, now, week).expect("within the week");
        assert!(soon.contains("in 48 h") && soon.contains("before then"), "{soon}");
        let gone = expiry_warning("the SAS", now - 1, now, week).expect("expired");
        assert!(gone.contains("expired at"), "{gone}");
        let f = Facts { expiring: Some(soon), ..facts() };
        let c = Conditions::from_facts(&f, Some(&report("v1")), "t0");
        assert_eq!(c.get(DEGRADED).map(|d| d.reason.as_str()), Some("CredentialsExpiring"));
    }

    #[test]
    fn the_function_saying_unavailable_is_not_overruled_by_what_was_published() {
        let unavailable = StatusReport::new(Cloud::Aws, &"s3://b/p.yaml", None, vec!["bad".into()], vec![]);
        let c = Conditions::from_facts(&facts(), Some(&unavailable), "t0");
        let a = c.get(AVAILABLE).expect("available");
        assert_eq!((a.is_true(), a.reason.as_str()), (false, "NoPolicyInForce"), "{a:?}");
    }

    #[test]
    fn transition_times_and_events_follow_status_changes_only() {
        let t0 = Conditions::from_facts(&facts(), Some(&report("v1")), "t0");
        let failing = Facts {
            failure: Some(PublishFailure { reason: "Unreachable", message: "through HTTPS_PROXY=…".into() }),
            ..facts()
        };
        let t1 = Conditions::from_facts(&failing, Some(&report("v1")), "t1").since(&t0.0);
        let changed: Vec<_> = t1.transitions(&t0.0).map(|c| c.type_.as_str()).collect();
        assert_eq!(changed, ["Progressing", "Degraded"]);
        assert_eq!(t1.get(AVAILABLE).map(|c| c.last_transition_time.as_str()), Some("t0"));
        assert_eq!(t1.get(DEGRADED).map(|c| c.last_transition_time.as_str()), Some("t1"));
        let t2 = Conditions::from_facts(&failing, Some(&report("v1")), "t2").since(&t1.0);
        assert_eq!(t2.transitions(&t1.0).count(), 0, "the same failure again is no transition");
    }
}
