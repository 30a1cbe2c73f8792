//! A cloud and a policy source in memory, for the engine's unit tests: tags by resource ID, the
//! calls made, and failures on demand. The emulator tests prove the real clients; these prove the
//! engine's invariants in milliseconds.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::sweep::{Batching, ClusterListing, Listed, Unindexed};
use super::{Adapter, Read};
use crate::cloud_error::{CloudError, ErrorClass};
use crate::policy_store::{Layout, ListedObject as Document, Object, PolicySource, PutError};
use tagwarden_core::cloud::{Cloud, ClusterRef, OWNED};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::status::StatusReport;
use tagwarden_core::TagMap;

pub fn error(code: &str, class: ErrorClass) -> CloudError {
    CloudError::aws("memory:Call", "memory", code, "", class)
}

pub fn tags(pairs: &[(&str, &str)]) -> TagMap {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// EC2-like ids (`i-…`) share writes two at a time; `bucket-…` ids are replace-style; the rest
/// are written alone.
#[derive(Default)]
pub struct Memory {
    pub tags: Mutex<BTreeMap<String, TagMap>>,
    pub reads: AtomicU64,
    /// Write calls, shared or not.
    pub writes: AtomicU64,
    /// Every write fails, throttled.
    pub throttled: bool,
    /// Writes naming one of these fail, permanently.
    pub refuse: HashSet<String>,
    /// The listing carries no tags (as ARM's does not).
    pub bare_listing: bool,
    /// A tag someone else adds right after the listing: (resource, key, value).
    pub added_after_listing: Mutex<Option<(String, String, String)>>,
    /// A resource someone deletes right after the listing.
    pub deleted_after_listing: Mutex<Option<String>>,
    /// The listing beside the owned one is denied (as a guardrail denies one IAM call).
    pub denied_listing: bool,
}

impl Memory {
    pub fn with(resources: &[(&str, TagMap)]) -> Self {
        let m = Memory::default();
        m.tags.lock().expect("fresh").extend(resources.iter().map(|(id, t)| (id.to_string(), t.clone())));
        m
    }

    pub fn get(&self, id: &str) -> TagMap {
        self.tags.lock().expect("tags").get(id).cloned().unwrap_or_default()
    }

    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    fn check(&self, ids: &[&str]) -> Result<(), CloudError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        if self.throttled {
            return Err(error("Throttling", ErrorClass::Throttled));
        }
        if ids.iter().any(|id| self.refuse.contains(*id)) {
            return Err(error("InvalidParameterValue", ErrorClass::Fatal));
        }
        let all = self.tags.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        if ids.iter().any(|id| !all.contains_key(*id)) {
            return Err(error("NotFound", ErrorClass::NotFound));
        }
        Ok(())
    }
}

pub fn resource(id: &str) -> ResourceRef {
    ResourceRef::ec2(id, "us-east-1", "111122223333")
}

impl Adapter for Memory {
    type Source = Documents;
    type Group = ();
    const CONCURRENCY: usize = 4;

    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        // Let a concurrent reconcile of the same resource get as far as it can.
        tokio::task::yield_now().await;
        let tags = self.tags.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?.get(&r.id).cloned();
        tags.map(|tags| Read { tags, arn: None }).ok_or(error("NotFound", ErrorClass::NotFound))
    }

    /// A replace-style resource gets `current` plus `set`: whatever `current` misses is lost.
    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        self.check(&[&r.id])?;
        let mut all = self.tags.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        let entry = all.entry(r.id.clone()).or_default();
        if r.id.starts_with("bucket-") {
            *entry = current.clone();
        }
        entry.extend(set.clone());
        Ok(())
    }

    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        let keys = cluster.ownership_keys(Cloud::Aws);
        let found: Vec<Listed> = match self.tags.lock() {
            Ok(all) => all
                .iter()
                .filter(|(_, t)| keys.iter().any(|key| t.get(key).map(String::as_str) == Some(OWNED)))
                .map(|(id, t)| (resource(id), (!self.bare_listing).then(|| t.clone())))
                .collect(),
            Err(_) => return ClusterListing::of(Vec::new(), vec![error("Poisoned", ErrorClass::Fatal)]),
        };
        pages(found.len());
        ClusterListing::of(found, Vec::new())
    }

    async fn list_unindexed(&self, _owned: &[Listed]) -> Unindexed {
        let mut all = self.tags.lock().expect("tags");
        if let Some((id, k, v)) = self.added_after_listing.lock().expect("lock").take() {
            all.entry(id).or_default().insert(k, v);
        }
        if let Some(id) = self.deleted_after_listing.lock().expect("lock").take() {
            all.remove(&id);
        }
        let mut beside = Unindexed::default();
        if self.denied_listing {
            let denied = CloudError::aws(
                "iam:GetAccountAuthorizationDetails",
                "account",
                "AccessDenied",
                "explicit deny in a service control policy",
                ErrorClass::Fatal,
            );
            beside.failed.push(denied);
        }
        beside
    }

    fn batching(&self, r: &ResourceRef) -> Batching<()> {
        match &r.id {
            id if id.starts_with("i-") => Batching::Shared { group: (), max: 2 },
            id if id.starts_with("bucket-") => Batching::Reread,
            _ => Batching::Alone,
        }
    }

    async fn write_shared(
        &self,
        _group: (),
        resources: &[&ResourceRef],
        set: &TagMap,
    ) -> Result<Vec<(usize, CloudError)>, CloudError> {
        self.check(&resources.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())?;
        let mut all = self.tags.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        for r in resources {
            all.entry(r.id.clone()).or_default().extend(set.clone());
        }
        Ok(Vec::new())
    }
}

/// Policy documents and status reports in memory, as one layered prefix or a cluster set.
pub struct Documents {
    pub layout: Layout,
    pub docs: Mutex<BTreeMap<String, String>>,
    pub statuses: Mutex<BTreeMap<Option<String>, StatusReport>>,
}

impl Documents {
    pub fn new(layout: Layout, docs: &[(&str, &str)]) -> Self {
        Documents {
            layout,
            docs: Mutex::new(docs.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()),
            statuses: Mutex::default(),
        }
    }
}

fn etag(text: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("{:x}", h.finish())
}

impl PolicySource for Documents {
    type Error = CloudError;

    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }
    fn location(&self) -> String {
        "memory:/".to_string()
    }
    fn layout(&self) -> Layout {
        self.layout.clone()
    }
    async fn get(&self, name: &str, known: Option<&str>) -> Result<Option<Object>, CloudError> {
        let docs = self.docs.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        let text = docs.get(name).ok_or(error("NoSuchKey", ErrorClass::NotFound))?;
        let tag = etag(text);
        Ok((known != Some(tag.as_str())).then(|| Object { etag: tag, text: text.clone() }))
    }
    async fn list(&self, prefix: &str) -> Result<Vec<Document>, CloudError> {
        let docs = self.docs.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        Ok(docs
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(n, t)| Document { name: n.clone(), etag: etag(t), size: Some(t.len() as u64) })
            .collect())
    }
    fn no_documents(&self) -> CloudError {
        error("NoDocuments", ErrorClass::NotFound)
    }
    fn is_absent(&self, e: &CloudError) -> bool {
        e.class == ErrorClass::NotFound
    }
    fn location_of(&self, name: &str) -> String {
        format!("memory:/{name}")
    }
    fn contest_state_name(&self, infra_id: &str) -> Option<String> {
        Some(crate::policy_store::contest_state_object(infra_id))
    }
    async fn put(&self, name: &str, text: &str, _expected: Option<&str>) -> Result<String, PutError<CloudError>> {
        let mut docs = self.docs.lock().map_err(|_| PutError::Source(error("Poisoned", ErrorClass::Fatal)))?;
        docs.insert(name.to_string(), text.to_string());
        Ok(etag(text))
    }
    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, CloudError> {
        let statuses = self.statuses.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        let report = statuses.get(&cluster.map(str::to_owned));
        report.map(|r| serde_json::to_string(r).map_err(|e| error(&e.to_string(), ErrorClass::Fatal))).transpose()
    }
    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), CloudError> {
        let report: StatusReport = serde_json::from_str(text).map_err(|e| error(&e.to_string(), ErrorClass::Fatal))?;
        let mut statuses = self.statuses.lock().map_err(|_| error("Poisoned", ErrorClass::Fatal))?;
        statuses.insert(cluster.map(str::to_owned), report);
        Ok(())
    }
}
