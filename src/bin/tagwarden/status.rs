//! `tagwarden status`: the status report the function writes beside the policy, for a human.

use anyhow::Context;
use tagwarden::policy::cache::PolicyState;
use tagwarden::status::StatusReport;

use crate::input::print_json;
use crate::target::Target;
use crate::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Where the policy is (the function's TAGWARDEN_POLICY): s3://…, ssm:… or a blob URL with a SAS.
    #[arg(long, value_name = "SRC")]
    policy: String,
    /// AWS region (default: the SDK's, from AWS_REGION or the profile).
    #[arg(long)]
    region: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Exit 0 when the policy is in force and nothing failed (for a cluster set: in every cluster);
/// 1 when a policy is not in force as published (rejected, unreadable, unavailable); 2 when
/// resources failed; 3 when there is no report (for a set: no cluster has one).
pub fn run(args: Args) -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let reports = runtime.block_on(Box::pin(async {
        Target::connect(&args.policy, args.region.as_deref(), true).await?.status().await
    }))?;
    let none = || {
        anyhow::anyhow!(
            "no status report beside {}: the function writes one after each sweep; run one (tagwarden sweep, or invoke the function with {{\"tagwarden\": \"sweep\"}})",
            args.policy
        )
    };
    if reports.iter().all(|(_, r)| r.is_none()) {
        return Err(none().into());
    }
    let present = || reports.iter().filter_map(|(_, r)| r.as_ref());
    let policy_ok = present().all(|r| r.policy.state == PolicyState::Ok);
    let none_failed = present().all(|r| r.failures.is_empty());
    match reports.as_slice() {
        [(None, Some(report))] if args.json => print_json(report)?,
        [(None, Some(report))] => print!("{}", human(report)),
        _ if args.json => {
            let clusters: Vec<serde_json::Value> =
                reports.iter().map(|(c, r)| serde_json::json!({"infraID": c, "report": r})).collect();
            print_json(&serde_json::json!({"clusters": clusters}))?;
        }
        _ => {
            for (cluster, report) in &reports {
                println!("== cluster {}", cluster.as_deref().unwrap_or("-"));
                match report {
                    Some(r) => print!("{}", human(r)),
                    None => println!("no status report yet (no sweep has run since its policy was published)"),
                }
            }
        }
    }
    let missing: Vec<&str> = reports.iter().filter(|(_, r)| r.is_none()).filter_map(|(c, _)| c.as_deref()).collect();
    if !missing.is_empty() && policy_ok {
        let why = anyhow::anyhow!(
            "no status report yet for cluster(s) {}: no sweep has run since their policy was published",
            missing.join(", ")
        );
        return Err(Failure::NotInLine(Some(why)));
    }
    match (policy_ok, none_failed) {
        (false, _) => Err(Failure::Invalid(None)),
        (true, false) => Err(Failure::NotInLine(None)),
        (true, true) => Ok(()),
    }
}

fn human(r: &StatusReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let p = &r.policy;
    let _ = writeln!(out, "policy     {} ({})", p.location, r.cloud);
    let _ = writeln!(out, "state      {}", p.state);
    let _ = writeln!(out, "in force   version {}", p.version.as_deref().unwrap_or("none"));
    for e in &p.errors {
        let _ = writeln!(out, "  {e}");
    }
    let _ = writeln!(out, "last sweep {}", ago(r.generated_at));
    // Swept in parts (an Azure Function over several subscriptions): the part swept longest ago.
    if let Some((part, at)) = r.parts.iter().min_by_key(|(_, at)| **at) {
        let _ = writeln!(out, "parts      {}, the oldest swept {} ({part})", r.parts.len(), ago(*at));
    }
    let _ = writeln!(out, "failures   {}", r.failures.len());
    for f in &r.failures {
        let (error, fix) = match f.error.rsplit_once(" (fix: ") {
            Some((e, fix)) => (e, Some(fix.trim_end_matches(')'))),
            None => (f.error.as_str(), None),
        };
        let _ = writeln!(out, "  {} ({}): {error}", f.resource, f.resource_type);
        if let Some(fix) = fix {
            let _ = writeln!(out, "    fix: {fix}");
        }
    }
    if !r.unsupported.is_empty() {
        let _ = writeln!(out, "unsupported {} (no API tags these; reported, not written)", r.unsupported.len());
        for f in &r.unsupported {
            let _ = writeln!(out, "  {} ({})", f.resource, f.resource_type);
        }
    }
    out
}

fn ago(epoch: u64) -> String {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let secs = now.saturating_sub(epoch);
    let human = match secs {
        0..=119 => format!("{secs} s ago"),
        120..=7199 => format!("{} min ago", secs / 60),
        _ => format!("{} h ago", secs / 3600),
    };
    format!("{human} (epoch {epoch})")
}
