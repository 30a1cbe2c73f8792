//! What a sweep did, as the person reads it: the totals, each cluster of a set on its own, the
//! text summary, `--json`, or the audit report (`--format`); and the exit it makes.

use std::collections::BTreeMap;

use serde::Serialize;
use tagwarden::report::{Record, Status};

use super::engine::Swept;
use super::Args;
use crate::input::print_json;
use crate::Failure;

#[derive(Serialize, Default)]
pub(super) struct Summary {
    policy: String,
    policy_version: Option<String>,
    dry_run: bool,
    #[serde(flatten)]
    totals: Counts,
    /// A cluster set's clusters, each on its own (empty for a single policy), the ones whose
    /// newer policy was rejected included.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clusters: Vec<ClusterSummary>,
    /// Why the single policy's newer version was rejected (the one in force was swept).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rejected: Vec<String>,
    /// A set's clusters that published a policy but were not named with --cluster: not swept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_named: Vec<String>,
    /// Listings that fell back to a dearer way (Azure: Resource Graph refused, ARM's listing used),
    /// and why: everything was listed, at a higher cost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    listing_fallbacks: Vec<String>,
    seconds: f64,
    api_calls: BTreeMap<String, u64>,
    records: Vec<Record>,
    /// A single policy's infraID (a set's records name theirs).
    #[serde(skip)]
    infra_id: Option<String>,
}

#[derive(Serialize)]
struct ClusterSummary {
    #[serde(rename = "infraID")]
    infra_id: String,
    policy_version: Option<String>,
    /// Why this cluster's newer policy was rejected: `policy_version` (if any) stays in force and
    /// was swept; with none, nothing of this cluster was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    rejected: Vec<String>,
    /// A named cluster with no policy in the set: why nothing of it was swept, and the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    unpublished: Option<String>,
    #[serde(flatten)]
    counts: Counts,
}

#[derive(Serialize, Default)]
struct Counts {
    resources: usize,
    owned: usize,
    drifted: usize,
    written: usize,
    limit_exceeded: usize,
    /// Resources and listings that failed (the records say which and why).
    failed: usize,
    /// Listed, then deleted before they were read or written: not failures.
    gone: usize,
    /// Listings that failed: what they would have named was not swept (also counted in `failed`).
    listings_failed: usize,
    /// Owned resources no API can tag, by type (not failures).
    unsupported: BTreeMap<String, usize>,
}

impl Counts {
    fn of<'r>(all: impl Iterator<Item = &'r Record> + Clone) -> Self {
        let listings_failed = all.clone().filter(|r| r.is_listing()).count();
        let records = all.clone().filter(|r| !r.is_listing());
        let count = |s: &[Status]| records.clone().filter(|r| s.contains(&r.status)).count();
        Counts {
            resources: records.clone().count(),
            owned: records.clone().count() - count(&[Status::NotOwned, Status::Gone]),
            drifted: count(&[Status::Applied, Status::WouldApply, Status::LimitExceeded]),
            written: count(&[Status::Applied, Status::WouldApply]),
            limit_exceeded: count(&[Status::LimitExceeded]),
            failed: count(&[Status::Failed]) + listings_failed,
            gone: count(&[Status::Gone]),
            listings_failed,
            unsupported: records.clone().filter(|r| r.status == Status::Unsupported).fold(
                BTreeMap::new(),
                |mut m, r| {
                    *m.entry(r.resource_type.clone()).or_default() += 1;
                    m
                },
            ),
        }
    }

    fn line(&self, dry_run: bool) -> String {
        let verb = if dry_run { "would write" } else { "written" };
        let mut line = format!(
            "{} owned, {} drifted, {} {verb}, {} over the tag limit, {} failed",
            self.owned, self.drifted, self.written, self.limit_exceeded, self.failed
        );
        if self.gone > 0 {
            line.push_str(&format!(", {} gone", self.gone));
        }
        line
    }
}

/// Print `summary` (the text summary, `--json`, or the audit report of `--format`), then the
/// exit: a failure, a rejected or unpublished policy, or drift under --dry-run.
pub(super) fn report(args: &Args, summary: &Summary) -> Result<(), Failure> {
    if let Some(format) = args.format {
        export(args, summary, format)?;
    } else if args.json {
        print_json(summary)?;
    } else {
        let t = &summary.totals;
        println!("policy        {} (version {})", summary.policy, summary.policy_version.as_deref().unwrap_or("-"));
        if !summary.rejected.is_empty() {
            println!("rejected      a newer policy: {}; the version above stays in force", summary.rejected.join("; "));
        }
        if !summary.not_named.is_empty() {
            println!("not swept     {} (not named with --cluster)", summary.not_named.join(", "));
        }
        for c in &summary.clusters {
            let version = c.policy_version.as_deref().unwrap_or("-");
            println!("cluster       {} (version {version}): {}", c.infra_id, c.counts.line(summary.dry_run));
            if !c.rejected.is_empty() {
                let kept = if c.policy_version.is_some() {
                    "that version stays in force"
                } else {
                    "nothing of this cluster is enforced"
                };
                println!("  rejected    its newer policy: {}; {kept}", c.rejected.join("; "));
            }
            if let Some(why) = &c.unpublished {
                println!("  unpublished {why}; nothing of this cluster is enforced");
            }
        }
        println!("resources     {} seen, {} owned", t.resources, t.owned);
        let verb = if summary.dry_run { "would write" } else { "written" };
        println!(
            "drift         {} drifted, {} {verb}, {} over the tag limit, {} failed",
            t.drifted, t.written, t.limit_exceeded, t.failed
        );
        if t.gone > 0 {
            println!("gone          {} (deleted after they were listed; not failures)", t.gone);
        }
        if t.listings_failed > 0 {
            println!("listings      {} failed: what they would have listed was not swept (below)", t.listings_failed);
        }
        for why in &summary.listing_fallbacks {
            println!("fell back     {why}");
        }
        let unsupported: usize = t.unsupported.values().sum();
        if unsupported > 0 {
            let by_type: Vec<String> = t.unsupported.iter().map(|(t, n)| format!("{n} {t}")).collect();
            println!("unsupported   {unsupported}: {} (reported, not written)", by_type.join(", "));
        }
        println!("took          {:.1} s", summary.seconds);
        println!("API calls     {}", summary.api_calls.values().sum::<u64>());
        for (op, n) in &summary.api_calls {
            println!("  {op:<44} {n}");
        }
        for r in summary.records.iter().filter(|r| r.status == Status::Failed) {
            let what = if r.is_listing() { "listing" } else { "failed" };
            println!("{what:<13} {} ({}): {}", r.resource, r.resource_type, r.error.as_deref().unwrap_or_default());
        }
    }
    if summary.totals.failed > 0 {
        let listings = summary.totals.listings_failed;
        let resources = summary.totals.failed - listings;
        let why = anyhow::anyhow!("{resources} resource(s) and {listings} listing(s) failed");
        return Err(Failure::NotInLine(Some(why)));
    }
    if !summary.rejected.is_empty()
        || summary.clusters.iter().any(|c| !c.rejected.is_empty() || c.unpublished.is_some())
    {
        return Err(Failure::Invalid(None));
    }
    if summary.dry_run && summary.totals.drifted > 0 {
        return Err(Failure::NotInLine(None));
    }
    Ok(())
}

/// The sweep's audit report (`--format`): each cluster's records counted as the function's
/// report counts them.
fn export(args: &Args, summary: &Summary, format: crate::report::Format) -> anyhow::Result<()> {
    use crate::report::{ClusterAudit, Format};
    let mode = if summary.dry_run { "dry-run" } else { "enforce" };
    let single = summary.infra_id.clone().unwrap_or_else(|| "-".to_string());
    let mut by_cluster: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for c in &summary.clusters {
        by_cluster.entry(c.infra_id.clone()).or_default();
    }
    for r in &summary.records {
        by_cluster.entry(r.infra_id.clone().unwrap_or_else(|| single.clone())).or_default().push(r);
    }
    let audits: Vec<ClusterAudit> = by_cluster.iter().map(|(c, rs)| ClusterAudit::of_records(c, rs, mode)).collect();
    let text = match format {
        Format::Table => crate::report::table(&audits),
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&crate::report::json(&audits))?),
        Format::Csv => crate::report::csv(&audits),
        Format::Html => {
            let title = if summary.dry_run { "tagwarden dry run" } else { "tagwarden sweep" };
            crate::report::html(title, &summary.policy, &audits)
        }
    };
    crate::report::write_out(args.out.as_deref(), &text)
}

pub(super) fn summarize(args: &Args, swept: Swept) -> Result<Summary, Failure> {
    let Swept { policy, is_set, mut out, in_force, api_calls, seconds } = swept;
    if let Some(e) = &out.error {
        return Err(stopped(e, !out.rejected.is_empty()));
    }
    // A set's folders of clusters not named: the user's choice, not a rejected policy.
    let (rejected, unnamed): (Vec<_>, Vec<_>) = std::mem::take(&mut out.rejected)
        .into_iter()
        .partition(|r| r.cluster.as_ref().is_none_or(|c| args.clusters.contains(c)));
    out.rejected = rejected;
    let not_named = unnamed.into_iter().filter_map(|r| r.cluster).collect();
    let mut clusters: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in &out.records {
        if let Some(id) = &r.infra_id {
            clusters.entry(id.as_str()).or_default().push(r);
        }
    }
    for r in &out.rejected {
        if let Some(id) = &r.cluster {
            clusters.entry(id.as_str()).or_default();
        }
    }
    // A named cluster that owns nothing yet is listed (its counts 0), and one that published
    // nothing in the set is listed with why: never left out of the report.
    if is_set {
        for id in &args.clusters {
            clusters.entry(id.as_str()).or_default();
        }
    }
    let unpublished = |id: &str| {
        let known =
            in_force.iter().any(|(c, _)| c == id) || out.rejected.iter().any(|r| r.cluster.as_deref() == Some(id));
        (is_set && !known).then(|| {
            format!(
                "no policy of this cluster in the set: publish one (tagwarden publish --to {policy} --cluster {id}, or --from-cluster on its cluster)"
            )
        })
    };
    let rejected_of = |id: Option<&str>| -> Vec<String> {
        out.rejected.iter().filter(|r| r.cluster.as_deref() == id).flat_map(|r| r.errors.clone()).collect()
    };
    let clusters = clusters
        .into_iter()
        .map(|(id, records)| ClusterSummary {
            infra_id: id.to_string(),
            policy_version: records
                .iter()
                .find(|r| !r.policy_version.contains('@'))
                .map(|r| r.policy_version.clone())
                .or_else(|| {
                    out.rejected.iter().find(|r| r.cluster.as_deref() == Some(id)).and_then(|r| r.in_force.clone())
                })
                .or_else(|| in_force.iter().find(|(c, _)| c == id).map(|(_, v)| v.clone())),
            rejected: rejected_of(Some(id)),
            unpublished: unpublished(id),
            counts: Counts::of(records.iter().copied()),
        })
        .collect();
    let rejected = rejected_of(None);
    Ok(Summary {
        policy,
        policy_version: if is_set { None } else { out.records.first().map(|r| r.policy_version.clone()) },
        dry_run: args.dry_run,
        totals: Counts::of(out.records.iter()),
        clusters,
        rejected,
        not_named,
        listing_fallbacks: out.fallbacks,
        seconds,
        api_calls,
        records: out.records,
        infra_id: if is_set { None } else { out.infra_id.clone() },
    })
}

/// The exit of a sweep that stopped short, by its typed reason: no valid policy because every
/// version was refused is an invalid policy (1, as `validate` says); work handed back is resources
/// not in line (2); anything else kept the sweep from running (3).
fn stopped(why: &tagwarden::reason::Stop, refused: bool) -> Failure {
    use tagwarden::reason::StopKind;
    let error = anyhow::anyhow!("{why}");
    let kinds = why.kind().each();
    if refused && kinds.iter().all(|k| matches!(k, StopKind::NoPolicy(_))) {
        Failure::Invalid(Some(error))
    } else if kinds.iter().all(|k| matches!(k, StopKind::Deferred(_))) {
        Failure::NotInLine(Some(error))
    } else {
        Failure::Error(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden::reason::{Deferred, Stop, StopKind};

    #[test]
    fn a_stop_exits_by_its_kind() {
        let code = |f: Failure| match f {
            Failure::Invalid(_) => 1,
            Failure::NotInLine(_) => 2,
            Failure::Error(_) => 3,
        };
        let no_policy = Stop::new(StopKind::NoPolicy("no valid policy".into()));
        assert_eq!(code(stopped(&no_policy, true)), 1);
        assert_eq!(code(stopped(&no_policy, false)), 3, "nothing refused: the policy could not be had");
        assert_eq!(code(stopped(&Deferred::NextSweep.into(), false)), 2);
        assert_eq!(code(stopped(&Stop::new(StopKind::CannotSweep("nowhere to list".into())), false)), 3);
        let both = no_policy.and(Stop::new(StopKind::Member("account 1: refused".into())));
        assert_eq!(code(stopped(&both, true)), 3);
        assert!(matches!(stopped(&both, true), Failure::Error(e) if e.to_string().contains("account 1: refused")));
    }
}
