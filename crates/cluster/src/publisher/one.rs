//! One cluster's publisher: a controller on the cluster's source object (the Infrastructure
//! object `cluster`, or the ConfigMap), which publishes the object's document, mirrors the
//! function's status report with the publisher's conditions, and keeps `/readyz` and the metrics.
//!
//! The watch is on that one object (`fieldSelector=metadata.name=<name>`). A reconcile publishes
//! when the document's bytes changed since the last publish decided (or on a resync, or while a
//! failed publish is being retried); an object deleted, never created, or a ConfigMap without the
//! key is the source's absence: nothing is published, what was published last stays in force,
//! and the conditions say so. A watch error retrying cannot fix (no such resource type, access
//! denied) ends the publisher, after saying why in the cluster.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::{future, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tagwarden_core::publish::{PublishError, PublishOutcome, PublishResult};
use tagwarden_engine::retry::Backoff;

use super::{classify, mirror_now, proven_cluster, unix_now, Publish, Settings, Sink};
use crate::conditions::{Facts, PublishFailure};
use crate::health::{Health, Reason};
use crate::infrastructure::Infrastructure;
use crate::mirror::StatusMirror;
use crate::source::{document_of_configmap, document_of_infrastructure, ClusterSource, SourceDocument};
use crate::watch::{judge, Trouble};
use crate::ClusterError;

/// Why the publisher stopped.
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// The source cannot be read, and retrying cannot fix it.
    #[error(transparent)]
    Source(#[from] ClusterError),
    /// The controller's stream ended (it never does by itself).
    #[error("the watch ended")]
    Ended,
}

/// One cluster's publisher.
pub struct Publisher<P> {
    pub client: Client,
    pub source: ClusterSource,
    pub target: P,
    pub mirror: StatusMirror,
    pub health: Arc<Health>,
    pub settings: Settings,
    /// `--cluster`: into a cluster set, the cluster whose folder the document goes into.
    pub cluster: Option<String>,
    pub sink: Arc<dyn Sink>,
}

/// A publish that failed; the error policy retries it with [`Backoff::PUBLISH`].
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct PublishFailed {
    pub reason: &'static str,
    pub resource_version: String,
    #[source]
    pub error: PublishError,
}

/// How an object of the source's kind becomes its document.
type DocumentOf<K> = fn(&ClusterSource, &K) -> Result<SourceDocument, ClusterError>;

/// The reconciler's context: what a reconcile decides with, and what it learned.
struct Context<P> {
    p: Publisher<P>,
    state: Mutex<State>,
    /// Set by the resync trigger, taken by the next reconcile: a resync that finds the store in
    /// line is said nowhere; one that had to write again is a warning.
    resync_due: AtomicBool,
    /// Failed publishes in a row, for the back-off.
    failures: AtomicU32,
    /// Watch interruptions, for `tagwarden_watch_restarts_total`.
    restarts: AtomicU64,
    /// A document that could not be encoded: no retry can fix it.
    fatal: Mutex<Option<ClusterError>>,
}

#[derive(Default)]
struct State {
    facts: Facts,
    /// The document of the last publish decided (written, unchanged or refused).
    decided_text: Option<String>,
    /// The document of the last attempt: a new one starts the back-off over.
    attempted_text: Option<String>,
    /// The last attempt failed: the same document is published again when retried.
    failing: bool,
    /// In a cluster set, the report mirrored is this cluster's.
    own_cluster: Option<String>,
    /// Nothing is mirrored before the first decision: a condition then would only guess.
    decided: bool,
}

impl<P: Publish> Context<P> {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn mirror(&self) {
        let (facts, own) = {
            let s = self.state();
            (s.facts.clone(), s.own_cluster.clone())
        };
        mirror_now(&self.p.mirror, &self.p.target, own.as_deref(), &facts).await;
    }

    /// The source holds no document: say so once, until it holds one again.
    async fn absent(&self, why: String) {
        {
            let mut s = self.state();
            if s.facts.absent.is_some() {
                return;
            }
            let reason = format!("{why}; nothing is published, and the policy published last stays in force");
            tracing::warn!(source = %self.p.source, "{reason}");
            s.facts.absent = Some(reason);
            s.decided = true;
        }
        self.p.health.set_ready();
        self.mirror().await;
    }

    async fn reconcile_document(&self, doc: SourceDocument) -> Result<Action, PublishFailed> {
        let resyncing = self.resync_due.swap(false, Ordering::Relaxed);
        let (was_absent, unchanged) = {
            let mut s = self.state();
            let was_absent = s.facts.absent.take().is_some();
            let unchanged = s.decided_text.as_deref() == Some(doc.text.as_str()) && !s.failing;
            if s.attempted_text.as_deref() != Some(doc.text.as_str()) {
                self.failures.store(0, Ordering::Relaxed);
                s.attempted_text = Some(doc.text.clone());
            }
            (was_absent, unchanged)
        };
        if unchanged && !resyncing {
            tracing::debug!(source = %self.p.source, resource_version = %doc.resource_version, "unchanged");
            if was_absent {
                self.mirror().await;
            }
            return Ok(Action::await_change());
        }
        if !unchanged {
            tracing::info!(source = %self.p.source, resource_version = %doc.resource_version, bytes = doc.text.len(), "new document");
        }
        let target = &self.p.target;
        let published = match proven_cluster(self.p.cluster.as_deref(), &self.p.source, &doc) {
            Ok(cluster) => target.publish(&doc.text, cluster.as_deref(), self.p.settings.dry_run).await,
            Err(why) => Ok(PublishOutcome::refused(target.location(), vec![why.to_string()])),
        };
        // Ready once a first publish was decided (even a failed one: `Degraded` says why).
        self.p.health.set_ready();
        let health = &self.p.health;
        match published {
            Ok(outcome) => {
                {
                    let mut s = self.state();
                    s.decided = true;
                    s.failing = false;
                    s.decided_text = Some(doc.text);
                    s.facts.failure = None;
                    s.facts.refused = outcome.violations.clone();
                    health.set_refused(!s.facts.refused.is_empty());
                    if s.facts.refused.is_empty() {
                        s.facts.published = outcome.version.clone().or(s.facts.published.take());
                        health.succeeded(unix_now());
                    } else {
                        health.failed(Reason::Refused);
                        tracing::warn!(violations = ?s.facts.refused, "the cluster's document is refused; what was published stays in force");
                    }
                    s.own_cluster = outcome.infra_id.clone().or(s.own_cluster.take());
                }
                self.failures.store(0, Ordering::Relaxed);
                if !(resyncing && outcome.result == PublishResult::Unchanged) {
                    self.p.sink.published(&outcome);
                }
                if resyncing && outcome.result == PublishResult::Written {
                    tracing::warn!(location = %outcome.location, "the published object had been changed or deleted at the store; written again");
                }
                self.mirror().await;
                Ok(Action::await_change())
            }
            // A lost race re-reads what the other publisher wrote and decides again.
            Err(error) => {
                let (metric, failure) = classify(&error, &target.endpoint());
                health.failed(metric);
                let reason = failure.reason;
                {
                    let mut s = self.state();
                    s.decided = true;
                    s.failing = true;
                    s.facts.failure = Some(failure);
                }
                self.mirror().await;
                Err(PublishFailed { reason, resource_version: doc.resource_version, error })
            }
        }
    }
}

impl<P: Publish> Publisher<P> {
    /// Publish on every change of the source until an error retrying cannot fix.
    pub async fn run(self) -> Result<(), Stopped> {
        let client = self.client.clone();
        let source = self.source.clone();
        let context = Arc::new(Context {
            state: Mutex::new(State {
                facts: Facts { location: self.target.location(), ..Facts::default() },
                ..State::default()
            }),
            p: self,
            resync_due: AtomicBool::new(false),
            failures: AtomicU32::new(0),
            restarts: AtomicU64::new(0),
            fatal: Mutex::new(None),
        });
        match &source {
            ClusterSource::Infrastructure => {
                let document: DocumentOf<Infrastructure> = |_, infra| document_of_infrastructure(infra);
                run_on(Api::<Infrastructure>::all(client), None, document, context).await
            }
            ClusterSource::ConfigMap { namespace, .. } => {
                let api = Api::<ConfigMap>::namespaced(client, namespace);
                run_on(api, Some(namespace.clone()), document_of_configmap, context).await
            }
        }
    }
}

/// The source's object, or a stand-in named like it when the first listing found none: the
/// reconcile it asks for finds the store empty, which is the source's absence.
fn triggers<K>(
    api: Api<K>,
    name: String,
    namespace: Option<String>,
    writer: reflector::store::Writer<K>,
) -> impl futures_util::Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + Clone + Default + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut listed = false;
    watcher(api, config).reflect(writer).filter_map(move |event| {
        let trigger = match event {
            Ok(Event::Init) => {
                listed = false;
                None
            }
            Ok(Event::InitApply(object)) => {
                listed = true;
                Some(Ok(object))
            }
            // A deletion asks for a reconcile too: it finds the object gone.
            Ok(Event::Apply(object) | Event::Delete(object)) => Some(Ok(object)),
            Ok(Event::InitDone) if !listed => {
                let mut stand_in = K::default();
                stand_in.meta_mut().name = Some(name.clone());
                stand_in.meta_mut().namespace = namespace.clone();
                Some(Ok(stand_in))
            }
            Ok(Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        future::ready(trigger)
    })
}

async fn run_on<K, P>(
    api: Api<K>,
    namespace: Option<String>,
    document: DocumentOf<K>,
    context: Arc<Context<P>>,
) -> Result<(), Stopped>
where
    K: Resource<DynamicType = ()> + Clone + Default + DeserializeOwned + Debug + Send + Sync + 'static,
    P: Publish,
{
    let settings = context.p.settings.clone();
    let source = context.p.source.clone();
    let mut status = tokio::time::interval(settings.status_interval);
    status.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Each round is one controller; a watch whose resourceVersion expired on the request itself
    // starts a new one, which lists first (kube's watcher would ask for the same version again).
    loop {
        let (reader, writer): (Store<K>, _) = reflector::store();
        let trigger = triggers(api.clone(), source.object_name().to_string(), namespace.clone(), writer);
        let resync = {
            let context = context.clone();
            super::every(settings.resync).map(move |()| context.resync_due.store(true, Ordering::Relaxed))
        };
        let reconcile = move |object: Arc<K>, context: Arc<Context<P>>| async move {
            match document(&context.p.source, &object) {
                Ok(doc) => context.reconcile_document(doc).await,
                Err(e @ ClusterError::MissingKey { .. }) => {
                    context.absent(e.to_string()).await;
                    Ok(Action::await_change())
                }
                Err(e) => {
                    *context.fatal.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
                    Ok(Action::await_change())
                }
            }
        };
        let controller = Controller::for_stream(trigger, reader)
            .with_config(controller::Config::default().debounce(settings.debounce).concurrency(1))
            .reconcile_all_on(resync)
            .run(reconcile, error_policy, context.clone());
        let mut controller = std::pin::pin!(controller);
        loop {
            let item = tokio::select! {
                item = controller.next() => item,
                _ = status.tick() => {
                    let decided = context.state().decided;
                    if decided {
                        context.mirror().await;
                    }
                    continue;
                }
            };
            let fatal = context.fatal.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            if let Some(e) = fatal {
                return Err(unreadable(&context, e).await);
            }
            match item {
                None => return Err(Stopped::Ended),
                Some(Ok(_)) | Some(Err(controller::Error::ReconcilerFailed(..))) => {}
                Some(Err(controller::Error::ObjectNotFound(_))) => {
                    context.absent(format!("{source} does not exist (deleted, or not created yet)")).await;
                }
                Some(Err(controller::Error::QueueError(e))) => {
                    let n = context.restarts.fetch_add(1, Ordering::Relaxed) + 1;
                    context.p.health.watch_restarted(n);
                    match judge(&source, &e) {
                        Trouble::Fatal(e) => return Err(unreadable(&context, e).await),
                        Trouble::Relist => break,
                        Trouble::Transient => {}
                    }
                }
                Some(Err(e @ controller::Error::RunnerError(_))) => {
                    tracing::warn!(error = %e, "the controller's runner failed");
                }
            }
        }
    }
}

/// Say in the cluster why the source is unreadable before the pod restarts: `oc` shows why.
async fn unreadable<P: Publish>(context: &Context<P>, e: ClusterError) -> Stopped {
    context.state().facts.failure = Some(PublishFailure { reason: "ClusterSourceUnreadable", message: e.to_string() });
    context.mirror().await;
    Stopped::Source(e)
}

/// A failed publish is retried with back-off; a newer document or a resync does not wait for it
/// (the controller runs the earliest request).
fn error_policy<K, P: Publish>(_: Arc<K>, e: &PublishFailed, context: Arc<Context<P>>) -> Action {
    let failures = context.failures.fetch_add(1, Ordering::Relaxed);
    let backoff = Backoff::PUBLISH.delay(failures);
    tracing::error!(error = %e.error, reason = e.reason, resource_version = %e.resource_version, retry_in_s = backoff.as_secs_f64(), "publish failed; retrying");
    Action::requeue(backoff)
}
