//! Route 53 hosted zones and health checks: `ListTagsForResource` / `ChangeTagsForResource`, and
//! their listing. Route 53 is global. Its descriptor is `tagwarden_core::services::SERVICES`' `route53:*`.

use super::arn_name;
use super::limits::ROUTE53_PER_CALL;
use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::ROUTE53;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;

/// The Route 53 resource type and id an ARN (`arn:aws:route53:::hostedzone/Z…`) names.
fn target(r: &ResourceRef) -> (aws_sdk_route53::types::TagResourceType, &str) {
    let arn = r.arn.as_deref().unwrap_or(&r.id);
    let rtype = if r.kind == "route53:healthcheck" {
        aws_sdk_route53::types::TagResourceType::Healthcheck
    } else {
        aws_sdk_route53::types::TagResourceType::Hostedzone
    };
    (rtype, arn_name(arn))
}

pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let (rtype, zone) = target(r);
    let out = t
        .clients
        .route53
        .list_tags_for_resource()
        .resource_type(rtype)
        .resource_id(zone)
        .send()
        .await
        .map_err(|e| crate::error::from_sdk(ROUTE53.read, &r.id, e))?;
    let tags = out.resource_tag_set().map(|s| s.tags()).unwrap_or_default();
    Ok(tags
        .iter()
        .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()))
        .collect())
}

pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let (rtype, zone) = target(r);
    let tags: Vec<_> =
        set.iter().map(|(k, v)| aws_sdk_route53::types::Tag::builder().key(k).value(v).build()).collect();
    for chunk in tags.chunks(ROUTE53_PER_CALL) {
        t.clients
            .route53
            .change_tags_for_resource()
            .resource_type(rtype.clone())
            .resource_id(zone)
            .set_add_tags(Some(chunk.to_vec()))
            .send()
            .await
            .map_err(|e| crate::error::from_sdk(ROUTE53.write, &r.id, e))?;
    }
    Ok(())
}

impl Tagger {
    /// Route 53 hosted zones and health checks with their tags. Route 53 is global, and the
    /// emulator's Tagging API does not list it: its own listings (100 a page) and
    /// `ListTagsForResources` (10 ids a call) see them from any region.
    pub async fn list_route53(&self) -> Result<Vec<(ResourceRef, TagMap)>, CloudError> {
        use aws_sdk_route53::types::TagResourceType;
        let route53 = &self.clients.route53;
        let partition = tagwarden_core::resource::partition(&self.clients.region);
        let zones = route53.list_hosted_zones().into_paginator().items().send().try_collect().await;
        let zones = zones.map_err(|e| crate::error::from_sdk("route53:ListHostedZones", "*", e))?;
        let zones = zones.iter().map(|z| z.id().trim_start_matches("/hostedzone/").to_string()).collect::<Vec<_>>();
        let checks = route53.list_health_checks().into_paginator().items().send().try_collect().await;
        let checks = checks.map_err(|e| crate::error::from_sdk("route53:ListHealthChecks", "*", e))?;
        let checks = checks.iter().map(|h| h.id().to_string()).collect::<Vec<_>>();
        let mut out = Vec::new();
        for (ids, rtype, kind) in
            [(zones, TagResourceType::Hostedzone, "hostedzone"), (checks, TagResourceType::Healthcheck, "healthcheck")]
        {
            for chunk in ids.chunks(ROUTE53_PER_CALL) {
                let page = route53
                    .list_tags_for_resources()
                    .resource_type(rtype.clone())
                    .set_resource_ids(Some(chunk.to_vec()))
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("route53:ListTagsForResources", kind, e))?;
                for set in page.resource_tag_sets() {
                    let Some(id) = set.resource_id() else { continue };
                    let arn = format!("arn:{partition}:route53:::{kind}/{id}");
                    let tags = set
                        .tags()
                        .iter()
                        .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()));
                    if let Ok(r) = ResourceRef::from_arn(&arn) {
                        out.push((r, tags.collect()));
                    }
                }
            }
        }
        Ok(out)
    }
}
