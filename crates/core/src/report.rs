//! What tagwarden reports (docs/src/lookup/metrics.md): one outcome record per resource reconciled, and
//! the metrics of an invocation, named once here ([`EVENT_COUNTS`], [`TYPE_COUNTS`],
//! [`COMPLIANCE_COUNTS`] and the distributions) for each cloud's encoder: CloudWatch EMF lines
//! (`tagwarden_aws::emf`), Azure Monitor's custom-metrics documents (`tagwarden_azure::metrics`).
//! Pure: the binaries decide where they go.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cloud::Cloud;
use crate::plan::{self, Plan};
use crate::policy::{Policy, Superseded};

pub const NAMESPACE: &str = "TagWarden";

/// One metric as both clouds emit it: its name, its unit, and what it measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    /// CloudWatch's unit (`Count`, `Milliseconds`, `None`); Azure Monitor's documents carry none.
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// A counted metric, and how to read its count from `T`.
pub type Count<T> = (Metric, fn(&T) -> u64);

const fn metric(name: &'static str, unit: &'static str, meaning: &'static str) -> Metric {
    Metric { name, unit, meaning }
}

/// The invocation's own counts (dimensions `Cloud`, `InfraID`), emitted when not zero.
pub const EVENT_COUNTS: [Count<Metrics>; 6] = [
    (metric("EventsReceived", "Count", "events that reached the function"), |m| m.events_received),
    (metric("EventsIgnored", "Count", "events of no listed cluster, or not a write"), |m| m.events_ignored),
    (metric("PolicyRejected", "Count", "policy versions rejected (the last good one stays)"), |m| m.policy_rejected),
    (metric("ListingFailures", "Count", "a sweep's listings that failed (the rest was swept)"), |m| m.listing_failures),
    (metric("ListingFallbacks", "Count", "scopes listed a dearer way because the cheaper one was refused"), |m| {
        m.listing_fallbacks
    }),
    (metric("SweepsCompleted", "Count", "sweeps that ran to their end"), |m| m.sweeps_completed),
];

/// Per resource type (dimensions `Cloud`, `ResourceType`, `InfraID`), then [`COMPLIANCE_COUNTS`].
pub const TYPE_COUNTS: [Count<TypeCounters>; 8] = [
    (metric("ResourcesEvaluated", "Count", "resources read and planned"), |c| c.resources_evaluated),
    (metric("DriftDetected", "Count", "resources out of line when read"), |c| c.drift_detected),
    (metric("TagsWritten", "Count", "tags written"), |c| c.tags_written),
    (metric("WriteFailures", "Count", "failed writes (in audit: writes that would fail)"), |c| c.write_failures),
    (metric("TagLimitExceeded", "Count", "resources the write would push past their tag limit"), |c| {
        c.tag_limit_exceeded
    }),
    (metric("Conflicts", "Count", "resources owned by two listed clusters, or changed by another writer"), |c| {
        c.conflicts
    }),
    (metric("Unsupported", "Count", "owned resources of a type no API takes"), |c| c.unsupported),
    (metric("Contested", "Count", "resources with a key held back because it is contested"), |c| c.contested),
];

/// The compliance counts: per resource type, and summed over types for the cluster (dimensions
/// `Cloud`, `InfraID`) whenever an owned resource was evaluated ([`Metrics::compliance`]), all
/// three together so compliance = in line / (in line + drifted) has its terms.
pub const COMPLIANCE_COUNTS: [Count<TypeCounters>; 3] = [
    (metric("WouldWrite", "Count", "resources with an audited change: what an enforce would write"), |c| c.would_write),
    (metric("ResourcesInLine", "Count", "owned resources in line after the run"), |c| c.in_line),
    (metric("ResourcesDrifted", "Count", "owned resources out of line after the run"), |c| c.drifted),
];

/// Every record's compliance lag (dimensions `Cloud`, `InfraID`).
pub const COMPLIANCE_LAG: Metric = metric(
    "ComplianceLag",
    "Milliseconds",
    "milliseconds from the event's own time to the correcting write (or the decision that none was needed)",
);

/// Milliseconds per reconcile (dimensions `Cloud`, `ResourceType`, `InfraID`).
pub const RECONCILE_LATENCY: Metric = metric("ReconcileLatency", "Milliseconds", "milliseconds per reconcile");

/// CloudWatch only: an invocation's API calls per resource written into line (`Cloud`, `InfraID`).
pub const CALLS_PER_CORRECTION: Metric =
    metric("CallsPerCorrection", "None", "an invocation's API calls per resource written into line");

/// Now, in ms since the epoch: the end of a compliance lag (the callers read the clock, so the
/// rest of this module stays pure).
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

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
}

/// Per-resource-type counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeCounters {
    pub resources_evaluated: u64,
    pub drift_detected: u64,
    pub tags_written: u64,
    pub write_failures: u64,
    pub tag_limit_exceeded: u64,
    pub conflicts: u64,
    pub unsupported: u64,
    /// Resources with a key held back because it is contested.
    pub contested: u64,
    /// Resources with an audited change: what an enforce would write (`tagwarden_core::mode`).
    pub would_write: u64,
    /// Owned resources in line after the run: found in line, or written into line.
    pub in_line: u64,
    /// Owned resources still out of line after the run: audited, over the tag limit, contested,
    /// or whose write failed. In line / (in line + drifted) is the compliance.
    pub drifted: u64,
    pub latency_ms: Vec<u64>,
}

/// Metrics gathered over one invocation, emitted once at its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    pub events_received: u64,
    pub events_ignored: u64,
    pub policy_rejected: u64,
    /// Sweep listings that failed (their resources were not swept this time).
    pub listing_failures: u64,
    /// Sweep listings that fell back to a dearer way because the cheaper one was refused (Azure:
    /// Resource Graph refused, ARM's listing used): everything was listed, at a higher cost.
    pub listing_fallbacks: u64,
    /// Sweeps (scheduled or policy change) that ran to their end: a deployment-level heartbeat,
    /// whose absence `infra/aws`'s `no-sweep` alarm notices.
    pub sweeps_completed: u64,
    /// Resources written into line.
    pub corrected: u64,
    /// Cloud API calls the invocation made (set by the function that counts them): over
    /// `corrected`, what a correction costs the account's request budget.
    pub api_calls: u64,
    /// Every record's compliance lag (ms): event-level, so an alarm can take its p99 per cluster.
    pub compliance_lag_ms: Vec<u64>,
    pub by_type: BTreeMap<String, TypeCounters>,
}

impl Metrics {
    pub fn observe(&mut self, record: &Record) {
        if record.is_listing() {
            self.listing_failures += 1;
            return;
        }
        self.compliance_lag_ms.extend(record.compliance_lag_ms);
        let c = self.by_type.entry(record.resource_type.clone()).or_default();
        c.resources_evaluated += 1;
        // A superseded value is a conflict only where it decides a write: counting it on every
        // unchanged re-read would grow the metric with each sweep.
        if matches!(record.status, Status::Applied | Status::WouldApply) {
            let decisive = record.superseded.iter().filter(|s| record.changes.iter().any(|c| c.key == s.key));
            c.conflicts += decisive.count() as u64;
        }
        match record.status {
            Status::Applied => {
                self.corrected += 1;
                c.drift_detected += 1;
                c.tags_written += record.changes.len() as u64;
            }
            Status::WouldApply => c.drift_detected += 1,
            Status::LimitExceeded => {
                c.drift_detected += 1;
                c.tag_limit_exceeded += 1;
            }
            Status::Failed => c.write_failures += 1,
            Status::Unsupported => c.unsupported += 1,
            Status::Unchanged | Status::NotOwned | Status::Gone | Status::Contested => {}
        }
        if !record.audited.is_empty() {
            c.would_write += 1;
        }
        match record.status {
            Status::Unchanged => c.in_line += 1,
            Status::Applied if record.audited.is_empty() && record.contested.is_empty() => c.in_line += 1,
            Status::Applied | Status::WouldApply | Status::LimitExceeded | Status::Contested => c.drifted += 1,
            // A write that failed: the drift it carried is still there.
            Status::Failed if !record.changes.is_empty() || !record.audited.is_empty() => c.drifted += 1,
            Status::Failed | Status::NotOwned | Status::Gone | Status::Unsupported => {}
        }
        if !record.contested.is_empty() {
            c.contested += 1;
        }
        if record.status != Status::Failed {
            c.latency_ms.push(record.latency_ms);
        }
    }

    /// Add another invocation's (or event's) counts to these.
    pub fn merge(&mut self, other: Metrics) {
        self.events_received += other.events_received;
        self.events_ignored += other.events_ignored;
        self.policy_rejected += other.policy_rejected;
        self.listing_failures += other.listing_failures;
        self.listing_fallbacks += other.listing_fallbacks;
        self.sweeps_completed += other.sweeps_completed;
        self.corrected += other.corrected;
        self.api_calls += other.api_calls;
        self.compliance_lag_ms.extend(other.compliance_lag_ms);
        for (t, c) in other.by_type {
            let e = self.by_type.entry(t).or_default();
            e.resources_evaluated += c.resources_evaluated;
            e.drift_detected += c.drift_detected;
            e.tags_written += c.tags_written;
            e.write_failures += c.write_failures;
            e.tag_limit_exceeded += c.tag_limit_exceeded;
            e.conflicts += c.conflicts;
            e.unsupported += c.unsupported;
            e.contested += c.contested;
            e.would_write += c.would_write;
            e.in_line += c.in_line;
            e.drifted += c.drifted;
            e.latency_ms.extend(c.latency_ms);
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Metrics::default()
    }

    /// The cluster's compliance over every resource type: (would write, in line, drifted), as
    /// [`TypeCounters`] counts them; `None` when no owned resource was evaluated (nothing to say).
    pub fn compliance(&self) -> Option<(u64, u64, u64)> {
        let sum = |f: fn(&TypeCounters) -> u64| self.by_type.values().map(f).sum::<u64>();
        let (would, in_line, drifted) = (sum(|c| c.would_write), sum(|c| c.in_line), sum(|c| c.drifted));
        (in_line + drifted > 0).then_some((would, in_line, drifted))
    }
}

/// The label of a cluster set's deployment-wide metrics (events received, policies rejected):
/// what no single cluster owns.
pub const ALL_CLUSTERS: &str = "all";

/// An invocation's metrics by the cluster they concern, for the `InfraID` dimension: in a cluster
/// set, each record's resource metrics under its cluster, and the invocation's own counters
/// (events, policy rejections) under `deployment`. Without a set, all of it under `deployment`.
pub fn by_cluster(metrics: &Metrics, records: &[Record], deployment: &str) -> BTreeMap<String, Metrics> {
    if records.iter().all(|r| r.infra_id.is_none()) {
        return BTreeMap::from([(deployment.to_string(), metrics.clone())]);
    }
    let mut out: BTreeMap<String, Metrics> = BTreeMap::new();
    let own = out.entry(deployment.to_string()).or_default();
    own.events_received = metrics.events_received;
    own.events_ignored = metrics.events_ignored;
    own.policy_rejected = metrics.policy_rejected;
    own.sweeps_completed = metrics.sweeps_completed;
    own.listing_fallbacks = metrics.listing_fallbacks;
    (own.api_calls, own.corrected) = (metrics.api_calls, metrics.corrected);
    // A resource several events of a batch name has a record in each, counted once.
    let mut seen = std::collections::HashSet::new();
    for r in records.iter().filter(|r| seen.insert((&r.resource, r.status, r.record))) {
        out.entry(r.infra_id.clone().unwrap_or_else(|| deployment.to_string())).or_default().observe(r);
    }
    out.retain(|_, m| !m.is_empty());
    out
}

/// A newer policy version the function refused, while `in_force` (if any) stays enforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedPolicy {
    /// The cluster of a set (`None`: the single policy).
    #[serde(rename = "infraID")]
    pub cluster: Option<String>,
    pub in_force: Option<String>,
    pub errors: Vec<String>,
}

/// What one event or sweep did, on either cloud.
#[derive(Debug, Default)]
pub struct Outcome {
    pub records: Vec<Record>,
    pub metrics: Metrics,
    pub infra_id: Option<String>,
    /// Why nothing could be reconciled, or the outcome stopped short (no valid policy, deferred,
    /// nowhere to list, a member refused …): its text is what reports and logs carry.
    pub error: Option<crate::reason::Stop>,
    /// The newer policy versions refused on the way (each also counted in the metrics).
    pub rejected: Vec<RejectedPolicy>,
    /// Why each sweep listing that fell back to a dearer way did (counted in the metrics too).
    pub fallbacks: Vec<String>,
}

impl Outcome {
    pub fn failed(&self) -> usize {
        self.records.iter().filter(|r| r.status == Status::Failed).count()
    }

    /// Whether the caller must report failure so the event is retried (and finally dead-lettered):
    /// only for what a retry can fix. Permanent failures are in the records and the metrics.
    pub fn must_retry(&self) -> bool {
        self.error.is_some()
            || self.records.iter().any(|r| r.status == Status::Failed && r.failure != Some(Failure::Permanent))
    }

    pub fn push(&mut self, record: Record) {
        self.metrics.observe(&record);
        self.records.push(record);
    }

    /// Fold another outcome (the next event of a batch) into this one.
    pub fn absorb(&mut self, other: Outcome) {
        self.metrics.merge(other.metrics);
        self.records.extend(other.records);
        self.fallbacks.extend(other.fallbacks);
        for r in other.rejected {
            if !self.rejected.contains(&r) {
                self.rejected.push(r);
            }
        }
        self.infra_id = self.infra_id.take().or(other.infra_id);
        self.error = match (self.error.take(), other.error) {
            (Some(a), Some(b)) => Some(a.and(b)),
            (a, b) => a.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rtype: &str, status: Status, changes: usize) -> Record {
        Record {
            record: "reconcile",
            cloud: Cloud::Aws,
            resource: "r".into(),
            resource_type: rtype.into(),
            status,
            changes: (0..changes).map(|i| ChangeRecord { key: format!("k{i}"), old: None, new: "v".into() }).collect(),
            superseded: Vec::new(),
            policy_version: "v1".into(),
            infra_id: None,
            reason: None,
            contested: Vec::new(),
            audited: Vec::new(),
            event_id: None,
            error: None,
            failure: None,
            latency_ms: 7,
            compliance_lag_ms: None,
        }
    }

    #[test]
    fn compliance_lag_only_for_resources_in_line() {
        let since = Some(1_700_000_000_000);
        let now = 1_700_000_004_250;
        let lag = |status| record("ec2:instance", status, 0).in_line_since(since, now).compliance_lag_ms;
        assert_eq!(lag(Status::Applied), Some(4_250));
        assert_eq!(lag(Status::Unchanged), Some(4_250));
        for still_wrong in [Status::Failed, Status::WouldApply, Status::LimitExceeded, Status::NotOwned] {
            assert_eq!(lag(still_wrong), None, "{still_wrong:?}");
        }
        assert_eq!(record("r", Status::Applied, 1).in_line_since(None, now).compliance_lag_ms, None);
        // An event stamped after the clock's now (skew) is no negative lag.
        assert_eq!(record("r", Status::Applied, 1).in_line_since(Some(now + 5), now).compliance_lag_ms, Some(0));

        let mut m = Metrics::default();
        m.observe(&record("ec2:instance", Status::Applied, 1).in_line_since(since, now));
        m.observe(&record("s3:bucket", Status::Unchanged, 0).in_line_since(Some(now - 10), now));
        m.observe(&record("s3:bucket", Status::Failed, 0).in_line_since(since, now));
        // Every record's lag (a failed write has none), and the cluster's compliance terms.
        assert_eq!(m.compliance_lag_ms, [4_250, 10]);
        assert_eq!(m.compliance(), Some((0, 2, 0)));
    }

    #[test]
    fn a_sets_metrics_go_to_each_resources_cluster() {
        let mut out = Outcome::default();
        out.metrics.events_received = 2;
        for (id, status) in [("a-1", Status::Applied), ("b-2", Status::Unchanged), ("b-2", Status::Failed)] {
            out.push(Record { infra_id: Some(id.into()), ..record("ec2:instance", status, 1) });
        }
        let by = by_cluster(&out.metrics, &out.records, ALL_CLUSTERS);
        assert_eq!(by.keys().collect::<Vec<_>>(), ["a-1", "all", "b-2"]);
        assert_eq!(by["a-1"].by_type["ec2:instance"].drift_detected, 1);
        assert_eq!(by["b-2"].by_type["ec2:instance"].resources_evaluated, 2);
        assert_eq!(by["b-2"].by_type["ec2:instance"].write_failures, 1);
        assert_eq!((by["all"].events_received, by["all"].by_type.len()), (2, 0));
        // A single policy: everything under its cluster, as before.
        let mut single = Outcome::default();
        single.push(record("ec2:instance", Status::Applied, 1));
        assert_eq!(by_cluster(&single.metrics, &single.records, "c-1").keys().collect::<Vec<_>>(), ["c-1"]);
    }

    #[test]
    fn conflicts_count_only_where_they_decide_a_write() {
        let superseded = Superseded { key: "k0".into(), value: "old".into(), from: "status".into(), by: "spec".into() };
        let mut m = Metrics::default();
        let mut unchanged = record("ec2:instance", Status::Unchanged, 0);
        unchanged.superseded.push(superseded.clone());
        for _ in 0..3 {
            m.observe(&unchanged);
        }
        assert_eq!(m.by_type["ec2:instance"].conflicts, 0, "a sweep of unchanged resources adds no conflicts");
        let mut applied = record("ec2:instance", Status::Applied, 1);
        applied.superseded.push(superseded);
        m.observe(&applied);
        assert_eq!(m.by_type["ec2:instance"].conflicts, 1);
    }

    #[test]
    fn permanent_failures_are_not_retried() {
        let mut out = Outcome::default();
        out.push(record("ec2:instance", Status::Applied, 1));
        out.push(record("ec2:instance", Status::Failed, 0).failing(Failure::Permanent, "AccessDenied".into()));
        assert!(!out.must_retry());
        out.push(record("ec2:instance", Status::Failed, 0).failing(Failure::Transient, "Throttling".into()));
        assert!(out.must_retry());
    }
}
