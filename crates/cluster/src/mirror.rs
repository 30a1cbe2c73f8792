//! The status report, mirrored into the cluster: a ConfigMap that `oc get` shows, and a
//! Kubernetes Event each time the state changes (the policy state, the version in force, or
//! whether any resource failed), so `oc get events` and `oc describe configmap` tell the story.
//! Beside the report, the publisher's [`Conditions`] (`available`, `progressing`, `degraded` and
//! the whole list as `conditions`), with an Event on each transition; they are written even when
//! there is no report yet or it cannot be read, so a refused document shows before the first sweep.
//!
//! Access needed: get/update on that one ConfigMap (create too if it does not exist yet; the
//! manifests create it, so the Role can name it), and create on `events.k8s.io` events.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource};

use super::conditions::{Condition, Conditions, DEGRADED, PROGRESSING};
use super::{api_error, ClusterError};
use tagwarden_core::policy::cache::PolicyState;
use tagwarden_core::status::StatusReport;
use tagwarden_engine::retry::{Backoff, RetryAfter};

/// The API server's answer to a write attempt: a conflict is retried, and it names no wait.
#[derive(Debug)]
struct WriteError(kube::Error);

impl RetryAfter for WriteError {}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> Self {
        WriteError(e)
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The ConfigMap the manifests create for the report.
pub const DEFAULT_NAME: &str = "tagwarden-status";
/// The whole report is kept within this, well under a ConfigMap's 1 MiB, dropping failures to fit.
const MAX_REPORT_BYTES: usize = 256 * 1024;
/// events.k8s.io/v1 `note` "must be at most 1kB in size" (Kubernetes API reference, Event v1).
const MAX_NOTE_BYTES: usize = 1024;

/// Data keys: one per fact `oc get configmap -o jsonpath` may want, and the report itself.
const KEY_STATE: &str = "state";
const KEY_VERSION: &str = "version";
const KEY_FAILURES: &str = "failures";
const KEY_LOCATION: &str = "location";
const KEY_GENERATED_AT: &str = "generatedAt";
const KEY_REPORT: &str = "report.json";
const KEY_CONDITIONS: &str = "conditions";
const KEY_AVAILABLE: &str = "available";
const KEY_PROGRESSING: &str = "progressing";
const KEY_DEGRADED: &str = "degraded";

/// What a mirror did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorOutcome {
    pub configmap: Write,
    /// The reason of the Event emitted, when the state changed.
    pub event: Option<String>,
    /// The reasons of the Events emitted for condition transitions.
    pub transitions: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Created,
    Updated,
    Unchanged,
}

/// Mirrors reports into one ConfigMap.
pub struct StatusMirror {
    api: Api<ConfigMap>,
    client: Client,
    namespace: String,
    name: String,
    reporter: Reporter,
}

impl StatusMirror {
    /// `instance` names this publisher in the Events (e.g. the pod's name).
    pub fn new(client: Client, namespace: &str, name: &str, instance: Option<String>) -> Self {
        StatusMirror {
            api: Api::namespaced(client.clone(), namespace),
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            reporter: Reporter { controller: "tagwarden".to_string(), instance },
        }
    }

    fn what(&self) -> String {
        format!("configmap {}/{}", self.namespace, self.name)
    }

    /// Write `report` into the ConfigMap unless it already holds it, and emit an Event when the
    /// state it shows changes.
    pub async fn mirror(&self, report: &StatusReport) -> Result<MirrorOutcome, ClusterError> {
        self.write(Some(report), None).await
    }

    /// Write the publisher's `conditions`, and `report` when there is one, keeping every earlier
    /// transition time that still holds; an Event for each condition that changed.
    pub async fn mirror_with(
        &self,
        report: Option<&StatusReport>,
        conditions: Conditions,
    ) -> Result<MirrorOutcome, ClusterError> {
        self.write(report, Some(conditions)).await
    }

    async fn write(
        &self,
        report: Option<&StatusReport>,
        conditions: Option<Conditions>,
    ) -> Result<MirrorOutcome, ClusterError> {
        let (what, conditions) = (&self.what(), &conditions);
        // 409: Conflict on the replace, or AlreadyExists on the create: read again and decide again.
        let conflict = |e: &WriteError| matches!(&e.0, kube::Error::Api(s) if s.code == 409);
        // The write's error is the outer one, the only one retried.
        let attempt = |_| async move {
            let current = match self.api.get_opt(&self.name).await {
                Ok(current) => current,
                Err(e) => return Ok(Err(api_error(what, "get", e))),
            };
            let old = current.as_ref().and_then(|cm| cm.data.clone()).unwrap_or_default();
            let before: Vec<Condition> =
                old.get(KEY_CONDITIONS).and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default();
            let conditions = conditions.clone().map(|c| c.since(&before));
            let mut data = old.clone();
            if let Some(r) = report {
                data.extend(data_of(r));
            }
            if let Some(c) = &conditions {
                data.extend(conditions_data(c));
            }
            let (cm, previous, write) = match current {
                None => {
                    let cm = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(self.name.clone()),
                            namespace: Some(self.namespace.clone()),
                            labels: Some(labels()),
                            ..ObjectMeta::default()
                        },
                        data: Some(data),
                        ..ConfigMap::default()
                    };
                    (self.api.create(&PostParams::default(), &cm).await?, None, Write::Created)
                }
                Some(cm) if cm.data.as_ref().map_or(data.is_empty(), |d| d == &data) => return Ok(Ok(None)),
                Some(mut cm) => {
                    let previous = Summary::of_data(&old);
                    cm.data = Some(data);
                    // The resourceVersion read above makes this a conditional write: 409 if
                    // someone else wrote in between.
                    (self.api.replace(&self.name, &PostParams::default(), &cm).await?, Some(previous), Write::Updated)
                }
            };
            Ok(Ok(Some((cm, previous, before, conditions, write))))
        };
        let written = Backoff::CONFLICT.retry(conflict, attempt).await;
        let Some((written, previous, previous_conditions, conditions, write)) =
            written.map_err(|e| api_error(what, "get, create and update", e.0))??
        else {
            return Ok(MirrorOutcome { configmap: Write::Unchanged, event: None, transitions: vec![] });
        };
        let mut outcome = MirrorOutcome { configmap: write, event: None, transitions: vec![] };
        let object = written.object_ref(&());
        if let Some(c) = &conditions {
            for changed in c.transitions(&previous_conditions) {
                let event = condition_event(changed);
                self.emit(&event, &object).await?;
                outcome.transitions.push(event.reason);
            }
        }
        let Some(report) = report else { return Ok(outcome) };
        let now = Summary::of_report(report);
        // A condition's Event already told this change: one Event per fact.
        if previous.flatten().as_ref() == Some(&now) || !outcome.transitions.is_empty() {
            return Ok(outcome);
        }
        let event = now.event(report);
        self.emit(&event, &object).await?;
        outcome.event = Some(event.reason);
        Ok(outcome)
    }

    async fn emit(
        &self,
        event: &Event,
        object: &k8s_openapi::api::core::v1::ObjectReference,
    ) -> Result<(), ClusterError> {
        // A Recorder per Event: a long-lived one caches Events by reason and would patch a later
        // one with the same reason into the earlier Event's series, keeping the earlier note.
        Recorder::new(self.client.clone(), self.reporter.clone())
            .publish(event, object)
            .await
            .map_err(|e| api_error(&format!("events in namespace {}", self.namespace), "create", e))
    }
}

fn conditions_data(c: &Conditions) -> BTreeMap<String, String> {
    let status = |t: &str| c.get(t).map(|c| c.status.clone()).unwrap_or_default();
    BTreeMap::from([
        (KEY_CONDITIONS.to_string(), serde_json::to_string(&c.0).unwrap_or_default()),
        (KEY_AVAILABLE.to_string(), status(super::conditions::AVAILABLE)),
        (KEY_PROGRESSING.to_string(), status(PROGRESSING)),
        (KEY_DEGRADED.to_string(), status(DEGRADED)),
    ])
}

/// An Event for a condition that changed: a Warning when it is bad news (degraded, or not available).
fn condition_event(c: &Condition) -> Event {
    let bad = (c.type_ == DEGRADED) == c.is_true();
    let bad = bad && c.type_ != PROGRESSING;
    Event {
        type_: if bad { EventType::Warning } else { EventType::Normal },
        reason: c.reason.clone(),
        note: Some(truncate(format!("{}={}: {}", c.type_, c.status, c.message), MAX_NOTE_BYTES)),
        action: "Publish".to_string(),
        secondary: None,
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "tagwarden".to_string()),
        ("app.kubernetes.io/component".to_string(), "status".to_string()),
    ])
}

fn data_of(report: &StatusReport) -> BTreeMap<String, String> {
    BTreeMap::from([
        (KEY_STATE.to_string(), report.policy.state.to_string()),
        (KEY_VERSION.to_string(), report.policy.version.clone().unwrap_or_default()),
        (KEY_FAILURES.to_string(), report.failures.len().to_string()),
        (KEY_LOCATION.to_string(), report.policy.location.clone()),
        (KEY_GENERATED_AT.to_string(), report.generated_at.to_string()),
        (KEY_REPORT.to_string(), report.to_json_within(MAX_REPORT_BYTES)),
    ])
}

/// The state an Event is emitted for when it changes.
#[derive(Debug, PartialEq, Eq)]
struct Summary {
    state: String,
    version: String,
    failing: bool,
}

impl Summary {
    fn of_report(r: &StatusReport) -> Summary {
        Summary {
            state: r.policy.state.to_string(),
            version: r.policy.version.clone().unwrap_or_default(),
            failing: !r.failures.is_empty(),
        }
    }

    /// `None` for a ConfigMap no report was written into yet (the manifests create it empty).
    fn of_data(d: &BTreeMap<String, String>) -> Option<Summary> {
        Some(Summary {
            state: d.get(KEY_STATE)?.clone(),
            version: d.get(KEY_VERSION).cloned().unwrap_or_default(),
            failing: d.get(KEY_FAILURES).is_some_and(|n| n != "0"),
        })
    }

    fn event(&self, r: &StatusReport) -> Event {
        let version = r.policy.version.as_deref().unwrap_or("none");
        let location = &r.policy.location;
        let errors = r.policy.errors.join("; ");
        let state = PolicyState::ALL.into_iter().find(|s| s.as_str() == self.state);
        let (reason, note) = match state {
            Some(PolicyState::Ok) if !self.failing => (
                "PolicyInForce",
                format!("policy version {version} from {location} is in force on every owned resource"),
            ),
            Some(PolicyState::Ok) => {
                ("TagWriteFailures", format!("policy version {version} from {location} is in force"))
            }
            Some(PolicyState::RejectedKeepingLastGood) => (
                "PolicyRejected",
                format!("a newer policy at {location} was rejected ({errors}); version {version} stays in force"),
            ),
            Some(PolicyState::UnreadableKeepingLastGood) => (
                "PolicyUnreadable",
                format!("the policy at {location} cannot be read ({errors}); version {version} stays in force"),
            ),
            Some(PolicyState::Unavailable) => {
                ("PolicyUnavailable", format!("no valid policy at {location} ({errors}); nothing is written"))
            }
            None => ("PolicyStatus", format!("policy state {} at {location}, version {version}", self.state)),
        };
        let mut note = note;
        if let Some(first) = r.failures.first() {
            note.push_str(&format!(
                "; {} resources could not be brought in line, first {} ({}): {}",
                r.failures.len(),
                first.name,
                first.resource_type,
                first.error
            ));
        }
        Event {
            type_: if reason == "PolicyInForce" { EventType::Normal } else { EventType::Warning },
            reason: reason.to_string(),
            note: Some(truncate(note, MAX_NOTE_BYTES)),
            action: "Enforce".to_string(),
            secondary: None,
        }
    }
}

/// A Warning Event on a cluster set's member object (its `HostedCluster`, `AWSCluster` …): that
/// cluster's policy was not published, and why, shown where its owner looks (`oc describe`).
/// Needs `create` on `events.k8s.io` events in the object's namespace.
pub async fn warn_member(
    client: &Client,
    instance: Option<String>,
    object: &super::cluster_set::ObjectRef,
    reason: &str,
    note: String,
) -> Result<(), ClusterError> {
    let regarding = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(object.api_version.clone()),
        kind: Some(object.kind.clone()),
        namespace: Some(object.namespace.clone()),
        name: Some(object.name.clone()),
        uid: object.uid.clone(),
        resource_version: object.resource_version.clone(),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_string(),
        note: Some(truncate(note, MAX_NOTE_BYTES)),
        action: "Publish".to_string(),
        secondary: None,
    };
    Recorder::new(client.clone(), Reporter { controller: "tagwarden".to_string(), instance })
        .publish(&event, &regarding)
        .await
        .map_err(|e| api_error(&format!("events in namespace {}", object.namespace), "create", e))
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max - '…'.len_utf8();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::cloud::Cloud;
    use tagwarden_core::status::ResourceFailure;

    #[test]
    fn a_state_change_is_state_version_or_failing() {
        let report = |version: &str, failures: usize| {
            let f = (0..failures)
                .map(|i| ResourceFailure::new(&format!("i-{i}"), "ec2:instance", "AccessDenied"))
                .collect();
            StatusReport::new(Cloud::Aws, &"s3://b/p", Some(version.to_string()), vec![], f)
        };
        let same = |a: &StatusReport, b: &StatusReport| Summary::of_data(&data_of(a)) == Some(Summary::of_report(b));
        assert!(same(&report("v1", 2), &report("v1", 3)), "more failures of the same kind is no new state");
        assert!(!same(&report("v1", 0), &report("v1", 1)));
        assert!(!same(&report("v1", 0), &report("v2", 0)));
        let event = Summary::of_report(&report("v1", 1)).event(&report("v1", 1));
        assert_eq!((event.reason.as_str(), event.type_), ("TagWriteFailures", EventType::Warning));
        assert!(
            event.note.as_deref().is_some_and(|n| n.contains("i-0 (ec2:instance): AccessDenied")),
            "{:?}",
            event.note
        );
    }

    #[test]
    fn notes_fit_the_event_limit_on_a_char_boundary() {
        let long = "é".repeat(2000);
        let t = truncate(long, MAX_NOTE_BYTES);
        assert!(t.len() <= MAX_NOTE_BYTES && t.ends_with('…'), "{}", t.len());
    }
}
