//! `--watch`: the source's changes as a stream of complete documents.
//!
//! Built on kube's watcher for that one object (`fieldSelector=metadata.name=<name>`), which
//! implements the API server's list/watch contract
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes>):
//! list, then watch from the list's `resourceVersion`; after a disconnect, watch again from the last
//! `resourceVersion` seen; after `410 Gone` (the version was compacted away), list again. Watch
//! events are decoded a whole line at a time, so an object cut off by a dropped connection is
//! never seen, let alone published.
//!
//! On top of that: a [`Change::Document`] only when the document's bytes change (a re-list, or a
//! status update of a field tagwarden does not read, yields nothing new); a [`Change::Absent`] once
//! when the object goes away; transient errors logged and retried with client-go's backoff; and
//! the errors retrying cannot fix (no such resource type, access denied) ending the stream.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher::{self, watch_object, DefaultBackoff};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::infrastructure::Infrastructure;
use super::source::{document_of_configmap, document_of_infrastructure, ClusterSource, SourceDocument, NOT_OPENSHIFT};
use super::ClusterError;

/// What the publisher is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A complete document whose bytes differ from the last one yielded: publish it.
    Document(SourceDocument),
    /// The source holds no document (the object was deleted or never created, or the ConfigMap
    /// lacks the key): nothing is published, and what was published last stays in force.
    Absent { reason: String },
}

/// One step of the underlying watcher: the object's document, its absence, or a watcher error.
type Step = Result<Option<Result<SourceDocument, ClusterError>>, watcher::Error>;

struct State {
    client: Client,
    source: ClusterSource,
    inner: BoxStream<'static, Step>,
    last_text: Option<String>,
    present: Option<bool>,
    backoff: DefaultBackoff,
    done: bool,
    restarts: Arc<AtomicU64>,
}

/// Watch `source` until an error that retrying cannot fix, which is the stream's last item. The
/// first item is the current document (or its absence).
pub fn watch(client: Client, source: ClusterSource) -> impl Stream<Item = Result<Change, ClusterError>> + Send {
    watch_counting(client, source, Arc::default())
}

/// [`watch`], counting in `restarts` every time the watch was interrupted and resumed.
pub fn watch_counting(
    client: Client,
    source: ClusterSource,
    restarts: Arc<AtomicU64>,
) -> impl Stream<Item = Result<Change, ClusterError>> + Send {
    let inner = start(&client, &source);
    let state = State {
        client,
        source,
        inner,
        last_text: None,
        present: None,
        backoff: DefaultBackoff::default(),
        done: false,
        restarts,
    };
    stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        let item = s.next_change().await;
        s.done = item.is_err();
        Some((item, s))
    })
}

fn start(client: &Client, source: &ClusterSource) -> BoxStream<'static, Step> {
    match source {
        ClusterSource::Infrastructure => {
            objects(Api::<Infrastructure>::all(client.clone()), source, |_, infra| document_of_infrastructure(infra))
        }
        ClusterSource::ConfigMap { namespace, .. } => {
            objects(Api::<ConfigMap>::namespaced(client.clone(), namespace), source, document_of_configmap)
        }
    }
}

fn objects<K>(
    api: Api<K>,
    source: &ClusterSource,
    document: fn(&ClusterSource, &K) -> Result<SourceDocument, ClusterError>,
) -> BoxStream<'static, Step>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let source = source.clone();
    watch_object(api, source.object_name()).map(move |step| step.map(|o| o.map(|obj| document(&source, &obj)))).boxed()
}

impl State {
    async fn next_change(&mut self) -> Result<Change, ClusterError> {
        loop {
            let step = match self.inner.next().await {
                Some(step) => step,
                // The watcher never ends by itself; should it, watch anew.
                None => {
                    self.inner = start(&self.client, &self.source);
                    continue;
                }
            };
            let absent = match step {
                Ok(Some(Ok(doc))) => {
                    self.present = Some(true);
                    if self.last_text.as_deref() == Some(doc.text.as_str()) {
                        tracing::debug!(source = %self.source, resource_version = %doc.resource_version, "unchanged");
                        continue;
                    }
                    tracing::info!(source = %self.source, resource_version = %doc.resource_version, bytes = doc.text.len(), "new document");
                    self.last_text = Some(doc.text.clone());
                    return Ok(Change::Document(doc));
                }
                Ok(Some(Err(e @ ClusterError::MissingKey { .. }))) => e.to_string(),
                Ok(Some(Err(e))) => return Err(e),
                Ok(None) => format!("{} does not exist (deleted, or not created yet)", self.source),
                Err(e) => {
                    self.on_error(e).await?;
                    continue;
                }
            };
            if self.present != Some(false) {
                self.present = Some(false);
                let reason = format!("{absent}; nothing is published, and the policy published last stays in force");
                tracing::warn!(source = %self.source, "{reason}");
                return Ok(Change::Absent { reason });
            }
        }
    }

    /// Ends the watch on what retrying cannot fix; otherwise waits out the backoff.
    async fn on_error(&mut self, e: watcher::Error) -> Result<(), ClusterError> {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        match judge(&self.source, &e) {
            Trouble::Fatal(e) => return Err(e),
            Trouble::Relist => {
                self.inner = start(&self.client, &self.source);
                return Ok(());
            }
            Trouble::Transient => {}
        }
        if let Some(delay) = self.backoff.next() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }
}

/// What a watch error on `source` calls for.
pub(crate) enum Trouble {
    /// Retrying cannot fix it (no such resource type, access denied): the watch ends with it.
    Fatal(ClusterError),
    /// The resourceVersion expired on the watch request itself: start over, which lists first.
    Relist,
    /// Retried with back-off (the watcher itself re-lists after a 410 sent as a watch event).
    Transient,
}

/// Judge a watch error on `source`, logging what is retried.
pub(crate) fn judge(source: &ClusterSource, e: &watcher::Error) -> Trouble {
    let what = source.to_string();
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404 => {
            Trouble::Fatal(ClusterError::NotFound {
                what: format!("the resource type of {what}"),
                hint: match source {
                    ClusterSource::Infrastructure => NOT_OPENSHIFT,
                    ClusterSource::ConfigMap { .. } => "",
                },
            })
        }
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.code == 401 =>
        {
            Trouble::Fatal(ClusterError::Unauthorized { what, status: s.message.clone() })
        }
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.code == 403 =>
        {
            Trouble::Fatal(ClusterError::Forbidden { what, verbs: "get, list and watch", status: s.message.clone() })
        }
        // The watcher re-lists after a 410 sent as a watch event (what API servers do), but
        // keeps retrying the same resourceVersion when the watch request itself is answered
        // 410: start over, which lists first.
        watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 410 => {
            tracing::info!(source = %what, "resourceVersion expired (HTTP 410 Gone): listing again");
            Trouble::Relist
        }
        watcher::Error::WatchError(s) if s.code == 410 => {
            tracing::info!(source = %what, "resourceVersion expired (410 Gone): listing again");
            Trouble::Transient
        }
        _ => {
            tracing::warn!(source = %what, error = %e, "watch interrupted; retrying");
            Trouble::Transient
        }
    }
}
