//! Where the policy comes from, for every cloud: one store over a small [`PolicySource`] trait (get with
//! an ETag, list by prefix, read and write the status report), so the re-check rules are written
//! once (docs/src/concepts/policy.md):
//!
//! - a warm function re-checks at most every `ttl`;
//! - one document is fetched conditionally on its ETag (S3, blobs) or version (SSM), so an
//!   unchanged one is not downloaded, or not parsed, again;
//! - a prefix is listed, and only documents whose ETag changed are downloaded; a prefix's documents
//!   are the `.yaml`/`.yml`/`.json` objects under it that are not dot-files and not the status
//!   report, layered in name order;
//! - a cluster set (`Layout::Set`) is listed once for all its clusters; each cluster's documents
//!   are fetched, validated, cached and reported on their own (`policy::clusters`);
//! - a set is enforced only for the clusters the deployment lists (`TAGWARDEN_CLUSTERS`,
//!   [`PolicyStore::set_clusters`]); a folder of any other is never downloaded, only reported once;
//!   without a list a set is not enforced at all (fail closed);
//! - the limits of `policy::load` are applied from the listing before anything is downloaded, and
//!   counted again while reading: a cluster over them is refused alone, as a set's clusters are in
//!   name order once the set's own limits are reached;
//! - what is fetched goes to the [`PolicyCache`], which decides what is in force.
//!
//! AWS (`aws::policy_store`: S3 and SSM) and Azure (`azure::blob_store`) implement [`PolicySource`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use tagwarden_core::policy::cache::{LoadedPolicy, PolicyCache, PolicyChange, PolicyUnavailable, Standing};
use tagwarden_core::policy::clusters::{cluster_of, valid_infra_id, Policies};

mod fetch;
mod source;

use fetch::{Budget, Fetches};
pub use source::{
    content_type, contest_state_object, is_policy_document, Layout, ListedObject, Object, PolicySource, PutError,
    STATE_FOLDER,
};

/// A cluster's newer policy version that was rejected while an older one (or none) stays in
/// force: the store only says so; the caller counts and reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The cluster in a set; `None` for a single policy.
    pub cluster: Option<String>,
    /// Where that policy is, as messages show it.
    pub location: String,
    /// The version still in force, if any.
    pub in_force: Option<String>,
    pub errors: Vec<String>,
}

/// The policies for an invocation, and what was rejected on the way.
#[derive(Debug)]
pub struct Loaded {
    pub policies: Result<Policies, PolicyUnavailable>,
    pub rejected: Vec<Rejection>,
}

pub struct PolicyStore<S> {
    pub source: S,
    pub ttl: Duration,
    /// The clusters the deployment enforces (`TAGWARDEN_CLUSTERS`); `None`: not listed.
    clusters: Option<Vec<String>>,
    downloads: AtomicU64,
    state: Mutex<State>,
}

/// The caches, by cluster (`""` for a single policy), and when they were last re-checked.
#[derive(Default)]
struct State {
    checked: Option<Instant>,
    caches: BTreeMap<String, PolicyCache>,
    /// A set's folders of clusters the deployment does not list, reported once each.
    unlisted: std::collections::BTreeSet<String>,
}

/// What the variable and the flag that list a deployment's clusters are called, for messages.
pub const CLUSTERS_SETTING: &str = "TAGWARDEN_CLUSTERS (tagwarden sweep: --cluster)";

/// The key of a single policy's cache.
const SINGLE: &str = "";

impl<S: PolicySource> PolicyStore<S> {
    pub fn new(source: S, ttl: Duration) -> Self {
        PolicyStore { source, ttl, clusters: None, downloads: AtomicU64::new(0), state: Mutex::new(State::default()) }
    }

    /// Enforce only these clusters (`TAGWARDEN_CLUSTERS`): in a set, the folders of others are
    /// never loaded; a single policy must be one of theirs. Before the first load.
    pub fn set_clusters(&mut self, clusters: Option<Vec<String>>) {
        self.clusters = clusters;
    }

    /// The same, by value.
    pub fn with_clusters(mut self, clusters: Option<Vec<String>>) -> Self {
        self.set_clusters(clusters);
        self
    }

    /// Whether the deployment enforces cluster `infra_id` of a set: listed, and a name that can
    /// only be its own folder. The status report is written only for such a cluster.
    pub fn enforces(&self, infra_id: &str) -> bool {
        valid_infra_id(infra_id).is_ok() && self.clusters.as_ref().is_some_and(|l| l.iter().any(|c| c == infra_id))
    }

    pub fn location(&self) -> String {
        self.source.location()
    }

    /// Policy documents downloaded so far (a not-modified answer or an unchanged listed ETag
    /// downloads nothing).
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::Relaxed)
    }

    pub fn is_set(&self) -> bool {
        matches!(self.source.layout(), Layout::Set(_))
    }

    /// Where cluster `cluster`'s policy is (the store's location for a single policy).
    /// Where cluster `cluster`'s policy is (`""`: the single policy), as messages show it.
    pub fn location_for(&self, cluster: &str) -> String {
        if cluster == SINGLE {
            self.location()
        } else {
            self.source.cluster_location(cluster)
        }
    }

    /// Re-check when the TTL has passed (or when `force`): what changed, by cluster, and an error
    /// when no cluster has a version that can be used.
    async fn recheck(&self, force: bool) -> (Vec<(String, PolicyChange)>, Result<(), PolicyUnavailable>) {
        if self.is_set() && self.clusters.is_none() {
            let why = format!("a cluster set is enforced only for the clusters its deployment lists, and none are listed: set {CLUSTERS_SETTING} to their infraIDs (comma-separated; the Terraform module sets it from infra_ids)");
            return (Vec::new(), Err(self.unavailable(&why)));
        }
        let mut st = self.state.lock().await;
        let due = force || st.checked.is_none_or(|t| t.elapsed() >= self.ttl);
        let mut changes = Vec::new();
        if due {
            let cloud = self.source.cloud();
            // Boxed: once per TTL, and it keeps every caller's future shallow.
            let Fetches { clusters: fetched, unlisted } = Box::pin(self.fetch_all(&mut st.caches)).await;
            for folder in unlisted {
                if st.unlisted.insert(folder.clone()) {
                    let why = format!(
                        "{} is the folder of cluster {folder:?}, which this deployment does not list ({CLUSTERS_SETTING}): it is not enforced and never loaded; to enforce it, add its infraID to the deployment's infra_ids",
                        self.source.cluster_location(&folder)
                    );
                    tracing::warn!(folder, "{why}");
                    changes.push((folder, PolicyChange::Rejected { errors: vec![why] }));
                }
            }
            let mut unavailable = None;
            for (cluster, result) in fetched {
                let location = self.location_for(&cluster);
                let cache = st.caches.entry(cluster.clone()).or_insert_with(|| self.new_cache(&cluster));
                match cache.record(cloud, &location, result) {
                    Ok(Some(change)) => changes.push((cluster, change)),
                    Ok(None) => {}
                    // A set's cluster that never had a valid version and cannot be read now (its
                    // documents were removed) is forgotten.
                    Err(_) if cluster != SINGLE => {
                        st.caches.remove(&cluster);
                    }
                    Err(e) => unavailable = Some(e),
                }
            }
            if self.is_set() {
                st.caches.remove(SINGLE);
            }
            match unavailable {
                Some(e) if !st.caches.values().any(PolicyCache::has_good) => return (changes, Err(e)),
                _ => st.checked = Some(Instant::now()),
            }
        }
        if !st.caches.values().any(PolicyCache::has_good) {
            let why: Vec<String> = st
                .caches
                .iter()
                .filter_map(|(k, c)| c.current(&self.location_for(k)).err())
                .map(|e| if self.is_set() { format!("{}: {}", e.location, e.reason) } else { e.reason })
                .collect();
            let e = match (why.is_empty(), self.is_set()) {
                (true, true) => self.unavailable("no cluster has published a policy under it"),
                (true, false) => self.unavailable("no policy has been read yet"),
                (false, _) => self.unavailable(&why.join("; ")),
            };
            return (changes, Err(e));
        }
        (changes, Ok(()))
    }

    fn unavailable(&self, reason: &str) -> PolicyUnavailable {
        PolicyUnavailable { location: self.location(), reason: reason.to_string() }
    }

    /// Each cluster whose policy is in force now, with its version, as last read (no call made):
    /// for a set's report to name the clusters that own nothing yet.
    pub async fn in_force(&self) -> Vec<(String, String)> {
        let st = self.state.lock().await;
        st.caches
            .iter()
            .filter_map(|(k, c)| {
                c.current(&self.location_for(k)).ok().map(|p| (p.infra_id.clone(), p.policy.version.clone()))
            })
            .collect()
    }

    /// The policies in force, re-checked when the TTL has passed (or when `force`).
    pub async fn policies(&self, force: bool) -> (Result<Policies, PolicyUnavailable>, Vec<(String, PolicyChange)>) {
        let (changes, usable) = self.recheck(force).await;
        if let Err(e) = usable {
            return (Err(e), changes);
        }
        let st = self.state.lock().await;
        let good = st.caches.iter().filter_map(|(k, c)| c.current(&self.location_for(k)).ok());
        let policies = if self.is_set() {
            Policies::set(good.collect())
        } else {
            match good.into_iter().next() {
                Some(p) => Policies::one(p),
                None => return (Err(self.unavailable("no policy has been read yet")), changes),
            }
        };
        (Ok(policies), changes)
    }

    /// The one policy in force at a single location (not a set), re-checked when the TTL has
    /// passed (or when `force`), and what the re-check found.
    pub async fn current(&self, force: bool) -> (Result<Arc<LoadedPolicy>, PolicyUnavailable>, Option<PolicyChange>) {
        let (policies, changes) = self.policies(force).await;
        let change = changes.into_iter().next().map(|(_, c)| c);
        let one = policies.and_then(|p| {
            p.single().cloned().ok_or_else(|| self.unavailable("a cluster set holds one policy per cluster, not one"))
        });
        (one, change)
    }

    /// The policies for an invocation, and each newer version that was rejected (with the
    /// version that stays in force): pure of reporting, which is the caller's.
    pub async fn load(&self, force: bool) -> Loaded {
        let (policies, changes) = self.policies(force).await;
        let rejected = changes
            .into_iter()
            .filter_map(|(cluster, change)| match change {
                PolicyChange::Rejected { errors } => Some((cluster, errors)),
                _ => None,
            })
            .map(|(cluster, errors)| {
                let in_force = policies.as_ref().ok().and_then(|p| match cluster.as_str() {
                    SINGLE => p.single().map(|p| p.policy.version.clone()),
                    id => p.get(id).map(|p| p.policy.version.clone()),
                });
                let location = self.location_for(&cluster);
                Rejection { cluster: Some(cluster).filter(|c| !c.is_empty()), location, in_force, errors }
            })
            .collect();
        Loaded { policies, rejected }
    }

    /// How the published policy of `cluster` (`""`: the single policy) stands now, once loaded.
    pub async fn standing(&self, cluster: &str) -> Option<Standing> {
        self.state.lock().await.caches.get(cluster).map(PolicyCache::standing)
    }

    /// The cluster key [`PolicyStore::standing`] and [`PolicyStore::location_for`] take for `policy`.
    pub fn cluster_key<'p>(&self, policy: &'p LoadedPolicy) -> &'p str {
        if self.is_set() {
            policy.infra_id.as_str()
        } else {
            SINGLE
        }
    }

    /// The clusters a set publishes a policy for now (listed, bypassing the cache).
    pub async fn clusters(&self) -> Result<Vec<String>, S::Error> {
        let Layout::Set(prefix) = self.source.layout() else { return Ok(Vec::new()) };
        let mut clusters: Vec<String> = self
            .source
            .list(&prefix)
            .await?
            .into_iter()
            .filter(|l| self.source.is_document(&l.name))
            .filter_map(|l| cluster_of(&prefix, &l.name))
            .filter(|c| valid_infra_id(c).is_ok() && self.clusters.as_ref().is_none_or(|l| l.contains(c)))
            .collect();
        clusters.sort();
        clusters.dedup();
        Ok(clusters)
    }

    /// Every document of the policy as published now, bypassing the cache: `(name, text)`. An
    /// empty prefix has none.
    pub async fn documents(&self) -> Result<Vec<(String, String)>, S::Error> {
        let mut scratch = PolicyCache::default();
        let listed = match self.source.layout() {
            Layout::Prefix(prefix) => self.list_documents(&prefix).await?,
            _ => Vec::new(),
        };
        // Unbounded: the CLI reads what is there, and `policy::load` names the limit it passes.
        let fetched = self.fetch(&mut scratch, listed, true, &mut Budget::unbounded()).await?;
        Ok(fetched.map(|f| f.documents).unwrap_or_default())
    }

    /// Cluster `infra_id`'s documents in a set as published now, bypassing the cache:
    /// `(name under its folder, text)`.
    pub async fn cluster_documents(&self, infra_id: &str) -> Result<Vec<(String, String)>, S::Error> {
        let Layout::Set(prefix) = self.source.layout() else { return Ok(Vec::new()) };
        let mut docs = Vec::new();
        for l in self.list_documents(&prefix).await? {
            if cluster_of(&prefix, &l.name).as_deref() != Some(infra_id) {
                continue;
            }
            if let Some(object) = self.read(&l.name).await? {
                let short = l.name[prefix.len()..].split_once('/').map_or(l.name.as_str(), |(_, rest)| rest);
                docs.push((short.to_string(), object.text));
            }
        }
        Ok(docs)
    }

    /// Object `name` as published now, or `None` when it does not exist.
    pub async fn read(&self, name: &str) -> Result<Option<Object>, S::Error> {
        match self.source.get(name, None).await {
            Err(e) if self.source.is_absent(&e) => Ok(None),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests;
