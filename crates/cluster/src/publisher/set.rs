//! A management cluster's set publisher (`--cluster-set --watch`): a controller on the set's
//! member objects (`HostedCluster`s, `AWSCluster`s, `AzureCluster`s), reconciled again on each
//! change of an object that refines them (`NodePool`s, machine templates …) and every resync.
//!
//! A reconcile is one pass over the whole set ([`read_set`]: members are read with the objects
//! that refine them, and one object naming another's cluster withholds both), so the passes are
//! one at a time and a pass reads the set again only when something changed since its last read:
//! a burst of edits, debounced, is one listing. Only the members whose document changed since
//! they were last published are written; a member that cannot be published is told once per
//! reason (a Warning Event on its object); a failed pass is retried with [`Backoff::PUBLISH`]. A
//! cluster that leaves the set keeps the policy it last published.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::future;
use futures_util::stream::{self, StreamExt};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tagwarden_core::publish::{PublishOutcome, PublishResult};
use tagwarden_engine::retry::Backoff;
use tokio::time::Instant;

use super::{classify, unix_now, Publish, Settings, Sink};
use crate::cluster_set::{read_set, ObjectRef, Resource, SetKind};
use crate::health::{Health, Reason};
use crate::mirror::{warn_member, StatusMirror, DEFAULT_NAME};
use crate::ClusterError;

/// Why the set publisher stopped.
#[derive(Debug, thiserror::Error)]
pub enum SetStopped {
    /// The controller's stream ended (it never does by itself).
    #[error("the watch of the cluster set ended")]
    Ended,
}

/// Why a pass over the set is retried.
#[derive(Debug, thiserror::Error)]
pub enum PassFailed {
    #[error("could not read the cluster set: {0}")]
    Read(#[source] ClusterError),
    #[error("{0} of the set's publishes failed")]
    Publish(usize),
}

/// A management cluster's set publisher.
pub struct SetPublisher<P> {
    pub client: Client,
    pub kind: SetKind,
    /// `--namespace`: the set's objects in this namespace only (default: every namespace).
    pub namespace: Option<String>,
    pub target: P,
    pub health: Arc<Health>,
    pub settings: Settings,
    /// Where each member's status report is mirrored (`tagwarden-status-<cluster>`).
    pub status_namespace: String,
    pub sink: Arc<dyn Sink>,
}

/// The longest a change waits for the debounce's quiet moment: kube-runtime's debounce starts
/// again with every change, and a management cluster's HostedClusters or Clusters change often
/// (their status). 5 s, the hand-written settle's cap before the controller.
const SETTLE_MAX: Duration = Duration::from_secs(5);

struct Context<P> {
    p: SetPublisher<P>,
    state: Mutex<State>,
    /// Bumped by every change of an object of the set and by every resync: a pass reads the set
    /// again only when this moved since its last read.
    changes: AtomicU64,
    /// Set by the resync: the next pass publishes every member again (a no-op where the store
    /// holds it already).
    resync_due: AtomicBool,
    failures: AtomicU32,
    /// The member objects were listed once: an empty store is an empty set, not one unread.
    listed: AtomicBool,
    /// One pass at a time, whoever asks for it.
    pass: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// `changes` when the set was last read.
    read_at: Option<u64>,
    /// The last pass failed; it is tried again from then on.
    retry_at: Option<Instant>,
    /// The first change since the set was last read: a set that keeps changing (its objects'
    /// status, written by their own controllers) is read at the latest [`SETTLE_MAX`] after it.
    unread_since: Option<Instant>,
    /// The members published (or in line at the store) by the last read of the set.
    published: BTreeSet<String>,
    /// By cluster (or, for a member without one, its object): the document last published or
    /// refused, or the reason last told.
    done: HashMap<String, String>,
    /// The clusters whose document the function would refuse, as last published.
    refused_clusters: HashSet<String>,
}

/// The Warning Event's note for a member whose document the function would refuse.
pub fn refused_note(cluster: &str, o: &PublishOutcome) -> String {
    format!("the function would reject cluster {cluster}'s policy: {}", o.violations.join("; "))
}

/// The ConfigMap a set member's status report is mirrored into.
pub fn member_configmap(cluster: &str) -> String {
    // A ConfigMap's name is a DNS subdomain: lowercase, '-' and '.'. An infraID may hold '_' or
    // capitals; one that had to be changed takes a hash of itself, so two never share a name.
    let plain = cluster.to_ascii_lowercase().replace('_', "-");
    let name = if plain == cluster {
        format!("{DEFAULT_NAME}-{plain}")
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        cluster.hash(&mut h);
        format!("{DEFAULT_NAME}-{plain}-{:08x}", h.finish() as u32)
    };
    name.chars().take(253).collect()
}

fn api(client: &Client, r: &Resource, namespace: Option<&str>) -> (Api<DynamicObject>, ApiResource) {
    let gvk = GroupVersionKind::gvk(r.group, r.version, r.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, r.plural);
    let api = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    (api, ar)
}

impl<P: Publish> Context<P> {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn changed(&self) {
        self.state().unread_since.get_or_insert_with(Instant::now);
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Changes have waited longer than [`SETTLE_MAX`] for the debounce's quiet moment.
    fn overdue(&self) -> bool {
        self.state().unread_since.is_some_and(|at| at.elapsed() >= SETTLE_MAX)
    }

    /// The wait before a failed pass is tried again.
    fn back_off(&self) -> Duration {
        let delay = Backoff::PUBLISH.delay(self.failures.fetch_add(1, Ordering::Relaxed));
        self.state().retry_at = Some(Instant::now() + delay);
        delay
    }

    /// Read the set, if it changed since the last read (or a failed pass is due again), and
    /// publish each member whose document changed.
    async fn pass(&self) -> Result<Action, PassFailed> {
        let _one = self.pass.lock().await;
        let seen = self.changes.load(Ordering::SeqCst);
        {
            let s = self.state();
            let retry_due = s.retry_at.is_some_and(|at| Instant::now() >= at);
            if s.read_at == Some(seen) && !retry_due {
                return Ok(Action::await_change());
            }
        }
        // What changes from here on waits for the next pass.
        self.state().unread_since = None;
        let p = &self.p;
        let members = match read_set(&p.client, p.kind, p.namespace.as_deref()).await {
            Ok(members) => members,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the cluster set; retrying");
                p.health.failed(Reason::Failed);
                // Tried again when the back-off is over, or on the next change.
                self.state().read_at = Some(seen);
                return Err(PassFailed::Read(e));
            }
        };
        p.health.set_ready();
        let (mut done, mut refused_clusters) = {
            let mut s = self.state();
            s.read_at = Some(seen);
            s.published = members.iter().filter(|m| m.document.is_ok()).filter_map(|m| m.cluster.clone()).collect();
            if self.resync_due.swap(false, Ordering::Relaxed) {
                s.done.clear();
            }
            (std::mem::take(&mut s.done), std::mem::take(&mut s.refused_clusters))
        };
        let dry_run = p.settings.dry_run;
        let (mut refused, mut failed) = (false, 0);
        for m in members {
            let object = m.object.to_string();
            let (doc, cluster) = match (&m.document, &m.cluster) {
                (Ok(doc), Some(cluster)) => (doc, cluster),
                (Err(why), _) => {
                    refused = true;
                    let why = why.to_string();
                    if done.get(&object) != Some(&why) {
                        p.sink.not_published(&object, &why);
                        self.warn(&m.object, "NoPolicy", why.clone()).await;
                        done.insert(object, why);
                    }
                    continue;
                }
                (Ok(_), None) => continue,
            };
            if done.get(cluster) == Some(&doc.text) {
                refused |= refused_clusters.contains(cluster);
                continue;
            }
            match p.target.publish(&doc.text, Some(cluster), dry_run).await {
                Ok(o) => {
                    if o.result == PublishResult::Refused {
                        refused = true;
                        p.health.failed(Reason::Refused);
                        self.warn(&m.object, "PolicyRefused", refused_note(cluster, &o)).await;
                        refused_clusters.insert(cluster.clone());
                    } else {
                        refused_clusters.remove(cluster);
                        p.health.succeeded(unix_now());
                    }
                    p.sink.published(&o);
                    done.insert(cluster.clone(), doc.text.clone());
                }
                Err(e) => {
                    let (metric, _) = classify(&e, &p.target.endpoint());
                    p.health.failed(metric);
                    tracing::warn!(cluster = %cluster, error = %tagwarden_core::error_chain(&e), "publish failed; retrying");
                    failed += 1;
                }
            }
        }
        p.health.set_refused(refused);
        {
            let mut s = self.state();
            s.done = done;
            s.refused_clusters = refused_clusters;
            if failed == 0 {
                s.retry_at = None;
            }
        }
        if failed > 0 {
            return Err(PassFailed::Publish(failed));
        }
        self.failures.store(0, Ordering::Relaxed);
        Ok(Action::await_change())
    }

    /// A Warning Event on a member's object (none on a dry run).
    async fn warn(&self, object: &ObjectRef, reason: &str, note: String) {
        if self.p.settings.dry_run {
            return;
        }
        if let Err(e) = warn_member(&self.p.client, self.p.settings.instance.clone(), object, reason, note).await {
            tracing::warn!(object = %object, error = %e, "could not record the Event");
        }
    }

    /// Mirror each published member's status report (the function's, at the store) into
    /// `tagwarden-status-<cluster>` in the publisher's own namespace, beside its `tagwarden-status`:
    /// a ConfigMap `kubectl get` shows, with an Event there on each change of its state. Not in the
    /// member's namespace: a grant to write ConfigMaps there would reach what other controllers
    /// apply into workload clusters (NodePool configs, ClusterResourceSets), and RBAC cannot narrow
    /// it to a name prefix. One store read per mirror, and a ConfigMap write only when the report
    /// changed.
    async fn mirror_members(&self) {
        let published = self.state().published.clone();
        if published.is_empty() {
            return;
        }
        let reports = match self.p.target.status().await {
            Ok(reports) => reports,
            Err(e) => {
                tracing::warn!(error = %e, "the members' status reports are unreadable; mirrored next time");
                return;
            }
        };
        for (cluster, report) in reports {
            let (Some(cluster), Some(report)) = (cluster, report) else { continue };
            if !published.contains(&cluster) {
                continue;
            }
            let name = member_configmap(&cluster);
            let mirror = StatusMirror::new(
                self.p.client.clone(),
                &self.p.status_namespace,
                &name,
                self.p.settings.instance.clone(),
            );
            if let Err(e) = mirror.mirror(&report).await {
                tracing::warn!(cluster = %cluster, error = %e, "status mirror failed");
            }
        }
    }
}

/// A unit each time an object of `r` changes (after a disconnect, once the re-list is complete).
/// kube's watcher keeps each watch going (resume, re-list after `410 Gone`) and backs off on
/// errors, which are logged: the resync covers what a long outage hid.
fn refining_changes(
    client: &Client,
    r: Resource,
    namespace: Option<&str>,
) -> impl futures_util::Stream<Item = ()> + Send + 'static {
    let (api, _) = api(client, &r, namespace);
    watcher(api, watcher::Config::default()).default_backoff().filter_map(move |e| {
        future::ready(match e {
            Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => Some(()),
            Ok(Event::Init | Event::InitApply(_)) => None,
            // A refining kind whose CRD is not installed (read_set reads it as empty) is watched
            // with back-off in case it appears, quietly.
            Err(watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchFailed(kube::Error::Api(s)))
                if s.code == 404 =>
            {
                tracing::debug!(resource = %format!("{}.{}", r.plural, r.group), "not installed here; watched again later");
                None
            }
            Err(e) => {
                tracing::warn!(resource = %format!("{}.{}", r.plural, r.group), error = %e, "watch interrupted; retrying");
                None
            }
        })
    })
}

impl<P: Publish> SetPublisher<P> {
    /// Publish the set on every change until stopped.
    pub async fn run(self) -> Result<(), SetStopped> {
        let client = self.client.clone();
        let (kind, namespace, settings) = (self.kind, self.namespace.clone(), self.settings.clone());
        let context = Arc::new(Context {
            p: self,
            state: Mutex::default(),
            changes: AtomicU64::new(0),
            resync_due: AtomicBool::new(false),
            failures: AtomicU32::new(0),
            listed: AtomicBool::new(false),
            pass: tokio::sync::Mutex::new(()),
        });
        let (main, refining) = kind.resources();
        let (main_api, ar) = api(&client, &main, namespace.as_deref());
        let writer = Writer::<DynamicObject>::new(ar.clone());
        let reader = writer.as_reader();
        let trigger = {
            let context = context.clone();
            watcher(main_api, watcher::Config::default()).reflect(writer).filter_map(move |event| {
                let trigger = match event {
                    Ok(Event::Init) => None,
                    // A re-list may have missed a deletion: the next pass reads the set again.
                    Ok(Event::InitDone) => {
                        context.listed.store(true, Ordering::Relaxed);
                        context.changed();
                        None
                    }
                    Ok(Event::InitApply(o) | Event::Apply(o) | Event::Delete(o)) => {
                        context.changed();
                        Some(Ok(o))
                    }
                    Err(e) => Some(Err(e)),
                };
                future::ready(trigger)
            })
        };
        let refiners = {
            let context = context.clone();
            let all: Vec<_> =
                refining.iter().map(|r| refining_changes(&client, *r, namespace.as_deref()).boxed()).collect();
            stream::select_all(all).map(move |()| context.changed())
        };
        let resync = {
            let context = context.clone();
            super::every(settings.resync).map(move |()| {
                context.resync_due.store(true, Ordering::Relaxed);
                context.changed();
            })
        };
        let controller = Controller::for_stream_with(trigger, reader.clone(), ar)
            .with_config(controller::Config::default().debounce(settings.debounce).concurrency(1))
            .reconcile_all_on(refiners)
            .reconcile_all_on(resync)
            .run(|_, context: Arc<Context<P>>| async move { context.pass().await }, error_policy, context.clone());
        let mut controller = std::pin::pin!(controller);
        // Each member's status report, mirrored every --status-interval seconds.
        let mut status = tokio::time::interval_at(Instant::now() + settings.status_interval, settings.status_interval);
        status.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A set with no member object reconciles nothing, yet it is read (its EKS clusters, and
        // `/readyz`): a quiet tick reads it when it changed, or a failed read is due again.
        let mut quiet = tokio::time::interval(settings.debounce.max(Duration::from_millis(100)));
        quiet.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                item = controller.next() => match item {
                    None => return Err(SetStopped::Ended),
                    Some(Ok(_) | Err(controller::Error::ReconcilerFailed(..))) => {}
                    // A member deleted: read the set again (what it published stays).
                    Some(Err(controller::Error::ObjectNotFound(_))) => outside(&context).await,
                    Some(Err(controller::Error::QueueError(e))) => match &e {
                        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchFailed(kube::Error::Api(s)) if s.code == 404 => {
                            tracing::debug!(resource = %format!("{}.{}", main.plural, main.group), "not installed here; watched again later");
                        }
                        _ => tracing::warn!(resource = %format!("{}.{}", main.plural, main.group), error = %e, "watch interrupted; retrying"),
                    },
                    Some(Err(e @ controller::Error::RunnerError(_))) => {
                        tracing::warn!(error = %e, "the controller's runner failed");
                    }
                },
                _ = status.tick(), if !settings.dry_run => context.mirror_members().await,
                _ = quiet.tick() => {
                    if (context.listed.load(Ordering::Relaxed) && reader.is_empty()) || context.overdue() {
                        outside(&context).await;
                    }
                }
            }
        }
    }
}

/// A pass the controller did not ask for; its failure is retried from the same back-off.
async fn outside<P: Publish>(context: &Context<P>) {
    if let Err(e) = context.pass().await {
        let delay = context.back_off();
        tracing::debug!(error = %e, retry_in_s = delay.as_secs_f64(), "the pass over the set failed");
    }
}

fn error_policy<P: Publish>(_: Arc<DynamicObject>, e: &PassFailed, context: Arc<Context<P>>) -> Action {
    let delay = context.back_off();
    tracing::debug!(error = %e, retry_in_s = delay.as_secs_f64(), "the pass over the set failed");
    Action::requeue(delay)
}
