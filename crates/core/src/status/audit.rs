//! A sweep's audit report: how the cluster's owned resources stand, what an enforce would write,
//! and what would fail.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::in_part;
use crate::mode::ClusterMode;
use crate::report::{ChangeRecord, Metrics, Record, Status};

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
    pub(super) fn merged_into(mut self, older: Option<AuditSummary>, part: &str) -> AuditSummary {
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
