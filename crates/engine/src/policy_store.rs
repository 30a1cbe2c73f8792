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

use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy::cache::{Fetched, LoadedPolicy, PolicyCache, PolicyChange, PolicyUnavailable, Standing};
use tagwarden_core::policy::clusters::{cluster_of, valid_infra_id, Policies};
use tagwarden_core::policy::load::{
    over_limit, MAX_CLUSTER_BYTES, MAX_CLUSTER_DOCUMENTS, MAX_DOCUMENT_BYTES, MAX_SET_BYTES, MAX_SET_DOCUMENTS,
};
use tagwarden_core::policy::STATUS_REPORT_NAME;

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
    /// Its size, when the listing says (S3, blobs, SSM values): limits are checked before
    /// anything is downloaded.
    pub size: Option<u64>,
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
    /// Where cluster `infra_id`'s contest state is kept (`tagwarden_core::contest::ContestState`),
    /// read with [`PolicySource::get`] and written with [`PolicySource::put`] (conditionally, as
    /// the status report is): an object apart from every publisher's folder, which the deployment
    /// lets only the function and its operators write. Never derived from a name a publisher
    /// chose: `infra_id` is a cluster the deployment enforces. `None`: this store keeps none, and
    /// contests are counted in each function instance's memory alone.
    fn contest_state_name(&self, infra_id: &str) -> Option<String> {
        let _ = infra_id;
        None
    }
    /// The status report's text beside the policy (of cluster `cluster` in a set), if one was
    /// written.
    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, Self::Error>;
    /// The most bytes a status report may take there (an SSM Standard parameter: 4 KB).
    fn max_status_bytes(&self) -> Option<usize> {
        None
    }
    /// Write the status report's JSON `text` there (`tagwarden_core::status` makes and reads it).
    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), Self::Error>;
    /// [`PolicySource::get_status`] with the report's ETag, for [`PolicySource::put_status_if`].
    /// A store without conditional writes answers an empty ETag.
    async fn get_status_tagged(&self, cluster: Option<&str>) -> Result<Option<Object>, Self::Error> {
        Ok(self.get_status(cluster).await?.map(|text| Object { etag: String::new(), text }))
    }
    /// [`PolicySource::put_status`] only if the report is still at `expected` (`None`: only if
    /// there is none), so that the sweeps of parts of a deployment running at once never lose each
    /// other's failures. A store without conditional writes writes unconditionally: it is never
    /// swept in parts.
    async fn put_status_if(
        &self,
        cluster: Option<&str>,
        text: &str,
        _expected: Option<&str>,
    ) -> Result<(), PutError<Self::Error>> {
        self.put_status(cluster, text).await.map_err(PutError::Source)
    }
}

/// The content type a policy document is written with.
pub fn content_type(name: &str) -> &'static str {
    if name.ends_with(".json") {
        "application/json"
    } else {
        "application/yaml"
    }
}

/// The folder, at the root of a policy bucket or container, where the function keeps its own
/// state (the contests, `tagwarden_core::contest`): never a policy document, never a cluster's
/// folder (an infraID starts with a letter or digit).
pub const STATE_FOLDER: &str = "_tagwarden/";

/// The name of cluster `infra_id`'s contest state object in a bucket or container.
pub fn contest_state_object(infra_id: &str) -> String {
    format!("{STATE_FOLDER}contests/{infra_id}.json")
}

/// Whether an object under a prefix is a policy layer.
pub fn is_policy_document(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    [".yaml", ".yml", ".json"].iter().any(|e| base.ends_with(e))
        && base != STATUS_REPORT_NAME
        && !base.starts_with('.')
        && !name.starts_with(STATE_FOLDER)
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

    /// The policy documents listed under `prefix`, in name order.
    async fn list_documents(&self, prefix: &str) -> Result<Vec<ListedObject>, S::Error> {
        let mut listed: Vec<ListedObject> =
            self.source.list(prefix).await?.into_iter().filter(|l| self.source.is_document(&l.name)).collect();
        listed.sort();
        Ok(listed)
    }

    /// Every cluster's documents (one entry, `""`, for a single policy), or `None` for a cluster
    /// whose version is unchanged; and the folders of a set that belong to clusters the
    /// deployment does not list (not fetched). A set is listed once for all its clusters.
    async fn fetch_all(&self, caches: &mut BTreeMap<String, PolicyCache>) -> Fetches<S::Error> {
        let mut one = Budget::policy();
        let prefix = match self.source.layout() {
            Layout::Set(prefix) => prefix,
            Layout::Prefix(prefix) => {
                let cache = caches.entry(SINGLE.to_string()).or_insert_with(|| self.new_cache(SINGLE));
                let fetched = match self.list_documents(&prefix).await {
                    Ok(listed) => self.fetch(cache, listed, false, &mut one).await,
                    Err(e) => Err(e),
                };
                return Fetches::single(fetched);
            }
            Layout::One(_) => {
                let cache = caches.entry(SINGLE.to_string()).or_insert_with(|| self.new_cache(SINGLE));
                return Fetches::single(self.fetch(cache, Vec::new(), false, &mut one).await);
            }
        };
        let listed = match self.list_documents(&prefix).await {
            Ok(listed) => listed,
            // Unreadable: every cluster keeps its last known good version, and says why.
            Err(e) if caches.is_empty() => return Fetches::single(Err(e)),
            Err(e) => {
                let e = Arc::new(e);
                let clusters = caches.keys().map(|k| (k.clone(), Err(e.clone()))).collect();
                return Fetches { clusters, unlisted: Vec::new() };
            }
        };
        let mut by_cluster: BTreeMap<String, Vec<ListedObject>> =
            caches.keys().map(|k| (k.clone(), Vec::new())).collect();
        let mut unlisted = std::collections::BTreeSet::new();
        for l in listed {
            match cluster_of(&prefix, &l.name) {
                Some(cluster) if self.enforces(&cluster) => by_cluster.entry(cluster).or_default().push(l),
                Some(cluster) => {
                    unlisted.insert(cluster);
                }
                None => tracing::warn!(name = l.name, "not under a cluster's key in the set: ignored"),
            }
        }
        // The set's own limits, spent in name order: a cluster that would pass them is refused.
        let mut budget = Budget::set();
        let mut out = Vec::with_capacity(by_cluster.len());
        for (cluster, listed) in by_cluster {
            let cache = caches.entry(cluster.clone()).or_insert_with(|| self.new_cache(&cluster));
            let fetched = self.fetch(cache, listed, false, &mut budget).await;
            out.push((cluster, fetched.map_err(Arc::new)));
        }
        Fetches { clusters: out, unlisted: unlisted.into_iter().collect() }
    }

    /// Object `name` as published now, or `None` when it does not exist.
    pub async fn read(&self, name: &str) -> Result<Option<Object>, S::Error> {
        match self.source.get(name, None).await {
            Err(e) if self.source.is_absent(&e) => Ok(None),
            other => other,
        }
    }

    /// A fresh cache for a set's cluster (or a single policy's, keyed `""`).
    fn new_cache(&self, cluster: &str) -> PolicyCache {
        if cluster == SINGLE {
            PolicyCache::single(self.clusters.clone())
        } else {
            PolicyCache::for_cluster(cluster)
        }
    }

    /// The documents, or `None` when nothing changed since the last version seen: the one object,
    /// or those `listed` under a prefix or a set's cluster. A version over a limit (its own, or
    /// what is left of a set's `budget`) is refused before it is downloaded when the listing shows
    /// it, else as soon as the reading passes it.
    async fn fetch(
        &self,
        st: &mut PolicyCache,
        listed: Vec<ListedObject>,
        empty_ok: bool,
        budget: &mut Budget,
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
                return Ok(Some(Fetched::new(fingerprint, vec![(name, object.text)])));
            }
            Layout::Prefix(prefix) => (prefix, false),
            Layout::Set(prefix) => (prefix, true),
        };
        let fingerprint: String = listed.iter().map(|l| format!("{}@{};", l.name, l.etag)).collect();
        if st.seen() == Some(fingerprint.as_str()) {
            budget.spend(listed.len(), st.documents.values().map(|(_, t)| t.len() as u64).sum());
            return Ok(None);
        }
        if listed.is_empty() && !empty_ok {
            return Err(self.source.no_documents());
        }
        let location = match in_set {
            true => listed.first().and_then(|l| cluster_of(&prefix, &l.name)).map(|c| self.location_for(&c)),
            false => None,
        }
        .unwrap_or_else(|| self.location());
        // What the listing already shows, before anything is downloaded.
        let oversized = listed.iter().find(|l| l.size.is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64));
        if let Some(l) = oversized.filter(|_| budget.limited) {
            let (name, size) = (self.source.location_of(&l.name), l.size.unwrap_or_default() as usize);
            let fix = "a real policy is a few kilobytes: publish a smaller document";
            let why = over_limit(&name, size, "bytes", "MAX_DOCUMENT_BYTES", MAX_DOCUMENT_BYTES, fix);
            return Ok(refused(st, fingerprint, why));
        }
        let sized: u64 = listed.iter().filter_map(|l| l.size).sum();
        if let Some(why) = limits(&location, listed.len(), sized, budget) {
            return Ok(refused(st, fingerprint, why));
        }
        let mut documents = Vec::with_capacity(listed.len());
        let mut kept = BTreeMap::new();
        let mut bytes = 0u64;
        for ListedObject { name, etag, .. } in listed {
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
            // Counted while reading: a listing may not size what it lists (or it grew since).
            bytes += text.len() as u64;
            if let Some(why) = limits(&location, documents.len() + 1, bytes, budget) {
                return Ok(refused(st, fingerprint, why));
            }
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
        budget.spend(documents.len(), bytes);
        st.documents = kept;
        Ok(Some(Fetched::new(fingerprint, documents)))
    }
}

/// One cluster's documents as read: `None` when its version is unchanged, or why it could not be
/// read (one listing's error, shared by every cluster of a set).
type FetchResult<E> = Result<Option<Fetched>, Arc<E>>;

/// What [`PolicyStore::fetch_all`] read.
struct Fetches<E> {
    /// Each cluster's documents (one entry, `""`, for a single policy).
    clusters: Vec<(String, FetchResult<E>)>,
    /// The folders of a set that belong to clusters the deployment does not list (not fetched).
    unlisted: Vec<String>,
}

impl<E> Fetches<E> {
    /// A single policy's (key `""`).
    fn single(fetched: Result<Option<Fetched>, E>) -> Self {
        Fetches { clusters: vec![(SINGLE.to_string(), fetched.map_err(Arc::new))], unlisted: Vec::new() }
    }
}

/// What one policy may hold, and what a set may still read (documents, bytes).
struct Budget {
    limited: bool,
    documents: usize,
    bytes: u64,
}

impl Budget {
    /// No limit: what the CLI reads to show (`policy::load` still refuses past its limits).
    fn unbounded() -> Self {
        Budget { limited: false, documents: usize::MAX, bytes: u64::MAX }
    }

    /// One policy's limits.
    fn policy() -> Self {
        Budget { limited: true, ..Self::unbounded() }
    }

    /// One policy's limits, and a set's for its clusters together.
    fn set() -> Self {
        Budget { limited: true, documents: MAX_SET_DOCUMENTS, bytes: MAX_SET_BYTES as u64 }
    }

    fn spend(&mut self, documents: usize, bytes: u64) {
        self.documents = self.documents.saturating_sub(documents);
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// The first limit `documents` of `bytes` at `location` pass: one policy's, then what is left of
/// the set's.
fn limits(location: &str, documents: usize, bytes: u64, budget: &Budget) -> Option<String> {
    let fix = "a policy is usually one to three documents of a few kilobytes: merge or trim them";
    let set_fix = "the set's clusters together passed it (clusters are read in name order): trim the policies, or split the set across two deployments";
    let bytes_usize = usize::try_from(bytes).unwrap_or(usize::MAX);
    if !budget.limited {
        return None;
    }
    if documents > MAX_CLUSTER_DOCUMENTS {
        return Some(over_limit(
            location,
            documents,
            "policy documents",
            "MAX_CLUSTER_DOCUMENTS",
            MAX_CLUSTER_DOCUMENTS,
            fix,
        ));
    }
    if bytes_usize > MAX_CLUSTER_BYTES {
        return Some(over_limit(
            location,
            bytes_usize,
            "bytes of policy documents",
            "MAX_CLUSTER_BYTES",
            MAX_CLUSTER_BYTES,
            fix,
        ));
    }
    if documents > budget.documents {
        let used = MAX_SET_DOCUMENTS - budget.documents;
        return Some(over_limit(
            location,
            used + documents,
            "policy documents in the set with this cluster's",
            "MAX_SET_DOCUMENTS",
            MAX_SET_DOCUMENTS,
            set_fix,
        ));
    }
    if bytes > budget.bytes {
        let used = MAX_SET_BYTES - usize::try_from(budget.bytes).unwrap_or(MAX_SET_BYTES);
        return Some(over_limit(
            location,
            used + bytes_usize,
            "bytes of policy documents in the set with this cluster's",
            "MAX_SET_BYTES",
            MAX_SET_BYTES,
            set_fix,
        ));
    }
    None
}

/// A version refused before it was read, for `why`: reported once (an unchanged listing that is
/// still over the limit is not reported again), and what was in force stays.
fn refused(st: &mut PolicyCache, fingerprint: String, why: String) -> Option<Fetched> {
    let fingerprint = format!("refused:{fingerprint}");
    (st.seen() != Some(fingerprint.as_str())).then(|| Fetched::refused(fingerprint, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enforce::memory::Documents;

    fn doc(id: &str, tags: &str) -> String {
        format!("version: 1\ninfraID: {id}\ntags: {{{tags}}}\n")
    }

    fn set(docs: &[(&str, &str)], listed: &[&str]) -> PolicyStore<Documents> {
        let clusters = listed.iter().map(|c| c.to_string()).collect();
        PolicyStore::new(Documents::new(Layout::Set("c/".into()), docs), Duration::ZERO).with_clusters(Some(clusters))
    }

    fn team(p: &Policies, id: &str) -> Option<String> {
        p.get(id).map(|p| p.policy.base_tags(Cloud::Aws)).and_then(|t| t.get("team").cloned())
    }

    fn rejected(changes: &[(String, PolicyChange)], id: &str) -> String {
        changes
            .iter()
            .filter(|(c, _)| c == id)
            .filter_map(|(_, c)| match c {
                PolicyChange::Rejected { errors } => Some(errors.join("; ")),
                PolicyChange::Loaded { .. } => None,
            })
            .collect()
    }

    /// On a cold start, a layer in b-2's folder that names no infraID, or another one,
    /// is refused alone; b-2's own layer is in force and the refusal says which layer and the fix.
    #[tokio::test]
    async fn a_layer_that_does_not_name_its_folders_cluster_is_refused_alone() {
        let own = doc("b-2", "team: b");
        for (layer, said) in [
            ("version: 1\ntags: {team: evil}\n".to_string(), "names no infraID"),
            (doc("c-3", "team: evil"), "names infraID \"c-3\", not b-2"),
            (doc("a-1", "team: evil"), "names infraID \"a-1\", not b-2"),
        ] {
            let store = set(
                &[("c/a-1/p.yaml", &doc("a-1", "team: a")), ("c/b-2/10.yaml", &own), ("c/b-2/20.yaml", &layer)],
                &["a-1", "b-2"],
            );
            let (policies, changes) = store.policies(true).await;
            let policies = policies.expect("both clusters");
            assert_eq!((team(&policies, "a-1").as_deref(), team(&policies, "b-2").as_deref()), (Some("a"), Some("b")));
            let why = rejected(&changes, "b-2");
            assert!(
                why.contains("layer \"20.yaml\"") && why.contains(said) && why.contains("other layers stay in force"),
                "{why}"
            );
            assert_eq!(
                store.standing("b-2").await.map(|s| s.state),
                Some(tagwarden_core::policy::cache::PolicyState::RejectedKeepingLastGood)
            );
        }
        // No layer of its own left: b-2 alone is not enforced (fail closed), a-1 is.
        let store = set(
            &[("c/a-1/p.yaml", &doc("a-1", "team: a")), ("c/b-2/20.yaml", &doc("c-3", "team: evil"))],
            &["a-1", "b-2"],
        );
        let (policies, changes) = store.policies(true).await;
        let policies = policies.expect("a-1");
        assert!(policies.get("b-2").is_none() && policies.get("a-1").is_some());
        assert!(rejected(&changes, "b-2").contains("no layer of memory:/c/b-2/ names cluster b-2"), "{changes:?}");
    }

    /// A folder of a cluster the deployment does not list is never downloaded nor
    /// enforced, and reported once; a set with no list fails closed, naming the setting.
    #[tokio::test]
    async fn only_listed_clusters_are_loaded() {
        let store =
            set(&[("c/a-1/p.yaml", &doc("a-1", "team: a")), ("c/z-9/p.yaml", &doc("z-9", "team: z"))], &["a-1"]);
        let (policies, changes) = store.policies(true).await;
        assert!(policies.expect("a-1").get("z-9").is_none());
        assert_eq!(store.downloads(), 1, "z-9's folder is not downloaded");
        let why = rejected(&changes, "z-9");
        assert!(why.contains("memory:/c/z-9/") && why.contains("does not list") && why.contains("infra_ids"), "{why}");
        let (_, changes) = store.policies(true).await;
        assert!(rejected(&changes, "z-9").is_empty(), "reported once: {changes:?}");
        assert_eq!(store.clusters().await.expect("listed"), ["a-1"]);

        let unlisted = PolicyStore::new(
            Documents::new(Layout::Set("c/".into()), &[("c/a-1/p.yaml", &doc("a-1", "t: a"))]),
            Duration::ZERO,
        );
        let e = unlisted.policies(true).await.0.expect_err("fail closed").to_string();
        assert!(e.contains("TAGWARDEN_CLUSTERS") && e.contains("nothing is written"), "{e}");

        // A single policy must be a listed cluster's.
        let one = PolicyStore::new(
            Documents::new(Layout::One("p.yaml".into()), &[("p.yaml", &doc("z-9", "t: a"))]),
            Duration::ZERO,
        )
        .with_clusters(Some(vec!["a-1".into()]));
        let e = one.policies(true).await.0.expect_err("not listed").to_string();
        assert!(e.contains("cluster z-9, which this deployment does not list (TAGWARDEN_CLUSTERS=a-1)"), "{e}");
    }

    /// The limits refuse from the listing, before anything is downloaded, naming the
    /// limit; another cluster is not affected.
    #[tokio::test]
    async fn a_cluster_over_a_limit_is_refused_before_it_is_read() {
        let many: Vec<(String, String)> =
            (0..=MAX_CLUSTER_DOCUMENTS).map(|i| (format!("c/b-2/{i:02}.yaml"), doc("b-2", "t: b"))).collect();
        let mut docs: Vec<(&str, &str)> = many.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
        let a = doc("a-1", "team: a");
        docs.push(("c/a-1/p.yaml", &a));
        let store = set(&docs, &["a-1", "b-2"]);
        let (policies, changes) = store.policies(true).await;
        assert!(policies.expect("a-1").get("b-2").is_none());
        assert_eq!(store.downloads(), 1, "b-2 is refused from its listing");
        let why = rejected(&changes, "b-2");
        assert!(why.contains("21 policy documents is over the limit of 20 (MAX_CLUSTER_DOCUMENTS)"), "{why}");
        let (_, changes) = store.policies(true).await;
        assert!(rejected(&changes, "b-2").is_empty(), "an unchanged listing is not reported again");

        let big = format!("{}t: {}\n", doc("b-2", "x: y"), "v".repeat(MAX_DOCUMENT_BYTES / 2));
        let store = set(&[("c/b-2/1.yaml", &big), ("c/b-2/2.yaml", &big), ("c/b-2/3.yaml", &big)], &["b-2"]);
        let why = rejected(&store.policies(true).await.1, "b-2");
        assert!(why.contains("over the limit of 1048576 (MAX_CLUSTER_BYTES)"), "{why}");
        assert_eq!(store.downloads(), 0);
    }

    /// The function writes a status report only in a listed cluster's own folder,
    /// whatever name a publisher gave a folder or a document.
    #[tokio::test]
    async fn the_status_report_goes_only_to_a_listed_clusters_folder() {
        let store = set(&[("c/a-1/p.yaml", &doc("a-1", "t: a"))], &["a-1"]);
        let report = tagwarden_core::status::StatusReport::new(Cloud::Aws, &"l", Some("v".into()), vec![], vec![]);
        for hostile in ["../a-1", "a-1/../../x", "z-9", "", "a-1/", "a-1\n"] {
            crate::status_store::write(&store, Some(hostile), &report).await.expect("not written, no error");
        }
        crate::status_store::write(&store, Some("a-1"), &report).await.expect("written");
        let written: Vec<Option<String>> = store.source.statuses.lock().expect("lock").keys().cloned().collect();
        assert_eq!(written, [Some("a-1".to_string())]);
    }

    #[test]
    fn a_sets_limits_are_spent_in_name_order() {
        let mut budget = Budget::set();
        assert_eq!(limits("l", 3, 10, &budget), None);
        budget.spend(MAX_SET_DOCUMENTS - 2, 0);
        let why = limits("s3://b/c/z-9/", 3, 10, &budget).expect("over the set's documents");
        assert!(
            why.starts_with("s3://b/c/z-9/: 1001 policy documents in the set") && why.contains("MAX_SET_DOCUMENTS"),
            "{why}"
        );
        let mut budget = Budget::set();
        budget.spend(0, MAX_SET_BYTES as u64 - 5);
        assert!(limits("l", 1, 6, &budget).is_some_and(|w| w.contains("MAX_SET_BYTES")));
        assert_eq!(limits("l", 1000, u64::MAX, &Budget::unbounded()), None, "the CLI reads what is there");
    }

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
