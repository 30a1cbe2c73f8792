//! `tagwarden status`: the status report the function writes beside the policy, for a human.

use anyhow::Context;
use tagwarden::cloud::Cloud;
use tagwarden::policy::cache::PolicyState;
use tagwarden::status::StatusReport;

use crate::input::print_json;
use crate::target::Target;
use crate::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Where the policy is (the function's TAGWARDEN_POLICY): s3://…, ssm:…, a blob URL with a SAS
    /// or gs://… (Application Default Credentials; STORAGE_EMULATOR_HOST honoured);
    /// or a policy file, directory or cluster-set directory ('DIR/*/') on this machine, whose
    /// status report (tagwarden-status.json, DIR/<infraID>/tagwarden-status.json) is read beside it.
    #[arg(long, value_name = "SRC")]
    policy: Option<String>,
    /// How to show it: the report and its audit as a table (default); the audit figures as
    /// JSON; as CSV for an auditor (one row per would-be write of a key, and per failing
    /// resource); or as one self-contained HTML page of the compliance figures. With
    /// --organization: each account's figures (in line vs drifted, failed, refused, last sweep)
    /// and its clusters' audits as JSON or a page, and as CSV one row per account.
    #[arg(long, value_enum, default_value = "table")]
    format: crate::report::Format,
    /// Write the export to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
    /// An AWS Organization hub's folder (its TAGWARDEN_ORGANIZATION, s3://BUCKET/PREFIX/): the
    /// organization summary, as `tagwarden organization status` shows it.
    #[cfg(feature = "aws")]
    #[arg(long, value_name = "S3_FOLDER")]
    organization: Option<String>,
    /// AWS region (default: the SDK's, from AWS_REGION or the profile).
    #[arg(long)]
    region: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Lift the contests on this resource (its ARN, ARM ID or Google Cloud full resource name, as
    /// the report names it): tagwarden
    /// corrects its keys again, and counts anew. A new policy version lifts every contest too.
    #[arg(long, value_name = "RESOURCE")]
    lift: Option<String>,
    /// With --lift: only this key's contest.
    #[arg(long, value_name = "KEY", requires = "lift")]
    key: Option<String>,
}

/// Exit 0 when the policy is in force and nothing failed (for a cluster set: in every cluster);
/// 1 when a policy is not in force as published (rejected, unreadable, unavailable); 2 when
/// resources failed; 3 when there is no report (for a set: no cluster has one).
pub fn run(args: Args) -> Result<(), Failure> {
    #[cfg(feature = "aws")]
    if let Some(organization) = args.organization.clone() {
        if args.policy.is_some() || args.lift.is_some() {
            let why =
                anyhow::anyhow!("--organization shows the organization summary: give it without --policy and --lift");
            return Err(Failure::Invalid(Some(why)));
        }
        return crate::organization::status_of(crate::organization::StatusArgs {
            organization,
            region: args.region,
            json: args.json,
            format: args.format,
            out: args.out,
        });
    }
    // A usage error, as clap's own for a missing argument: exit 3.
    let Some(policy) = args.policy.clone() else {
        return Err(Failure::Error(anyhow::anyhow!(
            "--policy is required: where the policy is (s3://…, ssm:…, a blob URL or gs://…), or --organization s3://BUCKET/PREFIX/ for an AWS Organization hub"
        )));
    };
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    if let Some(resource) = &args.lift {
        return lift(&runtime, &args, resource);
    }
    let raw = runtime.block_on(Box::pin(async {
        if crate::local::is_local(&policy) {
            let source = crate::local::LocalSource::open(&policy, tagwarden::cloud::Cloud::Aws)?;
            let store = tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO);
            crate::target::raw_reports(&store).await
        } else {
            Target::connect(&policy, args.region.as_deref(), true).await?.raw_status().await
        }
    }))?;
    let mut reports: Vec<(Option<String>, Option<StatusReport>)> = Vec::new();
    let mut values: Vec<(Option<String>, Option<serde_json::Value>)> = Vec::new();
    for (cluster, text) in raw {
        let (report, value) = match text {
            Some(text) => {
                let where_ = cluster.as_deref().map(|c| format!(" of cluster {c}")).unwrap_or_default();
                let value: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("the status report{where_} beside {policy} is not JSON"))?;
                let report: StatusReport = serde_json::from_value(value.clone())
                    .with_context(|| format!("the status report{where_} beside {policy} is not a status report"))?;
                (Some(report), Some(value))
            }
            None => (None, None),
        };
        reports.push((cluster.clone(), report));
        values.push((cluster, value));
    }
    let none = || {
        anyhow::anyhow!(
            "no status report beside {}: the function writes one after each sweep; run one (tagwarden sweep, or invoke the function with {{\"tagwarden\": \"sweep\"}})",
            policy
        )
    };
    if reports.iter().all(|(_, r)| r.is_none()) {
        return Err(none().into());
    }
    let present = || reports.iter().filter_map(|(_, r)| r.as_ref());
    let policy_ok = present().all(|r| r.policy.state == PolicyState::Ok);
    // A contested key is not in line either: another writer keeps it from the policy's value.
    let none_failed = present().all(|r| r.failures.is_empty() && !r.contests.iter().any(|c| c.is_contested()));
    let audits: Vec<crate::report::ClusterAudit> = values
        .iter()
        .filter_map(|(c, v)| v.as_ref().map(|v| crate::report::ClusterAudit::of_report(c.as_deref(), v)))
        .collect();
    use crate::report::Format;
    match args.format {
        Format::Csv => crate::report::write_out(args.out.as_deref(), &crate::report::csv(&audits))?,
        Format::Html => {
            let page = crate::report::html("tagwarden audit report", &policy, &audits);
            crate::report::write_out(args.out.as_deref(), &page)?;
        }
        Format::Json => {
            let text = serde_json::to_string_pretty(&crate::report::json(&audits))?;
            crate::report::write_out(args.out.as_deref(), &format!("{text}\n"))?;
        }
        // The reports as the function wrote them (every field, the audit section included), each
        // contested key's entry with its writer's kind and the remedy beside (`with_remedies`).
        Format::Table if args.json => {
            let values = with_remedies(values);
            match values.as_slice() {
                [(None, Some(report))] => print_json(report)?,
                _ => {
                    let clusters: Vec<serde_json::Value> =
                        values.iter().map(|(c, r)| serde_json::json!({"infraID": c, "report": r})).collect();
                    print_json(&serde_json::json!({"clusters": clusters}))?;
                }
            }
        }
        Format::Table => {
            match reports.as_slice() {
                [(None, Some(report))] => print!("{}", human(report)),
                _ => {
                    for (cluster, report) in &reports {
                        println!("== cluster {}", cluster.as_deref().unwrap_or("-"));
                        match report {
                            Some(r) => print!("{}", human(r)),
                            None => println!("no status report yet (no sweep has run since its policy was published)"),
                        }
                    }
                    println!("==");
                }
            }
            print!("{}", crate::report::table(&audits));
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

/// The reports with, in each contested entry of `contests`, `writer_kind` and `remedy` (`how`,
/// `source`): who else writes the key and the documented way to end the fight
/// (`tagwarden_core::writer`), added by this reader; the rest as the function wrote it.
fn with_remedies(
    mut values: Vec<(Option<String>, Option<serde_json::Value>)>,
) -> Vec<(Option<String>, Option<serde_json::Value>)> {
    for report in values.iter_mut().filter_map(|(_, v)| v.as_mut()) {
        let cloud = report.get("cloud").and_then(|c| serde_json::from_value(c.clone()).ok()).unwrap_or(Cloud::Aws);
        for c in report.get_mut("contests").and_then(serde_json::Value::as_array_mut).into_iter().flatten() {
            if c.get("contested_since").is_none_or(serde_json::Value::is_null) {
                continue;
            }
            let text = |k: &str| c.get(k).and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
            let (principal, key) = (text("writer"), text("key"));
            let principal = if principal.is_empty() { tagwarden::contest::UNKNOWN_WRITER } else { &principal };
            let writer = tagwarden::writer::Writer::of(principal, &key, cloud);
            if let Some(entry) = c.as_object_mut() {
                entry.insert("writer_kind".into(), serde_json::json!(writer.kind));
                entry.insert("remedy".into(), serde_json::json!(writer.remedy));
            }
        }
    }
    values
}

/// `--lift`: exit 0 when a contest was lifted, 1 when the reports hold none on that resource.
fn lift(runtime: &tokio::runtime::Runtime, args: &Args, resource: &str) -> Result<(), Failure> {
    let key = args.key.as_deref();
    let lifted = runtime.block_on(Box::pin(async {
        let target = Target::connect(args.policy.as_deref().unwrap_or_default(), args.region.as_deref(), true).await?;
        // The lift is an operator's action: recorded with who made it.
        let by = target.caller(args.region.as_deref()).await;
        target.lift(resource, key, &by).await
    }))?;
    let total: usize = lifted.iter().map(|(_, n)| n).sum();
    if args.json {
        let clusters: Vec<serde_json::Value> =
            lifted.iter().map(|(c, n)| serde_json::json!({"infraID": c, "lifted": n})).collect();
        print_json(&serde_json::json!({"resource": resource, "key": key, "lifted": total, "clusters": clusters}))?;
    } else if total > 0 {
        let what = key.map_or_else(|| "every contested key".to_string(), |k| format!("key {k}"));
        println!("lifted {total} contest(s) on {resource} ({what}), recorded in the contest state: tagwarden corrects it again from its next event or sweep (a running function instance re-reads the contests within a minute)");
    }
    if total == 0 {
        let why = anyhow::anyhow!(
            "no contest on {resource}{} in the contest state of the cluster(s) of {}: `tagwarden status` lists them, with the resource as written there",
            key.map(|k| format!(" for key {k}")).unwrap_or_default(),
            args.policy.as_deref().unwrap_or_default()
        );
        return Err(Failure::Invalid(Some(why)));
    }
    Ok(())
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
    match r.generated_at {
        // Written by the event path alone (a contest), before any sweep.
        0 => {
            let _ = writeln!(out, "last sweep none yet");
        }
        at => {
            let _ = writeln!(out, "last sweep {}", ago(at));
        }
    }
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
    let contested: Vec<_> = r.contests.iter().filter(|c| c.is_contested()).collect();
    if !contested.is_empty() {
        let _ = writeln!(
            out,
            "contested  {} (a controller tagwarden yields to keeps changing these keys; held back until the hold ends)",
            contested.len()
        );
        for c in contested {
            let _ = writeln!(
                out,
                "  {} key {}: changed by {}, since {}, hold {} of its back-off until epoch {}",
                c.resource,
                c.key,
                c.writer(),
                ago(c.contested_since.unwrap_or_default()),
                c.holds,
                c.hold_until.unwrap_or_default()
            );
            let writer = tagwarden::writer::Writer::of(c.writer(), &c.key, r.cloud);
            let _ = writeln!(out, "    writer: {} ({})", writer.kind, writer.principal);
            let _ = writeln!(out, "    end the fight: {}", writer.remedy.how);
            let _ = writeln!(out, "      source: {}", writer.remedy.source);
            let _ = writeln!(out, "    lift: tagwarden status --policy <SRC> --lift {} --key {}", c.resource, c.key);
        }
    }
    if !r.lifts.is_empty() {
        let _ = writeln!(out, "lifts      {} recent", r.lifts.len());
        for l in r.lifts.iter().rev() {
            let key = l.key.as_deref().map_or_else(|| "every key".to_string(), |k| format!("key {k}"));
            let _ = writeln!(out, "  {} {key}: lifted {} by {}, {}", l.resource, l.lifted, l.by, ago(l.at));
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
