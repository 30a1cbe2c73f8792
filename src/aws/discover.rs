//! How AWS finds what a cluster owns, for the sweep (`crate::enforce::sweep`): the Resource
//! Groups Tagging API (`GetResources` filtered on the ownership tag) lists every resource of
//! nearly every service with its tags; beside it, the listings that API cannot see, made once for
//! all clusters: ELBv2 listeners and rules of the owned load balancers, Route 53 (global) and IAM.
//!
//! Deliberately not here: which API tags which kind (`super::kinds`), the planning, batching and
//! writing of what is found (`crate::enforce::sweep`).

use futures_util::stream::{self, StreamExt};

use super::tags::Tagger;
use crate::cloud::{Cloud, OWNED};
use crate::cloud_error::{CloudError, ErrorClass};
use crate::enforce::sweep::Unindexed;
use crate::resource::ResourceRef;
use crate::TagMap;

/// IAM entities listed without their tags, read at once.
const IAM_READS: usize = 4;

impl Tagger {
    /// Every resource the Tagging API lists with cluster `infra_id`'s ownership tag, with its tags;
    /// a listing that fails part-way keeps the pages it read and names its error.
    pub(super) async fn tagged(
        &self,
        infra_id: &str,
        pages: &(dyn Fn(usize) + Sync),
    ) -> (Vec<(ResourceRef, TagMap)>, Option<CloudError>) {
        let c = &self.clients;
        let owner_key = Cloud::Aws.ownership_key(infra_id);
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = match c
                .tagging
                .get_resources()
                .tag_filters(
                    aws_sdk_resourcegroupstagging::types::TagFilter::builder().key(&owner_key).values(OWNED).build(),
                )
                // Pages hold at most 100 resources and, by a default moto applies (100 tags) and
                // AWS documents no default for, fewer when each carries many tags: every tag
                // tagwarden adds made the next sweep's listing longer. The documented maximum of
                // 500 tags keeps a page at 100 resources of up to 5 tags (AWS API Reference,
                // GetResources: TagsPerPage 100–500, a resource never split across pages).
                .resources_per_page(100)
                .tags_per_page(500)
                .set_pagination_token(token.clone())
                .send()
                .await
            {
                Ok(page) => page,
                Err(e) => return (found, Some(CloudError::from_sdk("tag:GetResources", &owner_key, e))),
            };
            for m in page.resource_tag_mapping_list() {
                let Some(r) = m.resource_arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                let tags = m.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
                found.push((r, tags));
            }
            pages(found.len());
            token = page.pagination_token().filter(|t| !t.is_empty()).map(str::to_owned);
            if token.is_none() {
                return (found, None);
            }
        }
    }

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
