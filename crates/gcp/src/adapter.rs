//! The Google Cloud side of the engine (`tagwarden_engine::enforce`): [`GcpTagger`] as its
//! [`Adapter`]. A resource's labels are read with their guard (Compute's `labelFingerprint`, a
//! bucket's `metageneration`) and written as the map read with the plan's keys laid over it, under
//! that guard; a guard that no longer holds (412: another writer changed the labels since) is read
//! again and the write laid over the fresh map, never over the stale one.
//!
//! While a policy names a Resource Manager tag, a resource's tags in effect are read beside its
//! labels and planned as `<parentID>/<key>: <value>` entries; the plan's tag entries are bound
//! after its labels are written (`crate::tags`), each checked against the 50 direct bindings a
//! resource may hold.
//!
//! A sweep lists through Cloud Asset Inventory (`super::asset`): one search a 500 owned
//! resources, labels included; only the resources that appear drifted are read again, right before
//! their write (the inventory lags). The planning, the loop guards and the reports are the
//! engine's, as on AWS and Azure.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::{Cloud, ClusterRef};
use tagwarden_core::gcp::{check_bindings_fit, is_ownership_label, is_tag_key, TagRef};
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::policy::Policy;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::enforce::sweep::{Batching, ClusterListing};
use tagwarden_engine::enforce::{Adapter, Read};
use tagwarden_engine::rate_limit::Keyed;

use crate::clients::Clients;
use crate::error::PRECONDITION_FAILED;
use crate::gcs::GcsSource;
use crate::labels::Current;
use crate::tags::{self, BindingParent, Effective};
use crate::target::Target;

/// Resources reconciled, and calls in flight, at once in an invocation (`TAGWARDEN_CONCURRENCY`).
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Each project's Compute Engine reads and writes are paced at half its default rate quotas, so a
/// sweep never takes more than half of what the project's own tools share ("Compute Engine rate
/// quotas": `read_requests` and the write groups each 1,500 a minute a project, enforced per
/// 60-second interval): 12 a second with a burst of 30 is at most 750 in any minute. Cloud Storage
/// and Cloud DNS calls are paced in the same buckets (their quotas are larger).
pub const HALF_OF_COMPUTE: (f64, f64) = (12.0, 30.0);
/// Guards kept from reads awaiting their write (a sweep's concurrent writes need far fewer).
const MAX_GUARDS: usize = 4096;
/// Writes tried under a fresh guard before the resource is handed back: each 412 means another
/// writer changed the labels in between; three in a row is a fight for the next delivery or sweep.
pub const MAX_PRECONDITION_RETRIES: usize = 3;

pub struct GcpTagger {
    pub clients: Arc<Clients>,
    /// The Cloud Asset Inventory scopes a sweep searches (`projects/…`, `folders/…`, `organizations/…`).
    pub sweep_scopes: Vec<String>,
    pub calls: CallCounter,
    /// Each resource's last read, for its write's guard.
    guards: Mutex<HashMap<String, Current>>,
    /// Per project: reads, and writes ([`HALF_OF_COMPUTE`]).
    reads: Keyed,
    writes: Keyed,
    /// Whether a loaded policy names a Resource Manager tag: only then are tags read.
    tags_wanted: AtomicBool,
}

impl GcpTagger {
    pub fn new(clients: Arc<Clients>, sweep_scopes: Vec<String>, calls: CallCounter) -> Self {
        GcpTagger {
            clients,
            sweep_scopes,
            calls,
            guards: Mutex::new(HashMap::new()),
            reads: Keyed::new(HALF_OF_COMPUTE),
            writes: Keyed::new(HALF_OF_COMPUTE),
            tags_wanted: AtomicBool::new(false),
        }
    }

    fn target(r: &ResourceRef) -> Result<Target, CloudError> {
        Target::parse(&r.id)
            .map_err(|u| CloudError::gcp("labels:Target", &r.id, None, "Unsupported", &u.why, ErrorClass::Unsupported))
    }

    async fn read_guarded(&self, r: &ResourceRef, target: &Target) -> Result<Current, CloudError> {
        self.reads.of(project_of(&r.id)).acquire().await;
        let mut current = self.clients.get_labels(&r.id, target, &self.calls).await?;
        if let Some(at) = current.binding.as_ref().filter(|_| self.tags_wanted.load(Ordering::Relaxed)) {
            self.reads.of(project_of(&r.id)).acquire().await;
            current.tags = self.clients.effective_tags(&r.id, at, &self.calls).await?;
        }
        let mut guards = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        // A read that found nothing to write leaves its guard behind: a warm instance would keep
        // one for every resource it ever read. Past the bound they are dropped; a write that
        // misses its guard reads once more.
        if guards.len() >= MAX_GUARDS {
            guards.clear();
        }
        guards.insert(r.id.clone(), current.clone());
        drop(guards);
        Ok(current)
    }

    /// The last read of `r`, when it is the map the plan was made from.
    fn guard_for(&self, r: &ResourceRef, planned_on: &TagMap) -> Option<Current> {
        let mut guards = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        guards.remove(&r.id).filter(|c| &c.map() == planned_on)
    }

    /// Bind the plan's tag entries `set` on `r`, read as `read` and checked by [`tags_fit`].
    async fn bind_tags(
        &self,
        r: &ResourceRef,
        read: &Current,
        at: &BindingParent,
        set: &TagMap,
    ) -> Result<(), CloudError> {
        for (key, value) in set {
            let tag = TagRef::from_entry(key, value)
                .map_err(|v| CloudError::gcp(OP_BIND, &r.id, None, "BadTag", &v.message, ErrorClass::Fatal))?;
            match read.tags.iter().find(|t| !t.inherited && t.key == *key) {
                Some(old) if old.value != *value => self.replace(r, at, old, &tag).await?,
                _ => self.bind(r, at, &tag.namespaced_value()).await?,
            }
        }
        Ok(())
    }

    /// Bind `value` on `r`; a binding already there is what was wanted.
    async fn bind(&self, r: &ResourceRef, at: &BindingParent, value: &str) -> Result<(), CloudError> {
        self.writes.of(project_of(&r.id)).acquire().await;
        match self.clients.bind(&r.id, at, value, &self.calls).await {
            Err(e) if !tags::already(&e) => Err(e),
            _ => Ok(()),
        }
    }

    /// Replace the value `old`, bound directly, by `tag`'s: a resource holds one value a key, so
    /// the old is unbound first, but only once the new value is known to exist; if the new one is
    /// then refused, the old is bound back (retried), and a value that could not be is named in
    /// the error.
    async fn replace(
        &self,
        r: &ResourceRef,
        at: &BindingParent,
        old: &Effective,
        tag: &TagRef,
    ) -> Result<(), CloudError> {
        let value = self.clients.tag_value(&r.id, tag, &self.calls).await?;
        self.writes.of(project_of(&r.id)).acquire().await;
        match self.clients.unbind(&r.id, at, &old.tag_value, &self.calls).await {
            // Unbound since it was read (a concurrent delivery): what was wanted.
            Err(e) if e.status != Some(404) => return Err(e),
            _ => {}
        }
        let Err(refused) = self.bind(r, at, &value).await else { return Ok(()) };
        let mut last = None;
        for attempt in 0..MAX_PRECONDITION_RETRIES {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(200 << attempt)).await;
            }
            match self.bind(r, at, &old.tag_value).await {
                Ok(()) => return Err(refused),
                Err(e) => last = Some(e),
            }
        }
        let lost = last.map(|e| e.to_string()).unwrap_or_default();
        tracing::error!(
            resource = r.id,
            tag = old.key,
            value = old.value,
            error = lost,
            "a replaced tag value could not be bound back"
        );
        let message = format!(
            "{}; and the value it was to replace, {}/{}, could not be bound back ({lost}): the next event or sweep binds the policy's",
            refused.message, old.key, old.value
        );
        Err(CloudError { message, ..refused })
    }
}

/// Where the plan's tag entries `set` are bound on `r`, read as `read`, checked before anything
/// is written: the type takes bindings, and the new ones fit beside its direct bindings.
fn tags_fit<'a>(r: &ResourceRef, read: &'a Current, set: &TagMap) -> Result<&'a BindingParent, CloudError> {
    let fail = |code: &str, why: &str, class: ErrorClass| CloudError::gcp(OP_BIND, &r.id, None, code, why, class);
    let Some(at) = &read.binding else {
        return Err(fail("Unsupported", "the type takes no Resource Manager tag bindings", ErrorClass::Unsupported));
    };
    let direct: Vec<&str> = read.tags.iter().filter(|t| !t.inherited).map(|t| t.key.as_str()).collect();
    let adding = set.keys().filter(|k| !direct.contains(&k.as_str())).count();
    check_bindings_fit(direct.len(), adding).map_err(|v| fail("TooManyBindings", &v.message, ErrorClass::TagLimit))?;
    Ok(at)
}

const OP_BIND: &str = "tags:Bind";

/// A write is laid over a fresh read only while its ownership labels are the ones the plan saw
/// (`current`): a resource disowned in between is left alone.
fn owned_as_planned(r: &ResourceRef, read: &Current, current: &TagMap) -> Result<(), CloudError> {
    if ownership_of(&read.labels) == ownership_of(current) {
        return Ok(());
    }
    Err(CloudError::gcp(
        "labels:Write",
        &r.id,
        None,
        "OwnershipChanged",
        "the resource's ownership labels changed since it was planned; it is planned again on the next event or sweep",
        ErrorClass::Transient,
    ))
}

/// Whether a policy names a Resource Manager tag anywhere.
fn names_a_tag(policy: &Policy) -> bool {
    let overrides = policy.overrides.iter().flat_map(|o| &o.tags);
    policy.status.iter().chain(&policy.spec).chain(overrides).any(|t| is_tag_key(&t.key))
}

/// The project a full resource name is in (a bucket's name has none: its own budget).
fn project_of(full_name: &str) -> &str {
    full_name.split('/').skip_while(|s| *s != "projects").nth(1).unwrap_or(full_name)
}

/// The ownership labels of a map: a write is laid over a fresh read only while they are the ones
/// the plan saw (a resource disowned in between is left alone).
fn ownership_of(labels: &TagMap) -> Vec<(&String, &String)> {
    labels.iter().filter(|(k, _)| is_ownership_label(k)).collect()
}

impl Adapter for GcpTagger {
    type Source = GcsSource;
    type Group = Infallible;
    const CONCURRENCY: usize = DEFAULT_CONCURRENCY;

    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }

    fn policies_loaded(&self, policies: &Policies) {
        self.tags_wanted.store(policies.iter().any(|p| names_a_tag(&p.policy)), Ordering::Relaxed);
    }

    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        let target = Self::target(r)?;
        let current = self.read_guarded(r, &target).await?;
        Ok(Read { tags: current.map(), arn: None })
    }

    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        let target = Self::target(r)?;
        let mut read = match self.guard_for(r, current) {
            Some(c) => c,
            None => self.read_guarded(r, &target).await?,
        };
        let (tags, labels): (TagMap, TagMap) = set.clone().into_iter().partition(|(k, _)| is_tag_key(k));
        if !tags.is_empty() {
            // Refused before the labels are written, so a refusal means nothing was.
            tags_fit(r, &read, &tags)?;
        }
        self.write_labels(r, &target, &labels, current, &mut read).await?;
        if tags.is_empty() {
            return Ok(());
        }
        owned_as_planned(r, &read, current)?;
        let at = tags_fit(r, &read, &tags)?.clone();
        self.bind_tags(r, &read, &at, &tags).await
    }

    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        let tags = self.tags_wanted.load(Ordering::Relaxed);
        self.clients.search_owned(&self.sweep_scopes, cluster, tags, &self.calls, pages).await
    }

    fn cannot_sweep(&self) -> Option<&'static str> {
        self.sweep_scopes.is_empty().then_some(
            "no Cloud Asset Inventory scope to search: set TAGWARDEN_SWEEP_SCOPES (projects/ID, folders/N or organizations/N)",
        )
    }

    /// Its project: a sweep takes its jobs from each project in turn, so no project's quota holds
    /// every slot.
    fn pacing_key<'r>(&self, r: &'r ResourceRef) -> &'r str {
        project_of(&r.id)
    }

    /// Every write is re-read right before it is sent: the listed labels are the inventory's,
    /// which lag, and the write needs the guard of a fresh read.
    fn batching(&self, _r: &ResourceRef) -> Batching<Infallible> {
        Batching::Reread
    }
}

impl GcpTagger {
    /// Write the plan's label entries `set` over `read` under its guard; a guard that no longer
    /// holds is read again (into `read`) and the write laid over the fresh map.
    async fn write_labels(
        &self,
        r: &ResourceRef,
        target: &Target,
        set: &TagMap,
        current: &TagMap,
        read: &mut Current,
    ) -> Result<(), CloudError> {
        if set.is_empty() {
            return Ok(());
        }
        for _ in 0..MAX_PRECONDITION_RETRIES {
            owned_as_planned(r, read, current)?;
            let mut labels = read.labels.clone();
            labels.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
            if labels == read.labels {
                return Ok(());
            }
            self.writes.of(project_of(&r.id)).acquire().await;
            match self.clients.set_labels(&r.id, target, &labels, &read.guard, &self.calls).await {
                Ok(()) => return Ok(()),
                Err(e) if e.status == Some(PRECONDITION_FAILED) => {
                    tracing::info!(resource = r.id, "labels changed since read (412): reading them again");
                    *read = self.read_guarded(r, target).await?;
                }
                Err(e) => return Err(e),
            }
        }
        Err(CloudError::gcp(
            "labels:Write",
            &r.id,
            Some(PRECONDITION_FAILED),
            "conditionNotMet",
            "another writer changed the labels before each of 3 writes; handed back for the next delivery or sweep",
            ErrorClass::Transient,
        ))
    }
}
