//! `tagwarden publish`: validate the cluster's policy and put it where the function reads it;
//! with `--from-cluster --watch`, keep doing so and mirror the status report into the cluster.

use std::path::PathBuf;
#[cfg(feature = "kube")]
use std::time::Duration;

use anyhow::Context;
use tagwarden::publish::{PublishError, PublishOutcome, PublishResult};
#[cfg(feature = "kube")]
use tagwarden::retry::Backoff;

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
    /// 10-cluster.yaml), ssm:/parameter/name, or a blob URL with a SAS; or a cluster set
    /// (s3://bucket/prefix/*/, ssm:/path/*, …/PREFIX/*/), with --cluster.
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

/// The cluster a set's folder is for, with --from-cluster: the Infrastructure object's own
/// status.infrastructureName (the cluster says who it is; `--cluster`, if given, must agree), or
/// for a ConfigMap source, `--cluster` alone (a ConfigMap is anyone's to edit in its namespace).
#[cfg(feature = "kube")]
fn proven_cluster(
    args: &Args,
    source: &tagwarden::cluster::ClusterSource,
    doc: &tagwarden::cluster::SourceDocument,
) -> Result<Option<String>, String> {
    use tagwarden::cluster::ClusterSource;
    let ClusterSource::Infrastructure = source else { return Ok(args.cluster.clone()) };
    let own = tagwarden::policy::load::declared_infra_id(&doc.name, &doc.text).ok().flatten();
    match (own, &args.cluster) {
        (Some(own), Some(flag)) if own != *flag => Err(format!(
            "--cluster {flag} contradicts the cluster's Infrastructure object, whose status.infrastructureName is {own}: drop --cluster, or run this publisher in cluster {flag}"
        )),
        (own, flag) => Ok(own.or_else(|| flag.clone())),
    }
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
                    let note = refused_note(cluster, &o);
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

/// The Warning Event's note for a member whose document the function would refuse.
#[cfg(feature = "kube")]
fn refused_note(cluster: &str, o: &PublishOutcome) -> String {
    format!("the function would reject cluster {cluster}'s policy: {}", o.violations.join("; "))
}

/// The ConfigMap a set member's status report is mirrored into.
#[cfg(feature = "kube")]
fn member_configmap(cluster: &str) -> String {
    // A ConfigMap's name is a DNS subdomain: lowercase, '-' and '.'. An infraID may hold '_' or
    // capitals; one that had to be changed takes a hash of itself, so two never share a name.
    let plain = cluster.to_ascii_lowercase().replace('_', "-");
    let name = if plain == cluster {
        format!("{}-{plain}", tagwarden::cluster::mirror::DEFAULT_NAME)
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        cluster.hash(&mut h);
        format!("{}-{plain}-{:08x}", tagwarden::cluster::mirror::DEFAULT_NAME, h.finish() as u32)
    };
    name.chars().take(253).collect()
}

/// Mirror each published member's status report (the function's, at the store) into
/// `tagwarden-status-<cluster>` in the publisher's own namespace (`--status-namespace`), beside its
/// `tagwarden-status`: a ConfigMap `kubectl get` shows, with an Event there on each change of its
/// state. Not in the member's namespace: a grant to write ConfigMaps there would reach what other
/// controllers apply into workload clusters (NodePool configs, ClusterResourceSets), and RBAC
/// cannot narrow it to a name prefix. One store read per member, and a ConfigMap write only when
/// the report changed.
#[cfg(feature = "kube")]
async fn mirror_members(
    client: &tagwarden::cluster::Client,
    target: &Target,
    published: &std::collections::BTreeSet<String>,
    namespace: &str,
    instance: Option<String>,
) {
    if published.is_empty() {
        return;
    }
    let reports = match target.status().await {
        Ok(reports) => reports,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "the members' status reports are unreadable; mirrored next time");
            return;
        }
    };
    for (cluster, report) in reports {
        let (Some(cluster), Some(report)) = (cluster, report) else { continue };
        if !published.contains(&cluster) {
            continue;
        }
        let mirror = tagwarden::cluster::StatusMirror::new(
            client.clone(),
            namespace,
            &member_configmap(&cluster),
            instance.clone(),
        );
        if let Err(e) = mirror.mirror(&report).await {
            tracing::warn!(cluster = %cluster, error = %e, "status mirror failed");
        }
    }
}

/// The namespace of the status ConfigMaps: `--status-namespace`, else the pod's, else tagwarden.
#[cfg(feature = "kube")]
fn status_namespace(args: &Args) -> String {
    args.status_namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "tagwarden".to_string())
}

/// How long `--watch` waits for a quiet moment before it reads the set again, and at most.
#[cfg(feature = "kube")]
const SETTLE: Duration = Duration::from_millis(500);
#[cfg(feature = "kube")]
const SETTLE_MAX: Duration = Duration::from_secs(5);

/// `--cluster-set --watch`: the set read again on each change of its objects (and every
/// `--resync` seconds, when every member is published again, a no-op where the store holds it),
/// and only the members whose document changed since they were last published are written: one
/// JSON line each. A member that cannot be published is told once per reason (a Warning Event);
/// a failed publish is retried with back-off, not only at the next change. A cluster that leaves
/// the set keeps the policy it last published.
#[cfg(feature = "kube")]
async fn watch_set(
    args: &Args,
    kind: tagwarden::cluster::cluster_set::SetKind,
    client: &tagwarden::cluster::Client,
) -> Result<(), Failure> {
    use futures_util::StreamExt;
    use std::collections::HashMap;
    use std::sync::Arc;
    use tagwarden::cluster::health::{self, Health};
    use tagwarden::cluster::{self, cluster_set};

    let target = set_target(args).await?;
    let instance = std::env::var("POD_NAME").ok();
    let health = Arc::new(Health::default());
    if let Some(addr) = args.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--listen {addr}: cannot listen there; choose a free port"))?;
        tokio::spawn(health::serve(listener, health.clone()));
    }
    let changes = cluster_set::changes(client.clone(), kind, args.namespace.clone());
    let mut changes = std::pin::pin!(changes);
    // Each member's status report, mirrored into its own namespace every
    // --status-interval seconds, as the Infrastructure path mirrors its cluster's.
    let status_every = Duration::from_secs(args.status_interval);
    let mut status = tokio::time::interval_at(tokio::time::Instant::now() + status_every, status_every);
    status.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The members published (or in line at the store) by the last read of the set.
    let mut published = std::collections::BTreeSet::new();
    let status_namespace = status_namespace(args);
    let resync_every = Duration::from_secs(args.resync);
    let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + resync_every, resync_every);
    let retry = tokio::time::sleep(Duration::ZERO);
    let mut retry = std::pin::pin!(retry);
    let mut retrying = false;
    let mut failures = 0;
    // By cluster (or, for a member without one, its object): the document last published or
    // refused, or the reason last told.
    let mut done: HashMap<String, String> = HashMap::new();
    // The clusters whose document the function would refuse, as last published.
    let mut refused_clusters = std::collections::HashSet::new();
    loop {
        tokio::select! {
            change = changes.next() => {
                if change.is_none() {
                    return Err(anyhow::anyhow!("the watch of the cluster set ended").into());
                }
                // Changes come in bursts (a start's initial listing, a controller writing one
                // object's status after another's spec): the set is read once for the whole
                // burst, up to SETTLE_MAX after its first change, not once per watch event.
                let settled = tokio::time::Instant::now() + SETTLE_MAX;
                while let Ok(Some(_)) = tokio::time::timeout_at(
                    settled.min(tokio::time::Instant::now() + SETTLE),
                    changes.next(),
                )
                .await
                {}
            }
            _ = resync.tick() => done.clear(),
            () = &mut retry, if retrying => {}
            _ = status.tick() => {
                if !args.dry_run {
                    mirror_members(client, &target, &published, &status_namespace, instance.clone()).await;
                }
                continue;
            }
        }
        let mut failed = false;
        match cluster_set::read_set(client, kind, args.namespace.as_deref()).await {
            Err(e) => {
                tracing::warn!(error = %e, "could not read the cluster set; retrying");
                health.failed("failed");
                failed = true;
            }
            Ok(members) => {
                health.set_ready();
                published = members.iter().filter(|m| m.document.is_ok()).filter_map(|m| m.cluster.clone()).collect();
                let mut refused = false;
                for m in members {
                    let object = m.object.to_string();
                    let (doc, cluster) = match (&m.document, &m.cluster) {
                        (Ok(doc), Some(cluster)) => (doc, cluster),
                        (Err(why), _) => {
                            refused = true;
                            if done.get(&object) != Some(why) {
                                eprintln!("{object}: not published: {why}");
                                if !args.dry_run {
                                    if let Err(e) = cluster::warn_member(
                                        client,
                                        instance.clone(),
                                        &m.object,
                                        "NoPolicy",
                                        why.clone(),
                                    )
                                    .await
                                    {
                                        tracing::warn!(object = %object, error = %e, "could not record the Event");
                                    }
                                }
                                done.insert(object, why.clone());
                            }
                            continue;
                        }
                        (Ok(_), None) => continue,
                    };
                    if done.get(cluster) == Some(&doc.text) {
                        refused |= refused_clusters.contains(cluster);
                        continue;
                    }
                    match target.publish(&doc.text, Some(cluster), args.dry_run).await {
                        Ok(o) => {
                            if o.result == PublishResult::Refused {
                                refused = true;
                                health.failed("refused");
                                let note = refused_note(cluster, &o);
                                if !args.dry_run {
                                    if let Err(e) =
                                        cluster::warn_member(client, instance.clone(), &m.object, "PolicyRefused", note)
                                            .await
                                    {
                                        tracing::warn!(object = %object, error = %e, "could not record the Event");
                                    }
                                }
                                refused_clusters.insert(cluster.clone());
                            } else {
                                refused_clusters.remove(cluster);
                                health.succeeded(unix_now());
                            }
                            show(&o, args.json, true)?;
                            done.insert(cluster.clone(), doc.text.clone());
                        }
                        Err(e) => {
                            let (metric, _) = classify(&e, &target);
                            health.failed(metric);
                            tracing::warn!(cluster = %cluster, error = %anyhow::Error::from(e), "publish failed; retrying");
                            failed = true;
                        }
                    }
                }
                health.set_refused(refused);
            }
        }
        retrying = failed;
        if failed {
            let backoff = Backoff::PUBLISH.delay(failures);
            failures = failures.saturating_add(1);
            retry.as_mut().reset(tokio::time::Instant::now() + backoff);
        } else {
            failures = 0;
        }
    }
}

/// A credential expiring within this is reported (Degraded) before it stops working. Azure caps a
/// user-delegation SAS at 7 days, so a 7-day warning would mark a freshly issued SAS Degraded from its
/// first minute: 48 hours leaves two days to rotate it.
#[cfg(feature = "kube")]
const EXPIRY_WARNING: Duration = Duration::from_secs(48 * 3600);

#[cfg(feature = "kube")]
async fn from_cluster(args: &Args) -> Result<(), Failure> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use futures_util::StreamExt;
    use tagwarden::cluster::health::{self, Health};
    use tagwarden::cluster::{self, Change, ClusterSource, Facts, PublishFailure, StatusMirror};

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
    if let Some(kind) = &args.cluster_set {
        let kind: cluster::cluster_set::SetKind =
            kind.parse().map_err(|e: String| Failure::Invalid(Some(anyhow::anyhow!("--cluster-set: {e}"))))?;
        return match args.watch {
            true => watch_set(args, kind, &client).await,
            false => publish_set(args, kind, &client).await,
        };
    }
    if !args.watch {
        let target = Target::connect(&args.to, args.region.as_deref(), true).await?;
        let doc = cluster::read_once(&client, &source).await?;
        let cluster = proven_cluster(args, &source, &doc).map_err(|e| Failure::Invalid(Some(anyhow::anyhow!(e))))?;
        let outcome = target.publish(&doc.text, cluster.as_deref(), args.dry_run).await.map_err(publish_error)?;
        show(&outcome, args.json, false)?;
        return ended(&outcome);
    }
    let health = Arc::new(Health::default());
    if let Some(addr) = args.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--listen {addr}: cannot listen there; choose a free port"))?;
        tokio::spawn(health::serve(listener, health.clone()));
    }
    let namespace = status_namespace(args);
    let mirror = StatusMirror::new(client.clone(), &namespace, &args.status_configmap, std::env::var("POD_NAME").ok());
    let target = connect_reporting(args, &mirror, &health).await?;
    let target = &target;
    let restarts = Arc::new(AtomicU64::new(0));
    let changes = cluster::watch_counting(client, source.clone(), restarts.clone());
    let mut changes = std::pin::pin!(changes);
    let mut tick = tokio::time::interval(Duration::from_secs(args.status_interval));
    let resync_every = Duration::from_secs(args.resync);
    let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + resync_every, resync_every);
    let mut facts = Facts { location: target.location(), ..Facts::default() };
    // The latest document not yet published (a conflict or an outage), retried with back-off:
    // it must not wait for the cluster's next change.
    let mut pending: Option<cluster::SourceDocument> = None;
    // The cluster's latest document, published again on each resync (a no-op while in line).
    let mut latest: Option<cluster::SourceDocument> = None;
    // In a cluster set, the report mirrored is this cluster's.
    let mut own_cluster: Option<String> = None;
    let mut failures = 0;
    let retry = tokio::time::sleep(Duration::ZERO);
    let mut retry = std::pin::pin!(retry);
    // Nothing is mirrored before the first decision: a condition then would only guess.
    let mut decided = false;
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        facts.expiring = expiring(target);
        let (attempt, resyncing) = tokio::select! {
            change = changes.next() => match change {
                None => return Err(anyhow::anyhow!("the watch ended").into()),
                Some(Err(e)) => {
                    // Say it in the cluster before the pod restarts: `oc` shows why.
                    facts.failure = Some(PublishFailure { reason: "ClusterSourceUnreadable", message: e.to_string() });
                    mirror_now(&mirror, target, own_cluster.as_deref(), &facts).await;
                    return Err(anyhow::Error::new(e).into());
                }
                Some(Ok(Change::Absent { reason })) => {
                    facts.absent = Some(reason);
                    health.set_ready();
                    decided = true;
                    mirror_now(&mirror, target, own_cluster.as_deref(), &facts).await;
                    (false, false)
                }
                Some(Ok(Change::Document(doc))) => {
                    facts.absent = None;
                    latest = Some(doc.clone());
                    pending = Some(doc);
                    failures = 0;
                    (true, false)
                }
            },
            () = &mut retry, if pending.is_some() => (true, false),
            _ = resync.tick() => {
                // A retry already due is no resync: it found nothing changed at the store.
                let resyncing = pending.is_none();
                if resyncing {
                    pending = latest.clone();
                }
                (pending.is_some(), resyncing)
            }
            _ = tick.tick() => {
                if decided {
                    mirror_now(&mirror, target, own_cluster.as_deref(), &facts).await;
                }
                (false, false)
            }
        };
        health.watch_restarted(restarts.load(Ordering::Relaxed));
        let Some(doc) = pending.as_ref().filter(|_| attempt) else { continue };
        let published = match proven_cluster(args, &source, doc) {
            Ok(cluster) => target.publish(&doc.text, cluster.as_deref(), args.dry_run).await,
            Err(why) => Ok(PublishOutcome::refused(facts.location.clone(), vec![why])),
        };
        // Ready once a first publish was decided (even a failed one: `Degraded` says why).
        health.set_ready();
        decided = true;
        match published {
            Ok(outcome) => {
                pending = None;
                facts.failure = None;
                facts.refused = outcome.violations.clone();
                health.set_refused(!facts.refused.is_empty());
                if facts.refused.is_empty() {
                    facts.published = outcome.version.clone().or(facts.published.take());
                    health.succeeded(unix_now());
                } else {
                    health.failed("refused");
                    tracing::warn!(violations = ?facts.refused, "the cluster's document is refused; what was published stays in force");
                }
                own_cluster = outcome.infra_id.clone().or(own_cluster);
                if !(resyncing && outcome.result == PublishResult::Unchanged) {
                    show(&outcome, args.json, true)?;
                }
                if resyncing && outcome.result == PublishResult::Written {
                    tracing::warn!(location = %outcome.location, "the published object had been changed or deleted at the store; written again");
                }
                mirror_now(&mirror, target, own_cluster.as_deref(), &facts).await;
            }
            // A lost race re-reads what the other publisher wrote and decides again.
            Err(e) => {
                let (metric, failure) = classify(&e, target);
                health.failed(metric);
                // Not `Backoff::retry`: a newer document, a resync or a tick must not wait for it.
                let backoff = Backoff::PUBLISH.delay(failures);
                failures = failures.saturating_add(1);
                tracing::error!(error = %e, reason = failure.reason, resource_version = doc.resource_version, retry_in_s = backoff.as_secs_f64(), "publish failed; retrying");
                facts.failure = Some(failure);
                retry.as_mut().reset(tokio::time::Instant::now() + backoff);
                mirror_now(&mirror, target, own_cluster.as_deref(), &facts).await;
            }
        }
    }
}

/// Connect to the policy location, and until that works (a missing credential Secret, a bad CA
/// bundle), say why in the cluster and try again with back-off rather than crash-loop: the
/// Secret may be created after the pod.
#[cfg(feature = "kube")]
async fn connect_reporting(
    args: &Args,
    mirror: &tagwarden::cluster::StatusMirror,
    health: &tagwarden::cluster::health::Health,
) -> anyhow::Result<Target> {
    use tagwarden::cluster::{Conditions, Facts, PublishFailure};
    let attempt = |_| async move {
        let connected = Target::connect(&args.to, args.region.as_deref(), false).await;
        let Err(e) = connected else { return connected };
        let message = format!("{e:#}");
        let lower = message.to_ascii_lowercase();
        let (metric, reason) =
            if lower.contains("credential") || lower.contains("workload identity") || lower.contains("sas") {
                ("credentials", "CredentialsRejected")
            } else {
                ("failed", "SetupFailed")
            };
        health.failed(metric);
        health.set_ready();
        tracing::error!(error = %message, "cannot reach the policy location; retrying");
        let facts = Facts {
            location: args.to.split('?').next().unwrap_or_default().to_string(),
            failure: Some(PublishFailure { reason, message }),
            ..Facts::default()
        };
        let now = tagwarden::events::format_rfc3339_ms((unix_now() * 1000.0) as u64);
        if let Err(e) = mirror.mirror_with(None, Conditions::from_facts(&facts, None, &now)).await {
            tracing::warn!(error = %e, "status mirror failed");
        }
        Err(e)
    };
    Backoff::PUBLISH.retry(|_| true, attempt).await
}

#[cfg(feature = "kube")]
fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
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

/// A credential that expires within [`EXPIRY_WARNING`], said before it happens.
#[cfg(feature = "kube")]
fn expiring(target: &Target) -> Option<String> {
    let (what, at_ms) = target.credential_expiry()?;
    tagwarden::cluster::conditions::expiry_warning(&what, at_ms, (unix_now() * 1000.0) as u64, EXPIRY_WARNING)
}

/// Why a publish failed, for the metric (`tagwarden_publish_failures_total{reason}`) and the
/// `Degraded` condition: the store's error class decides, and a call that got no answer names
/// the proxy it went through, if any.
#[cfg(feature = "kube")]
fn classify(e: &PublishError, target: &Target) -> (&'static str, tagwarden::cluster::PublishFailure) {
    use tagwarden::cluster::PublishFailure;
    let failure = |metric, reason, message: String| (metric, PublishFailure { reason, message });
    let cloud = match e {
        PublishError::Conflict { .. } | PublishError::Raced { .. } => {
            return failure("conflict", "Conflict", e.to_string());
        }
        PublishError::Cloud(inner) => inner.downcast_ref::<tagwarden::cloud_error::CloudError>(),
    };
    let Some(cloud) = cloud else { return failure("failed", "PublishFailed", e.to_string()) };
    let text = cloud.to_string();
    use tagwarden::cloud_error::ErrorClass;
    // No answer at all comes first: an unreachable STS or Entra endpoint (through a proxy that is
    // down) is no credential problem, whatever the SDK's credential chain says around it.
    if cloud.got_no_answer() {
        return failure("unreachable", "Unreachable", through_proxy(text, target));
    }
    // Credentials: Azure's token endpoints (operation identity:Token), and the AWS SDK's
    // credential chain, whose failures arrive as the error's code or message (`ExpiredToken…`,
    // "failed to load credentials", web identity errors) — never the target, which names a bucket.
    let said = format!("{} {}", cloud.code, cloud.message).to_ascii_lowercase();
    let credentials = cloud.operation.starts_with("identity:")
        || cloud.code.contains("ExpiredToken")
        || cloud.code.contains("InvalidIdentityToken")
        || said.contains("credential")
        || said.contains("web identity");
    if credentials {
        let fix = match cloud.cloud {
            tagwarden::cloud::Cloud::Aws => {
                "; the publisher takes the AWS SDK's standard chain: on OpenShift, mount the CredentialsRequest's Secret and point AWS_SHARED_CREDENTIALS_FILE at its `credentials` key (static keys in mint mode; role_arn + web_identity_token_file in STS mode, from ccoctl), elsewhere AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE (IRSA)"
            }
            tagwarden::cloud::Cloud::Azure => "",
        };
        return failure("credentials", "CredentialsRejected", format!("{text}{fix}"));
    }
    match cloud.class {
        ErrorClass::Denied => failure("denied", "AccessDenied", text),
        ErrorClass::Fatal if cloud.code.contains("AccessDenied") || cloud.code.contains("Forbidden") => {
            failure("denied", "AccessDenied", text)
        }
        _ => failure("failed", "PublishFailed", text),
    }
}

/// `message` about a call that got no answer, naming the proxy it went through, if any.
#[cfg(feature = "kube")]
fn through_proxy(message: String, target: &Target) -> String {
    match tagwarden::network::proxy_for(&target.endpoint()) {
        Some(proxy) => format!(
            "{message} (through the proxy {proxy}: check that it is up and lets the connection through, or add the host to NO_PROXY)"
        ),
        None => message,
    }
}

/// Mirror the function's status report (when there is one) with the publisher's conditions.
#[cfg(feature = "kube")]
async fn mirror_now(
    mirror: &tagwarden::cluster::StatusMirror,
    target: &Target,
    own_cluster: Option<&str>,
    facts: &tagwarden::cluster::Facts,
) {
    use tagwarden::cluster::Conditions;
    use tagwarden::policy::cache::PolicyState;
    let own = |reports: Vec<(Option<String>, Option<tagwarden::status::StatusReport>)>| {
        reports.into_iter().find(|(c, _)| c.is_none() || c.as_deref() == own_cluster).and_then(|(_, r)| r)
    };
    let mut facts = facts.clone();
    let report = match target.status().await.map(own) {
        Ok(report) => report,
        Err(e) => {
            tracing::warn!(error = %e, "status report unreadable");
            let unanswered = e.chain().any(|c| {
                c.downcast_ref::<tagwarden::cloud_error::CloudError>()
                    .is_some_and(tagwarden::cloud_error::CloudError::got_no_answer)
            });
            let why = format!("{e:#}");
            facts.report_unreadable = Some(if unanswered { through_proxy(why, target) } else { why });
            None
        }
    };
    let now = tagwarden::events::format_rfc3339_ms((unix_now() * 1000.0) as u64);
    let conditions = Conditions::from_facts(&facts, report.as_ref(), &now);
    // The mirrored report shows the publisher's own refusal on top: the cluster's latest
    // document was rejected, so the last good one stays in force.
    let report = report.map(|mut report| {
        if !facts.refused.is_empty() {
            report.policy.state = PolicyState::RejectedKeepingLastGood;
            report.policy.errors = facts.refused.clone();
        }
        report
    });
    if let Err(e) = mirror.mirror_with(report.as_ref(), conditions).await {
        tracing::warn!(error = %e, "status mirror failed");
    }
}

#[cfg(all(test, feature = "kube"))]
mod tests {
    use super::EXPIRY_WARNING;
    use tagwarden::cluster::conditions::expiry_warning;

    const NOW_MS: u64 = 1_800_000_000_000;
    const HOUR_MS: u64 = 3600 * 1000;

    #[test]
    fn a_fresh_seven_day_sas_is_not_expiring() {
        let at = NOW_MS + 7 * 24 * HOUR_MS - 60 * 1000;
        assert_eq!(expiry_warning("SAS", at, NOW_MS, EXPIRY_WARNING), None);
    }

    #[test]
    fn a_sas_expiring_in_47_hours_warns() {
        let at = NOW_MS + 47 * HOUR_MS;
        let warning = expiry_warning("SAS", at, NOW_MS, EXPIRY_WARNING).expect("a warning");
        assert!(warning.contains("in 47 h"), "{warning}");
    }
}
