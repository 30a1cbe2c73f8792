//! The Google Cloud side of the engine (`tagwarden_engine::enforce`): [`GcpTagger`] as its
//! [`Adapter`]. A resource's labels are read with their guard (Compute's `labelFingerprint`, a
//! bucket's `metageneration`) and written as the map read with the plan's keys laid over it, under
//! that guard; a guard that no longer holds (412: another writer changed the labels since) is read
//! again and the write laid over the fresh map, never over the stale one.
//!
//! A sweep lists through Cloud Asset Inventory (`super::asset`): one search a 500 owned
//! resources, labels included; only the resources that appear drifted are read again, right before
//! their write (the inventory lags). The planning, the loop guards and the reports are the
//! engine's, as on AWS and Azure.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::{Cloud, ClusterRef};
use tagwarden_core::gcp::is_ownership_label;
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
        }
    }

    fn target(r: &ResourceRef) -> Result<Target, CloudError> {
        Target::parse(&r.id)
            .map_err(|u| CloudError::gcp("labels:Target", &r.id, None, "Unsupported", &u.why, ErrorClass::Unsupported))
    }

    async fn read_guarded(&self, r: &ResourceRef, target: &Target) -> Result<Current, CloudError> {
        self.reads.of(project_of(&r.id)).acquire().await;
        let current = self.clients.get_labels(&r.id, target, &self.calls).await?;
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
        guards.remove(&r.id).filter(|c| &c.labels == planned_on)
    }
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

    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        let target = Self::target(r)?;
        let current = self.read_guarded(r, &target).await?;
        Ok(Read { tags: current.labels, arn: None })
    }

    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        let target = Self::target(r)?;
        let mut read = match self.guard_for(r, current) {
            Some(c) => c,
            None => self.read_guarded(r, &target).await?,
        };
        for _ in 0..MAX_PRECONDITION_RETRIES {
            if ownership_of(&read.labels) != ownership_of(current) {
                return Err(CloudError::gcp(
                    "labels:Write",
                    &r.id,
                    None,
                    "OwnershipChanged",
                    "the resource's ownership labels changed since it was planned; it is planned again on the next event or sweep",
                    ErrorClass::Transient,
                ));
            }
            let mut labels = read.labels.clone();
            labels.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
            if labels == read.labels {
                return Ok(());
            }
            self.writes.of(project_of(&r.id)).acquire().await;
            match self.clients.set_labels(&r.id, &target, &labels, &read.guard, &self.calls).await {
                Ok(()) => return Ok(()),
                Err(e) if e.status == Some(PRECONDITION_FAILED) => {
                    tracing::info!(resource = r.id, "labels changed since read (412): reading them again");
                    read = self.read_guarded(r, &target).await?;
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

    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        self.clients.search_owned(&self.sweep_scopes, cluster, &self.calls, pages).await
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
