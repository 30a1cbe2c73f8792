//! `tagwarden publish`: validate the cluster's policy and put it where the function reads it;
//! with `--from-cluster --watch`, keep doing so and mirror the status report into the cluster.

use std::path::PathBuf;
#[cfg(feature = "kube")]
use std::sync::Arc;
#[cfg(feature = "kube")]
use std::time::Duration;

use anyhow::Context;
use tagwarden::publish::{PublishError, PublishOutcome, PublishResult};

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
    /// With --from-cluster on a management cluster: publish one policy per cluster of its set, each
    /// into its own folder of the cluster set given by --to: hypershift (each HostedCluster with
    /// its NodePools), capa (each AWSCluster) or capz (each AzureCluster). With --watch, again on
    /// every change (with --listen's health and metrics; each cluster's status report is not
    /// mirrored: `tagwarden status` reads them).
    #[arg(long, value_name = "KIND", requires = "from_cluster", conflicts_with_all = ["configmap", "cluster"])]
    cluster_set: Option<String>,
    /// With --cluster-set: read only this namespace (default: every namespace).
    #[arg(long, value_name = "NS", requires = "cluster_set")]
    namespace: Option<String>,
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
    /// With --watch: seconds between re-reads of the published object, which is rewritten if it
    /// was changed or deleted at the store.
    #[arg(long, value_name = "SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    resync: u64,
    /// With --watch: serve /healthz, /readyz and /metrics (Prometheus) on this address, e.g.
    /// 0.0.0.0:8080.
    #[arg(long, value_name = "ADDR", requires = "watch")]
    listen: Option<std::net::SocketAddr>,
    /// Where the function reads the policy: s3://bucket/key, s3://bucket/prefix/ (written as
    /// 10-cluster.yaml), ssm:/parameter/name, a blob URL with a SAS, or gs://bucket/object.yaml,
    /// gs://bucket/prefix/ (Application Default Credentials); or a cluster set
    /// (s3://bucket/prefix/*/, ssm:/path/*, …/PREFIX/*/, gs://bucket/prefix*/), with --cluster.
    #[arg(long, value_name = "DEST")]
    to: String,
    /// Into a cluster set: the cluster (infraID) whose folder the policy goes into; the document
    /// must name the same. With --from-cluster and the Infrastructure object, its
    /// status.infrastructureName is used (and this, if given, must equal it).
    #[arg(long, value_name = "INFRA_ID")]
    cluster: Option<String>,
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
    if args.from_cluster {
        return from_cluster(&args).await;
    }
    let target = Target::connect(&args.to, args.region.as_deref(), true).await?;
    let path = args.from.clone().unwrap_or_else(|| PathBuf::from("-"));
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading the policy from standard input")?
    } else {
        read_text(&path)?
    };
    let outcome = target.publish(&text, args.cluster.as_deref(), args.dry_run).await.map_err(publish_error)?;
    show(&outcome, args.json, false)?;
    ended(&outcome)
}

/// A lost race is a write that did not land (exit 2: run again); anything else kept the
/// publisher from running (exit 3).
fn publish_error(e: PublishError) -> Failure {
    match e {
        PublishError::Conflict { .. } | PublishError::Raced { .. } => Failure::NotInLine(Some(e.into())),
        PublishError::Cloud(_) => Failure::Error(e.into()),
    }
}

/// Exit 1 for a refused document.
fn ended(outcome: &PublishOutcome) -> Result<(), Failure> {
    if outcome.result == PublishResult::Refused {
        Err(Failure::Invalid(None))
    } else {
        Ok(())
    }
}

fn show(o: &PublishOutcome, json: bool, line: bool) -> anyhow::Result<()> {
    if json {
        if line {
            println!("{}", serde_json::to_string(o)?);
            return Ok(());
        }
        return print_json(o);
    }
    let version = o.version.as_deref().unwrap_or("-");
    match o.result {
        PublishResult::Refused => {
            println!("refused   {}: the function would reject this document; nothing was written", o.location);
            for v in &o.violations {
                println!("  {v}");
            }
            return Ok(());
        }
        PublishResult::Unchanged => println!("unchanged {} is already this document (version {version})", o.location),
        PublishResult::WouldWrite => {
            println!("would write {} (now version {version}); --dry-run wrote nothing", o.location)
        }
        PublishResult::Written => println!("published {} (version {version})", o.location),
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
async fn from_cluster(_: &Args) -> Result<(), Failure> {
    Err(anyhow::anyhow!("--from-cluster: this build has no Kubernetes support; build tagwarden with --features kube")
        .into())
}

/// One cluster of a set, as `--cluster-set` reports it.
#[cfg(feature = "kube")]
#[derive(serde::Serialize)]
struct SetRow {
    /// `HostedCluster clusters/hc-1`.
    object: String,
    cluster: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<PublishOutcome>,
    /// Why nothing was published for it (what was published before stays in force).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `--cluster-set`: each member's document published on its own, so one refused or failing
/// cluster never holds back another; each one not published gets a Warning Event on its object.
/// Exit 3 if any publish failed, else 2 if any lost a race, else 1 if any was refused.
#[cfg(feature = "kube")]
async fn publish_set(
    args: &Args,
    kind: tagwarden::cluster::cluster_set::SetKind,
    client: &tagwarden::cluster::Client,
) -> Result<(), Failure> {
    use tagwarden::cluster::{self, cluster_set};
    let target = set_target(args).await?;
    let members = cluster_set::read_set(client, kind, args.namespace.as_deref()).await?;
    let (mut refused, mut raced, mut failed) = (0, 0, 0);
    let mut rows = Vec::with_capacity(members.len());
    let instance = std::env::var("POD_NAME").ok();
    for m in members {
        let object = m.object.to_string();
        let (outcome, error, warning) = match (&m.document, &m.cluster) {
            (Ok(doc), Some(cluster)) => match target.publish(&doc.text, Some(cluster), args.dry_run).await {
                Ok(o) if o.result == PublishResult::Refused => {
                    refused += 1;
                    let note = cluster::publisher::set::refused_note(cluster, &o);
                    (Some(o), None, Some(("PolicyRefused", note)))
                }
                Ok(o) => (Some(o), None, None),
                Err(e) => {
                    match e {
                        PublishError::Conflict { .. } | PublishError::Raced { .. } => raced += 1,
                        PublishError::Cloud(_) => failed += 1,
                    }
                    let why = format!("{:#}", anyhow::Error::from(e));
                    (None, Some(why.clone()), Some(("PublishFailed", why)))
                }
            },
            (Err(why), _) => {
                refused += 1;
                let why = &why.to_string();
                (None, Some(why.clone()), Some(("NoPolicy", why.clone())))
            }
            (Ok(_), None) => {
                refused += 1;
                let why = "the object names no cluster".to_string();
                (None, Some(why.clone()), Some(("NoPolicy", why)))
            }
        };
        if let (Some((reason, note)), false) = (warning, args.dry_run) {
            if let Err(e) = cluster::warn_member(client, instance.clone(), &m.object, reason, note).await {
                tracing::warn!(object = %object, error = %e, "could not record the Event");
            }
        }
        rows.push(SetRow { object, cluster: m.cluster, outcome, error });
    }
    if args.json {
        print_json(&serde_json::json!({ "kind": kind.to_string(), "clusters": rows }))?;
    } else if rows.is_empty() {
        println!(
            "no cluster of kind {kind} found{}",
            args.namespace.as_ref().map(|n| format!(" in namespace {n}")).unwrap_or_default()
        );
    } else {
        for row in &rows {
            println!("{}{}", row.object, row.cluster.as_ref().map(|c| format!(" → cluster {c}")).unwrap_or_default());
            match (&row.outcome, &row.error) {
                (Some(o), _) => show(o, false, false)?,
                (None, Some(e)) => println!("not published: {e}"),
                (None, None) => {}
            }
        }
    }
    match (failed, raced, refused) {
        (0, 0, 0) => Ok(()),
        (0, 0, n) => {
            Err(Failure::Invalid(Some(anyhow::anyhow!("{n} of the set's clusters published nothing (see above)"))))
        }
        (0, n, _) => {
            Err(Failure::NotInLine(Some(anyhow::anyhow!("{n} of the set's publishes lost a race: run again"))))
        }
        (n, _, _) => Err(Failure::Error(anyhow::anyhow!("{n} of the set's publishes failed (see above)"))),
    }
}

/// The cluster set `--to` names. A set's members go each into its own folder: a single location
/// would take each in turn, so one is refused.
#[cfg(feature = "kube")]
async fn set_target(args: &Args) -> Result<Target, Failure> {
    let to = &args.to;
    if !to.contains('*') {
        return Err(Failure::Invalid(Some(anyhow::anyhow!(
            "--to {to}: --cluster-set publishes each cluster into its own folder of a cluster set; name one, e.g. s3://BUCKET/clusters/*/, ssm:/PATH/*, or a blob prefix ending in */"
        ))));
    }
    Ok(Target::connect(to, args.region.as_deref(), true).await?)
}

/// The namespace of the status ConfigMaps: `--status-namespace`, else the pod's, else tagwarden.
#[cfg(feature = "kube")]
fn status_namespace(args: &Args) -> String {
    args.status_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "tagwarden".to_string())
}

#[cfg(feature = "kube")]
async fn from_cluster(args: &Args) -> Result<(), Failure> {
    use tagwarden::cluster::publisher::{self, one, set, Settings};
    use tagwarden::cluster::{self, ClusterSource, StatusMirror};

    let source = match &args.configmap {
        Some(spec) => ClusterSource::configmap(spec).ok_or_else(|| {
            anyhow::anyhow!("--configmap {spec:?}: expected NAMESPACE/NAME, e.g. tagwarden/tagwarden-policy")
        })?,
        None => ClusterSource::Infrastructure,
    };
    if args.watch {
        refuse_sas_in_location(&args.to).map_err(|e| Failure::Invalid(Some(e)))?;
    }
    let client = cluster::client(args.kubeconfig.as_deref()).await?;
    let set_kind = match &args.cluster_set {
        Some(kind) => Some(
            kind.parse::<cluster::cluster_set::SetKind>()
                .map_err(|e| Failure::Invalid(Some(anyhow::anyhow!("--cluster-set: {e}"))))?,
        ),
        None => None,
    };
    if !args.watch {
        if let Some(kind) = set_kind {
            return publish_set(args, kind, &client).await;
        }
        let target = Target::connect(&args.to, args.region.as_deref(), true).await?;
        let doc = cluster::read_once(&client, &source).await?;
        let cluster = publisher::proven_cluster(args.cluster.as_deref(), &source, &doc)
            .map_err(|e| Failure::Invalid(Some(e.into())))?;
        let outcome = target.publish(&doc.text, cluster.as_deref(), args.dry_run).await.map_err(publish_error)?;
        show(&outcome, args.json, false)?;
        return ended(&outcome);
    }
    // A set's location is checked before anything starts.
    let set_target = match set_kind {
        Some(_) => Some(set_target(args).await?),
        None => None,
    };
    let health = Arc::new(cluster::health::Health::default());
    if let Some(addr) = args.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--listen {addr}: cannot listen there; choose a free port"))?;
        tokio::spawn(cluster::health::serve(listener, health.clone()));
    }
    let settings = Settings {
        debounce: publisher::DEBOUNCE,
        resync: Duration::from_secs(args.resync),
        status_interval: Duration::from_secs(args.status_interval),
        dry_run: args.dry_run,
        instance: std::env::var("POD_NAME").ok(),
    };
    let sink = Arc::new(Lines { json: args.json });
    if let (Some(kind), Some(target)) = (set_kind, set_target) {
        let publisher = set::SetPublisher {
            client,
            kind,
            namespace: args.namespace.clone(),
            target,
            health,
            settings,
            status_namespace: status_namespace(args),
            sink,
        };
        return Ok(publisher.run().await?);
    }
    let mirror =
        StatusMirror::new(client.clone(), &status_namespace(args), &args.status_configmap, settings.instance.clone());
    let location = args.to.split('?').next().unwrap_or_default();
    let connect = || Target::connect(&args.to, args.region.as_deref(), false);
    let target = publisher::connect(location, &mirror, &health, connect).await?;
    let publisher =
        one::Publisher { client, source, target, mirror, health, settings, cluster: args.cluster.clone(), sink };
    Ok(publisher.run().await?)
}

/// `--watch`'s standard output: one line per publish (JSON with --json), and on standard error
/// each member of a set that publishes nothing.
#[cfg(feature = "kube")]
struct Lines {
    json: bool,
}

#[cfg(feature = "kube")]
impl tagwarden::cluster::publisher::Sink for Lines {
    fn published(&self, outcome: &PublishOutcome) {
        if let Err(e) = show(outcome, self.json, true) {
            tracing::error!(error = %e, "the outcome could not be printed");
        }
    }

    fn not_published(&self, object: &str, why: &str) {
        eprintln!("{object}: not published: {why}");
    }
}

/// The CLI's targets are the publisher's policy store.
#[cfg(feature = "kube")]
impl tagwarden::cluster::publisher::Publish for Target {
    fn location(&self) -> String {
        Target::location(self)
    }

    fn endpoint(&self) -> String {
        Target::endpoint(self)
    }

    fn credential_expiry(&self) -> Option<(String, u64)> {
        Target::credential_expiry(self)
    }

    async fn publish(&self, text: &str, cluster: Option<&str>, dry_run: bool) -> Result<PublishOutcome, PublishError> {
        Target::publish(self, text, cluster, dry_run).await
    }

    async fn status(
        &self,
    ) -> Result<tagwarden::cluster::publisher::Reports, tagwarden::cluster::publisher::Unreadable> {
        Target::status(self).await.map_err(|e| {
            let got_no_answer = e.chain().any(|c| {
                c.downcast_ref::<tagwarden::cloud_error::CloudError>()
                    .is_some_and(tagwarden::cloud_error::CloudError::got_no_answer)
            });
            tagwarden::cluster::publisher::Unreadable { message: format!("{e:#}"), got_no_answer }
        })
    }
}

/// The in-cluster publisher (`--watch`) takes its location from the ConfigMap `tagwarden-settings`
/// (`policy-location`), which anyone with `view` on the namespace reads: a SAS there is a
/// credential in the open, refused with the fix (deploy/kubernetes/README.md).
#[cfg(feature = "kube")]
fn refuse_sas_in_location(to: &str) -> anyhow::Result<()> {
    let blob = to.starts_with("https://") || to.starts_with("http://");
    match to.split_once('?') {
        Some((plain, query)) if blob && !query.is_empty() => anyhow::bail!(
            "the policy location {plain}?… carries a SAS query string, and policy-location comes from a ConfigMap that anyone with view on the namespace reads: set policy-location to the plain URL {plain} and authenticate with Workload Identity (deploy/kubernetes/README.md), or put the SAS in the Secret tagwarden-blob-sas (TAGWARDEN_BLOB_SAS); then rotate this SAS, it has been exposed"
        ),
        _ => Ok(()),
    }
}
