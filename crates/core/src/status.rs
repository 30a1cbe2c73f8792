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
use crate::mode::ClusterMode;
use crate::policy::cache::{PolicyState, Standing};
use crate::report::{ChangeRecord, Metrics, Record, Status};

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

/// The most would-be writes an [`AuditSummary`] lists; past it, `truncated` says so.
pub const AUDIT_WRITES_MAX: usize = 2_000;

/// A sweep's audit report for one cluster: how its owned resources stand, what an enforce would
/// write (each key before → after), what would fail and why, and what could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditSummary {
    /// How the cluster was run: `audit` (nothing written), `enforce`, or `mixed` (some keys audited).
    #[serde(default)]
    pub mode: Option<ClusterMode>,
    #[serde(flatten)]
    pub counts: AuditCounts,
    /// The would-be writes, at most [`AUDIT_WRITES_MAX`].
    #[serde(default)]
    pub writes: Vec<WouldWrite>,
    /// Whether `writes` was cut short (at [`AUDIT_WRITES_MAX`], or to fit the store).
    #[serde(default)]
    pub truncated: bool,
    /// In a sweep run in parts (an organization's accounts and regions, a management group's
    /// subscriptions), each part's counts; the counts above are their sum.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parts: BTreeMap<String, AuditCounts>,
}

/// The counts of an [`AuditSummary`]. `in_line + drifted` are the owned resources evaluated
/// (compliance = in line / (in line + drifted)); `unsupported` and `unreadable` are beside them.
/// Every field defaults when absent, so a reader (`tagwarden status`) takes a report written by an
/// older function too.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuditCounts {
    /// Owned resources evaluated: `in_line + drifted + would_fail.unsupported`.
    pub owned: u64,
    /// Owned resources in line after the sweep: found so, or written into line.
    pub in_line: u64,
    /// Owned resources still out of line after the sweep: would be written, or would fail.
    pub drifted: u64,
    /// Of `in_line`, those the sweep wrote.
    pub written: u64,
    /// Owned resources with an audited change: what an enforce would write.
    pub would_write: u64,
    pub would_fail: WouldFail,
    /// Listings that failed, and resources that could not be read: not evaluated.
    pub unreadable: u64,
    /// Per resource type, in line vs drifted.
    #[serde(default)]
    pub by_type: BTreeMap<String, TypeCompliance>,
}

/// Owned resources whose write fails or would fail, by reason. `tag_limit`, `unsupported` and
/// `contested` are known without writing; `permission` and `other` only from a write that was
/// sent (an audit sends none, so in audit they count only what an earlier write found).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WouldFail {
    pub tag_limit: u64,
    pub unsupported: u64,
    pub permission: u64,
    pub other: u64,
    pub contested: u64,
}

impl WouldFail {
    /// Every resource that would fail, whatever the reason.
    pub fn total(&self) -> u64 {
        self.tag_limit + self.unsupported + self.permission + self.other + self.contested
    }

    /// Each reason, as a person reads it, with its count.
    pub fn reasons(&self) -> [(&'static str, u64); 5] {
        [
            ("tag limit", self.tag_limit),
            ("unsupported", self.unsupported),
            ("permission", self.permission),
            ("contested", self.contested),
            ("other", self.other),
        ]
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TypeCompliance {
    pub in_line: u64,
    pub drifted: u64,
}

/// One would-be write: the resource and each audited key's value before → after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WouldWrite {
    pub resource: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    pub changes: Vec<AuditedChange>,
}

/// A key's value before (`None`: missing) and after the write an enforce would make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditedChange {
    pub key: String,
    pub old: Option<String>,
    pub new: String,
}

impl From<&ChangeRecord> for AuditedChange {
    fn from(c: &ChangeRecord) -> Self {
        AuditedChange { key: c.key.clone(), old: c.old.clone(), new: c.new.clone() }
    }
}

/// Whether a failed write was refused for a permission (by the words each cloud answers).
fn denied(error: &str) -> bool {
    const WORDS: &[&str] = &[
        "AccessDenied",
        "UnauthorizedOperation",
        "AuthorizationError",
        "AuthorizationFailed",
        "Forbidden",
        "not authorized",
        "LinkedAuthorizationFailed",
    ];
    WORDS.iter().any(|w| error.contains(w))
}

impl AuditCounts {
    /// The counts of a sweep's records (a cluster's own).
    pub fn of(records: &[Record]) -> AuditCounts {
        let mut counts = AuditCounts::default();
        let mut metrics = Metrics::default();
        for r in records {
            if r.is_listing() {
                counts.unreadable += 1;
                continue;
            }
            metrics.observe(r);
            let f = &mut counts.would_fail;
            match r.status {
                Status::Applied => counts.written += 1,
                Status::LimitExceeded => f.tag_limit += 1,
                Status::Unsupported => f.unsupported += 1,
                Status::Failed if r.changes.is_empty() && r.audited.is_empty() => {
                    // Not a write: the read failed (or two clusters claim it).
                    counts.unreadable += 1;
                }
                Status::Failed if r.error.as_deref().is_some_and(denied) => f.permission += 1,
                Status::Failed => f.other += 1,
                Status::Unchanged | Status::WouldApply | Status::Contested | Status::NotOwned | Status::Gone => {}
            }
            if !r.contested.is_empty() {
                f.contested += 1;
            }
            if !r.audited.is_empty() {
                counts.would_write += 1;
            }
        }
        for (t, c) in metrics.by_type {
            counts.in_line += c.in_line;
            counts.drifted += c.drifted;
            if c.in_line + c.drifted > 0 {
                counts.by_type.insert(t, TypeCompliance { in_line: c.in_line, drifted: c.drifted });
            }
        }
        counts.owned = counts.in_line + counts.drifted + counts.would_fail.unsupported;
        counts
    }

    fn add(&mut self, o: &AuditCounts) {
        self.owned += o.owned;
        self.in_line += o.in_line;
        self.drifted += o.drifted;
        self.written += o.written;
        self.would_write += o.would_write;
        self.unreadable += o.unreadable;
        let (f, g) = (&mut self.would_fail, &o.would_fail);
        (f.tag_limit, f.unsupported, f.permission, f.other, f.contested) = (
            f.tag_limit + g.tag_limit,
            f.unsupported + g.unsupported,
            f.permission + g.permission,
            f.other + g.other,
            f.contested + g.contested,
        );
        for (t, c) in &o.by_type {
            let e = self.by_type.entry(t.clone()).or_default();
            e.in_line += c.in_line;
            e.drifted += c.drifted;
        }
    }
}

impl AuditSummary {
    /// The audit report of a sweep of one cluster in `mode`, from its records.
    pub fn of(mode: ClusterMode, records: &[Record]) -> AuditSummary {
        let mut writes: Vec<WouldWrite> = records
            .iter()
            .filter(|r| !r.audited.is_empty() && !r.is_listing())
            .map(|r| WouldWrite {
                resource: r.resource.clone(),
                resource_type: r.resource_type.clone(),
                changes: r.audited.iter().map(AuditedChange::from).collect(),
            })
            .collect();
        writes.sort_by(|a, b| a.resource.cmp(&b.resource));
        let truncated = writes.len() > AUDIT_WRITES_MAX;
        writes.truncate(AUDIT_WRITES_MAX);
        AuditSummary { mode: Some(mode), counts: AuditCounts::of(records), writes, truncated, parts: BTreeMap::new() }
    }

    /// This summary of one part's sweep laid over `older` (the whole's): the part's counts and
    /// writes replace the older ones of that part, the other parts' stay.
    fn merged_into(mut self, older: Option<AuditSummary>, part: &str) -> AuditSummary {
        let mine = std::mem::take(&mut self.counts);
        if let Some(older) = older {
            self.parts = older.parts;
            self.truncated |= older.truncated && older.writes.iter().any(|w| !in_part(&w.resource, part));
            self.writes.extend(older.writes.into_iter().filter(|w| !in_part(&w.resource, part)));
        }
        self.parts.retain(|p, _| !p.eq_ignore_ascii_case(part));
        self.parts.insert(part.to_string(), mine);
        for counts in self.parts.values() {
            self.counts.add(counts);
        }
        self.writes.sort_by(|a, b| a.resource.cmp(&b.resource));
        if self.writes.len() > AUDIT_WRITES_MAX {
            self.writes.truncate(AUDIT_WRITES_MAX);
            self.truncated = true;
        }
        self
    }
}

/// The part of an AWS organization one sweep shard covers: a member account's region, and with
/// `global` the resources whose ARNs name no region (IAM, Route 53), which one region's shard
/// sweeps (IAM's and Route 53's events come from us-east-1 only). A listing that failed is named
/// `<what> in <account>/<region>` by the shard's adapter, so it too falls in its part. An S3
/// bucket's ARN names no region either, but the bucket has one, and each region's shard lists its
/// own (`ResourceFailure::region`).
pub fn aws_region_part(account: &str, region: &str, global: bool) -> String {
    format!("{AWS_PART}{account}/{region}{}", if global { GLOBAL } else { "" })
}

const AWS_PART: &str = "aws:";
const GLOBAL: &str = "+global";

/// An AWS part's account, region and whether it holds what has no region.
fn aws_part(part: &str) -> Option<(&str, &str, bool)> {
    let scope = part.strip_prefix(AWS_PART)?;
    let (scope, global) = scope.strip_suffix(GLOBAL).map_or((scope, false), |s| (s, true));
    let (account, region) = scope.split_once('/').unwrap_or((scope, ""));
    Some((account, region, global))
}

/// An S3 bucket's ARN (`arn:<partition>:s3:::<name>`): it names neither region nor account
/// (Service Authorization Reference, Amazon S3, resource type `bucket`), though the bucket lives
/// in one region. `GetResources` "Returns all the tagged or previously tagged resources that are
/// located in the specified AWS Region for the account" (Resource Groups Tagging API reference),
/// so a shard lists its own region's buckets only (that this holds for buckets is inferred: the
/// reference names no service).
fn is_bucket_arn(resource: &str) -> bool {
    let arn: Vec<&str> = resource.splitn(6, ':').collect();
    matches!(arn.as_slice(), ["arn", _, "s3", "", "", name] if !name.contains('/'))
}

/// Whether `resource` (an ARM ID) lies within `part` (an ID prefix such as `/subscriptions/<id>`):
/// ARM IDs compare without case. An AWS shard's part ([`aws_region_part`]) holds the ARNs of its
/// account and region, and its failed listings.
pub fn in_part(resource: &str, part: &str) -> bool {
    if let Some((account, region, global)) = aws_part(part) {
        let arn: Vec<&str> = resource.splitn(6, ':').collect();
        return match arn.as_slice() {
            ["arn", _, _, r, a, _] => (*r == region || (global && r.is_empty())) && (*a == account || a.is_empty()),
            _ => resource.ends_with(&format!(" in {account}/{region}")),
        };
    }
    let part = part.trim_end_matches('/');
    resource.len() >= part.len()
        && resource.is_char_boundary(part.len())
        && resource[..part.len()].eq_ignore_ascii_case(part)
        && matches!(resource.as_bytes().get(part.len()), None | Some(b'/'))
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
mod tests {
    use super::*;

    #[test]
    fn names_and_states() {
        let f = |r: &str| ResourceFailure::new(r, "t", "e").name;
        assert_eq!(f("arn:aws:ec2:us-east-1:111122223333:instance/i-0abc"), "i-0abc");
        assert_eq!(f("arn:aws:s3:::my-bucket"), "my-bucket");
        assert_eq!(f("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1/"), "d1");
        let r = |v: Option<&str>, e: &[&str]| {
            StatusReport::new(
                Cloud::Aws,
                &"ssm:/p",
                v.map(str::to_owned),
                e.iter().map(|s| s.to_string()).collect(),
                vec![],
            )
            .policy
            .state
        };
        assert_eq!(
            (r(Some("v"), &[]), r(Some("v"), &["bad"]), r(None, &[])),
            (PolicyState::Ok, PolicyState::RejectedKeepingLastGood, PolicyState::Unavailable)
        );
        let sweep = StatusReport::of_sweep(
            Cloud::Azure,
            &"x",
            "v",
            Standing { state: PolicyState::UnreadableKeepingLastGood, errors: vec!["gone".into()] },
            &[],
        );
        assert_eq!((sweep.policy.state, sweep.policy.errors.len()), (PolicyState::UnreadableKeepingLastGood, 1));
    }

    #[test]
    fn failed_and_over_limit_records_are_failures() {
        let r = crate::resource::ResourceRef::ec2("i-0abc", "us-east-1", "111122223333");
        let failed = Record::failed(Cloud::Aws, &r, "v", "Throttling".into());
        let mut over = failed.clone();
        (over.status, over.error) = (Status::LimitExceeded, None);
        let mut fine = failed.clone();
        (fine.status, fine.error) = (Status::Applied, None);
        let sweep = StatusReport::of_sweep(
            Cloud::Aws,
            &"s3://b/p",
            "v",
            Standing { state: PolicyState::Ok, errors: vec![] },
            &[failed, over, fine],
        );
        let errors: Vec<&str> = sweep.failures.iter().map(|f| f.error.as_str()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0] == "Throttling" && errors[1].contains("tag limit"), "{errors:?}");
        assert_eq!(sweep.failures[0].name, "i-0abc");
    }

    #[test]
    fn a_part_is_an_id_prefix_without_case() {
        let sub = "/subscriptions/AAAA";
        assert!(in_part("/subscriptions/aaaa/resourceGroups/rg/providers/Microsoft.Compute/disks/d", sub));
        assert!(in_part("/subscriptions/aaaa", "/subscriptions/AAAA/"));
        assert!(!in_part("/subscriptions/aaaab/resourceGroups/rg", sub), "a longer id is another subscription");
        assert!(!in_part("/subscriptions/bbbb/resourceGroups/rg", sub));
        assert!(!in_part("/subscriptions/aa", sub));

        let east = aws_region_part("111122223333", "us-east-1", true);
        let west = aws_region_part("111122223333", "us-west-2", false);
        let vpc = "arn:aws:ec2:us-east-1:111122223333:vpc/vpc-1";
        assert!(in_part(vpc, &east) && !in_part(vpc, &west));
        assert!(!in_part("arn:aws:ec2:us-east-1:444455556666:vpc/vpc-1", &east), "another account");
        for global in ["arn:aws:iam::111122223333:role/r", "arn:aws:route53:::hostedzone/Z1"] {
            assert!(in_part(global, &east) && !in_part(global, &west), "{global}");
        }
        let listing = "kubernetes.io/cluster/a-1 in 111122223333/us-west-2";
        assert!(in_part(listing, &west) && !in_part(listing, &east));
    }

    /// A bucket's ARN names no region, so the shard that listed it (its own region's)
    /// stamps it; the global region's shard neither erases nor keeps it for that region.
    #[test]
    fn a_bucket_failure_belongs_to_the_region_that_listed_it() {
        let bucket = |error: &str| ResourceFailure::new("arn:aws:s3:::prod-7xk2p-registry", "s3:bucket", error);
        let of =
            |failures: Vec<ResourceFailure>| StatusReport::new(Cloud::Aws, &"x", Some("v".into()), vec![], failures);
        let east = aws_region_part("111122223333", "us-east-1", true);
        let west = aws_region_part("111122223333", "eu-west-1", false);

        let first = of(vec![bucket("AccessDenied")]).merged_into(None, &west);
        assert_eq!(first.failures[0].region.as_deref(), Some("eu-west-1"));
        let json = serde_json::to_string(&first).expect("json");
        let first: StatusReport = serde_json::from_str(&json).expect("read back");
        assert!(first.failures[0].in_part(&west) && !first.failures[0].in_part(&east));

        let after_east = of(vec![]).merged_into(Some(first), &east);
        assert_eq!(after_east.failures.len(), 1, "the global region's sweep keeps eu-west-1's bucket failure");
        let after_west = of(vec![]).merged_into(Some(after_east), &west);
        assert!(after_west.failures.is_empty(), "eu-west-1's next sweep replaces it: {:?}", after_west.failures);

        // A report written before buckets had a region: the bucket falls in the global part.
        assert!(bucket("x").in_part(&east) && !bucket("x").in_part(&west));
        assert!(!is_bucket_arn("arn:aws:iam::111122223333:role/r") && !is_bucket_arn("arn:aws:s3:::b/key"));
        assert!(is_bucket_arn("arn:aws-cn:s3:::b"));
    }

    #[test]
    fn parts_swept_apart_add_up_and_replace_only_their_own_failures() {
        let fail = |id: &str| ResourceFailure::new(id, "microsoft.compute/disks", "refused");
        let of =
            |failures: Vec<ResourceFailure>| StatusReport::new(Cloud::Azure, &"x", Some("v".into()), vec![], failures);
        let a = "/subscriptions/a";
        let b = "/subscriptions/b";
        let first = of(vec![fail("/subscriptions/a/d/1")]).merged_into(None, a);
        let second = of(vec![fail("/subscriptions/b/d/2")]).merged_into(Some(first), b);
        let names = |r: &StatusReport| {
            let mut n: Vec<String> = r.failures.iter().map(|f| f.resource.clone()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&second), ["/subscriptions/a/d/1", "/subscriptions/b/d/2"]);
        assert_eq!(second.parts.keys().collect::<Vec<_>>(), [a, b]);
        // Part a again, in line now: its failure goes, b's stays; part keys compare without case.
        let again = of(vec![]).merged_into(Some(second), "/subscriptions/A/");
        assert_eq!(names(&again), ["/subscriptions/b/d/2"]);
        assert_eq!(again.parts.len(), 2, "{:?}", again.parts);
        let json = serde_json::to_string(&again).expect("json");
        let back: StatusReport = serde_json::from_str(&json).expect("read back");
        assert_eq!(back.parts, again.parts);
        let whole = of(vec![]);
        assert!(!serde_json::to_string(&whole).expect("json").contains("parts"), "a whole sweep names no part");
    }

    /// Within an SSM parameter, counts not yet at the contest go before the sweep's failures, and
    /// a contested key goes last.
    #[test]
    fn counts_give_way_to_failures_and_contests_stay() {
        let entry = |i: usize, contested: bool| Contest {
            resource: format!("arn:aws:ec2:us-east-1:111122223333:instance/i-{i:017}"),
            key: "team".into(),
            policy: "p.yaml@etag".into(),
            corrections: vec![1_700_000_000],
            writer: Some("arn:aws:iam::111122223333:user/bob".into()),
            contested_since: contested.then_some(1_700_000_100),
            hold_until: contested.then_some(1_700_003_700),
            holds: u32::from(contested),
        };
        let failures =
            vec![ResourceFailure::new("arn:aws:ec2:us-east-1:111122223333:instance/i-1", "ec2:instance", "x")];
        let mut r = StatusReport::new(Cloud::Aws, &"ssm:/p", Some("v".into()), vec![], failures);
        r.contests = (0..30).map(|i| entry(i, i == 0)).collect();
        let json = r.to_json_within(4096);
        let back: StatusReport = serde_json::from_str(&json).expect("a report");
        assert!(json.len() <= 4096);
        assert_eq!((back.failures.len(), back.contests.len()), (1, 1), "{json}");
        assert!(back.contests[0].is_contested());
    }

    /// The audit section from a sweep's records: each outcome in its count, the audited changes
    /// listed before → after, the list capped and said so, parts adding up.
    #[test]
    fn an_audit_summary_counts_every_outcome_and_lists_the_would_be_writes() {
        let r = |i: usize| crate::resource::ResourceRef::ec2(&format!("i-{i:04}"), "us-east-1", "111122223333");
        let change = |k: &str| ChangeRecord { key: k.into(), old: Some("old".into()), new: "new".into() };
        let with = |i: usize, status: Status| {
            let mut rec = Record::failed(Cloud::Aws, &r(i), "v", String::new());
            (rec.status, rec.error, rec.failure) = (status, None, None);
            rec
        };
        let mut records = vec![with(0, Status::Unchanged), with(1, Status::Applied)];
        let mut would = with(2, Status::WouldApply);
        would.audited = vec![change("team")];
        records.push(would);
        let mut mixed = with(3, Status::Applied);
        (mixed.changes, mixed.audited) = (vec![change("env")], vec![change("team")]);
        records.push(mixed);
        records.push(with(4, Status::LimitExceeded));
        records.push(with(5, Status::Unsupported));
        let mut contested = with(6, Status::Contested);
        contested.contested = vec!["team".into()];
        records.push(contested);
        let mut denied = with(7, Status::Failed);
        (denied.changes, denied.error) = (vec![change("team")], Some("AccessDenied: not allowed".into()));
        records.push(denied);
        let mut unreadable = with(8, Status::Failed);
        unreadable.error = Some("Throttling".into());
        records.push(unreadable);
        records.push(Record::listing_failed(
            Cloud::Aws,
            "iam".into(),
            "ListRoles".into(),
            "v",
            crate::report::Failure::Permanent,
            "denied".into(),
        ));
        records.push(with(9, Status::NotOwned));

        let a = AuditSummary::of(ClusterMode::Mixed, &records);
        let c = &a.counts;
        assert_eq!((c.in_line, c.drifted, c.owned, c.written, c.would_write), (2, 5, 8, 2, 2), "{c:?}");
        assert_eq!(
            (
                c.would_fail.tag_limit,
                c.would_fail.unsupported,
                c.would_fail.permission,
                c.would_fail.other,
                c.would_fail.contested
            ),
            (1, 1, 1, 0, 1)
        );
        assert_eq!(c.unreadable, 2, "a failed listing and a failed read");
        assert_eq!(c.by_type["ec2:instance"], TypeCompliance { in_line: 2, drifted: 5 });
        assert_eq!(a.writes.len(), 2);
        assert_eq!(
            a.writes[0].changes,
            [AuditedChange { key: "team".into(), old: Some("old".into()), new: "new".into() }]
        );
        let json = serde_json::to_value(&a).expect("json");
        assert_eq!(json["mode"], "mixed");
        assert_eq!(json["would_fail"]["tag_limit"], 1);
        assert_eq!(json["by_type"]["ec2:instance"]["drifted"], 5);
        assert_eq!(json["writes"][0]["type"], "ec2:instance");
        assert_eq!(json["truncated"], false);

        // Capped, and said so.
        let many: Vec<Record> = (0..AUDIT_WRITES_MAX + 5)
            .map(|i| {
                let mut rec = with(i, Status::WouldApply);
                rec.audited = vec![change("team")];
                rec
            })
            .collect();
        let big = AuditSummary::of(ClusterMode::Audit, &many);
        assert_eq!(
            (big.writes.len(), big.truncated, big.counts.would_write),
            (AUDIT_WRITES_MAX, true, AUDIT_WRITES_MAX as u64 + 5)
        );

        // Parts add up: each part's counts replace its own.
        let east = aws_region_part("111122223333", "us-east-1", true);
        let west = aws_region_part("111122223333", "us-west-2", false);
        let report = |audit: AuditSummary| StatusReport {
            audit: Some(audit),
            ..StatusReport::new(Cloud::Aws, &"x", Some("v".into()), vec![], vec![])
        };
        let first = report(AuditSummary::of(ClusterMode::Audit, &records)).merged_into(None, &east);
        let second = report(AuditSummary::of(ClusterMode::Audit, &records[..1])).merged_into(Some(first), &west);
        let audit = second.audit.as_ref().expect("audit");
        assert_eq!((audit.counts.in_line, audit.parts.len()), (3, 2));
        let again = report(AuditSummary::of(ClusterMode::Audit, &records[..1])).merged_into(Some(second), &east);
        let audit = again.audit.expect("audit");
        assert_eq!((audit.counts.in_line, audit.counts.would_write, audit.writes.len()), (2, 0, 0));

        // Within an SSM parameter, the list goes first and says so.
        let fit = report(big).to_json_within(4096);
        let back: StatusReport = serde_json::from_str(&fit).expect("report");
        let audit = back.audit.expect("audit");
        assert!(fit.len() <= 4096 && audit.truncated && audit.counts.would_write == AUDIT_WRITES_MAX as u64 + 5);
    }

    #[test]
    fn fits_an_ssm_parameter() {
        let failures =
            (0..500).map(|i| ResourceFailure::new(&format!("i-{i:017}"), "ec2:instance", "AccessDenied")).collect();
        let r = StatusReport::new(Cloud::Aws, &"ssm:/p", Some("v".into()), vec![], failures);
        assert!(r.to_json_within(4096).len() <= 4096);
    }
}
