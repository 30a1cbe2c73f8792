//! How AWS finds what a cluster owns, for the sweep (`tagwarden_engine::enforce::sweep`): the Resource
//! Groups Tagging API (`GetResources` filtered on the ownership tag) lists every resource of
//! nearly every service with its tags; beside it, the listings that API cannot see, made once for
//! all clusters: ELBv2 listeners and rules of the owned load balancers, Route 53 (global) and IAM.
//!
//! The Tagging API's listing itself is `super::services::tagging`'s: a descriptor whose `list` is
//! `tag:GetResources` needs nothing here.
//!
//! Deliberately not here: which API tags which kind (`tagwarden_core::services`), the planning, batching
//! and writing of what is found (`tagwarden_engine::enforce::sweep`).

use futures_util::stream::{self, StreamExt};

use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::enforce::sweep::Unindexed;

/// IAM entities listed without their tags, read at once.
const IAM_READS: usize = 4;

impl Tagger {
    /// ELBv2 listeners and rules of the owned load balancers, Route 53 and IAM, with their tags
    /// (an IAM entity listed without them is read); an entity deleted between its listing and its
    /// read is gone, one that could not be read for another reason is returned with its error. Each
    /// of the three listings fails alone: the others are still swept.
    pub(super) async fn unindexed(&self, owned: &[(ResourceRef, Option<TagMap>)]) -> Unindexed {
        let lbs: Vec<&str> = owned
            .iter()
            .filter(|(r, _)| r.kind == "elasticloadbalancing:loadbalancer")
            .map(|(r, _)| r.id.as_str())
            .collect();
        let mut beside = Unindexed::default();
        let keep = |listed: Result<Vec<(ResourceRef, TagMap)>, CloudError>, beside: &mut Unindexed| match listed {
            Ok(found) => beside.found.extend(found),
            Err(e) => beside.failed.push(e),
        };
        keep(self.list_elbv2_children(&lbs).await, &mut beside);
        if !self.global {
            return beside;
        }
        keep(self.list_route53().await, &mut beside);
        let iam = match self.list_iam().await {
            Ok(iam) => iam,
            Err(e) => {
                beside.failed.push(e);
                Vec::new()
            }
        };
        let reads = stream::iter(iam)
            .map(|(r, listed)| async move {
                let read = match listed {
                    Some(tags) => Ok(tags),
                    // Listed a moment ago: not-found means deleted, not "not visible yet".
                    None => self.read_once(&r).await.map(|(tags, _)| tags),
                };
                (r, read)
            })
            .buffer_unordered(IAM_READS)
            .collect::<Vec<_>>()
            .await;
        for (r, read) in reads {
            match read {
                Ok(tags) => beside.found.push((r, tags)),
                Err(e) if e.class == ErrorClass::NotFound => {}
                Err(e) => beside.unreadable.push((r, e)),
            }
        }
        beside
    }
}
