//! Elastic Load Balancing: ELBv2 (`DescribeTags` / `AddTags`, one ARN per `AddTags`, as the service
//! enforces) and Classic load balancers (the same calls of the 2012-06-01 API, by name), and the
//! listing of ELBv2 listeners and rules. Their descriptors are `tagwarden_core::services::SERVICES`'
//! `elasticloadbalancing:*` and `elasticloadbalancing:classic-loadbalancer`.

use super::{arn_name, build_error};
use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::{ELBV2, ELB_CLASSIC};
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;

/// ELBv2 `DescribeTags` names at most 20 resources.
const ELBV2_DESCRIBE_TAGS_MAX: usize = 20;

pub(super) async fn read_v2(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let out = t
        .clients
        .elbv2
        .describe_tags()
        .resource_arns(&r.id)
        .send()
        .await
        .map_err(|e| crate::error::from_sdk(ELBV2.read, &r.id, e))?;
    let tags = out.tag_descriptions().iter().flat_map(|d| d.tags());
    Ok(tags.map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())).collect())
}

pub(super) async fn write_v2(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let tags = set.iter().map(|(k, v)| aws_sdk_elasticloadbalancingv2::types::Tag::builder().key(k).value(v).build());
    t.clients
        .elbv2
        .add_tags()
        .resource_arns(&r.id)
        .set_tags(Some(tags.collect()))
        .send()
        .await
        .map(drop)
        .map_err(|e| crate::error::from_sdk(ELBV2.write, &r.id, e))
}

pub(super) async fn read_classic(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let out = t
        .clients
        .elb
        .describe_tags()
        .load_balancer_names(arn_name(&r.id))
        .send()
        .await
        .map_err(|e| crate::error::from_sdk(ELB_CLASSIC.read, &r.id, e))?;
    let tags = out.tag_descriptions().iter().flat_map(|d| d.tags());
    Ok(tags.map(|t| (t.key().to_string(), t.value().unwrap_or_default().to_string())).collect())
}

pub(super) async fn write_classic(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let tags = set
        .iter()
        .map(|(k, v)| aws_sdk_elasticloadbalancing::types::Tag::builder().key(k).value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| build_error(ELB_CLASSIC.write, &r.id, e))?;
    t.clients
        .elb
        .add_tags()
        .load_balancer_names(arn_name(&r.id))
        .set_tags(Some(tags))
        .send()
        .await
        .map(drop)
        .map_err(|e| crate::error::from_sdk(ELB_CLASSIC.write, &r.id, e))
}

impl Tagger {
    /// The listeners and listener rules of ELBv2 load balancers, with their tags. The Tagging API
    /// lists them on AWS but not in the emulator; one `DescribeListeners` per load balancer, one
    /// `DescribeRules` per listener and one `DescribeTags` per 20 ARNs. Default rules are left out:
    /// they cannot be tagged.
    pub async fn list_elbv2_children(&self, load_balancers: &[&str]) -> Result<Vec<(ResourceRef, TagMap)>, CloudError> {
        let elbv2 = &self.clients.elbv2;
        let mut arns = Vec::new();
        for lb in load_balancers {
            let listeners = elbv2
                .describe_listeners()
                .load_balancer_arn(*lb)
                .send()
                .await
                .map_err(|e| crate::error::from_sdk("elasticloadbalancing:DescribeListeners", lb, e))?;
            for l in listeners.listeners() {
                let Some(listener) = l.listener_arn() else { continue };
                arns.push(listener.to_string());
                let rules = elbv2
                    .describe_rules()
                    .listener_arn(listener)
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("elasticloadbalancing:DescribeRules", listener, e))?;
                arns.extend(
                    rules
                        .rules()
                        .iter()
                        .filter(|r| r.is_default() != Some(true))
                        .filter_map(|r| r.rule_arn())
                        .map(str::to_owned),
                );
            }
        }
        let mut out = Vec::new();
        for chunk in arns.chunks(ELBV2_DESCRIBE_TAGS_MAX) {
            let described = elbv2
                .describe_tags()
                .set_resource_arns(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|e| crate::error::from_sdk(ELB_CLASSIC.read, &chunk[0], e))?;
            for d in described.tag_descriptions() {
                let Some(r) = d.resource_arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                let tags = d
                    .tags()
                    .iter()
                    .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()));
                out.push((r, tags.collect()));
            }
        }
        Ok(out)
    }
}
