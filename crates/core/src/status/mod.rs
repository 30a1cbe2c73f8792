//! The status report tagwarden writes beside the policy (`tagwarden-status.json`, or the
//! `<parameter>-status` SSM parameter), for both clouds: how the published policy stands, and the
//! resources whose last sweep could not be brought in line — the seeds' failure list in
//! `status.platformStatus.<cloud>.resourceTags`. The report itself is pure; `tagwarden_engine::status_store` reads
//! and writes it through a policy store's `PolicySource` (the store only moves its text).

use std::collections::BTreeMap;
use std::fmt::Display;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::cloud::Cloud;
use crate::contest::{Contest, Lift};
use crate::policy::cache::{PolicyState, Standing};
use crate::report::{Record, Status};

mod audit;
mod parts;

pub use audit::{AuditCounts, AuditSummary, AuditedChange, TypeCompliance, WouldFail, WouldWrite, AUDIT_WRITES_MAX};
use parts::{aws_part, is_bucket_arn};
pub use parts::{aws_region_part, in_part};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    pub generated_at: u64,
    pub cloud: Cloud,
    pub policy: PolicyStatus,
    pub failures: Vec<ResourceFailure>,
    /// Owned resources of a type no API tagwarden has can tag: not failures, but never dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<ResourceFailure>,
    /// The function that wrote it: `<package> <version> (commit <sha>)`, to name in a bug report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_by: Option<String>,
    /// A sweep run in parts (one per Azure subscription, `StatusReport::merged_into`): each part
    /// (its resource-ID prefix) and when its last sweep ended, in seconds since the epoch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, u64>,
    /// Keys tagwarden corrected again recently, or holds back because a controller the deployment
    /// yields to keeps changing them (`crate::contest`): a copy of the cluster's contest state for
    /// readers. The engine never reads it back: the state is kept apart, where only the function
    /// and the deployment's operators write, so an entry added here changes nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contests: Vec<Contest>,
    /// The operators' recent lifts of contests (who, when), copied from the contest state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifts: Vec<Lift>,
    /// What the sweep evaluated, wrote and would write (`crate::mode`): the audit report, in
    /// audit mode as in enforce. Absent from reports no sweep wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyStatus {
    /// Where the policy is read from, without any credential (a SAS is never shown).
    pub location: String,
    pub state: PolicyState,
    pub version: Option<String>,
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResourceFailure {
    /// The resource's name (the last segment of its ARN or ARM ID), as the seeds' field.
    pub name: String,
    /// The full ARN or ARM ID.
    pub resource: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub error: String,
    /// The region of a resource whose ARN names none though it has one (an S3 bucket): the
    /// region whose sweep found it, so that region's next sweep, not another's, replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

impl ResourceFailure {
    pub fn new(resource: &str, resource_type: &str, error: &str) -> Self {
        let trimmed = resource.trim_end_matches('/');
        let name = trimmed.rsplit(['/', ':']).next().filter(|n| !n.is_empty()).unwrap_or(trimmed);
        ResourceFailure {
            name: name.to_string(),
            resource: resource.to_string(),
            resource_type: resource_type.to_string(),
            error: error.to_string(),
            region: None,
        }
    }

    /// Whether this failure lies within `part` ([`in_part`]), by its region where its ARN has none.
    pub fn in_part(&self, part: &str) -> bool {
        match (&self.region, aws_part(part)) {
            (Some(region), Some((_, part_region, _))) => region == part_region,
            _ => in_part(&self.resource, part),
        }
    }

    /// The failure a record stands for, if it is one: a failed write, or a write that would have
    /// passed the resource's tag limit (nothing was written).
    pub fn of(record: &Record) -> Option<Self> {
        let error = match (record.status, &record.error) {
            (Status::Failed | Status::LimitExceeded, Some(e)) => e.clone(),
            (Status::LimitExceeded, None) => {
                "the write would exceed the resource's tag limit; nothing was written".to_string()
            }
            (Status::Failed, None) => "the write failed".to_string(),
            _ => return None,
        };
        Some(Self::new(&record.resource, &record.resource_type, &error))
    }
}

impl StatusReport {
    /// The state follows from what is known: no version, a version with errors (a newer one was
    /// rejected), or a version alone.
    pub fn new(
        cloud: Cloud,
        location: &impl Display,
        version: Option<String>,
        errors: Vec<String>,
        failures: Vec<ResourceFailure>,
    ) -> Self {
        let state = match (&version, errors.is_empty()) {
            (Some(_), true) => PolicyState::Ok,
            (Some(_), false) => PolicyState::RejectedKeepingLastGood,
            (None, _) => PolicyState::Unavailable,
        };
        StatusReport {
            generated_at: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default(),
            cloud,
            policy: PolicyStatus { location: location.to_string(), state, version, errors },
            failures,
            unsupported: Vec::new(),
            written_by: None,
            parts: BTreeMap::new(),
            contests: Vec::new(),
            lifts: Vec::new(),
            audit: None,
        }
    }

    /// This report of one part's sweep, laid over `older` (the report there now): within `part`
    /// this report's failures replace the older ones, outside it the older ones stay (another
    /// part's sweep found them), and each part keeps when it was last swept. So parts swept apart
    /// and in any order add up to the report of the whole, and none hides another's failures.
    pub fn merged_into(mut self, older: Option<StatusReport>, part: &str) -> StatusReport {
        let part = part.trim_end_matches('/');
        if let Some((_, region, _)) = aws_part(part) {
            for f in self.failures.iter_mut().chain(self.unsupported.iter_mut()) {
                if is_bucket_arn(&f.resource) {
                    f.region = Some(region.to_string());
                }
            }
        }
        if let Some(audit) = self.audit.take() {
            let older_audit = older.as_ref().and_then(|o| o.audit.clone());
            self.audit = Some(audit.merged_into(older_audit, part));
        }
        if let Some(older) = older {
            let outside = |f: &ResourceFailure| !f.in_part(part);
            self.failures.extend(older.failures.into_iter().filter(outside));
            self.unsupported.extend(older.unsupported.into_iter().filter(outside));
            self.parts = older.parts;
        }
        self.parts.retain(|p, _| !p.eq_ignore_ascii_case(part));
        self.parts.insert(part.to_string(), self.generated_at);
        self
    }

    /// A sweep's report: the version it applied, how the published policy stands (a store's
    /// `standing()`: never `ok` while a newer version is rejected or cannot be read), and the
    /// failures among its records.
    pub fn of_sweep(
        cloud: Cloud,
        location: &impl Display,
        version: &str,
        Standing { state, errors }: Standing,
        records: &[Record],
    ) -> Self {
        let failures = records.iter().filter_map(ResourceFailure::of).collect();
        let mut report = Self::new(cloud, location, Some(version.to_string()), errors, failures);
        report.policy.state = state;
        report.unsupported = records
            .iter()
            .filter(|r| r.status == Status::Unsupported)
            .map(|r| ResourceFailure::new(&r.resource, &r.resource_type, r.error.as_deref().unwrap_or("unsupported")))
            .collect();
        report
    }

    /// JSON no longer than `max` bytes (an SSM Standard parameter), dropping what is unsupported,
    /// then the corrections not yet contested, then failures, to fit: a contested key is dropped
    /// last, since without it the fight starts again.
    pub fn to_json_within(&self, max: usize) -> String {
        let mut report = self.clone();
        loop {
            let json = serde_json::to_string(&report).unwrap_or_default();
            if json.len() <= max {
                return json;
            }
            if let Some(audit) = report.audit.as_mut().filter(|a| !a.writes.is_empty()) {
                // The list of would-be writes goes first: its counts stay.
                audit.writes.truncate(audit.writes.len() / 2);
                audit.truncated = true;
            } else if !report.unsupported.is_empty() {
                report.unsupported.truncate(report.unsupported.len() / 2);
            } else if report.contests.iter().any(|c| !c.is_contested()) {
                // A count not yet at the contest is cheaper to lose than a failure to report.
                report.contests.retain(Contest::is_contested);
            } else if !report.failures.is_empty() {
                report.failures.truncate(report.failures.len() / 2);
            } else if !report.contests.is_empty() {
                report.contests.truncate(report.contests.len() / 2);
            } else {
                return json;
            }
        }
    }
}

#[cfg(test)]
mod tests;
