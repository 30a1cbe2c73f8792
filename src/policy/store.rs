//! Where the policy comes from, for every cloud: one store over a small [`PolicySource`] trait (get with
//! an ETag, list by prefix, read and write the status report), so the re-check rules are written
//! once (DESIGN.md §2, §6):
//!
//! - a warm function re-checks at most every `ttl`;
//! - one document is fetched conditionally on its ETag (S3, blobs) or version (SSM), so an
//!   unchanged one is not downloaded, or not parsed, again;
//! - a prefix is listed, and only documents whose ETag changed are downloaded; a prefix's documents
//!   are the `.yaml`/`.yml`/`.json` objects under it that are not dot-files and not the status
//!   report, layered in name order;
//! - a cluster set (`Layout::Set`) is listed once for all its clusters; each cluster's documents
//!   are fetched, validated, cached and reported on their own (`policy::clusters`);
//! - what is fetched goes to the [`PolicyCache`], which decides what is in force.
//!
//! AWS (`aws::policy_store`: S3 and SSM) and Azure (`azure::blob_store`) implement [`PolicySource`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::cache::{Fetched, LoadedPolicy, PolicyCache, PolicyChange, PolicyUnavailable, Standing};
use super::clusters::{cluster_of, Policies};
use super::STATUS_REPORT_NAME;
use crate::cloud::Cloud;

/// One document as a source returns it.
#[derive(Debug, Clone)]
pub struct Object {
    /// The ETag, or the SSM parameter's version.
    pub etag: String,
    pub text: String,
}

/// One entry of a prefix listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedObject {
    pub name: String,
    pub etag: String,
}

/// What the policy is made of at a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One object, blob or parameter.
    One(String),
    /// Every document under a prefix (`""` or ending in `/`), layered in name order.
    Prefix(String),
    /// A cluster set: one policy per cluster under the prefix, keyed by infraID
    /// ([`cluster_of`]).
    Set(String),
}

/// The calls a cloud's policy storage answers.
#[allow(async_fn_in_trait)]
pub trait PolicySource: Send + Sync {
    type Error: std::error::Error + Send + Sync + 'static;

    fn cloud(&self) -> Cloud;
    /// Where the policy is, as messages show it (never a credential).
    fn location(&self) -> String;
    fn layout(&self) -> Layout;
    /// Whether a listed name is a policy document (SSM parameters have no extension).
    fn is_document(&self, name: &str) -> bool {
        is_policy_document(name)
    }
    /// Where cluster `infra_id`'s policy in a set is, as messages show it.
    fn cluster_location(&self, infra_id: &str) -> String {
        match self.layout() {
            Layout::Set(prefix) => self.location_of(&format!("{prefix}{infra_id}/")),
            _ => self.location(),
        }
    }
    /// `name`, unless its ETag (or version) is still `etag`: then `None`. Refuses documents over
    /// [`super::load::MAX_DOCUMENT_BYTES`] and text that is not UTF-8.
    async fn get(&self, name: &str, etag: Option<&str>) -> Result<Option<Object>, Self::Error>;
    /// Every object under `prefix`, with its ETag.
    async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>, Self::Error>;
    /// The error for a prefix that holds no policy document.
    fn no_documents(&self) -> Self::Error;
    /// Whether `e` says the object does not exist.
    fn is_absent(&self, e: &Self::Error) -> bool;
    /// Where object `name` is, as messages show it.
    fn location_of(&self, name: &str) -> String;
    /// Write `text` at `name` only if its ETag (or version) is still `expected`, or with `None`
    /// only if it does not exist: the new ETag or version.
    async fn put(&self, name: &str, text: &str, expected: Option<&str>) -> Result<String, PutError<Self::Error>>;
    /// The status report's text beside the policy (of cluster `cluster` in a set), if one was
    /// written.
    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, Self::Error>;
    /// The most bytes a status report may take there (an SSM Standard parameter: 4 KB).
    fn max_status_bytes(&self) -> Option<usize> {
        None
    }
    /// Write the status report's JSON `text` there (`crate::status` makes and reads it).
    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), Self::Error>;
}

/// The content type a policy document is written with.
pub fn content_type(name: &str) -> &'static str {
    if name.ends_with(".json") {
        "application/json"
    } else {
        "application/yaml"
    }
}

/// Whether an object under a prefix is a policy layer.
pub fn is_policy_document(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    [".yaml", ".yml", ".json"].iter().any(|e| base.ends_with(e)) && base != STATUS_REPORT_NAME && !base.starts_with('.')
}

/// Why a conditional write did not happen as asked.
#[derive(Debug, thiserror::Error)]
pub enum PutError<E: std::error::Error + 'static> {
    /// The object is not at the version read (or exists when it was read absent): not written.
    #[error("it changed since it was read (now {found})")]
    Conflict { found: String },
    /// SSM only, which has no conditional put: another write landed between the version check
    /// and this put, which is version `written`. Both are in the parameter's history.
    #[error("another write landed between the version check and this write, now version {written}")]
    Raced { written: String },
    #[error(transparent)]
    Source(E),
}

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
    downloads: AtomicU64,
    state: Mutex<State>,
}

/// The caches, by cluster (`""` for a single policy), and when they were last re-checked.
#[derive(Default)]
struct State {
    checked: Option<Instant>,
    caches: BTreeMap<String, PolicyCache>,
}

/// The key of a single policy's cache.
const SINGLE: &str = "";

impl<S: PolicySource> PolicyStore<S> {
    pub fn new(source: S, ttl: Duration) -> Self {
        PolicyStore { source, ttl, downloads: AtomicU64::new(0), state: Mutex::new(State::default()) }
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
        let mut st = self.state.lock().await;
        let due = force || st.checked.is_none_or(|t| t.elapsed() >= self.ttl);
        let mut changes = Vec::new();
        if due {
            let cloud = self.source.cloud();
            // Boxed: once per TTL, and it keeps every caller's future shallow.
            let fetched = Box::pin(self.fetch_all(&mut st.caches)).await;
            let mut unavailable = None;
            for (cluster, result) in fetched {
                let location = self.location_for(&cluster);
                let cache = st.caches.entry(cluster.clone()).or_insert_with(|| new_cache(&cluster));
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
        Ok(self.fetch(&mut scratch, listed, true).await?.map(|f| f.documents).unwrap_or_default())
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

    /// The policy documents listed under `prefix`, in name order.
    async fn list_documents(&self, prefix: &str) -> Result<Vec<ListedObject>, S::Error> {
        let mut listed: Vec<ListedObject> =
            self.source.list(prefix).await?.into_iter().filter(|l| self.source.is_document(&l.name)).collect();
        listed.sort();
        Ok(listed)
    }

    /// Every cluster's documents (one entry, `""`, for a single policy), or `None` for a cluster
    /// whose version is unchanged. A set is listed once for all its clusters.
    async fn fetch_all(
        &self,
        caches: &mut BTreeMap<String, PolicyCache>,
    ) -> Vec<(String, Result<Option<Fetched>, String>)> {
        let prefix = match self.source.layout() {
            Layout::Set(prefix) => prefix,
            Layout::Prefix(prefix) => {
                let cache = caches.entry(SINGLE.to_string()).or_default();
                let fetched = match self.list_documents(&prefix).await {
                    Ok(listed) => self.fetch(cache, listed, false).await,
                    Err(e) => Err(e),
                };
                return vec![(SINGLE.to_string(), fetched.map_err(|e| e.to_string()))];
            }
            Layout::One(_) => {
                let cache = caches.entry(SINGLE.to_string()).or_default();
                let fetched = self.fetch(cache, Vec::new(), false).await;
                return vec![(SINGLE.to_string(), fetched.map_err(|e| e.to_string()))];
            }
        };
        let listed = match self.list_documents(&prefix).await {
            Ok(listed) => listed,
            // Unreadable: every cluster keeps its last known good version, and says why.
            Err(e) if caches.is_empty() => return vec![(SINGLE.to_string(), Err(e.to_string()))],
            Err(e) => return caches.keys().map(|k| (k.clone(), Err(e.to_string()))).collect(),
        };
        let mut by_cluster: BTreeMap<String, Vec<ListedObject>> =
            caches.keys().map(|k| (k.clone(), Vec::new())).collect();
        for l in listed {
            match cluster_of(&prefix, &l.name) {
                Some(cluster) => by_cluster.entry(cluster).or_default().push(l),
                None => tracing::warn!(name = l.name, "not under a cluster's key in the set: ignored"),
            }
        }
        let mut out = Vec::with_capacity(by_cluster.len());
        for (cluster, listed) in by_cluster {
            let cache = caches.entry(cluster.clone()).or_insert_with(|| new_cache(&cluster));
            let fetched = self.fetch(cache, listed, false).await;
            out.push((cluster, fetched.map_err(|e| e.to_string())));
        }
        out
    }

    /// Object `name` as published now, or `None` when it does not exist.
    pub async fn read(&self, name: &str) -> Result<Option<Object>, S::Error> {
        match self.source.get(name, None).await {
            Err(e) if self.source.is_absent(&e) => Ok(None),
            other => other,
        }
    }

    /// The documents, or `None` when nothing changed since the last version seen: the one object,
    /// or those `listed` under a prefix or a set's cluster.
    async fn fetch(
        &self,
        st: &mut PolicyCache,
        listed: Vec<ListedObject>,
        empty_ok: bool,
    ) -> Result<Option<Fetched>, S::Error> {
        let (prefix, in_set) = match self.source.layout() {
            Layout::One(name) => {
                let etag = st.documents.get(&name).map(|(e, _)| e.clone());
                let Some(object) = self.source.get(&name, etag.as_deref()).await? else { return Ok(None) };
                self.downloads.fetch_add(1, Ordering::Relaxed);
                let fingerprint = format!("{name}@{}", object.etag);
                if st.seen() == Some(fingerprint.as_str()) {
                    return Ok(None);
                }
                st.documents.clear();
                st.documents.insert(name.clone(), (object.etag, object.text.clone()));
                return Ok(Some(Fetched { fingerprint, documents: vec![(name, object.text)] }));
            }
            Layout::Prefix(prefix) => (prefix, false),
            Layout::Set(prefix) => (prefix, true),
        };
        {
            {
                let fingerprint: String = listed.iter().map(|l| format!("{}@{};", l.name, l.etag)).collect();
                if st.seen() == Some(fingerprint.as_str()) {
                    return Ok(None);
                }
                if listed.is_empty() && !empty_ok {
                    return Err(self.source.no_documents());
                }
                let mut documents = Vec::with_capacity(listed.len());
                let mut kept = BTreeMap::new();
                for ListedObject { name, etag } in listed {
                    let text = match st.documents.get(&name) {
                        Some((e, text)) if *e == etag => text.clone(),
                        // Gone between the listing and the read: the next re-check lists again.
                        _ => match self.source.get(&name, None).await? {
                            Some(object) => {
                                self.downloads.fetch_add(1, Ordering::Relaxed);
                                object.text
                            }
                            None => continue,
                        },
                    };
                    // A set's cluster folder is its own prefix: `a-1/10-cluster.yaml` is layered as
                    // `10-cluster.yaml` is under a single prefix.
                    let short = name.strip_prefix(prefix.as_str()).unwrap_or(&name);
                    let short = match in_set {
                        true => short.split_once('/').map_or(short, |(_, rest)| rest),
                        false => short,
                    }
                    .to_string();
                    kept.insert(name, (etag, text.clone()));
                    documents.push((short, text));
                }
                st.documents = kept;
                Ok(Some(Fetched { fingerprint, documents }))
            }
        }
    }
}

/// A fresh cache for a set's cluster (or a single policy's, keyed `""`).
fn new_cache(cluster: &str) -> PolicyCache {
    if cluster == SINGLE {
        PolicyCache::default()
    } else {
        PolicyCache::for_cluster(cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_documents_under_a_prefix() {
        for yes in ["p/00-defaults.yaml", "p/10-cluster.json", "p/sub/20.yml", "x.yaml"] {
            assert!(is_policy_document(yes), "{yes}");
        }
        for no in ["p/tagwarden-status.json", "p/.hidden.yaml", "p/README.md", "p/"] {
            assert!(!is_policy_document(no), "{no}");
        }
    }
}
