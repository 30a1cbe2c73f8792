//! Policy-change sweeps, filtered and coalesced ("any object created under the set's
//! prefix forces a sweep"). A notification that objects were written where the policy is
//! ([`Engine::policy_changed`]):
//!
//! - sweeps nothing unless one of them is a policy document of the deployment's layout (the one
//!   object itself; under a prefix, a `.yaml`/`.yml`/`.json` that is not the status report or a
//!   dot-file; in a set, one inside a cluster's folder): `x.txt` costs no call;
//! - in a set, sweeps only the clusters whose folders the documents are in;
//! - is coalesced per cluster: a sweep of the cluster that started after the write (by the
//!   storage service's event time, less [`SKEW_MS`]) has read the new policy already, so the
//!   notification is done; otherwise, if the cluster's last policy-change sweep started less than
//!   [`POLICY_SWEEP_WINDOW`] ago, it waits for the window to end (then looks again: another
//!   invocation may have swept meanwhile), so one cluster is swept at most once a window however
//!   many documents are written, and the last write is never left unswept;
//! - reuses, in the sweep that waited out the window, what the previous sweep's listings beside
//!   the owned one (IAM, Route 53: whole-account listings, on small shared quotas) found the
//!   cluster owning: those resources are re-read (not
//!   trusted from the listing) and the account is not listed again. A resource that became the
//!   cluster's within the window is not in it: its own create or tag event reconciles it, and the
//!   next scheduled sweep lists everything.
//!
//! All of this is per warm instance: nothing shared across instances exists in the tree for it
//! (policy notifications invoke the function directly, not through the SQS buffer), so across
//! instances the bound is the function's concurrency times one sweep per window.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::sweep::Listed;
use super::{Adapter, Engine};
use crate::policy_store::{Layout, PolicySource};
use tagwarden_core::policy::clusters::cluster_of;
use tagwarden_core::report::{epoch_ms, Outcome};
use tagwarden_core::resource::ResourceRef;

/// A cluster's policy-change sweeps are at least this far apart within one warm instance. Long
/// enough that a publisher writing a cluster's layers one after another (the CLI writes each
/// document in turn; a GitOps sync a handful) costs one more sweep, not one per document; short
/// next to the Lambda's and the queue's timeouts, and to the minutes a sweep of a large cluster
/// takes anyway.
pub const POLICY_SWEEP_WINDOW: Duration = Duration::from_secs(30);

/// How far the storage service's clock (the event's time) may be ahead of ours.
const SKEW_MS: u64 = 1_000;

/// The key of a whole deployment (a single policy or a prefix): its clusters are not told apart.
const EVERY: &str = "*";

/// What the coalescing remembers, per cluster.
#[derive(Debug, Default)]
pub(crate) struct Coalesce {
    /// When the cluster's last policy-change sweep started: epoch ms (compared with event times)
    /// and the instant (for the window).
    started: Mutex<HashMap<String, (u64, Instant)>>,
    /// The resources the listings beside the owned one found the cluster owning, and when.
    beside: Mutex<HashMap<String, (Instant, Vec<ResourceRef>)>>,
}

enum Next {
    Covered,
    Wait(Duration),
    Sweep(Vec<String>),
}

impl Coalesce {
    /// What to do for a change of `keys` written at `written_ms`; a sweep is reserved at once, so
    /// a concurrent invocation of the same instance finds it started.
    fn next(&self, keys: &[String], written_ms: u64, window: Duration) -> Next {
        let Ok(mut started) = self.started.lock() else { return Next::Sweep(keys.to_vec()) };
        let pending: Vec<String> = keys
            .iter()
            .filter(|k| started.get(*k).is_none_or(|(ms, _)| *ms < written_ms.saturating_add(SKEW_MS)))
            .cloned()
            .collect();
        if pending.is_empty() {
            return Next::Covered;
        }
        let wait = pending
            .iter()
            .filter_map(|k| started.get(k).map(|(_, at)| window.saturating_sub(at.elapsed())))
            .max()
            .unwrap_or_default();
        if !wait.is_zero() {
            return Next::Wait(wait);
        }
        let now = (epoch_ms(), Instant::now());
        for k in &pending {
            started.insert(k.clone(), now);
        }
        Next::Sweep(pending)
    }

    /// A sweep of `keys` that must be retried covers nothing: its redelivery sweeps again.
    fn forget(&self, keys: &[String]) {
        if let Ok(mut started) = self.started.lock() {
            for k in keys {
                started.remove(k);
            }
        }
    }

    /// What the listings beside the owned one found each of `clusters` owning, if every one was
    /// listed by the sweep of the window before this one. A sweep that waited out the window
    /// starts a whole window after the last one started, and that one listed a moment after its
    /// start: the listings are then about one window old, so an age limit of one window would be
    /// a race between the two sweeps' first calls. Two windows hold the last sweep's listings and
    /// nothing older.
    pub(super) fn beside(&self, clusters: &[&str], window: Duration) -> Option<Vec<Listed>> {
        let beside = self.beside.lock().ok()?;
        let mut found = Vec::new();
        for c in clusters {
            let (_, refs) = beside.get(*c).filter(|(at, _)| at.elapsed() < window.saturating_mul(2))?;
            found.extend(refs.iter().map(|r| (r.clone(), None)));
        }
        Some(found)
    }

    /// Remember what the listings beside the owned one found each swept cluster owning.
    pub(super) fn remember(&self, found: HashMap<String, Vec<ResourceRef>>) {
        if let Ok(mut beside) = self.beside.lock() {
            let now = Instant::now();
            for (cluster, refs) in found {
                beside.insert(cluster, (now, refs));
            }
        }
    }
}

impl<A: Adapter> Engine<A> {
    /// Whether object `name`, written where the policy is, is one of its documents.
    fn is_policy_object(&self, name: &str) -> bool {
        let source = &self.store.source;
        match source.layout() {
            Layout::One(one) => name == one,
            Layout::Prefix(prefix) => name.starts_with(&prefix) && source.is_document(name),
            Layout::Set(prefix) => {
                name.starts_with(&prefix) && source.is_document(name) && cluster_of(&prefix, name).is_some()
            }
        }
    }

    /// `objects` were written where the policy is, the last at `written_ms` by the storage
    /// service's clock (now, when the notification does not say): sweep the clusters whose
    /// policy documents they are, coalesced (see the module). `sweep` (false: only re-check the
    /// policy, for a delivery that must be answered at once) says whether to sweep at all.
    pub async fn policy_changed(
        &self,
        objects: &[String],
        written_ms: Option<u64>,
        sweep: bool,
        stop_at: Option<Instant>,
    ) -> Outcome {
        let documents: Vec<&String> = objects.iter().filter(|o| self.is_policy_object(o)).collect();
        if documents.is_empty() {
            tracing::info!(?objects, "no policy document was written: nothing to re-check or sweep");
            let mut out = Outcome::default();
            out.metrics.events_received = 1;
            out.metrics.events_ignored = 1;
            return out;
        }
        if !sweep {
            return self.recheck_policy().await;
        }
        let keys: Vec<String> = match self.store.source.layout() {
            Layout::Set(prefix) => {
                let mut ids: Vec<String> = documents.iter().filter_map(|d| cluster_of(&prefix, d)).collect();
                ids.sort();
                ids.dedup();
                ids
            }
            _ => vec![EVERY.to_string()],
        };
        let written_ms = written_ms.unwrap_or_else(epoch_ms);
        loop {
            match self.coalesce.next(&keys, written_ms, self.policy_window) {
                Next::Covered => {
                    tracing::info!(clusters = ?keys, "a sweep that started after this policy change has read it: coalesced");
                    let mut out = Outcome::default();
                    out.metrics.events_received = 1;
                    out.metrics.events_ignored = 1;
                    return out;
                }
                Next::Wait(wait) => {
                    if stop_at.is_some_and(|t| Instant::now() + wait >= t) {
                        let why = tagwarden_core::reason::Deferred::SweepWindow;
                        return Outcome { error: Some(why.into()), ..Outcome::default() };
                    }
                    tracing::info!(clusters = ?keys, wait_ms = wait.as_millis() as u64, "policy change: waiting out the sweep window");
                    tokio::time::sleep(wait).await;
                }
                Next::Sweep(keys) => {
                    let only: Option<Vec<String>> = (keys != [EVERY]).then(|| keys.clone());
                    let mut out = Box::pin(self.sweep_with(true, only.as_deref(), stop_at, true)).await;
                    if out.must_retry() {
                        self.coalesce.forget(&keys);
                    }
                    out.metrics.events_received += 1;
                    return out;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::memory::{tags, Memory};
    use super::super::tests::{engine, OWNED, POLICY};
    use tagwarden_core::report::epoch_ms;
    use tagwarden_core::resource::ResourceRef;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn only_policy_documents_are_swept_once_a_window_and_a_later_change_is_never_dropped() {
        let mut engine = engine(Memory::with(&[("i-1", tags(&[OWNED]))]), POLICY);
        engine.policy_window = Duration::from_millis(300);
        let out = engine.policy_changed(&names(&["x.txt", "tagwarden-status.json"]), None, true, None).await;
        assert!(out.records.is_empty() && out.metrics.events_ignored == 1, "{out:?}");
        let before = epoch_ms() - 5_000;
        let first = engine.policy_changed(&names(&["p.yaml"]), Some(before), true, None).await;
        assert_eq!(first.records.len(), 1, "swept: {first:?}");
        let covered = engine.policy_changed(&names(&["p.yaml"]), Some(before + 1), true, None).await;
        assert!(covered.records.is_empty() && covered.metrics.events_ignored == 1, "read by the first: {covered:?}");
        // Written after the first sweep started: swept, once the window has passed.
        let soon = Some(Instant::now() + Duration::from_millis(10));
        let deferred = engine.policy_changed(&names(&["p.yaml"]), Some(epoch_ms()), true, soon).await;
        assert!(deferred.must_retry() && deferred.records.is_empty(), "the deadline comes first: handed back");
        let at = Instant::now();
        let later = engine.policy_changed(&names(&["p.yaml"]), Some(epoch_ms()), true, None).await;
        assert_eq!(later.records.len(), 1, "{later:?}");
        assert!(at.elapsed() >= Duration::from_millis(200), "waited out the window: {:?}", at.elapsed());
    }

    /// The sweep after a waited-out window finds the last sweep's listings about one window old:
    /// they are reused then, and not past two windows.
    #[test]
    fn listings_are_reused_by_the_next_windows_sweep_only() {
        let coalesce = super::Coalesce::default();
        let role = ResourceRef::from_arn("arn:aws:iam::123456789012:role/cl00-worker").expect("arn");
        coalesce.remember([("cl00".to_string(), vec![role.clone()])].into());
        let window = Duration::from_secs(1);
        std::thread::sleep(window);
        let reused = coalesce.beside(&["cl00"], window).expect("one window old: reused");
        assert_eq!(reused, vec![(role, None)]);
        assert!(coalesce.beside(&["cl00", "cl01"], window).is_none(), "a cluster never listed: list again");
        std::thread::sleep(Duration::from_millis(20));
        assert!(coalesce.beside(&["cl00"], Duration::from_millis(10)).is_none(), "two windows old: listed again");
    }

    #[tokio::test]
    async fn a_sweep_that_failed_covers_nothing() {
        let cloud = Memory { throttled: true, ..Memory::with(&[("i-1", tags(&[OWNED, ("team", "x")]))]) };
        let engine = engine(cloud, POLICY);
        let before = epoch_ms() - 5_000;
        let failed = engine.policy_changed(&names(&["p.yaml"]), Some(before), true, None).await;
        assert!(failed.must_retry(), "{failed:?}");
        let again = engine.policy_changed(&names(&["p.yaml"]), Some(before), true, None).await;
        assert_eq!(again.records.len(), 1, "its redelivery sweeps again: {again:?}");
    }
}
