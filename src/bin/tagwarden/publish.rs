//! `tagwarden publish`: validate the cluster's policy and put it where the function reads it;
//! with `--from-cluster --watch`, keep doing so and mirror the status report into the cluster.

use std::path::PathBuf;
#[cfg(feature = "kube")]
use std::time::Duration;

use anyhow::Context;
use tagwarden::publish::{Outcome, PublishError};

use crate::input::{print_json, read_text};
use crate::target::Target;
use crate::Failure;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["from", "from_cluster"])))]
pub struct Args {
    /// The policy document to publish (an Infrastructure object, install-config.yaml,
    /// tagwarden.yaml or tag map), or - for standard input.
    #[arg(long, value_name = "FILE|-")]
    from: Option<PathBuf>,
    /// Read the policy from the Kubernetes API: the Infrastructure object `cluster`, or with
    /// --configmap a ConfigMap's tagwarden.yaml.
    #[arg(long)]
    from_cluster: bool,
    /// With --from-cluster: the ConfigMap NAMESPACE/NAME holding a tagwarden.yaml (clusters without
    /// an Infrastructure object).
    #[arg(long, value_name = "NS/NAME", requires = "from_cluster")]
    configmap: Option<String>,
    /// With --from-cluster: the kubeconfig (default: KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "FILE", requires = "from_cluster")]
    kubeconfig: Option<PathBuf>,
    /// With --from-cluster: republish on every change until stopped, and mirror the status report
    /// into a ConfigMap.
    #[arg(long, requires = "from_cluster")]
    watch: bool,
    /// With --watch: the ConfigMap the status report is mirrored into.
    #[arg(long, value_name = "NAME", default_value = "tagwarden-status")]
    status_configmap: String,
    /// With --watch: its namespace (default: POD_NAMESPACE, else tagwarden).
    #[arg(long, value_name = "NS")]
    status_namespace: Option<String>,
    /// With --watch: seconds between status mirrors.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    status_interval: u64,
    /// Where the function reads the policy: s3://bucket/key, s3://bucket/prefix/ (written as
    /// 10-cluster.yaml), ssm:/parameter/name, or a blob URL with a SAS.
    #[arg(long, value_name = "DEST")]
    to: String,
    /// AWS region (default: the SDK's, from AWS_REGION or the profile).
    #[arg(long)]
    region: Option<String>,
    /// Validate and show the changes; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the outcome as JSON (with --watch, one line per publish).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    runtime.block_on(Box::pin(run_async(args)))
}

async fn run_async(args: Args) -> Result<(), Failure> {
    let target = Target::connect(&args.to, args.region.as_deref()).await?;
    if args.from_cluster {
        return from_cluster(&args, &target).await;
    }
    let path = args.from.clone().unwrap_or_else(|| PathBuf::from("-"));
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the policy from standard input")?
    } else {
        read_text(&path)?
    };
    let outcome = target.publish(&text, args.dry_run).await.map_err(publish_error)?;
    show(&outcome, args.json, false)?;
    ended(&outcome)
}

fn publish_error(e: PublishError) -> Failure {
    Failure::Error(e.into())
}

/// Exit 1 for a refused document.
fn ended(outcome: &Outcome) -> Result<(), Failure> {
    if outcome.result == "refused" {
        Err(Failure::Invalid)
    } else {
        Ok(())
    }
}

fn show(o: &Outcome, json: bool, line: bool) -> anyhow::Result<()> {
    if json {
        if line {
            println!("{}", serde_json::to_string(o)?);
            return Ok(());
        }
        return print_json(o);
    }
    let version = o.version.as_deref().unwrap_or("-");
    match o.result {
        "refused" => {
            println!("refused   {}: the function would reject this document; nothing was written", o.location);
            for v in &o.violations {
                println!("  {v}");
            }
            return Ok(());
        }
        "unchanged" => println!("unchanged {} is already this document (version {version})", o.location),
        "would-write" => println!("would write {} (now version {version}); --dry-run wrote nothing", o.location),
        _ => println!("published {} (version {version})", o.location),
    }
    if let Some(id) = &o.infra_id {
        println!("infraID   {id}");
    }
    let c = &o.changes;
    for (k, v) in &c.added {
        println!("  + {k}={v}");
    }
    for (k, [old, new]) in &c.changed {
        println!("  ~ {k}={old} -> {new}");
    }
    for (k, v) in &c.removed {
        println!("  - {k}={v} (no longer enforced; tagwarden never removes it from resources)");
    }
    Ok(())
}

#[cfg(not(feature = "kube"))]
async fn from_cluster(_: &Args, _: &Target) -> Result<(), Failure> {
    Err(anyhow::anyhow!("--from-cluster: this build has no Kubernetes support; build tagwarden with --features kube")
        .into())
}

/// Back-off for a document that could not be published, doubling up to the most.
#[cfg(feature = "kube")]
const RETRY_FIRST: Duration = Duration::from_secs(1);
#[cfg(feature = "kube")]
const RETRY_MAX: Duration = Duration::from_secs(60);

#[cfg(feature = "kube")]
async fn from_cluster(args: &Args, target: &Target) -> Result<(), Failure> {
    use futures_util::StreamExt;
    use tagwarden::cluster::{self, Change, Source, StatusMirror};

    let source = match &args.configmap {
        Some(spec) => Source::configmap(spec).ok_or_else(|| {
            anyhow::anyhow!("--configmap {spec:?}: expected NAMESPACE/NAME, e.g. tagwarden/tagwarden-policy")
        })?,
        None => Source::Infrastructure,
    };
    let client = cluster::client(args.kubeconfig.as_deref()).await?;
    if !args.watch {
        let doc = cluster::read_once(&client, &source).await?;
        let outcome = target.publish(&doc.text, args.dry_run).await.map_err(publish_error)?;
        show(&outcome, args.json, false)?;
        return ended(&outcome);
    }
    let namespace = args
        .status_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "tagwarden".to_string());
    let mirror = StatusMirror::new(client.clone(), &namespace, &args.status_configmap, std::env::var("POD_NAME").ok());
    let changes = cluster::watch(client, source);
    let mut changes = std::pin::pin!(changes);
    let mut tick = tokio::time::interval(Duration::from_secs(args.status_interval));
    // Why the cluster's latest document is not published, shown in the mirrored report.
    let mut refused: Vec<String> = Vec::new();
    // The latest document not yet published (a conflict or an outage), retried with back-off:
    // it must not wait for the cluster's next change.
    let mut pending: Option<cluster::SourceDocument> = None;
    // In a cluster set, the report mirrored is this cluster's.
    let mut own_cluster: Option<String> = None;
    let mut backoff = RETRY_FIRST;
    let retry = tokio::time::sleep(Duration::ZERO);
    let mut retry = std::pin::pin!(retry);
    loop {
        let attempt = tokio::select! {
            change = changes.next() => match change {
                None => return Err(anyhow::anyhow!("the watch ended").into()),
                Some(Err(e)) => return Err(anyhow::Error::new(e).into()),
                Some(Ok(Change::Absent { reason })) => {
                    tracing::warn!(%reason, "the cluster publishes no policy now; what was published stays in force");
                    false
                }
                Some(Ok(Change::Document(doc))) => {
                    pending = Some(doc);
                    backoff = RETRY_FIRST;
                    true
                }
            },
            () = &mut retry, if pending.is_some() => true,
            _ = tick.tick() => {
                mirror_now(&mirror, target, own_cluster.as_deref(), &refused).await;
                false
            }
        };
        let Some(doc) = pending.as_ref().filter(|_| attempt) else { continue };
        match target.publish(&doc.text, args.dry_run).await {
            Ok(outcome) => {
                pending = None;
                refused = outcome.violations.clone();
                own_cluster = outcome.infra_id.clone().or(own_cluster);
                show(&outcome, args.json, true)?;
                mirror_now(&mirror, target, own_cluster.as_deref(), &refused).await;
            }
            // A lost race re-reads what the other publisher wrote and decides again.
            Err(e) => {
                tracing::error!(error = %e, resource_version = doc.resource_version, retry_in_s = backoff.as_secs_f64(), "publish failed; retrying");
                retry.as_mut().reset(tokio::time::Instant::now() + backoff);
                backoff = (backoff * 2).min(RETRY_MAX);
            }
        }
    }
}

/// Mirror the function's status report, with the publisher's own refusal on top: the cluster's
/// latest document was rejected, so the last good one stays in force.
#[cfg(feature = "kube")]
async fn mirror_now(
    mirror: &tagwarden::cluster::StatusMirror,
    target: &Target,
    own_cluster: Option<&str>,
    refused: &[String],
) {
    use tagwarden::policy::cache::PolicyState;
    let own = |reports: Vec<(Option<String>, Option<tagwarden::status::StatusReport>)>| {
        reports.into_iter().find(|(c, _)| c.is_none() || c.as_deref() == own_cluster).and_then(|(_, r)| r)
    };
    let report = match target.status().await.map(own) {
        Ok(Some(mut report)) => {
            if !refused.is_empty() {
                report.policy.state = PolicyState::RejectedKeepingLastGood;
                report.policy.errors = refused.to_vec();
            }
            report
        }
        Ok(None) => return tracing::info!("no status report yet: the function has not swept"),
        Err(e) => return tracing::warn!(error = %e, "status report unreadable"),
    };
    if let Err(e) = mirror.mirror(&report).await {
        tracing::warn!(error = %e, "status mirror failed");
    }
}
