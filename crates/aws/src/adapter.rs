//! The AWS side of the engine (`tagwarden_engine::enforce`): the [`Tagger`] as its [`Adapter`] — which call
//! reads and writes each kind (`super::tags`), how a sweep groups writes (EC2 `CreateTags` and the
//! Tagging API's `TagResources` name many resources sharing one delta; S3's `PutBucketTagging`
//! replaces the set, so it is re-read right before), and a new instance's volumes as resources its
//! `RunInstances` event implies.
//!
//! Deliberately not here: the reconcile of one resource, the handling of an event or a batch and
//! the sweep, which are the same on both clouds (`tagwarden_engine::enforce`, including the loop guard that
//! ignores the function's own role); which API serves a kind (`tagwarden_core::services`); how it lists
//! (`super::discover`); the calls themselves (`super::tags`).

use super::policy_store::AwsSource;
use crate::Tagger;
use tagwarden_core::cloud::{Cloud, ClusterRef};
use tagwarden_core::events::{Event, EventKind};
use tagwarden_core::report::Record;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::{self, Api, Batch};
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;
use tagwarden_engine::enforce::sweep::{Batching, ClusterListing, Listed, Unindexed};
use tagwarden_engine::enforce::{Adapter, Implied, Read};

/// Resources reconciled at once by default: ten events of an SQS batch side by side, each a read
/// and a write, without a burst that would meet the services' request-rate limits.
pub const DEFAULT_CONCURRENCY: usize = 10;

impl Tagger {
    /// A failed listing named with the organization shard it failed in (`Tagger::scope`).
    fn scoped(&self, mut e: CloudError) -> CloudError {
        if let Some(scope) = &self.scope {
            e.target = format!("{} in {scope}", e.target);
        }
        e
    }
}

impl Adapter for Tagger {
    type Source = AwsSource;
    type Group = Api;
    const CONCURRENCY: usize = DEFAULT_CONCURRENCY;

    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.read_full(r).await.map(|(tags, arn)| Read { tags, arn })
    }

    /// EC2 resources in shared `DescribeTags` calls; one with no tag at all (or not visible
    /// yet) and every other kind alone, as [`Adapter::read`].
    async fn read_all(&self, resources: &[&ResourceRef], concurrency: usize) -> Vec<Result<Read, CloudError>> {
        use futures_util::stream::{self, StreamExt};
        let ec2: Vec<&str> =
            resources.iter().filter(|r| services::of(r).api == Api::Ec2).map(|r| r.id.as_str()).collect();
        let mut shared = match self.ec2_describe_tags_many(&ec2).await {
            Ok(found) => found,
            // The shared read failed: each resource is read alone, and fails alone.
            Err(e) => {
                tracing::warn!(error = %e, "shared DescribeTags failed; reading alone");
                Default::default()
            }
        };
        // Indices, not references, into the stream: a closure over `&T` trips rustc's
        // higher-ranked `Send` inference once the future is boxed (rust-lang/rust#102211).
        let known: Vec<Option<TagMap>> =
            resources.iter().map(|r| shared.remove(&r.id).filter(|_| services::of(r).api == Api::Ec2)).collect();
        stream::iter(known.into_iter().enumerate())
            .map(|(i, known)| async move {
                match known {
                    Some(tags) => Ok(Read { tags, arn: None }),
                    None => Adapter::read(self, resources[i]).await,
                }
            })
            .buffered(concurrency.max(1))
            .collect()
            .await
    }

    async fn read_listed(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.read_once(r).await.map(|(tags, arn)| Read { tags, arn })
    }

    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        Tagger::write(self, r, set, current).await
    }

    /// One Tagging API listing per ownership key of the cluster (GetResources ANDs its tag
    /// filters, so a Cluster API cluster's two keys are two listings), each resource kept once.
    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        let (mut found, mut failed) = (Vec::new(), Vec::new());
        let mut seen = std::collections::HashSet::new();
        for key in cluster.ownership_keys(Cloud::Aws) {
            let before = found.len();
            let (listed, error) = self.tagged(&key, &|n| pages(before + n)).await;
            found.extend(
                listed.into_iter().filter(|(r, _)| seen.insert(r.to_string())).map(|(r, tags)| (r, Some(tags))),
            );
            failed.extend(error.map(|e| self.scoped(e)));
        }
        ClusterListing::of(found, failed)
    }

    async fn list_unindexed(&self, owned: &[Listed]) -> Unindexed {
        let mut beside = self.unindexed(owned).await;
        beside.failed = beside.failed.into_iter().map(|e| self.scoped(e)).collect();
        beside
    }

    /// EC2 `CreateTags` and `TagResources` name many resources sharing one delta; S3's
    /// `PutBucketTagging` replaces the set; every other API takes one resource a call.
    fn batching(&self, r: &ResourceRef) -> Batching<Api> {
        let service = services::of(r);
        match service.batch {
            // Grouped by API, not descriptor: EFS has its own events but is written, like any other
            // kind, through TagResources. EC2's batch is bounded by `ec2_batch` too.
            Batch::Shared(max) => {
                let max = if service.api == Api::Ec2 { self.ec2_batch.min(max) } else { max };
                Batching::Shared { group: service.api, max }
            }
            Batch::Reread => Batching::Reread,
            Batch::Alone => Batching::Alone,
        }
    }

    /// The shared write of the group's API (`super::services::write_shared`).
    async fn write_shared(
        &self,
        group: Api,
        resources: &[&ResourceRef],
        set: &TagMap,
    ) -> Result<Vec<(usize, CloudError)>, CloudError> {
        super::services::write_shared(self, group, resources, set).await
    }

    /// The volumes of every instance the batch's `RunInstances` events name, in shared
    /// `DescribeVolumes` calls, the ones not attached yet waited for together.
    async fn implied_all(&self, events: &[&Event], version: &str) -> Implied {
        let launched = |e: &Event| e.kind == EventKind::Create && e.event_name == "RunInstances";
        let instances: Vec<&str> = events
            .iter()
            .filter(|e| launched(e))
            .flat_map(|e| e.resources.iter().filter(|r| r.kind == "ec2:instance").map(|r| r.id.as_str()))
            .collect();
        let mut attached = self.attached_volumes_waiting(&instances).await;
        let mut all = Implied::default();
        for (n, event) in events.iter().enumerate().filter(|(_, e)| launched(e)) {
            let (region, account) =
                (event.region.as_deref().unwrap_or_default(), event.account.as_deref().unwrap_or_default());
            for instance in event.resources.iter().filter(|r| r.kind == "ec2:instance") {
                match attached.remove(&instance.id).unwrap_or_else(|| Ok(Vec::new())) {
                    Ok(volumes) => all.found.extend(
                        volumes.into_iter().map(|(id, tags)| (n, ResourceRef::ec2(&id, region, account), Some(tags))),
                    ),
                    Err(e) => all
                        .failed
                        .push((n, e.into_record(Record::failed(Cloud::Aws, instance, version, String::new())))),
                }
            }
        }
        all
    }
}
