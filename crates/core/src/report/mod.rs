//! What tagwarden reports (docs/src/lookup/metrics.md): one outcome record per resource reconciled, and
//! the metrics of an invocation, named once here ([`EVENT_COUNTS`], [`TYPE_COUNTS`],
//! [`COMPLIANCE_COUNTS`] and the distributions) for each cloud's encoder: CloudWatch EMF lines
//! (`tagwarden_aws::emf`), Azure Monitor's custom-metrics documents (`tagwarden_azure::metrics`).
//! Pure: the binaries decide where they go.

mod metrics;
mod record;

pub use metrics::{
    by_cluster, Count, Metric, Metrics, StopCounts, TypeCounters, ALL_CLUSTERS, CALLS_PER_CORRECTION,
    COMPLIANCE_COUNTS, COMPLIANCE_LAG, EVENT_COUNTS, NAMESPACE, RECONCILE_LATENCY, TYPE_COUNTS,
};
pub use record::{ChangeRecord, Failure, Record, Status};

use serde::Serialize;

/// Now, in ms since the epoch: the end of a compliance lag (the callers read the clock, so the
/// rest of this module stays pure).
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
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

    /// What a function answers its trigger with (the Azure Functions host's `ReturnValue`, the body
    /// of Cloud Run's answer to a push): counts by status, the stop, the first failures and the
    /// listings that fell back.
    pub fn summary(&self) -> serde_json::Value {
        use serde_json::{json, Value};
        let by_status = self.records.iter().fold(serde_json::Map::new(), |mut m, r| {
            let n = m.get(r.status.as_str()).and_then(Value::as_u64).unwrap_or_default();
            m.insert(r.status.as_str().to_string(), json!(n + 1));
            m
        });
        let failures: Vec<Value> = self
            .records
            .iter()
            .filter(|r| r.error.is_some())
            .take(10)
            .map(|r| json!({"resource": r.resource, "error": r.error}))
            .collect();
        json!({
            "events": self.metrics.events_received,
            "ignored": self.metrics.events_ignored,
            "resources": self.records.len(),
            "failed": self.failed(),
            "by_status": by_status,
            "failures": failures,
            "error": self.error,
            "listing_fallbacks": self.fallbacks,
        })
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
    use crate::cloud::Cloud;
    use crate::policy::Superseded;

    fn record(rtype: &str, status: Status, changes: usize) -> Record {
        Record {
            changes: (0..changes).map(|i| ChangeRecord { key: format!("k{i}"), old: None, new: "v".into() }).collect(),
            latency_ms: 7,
            ..Record::sample(Cloud::Aws, rtype, status)
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
