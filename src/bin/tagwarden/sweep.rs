//! `tagwarden sweep`: plan (and unless `--dry-run`, write) every owned resource the policy covers,
//! on AWS (an S3 or SSM policy), Azure (a blob policy and the scopes to list) or Google Cloud (a
//! `gs://` policy and the Cloud Asset Inventory scopes to search).

mod aws;
mod azure;
mod engine;
pub mod gcp;
mod summary;

use anyhow::Context;
use tagwarden::cloud::Cloud;

use crate::Failure;

/// EC2 ids per `CreateTags`: the API's maximum, its descriptor's `Batch::Shared`.
const EC2_BATCH: usize = tagwarden::services::EC2.batch.max();

#[derive(clap::Args)]
pub struct Args {
    /// Where the policy is: s3://bucket/key, s3://bucket/prefix/, ssm:/parameter/name, or a cluster
    /// set (s3://bucket/prefix/*/, ssm:/path/*), whose every cluster is swept; on Azure a blob URL
    /// with its SAS (…/CONTAINER/BLOB?SAS, …/PREFIX/?SAS, …/PREFIX/*/?SAS); on Google Cloud
    /// gs://BUCKET/OBJECT.yaml, gs://BUCKET/PREFIX/ or gs://BUCKET/PREFIX*/. With --dry-run, also a
    /// file, a directory of layers or a cluster-set directory ('DIR/*/') on this machine: a
    /// preview of a policy before it is published (never written from: publish it first).
    #[arg(long, value_name = "SRC")]
    policy: String,
    /// A local policy's cloud, when its documents do not say (a bare tag map); else the policy's,
    /// or the cloud whose scopes --scope names (Azure's, or Google Cloud's projects/…).
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
    /// Google Cloud: a project, folder or organization whose Cloud Asset Inventory is searched
    /// (projects/PROJECT_ID, folders/NUMBER, organizations/NUMBER: the function's
    /// TAGWARDEN_SWEEP_SCOPES), with Application Default Credentials (gcloud auth
    /// application-default login); TAGWARDEN_GCP_ENDPOINT and STORAGE_EMULATOR_HOST point it at
    /// test servers.
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
    let cloud = if local {
        let cloud = crate::local::cloud_of(&args.policy, args.cloud, scoped(&args.scope))?;
        crate::local::check(&args.policy, cloud)?;
        cloud
    } else if args.policy.starts_with("gs://") {
        Cloud::Gcp
    } else if args.policy.starts_with("https://") || args.policy.starts_with("http://") {
        Cloud::Azure
    } else {
        Cloud::Aws
    };
    let swept = match cloud {
        Cloud::Azure => runtime.block_on(Box::pin(azure::sweep(&args)))?,
        Cloud::Gcp => runtime.block_on(Box::pin(gcp::sweep(&args)))?,
        Cloud::Aws => runtime.block_on(Box::pin(aws::sweep(&args)))?,
    };
    let summary = summary::summarize(&args, swept)?;
    summary::report(&args, &summary)
}

/// The cloud whose scopes `--scope` names: Google Cloud's Asset Inventory scopes
/// (`projects/…`, `folders/…`, `organizations/…`), else Azure's (any other).
fn scoped(scopes: &[String]) -> Option<Cloud> {
    match scopes.first() {
        None => None,
        Some(s) if gcp::is_gcp_scope(s) => Some(Cloud::Gcp),
        Some(_) => Some(Cloud::Azure),
    }
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

/// The clusters to sweep (`--cluster`): a set needs them, as the function needs
/// TAGWARDEN_CLUSTERS; a single policy is checked against them when given.
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
fn listed(args: &Args, set: bool, location: &impl std::fmt::Display) -> anyhow::Result<Option<Vec<String>>> {
    if set && args.clusters.is_empty() {
        anyhow::bail!(
            "{location} is a cluster set, swept only for the clusters you name: pass --cluster INFRA_ID for each (tagwarden status --policy {location} lists those that published)"
        );
    }
    Ok((!args.clusters.is_empty()).then(|| args.clusters.clone()))
}
