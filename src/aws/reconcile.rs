//! The AWS reconciler: an event names resources; each is re-read, planned against the policy in
//! force and written at most once (DESIGN.md §4, §5). The sweep does the same for every owned
//! resource it can list.
//!
//! Loop safety takes two guards: events made by the function's own role are ignored (the
//! deployed patterns drop most of them already), and planning is idempotent, so an own write
//! read back finds no drift — the only guard for `Tag Change on Resource`, which names no caller.
//! The sweep, which batches its writes, is in [`super::sweep`].
//!
//! Deliberately not here: the reconcile of one resource and the handling of an event, which are
//! the same on both clouds (`crate::enforce`); this file holds what makes them AWS's: the
//! [`Tagger`] as the engine's adapter, and a new instance's volumes as resources its event implies.

use std::sync::Arc;
use std::time::Instant;

use super::policy_store::{LoadedPolicy, PolicyStore};
use super::sweep::{Progress, SweepOptions};
use super::tags::Tagger;
use super::AwsError;
use crate::cloud::Cloud;
use crate::enforce::{Adapter, Engine, IntoRecord, Read};
use crate::events::{Event, EventKind};
use crate::policy::clusters::Policies;
pub use crate::report::Outcome;
use crate::report::Record;
use crate::resource::ResourceRef;
use crate::TagMap;

pub struct Reconciler {
    pub tagger: Tagger,
    pub store: PolicyStore,
    /// The function's own identities (its role ARN): events they made are not reconciled.
    pub own: Vec<String>,
    /// How the sweep batches and paces its writes.
    pub sweep: SweepOptions,
    /// Told how a sweep is going (the CLI draws a progress bar).
    pub progress: Option<Progress>,
    /// Locks, concurrency and dry run: the reconcile of one resource, shared with Azure.
    pub engine: Engine,
}

/// Resources reconciled at once by default: ten events of an SQS batch side by side, each a read
/// and a write, without a burst that would meet the services' request-rate limits.
pub const DEFAULT_CONCURRENCY: usize = 10;

impl Reconciler {
    pub fn new(tagger: Tagger, store: PolicyStore, own: Vec<String>) -> Self {
        Reconciler {
            tagger,
            store,
            own,
            sweep: SweepOptions::default(),
            progress: None,
            engine: Engine::new(DEFAULT_CONCURRENCY),
        }
    }

    /// At most `n` (at least 1) resources reconciled at once.
    pub fn with_concurrency(mut self, n: usize) -> Self {
        let dry_run = self.engine.dry_run;
        self.engine = Engine::new(n);
        self.engine.dry_run = dry_run;
        self
    }

    pub fn concurrency(&self) -> usize {
        self.engine.concurrency()
    }

    /// The policies in force; a rejected new version is counted and reported.
    pub(super) async fn policies(&self, out: &mut Outcome, force: bool) -> Option<Policies> {
        self.store.policies_for(out, force).await
    }

    /// Reconcile every resource an event names.
    pub async fn handle_event(&self, event: &Event) -> Outcome {
        self.handle_event_until(event, None).await
    }

    /// [`Self::handle_event`], starting no resource after `stop_at`: the ones left are reported
    /// as deferred (retryable), so the event comes back and finds the finished ones unchanged.
    pub async fn handle_event_until(&self, event: &Event, stop_at: Option<Instant>) -> Outcome {
        self.engine.handle_event(&self.tagger, &self.store, &self.own, event, stop_at).await
    }

    /// Re-read (unless the tags are `known`), plan against `policy` and write one resource.
    pub async fn reconcile(&self, policy: &Arc<LoadedPolicy>, r: &ResourceRef, known: Option<&TagMap>) -> Record {
        self.engine.reconcile(&self.tagger, &Policies::one(policy.clone()), r, known).await
    }
}

impl Adapter for Tagger {
    type Error = AwsError;

    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    async fn read(&self, r: &ResourceRef) -> Result<Read, AwsError> {
        self.read_full(r).await.map(|(tags, arn)| Read { tags, arn })
    }

    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), AwsError> {
        Tagger::write(self, r, set, current).await
    }

    /// A new instance's volumes are not in its RunInstances event.
    async fn implied(&self, event: &Event, version: &str) -> (Vec<(ResourceRef, Option<TagMap>)>, Vec<Record>) {
        let (mut implied, mut failed) = (Vec::new(), Vec::new());
        if event.kind != EventKind::Create || event.event_name != "RunInstances" {
            return (implied, failed);
        }
        let (region, account) =
            (event.region.as_deref().unwrap_or_default(), event.account.as_deref().unwrap_or_default());
        for instance in event.resources.iter().filter(|r| r.kind == "ec2:instance") {
            match self.attached_volumes(&instance.id).await {
                Ok(volumes) => implied
                    .extend(volumes.into_iter().map(|(id, tags)| (ResourceRef::ec2(&id, region, account), Some(tags)))),
                Err(e) => failed.push(e.into_record(Record::failed(Cloud::Aws, instance, version, String::new()))),
            }
        }
        (implied, failed)
    }
}

impl IntoRecord for AwsError {
    fn into_record(self, record: Record) -> Record {
        AwsError::into_record(self, record)
    }
}
