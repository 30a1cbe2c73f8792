//! The Azure side of the engine (`tagwarden_engine::enforce`): [`ArmTagger`], the ARM client over the scopes a
//! sweep lists, as its [`Adapter`]. A resource's tags are read through the Tags API and written
//! with at most one Merge; every write is one resource's, so nothing is grouped. The loop guards
//! (the function's own identity, `TAGWARDEN_SELF_CLIENT_ID` / `TAGWARDEN_SELF_PRINCIPAL_ID`, and
//! idempotent planning) are the engine's, the same as on AWS.
//!
//! A sweep lists through Azure Resource Graph (`super::resource_graph`): one query a thousand owned
//! resources, tags included, so only the resources that appear drifted are read (once, right
//! before their write: Resource Graph lags ARM). Where Resource Graph refuses, ARM's tag-filtered
//! listing is used as before (no tags: every resource is read), and the sweep says why.
//!
//! Deliberately not here: the reconcile itself (`tagwarden_engine::enforce`), the HTTP calls and their
//! retries (`super::arm`), the protocol of the Functions host (`super::function`) and the decision
//! itself (`tagwarden_core::plan`).

use std::convert::Infallible;

use super::arm::ArmClient;
use super::blob_store::BlobSource;
use super::resource_graph::{GraphError, GraphListing, Scopes};
use tagwarden_core::cloud::Cloud;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;
use tagwarden_engine::enforce::sweep::{Batching, Listing};
use tagwarden_engine::enforce::{Adapter, Read};

/// The ARM client, and the subscription or resource-group IDs a sweep lists.
pub struct ArmTagger {
    pub arm: ArmClient,
    pub sweep_scopes: Vec<String>,
    /// List through Resource Graph first (the default); `false`: ARM's listing only.
    pub resource_graph: bool,
}

impl ArmTagger {
    /// Sweeping `sweep_scopes` through Resource Graph, ARM's listing where it is refused.
    pub fn new(arm: ArmClient, sweep_scopes: Vec<String>) -> Self {
        ArmTagger { arm, sweep_scopes, resource_graph: true }
    }

    /// Resource Graph's listing with its tags; and each scope where it showed nothing listed
    /// through ARM (Resource Graph leaves out without a word what the caller may not read): ARM
    /// names a scope it may not read (403: grant Reader) or confirms it empty in a call or two; a
    /// scope where ARM finds what Resource Graph did not show is noted as a fallback.
    async fn with_unseen(
        &self,
        listing: GraphListing,
        key: &str,
        infra_id: &str,
        pages: &(dyn Fn(usize) + Sync),
    ) -> (Listing, Vec<String>) {
        let mut found: Vec<_> = listing.found.into_iter().map(|(r, tags)| (r, Some(tags))).collect();
        let (mut failed, mut notes) = (Vec::new(), Vec::new());
        for scope in listing.unseen {
            let before = found.len();
            let (arm_found, errors) = self.arm_listing(std::slice::from_ref(&scope), key, &|n| pages(before + n)).await;
            if !arm_found.is_empty() {
                notes.push(format!(
                    "Resource Graph showed none of cluster {infra_id}'s {} owned resources in {scope} (it leaves out what the identity may not read: grant Reader there); they were listed through ARM's Resources - List, which costs a read per owned resource",
                    arm_found.len()
                ));
            }
            found.extend(arm_found);
            failed.extend(errors);
        }
        ((found, failed), notes)
    }

    /// ARM's tag-filtered listing of `scopes`, which carries no tags: each resource is read
    /// before it is planned. A scope that cannot be listed is named; the others are still swept.
    async fn arm_listing(&self, scopes: &[String], key: &str, pages: &(dyn Fn(usize) + Sync)) -> Listing {
        let (mut found, mut failed) = (Vec::new(), Vec::new());
        for scope in scopes {
            match self.arm.list_owned(scope, key).await {
                Ok(listed) => found.extend(listed.into_iter().map(|r| (r, None))),
                Err(e) => failed.push(e),
            }
            pages(found.len());
        }
        (found, failed)
    }
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

    async fn list_owned(&self, infra_id: &str, pages: &(dyn Fn(usize) + Sync)) -> Listing {
        self.list_owned_noting(infra_id, pages).await.0
    }

    /// Resource Graph's listing, tags included; ARM's where Resource Graph refuses (noted, for the
    /// sweep to report). Resource Graph throttled beyond the wait budget, failing or unreachable
    /// fails the listing, retryably, instead: ARM's listing would spend a read per owned resource
    /// of the subscription's ARM budget, which its owner's deployments share (`super::resource_graph`).
    async fn list_owned_noting(&self, infra_id: &str, pages: &(dyn Fn(usize) + Sync)) -> (Listing, Vec<String>) {
        let key = Cloud::Azure.ownership_key(infra_id);
        if !self.resource_graph {
            return (self.arm_listing(&self.sweep_scopes, &key, pages).await, Vec::new());
        }
        let refused = match Scopes::parse(&self.sweep_scopes) {
            Ok(scopes) => match self.arm.graph_owned(&scopes, &key, pages).await {
                Ok(listing) => return self.with_unseen(listing, &key, infra_id, pages).await,
                Err(GraphError::Failed(e)) => return ((Vec::new(), vec![e]), Vec::new()),
                Err(GraphError::Refused(e)) => e.to_string(),
            },
            Err(why) => why,
        };
        let why = format!(
            "Resource Graph refused the owned listing of cluster {infra_id} ({refused}); listed through ARM's Resources - List instead, which costs a read per owned resource"
        );
        (self.arm_listing(&self.sweep_scopes, &key, pages).await, vec![why])
    }

    /// Every write is re-read and re-planned right before it is sent: a sweep's listed tags are
    /// Resource Graph's, which lag ARM's, so a resource that appears drifted is read through the
    /// Tags API first (its ownership tag may have been removed since; then nothing is written).
    /// The resources that appear in line cost no read: a stale view of them can only defer a
    /// correction to the next event or sweep, since a Merge never removes a tag. (Outside a sweep
    /// nothing reads this: events carry no tag sets that replace.)
    fn batching(&self, _r: &ResourceRef) -> Batching<Infallible> {
        Batching::Reread
    }
}
