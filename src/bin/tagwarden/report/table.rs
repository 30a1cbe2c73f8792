//! The audit report as `tagwarden status` prints it: one row per cluster, then each would-be
//! write and each failure.

use std::fmt::Write as _;

use super::audit::{shown, ClusterAudit};

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
