//! `tagwarden sweep`: plan (and unless `--dry-run`, write) every owned resource the policy covers,
//! on AWS (an S3 or SSM policy) or Azure (a blob policy and the scopes to list).

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use tagwarden::report::{Outcome, Record, Status};

use crate::input::print_json;
use crate::Failure;

/// EC2 ids per `CreateTags`: the API's maximum, its descriptor's `Batch::Shared`.
const EC2_BATCH: usize = tagwarden::services::EC2.batch.max();

#[derive(clap::Args)]
pub struct Args {
    /// Where the policy is: s3://bucket/key, s3://bucket/prefix/, ssm:/parameter/name, or a cluster
    /// set (s3://bucket/prefix/*/, ssm:/path/*), whose every cluster is swept; on Azure a blob URL
    /// with its SAS (…/CONTAINER/BLOB?SAS, …/PREFIX/?SAS, …/PREFIX/*/?SAS). With --dry-run, also a
    /// file, a directory of layers or a cluster-set directory ('DIR/*/') on this machine: a
    /// preview of a policy before it is published (never written from: publish it first).
    #[arg(long, value_name = "SRC")]
    policy: String,
    /// A local policy's cloud, when its documents do not say (a bare tag map); else the policy's,
    /// or Azure when --scope is given.
    #[arg(long)]
    cloud: Option<tagwarden::cloud::Cloud>,
    /// The deployment's mode, if you know it (its TAGWARDEN_MODE, also read from the
    /// environment): with `audit`, a sweep without --dry-run is refused. A cluster whose policy
    /// says `enforce: false`, or whose status report says it is audited, is refused too.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// A cluster (infraID) to sweep; repeat for several. A cluster set is swept only for the
    /// clusters named here (as the function enforces only those of TAGWARDEN_CLUSTERS); for a
    /// single policy, its infraID must be one of them.
    #[arg(long = "cluster", value_name = "INFRA_ID")]
    clusters: Vec<String>,
    /// AWS region (default: the SDK's, from AWS_REGION or the profile).
    #[arg(long)]
    region: Option<String>,
    /// Azure: a subscription, resource group or management group to list owned resources in
    /// (/subscriptions/ID[/resourceGroups/NAME], /providers/Microsoft.Management/managementGroups/ID);
    /// repeat for several. The ARM token is read from
    /// TAGWARDEN_ARM_TOKEN (az account get-access-token --resource https://management.azure.com/).
    #[arg(long, value_name = "ID")]
    scope: Vec<String>,
    /// Azure: the Resource Manager endpoint (sovereign clouds, tests).
    #[arg(long, value_name = "URL", default_value = "https://management.azure.com")]
    arm_endpoint: String,
    /// Azure: list through ARM's Resources - List only, not Azure Resource Graph (a cloud without
    /// it, or a token without Reader, whose unreadable scopes Resource Graph leaves out silently).
    /// Resource Graph lists a thousand owned resources a query with their tags; ARM's listing has
    /// no tags, so every owned resource is read.
    #[arg(long)]
    no_resource_graph: bool,
    /// Plan only; exit 2 when any owned resource has drifted.
    #[arg(long)]
    dry_run: bool,
    /// Resources reconciled, and write calls in flight, at once.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// EC2 resources per CreateTags call (at most, and by default, what the API takes).
    #[arg(long, default_value_t = EC2_BATCH as u16, value_parser = clap::value_parser!(u16).range(1..=EC2_BATCH as i64))]
    ec2_batch: u16,
    /// Print the summary (and every outcome record) as JSON.
    #[arg(long)]
    json: bool,
    /// Instead of the summary, the audit report of what was found, as `tagwarden status` shows
    /// it: its table, its figures as JSON, CSV (one row per would-be write of a key, and per
    /// failing resource) or one self-contained HTML page.
    #[arg(long, value_enum)]
    format: Option<crate::report::Format>,
    /// Write the export to FILE instead of stdout.
    #[arg(long, value_name = "FILE", requires = "format")]
    out: Option<std::path::PathBuf>,
}

/// A deployment's mode: `audit` evaluates everything and writes nothing.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Audit,
    Enforce,
}

/// The deployment mode setting, as the function reads it.
pub const MODE_ENV: &str = "TAGWARDEN_MODE";

#[derive(Serialize, Default)]
struct Summary {
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

pub fn run(args: Args) -> Result<(), Failure> {
    if let Some(why) = args.clusters.iter().find_map(|c| tagwarden::policy::clusters::valid_infra_id(c).err()) {
        return Err(Failure::Invalid(Some(anyhow::anyhow!("--cluster {why}"))));
    }
    let local = crate::local::is_local(&args.policy);
    if local && !args.dry_run {
        return Err(Failure::Error(anyhow::anyhow!(
            "{}: a policy on this machine is previewed only (--dry-run): the function enforces the published policy, so a write from an unpublished one would be undone or redone by its next sweep. Publish it (tagwarden publish --from {} --to SRC), then sweep SRC",
            args.policy,
            args.policy
        )));
    }
    if !args.dry_run {
        refuse_if_audited_here(&args)?;
    }
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    let azure = if local {
        let cloud = crate::local::cloud_of(&args.policy, args.cloud, !args.scope.is_empty())?;
        crate::local::check(&args.policy, cloud)?;
        cloud == tagwarden::cloud::Cloud::Azure
    } else {
        args.policy.starts_with("https://") || args.policy.starts_with("http://")
    };
    let swept = if azure {
        runtime.block_on(Box::pin(sweep_azure(&args)))?
    } else {
        runtime.block_on(Box::pin(sweep_aws(&args)))?
    };
    let summary = summarize(&args, swept)?;
    if let Some(format) = args.format {
        export(&args, &summary, format)?;
    } else if args.json {
        print_json(&summary)?;
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

/// What one cloud's sweep did, before it is summarized.
struct Swept {
    policy: String,
    is_set: bool,
    out: Outcome,
    /// Each cluster whose policy was in force, with its version.
    in_force: Vec<(String, String)>,
    api_calls: BTreeMap<String, u64>,
    seconds: f64,
}

/// A progress bar on stderr when it is a terminal (never in pipes, CI logs or `--json` captures),
/// and the callback the sweep moves it with (phase, done, total).
#[cfg(any(feature = "aws", feature = "azure"))]
fn progress() -> (Option<indicatif::ProgressBar>, Option<tagwarden::enforce::sweep::Progress>) {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return (None, None);
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg:>9} [{bar:30}] {pos}/{len} ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    let moved = bar.clone();
    let callback: tagwarden::enforce::sweep::Progress =
        std::sync::Arc::new(move |phase: &str, done: u64, total: u64| {
            moved.set_message(phase.to_string());
            if total > 0 {
                moved.set_length(total);
            }
            moved.set_position(done);
        });
    (Some(bar), Some(callback))
}

/// Run `sweep`, clearing the progress bar when it ends; and how long it took.
#[cfg(any(feature = "aws", feature = "azure"))]
async fn timed(
    bar: Option<indicatif::ProgressBar>,
    sweep: impl std::future::Future<Output = Outcome>,
) -> (Outcome, f64) {
    let started = Instant::now();
    let out = sweep.await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    (out, started.elapsed().as_secs_f64())
}

/// The engine over `adapter` and `store`, as the CLI runs it: `--concurrency`, `--dry-run`, a
/// progress bar. Without --dry-run, first says whose credentials write (`caller`) and refuses a
/// cluster in audit.
#[cfg(any(feature = "aws", feature = "azure"))]
async fn run_engine<A: tagwarden::enforce::Adapter>(
    args: &Args,
    adapter: A,
    store: tagwarden::policy_store::PolicyStore<A::Source>,
    caller: impl std::future::Future<Output = Result<String, String>>,
    api_calls: impl Fn() -> BTreeMap<String, u64>,
) -> anyhow::Result<Swept> {
    use tagwarden::enforce::Engine;
    let mut engine = Engine::new(adapter, store, Vec::new());
    engine.set_concurrency(args.concurrency);
    engine.dry_run = args.dry_run;
    // A policy that cannot be read writes nothing (the sweep fails closed and says why): there
    // is no write to name the credentials of.
    let mut rejected_before = Vec::new();
    let write = if args.dry_run {
        false
    } else {
        let (write, rejected) = refuse_if_audited(&engine.store).await?;
        rejected_before = rejected;
        write
    };
    if write {
        let who = caller.await.map_err(|why| {
            anyhow::anyhow!(
                "a sweep without --dry-run writes with your credentials, and they could not be read ({why}): fix them, or preview with --dry-run"
            )
        })?;
        eprintln!(
            "writing as   {who}: these writes are made with YOUR credentials, not the function's role (whose grants, conditioned on the cluster's ownership tag, do not bound them); --dry-run writes nothing"
        );
    }
    let (bar, callback) = progress();
    engine.progress = callback;
    let (mut out, seconds) = timed(bar, engine.sweep(true, None, None)).await;
    for r in rejected_before {
        if !out.rejected.iter().any(|o| o.cluster == r.cluster) {
            out.metrics.policy_rejected += 1;
            out.rejected.push(r);
        }
    }
    Ok(Swept {
        policy: engine.store.location(),
        is_set: engine.store.is_set(),
        out,
        in_force: engine.store.in_force().await,
        api_calls: api_calls(),
        seconds,
    })
}

/// Refused before anything is read: the deployment's mode as the person says it (`--mode`) or
/// as the environment carries it (`TAGWARDEN_MODE`, the function's own setting).
fn refuse_if_audited_here(args: &Args) -> Result<(), Failure> {
    let env = std::env::var(MODE_ENV).ok().filter(|m| !m.trim().is_empty());
    let from_env = match env.as_deref().map(str::trim) {
        None => None,
        Some(m) if m.eq_ignore_ascii_case("audit") => Some(Mode::Audit),
        Some(m) if m.eq_ignore_ascii_case("enforce") => Some(Mode::Enforce),
        Some(m) => {
            return Err(Failure::Error(anyhow::anyhow!("{MODE_ENV}={m:?} is not a mode: expected audit or enforce")))
        }
    };
    let (mode, from) = match (args.mode, from_env) {
        (Some(Mode::Audit), _) => (Mode::Audit, "--mode audit".to_string()),
        (_, Some(Mode::Audit)) => (Mode::Audit, format!("{MODE_ENV}=audit")),
        _ => (Mode::Enforce, String::new()),
    };
    if mode == Mode::Audit {
        let why = anyhow::anyhow!(
            "the deployment is in audit ({from}): tagwarden writes no tag there; preview with --dry-run, or switch the deployment to enforce first"
        );
        return Err(Failure::Invalid(Some(why)));
    }
    Ok(())
}

/// Refuses a write to any swept cluster that is audited: its policy says `enforce: false`, or
/// its status report (what the function last ran with) says its mode is `audit`. The policy is
/// read by the store's own loader, as the function reads it. Whether any policy is in force.
#[cfg(any(feature = "aws", feature = "azure"))]
async fn refuse_if_audited<S: tagwarden::policy_store::PolicySource>(
    store: &tagwarden::policy_store::PolicyStore<S>,
) -> anyhow::Result<(bool, Vec<tagwarden::report::RejectedPolicy>)> {
    // The store reports a rejected version once, on the load that finds it: this load's are
    // handed to the sweep's outcome, which would not see them again.
    let loaded = store.load(true).await;
    for r in &loaded.rejected {
        tagwarden::status_store::report_rejection(store, r).await;
    }
    let rejected = loaded
        .rejected
        .iter()
        .map(|r| tagwarden::report::RejectedPolicy {
            cluster: r.cluster.clone(),
            in_force: r.in_force.clone(),
            errors: r.errors.clone(),
        })
        .collect();
    let Ok(policies) = loaded.policies else { return Ok((false, rejected)) }; // the sweep itself says why nothing is in force
    let mut audited = Vec::new();
    for p in policies.iter() {
        let cluster = policies.is_set().then_some(p.infra_id.as_str());
        if !p.policy.enforce {
            audited.push(format!(
                "cluster {} is audited by its policy (enforce: false at {}): set `enforce: true` in its policy and publish it",
                p.infra_id,
                store.location_for(&p.infra_id)
            ));
            continue;
        }
        let report = store.source.get_status(cluster).await.ok().flatten();
        let mode = report
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v.pointer("/audit/mode").and_then(|m| m.as_str()).map(str::to_owned));
        if mode.as_deref() == Some("audit") {
            audited.push(format!(
                "cluster {} is audited: its last status report says mode audit (the deployment's TAGWARDEN_MODE, or its policy): switch the deployment (or the cluster's policy) to enforce",
                p.infra_id
            ));
        }
    }
    if !audited.is_empty() {
        let why = format!("{}; or preview with --dry-run, which writes nothing", audited.join("; "));
        return Err(crate::input::InvalidInput(why).into());
    }
    Ok((true, rejected))
}

#[cfg(feature = "aws")]
async fn sweep_aws(args: &Args) -> anyhow::Result<Swept> {
    use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
    use tagwarden::aws::Clients;
    use tagwarden::aws::Tagger;

    let local = crate::local::is_local(&args.policy);
    let location: Option<PolicyLocation> =
        if local { None } else { Some(args.policy.parse().map_err(anyhow::Error::msg)?) };
    let mut loader = tagwarden::aws::config_loader()?;
    if let Some(r) = &args.region {
        loader = loader.region(aws_config::Region::new(r.clone()));
    }
    let config = loader.load().await;
    tagwarden::aws::preflight(&config).await?;
    let clients = Clients::new(&config);
    let tagger = Tagger { ec2_batch: usize::from(args.ec2_batch), ..Tagger::new(clients.clone()) };
    let sts = tagwarden::aws::sdk::sts::Client::new(&config);
    let caller = async move {
        match sts.get_caller_identity().send().await {
            Ok(out) => out.arn().map(str::to_owned).ok_or_else(|| "STS named no ARN".to_string()),
            Err(e) => {
                Err(format!("sts:GetCallerIdentity: {}", tagwarden::aws::sdk::sts::error::DisplayErrorContext(e)))
            }
        }
    };
    let calls = clients.calls.clone();
    let api_calls = move || calls.snapshot();
    match location {
        None => {
            let source = crate::local::LocalSource::open(&args.policy, tagwarden::cloud::Cloud::Aws)?;
            let set = source.is_set();
            let clusters = listed(args, set, &args.policy)?;
            let store =
                tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO).with_clusters(clusters);
            run_engine(args, crate::local::Local(tagger), store, caller, api_calls).await
        }
        Some(location) => {
            let set = matches!(location, PolicyLocation::S3Set { .. } | PolicyLocation::SsmSet { .. });
            let clusters = listed(args, set, &location)?;
            let store = policy_store(&clients, location.clone(), std::time::Duration::ZERO).with_clusters(clusters);
            let mut swept = run_engine(args, tagger, store, caller, api_calls).await?;
            swept.policy = location.to_string();
            Ok(swept)
        }
    }
}

#[cfg(not(feature = "aws"))]
async fn sweep_aws(args: &Args) -> anyhow::Result<Swept> {
    anyhow::bail!("{}: this build has no AWS support; build tagwarden with --features aws", args.policy)
}

#[cfg(feature = "azure")]
async fn sweep_azure(args: &Args) -> anyhow::Result<Swept> {
    use std::sync::Arc;
    use tagwarden::azure::adapter::ArmTagger;
    use tagwarden::azure::arm::arm_audience;
    use tagwarden::azure::arm::ArmClient;
    use tagwarden::azure::blob_store::{blob_policy_store, BlobLocation};
    use tagwarden::azure::identity::ManagedIdentity;
    use tagwarden::calls::CallCounter;

    let local = crate::local::is_local(&args.policy);
    let location: Option<BlobLocation> =
        if local { None } else { Some(args.policy.parse().map_err(anyhow::Error::msg)?) };
    if let Some(location) = &location {
        if !location.has_sas() {
            anyhow::bail!(
                "{location}: the CLI reads the policy blob with a SAS only; append one to the URL (az storage blob generate-sas --as-user …)"
            );
        }
    }
    if args.scope.is_empty() {
        anyhow::bail!(
            "an Azure sweep needs --scope: the subscription (/subscriptions/ID), resource group (/subscriptions/ID/resourceGroups/NAME) or management group (/providers/Microsoft.Management/managementGroups/ID) to list owned resources in; repeat it for several"
        );
    }
    if let Err(why) = tagwarden::azure::resource_graph::Scopes::parse(&args.scope) {
        anyhow::bail!("--scope: {why}: expected /subscriptions/ID[/resourceGroups/NAME] or /providers/Microsoft.Management/managementGroups/ID");
    }
    let token = std::env::var("TAGWARDEN_ARM_TOKEN").ok().filter(|t| !t.trim().is_empty()).context(
        "an Azure sweep needs an ARM access token in TAGWARDEN_ARM_TOKEN: export TAGWARDEN_ARM_TOKEN=$(az account get-access-token --resource https://management.azure.com/ --query accessToken -o tsv)",
    )?;
    let endpoint: tagwarden::azure::reqwest::Url =
        args.arm_endpoint.parse().with_context(|| format!("--arm-endpoint {:?} is not a URL", args.arm_endpoint))?;
    let http = tagwarden::azure::http_client(std::time::Duration::from_secs(30)).context("HTTP client")?;
    let calls = CallCounter::default();
    let audience = arm_audience(&endpoint, std::env::var("TAGWARDEN_ARM_AUDIENCE").ok().as_deref());
    // A token whose claims cannot be read still writes as its principal: say so, unnamed (ARM
    // verifies the token, not this).
    let principal = Ok(token_principal(token.trim())
        .unwrap_or_else(|why| format!("the principal of TAGWARDEN_ARM_TOKEN (not named: {why})")));
    let caller = async move { principal };
    let identity = Arc::new(ManagedIdentity::given(&audience, token.trim().to_string(), calls.clone()));
    let arm = ArmClient::new(http.clone(), endpoint, identity, calls.clone()).with_audience(&audience);
    let adapter = ArmTagger { resource_graph: !args.no_resource_graph, ..ArmTagger::new(arm, args.scope.clone()) };
    let counted = calls.clone();
    let api_calls = move || counted.snapshot();
    match location {
        None => {
            let source = crate::local::LocalSource::open(&args.policy, tagwarden::cloud::Cloud::Azure)?;
            let set = source.is_set();
            let clusters = listed(args, set, &args.policy)?;
            let store =
                tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO).with_clusters(clusters);
            run_engine(args, crate::local::Local(adapter), store, caller, api_calls).await
        }
        Some(location) => {
            let clusters = listed(args, location.is_set, &location)?;
            let store = blob_policy_store(location.clone(), std::time::Duration::ZERO, http, None, calls.clone())
                .with_clusters(clusters);
            let mut swept = run_engine(args, adapter, store, caller, api_calls).await?;
            swept.policy = location.to_string();
            Ok(swept)
        }
    }
}

/// Who an ARM access token names: its `upn` (or `unique_name`, `email`), else its application
/// (`appid`/`azp`) and object (`oid`) ids — read from the token's claims, not verified (ARM
/// verifies it; this only says whose it is).
#[cfg(feature = "azure")]
fn token_principal(token: &str) -> Result<String, String> {
    let payload = token.split('.').nth(1).ok_or("TAGWARDEN_ARM_TOKEN is not a JWT")?;
    let bytes = base64url(payload).ok_or("TAGWARDEN_ARM_TOKEN's claims are not base64url")?;
    let claims: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("TAGWARDEN_ARM_TOKEN's claims are not JSON: {e}"))?;
    let claim = |k: &str| claims.get(k).and_then(|v| v.as_str()).filter(|v| !v.is_empty());
    let tenant = claim("tid").map(|t| format!(", tenant {t}")).unwrap_or_default();
    if let Some(user) = claim("upn").or_else(|| claim("unique_name")).or_else(|| claim("email")) {
        return Ok(format!("{user} (object id {}{tenant})", claim("oid").unwrap_or("?")));
    }
    match (claim("appid").or_else(|| claim("azp")), claim("oid")) {
        (Some(app), oid) => {
            Ok(format!("service principal, client id {app} (object id {}{tenant})", oid.unwrap_or("?")))
        }
        (None, Some(oid)) => Ok(format!("principal object id {oid}{tenant}")),
        (None, None) => Err("TAGWARDEN_ARM_TOKEN names no principal (no upn, appid or oid claim)".into()),
    }
}

/// Base64url without padding (a JWT's segments), or standard base64.
#[cfg(feature = "azure")]
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    Some(out)
}

#[cfg(not(feature = "azure"))]
async fn sweep_azure(args: &Args) -> anyhow::Result<Swept> {
    anyhow::bail!("{}: this build has no Azure support; build tagwarden with --features azure", args.policy)
}

/// The clusters to sweep (`--cluster`): a set needs them, as the function needs
/// TAGWARDEN_CLUSTERS; a single policy is checked against them when given.
#[cfg(any(feature = "aws", feature = "azure"))]
fn listed(args: &Args, set: bool, location: &impl std::fmt::Display) -> anyhow::Result<Option<Vec<String>>> {
    if set && args.clusters.is_empty() {
        anyhow::bail!(
            "{location} is a cluster set, swept only for the clusters you name: pass --cluster INFRA_ID for each (tagwarden status --policy {location} lists those that published)"
        );
    }
    Ok((!args.clusters.is_empty()).then(|| args.clusters.clone()))
}

fn summarize(args: &Args, swept: Swept) -> Result<Summary, Failure> {
    let Swept { policy, is_set, mut out, in_force, api_calls, seconds } = swept;
    if let Some(e) = &out.error {
        return Err(anyhow::anyhow!("{e}").into());
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
