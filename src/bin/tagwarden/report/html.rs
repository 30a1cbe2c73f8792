//! The audit report as one self-contained HTML page: inline CSS and SVG, no script, no external
//! asset, no link.

use std::fmt::Write as _;

use tagwarden::status::TypeCompliance;
use tagwarden::writer::Writer;

use super::audit::{account_of, percent, shown, totals, AccountRow, ClusterAudit, Failing};

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
