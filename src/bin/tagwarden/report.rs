//! The audit report for a person: what tagwarden found in line, what it would write (each key
//! before → after), what would fail and why, per cluster, per resource type and per account — as
//! a table, as CSV for an auditor, and as one self-contained HTML page (inline CSS and SVG, no
//! script, no external asset, no link) that shows the compliance figures.
//!
//! The figures come from the status report's `audit` section (read into the function's own
//! [`AuditSummary`], every field optional) or, for a person's `sweep --dry-run`, from the sweep's
//! own records ([`ClusterAudit::of_records`]). The CSV, the
//! JSON and the page are all made from the same [`ClusterAudit`]s, so they agree.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

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
fn account_of_part(part: &str) -> String {
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

fn percent(in_line: u64, drifted: u64) -> Option<f64> {
    let all = in_line + drifted;
    (all > 0).then(|| in_line as f64 * 100.0 / all as f64)
}

fn shown(p: Option<f64>) -> String {
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

/// The audit part of `tagwarden status`: one row per cluster, then each would-be write.
pub fn table(clusters: &[ClusterAudit]) -> String {
    let mut out = String::new();
    let with: Vec<&ClusterAudit> = clusters.iter().filter(|c| c.has_audit).collect();
    if with.is_empty() {
        let _ = writeln!(
            out,
            "audit      no audit section in the report yet (written by a function that reports it, after its next sweep)"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "{:<24} {:<8} {:>6} {:>8} {:>8} {:>11} {:>10} {:>10} {:>10}",
        "cluster", "mode", "owned", "in line", "drifted", "would write", "would fail", "unreadable", "compliance"
    );
    for c in &with {
        let n = &c.audit.counts;
        let _ = writeln!(
            out,
            "{:<24} {:<8} {:>6} {:>8} {:>8} {:>11} {:>10} {:>10} {:>10}",
            c.cluster,
            c.mode.as_deref().unwrap_or("-"),
            n.owned,
            n.in_line,
            n.drifted,
            n.would_write,
            n.would_fail.total(),
            n.unreadable,
            shown(c.compliance())
        );
        let reasons: Vec<String> =
            n.would_fail.reasons().iter().filter(|(_, k)| *k > 0).map(|(r, k)| format!("{r} {k}")).collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "  would fail: {}", reasons.join(", "));
        }
        for (ty, k) in &n.by_type {
            let _ = writeln!(out, "  {ty:<36} {} in line, {} drifted", k.in_line, k.drifted);
        }
    }
    for c in &with {
        if c.audit.writes.is_empty() {
            continue;
        }
        let more = if c.audit.truncated { " (the report lists the first ones only)" } else { "" };
        let _ = writeln!(out, "would write, cluster {}: {} resource(s){more}", c.cluster, c.audit.writes.len());
        for w in &c.audit.writes {
            let _ = writeln!(out, "  {} ({})", w.resource, w.resource_type);
            for ch in &w.changes {
                let _ = writeln!(out, "    {}: {} → {}", ch.key, ch.old.as_deref().unwrap_or("(none)"), ch.new);
            }
        }
    }
    for c in &with {
        for f in c.failing.iter().filter(|f| f.reason != "unsupported") {
            let key = f.key.as_deref().map(|k| format!(" key {k}")).unwrap_or_default();
            let _ = writeln!(out, "would fail ({}) {}{key}: {}", f.reason, f.resource, f.error);
            if let Some(w) = &f.writer {
                let _ = writeln!(out, "  writer {}: {}", w.kind, w.principal);
                let _ = writeln!(out, "  end the fight: {}", w.remedy.how);
                let _ = writeln!(out, "    source: {}", w.remedy.source);
            }
        }
    }
    out
}

/// The CSV header; one row per would-be write of a key, and per failing resource (per key when
/// contested), and for a contested key its other writer (`kind: principal`) and the documented way
/// to end the fight (`how (source: …)`).
pub const CSV_HEADER: &str = "cluster,account,type,resource,key,before,after,status,reason,writer,remedy";

pub fn csv(clusters: &[ClusterAudit]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let mut row = |fields: [&str; 11]| {
        let cells: Vec<String> = fields.iter().map(|f| csv_cell(f)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    };
    for c in clusters {
        for w in &c.audit.writes {
            let account = account_of(&w.resource).unwrap_or_default();
            for ch in &w.changes {
                let before = ch.old.as_deref().unwrap_or("");
                row([
                    &c.cluster,
                    &account,
                    &w.resource_type,
                    &w.resource,
                    &ch.key,
                    before,
                    &ch.new,
                    "would-write",
                    "",
                    "",
                    "",
                ]);
            }
        }
        for f in &c.failing {
            let account = account_of(&f.resource).unwrap_or_default();
            let key = f.key.as_deref().unwrap_or("");
            let status = if f.reason == "unreadable" { "unreadable" } else { "would-fail" };
            let reason = format!("{}: {}", f.reason, f.error);
            let (writer, remedy) = f.writer.as_ref().map_or_else(Default::default, |w| {
                (format!("{}: {}", w.kind, w.principal), format!("{} (source: {})", w.remedy.how, w.remedy.source))
            });
            row([
                &c.cluster,
                &account,
                &f.resource_type,
                &f.resource,
                key,
                "",
                "",
                status,
                reason.trim_end_matches(": "),
                &writer,
                &remedy,
            ]);
        }
    }
    out
}

/// RFC 4180 quoting; a cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`) starts
/// with a quote mark.
fn csv_cell(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) { format!("'{text}") } else { text.to_string() };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2430;margin:0;background:#f4f6f9}
main{max-width:1200px;margin:0 auto;padding:24px 32px 48px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid #d5dbe3;padding-bottom:4px}
.sub{color:#5b6675;margin:0 0 18px}
.tiles{display:flex;flex-wrap:wrap;gap:12px}
.tile{background:#fff;border:1px solid #d5dbe3;border-radius:8px;padding:10px 16px;min-width:120px}
.tile b{display:block;font-size:26px}.tile span{color:#5b6675;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.tile.big b{font-size:40px;color:#1f7a3f}
.card{background:#fff;border:1px solid #d5dbe3;border-radius:8px;padding:12px 16px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #e6eaef;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}td.k code{word-break:normal;white-space:nowrap}
.old{color:#a3361b}.new{color:#1f7a3f}.legend{font-size:12px;color:#5b6675}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 4px 0 10px}
footer{margin-top:28px;color:#5b6675;font-size:12px}
";

const GREEN: &str = "#2e9d57";
const ORANGE: &str = "#e0822c";

/// Horizontal stacked bars, in line (green) vs drifted (orange), one per row, with the figures
/// as text beside each bar.
fn bars(rows: &[(String, TypeCompliance)]) -> String {
    let (label_w, bar_w, row_h) = (300.0, 560.0, 26.0);
    let height = row_h * rows.len() as f64 + 8.0;
    let max = rows.iter().map(|(_, k)| k.in_line + k.drifted).max().unwrap_or(0).max(1) as f64;
    let mut svg = format!(
        "<svg role=\"img\" width=\"100%\" viewBox=\"0 0 1100 {height}\" font-family=\"system-ui,sans-serif\" font-size=\"13\">"
    );
    for (i, (label, k)) in rows.iter().enumerate() {
        let y = 4.0 + i as f64 * row_h;
        let g = k.in_line as f64 / max * bar_w;
        let o = k.drifted as f64 / max * bar_w;
        let short: String = if label.chars().count() > 42 {
            format!("…{}", label.chars().rev().take(41).collect::<Vec<_>>().into_iter().rev().collect::<String>())
        } else {
            label.clone()
        };
        let _ = write!(
            svg,
            "<text x=\"{x}\" y=\"{ty}\" text-anchor=\"end\" fill=\"#1d2430\">{l}</text>\
             <rect x=\"{bx}\" y=\"{y}\" width=\"{g:.1}\" height=\"18\" fill=\"{GREEN}\"/>\
             <rect x=\"{ox:.1}\" y=\"{y}\" width=\"{o:.1}\" height=\"18\" fill=\"{ORANGE}\"/>\
             <text x=\"{tx:.1}\" y=\"{ty}\" fill=\"#1d2430\">{i_l} in line · {d} drifted · {p}</text>",
            x = label_w - 8.0,
            ty = y + 14.0,
            l = esc(&short),
            bx = label_w,
            ox = label_w + g,
            tx = label_w + g + o + 8.0,
            i_l = k.in_line,
            d = k.drifted,
            p = shown(percent(k.in_line, k.drifted)),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A ring showing the compliance per cent.
fn ring(p: Option<f64>) -> String {
    let (r, c) = (52.0, 2.0 * std::f64::consts::PI * 52.0);
    let done = p.unwrap_or(0.0) / 100.0 * c;
    format!(
        "<svg role=\"img\" width=\"140\" height=\"140\" viewBox=\"0 0 140 140\">\
         <circle cx=\"70\" cy=\"70\" r=\"{r}\" fill=\"none\" stroke=\"{ORANGE}\" stroke-width=\"16\"/>\
         <circle cx=\"70\" cy=\"70\" r=\"{r}\" fill=\"none\" stroke=\"{GREEN}\" stroke-width=\"16\" stroke-dasharray=\"{done:.2} {c:.2}\" transform=\"rotate(-90 70 70)\"/>\
         <text x=\"70\" y=\"77\" text-anchor=\"middle\" font-family=\"system-ui,sans-serif\" font-size=\"22\" font-weight=\"700\" fill=\"#1d2430\">{}</text></svg>",
        shown(p)
    )
}

/// The page: headline figures, in line vs drifted per cluster, per resource type and per
/// account, the would-fail reasons, then every would-be write and failure.
pub fn html(title: &str, source: &str, clusters: &[ClusterAudit]) -> String {
    page(title, source, clusters, &[])
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

/// The CSV of an organization's accounts: one row per account.
pub const ACCOUNTS_CSV_HEADER: &str =
    "account,clusters,owned,in_line,drifted,compliance,failed,last_sweep_ms,refused,unreached";

pub fn accounts_csv(rows: &[AccountRow]) -> String {
    let mut out = String::from(ACCOUNTS_CSV_HEADER);
    out.push('\n');
    for r in rows {
        let cells = [
            r.account.clone(),
            r.clusters.to_string(),
            r.owned.to_string(),
            r.in_line.to_string(),
            r.drifted.map(|d| d.to_string()).unwrap_or_default(),
            r.compliance.map(|p| format!("{p:.1}")).unwrap_or_default(),
            r.failed.to_string(),
            r.last_sweep_ms.map(|t| t.to_string()).unwrap_or_default(),
            r.refused.clone().unwrap_or_default(),
            r.unreached.to_string(),
        ];
        out.push_str(&cells.iter().map(|c| csv_cell(c)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

/// The page of an AWS Organization: the accounts first (in line vs drifted, failed, refused, last
/// sweep), then its clusters' audit as [`html`] shows a set's.
pub fn organization_html(title: &str, source: &str, clusters: &[ClusterAudit], accounts: &[AccountRow]) -> String {
    page(title, source, clusters, accounts)
}

fn accounts_section(accounts: &[AccountRow], legend: &str) -> String {
    let mut h = String::from("<h2>Per account</h2><div class=\"card\">");
    h.push_str(legend);
    let rows: Vec<(String, TypeCompliance)> = accounts
        .iter()
        .filter_map(|a| a.drifted.map(|d| (a.account.clone(), TypeCompliance { in_line: a.in_line, drifted: d })))
        .collect();
    h.push_str(&bars(&rows));
    h.push_str("<table id=\"accounts\"><tr><th>account</th><th class=\"n\">clusters</th><th class=\"n\">owned</th><th class=\"n\">in line</th><th class=\"n\">drifted</th><th class=\"n\">compliance</th><th class=\"n\">failed</th><th>last sweep</th><th>standing</th></tr>");
    for a in accounts {
        let standing = match (&a.refused, a.unreached) {
            (Some(why), _) => format!("refused: {why}"),
            (None, true) => "not reached by the last scheduled run (taken first next run)".to_string(),
            (None, false) => "swept".to_string(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.account),
            a.clusters,
            a.owned,
            a.in_line,
            a.drifted.map_or_else(|| "n/a".to_string(), |d| d.to_string()),
            shown(a.compliance),
            a.failed,
            a.last_sweep_ms.map_or_else(|| "never".to_string(), tagwarden::events::format_rfc3339_ms),
            esc(&standing)
        );
    }
    h.push_str("</table><p class=\"legend\">In line vs drifted from each cluster's status report (its parts in the account); owned, failed and the last sweep from the hub's shard outcomes.</p></div>");
    h
}

fn page(title: &str, source: &str, clusters: &[ClusterAudit], accounts: &[AccountRow]) -> String {
    let t = totals(clusters);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body><main>",
        esc(title)
    );
    let _ = write!(h, "<h1>{}</h1><p class=\"sub\">{}</p>", esc(title), esc(source));
    let _ = write!(
        h,
        "<div class=\"tiles\"><div class=\"tile big\" id=\"compliance\">{}<span>compliance: in line / (in line + drifted)</span></div>",
        ring(t.compliance)
    );
    for (id, label, n) in [
        ("clusters", "clusters", t.clusters as u64),
        ("owned", "owned resources", t.owned),
        ("in-line", "in line", t.in_line),
        ("drifted", "drifted", t.drifted),
        ("would-write", "would write", t.would_write),
        ("would-fail", "would fail", t.would_fail),
        ("unreadable", "unreadable", t.unreadable),
    ] {
        let _ = write!(h, "<div class=\"tile\" id=\"{id}\"><b>{n}</b><span>{label}</span></div>");
    }
    h.push_str("</div>");
    let legend = format!(
        "<p class=\"legend\"><span class=\"sw\" style=\"background:{GREEN}\"></span>in line<span class=\"sw\" style=\"background:{ORANGE}\"></span>drifted (would be written, or would fail)</p>"
    );

    if !accounts.is_empty() {
        h.push_str(&accounts_section(accounts, &legend));
    }
    h.push_str("<h2>Per cluster</h2><div class=\"card\">");
    h.push_str(&legend);
    let rows: Vec<(String, TypeCompliance)> = clusters
        .iter()
        .map(|c| {
            (c.cluster.clone(), TypeCompliance { in_line: c.audit.counts.in_line, drifted: c.audit.counts.drifted })
        })
        .collect();
    h.push_str(&bars(&rows));
    h.push_str("<table id=\"clusters-table\"><tr><th>cluster</th><th>mode</th><th class=\"n\">owned</th><th class=\"n\">in line</th><th class=\"n\">drifted</th><th class=\"n\">would write</th><th class=\"n\">tag limit</th><th class=\"n\">unsupported</th><th class=\"n\">permission</th><th class=\"n\">contested</th><th class=\"n\">other</th><th class=\"n\">unreadable</th><th class=\"n\">compliance</th></tr>");
    for c in clusters {
        let n = &c.audit.counts;
        let f = &n.would_fail;
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&c.cluster),
            esc(c.mode.as_deref().unwrap_or(if c.has_audit { "-" } else { "no audit section" })),
            n.owned, n.in_line, n.drifted, n.would_write, f.tag_limit, f.unsupported, f.permission, f.contested, f.other, n.unreadable,
            shown(c.compliance())
        );
    }
    h.push_str("</table></div>");

    h.push_str("<h2>Per resource type</h2><div class=\"card\">");
    h.push_str(&legend);
    let rows: Vec<(String, TypeCompliance)> = t.by_type.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    h.push_str(&bars(&rows));
    h.push_str("</div>");

    if accounts.is_empty() {
        h.push_str("<h2>Per account or subscription</h2><div class=\"card\">");
        h.push_str(&legend);
        let rows: Vec<(String, TypeCompliance)> = t.by_account.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        h.push_str(&bars(&rows));
        h.push_str("<p class=\"legend\">\"-\": a cluster whose resources name no single account.</p></div>");
    }

    let _ = write!(h, "<h2>Would-be writes ({} resource-keys)</h2>", t.write_rows);
    h.push_str("<table id=\"writes\"><tr><th>cluster</th><th>account</th><th>type</th><th>resource</th><th>key</th><th>before → after</th></tr>");
    for c in clusters {
        for w in &c.audit.writes {
            for ch in &w.changes {
                let before = ch
                    .old
                    .as_deref()
                    .map_or_else(|| "<i>(none)</i>".to_string(), |o| format!("<span class=\"old\">{}</span>", esc(o)));
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"k\"><code>{}</code></td><td>{before} → <span class=\"new\">{}</span></td></tr>",
                    esc(&c.cluster),
                    esc(&account_of(&w.resource).unwrap_or_default()),
                    esc(&w.resource_type),
                    esc(&w.resource),
                    esc(&ch.key),
                    esc(&ch.new)
                );
            }
        }
        if c.audit.truncated {
            let _ = write!(h, "<tr><td colspan=\"6\">cluster {}: more would-be writes than the report keeps; the first ones are shown</td></tr>", esc(&c.cluster));
        }
    }
    h.push_str("</table>");

    let failing: usize = clusters.iter().map(|c| c.failing.len()).sum();
    let _ = write!(h, "<h2>Would fail or unreadable ({failing})</h2>");
    h.push_str("<table id=\"failing\"><tr><th>cluster</th><th>account</th><th>type</th><th>resource</th><th>key</th><th>reason</th><th>detail</th></tr>");
    for c in clusters {
        for f in &c.failing {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"k\"><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&c.cluster),
                esc(&account_of(&f.resource).unwrap_or_default()),
                esc(&f.resource_type),
                esc(&f.resource),
                esc(f.key.as_deref().unwrap_or("")),
                f.reason,
                esc(&f.error)
            );
        }
    }
    h.push_str("</table>");

    let contested: Vec<(&ClusterAudit, &Failing, &Writer)> = clusters
        .iter()
        .flat_map(|c| c.failing.iter().filter_map(move |f| f.writer.as_ref().map(|w| (c, f, w))))
        .collect();
    if !contested.is_empty() {
        let _ = write!(h, "<h2>Contested keys: the other writer and how to end the fight ({})</h2>", contested.len());
        h.push_str("<table id=\"contests\"><tr><th>cluster</th><th>resource</th><th>key</th><th>writer</th><th>kind</th><th>end the fight</th><th>source</th></tr>");
        for (c, f, w) in contested {
            let _ = write!(
                h,
                "<tr><td>{}</td><td><code>{}</code></td><td class=\"k\"><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.cluster),
                esc(&f.resource),
                esc(f.key.as_deref().unwrap_or("")),
                esc(&w.principal),
                w.kind,
                esc(&w.remedy.how),
                esc(&w.remedy.source)
            );
        }
        h.push_str("</table>");
    }
    let _ = writeln!(
        h,
        "<footer>tagwarden {} · a self-contained page: no script, no external asset, no link.</footer></main></body></html>",
        esc(env!("CARGO_PKG_VERSION"))
    );
    h
}

/// The machine-readable form of the same figures (`--json` beside `--format`): the totals and
/// each cluster's audit.
pub fn json(clusters: &[ClusterAudit]) -> Value {
    serde_json::json!({"totals": totals(clusters), "clusters": clusters})
}

/// Where the export goes: a file, or stdout for `-`.
pub fn write_out(out: Option<&std::path::Path>, text: &str) -> anyhow::Result<()> {
    match out {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
        _ => {
            print!("{text}");
            Ok(())
        }
    }
}

/// An export format (`--format`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The table (the default).
    Table,
    /// The audit figures as JSON (the same as the page and the CSV).
    Json,
    /// One row per would-be write of a key, and per failing resource.
    Csv,
    /// One self-contained page with the compliance figures.
    Html,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Value {
        serde_json::json!({
            "generated_at": 1, "cloud": "aws",
            "policy": {"location": "s3://b/p", "state": "ok", "version": "v", "errors": []},
            "failures": [{"name": "i-2", "resource": "arn:aws:ec2:us-east-1:111122223333:instance/i-2", "type": "ec2:instance", "error": "ec2:CreateTags: UnauthorizedOperation"}],
            "audit": {"mode": "audit", "owned": 3, "in_line": 1, "drifted": 2, "written": 0, "would_write": 1,
                      "would_fail": {"tag_limit": 0, "unsupported": 0, "permission": 1, "other": 0, "contested": 0},
                      "unreadable": 0, "by_type": {"ec2:instance": {"in_line": 1, "drifted": 2}},
                      "writes": [{"resource": "arn:aws:ec2:us-east-1:111122223333:instance/i-1", "type": "ec2:instance",
                                  "changes": [{"key": "team", "old": "legacy", "new": "platform"}, {"key": "=cmd", "old": null, "new": "a,\"b\""}]}],
                      "truncated": false}
        })
    }

    /// The page reads the function's own `AuditSummary` (no copy of its shape here): a report
    /// holding one, as the function writes it, is read field for field; an older report missing
    /// fields is read with them zero, not dropped.
    #[test]
    fn reads_the_functions_audit_summary() {
        use tagwarden::status as s;
        let mut counts =
            s::AuditCounts { owned: 5, in_line: 2, drifted: 3, would_write: 2, unreadable: 1, ..Default::default() };
        counts.would_fail.tag_limit = 1;
        counts.by_type.insert("ec2:instance".into(), s::TypeCompliance { in_line: 2, drifted: 3 });
        let real = s::AuditSummary {
            mode: Some(ClusterMode::Mixed),
            counts: counts.clone(),
            writes: vec![s::WouldWrite {
                resource: "arn:aws:ec2:us-east-1:111122223333:instance/i-1".into(),
                resource_type: "ec2:instance".into(),
                changes: vec![s::AuditedChange { key: "team".into(), old: None, new: "platform".into() }],
            }],
            truncated: true,
            parts: [("aws:111122223333/us-east-1".to_string(), counts)].into(),
        };
        let mut report = report();
        report["audit"] = serde_json::to_value(&real).expect("json");
        let c = ClusterAudit::of_report(Some("c-1"), &report);
        assert_eq!(c.audit, real);
        assert_eq!((c.mode.as_deref(), c.has_audit), (Some("mixed"), true));

        report["audit"] =
            serde_json::json!({"mode": "audit", "in_line": 4, "drifted": 1, "would_fail": {"tag_limit": 1}});
        let older = ClusterAudit::of_report(Some("c-1"), &report);
        assert_eq!((older.audit.counts.in_line, older.audit.counts.drifted, older.audit.counts.owned), (4, 1, 0));
        assert_eq!((older.audit.counts.would_fail.tag_limit, older.audit.writes.len()), (1, 0));
    }

    /// A contested key names its writer, classified, and the documented remedy, in the table, the
    /// CSV, the JSON and the page.
    #[test]
    fn a_contested_key_names_its_writer_and_the_remedy_everywhere() {
        let mut report = report();
        let contest = |resource: &str, writer: Option<&str>| {
            serde_json::json!({"resource": resource, "key": "team", "policy": "p", "corrections": [1, 2, 3],
                               "writer": writer, "contested_since": 10, "hold_until": 3610, "holds": 1})
        };
        report["contests"] = serde_json::json!([
            contest(
                "arn:aws:elasticloadbalancing:us-east-1:111122223333:loadbalancer/app/web/1",
                Some("arn:aws:sts::111122223333:assumed-role/eks-aws-load-balancer-controller/1700000000")
            ),
            contest(
                "arn:aws:ec2:us-east-1:111122223333:instance/i-3",
                Some("arn:aws:sts::111122223333:assumed-role/terraform-ci/run-1")
            ),
            contest("arn:aws:ec2:us-east-1:111122223333:instance/i-4", None),
            // Not contested yet (counting corrections): no row.
            serde_json::json!({"resource": "arn:aws:ec2:us-east-1:111122223333:instance/i-5", "key": "team", "policy": "p", "corrections": [1]}),
        ]);
        let c = ClusterAudit::of_report(Some("c-1"), &report);
        let kinds: Vec<_> = c.failing.iter().filter_map(|f| f.writer.as_ref().map(|w| w.kind)).collect();
        use tagwarden::writer::WriterKind as K;
        assert_eq!(kinds, [K::AwsLoadBalancerController, K::Terraform, K::Unknown]);

        let t = table(std::slice::from_ref(&c));
        assert!(t.contains("writer aws-load-balancer-controller: arn:aws:sts::111122223333:assumed-role/eks-aws-load-balancer-controller/1700000000"), "{t}");
        assert!(t.contains("end the fight: Terraform: add the key to the AWS provider's ignore_tags"), "{t}");
        assert!(t.contains("end the fight: unknown writer: exclude team with auditKeys"), "{t}");

        let csv = csv(std::slice::from_ref(&c));
        let row = csv.lines().find(|l| l.contains("instance/i-3")).expect("a row for i-3");
        assert!(row.contains(",team,,,would-fail,contested: changed again and again by arn:aws:sts::111122223333:assumed-role/terraform-ci/run-1,terraform: arn:aws:sts::111122223333:assumed-role/terraform-ci/run-1,"), "{row}");
        assert!(row.contains("(source: Terraform AWS provider documentation: provider argument ignore_tags"), "{row}");

        let j = json(std::slice::from_ref(&c));
        let writers: Vec<&Value> =
            j["clusters"][0]["failing"].as_array().expect("failing").iter().filter_map(|f| f.get("writer")).collect();
        assert_eq!(writers.len(), 3);
        assert_eq!(writers[0]["kind"], "aws-load-balancer-controller");
        assert!(writers[0]["remedy"]["how"].as_str().expect("how").contains("alb.ingress.kubernetes.io/tags"));

        let page = html("t", "s3://b/p", std::slice::from_ref(&c));
        assert!(
            page.contains("<table id=\"contests\">")
                && page.contains("service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"),
            "{page}"
        );
        assert!(page.contains("<td>terraform</td>") && page.contains("<td>unknown</td>"));
    }

    #[test]
    fn csv_html_and_table_of_one_report() {
        let c = ClusterAudit::of_report(Some("c-1"), &report());
        assert_eq!(c.compliance().map(|p| p.round()), Some(33.0));
        let csv = csv(std::slice::from_ref(&c));
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines[1], "c-1,111122223333,ec2:instance,arn:aws:ec2:us-east-1:111122223333:instance/i-1,team,legacy,platform,would-write,,,");
        assert_eq!(lines[2], "c-1,111122223333,ec2:instance,arn:aws:ec2:us-east-1:111122223333:instance/i-1,'=cmd,,\"a,\"\"b\"\"\",would-write,,,");
        assert!(lines[3].ends_with("would-fail,permission: ec2:CreateTags: UnauthorizedOperation,,"), "{}", lines[3]);
        let page = html("t <x>", "s3://b/p", std::slice::from_ref(&c));
        assert!(page.contains("33.3%") && page.contains("t &lt;x&gt;") && !page.contains("<script"));
        assert!(!page.contains("href=") && !page.contains("src="));
        let t = table(std::slice::from_ref(&c));
        assert!(t.contains("team: legacy → platform") && t.contains("permission 1"), "{t}");
        let totals = totals(&[c]);
        assert_eq!(totals.by_account["111122223333"], TypeCompliance { in_line: 1, drifted: 2 });
        assert_eq!(account_of("/subscriptions/AbC/resourceGroups/rg/providers/x/y/z").as_deref(), Some("AbC"));
        assert_eq!(account_of_part("aws:444455556666/eu-west-1+global"), "444455556666");
    }
}
