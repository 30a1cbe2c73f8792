//! The audit report for a person: what tagwarden found in line, what it would write (each key
//! before → after), what would fail and why, per cluster, per resource type and per account — as
//! a table, as CSV for an auditor, and as one self-contained HTML page (inline CSS and SVG, no
//! script, no external asset, no link) that shows the compliance figures.
//!
//! The figures come from the status report's `audit` section (read into the function's own
//! [`AuditSummary`](tagwarden::status::AuditSummary), every field optional) or, for a person's `sweep --dry-run`, from the sweep's
//! own records ([`ClusterAudit::of_records`]). The CSV, the
//! JSON and the page are all made from the same [`ClusterAudit`]s, so they agree.

mod audit;
mod csv;
mod html;
mod table;
#[cfg(test)]
mod tests;

use serde_json::Value;

pub use audit::{totals, AccountRow, ClusterAudit};
pub use csv::{accounts_csv, csv};
pub use html::{html, organization_html};
pub use table::table;

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
