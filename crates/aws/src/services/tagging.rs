//! The Resource Groups Tagging API: the generic path for every kind no other descriptor names
//! (`tagwarden_core::services::TAGGING`), `TagResources` for up to 20 ARNs sharing one delta, and the
//! sweep's listing of everything a cluster's ownership tag marks.

use super::limits::{TAGGING_RESOURCES_PAGE, TAGGING_TAGS_PAGE};
use crate::Tagger;
use tagwarden_core::cloud::OWNED;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::TAGGING;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;

/// `GetResources` answers only for resources that carry (or once carried) tags: an absent ARN
/// reads as untagged, hence not owned.
pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let arn = r.arn.as_deref().unwrap_or(&r.id);
    let out = t
        .clients
        .tagging
        .get_resources()
        .resource_arn_list(arn)
        .send()
        .await
        .map_err(|e| crate::error::from_sdk(TAGGING.read, &r.id, e))?;
    let tags = out.resource_tag_mapping_list().iter().flat_map(|m| m.tags());
    Ok(tags.map(|t| (t.key().to_string(), t.value().to_string())).collect())
}

pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let arn = r.arn.as_deref().unwrap_or(&r.id);
    match t.tag_resources(&[arn], set).await?.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// One `TagResources` for several resources sharing one delta, and the ones it refused, by position.
pub(super) async fn write_shared(
    t: &Tagger,
    resources: &[&ResourceRef],
    set: &TagMap,
) -> Result<Vec<(usize, CloudError)>, CloudError> {
    let arns: Vec<&str> = resources.iter().map(|r| r.arn.as_deref().unwrap_or(&r.id)).collect();
    let failed = t.tag_resources(&arns, set).await?;
    Ok(failed.into_iter().filter_map(|(a, e)| arns.iter().position(|x| *x == a).map(|at| (at, e))).collect())
}

impl Tagger {
    /// One `TagResources` for up to 20 ARNs sharing one delta. The call succeeds as a whole even
    /// when some resources fail: each ARN of its `FailedResourcesMap` is returned with its error.
    pub async fn tag_resources(&self, arns: &[&str], set: &TagMap) -> Result<Vec<(String, CloudError)>, CloudError> {
        let out = self
            .clients
            .tagging
            .tag_resources()
            .set_resource_arn_list(Some(arns.iter().map(|s| s.to_string()).collect()))
            .set_tags(Some(set.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
            .send()
            .await
            .map_err(|e| crate::error::from_sdk(TAGGING.write, &super::batch_name(arns), e))?;
        let failed = out.failed_resources_map().into_iter().flatten();
        Ok(failed
            .map(|(arn, info)| {
                let code = info.error_code().map(|c| c.as_str().to_string()).unwrap_or_else(|| "Unknown".into());
                let message = info.error_message().unwrap_or_default();
                let class = crate::error::classify_tagging_failure(&code, message, Some(info.status_code()));
                (arn.clone(), CloudError::aws(TAGGING.write, arn, &code, message, class))
            })
            .collect())
    }
    /// Every resource the Tagging API lists with `owner_key=owned`, with its tags; a listing
    /// that fails part-way keeps the pages it read and names its error.
    pub(crate) async fn tagged(
        &self,
        owner_key: &str,
        pages: &(dyn Fn(usize) + Sync),
    ) -> (Vec<(ResourceRef, TagMap)>, Option<CloudError>) {
        let c = &self.clients;
        let mut found = Vec::new();
        let listing = c
            .tagging
            .get_resources()
            .tag_filters(
                aws_sdk_resourcegroupstagging::types::TagFilter::builder().key(owner_key).values(OWNED).build(),
            )
            .resources_per_page(TAGGING_RESOURCES_PAGE)
            .tags_per_page(TAGGING_TAGS_PAGE);
        let mut stream = listing.into_paginator().send();
        while let Some(page) = stream.next().await {
            let page = match page {
                Ok(page) => page,
                Err(e) => return (found, Some(crate::error::from_sdk(TAGGING.read, owner_key, e))),
            };
            for m in page.resource_tag_mapping_list() {
                let Some(r) = m.resource_arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                let tags = m.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
                found.push((r, tags));
            }
            pages(found.len());
        }
        (found, None)
    }
}
