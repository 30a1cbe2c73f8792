//! `tagwarden organization`: an AWS Organization's hub by hand. `sweep` sweeps each member account
//! and region as the hub's shards do (through the member role, each shard within its own
//! account-region's budget), with a line per shard as it ends; `status` reads the organization
//! summary the shards wrote, or exports it per account with each cluster's audit (`--format`).

use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use tagwarden::aws::organization::{self, OrgConfig, Organization, Settings, ShardReport, Summary};

use crate::input::print_json;
use crate::Failure;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Sweep every member account and region (or those named with --account).
    Sweep(SweepArgs),
    /// Show the organization summary: accounts, clusters, resources in line, failed, each
    /// account's last sweep.
    Status(StatusArgs),
}

#[derive(clap::Args)]
struct SweepArgs {
    /// The folder of the member accounts' sets (the hub's TAGWARDEN_ORGANIZATION):
    /// s3://BUCKET/PREFIX/, holding <account>/<infraID>/.
    #[arg(long, value_name = "S3_FOLDER")]
    organization: String,
    /// The spoke role's name in every member account.
    #[arg(long, value_name = "NAME", default_value = "tagwarden-member")]
    member_role: String,
    /// A region the spokes cover; repeat for several.
    #[arg(long = "member-region", value_name = "REGION", required = true)]
    member_regions: Vec<String>,
    /// A cluster: ACCOUNT/INFRA_ID, or ACCOUNT/* for every cluster the account publishes; repeat.
    #[arg(long = "cluster", value_name = "ACCOUNT/INFRA_ID", required = true)]
    clusters: Vec<String>,
    /// Sweep only this account; repeat for several (default: every account of --cluster).
    #[arg(long = "account", value_name = "ACCOUNT")]
    accounts: Vec<String>,
    /// The hub's region, where STS and the bucket are called (default: the SDK's).
    #[arg(long)]
    region: Option<String>,
    /// Plan only; exit 2 when any owned resource has drifted.
    #[arg(long)]
    dry_run: bool,
    /// Resources reconciled, and write calls in flight, at once in each shard.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Print each shard's outcome, the summary and the API calls as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The folder of the member accounts' sets: s3://BUCKET/PREFIX/.
    #[arg(long, value_name = "S3_FOLDER")]
    pub organization: String,
    #[arg(long)]
    pub region: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// How to show it: the summary as a table (default); or, per account (in line vs drifted,
    /// failed, refused, last sweep) with every cluster's audit from its status report, as JSON,
    /// as CSV (one row per account) or as one self-contained HTML page.
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::report::Format,
    /// Write the export to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct Swept {
    organization: String,
    dry_run: bool,
    summary: Summary,
    assume_role_calls: u64,
    api_calls: std::collections::BTreeMap<String, u64>,
    seconds: f64,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    match args.command {
        Command::Sweep(args) => runtime.block_on(Box::pin(sweep(args))),
        Command::Status(args) => runtime.block_on(Box::pin(status(args))),
    }
}

async fn hub_config(region: Option<&str>) -> Result<aws_config::SdkConfig, Failure> {
    let mut loader = tagwarden::aws::config_loader()?;
    if let Some(r) = region {
        loader = loader.region(aws_config::Region::new(r.to_string()));
    }
    let config = loader.load().await;
    tagwarden::aws::preflight(&config).await?;
    Ok(config)
}

async fn sweep(args: SweepArgs) -> Result<(), Failure> {
    let listed = args.clusters.join(",");
    let regions = args.member_regions.join(",");
    let vars = [
        ("TAGWARDEN_ORGANIZATION", args.organization.as_str()),
        ("TAGWARDEN_MEMBER_ROLE", args.member_role.as_str()),
        ("TAGWARDEN_MEMBER_REGIONS", regions.as_str()),
        ("TAGWARDEN_CLUSTERS", listed.as_str()),
    ];
    let config = OrgConfig::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
        .map_err(|e| Failure::Invalid(Some(anyhow::anyhow!("{}", flag_names(&e.to_string())))))?
        .ok_or_else(|| Failure::Invalid(Some(anyhow::anyhow!("--organization is required"))))?;
    if let Some(a) = args.accounts.iter().find(|a| !config.clusters.contains_key(a.as_str())) {
        let why = anyhow::anyhow!("--account {a} names no cluster: add --cluster {a}/INFRA_ID (or {a}/*)");
        return Err(Failure::Invalid(Some(why)));
    }
    let hub = hub_config(args.region.as_deref()).await?;
    let settings = Settings {
        policy_ttl: std::time::Duration::ZERO,
        own: Vec::new(),
        concurrency: args.concurrency.clamp(1, 64),
        ec2_writes_per_second: tagwarden::aws::config::DEFAULT_EC2_WRITES_PER_SECOND,
        dry_run: args.dry_run,
        // A person's sweep enforces unless --dry-run, which audits everything.
        mode: tagwarden::mode::Mode::Enforce,
    };
    let org = Organization::new(&hub, config, settings);
    let started = Instant::now();
    // As the hub's schedule computes them (an account over the cap refused, naming it); recorded
    // as the hub's last run when every account is swept (not one by hand, not a dry run).
    let run = org.schedule(None, args.accounts.is_empty()).await;
    let wanted = |a: &String| args.accounts.is_empty() || args.accounts.contains(a);
    let shards: Vec<_> = run.shards.iter().filter(|s| wanted(&s.account)).cloned().collect();
    for (account, why) in run.over_cap.iter().filter(|(a, _)| wanted(a)) {
        if !args.json {
            eprintln!("{account}: refused: {why}");
        }
    }
    let total = shards.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let quiet = args.json;
    let swept = org
        .sweep_shards(&shards, None, &|r: &ShardReport| {
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if !quiet {
                eprintln!("[{n}/{total}] {}", line(r));
            }
        })
        .await;
    let drifted: usize = swept
        .iter()
        .map(|(out, _)| out.records.iter().filter(|r| r.status == tagwarden::report::Status::WouldApply).count())
        .sum();
    let listed = if args.json { String::new() } else { would_writes(&swept) };
    let reports: Vec<ShardReport> = swept.into_iter().map(|(_, r)| r).collect();
    let mut summary = Summary::of(reports);
    for (account, why) in run.over_cap.into_iter().filter(|(a, _)| wanted(a)) {
        summary.accounts += usize::from(!summary.last_sweep_ms.contains_key(&account));
        summary.refused.insert(account, why);
    }
    let out = Swept {
        organization: args.organization.clone(),
        dry_run: args.dry_run,
        assume_role_calls: org.sessions.assumed(),
        api_calls: org.calls.snapshot(),
        seconds: started.elapsed().as_secs_f64(),
        summary,
    };
    if args.json {
        print_json(&out)?;
    } else {
        print!("{listed}{}", human(&out.summary));
        println!("AssumeRole    {} call(s)", out.assume_role_calls);
        println!("API calls     {} in {:.1} s", out.api_calls.values().sum::<u64>(), out.seconds);
    }
    verdict(&out.summary, args.dry_run && drifted > 0)
}

/// `tagwarden status --organization`: the same summary, or its export.
pub fn status_of(args: StatusArgs) -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    runtime.block_on(Box::pin(status(args)))
}

async fn status(args: StatusArgs) -> Result<(), Failure> {
    let (bucket, prefix) = match args.organization.parse::<tagwarden::aws::policy_store::PolicyLocation>() {
        Ok(tagwarden::aws::policy_store::PolicyLocation::S3Prefix { bucket, prefix }) => (bucket, prefix),
        _ => {
            let why =
                anyhow::anyhow!("--organization {:?} is not an S3 folder: give s3://BUCKET/PREFIX/", args.organization);
            return Err(Failure::Invalid(Some(why)));
        }
    };
    let hub = hub_config(args.region.as_deref()).await?;
    let clients = tagwarden::aws::Clients::new(&hub);
    let summary = organization::read_summary(&clients, &bucket, &prefix).await.map_err(anyhow::Error::from)?;
    if summary.shards.is_empty() {
        return Err(Failure::Error(anyhow::anyhow!(
            "no shard outcome under {}{}: the hub writes one per account and region after each sweep; run one (tagwarden organization sweep, or invoke the hub with {{\"tagwarden\": \"sweep\"}})",
            args.organization,
            organization::SHARDS_FOLDER
        )));
    }
    use crate::report::Format;
    match args.format {
        Format::Table if args.json => print_json(&summary)?,
        Format::Table => print!("{}", human(&summary)),
        format => {
            let audits = cluster_audits(&clients, &bucket, &prefix, &summary).await?;
            let accounts = account_rows(&summary, &audits);
            let text = match format {
                Format::Csv => crate::report::accounts_csv(&accounts),
                Format::Html => crate::report::organization_html(
                    "tagwarden organization audit report",
                    &args.organization,
                    &audits,
                    &accounts,
                ),
                _ => {
                    let figures = serde_json::json!({
                        "organization": args.organization,
                        "accounts": accounts,
                        "totals": crate::report::totals(&audits),
                        "clusters": audits,
                    });
                    format!("{}\n", serde_json::to_string_pretty(&figures)?)
                }
            };
            crate::report::write_out(args.out.as_deref(), &text)?;
        }
    }
    verdict(&summary, false)
}

/// Each cluster the shards swept, `<account>/<infraID>`, with its status report's audit
/// (`<prefix><account>/<infraID>/tagwarden-status.json`); a cluster with no report yet is left out.
async fn cluster_audits(
    clients: &tagwarden::aws::Clients,
    bucket: &str,
    prefix: &str,
    summary: &Summary,
) -> Result<Vec<crate::report::ClusterAudit>, Failure> {
    let clusters: std::collections::BTreeSet<(String, String)> =
        summary.shards.iter().flat_map(|s| s.clusters.iter().map(|c| (s.account.clone(), c.clone()))).collect();
    let mut audits = Vec::new();
    for (account, cluster) in clusters {
        let key = format!("{prefix}{account}/{cluster}/{}", tagwarden::policy::STATUS_REPORT_NAME);
        let got = match clients.s3.get_object().bucket(bucket).key(&key).send().await {
            Ok(o) => o,
            Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_key()) => continue,
            Err(e) => return Err(anyhow::anyhow!("s3://{bucket}/{key}: {}", tagwarden::error_chain(&e)).into()),
        };
        let body = got
            .body
            .collect()
            .await
            .map(|b| b.into_bytes())
            .map_err(|e| anyhow::anyhow!("s3://{bucket}/{key}: {e}"))?;
        let value: serde_json::Value = serde_json::from_slice(&body)
            .with_context(|| format!("the status report s3://{bucket}/{key} is not JSON"))?;
        audits.push(crate::report::ClusterAudit::of_report(Some(&format!("{account}/{cluster}")), &value));
    }
    Ok(audits)
}

/// The organization per account: the shard outcomes' figures, and in line vs drifted from the
/// clusters' audits (their parts in each account), where they hold one.
fn account_rows(summary: &Summary, audits: &[crate::report::ClusterAudit]) -> Vec<crate::report::AccountRow> {
    use crate::report::AccountRow;
    let by_account = crate::report::totals(audits).by_account;
    let mut names: std::collections::BTreeSet<&String> = summary.last_sweep_ms.keys().collect();
    names.extend(summary.refused.keys());
    names.extend(summary.unreached.iter());
    names
        .into_iter()
        .map(|account| {
            let shards: Vec<&ShardReport> = summary.shards.iter().filter(|s| &s.account == account).collect();
            let clusters: std::collections::BTreeSet<&String> = shards.iter().flat_map(|s| s.clusters.iter()).collect();
            let owned = shards.iter().map(|s| s.owned as u64).sum();
            let (in_line, drifted) = match by_account.get(account.as_str()) {
                Some(k) => (k.in_line, Some(k.drifted)),
                None => (shards.iter().map(|s| s.in_line as u64).sum(), None),
            };
            AccountRow {
                account: account.clone(),
                clusters: clusters.len(),
                owned,
                in_line,
                drifted,
                compliance: AccountRow::compliance_of(in_line, drifted),
                failed: shards.iter().map(|s| s.failed as u64).sum(),
                last_sweep_ms: summary.last_sweep_ms.get(account).copied(),
                refused: summary.refused.get(account).cloned(),
                unreached: summary.unreached.contains(account),
            }
        })
        .collect()
}

/// Exit 2 when anything failed or an account was refused (its member role, or over the cap), each
/// named (or drifted, in a dry run).
fn verdict(summary: &Summary, drifted: bool) -> Result<(), Failure> {
    let errors: Vec<String> = summary
        .shards
        .iter()
        .filter(|s| s.error.is_some() && s.refused.is_none())
        .map(|s| format!("{}/{}", s.account, s.region))
        .collect();
    if summary.failed > 0 || !summary.refused.is_empty() || !errors.is_empty() {
        let mut why = format!("{} resource(s) failed", summary.failed);
        if !errors.is_empty() {
            why.push_str(&format!("; shard(s) not swept whole: {}", errors.join(", ")));
        }
        for (account, refused) in &summary.refused {
            why.push_str(&format!("; account {account} refused: {refused}"));
        }
        return Err(Failure::NotInLine(Some(anyhow::anyhow!(why))));
    }
    if drifted {
        return Err(Failure::NotInLine(None));
    }
    Ok(())
}

fn line(r: &ShardReport) -> String {
    match (&r.refused, &r.error) {
        (Some(why), _) => format!("{}/{}: refused: {why}", r.account, r.region),
        (None, Some(e)) if r.owned == 0 => format!("{}/{}: failed: {e}", r.account, r.region),
        _ => format!(
            "{}/{}: {} owned, {} in line, {} written, {} would write, {} failed, {} calls, {:.1} s",
            r.account, r.region, r.owned, r.in_line, r.written, r.would_write, r.failed, r.api_calls, r.seconds
        ),
    }
}

/// A preview's would-be writes, one line a resource: `<account>/<region> <resource>  key: old → new`.
fn would_writes(swept: &[(tagwarden::report::Outcome, ShardReport)]) -> String {
    let mut out = String::new();
    for (o, r) in swept {
        for rec in o.records.iter().filter(|rec| rec.status == tagwarden::report::Status::WouldApply) {
            let changes: Vec<String> = rec
                .audited
                .iter()
                .map(|c| format!("{}: {} → {}", c.key, c.old.as_deref().unwrap_or("(none)"), c.new))
                .collect();
            out.push_str(&format!(
                "would write   {}/{} {}  {}\n",
                r.account,
                r.region,
                rec.resource,
                changes.join(", ")
            ));
        }
    }
    out
}

fn human(s: &Summary) -> String {
    let mut out = format!(
        "organization  {} account(s), {} cluster(s), {} owned, {} in line, {} would write, {} failed\n",
        s.accounts, s.clusters, s.owned, s.in_line, s.would_write, s.failed
    );
    for (account, at) in &s.last_sweep_ms {
        let refused = s.refused.get(account).map(|w| format!(" - REFUSED: {w}")).unwrap_or_default();
        out.push_str(&format!(
            "account       {account}: last swept {} s ago{refused}\n",
            organization::age_seconds(*at)
        ));
    }
    for (account, why) in s.refused.iter().filter(|(a, _)| !s.last_sweep_ms.contains_key(*a)) {
        out.push_str(&format!("account       {account}: never swept - REFUSED: {why}\n"));
    }
    for account in &s.unreached {
        out.push_str(&format!(
            "account       {account}: not reached by the last scheduled run before its deadline (taken first next run)\n"
        ));
    }
    for r in &s.shards {
        out.push_str(&format!("  {}\n", line(r)));
        for f in &r.failures {
            out.push_str(&format!("    failed {f}\n"));
        }
    }
    out
}

/// The configuration's messages name the hub's variables; here, the flags.
fn flag_names(message: &str) -> String {
    message
        .replace("TAGWARDEN_ORGANIZATION", "--organization")
        .replace("TAGWARDEN_MEMBER_ROLE", "--member-role")
        .replace("TAGWARDEN_MEMBER_REGIONS", "--member-region")
        .replace("TAGWARDEN_CLUSTERS", "--cluster")
}
