//! S3 buckets: `GetBucketTagging` / read-merge-`PutBucketTagging`. Its descriptor is
//! `crate::services::SERVICES`' `s3:bucket`.

use aws_sdk_s3::error::ProvideErrorMetadata;

use super::build_error;
use crate::aws::tags::Tagger;
use crate::cloud_error::CloudError;
use crate::resource::ResourceRef;
use crate::services::S3;
use crate::TagMap;

/// A bucket without tags answers `NoSuchTagSet`: no tags, not an error.
pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    match t.clients.s3.get_bucket_tagging().bucket(&r.id).send().await {
        Ok(out) => Ok(out.tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect()),
        Err(e) if e.code() == Some("NoSuchTagSet") => Ok(TagMap::new()),
        Err(e) => Err(CloudError::from_sdk(S3.read, &r.id, e)),
    }
}

/// Read-merge-write: every tag on the bucket is sent back, `current` being a read made right
/// before (callers re-read; the sweep never passes its listing). That includes `aws:` system
/// tags (CloudFormation's, CDK's): S3 refuses a PUT without them ("System Tags cannot be
/// removed by requester") and refuses any `aws:` key it does not hold already. On
/// `OperationAborted` (a concurrent change to the bucket) the set is re-read and merged again.
pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
    let bucket = r.id.as_str();
    let aborted = |e: &CloudError| e.code == "OperationAborted";
    let put = |attempt| async move {
        let base = if attempt == 0 { current.clone() } else { read(t, r).await? };
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
        let sent = t.clients.s3.put_bucket_tagging().bucket(bucket).tagging(tagging).send().await;
        sent.map(drop).map_err(|e| CloudError::from_sdk(S3.write, bucket, e))
    };
    t.not_found.retry(aborted, put).await
}
