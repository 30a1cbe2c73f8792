//! The Azure reconciler: an event names a resource; it is re-read through the Tags API, planned
//! against the policy in force and written with at most one Merge (DESIGN.md §4, §5). The sweep
//! does the same for every owned resource it can list.
//!
//! Loop safety takes two guards, both always on: an event caused by the function's own identity
//! (`claims.appid`, `claims.oid` or `authorization.evidence.principalId` equal to
//! `TAGWARDEN_SELF_CLIENT_ID` / `TAGWARDEN_SELF_PRINCIPAL_ID`) is dropped before any call, and
//! planning is idempotent, so an own write read back finds no drift and writes nothing.
//!
//! Deliberately not here: the HTTP protocol of the Functions host (`super::function`) and the
//! decision itself (`crate::plan`).

use std::sync::Arc;

use super::arm::ArmClient;
use super::blob_store::BlobPolicyStore;
use crate::cloud::Cloud;
use crate::cloud_error::CloudError;
use crate::enforce::sweep::Listing;
use crate::enforce::{Adapter, Current, Engine, Read};
use crate::events::Event;
use crate::policy::cache::LoadedPolicy;
use crate::policy::clusters::Policies;
use crate::report::Outcome;
use crate::report::Record;
use crate::resource::ResourceRef;
use crate::TagMap;

pub struct Reconciler {
    pub arm: ArmClient,
    pub store: BlobPolicyStore,
    /// The function's own identities (principal id, client id): events they caused are ignored.
    pub own: Vec<String>,
    /// Subscription or resource-group IDs the sweep lists.
    pub sweep_scopes: Vec<String>,
    /// Locks, concurrency (in a sweep, and the events of one delivered batch) and dry run: the
    /// reconcile of one resource, shared with AWS.
    pub engine: Engine,
}

impl Reconciler {
    pub fn new(arm: ArmClient, store: BlobPolicyStore, own: Vec<String>) -> Self {
        Reconciler { arm, store, own, sweep_scopes: Vec::new(), engine: Engine::new(DEFAULT_CONCURRENCY) }
    }

    fn scoped(&self) -> Scoped<'_> {
        Scoped { arm: &self.arm, scopes: &self.sweep_scopes }
    }

    /// The policies in force; a rejected new version is counted and reported.
    async fn policies(&self, out: &mut Outcome, force: bool) -> Option<Policies> {
        crate::enforce::load_policies(&self.store, out, force).await
    }

    /// A policy blob changed: re-read the policy now (a conditional GET, then validate and cache;
    /// a rejected version is counted and reported, and the last good one stays in force). Lists,
    /// reads and writes no resource: that is the queued sweep's work, so the Event Grid delivery
    /// that asked for this is answered within its 30 s.
    pub async fn recheck_policy(&self) -> Outcome {
        let mut out = Outcome::default();
        out.metrics.events_received = 1;
        if let Some(policies) = self.policies(&mut out, true).await {
            tracing::info!(version = %policies.version(), "policy re-checked; the sweep runs from the queue");
        }
        out
    }

    /// Reconcile the resource an event names. Ignored and own events make no call at all.
    pub async fn handle_event(&self, event: &Event) -> Outcome {
        self.engine.handle_event(&self.scoped(), &self.store, &self.own, event, None).await
    }

    /// Re-read, plan against `policy` and (unless dry-run) write one resource.
    pub async fn reconcile(&self, policy: &Arc<LoadedPolicy>, r: &ResourceRef) -> Record {
        self.engine.reconcile(&self.scoped(), &Policies::one(policy.clone()), r, Current::Read).await
    }

    /// Plan (and, unless dry-run, write) every owned resource in the sweep scopes, of every
    /// cluster; `force` re-reads the policy now (a policy blob changed). Writes each cluster's
    /// status report.
    pub async fn sweep(&self, force: bool) -> Outcome {
        self.sweep_clusters(force, None).await
    }

    /// [`Self::sweep`] of the clusters named in `only` (every cluster with `None`).
    pub async fn sweep_clusters(&self, force: bool, only: Option<&[String]>) -> Outcome {
        if self.sweep_scopes.is_empty() {
            let why = "no sweep scope: set TAGWARDEN_SWEEP_SCOPES (or TAGWARDEN_METRICS_RESOURCE_ID, whose subscription is the default)";
            return Outcome { error: Some(why.to_string()), ..Outcome::default() };
        }
        self.engine.sweep(&self.scoped(), &self.store, force, only, None).await
    }
}

/// Resources reconciled at once by default.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The ARM client over the scopes a sweep lists: the engine's adapter.
struct Scoped<'a> {
    arm: &'a ArmClient,
    scopes: &'a [String],
}

impl Adapter for Scoped<'_> {
    type Group = std::convert::Infallible;

    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.arm.get_tags(&r.id).await.map(|tags| Read { tags, arn: None })
    }

    async fn read_listed(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.arm.get_tags_listed(&r.id).await.map(|tags| Read { tags, arn: None })
    }

    /// One Merge: ARM's answer (or, after a 202, its operation's end) is the record of the
    /// write, with no read-back (reads can be stale). ARM's own checks end in the record: the limit
    /// (a concurrent writer got there first), a type that refuses the PATCH, a refused tag, a lock,
    /// or a failure worth another delivery.
    async fn write(&self, r: &ResourceRef, set: &TagMap, _current: &TagMap) -> Result<(), CloudError> {
        self.arm.merge_tags(&r.id, set).await
    }

    /// ARM's tag-filtered listing carries no tags: each resource is read before it is planned. A
    /// scope that cannot be listed is named; the others are still swept.
    async fn list_owned(&self, infra_id: &str, pages: &(dyn Fn(usize) + Sync)) -> Listing {
        let key = Cloud::Azure.ownership_key(infra_id);
        let (mut found, mut failed) = (Vec::new(), Vec::new());
        for scope in self.scopes {
            match self.arm.list_owned(scope, &key).await {
                Ok(listed) => found.extend(listed.into_iter().map(|r| (r, None))),
                Err(e) => failed.push(e),
            }
            pages(found.len());
        }
        (found, failed)
    }
}
