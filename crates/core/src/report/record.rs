//! One structured record per resource reconciled: how it ended, what changed, and why.

use serde::Serialize;

use crate::cloud::Cloud;
use crate::plan::{self, Plan};
use crate::policy::{Policy, Superseded};

/// How one resource's reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Applied,
    Unchanged,
    NotOwned,
    LimitExceeded,
    /// Drift found and audited (`tagwarden_core::mode`: the deployment, the cluster's
    /// `enforce: false`, every drifted key in `auditKeys`, or a dry run): nothing written; the
    /// record's `audited` lists what would be.
    WouldApply,
    Failed,
    /// Owned, but no API tagwarden has can tag this type: reported, not a failure.
    Unsupported,
    /// Listed by a sweep, then deleted before it was read or written: nothing to enforce.
    Gone,
    /// Every drifted key is contested: another controller keeps changing it, so tagwarden stopped
    /// writing it (`tagwarden_core::contest`); reported, not a failure.
    Contested,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Applied => "applied",
            Status::Unchanged => "unchanged",
            Status::NotOwned => "not-owned",
            Status::LimitExceeded => "limit-exceeded",
            Status::WouldApply => "would-apply",
            Status::Failed => "failed",
            Status::Unsupported => "unsupported",
            Status::Gone => "gone",
            Status::Contested => "contested",
        }
    }
}

/// Whether a failure can succeed when tried again (throttled, unavailable, not visible yet) or
/// cannot (denied, invalid, unsupported): a permanent one is reported, never sent round the
/// queue to the dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failure {
    Transient,
    Permanent,
}

/// A changed key as logs may show it: values of sensitive keys are hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeRecord {
    pub key: String,
    pub old: Option<String>,
    pub new: String,
}

/// One structured record per reconcile outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub record: &'static str,
    pub cloud: Cloud,
    pub resource: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub status: Status,
    pub changes: Vec<ChangeRecord>,
    pub superseded: Vec<Superseded>,
    pub policy_version: String,
    /// In a cluster set, the cluster whose policy the resource answers to.
    #[serde(rename = "infraID", skip_serializing_if = "Option::is_none")]
    pub infra_id: Option<String>,
    /// Why a resource was left alone without a failure (owned by a cluster with no policy here),
    /// or why some of its keys were (contested).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Drifted keys not written because they are contested (`tagwarden_core::contest`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contested: Vec<String>,
    /// Drifted keys evaluated and not written because they are audited (`tagwarden_core::mode`):
    /// what would be written, before → after. `changes` holds only what was written (or, for a
    /// failed write, what it carried).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audited: Vec<ChangeRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For a failed record: whether trying again can help.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    pub latency_ms: u64,
    /// How long the resource was out of line: from the event's own time (or, in a sweep, from
    /// when the drift was first seen) to the write that corrected it, or to the decision that no
    /// write was needed. Only for those two outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compliance_lag_ms: Option<u64>,
}

impl Record {
    /// The record for a plan, once its write (if any) is done.
    pub fn from_plan(cloud: Cloud, policy: &Policy, plan: &Plan, written: bool, latency_ms: u64) -> Self {
        let status = match plan.outcome {
            plan::Decision::Apply if written => Status::Applied,
            plan::Decision::Apply => Status::WouldApply,
            plan::Decision::Unchanged => Status::Unchanged,
            plan::Decision::NotOwned => Status::NotOwned,
            plan::Decision::LimitExceeded => Status::LimitExceeded,
            plan::Decision::Audited => Status::WouldApply,
            plan::Decision::Contested => Status::Contested,
        };
        let loggable = |changes: &[plan::Change]| {
            changes
                .iter()
                .map(|c| ChangeRecord {
                    key: c.key.clone(),
                    old: c.old.as_deref().map(|v| policy.loggable(&c.key, v).into_owned()),
                    new: policy.loggable(&c.key, &c.new).into_owned(),
                })
                .collect()
        };
        let (changes, audited) = (loggable(&plan.changes), loggable(&plan.audited));
        Record {
            record: "reconcile",
            cloud,
            resource: plan.resource.clone(),
            resource_type: plan.resource_type.clone(),
            status,
            changes,
            superseded: plan
                .superseded
                .iter()
                .map(|s| Superseded { value: policy.loggable(&s.key, &s.value).into_owned(), ..s.clone() })
                .collect(),
            policy_version: policy.version.clone(),
            infra_id: None,
            reason: None,
            contested: plan.held.clone(),
            audited,
            event_id: None,
            error: None,
            failure: None,
            latency_ms,
            compliance_lag_ms: None,
        }
    }

    pub fn failed(cloud: Cloud, resource: &crate::resource::ResourceRef, policy_version: &str, error: String) -> Self {
        Record::failing_on(cloud, resource.to_string(), resource.kind.clone(), policy_version, error)
    }

    /// A failed (transient) record about `resource` of `resource_type`.
    fn failing_on(cloud: Cloud, resource: String, resource_type: String, policy_version: &str, error: String) -> Self {
        Record {
            record: "reconcile",
            cloud,
            resource,
            resource_type,
            status: Status::Failed,
            changes: Vec::new(),
            superseded: Vec::new(),
            policy_version: policy_version.to_string(),
            infra_id: None,
            reason: None,
            contested: Vec::new(),
            audited: Vec::new(),
            event_id: None,
            error: Some(error),
            failure: Some(Failure::Transient),
            latency_ms: 0,
            compliance_lag_ms: None,
        }
    }

    /// A resource of a cluster set that no enforced cluster owns: not written, not a failure.
    /// Owned by a cluster with no valid policy here, it names that cluster and `reason`.
    pub fn not_owned(
        cloud: Cloud,
        resource: &crate::resource::ResourceRef,
        infra_id: Option<String>,
        reason: Option<String>,
    ) -> Self {
        let mut record = Record::failed(cloud, resource, "", String::new());
        record.status = Status::NotOwned;
        (record.error, record.failure, record.infra_id, record.reason) = (None, None, infra_id, reason);
        record
    }

    /// A resource a sweep listed that was deleted before it was read or written (`why`: the
    /// service's not-found answer): counted, not a failure.
    pub fn gone(cloud: Cloud, resource: &crate::resource::ResourceRef, policy_version: &str, why: String) -> Self {
        let mut record = Record::failed(cloud, resource, policy_version, String::new());
        record.status = Status::Gone;
        (record.error, record.failure, record.reason) = (None, None, Some(why));
        record
    }

    /// A listing of a sweep that failed: the resources it would have named are not swept this
    /// time, so it is reported as a failure, retryable or not as `failure` says. `listed` is what
    /// was listed, `call` the call, `error` the answer and its fix.
    pub fn listing_failed(
        cloud: Cloud,
        listed: String,
        call: String,
        policy_version: &str,
        failure: Failure,
        error: String,
    ) -> Self {
        let record = Record::failing_on(cloud, listed, call, policy_version, String::new());
        Record { record: "listing", ..record.failing(failure, error) }
    }

    /// Whether this records a failed listing rather than a resource.
    pub fn is_listing(&self) -> bool {
        self.record == "listing"
    }

    /// Whether the resource was left alone because its cluster published no policy here (an
    /// ignored event, counted so).
    pub fn ignored(&self) -> bool {
        self.status == Status::NotOwned && self.reason.is_some()
    }

    /// The same record, with its compliance lag from `since_ms` to `now_ms` (ms since the epoch)
    /// when the resource is in line now (written, or found so). A clock behind the event's reads
    /// as zero.
    pub fn in_line_since(mut self, since_ms: Option<u64>, now_ms: u64) -> Self {
        if let (Some(since), Status::Applied | Status::Unchanged) = (since_ms, self.status) {
            self.compliance_lag_ms = Some(now_ms.saturating_sub(since));
        }
        self
    }

    /// The same record, for a resource no API can tag.
    pub fn unsupported(mut self, error: String) -> Self {
        self.status = Status::Unsupported;
        self.error = Some(error);
        self
    }

    /// The same record, failed as `failure` says.
    pub fn failing(mut self, failure: Failure, error: String) -> Self {
        self.status = Status::Failed;
        self.failure = Some(failure);
        self.error = Some(error);
        self
    }

    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A test fixture: a reconcile record of `resource_type` that ended as
    /// `status` (resource `r`, policy `v1`, nothing changed, no latency), for tests to adjust
    /// with struct-update syntax rather than spell every field.
    #[cfg(any(test, feature = "test-support"))]
    pub fn sample(cloud: Cloud, resource_type: &str, status: Status) -> Self {
        Record {
            record: "reconcile",
            cloud,
            resource: "r".into(),
            resource_type: resource_type.into(),
            status,
            changes: Vec::new(),
            superseded: Vec::new(),
            policy_version: "v1".into(),
            infra_id: None,
            reason: None,
            contested: Vec::new(),
            audited: Vec::new(),
            event_id: None,
            error: None,
            failure: None,
            latency_ms: 0,
            compliance_lag_ms: None,
        }
    }
}
