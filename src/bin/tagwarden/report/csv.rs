//! The audit report as CSV, for an auditor's spreadsheet: one row per would-be write of a key and
//! per failing resource; and an Organization's accounts, one row each.

use super::audit::{account_of, AccountRow, ClusterAudit};

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
