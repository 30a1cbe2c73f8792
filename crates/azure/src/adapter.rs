//! The Azure side of the engine (`tagwarden_engine::enforce`): [`ArmTagger`], the ARM client over the scopes a
//! sweep lists, as its [`Adapter`]. A resource's tags are read through the Tags API and written
//! with at most one Merge; every write is one resource's, so nothing is grouped. The loop guards
//! (the function's own identity, `TAGWARDEN_SELF_CLIENT_ID` / `TAGWARDEN_SELF_PRINCIPAL_ID`, and
//! idempotent planning) are the engine's, the same as on AWS.
//!
//! Deliberately not here: the reconcile itself (`tagwarden_engine::enforce`), the HTTP calls and their
//! retries (`super::arm`), the protocol of the Functions host (`super::function`) and the decision
//! itself (`tagwarden_core::plan`).

use std::convert::Infallible;

use super::arm::ArmClient;
use super::blob_store::BlobSource;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;
use tagwarden_engine::enforce::sweep::Listing;
use tagwarden_engine::enforce::{Adapter, Read};

/// The ARM client, and the subscription or resource-group IDs a sweep lists.
pub struct ArmTagger {
    pub arm: ArmClient,
    pub sweep_scopes: Vec<String>,
}

impl Adapter for ArmTagger {
    type Source = BlobSource;
    type Group = Infallible;
    const CONCURRENCY: usize = 8;

    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn cannot_sweep(&self) -> Option<&'static str> {
        self.sweep_scopes.is_empty().then_some(
            "no sweep scope: set TAGWARDEN_SWEEP_SCOPES (or TAGWARDEN_METRICS_RESOURCE_ID, whose subscription is the default)",
        )
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
        for scope in &self.sweep_scopes {
            match self.arm.list_owned(scope, &key).await {
                Ok(listed) => found.extend(listed.into_iter().map(|r| (r, None))),
                Err(e) => failed.push(e),
            }
            pages(found.len());
        }
        (found, failed)
    }
}
