//! SNS topics: `ListTagsForResource` / `TagResource` (Amazon SNS API Reference), addressed by topic
//! ARN. Its descriptor is `tagwarden_core::services::SERVICES`' `sns:topic`.

use aws_sdk_sns::types::Tag;

use super::build_error;
use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::SNS;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;

/// One call: `ListTagsForResource` has no paging (a topic holds at most 50 tags).
pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let out = t.clients.sns.list_tags_for_resource().resource_arn(&r.id).send().await;
    let out = out.map_err(|e| crate::error::from_sdk(SNS.read, &r.id, e))?;
    Ok(out.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect())
}

/// `TagResource` adds or overwrites the keys it names and leaves the others.
pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    let tags = set
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| build_error(SNS.write, &r.id, e))?;
    t.clients
        .sns
        .tag_resource()
        .resource_arn(&r.id)
        .set_tags(Some(tags))
        .send()
        .await
        .map(drop)
        .map_err(|e| crate::error::from_sdk(SNS.write, &r.id, e))
}
