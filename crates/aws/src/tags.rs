//! The AWS adapter's reads and writes of one resource's tags (docs/src/design/architecture.md): each goes to the
//! API its descriptor in `tagwarden_core::services` names, through that service's file in
//! `super::services`. Nothing here deletes a tag.
//!
//! A resource may not be visible yet right after its creation event: reads retry `NotFound`
//! with bounded exponential backoff, then give up with a retryable error so the event goes back
//! to the queue (and finally to the dead-letter queue) instead of being dropped.
//!
//! Deliberately not here: deciding what to write (`tagwarden_core::plan`), ownership (`tagwarden_core::cloud`), and
//! which kind goes through which API and batch (`tagwarden_core::services`).

use super::{services, Tagger};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

impl Tagger {
    /// The resource's current tags, waiting out eventual consistency.
    pub async fn read(&self, r: &ResourceRef) -> Result<TagMap, CloudError> {
        self.read_full(r).await.map(|(tags, _)| tags)
    }

    /// The current tags and, where the read says it (IAM roles and users), the resource's real
    /// ARN: IAM `Tag*` events name a role or user without its path, and overrides match the ARN.
    pub async fn read_full(&self, r: &ResourceRef) -> Result<(TagMap, Option<String>), CloudError> {
        self.not_found.retry(|e: &CloudError| e.class == ErrorClass::NotFound, |_| self.read_once(r)).await
    }

    /// One read, without waiting for a resource not visible yet.
    pub async fn read_once(&self, r: &ResourceRef) -> Result<(TagMap, Option<String>), CloudError> {
        services::read(self, tagwarden_core::services::of(r).api, r).await
    }

    /// Write `set` on the resource in one call. `current` is the tag set the plan was made from;
    /// S3 needs it because `PutBucketTagging` replaces the whole set.
    pub async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        services::write(self, tagwarden_core::services::of(r).api, r, set, current).await
    }
}
