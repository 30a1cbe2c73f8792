//! Reading what is published: listing once, downloading only what changed, and refusing a
//! cluster (or what is left of a set) over the limits of `policy::load` before it is read.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tagwarden_core::policy::cache::{Fetched, PolicyCache};
use tagwarden_core::policy::clusters::cluster_of;
use tagwarden_core::policy::load::{
    over_limit, MAX_CLUSTER_BYTES, MAX_CLUSTER_DOCUMENTS, MAX_DOCUMENT_BYTES, MAX_SET_BYTES, MAX_SET_DOCUMENTS,
};

use super::{Layout, ListedObject, PolicySource, PolicyStore, SINGLE};

impl<S: PolicySource> PolicyStore<S> {
    /// The policy documents listed under `prefix`, in name order.
    pub(super) async fn list_documents(&self, prefix: &str) -> Result<Vec<ListedObject>, S::Error> {
        let mut listed: Vec<ListedObject> =
            self.source.list(prefix).await?.into_iter().filter(|l| self.source.is_document(&l.name)).collect();
        listed.sort();
        Ok(listed)
    }

    /// Every cluster's documents (one entry, `""`, for a single policy), or `None` for a cluster
    /// whose version is unchanged; and the folders of a set that belong to clusters the
    /// deployment does not list (not fetched). A set is listed once for all its clusters.
    pub(super) async fn fetch_all(&self, caches: &mut BTreeMap<String, PolicyCache>) -> Fetches<S::Error> {
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

    /// A fresh cache for a set's cluster (or a single policy's, keyed `""`).
    pub(super) fn new_cache(&self, cluster: &str) -> PolicyCache {
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
    pub(super) async fn fetch(
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
pub(super) struct Fetches<E> {
    /// Each cluster's documents (one entry, `""`, for a single policy).
    pub(super) clusters: Vec<(String, FetchResult<E>)>,
    /// The folders of a set that belong to clusters the deployment does not list (not fetched).
    pub(super) unlisted: Vec<String>,
}

impl<E> Fetches<E> {
    /// A single policy's (key `""`).
    fn single(fetched: Result<Option<Fetched>, E>) -> Self {
        Fetches { clusters: vec![(SINGLE.to_string(), fetched.map_err(Arc::new))], unlisted: Vec::new() }
    }
}

/// What one policy may hold, and what a set may still read (documents, bytes).
pub(super) struct Budget {
    limited: bool,
    documents: usize,
    bytes: u64,
}

impl Budget {
    /// No limit: what the CLI reads to show (`policy::load` still refuses past its limits).
    pub(super) fn unbounded() -> Self {
        Budget { limited: false, documents: usize::MAX, bytes: u64::MAX }
    }

    /// One policy's limits.
    fn policy() -> Self {
        Budget { limited: true, ..Self::unbounded() }
    }

    /// One policy's limits, and a set's for its clusters together.
    pub(super) fn set() -> Self {
        Budget { limited: true, documents: MAX_SET_DOCUMENTS, bytes: MAX_SET_BYTES as u64 }
    }

    pub(super) fn spend(&mut self, documents: usize, bytes: u64) {
        self.documents = self.documents.saturating_sub(documents);
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// The first limit `documents` of `bytes` at `location` pass: one policy's, then what is left of
/// the set's.
pub(super) fn limits(location: &str, documents: usize, bytes: u64, budget: &Budget) -> Option<String> {
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
