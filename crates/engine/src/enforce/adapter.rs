//! What differs between clouds: the [`Adapter`] an engine is built over, and what it hands back.

use futures_util::stream::{self, StreamExt};

use super::sweep::{self, Batching, ClusterListing, Unindexed};
use crate::cloud_error::CloudError;
use crate::policy_store::PolicySource;
use tagwarden_core::cloud::{Cloud, ClusterRef};
use tagwarden_core::events::Event;
use tagwarden_core::policy::clusters::Policies;
use tagwarden_core::report::Record;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

/// Resources the events of a batch imply, by the position of their event, with their tags when
/// the lookup carries them; and the lookups that failed, as records of their event.
#[derive(Debug, Default)]
pub struct Implied {
    pub found: Vec<(usize, ResourceRef, Option<TagMap>)>,
    pub failed: Vec<(usize, Record)>,
}

/// Where a reconcile gets a resource's current tags.
#[derive(Debug, Clone, Copy)]
pub enum Current<'a> {
    /// Known and fresh (a listing carried them, or an event's hint): no read.
    Known(&'a TagMap),
    /// Read; an event named the resource, so "not found" may be "not visible yet" and is waited out.
    Read,
    /// Read; a listing named it a moment ago, so "not found" means it was deleted since: `gone`.
    Listed,
}

/// A resource's tags as read, and its ARN when the cloud names it differently from the event
/// (an IAM path), for overrides that match on it.
pub struct Read {
    pub tags: TagMap,
    pub arn: Option<String>,
}

/// What a cloud does differently.
#[allow(async_fn_in_trait)]
pub trait Adapter: Send + Sync {
    /// Where this cloud's policies are published.
    type Source: PolicySource;
    /// What the resources whose writes share a call have in common (AWS: the API); a cloud that
    /// never shares a call names none (`std::convert::Infallible`).
    type Group: Copy + Ord + std::fmt::Debug + Send + Sync;
    /// Resources reconciled at once, and calls in flight, unless the engine is told otherwise.
    const CONCURRENCY: usize;
    fn cloud(&self) -> Cloud;
    /// The policies an invocation enforces, once loaded, for an adapter whose reads depend on what
    /// they manage (Google Cloud reads a resource's tag bindings only while a policy names a tag).
    fn policies_loaded(&self, policies: &Policies) {
        let _ = policies;
    }
    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError>;
    /// The tags of a resource a listing just named: "not found" is returned at once, since it
    /// means the resource was deleted, not that it is not visible yet.
    async fn read_listed(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.read(r).await
    }
    /// Write `set` (every key that must change; never a removal). `current` is what was read,
    /// for the services whose write replaces the whole tag set.
    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError>;
    /// The tags of each of `resources`, in order, in as few calls as the cloud allows (at most
    /// `concurrency` in flight); "not found" is waited out as [`Adapter::read`] does.
    async fn read_all(&self, resources: &[&ResourceRef], concurrency: usize) -> Vec<Result<Read, CloudError>> {
        // Indices, not references: see `handle_event`.
        stream::iter(0..resources.len()).map(|i| self.read(resources[i])).buffered(concurrency.max(1)).collect().await
    }
    /// Resources the events of a batch imply but do not name (a new instance's volumes), each
    /// with the position of its event and its tags when the lookup carries them; a lookup that
    /// failed is a record of its event.
    async fn implied_all(&self, events: &[&Event], version: &str) -> Implied {
        let _ = (events, version);
        Implied::default()
    }
    /// Every resource one of `cluster`'s ownership tags marks, each once, with its tags when the
    /// listing carries them; `pages` is told how many were found so far as pages arrive. A listing
    /// that failed part-way keeps what it found and names its error.
    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing;
    /// [`Adapter::list_owned`], and what the sweep must say about how it listed: each time a
    /// cheaper listing was refused and a dearer one used instead, why (reported and counted as a
    /// fallback, not a failure: everything was listed).
    async fn list_owned_noting(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        self.list_owned(cluster, pages).await
    }
    /// [`Adapter::list_owned_noting`] for every swept cluster, in `clusters`' order: one listing
    /// each, unless the cloud can list several ownership keys in one query (Azure Resource Graph).
    /// `pages` is told how many were found so far, all clusters together.
    async fn list_owned_all(&self, clusters: &[ClusterRef<'_>], pages: &(dyn Fn(usize) + Sync)) -> Vec<ClusterListing> {
        let mut out = Vec::with_capacity(clusters.len());
        let mut before = 0;
        for cluster in clusters {
            let listed = self.list_owned_noting(*cluster, &|n| pages(before + n)).await;
            before += listed.found.len();
            out.push(listed);
        }
        out
    }
    /// Resources the owned listing cannot see, with their tags, whoever owns them (the engine
    /// keeps the swept clusters'), given what it found; the ones that could not be read; and the
    /// listings that failed.
    async fn list_unindexed(&self, owned: &[sweep::Listed]) -> Unindexed {
        let _ = owned;
        Unindexed::default()
    }
    /// Why this cloud cannot sweep, if it cannot (it was given nowhere to list).
    fn cannot_sweep(&self) -> Option<&'static str> {
        None
    }
    /// The budget `r`'s writes are paced against, where the adapter paces by more than one (Azure:
    /// its subscription): a sweep takes its jobs from each in turn, so no budget's pace holds every
    /// slot. One for all by default.
    fn pacing_key<'r>(&self, r: &'r ResourceRef) -> &'r str {
        let _ = r;
        ""
    }
    /// How a sweep sends the write of `r`.
    fn batching(&self, r: &ResourceRef) -> Batching<Self::Group> {
        let _ = r;
        Batching::Alone
    }
    /// One call that writes `set` on every resource of a [`Batching::Shared`] `group`; on
    /// success, the positions in `resources` it failed for.
    async fn write_shared(
        &self,
        group: Self::Group,
        resources: &[&ResourceRef],
        set: &TagMap,
    ) -> Result<Vec<(usize, CloudError)>, CloudError> {
        let _ = group;
        let mut failed = Vec::new();
        for (at, r) in resources.iter().enumerate() {
            if let Err(e) = self.write(r, set, &TagMap::new()).await {
                failed.push((at, e));
            }
        }
        Ok(failed)
    }
}
