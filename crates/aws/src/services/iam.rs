//! IAM roles, users, instance profiles, customer managed policies and OIDC providers: IAM's own
//! `Get*` / `List*Tags` and `Tag*` calls (the Tagging API does not cover IAM), and their listing.
//! Their descriptors are `tagwarden_core::services::SERVICES`' `iam:*` rows. Each entity type is spelled out:
//! the SDK builders share no trait, and tests/iam_policy.rs derives the role's grants from these
//! very calls, which a macro would hide.

use aws_sdk_iam::types::Tag;

use super::limits::IAM_PAGE;
use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::{IAM_INSTANCE_PROFILE, IAM_OIDC_PROVIDER, IAM_POLICY, IAM_ROLE, IAM_USER};
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;

/// A read's tags and the entity's ARN with its path: IAM `Tag*` events name a role or user
/// without it, and overrides match the ARN.
type WithArn = (TagMap, Option<String>);

fn pair(t: &Tag) -> (String, String) {
    (t.key().to_string(), t.value().to_string())
}

fn tags(id: &str, set: &TagMap) -> Result<Vec<Tag>, CloudError> {
    set.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect::<Result<_, _>>()
        .map_err(|e| super::build_error("iam:Tag", id, e))
}

/// `GetRole` carries every tag (at most 50) and the ARN with its path, in one call.
pub(super) async fn read_role(t: &Tagger, r: &ResourceRef) -> Result<WithArn, CloudError> {
    let out = t.clients.iam.get_role().role_name(&r.id).send().await;
    let out = out.map_err(|e| crate::error::from_sdk(IAM_ROLE.read, &r.id, e))?;
    let role = out.role();
    Ok((role.map(|r| r.tags().iter().map(pair).collect()).unwrap_or_default(), role.map(|r| r.arn().to_string())))
}

pub(super) async fn read_user(t: &Tagger, r: &ResourceRef) -> Result<WithArn, CloudError> {
    let out = t.clients.iam.get_user().user_name(&r.id).send().await;
    let out = out.map_err(|e| crate::error::from_sdk(IAM_USER.read, &r.id, e))?;
    let user = out.user();
    Ok((user.map(|u| u.tags().iter().map(pair).collect()).unwrap_or_default(), user.map(|u| u.arn().to_string())))
}

pub(super) async fn read_instance_profile(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let (iam, id) = (&t.clients.iam, r.id.as_str());
    let tags =
        iam.list_instance_profile_tags().instance_profile_name(id).into_paginator().items().send().try_collect().await;
    let tags = tags.map_err(|e| crate::error::from_sdk(IAM_INSTANCE_PROFILE.read, id, e))?;
    Ok(tags.iter().map(pair).collect())
}

pub(super) async fn read_policy(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let (iam, id) = (&t.clients.iam, r.id.as_str());
    let tags = iam.list_policy_tags().policy_arn(id).into_paginator().items().send().try_collect().await;
    let tags = tags.map_err(|e| crate::error::from_sdk(IAM_POLICY.read, id, e))?;
    Ok(tags.iter().map(pair).collect())
}

pub(super) async fn read_oidc_provider(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let (iam, id) = (&t.clients.iam, r.id.as_str());
    let pages = iam.list_open_id_connect_provider_tags().open_id_connect_provider_arn(id).into_paginator();
    let tags = pages.items().send().try_collect().await;
    let tags = tags.map_err(|e| crate::error::from_sdk(IAM_OIDC_PROVIDER.read, id, e))?;
    Ok(tags.iter().map(pair).collect())
}

pub(super) async fn write_role(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let call = t.clients.iam.tag_role().role_name(&r.id).set_tags(Some(tags(&r.id, set)?));
    call.send().await.map(drop).map_err(|e| crate::error::from_sdk(IAM_ROLE.write, &r.id, e))
}

pub(super) async fn write_user(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let call = t.clients.iam.tag_user().user_name(&r.id).set_tags(Some(tags(&r.id, set)?));
    call.send().await.map(drop).map_err(|e| crate::error::from_sdk(IAM_USER.write, &r.id, e))
}

pub(super) async fn write_instance_profile(
    t: &Tagger,
    r: &ResourceRef,
    set: &TagMap,
    _: &TagMap,
) -> Result<(), CloudError> {
    let call = t.clients.iam.tag_instance_profile().instance_profile_name(&r.id).set_tags(Some(tags(&r.id, set)?));
    call.send().await.map(drop).map_err(|e| crate::error::from_sdk(IAM_INSTANCE_PROFILE.write, &r.id, e))
}

pub(super) async fn write_policy(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let call = t.clients.iam.tag_policy().policy_arn(&r.id).set_tags(Some(tags(&r.id, set)?));
    call.send().await.map(drop).map_err(|e| crate::error::from_sdk(IAM_POLICY.write, &r.id, e))
}

pub(super) async fn write_oidc_provider(
    t: &Tagger,
    r: &ResourceRef,
    set: &TagMap,
    _: &TagMap,
) -> Result<(), CloudError> {
    let call = t
        .clients
        .iam
        .tag_open_id_connect_provider()
        .open_id_connect_provider_arn(&r.id)
        .set_tags(Some(tags(&r.id, set)?));
    call.send().await.map(drop).map_err(|e| crate::error::from_sdk(IAM_OIDC_PROVIDER.write, &r.id, e))
}

impl Tagger {
    /// IAM entities of every kind tagwarden enforces, with their tags where one listing carries
    /// them. `GetAccountAuthorizationDetails` returns roles and users with their tags (and the
    /// instance profiles attached to the roles, with theirs), up to [`IAM_PAGE`] entities a page: one
    /// call where `ListRoles`/`ListUsers` plus a `ListRoleTags`/`ListUserTags` per entity took
    /// one per entity — those listings return no tags. Instance profiles attached to no role,
    /// customer managed policies and OIDC providers are listed bare and read one by one.
    pub async fn list_iam(&self) -> Result<Vec<(ResourceRef, Option<TagMap>)>, CloudError> {
        use aws_sdk_iam::types::EntityType;
        let iam = &self.clients.iam;
        let owned = |arn: Option<&str>, tags: &[Tag]| {
            Some((ResourceRef::from_arn(arn?).ok()?, Some(tags.iter().map(pair).collect::<TagMap>())))
        };
        let details = iam.get_account_authorization_details().filter(EntityType::Role).filter(EntityType::User);
        let pages = details.max_items(IAM_PAGE).into_paginator().send().try_collect().await;
        let pages = pages.map_err(|e| crate::error::from_sdk("iam:GetAccountAuthorizationDetails", "*", e))?;
        let mut detailed = Vec::new();
        for page in &pages {
            for role in page.role_detail_list() {
                detailed.extend(owned(role.arn(), role.tags()));
                detailed.extend(role.instance_profile_list().iter().filter_map(|p| owned(Some(p.arn()), p.tags())));
            }
            detailed.extend(page.user_detail_list().iter().filter_map(|u| owned(u.arn(), u.tags())));
        }
        // A profile attached to several roles comes with each.
        let mut out: Vec<(ResourceRef, Option<TagMap>)> = Vec::new();
        for (r, tags) in detailed {
            if !out.iter().any(|(o, _)| o.arn == r.arn) {
                out.push((r, tags));
            }
        }
        let profiles =
            iam.list_instance_profiles().max_items(IAM_PAGE).into_paginator().items().send().try_collect().await;
        let profiles = profiles.map_err(|e| crate::error::from_sdk("iam:ListInstanceProfiles", "*", e))?;
        let mut bare: Vec<ResourceRef> = profiles.iter().filter_map(|p| ResourceRef::from_arn(p.arn()).ok()).collect();
        let local = aws_sdk_iam::types::PolicyScopeType::Local;
        let policies =
            iam.list_policies().scope(local).max_items(IAM_PAGE).into_paginator().items().send().try_collect().await;
        let policies = policies.map_err(|e| crate::error::from_sdk("iam:ListPolicies", "*", e))?;
        bare.extend(policies.iter().filter_map(|p| ResourceRef::from_arn(p.arn()?).ok()));
        let providers = iam
            .list_open_id_connect_providers()
            .send()
            .await
            .map_err(|e| crate::error::from_sdk("iam:ListOpenIDConnectProviders", "*", e))?;
        bare.extend(
            providers
                .open_id_connect_provider_list()
                .iter()
                .filter_map(|p| p.arn().and_then(|a| ResourceRef::from_arn(a).ok())),
        );
        // Attached instance profiles came with their tags already.
        bare.retain(|b| !out.iter().any(|(o, _)| o.arn == b.arn));
        out.extend(bare.into_iter().map(|r| (r, None)));
        Ok(out)
    }
}
