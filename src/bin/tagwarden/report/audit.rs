//! The figures of the audit report: one [`ClusterAudit`] per cluster (from a status report, or
//! from a sweep's records), their [`Totals`], and an Organization's [`AccountRow`]s. Every
//! export is made from these, so the table, the CSV, the JSON and the page agree.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use tagwarden::cloud::Cloud;
use tagwarden::mode::ClusterMode;
use tagwarden::report::{Record, Status};
use tagwarden::status::{AuditSummary, AuditedChange, TypeCompliance, WouldWrite};
use tagwarden::writer::Writer;

/// A resource that would fail (or could not be read), and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failing {
    pub resource: String,
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The key, for a contested one.
    pub key: Option<String>,
    /// `tag-limit`, `unsupported`, `permission`, `contested`, `unreadable` or `other`.
    pub reason: &'static str,
    pub error: String,
    /// For a contested key: who else writes it, and the documented way to end the fight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<Writer>,
}

/// One cluster's audit report.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterAudit {
    /// The infraID (`-` where the report names none).
    pub cluster: String,
    /// How the cluster was run, as shown: the report's mode (`audit`, `enforce`, `mixed`), or
    /// `dry-run` for a person's preview.
    pub mode: Option<String>,
    pub audit: AuditSummary,
    pub failing: Vec<Failing>,
    /// Whether the report carried an `audit` section (else only its failures are known).
    pub has_audit: bool,
}

/// Whether an error says a permission was refused, in the words each cloud answers.
fn denied(error: &str) -> bool {
    [
        "AccessDenied",
        "UnauthorizedOperation",
        "AuthorizationError",
        "AuthorizationFailed",
        "Forbidden",
        "not authorized",
    ]
    .iter()
    .any(|w| error.contains(w))
}

fn reason_of(error: &str) -> &'static str {
    if error.contains("tag limit") {
        "tag-limit"
    } else if denied(error) {
        "permission"
    } else {
        "other"
    }
}

/// The account (AWS) or subscription (Azure) a resource's ID names, if any.
pub fn account_of(resource: &str) -> Option<String> {
    if let Some(rest) = resource.strip_prefix("arn:") {
        let account = rest.split(':').nth(3)?;
        return (!account.is_empty()).then(|| account.to_string());
    }
    let lower = resource.to_ascii_lowercase();
    let at = lower.find("/subscriptions/")? + "/subscriptions/".len();
    resource[at..].split('/').next().filter(|s| !s.is_empty()).map(str::to_string)
}

/// The account a part of a sweep names (`aws:<account>/<region>[+global]`, `/subscriptions/<id>`).
pub(super) fn account_of_part(part: &str) -> String {
    if let Some(rest) = part.strip_prefix("aws:") {
        return rest.split('/').next().unwrap_or(rest).to_string();
    }
    account_of(part).unwrap_or_else(|| part.to_string())
}

impl ClusterAudit {
    /// One cluster's report from the status report's JSON (as the store holds it).
    pub fn of_report(cluster: Option<&str>, report: &Value) -> Self {
        let section = report.get("audit").filter(|a| !a.is_null());
        let audit: AuditSummary = section.and_then(|a| serde_json::from_value(a.clone()).ok()).unwrap_or_default();
        let cloud: Cloud =
            report.get("cloud").and_then(|c| serde_json::from_value(c.clone()).ok()).unwrap_or(Cloud::Aws);
        let mut failing = Vec::new();
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        for f in report.get("failures").and_then(Value::as_array).into_iter().flatten() {
            let error = text(f, "error");
            failing.push(Failing {
                resource: text(f, "resource"),
                resource_type: text(f, "type"),
                key: None,
                reason: reason_of(&error),
                error,
                writer: None,
            });
        }
        for f in report.get("unsupported").and_then(Value::as_array).into_iter().flatten() {
            failing.push(Failing {
                resource: text(f, "resource"),
                resource_type: text(f, "type"),
                key: None,
                reason: "unsupported",
                error: text(f, "error"),
                writer: None,
            });
        }
        for c in report.get("contests").and_then(Value::as_array).into_iter().flatten() {
            if c.get("contested_since").is_some_and(|s| !s.is_null()) {
                // The writer as the contest state recorded it (the event's principal).
                let principal = text(c, "writer");
                let principal = if principal.is_empty() { tagwarden::contest::UNKNOWN_WRITER } else { &principal };
                let key = text(c, "key");
                failing.push(Failing {
                    resource: text(c, "resource"),
                    resource_type: String::new(),
                    error: format!("changed again and again by {principal}"),
                    writer: Some(Writer::of(principal, &key, cloud)),
                    key: Some(key),
                    reason: "contested",
                });
            }
        }
        let mode = audit.mode.map(|m| m.as_str().to_string());
        ClusterAudit { cluster: cluster.unwrap_or("-").to_string(), mode, audit, failing, has_audit: section.is_some() }
    }

    /// One cluster's report from a sweep's records (a person's `sweep --dry-run`): what the
    /// function's report would hold, counted the same way; `parts` by account. `mode` is shown
    /// (`dry-run`, `enforce`); a dry run writes nothing, so the report's own mode is `audit`.
    pub fn of_records(cluster: &str, records: &[&Record], mode: &str) -> Self {
        let own = if mode == "enforce" { ClusterMode::Enforce } else { ClusterMode::Audit };
        let mut audit = AuditSummary { mode: Some(own), ..AuditSummary::default() };
        let mut failing = Vec::new();
        for r in records {
            let account = account_of(&r.resource).unwrap_or_else(|| "-".to_string());
            let part = audit.parts.entry(account).or_default();
            let mut counts = [&mut audit.counts, part];
            if r.is_listing() {
                counts.iter_mut().for_each(|c| c.unreadable += 1);
                failing.push(Failing {
                    resource: r.resource.clone(),
                    resource_type: r.resource_type.clone(),
                    key: None,
                    reason: "unreadable",
                    error: r.error.clone().unwrap_or_default(),
                    writer: None,
                });
                continue;
            }
            // In line, drifted, or neither (not owned, gone, unsupported, unreadable).
            let (in_line, drifted) = match r.status {
                Status::Unchanged | Status::Applied => (true, false),
                Status::WouldApply | Status::LimitExceeded | Status::Contested => (false, true),
                Status::Failed if !r.changes.is_empty() || !r.audited.is_empty() => (false, true),
                _ => (false, false),
            };
            let reason = match r.status {
                Status::LimitExceeded => Some("tag-limit"),
                Status::Unsupported => Some("unsupported"),
                Status::Contested => Some("contested"),
                Status::Failed if r.changes.is_empty() && r.audited.is_empty() => Some("unreadable"),
                Status::Failed => Some(reason_of(r.error.as_deref().unwrap_or_default())),
                _ => None,
            };
            for c in counts.iter_mut() {
                let owned = !matches!(r.status, Status::NotOwned | Status::Gone);
                c.owned += u64::from(owned && reason != Some("unreadable"));
                c.in_line += u64::from(in_line);
                c.drifted += u64::from(drifted);
                c.written += u64::from(r.status == Status::Applied);
                c.would_write += u64::from(r.status == Status::WouldApply);
                match reason {
                    Some("tag-limit") => c.would_fail.tag_limit += 1,
                    Some("unsupported") => c.would_fail.unsupported += 1,
                    Some("contested") => c.would_fail.contested += 1,
                    Some("unreadable") => c.unreadable += 1,
                    Some("permission") => c.would_fail.permission += 1,
                    Some(_) => c.would_fail.other += 1,
                    None => {}
                }
                if in_line || drifted {
                    let t = c.by_type.entry(r.resource_type.clone()).or_default();
                    t.in_line += u64::from(in_line);
                    t.drifted += u64::from(drifted);
                }
            }
            if r.status == Status::WouldApply {
                audit.writes.push(WouldWrite {
                    resource: r.resource.clone(),
                    resource_type: r.resource_type.clone(),
                    // What a dry run or an audit would write: the plan's changes and its audited ones.
                    changes: r
                        .changes
                        .iter()
                        .chain(r.audited.iter().filter(|a| !r.changes.iter().any(|c| c.key == a.key)))
                        .map(AuditedChange::from)
                        .collect(),
                });
            }
            if let Some(reason) = reason {
                let keys: Vec<Option<String>> = match r.status {
                    Status::Contested => r.contested.iter().cloned().map(Some).collect(),
                    _ => vec![None],
                };
                for key in keys {
                    failing.push(Failing {
                        resource: r.resource.clone(),
                        resource_type: r.resource_type.clone(),
                        key,
                        reason,
                        error: r.error.clone().or_else(|| r.reason.clone()).unwrap_or_default(),
                        // A sweep's record names no writer: the contest state does (its status report).
                        writer: None,
                    });
                }
            }
        }
        ClusterAudit { cluster: cluster.to_string(), mode: Some(mode.to_string()), audit, failing, has_audit: true }
    }

    /// Compliance, in per cent: in line over in line and drifted; `None` with neither.
    pub fn compliance(&self) -> Option<f64> {
        percent(self.audit.counts.in_line, self.audit.counts.drifted)
    }
}

pub(super) fn percent(in_line: u64, drifted: u64) -> Option<f64> {
    let all = in_line + drifted;
    (all > 0).then(|| in_line as f64 * 100.0 / all as f64)
}

pub(super) fn shown(p: Option<f64>) -> String {
    p.map_or_else(|| "n/a".to_string(), |p| format!("{p:.1}%"))
}

/// The figures of several clusters together.
#[derive(Debug, Default, Serialize)]
pub struct Totals {
    pub clusters: usize,
    pub owned: u64,
    pub in_line: u64,
    pub drifted: u64,
    pub would_write: u64,
    pub would_fail: u64,
    pub unreadable: u64,
    /// Per cent, one decimal; `None` with nothing evaluated.
    pub compliance: Option<f64>,
    pub by_type: BTreeMap<String, TypeCompliance>,
    /// Per account or subscription: in line vs drifted where the report says (its parts, or a
    /// cluster whose resources all name one account), else the drifted ones its lists name.
    pub by_account: BTreeMap<String, TypeCompliance>,
    /// Would-be writes, one per resource and key.
    pub write_rows: usize,
}

pub fn totals(clusters: &[ClusterAudit]) -> Totals {
    let mut t = Totals { clusters: clusters.len(), ..Totals::default() };
    for c in clusters {
        let n = &c.audit.counts;
        t.owned += n.owned;
        t.in_line += n.in_line;
        t.drifted += n.drifted;
        t.would_write += n.would_write;
        t.would_fail += n.would_fail.total();
        t.unreadable += n.unreadable;
        t.write_rows += c.audit.writes.iter().map(|w| w.changes.len()).sum::<usize>();
        for (ty, k) in &n.by_type {
            let e = t.by_type.entry(ty.clone()).or_default();
            e.in_line += k.in_line;
            e.drifted += k.drifted;
        }
        for (account, k) in accounts(c) {
            let e = t.by_account.entry(account).or_default();
            e.in_line += k.in_line;
            e.drifted += k.drifted;
        }
    }
    t.compliance = percent(t.in_line, t.drifted).map(|p| (p * 10.0).round() / 10.0);
    t
}

/// A cluster's in line vs drifted per account: from its parts when it was swept in parts, else
/// all to the one account its resources name (or `-` when they name none or several).
fn accounts(c: &ClusterAudit) -> BTreeMap<String, TypeCompliance> {
    let mut out: BTreeMap<String, TypeCompliance> = BTreeMap::new();
    if !c.audit.parts.is_empty() {
        for (part, k) in &c.audit.parts {
            let e = out.entry(account_of_part(part)).or_default();
            e.in_line += k.in_line;
            e.drifted += k.drifted;
        }
        return out;
    }
    let named: BTreeSet<String> = c
        .audit
        .writes
        .iter()
        .map(|w| &w.resource)
        .chain(c.failing.iter().map(|f| &f.resource))
        .filter_map(|r| account_of(r))
        .collect();
    let account = match named.len() {
        1 => named.into_iter().next().unwrap_or_default(),
        _ => "-".to_string(),
    };
    out.insert(account, TypeCompliance { in_line: c.audit.counts.in_line, drifted: c.audit.counts.drifted });
    out
}

/// One account of an AWS Organization, as `tagwarden status --organization` shows it: the hub's
/// shard outcomes (clusters, owned, failed, last sweep, refused, not reached) and, from its
/// clusters' status reports (their parts in the account), in line vs drifted.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AccountRow {
    pub account: String,
    pub clusters: usize,
    /// Owned resources its shards swept.
    pub owned: u64,
    pub in_line: u64,
    /// `None` where no cluster's status report holds an audit section for the account.
    pub drifted: Option<u64>,
    /// Per cent, one decimal: in line / (in line + drifted).
    pub compliance: Option<f64>,
    pub failed: u64,
    /// The oldest of its regions' last sweeps, in ms since the epoch.
    pub last_sweep_ms: Option<u64>,
    /// Why its member role (or its folder, over the cap) was refused.
    pub refused: Option<String>,
    /// Not reached by the hub's last scheduled run before its deadline.
    pub unreached: bool,
}

impl AccountRow {
    /// The compliance of `in_line` and `drifted`, rounded to one decimal.
    pub fn compliance_of(in_line: u64, drifted: Option<u64>) -> Option<f64> {
        percent(in_line, drifted?).map(|p| (p * 10.0).round() / 10.0)
    }
}
