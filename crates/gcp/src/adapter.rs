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

    /// Bind the plan's tag entries `set` on `r`, read as `read`: a value in effect directly under
    /// another value is unbound first, and bound back if the new one is refused.
    async fn bind_tags(&self, r: &ResourceRef, read: &Current, set: &TagMap) -> Result<(), CloudError> {
        let fail = |code: &str, why: &str, class: ErrorClass| CloudError::gcp(OP_BIND, &r.id, None, code, why, class);
        let Some(at) = &read.binding else {
            return Err(fail(
                "Unsupported",
                "the type takes no Resource Manager tag bindings",
                ErrorClass::Unsupported,
            ));
        };
        let direct = |key: &str| read.tags.iter().find(|t| !t.inherited && t.key == key);
        let adding = set.keys().filter(|k| direct(k).is_none()).count();
        let bound = read.tags.iter().filter(|t| !t.inherited).count();
        check_bindings_fit(bound, adding).map_err(|v| fail("TooManyBindings", &v.message, ErrorClass::TagLimit))?;
        let project = project_of(&r.id);
        for (key, value) in set {
            let tag = TagRef::from_entry(key, value).map_err(|v| fail("BadTag", &v.message, ErrorClass::Fatal))?;
            let old = direct(key).filter(|t| t.value != *value);
            if let Some(old) = old {
                self.writes.of(project).acquire().await;
                self.clients.unbind(&r.id, at, &old.tag_value, &self.calls).await?;
            }
            self.writes.of(project).acquire().await;
            match self.clients.bind(&r.id, at, &tag, &self.calls).await {
                Ok(()) => {}
                // Bound since it was read (a concurrent delivery): what the plan wanted.
                Err(e) if e.status == Some(409) => {}
                Err(e) => {
                    if let Some(old) = old {
                        let back = TagRef::from_entry(&old.key, &old.value);
                        if let Err(lost) = async {
                            let back = back.map_err(|v| fail("BadTag", &v.message, ErrorClass::Fatal))?;
                            self.clients.bind(&r.id, at, &back, &self.calls).await
                        }
                        .await
                        {
                            tracing::error!(resource = r.id, tag = key, error = %lost, "the value unbound could not be bound back");
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }
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
        self.write_labels(r, &target, &labels, current, &mut read).await?;
        if tags.is_empty() {
            return Ok(());
        }
        owned_as_planned(r, &read, current)?;
        self.bind_tags(r, &read, &tags).await
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
