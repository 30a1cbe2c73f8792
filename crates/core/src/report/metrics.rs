//! The metrics of an invocation, named once ([`EVENT_COUNTS`], [`TYPE_COUNTS`],
//! [`COMPLIANCE_COUNTS`] and the distributions) for each cloud's encoder, and the counters a
//! run's records add up to.

use std::collections::BTreeMap;

use super::record::{Record, Status};
use crate::reason::StopKind;

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

/// The invocation's own counts (dimensions `Cloud`, `InfraID`), emitted when not zero; the last
/// five are why it stopped short ([`Metrics::stopped`], one per [`StopKind`]).
pub const EVENT_COUNTS: [Count<Metrics>; 11] = [
    (metric("EventsReceived", "Count", "events that reached the function"), |m| m.events_received),
    (metric("EventsIgnored", "Count", "events of no listed cluster, or not a write"), |m| m.events_ignored),
    (metric("PolicyRejected", "Count", "policy versions rejected (the last good one stays)"), |m| m.policy_rejected),
    (metric("ListingFailures", "Count", "a sweep's listings that failed (the rest was swept)"), |m| m.listing_failures),
    (metric("ListingFallbacks", "Count", "scopes listed a dearer way because the cheaper one was refused"), |m| {
        m.listing_fallbacks
    }),
    (metric("SweepsCompleted", "Count", "sweeps that ran to their end"), |m| m.sweeps_completed),
    (metric("WorkDeferred", "Count", "work handed back before the invocation's deadline (retried)"), |m| {
        m.stops.deferred
    }),
    (metric("NoValidPolicy", "Count", "invocations that wrote nothing: no valid policy (fail closed)"), |m| {
        m.stops.no_policy
    }),
    (metric("SweepsRefused", "Count", "sweeps with nowhere to list, or a part of it refused"), |m| {
        m.stops.cannot_sweep
    }),
    (
        metric("MembersUnavailable", "Count", "member accounts not had: not listed, unreadable, their role refused"),
        |m| m.stops.member,
    ),
    (metric("InputsUnreadable", "Count", "payloads, events or deliveries tagwarden does not read"), |m| {
        m.stops.unreadable
    }),
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

/// Why an invocation stopped short, counted by kind of [`StopKind`] (a `Several` counts each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopCounts {
    pub deferred: u64,
    pub no_policy: u64,
    pub cannot_sweep: u64,
    pub member: u64,
    pub unreadable: u64,
}

impl StopCounts {
    fn add(&mut self, other: &StopCounts) {
        self.deferred += other.deferred;
        self.no_policy += other.no_policy;
        self.cannot_sweep += other.cannot_sweep;
        self.member += other.member;
        self.unreadable += other.unreadable;
    }
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
    /// Why the invocation stopped short, if it did ([`Metrics::stopped`]).
    pub stops: StopCounts,
}

impl Metrics {
    /// Count why the invocation stopped short: each reason once, by kind. The functions call it
    /// once per invocation, with the outcome's reason, just before the metrics are sent.
    pub fn stopped(&mut self, why: &StopKind) {
        for kind in why.each() {
            let n = match kind {
                StopKind::Deferred(_) => &mut self.stops.deferred,
                StopKind::NoPolicy(_) => &mut self.stops.no_policy,
                StopKind::CannotSweep(_) => &mut self.stops.cannot_sweep,
                StopKind::Member(_) => &mut self.stops.member,
                StopKind::Unreadable(_) => &mut self.stops.unreadable,
                StopKind::Several(_) => continue, // unfolded by `each`
            };
            *n += 1;
        }
    }

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
        self.stops.add(&other.stops);
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
    own.stops = metrics.stops.clone();
    (own.api_calls, own.corrected) = (metrics.api_calls, metrics.corrected);
    // A resource several events of a batch name has a record in each, counted once.
    let mut seen = std::collections::HashSet::new();
    for r in records.iter().filter(|r| seen.insert((&r.resource, r.status, r.record))) {
        out.entry(r.infra_id.clone().unwrap_or_else(|| deployment.to_string())).or_default().observe(r);
    }
    out.retain(|_, m| !m.is_empty());
    out
}
