//! `tagwarden sweep`: plan (and unless `--dry-run`, write) every owned resource the policy covers.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::reconcile::Reconciler;
use tagwarden::aws::tags::Tagger;
use tagwarden::aws::Clients;
use tagwarden::report::{Record, Status};

use crate::input::print_json;
use crate::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Where the policy is: s3://bucket/key, s3://bucket/prefix/, ssm:/parameter/name, or a cluster
    /// set (s3://bucket/prefix/*/, ssm:/path/*), whose every cluster is swept.
    #[arg(long, value_name = "SRC")]
    policy: String,
    /// AWS region (default: the SDK's, from AWS_REGION or the profile).
    #[arg(long)]
    region: Option<String>,
    /// Plan only; exit 1 when any owned resource has drifted.
    #[arg(long)]
    dry_run: bool,
    /// Write calls in flight at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// EC2 resources per CreateTags call (the API takes at most 1000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=1000))]
    ec2_batch: u16,
    /// Print the summary (and every outcome record) as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Summary {
    policy: String,
    policy_version: Option<String>,
    dry_run: bool,
    #[serde(flatten)]
    totals: Counts,
    /// A cluster set's clusters, each on its own (empty for a single policy).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clusters: Vec<ClusterSummary>,
    seconds: f64,
    api_calls: BTreeMap<String, u64>,
    records: Vec<Record>,
}

#[derive(Serialize)]
struct ClusterSummary {
    #[serde(rename = "infraID")]
    infra_id: String,
    policy_version: Option<String>,
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
    failed: usize,
    /// Owned resources no API can tag, by type (not failures).
    unsupported: BTreeMap<String, usize>,
}

impl Counts {
    fn of<'r>(records: impl Iterator<Item = &'r Record> + Clone) -> Self {
        let count = |s: &[Status]| records.clone().filter(|r| s.contains(&r.status)).count();
        Counts {
            resources: records.clone().count(),
            owned: records.clone().count() - count(&[Status::NotOwned]),
            drifted: count(&[Status::Applied, Status::WouldApply, Status::LimitExceeded]),
            written: count(&[Status::Applied, Status::WouldApply]),
            limit_exceeded: count(&[Status::LimitExceeded]),
            failed: count(&[Status::Failed]),
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
        format!(
            "{} owned, {} drifted, {} {verb}, {} over the tag limit, {} failed",
            self.owned, self.drifted, self.written, self.limit_exceeded, self.failed
        )
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    let location: PolicyLocation = args.policy.parse().map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let summary = runtime.block_on(Box::pin(sweep(&args, location)))?;
    if args.json {
        print_json(&summary)?;
    } else {
        let t = &summary.totals;
        println!("policy        {} (version {})", summary.policy, summary.policy_version.as_deref().unwrap_or("-"));
        for c in &summary.clusters {
            let version = c.policy_version.as_deref().unwrap_or("-");
            println!("cluster       {} (version {version}): {}", c.infra_id, c.counts.line(summary.dry_run));
        }
        println!("resources     {} seen, {} owned", t.resources, t.owned);
        let verb = if summary.dry_run { "would write" } else { "written" };
        println!(
            "drift         {} drifted, {} {verb}, {} over the tag limit, {} failed",
            t.drifted, t.written, t.limit_exceeded, t.failed
        );
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
            println!("failed        {} ({}): {}", r.resource, r.resource_type, r.error.as_deref().unwrap_or_default());
        }
    }
    if summary.totals.failed > 0 {
        return Err(anyhow::anyhow!("{} resource(s) failed", summary.totals.failed).into());
    }
    if summary.dry_run && summary.totals.drifted > 0 {
        return Err(Failure::Invalid);
    }
    Ok(())
}

/// A progress bar on stderr when it is a terminal (never in pipes, CI logs or `--json` captures).
fn progress_bar() -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    let style = indicatif::ProgressStyle::with_template("{msg:>9} [{bar:30}] {pos}/{len} ({elapsed})").ok()?;
    bar.set_style(style.progress_chars("=> "));
    Some(bar)
}

async fn sweep(args: &Args, location: PolicyLocation) -> anyhow::Result<Summary> {
    let mut loader = tagwarden::aws::config_loader();
    if let Some(r) = &args.region {
        loader = loader.region(aws_config::Region::new(r.clone()));
    }
    let clients = Clients::new(&loader.load().await);
    let mut reconciler = Reconciler::new(
        Tagger::new(clients.clone()),
        policy_store(&clients, location.clone(), Duration::ZERO),
        Vec::new(),
    );
    reconciler.engine.dry_run = args.dry_run;
    reconciler.sweep.concurrency = args.concurrency;
    reconciler.sweep.ec2_batch = usize::from(args.ec2_batch);
    let bar = progress_bar();
    if let Some(bar) = &bar {
        let bar = bar.clone();
        reconciler.progress = Some(std::sync::Arc::new(move |phase: &str, done: u64, total: u64| {
            bar.set_message(phase.to_string());
            if total > 0 {
                bar.set_length(total);
            }
            bar.set_position(done);
        }));
    }
    let started = Instant::now();
    let out = reconciler.sweep(true).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(e) = &out.error {
        anyhow::bail!("{e}");
    }
    let mut clusters: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in &out.records {
        if let Some(id) = &r.infra_id {
            clusters.entry(id.as_str()).or_default().push(r);
        }
    }
    let clusters = clusters
        .into_iter()
        .map(|(id, records)| ClusterSummary {
            infra_id: id.to_string(),
            policy_version: records.iter().find(|r| !r.policy_version.contains('@')).map(|r| r.policy_version.clone()),
            counts: Counts::of(records.iter().copied()),
        })
        .collect();
    let set = reconciler.store.is_set();
    Ok(Summary {
        policy: location.to_string(),
        policy_version: if set { None } else { out.records.first().map(|r| r.policy_version.clone()) },
        dry_run: args.dry_run,
        totals: Counts::of(out.records.iter()),
        clusters,
        seconds: started.elapsed().as_secs_f64(),
        api_calls: clients.calls.snapshot(),
        records: out.records,
    })
}
