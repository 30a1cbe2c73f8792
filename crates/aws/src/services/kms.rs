//! KMS keys: `ListResourceTags` / `TagResource` (AWS KMS API Reference), addressed by key ARN.
//! Its descriptor is `tagwarden_core::services::SERVICES`' `kms:key`.

use aws_sdk_kms::types::Tag;

use super::build_error;
use super::limits::KMS_TAGS_PAGE;
use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::KMS;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;

/// Every page ([`KMS_TAGS_PAGE`]: one in practice).
pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let kms = &t.clients.kms;
    let tags =
        kms.list_resource_tags().key_id(&r.id).limit(KMS_TAGS_PAGE).into_paginator().items().send().try_collect().await;
    let tags = tags.map_err(|e| crate::error::from_sdk(KMS.read, &r.id, e))?;
    Ok(tags.iter().map(|t| (t.tag_key().to_string(), t.tag_value().to_string())).collect())
}

/// `TagResource` adds or overwrites the keys it names and leaves the others.
pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let tags = set
        .iter()
        .map(|(k, v)| Tag::builder().tag_key(k).tag_value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| build_error(KMS.write, &r.id, e))?;
    t.clients
        .kms
        .tag_resource()
        .key_id(&r.id)
        .set_tags(Some(tags))
        .send()
        .await
        .map(drop)
        .map_err(|e| crate::error::from_sdk(KMS.write, &r.id, e))
}
