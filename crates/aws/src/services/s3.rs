//! S3 buckets: `GetBucketTagging` / read-merge-`PutBucketTagging`. Its descriptor is
//! `tagwarden_core::services::SERVICES`' `s3:bucket`.
//!
//! `PutBucketTagging` replaces the whole set and is not conditional: S3's conditional writes
//! (`If-Match`, `If-None-Match`) are for object writes only (S3 User Guide, "How to prevent object
//! overwrites with conditional writes": `PutObject`, `CompleteMultipartUpload`), and the
//! `PutBucketTagging` API reference names no precondition header. What the account can be made
//! sure of is the bucket's owner: `ExpectedBucketOwner` ("If the account ID that you provide does
//! not match the actual owner of the bucket, the request fails with the HTTP status code 403
//! Forbidden", `GetBucketTagging` / `PutBucketTagging` API reference), sent when the account is
//! known (`Tagger::account`), so a same-named bucket of another account is never read or written.
//!
//! So a tag another writer changes between a read and the put would be silently restored or
//! dropped. The write narrows that and makes what is left visible:
//! - the set is read again right before the put and merged on that read, not on the plan's; if a
//!   bucket's ownership tags changed since the plan, nothing is written and the error asks for a
//!   new plan (a retryable failure: the event or the sweep comes back and plans again);
//! - after the put the set is read again: if it is not what was put, another writer replaced it
//!   meanwhile, and the desired keys are merged into what is there now and put again, through
//!   the tagger's not-found backoff (`tagwarden_engine::retry::Backoff::NOT_FOUND`: 6 attempts; as for
//!   `OperationAborted`, S3's own concurrent-change answer);
//! - what no read can see — another writer's put landing between the last read and ours, which
//!   ours replaces — is left to the event of that put (`tagwarden_core::events::cloudtrail` carries the tag
//!   set it asked for; `tagwarden_engine::enforce` compares it with the bucket's and records the keys lost,
//!   naming the caller).

use aws_sdk_s3::error::ProvideErrorMetadata;

use super::build_error;
use crate::Tagger;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::S3;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// A bucket without tags answers `NoSuchTagSet`: no tags, not an error.
pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let get = t.clients.s3.get_bucket_tagging().bucket(&r.id).set_expected_bucket_owner(t.account.clone());
    match get.send().await {
        Ok(out) => Ok(out.tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect()),
        Err(e) if e.code() == Some("NoSuchTagSet") => Ok(TagMap::new()),
        Err(e) => Err(crate::error::from_sdk(S3.read, &r.id, e)),
    }
}

/// The code of the error that asks for the write to be tried again on a fresh read.
const CONCURRENT: &str = "ConcurrentTagChange";

/// Read-merge-write-verify (see the module): every tag on the bucket is sent back, including
/// `aws:` system tags (CloudFormation's, CDK's): S3 refuses a PUT without them ("System Tags
/// cannot be removed by requester") and refuses any `aws:` key it does not hold already.
/// `current` is the set the plan was made from.
pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
    let bucket = r.id.as_str();
    let again = |e: &CloudError| e.code == "OperationAborted" || e.code == CONCURRENT;
    let put = |_| async move {
        let base = read(t, r).await?;
        if ownership(&base) != ownership(current) {
            let why = "its ownership tags changed since the plan was made; plan it again from a fresh read";
            return Err(CloudError::aws(S3.write, bucket, "OwnershipChanged", why, ErrorClass::Transient));
        }
        let merged: TagMap = base.into_iter().chain(set.iter().map(|(k, v)| (k.clone(), v.clone()))).collect();
        let tags = merged
            .iter()
            .map(|(k, v)| aws_sdk_s3::types::Tag::builder().key(k).value(v).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| build_error(S3.write, bucket, e))?;
        let tagging = aws_sdk_s3::types::Tagging::builder()
            .set_tag_set(Some(tags))
            .build()
            .map_err(|e| build_error(S3.write, bucket, e))?;
        let put = t.clients.s3.put_bucket_tagging().bucket(bucket).set_expected_bucket_owner(t.account.clone());
        put.tagging(tagging).send().await.map_err(|e| crate::error::from_sdk(S3.write, bucket, e))?;
        let after = read(t, r).await?;
        if after == merged {
            return Ok(());
        }
        // Replaced meanwhile by another writer: merge into what is there now, never dropping it.
        let changed: Vec<&String> =
            merged.keys().chain(after.keys()).filter(|k| merged.get(*k) != after.get(*k)).collect();
        let why =
            format!("another writer replaced the tag set right after this write (keys {changed:?}); merging again");
        tracing::warn!(bucket, "{why}");
        Err(CloudError::aws(S3.write, bucket, CONCURRENT, &why, ErrorClass::Transient))
    };
    t.not_found.retry(again, put).await
}

/// The ownership tags of a tag set (any cluster's, any case).
fn ownership(tags: &TagMap) -> Vec<(&String, &String)> {
    tags.iter().filter(|(k, _)| Cloud::Aws.is_ownership_key(k)).collect()
}
