//! EC2: `DescribeTags` / `CreateTags`, and the shared calls that read and write many resources at
//! once (a batch's tags, a new instance's volumes). Its descriptor is `tagwarden_core::services::SERVICES`'
//! `ec2:*`.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use super::batch_name;
use super::limits::{EC2_IDS_PER_FILTER, EC2_TAGS_PAGE, EC2_VOLUMES_PAGE};
use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::EC2;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// One resource's tags. `DescribeTags` answers an empty list for an id that does not exist: where
/// eventual consistency matters (nothing found at all, not even ownership) the instance or volume
/// is described too, which says `NotFound` for an id not visible yet.
pub(super) async fn read(t: &Tagger, r: &ResourceRef) -> Result<TagMap, CloudError> {
    let (ec2, id) = (&t.clients.ec2, r.id.as_str());
    let tags = t.ec2_describe_tags_many(&[id]).await?.remove(id).unwrap_or_default();
    if tags.is_empty() {
        match r.kind.as_str() {
            "ec2:instance" => drop(
                ec2.describe_instances()
                    .instance_ids(id)
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("ec2:DescribeInstances", id, e))?,
            ),
            "ec2:volume" => drop(
                ec2.describe_volumes()
                    .volume_ids(id)
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("ec2:DescribeVolumes", id, e))?,
            ),
            _ => {}
        }
    }
    Ok(tags)
}

pub(super) async fn write(t: &Tagger, r: &ResourceRef, set: &TagMap, _: &TagMap) -> Result<(), CloudError> {
    t.ec2_create_tags(&[r.id.as_str()], set).await
}

/// One `CreateTags` for many resources sharing one delta: it succeeds or fails as a whole.
pub(super) async fn write_shared(
    t: &Tagger,
    resources: &[&ResourceRef],
    set: &TagMap,
) -> Result<Vec<(usize, CloudError)>, CloudError> {
    let ids: Vec<&str> = resources.iter().map(|r| r.id.as_str()).collect();
    t.ec2_create_tags(&ids, set).await.map(|()| Vec::new())
}

impl Tagger {
    /// One `CreateTags` for many EC2 resources sharing the same delta (up to `EC2.batch`'s ids).
    pub async fn ec2_create_tags(&self, ids: &[&str], set: &TagMap) -> Result<(), CloudError> {
        if let Some(limit) = &self.ec2_writes {
            limit.acquire().await;
        }
        let tags = set.iter().map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build());
        self.clients
            .ec2
            .create_tags()
            .set_resources(Some(ids.iter().map(|s| s.to_string()).collect()))
            .set_tags(Some(tags.collect()))
            .send()
            .await
            .map(drop)
            .map_err(|e| crate::error::from_sdk(EC2.write, &batch_name(ids), e))
    }

    /// The tags of many EC2 resources in as few `DescribeTags` calls as the filter allows: each
    /// call names up to [`EC2_IDS_PER_FILTER`] ids and pages at [`EC2_TAGS_PAGE`] tags. An id with no tag at
    /// all is absent from the answer (as is one that does not exist yet), so it is left out here:
    /// the caller reads it alone, waiting out eventual consistency.
    pub async fn ec2_describe_tags_many(&self, ids: &[&str]) -> Result<HashMap<String, TagMap>, CloudError> {
        let mut found: HashMap<String, TagMap> = HashMap::new();
        for chunk in ids.chunks(EC2_IDS_PER_FILTER) {
            let (ec2, filter) = (&self.clients.ec2, &ids_filter("resource-id", chunk));
            let pages = ec2.describe_tags().filters(filter.clone()).max_results(EC2_TAGS_PAGE).into_paginator();
            let tags = pages.items().send().try_collect().await;
            let tags = tags.map_err(|e| crate::error::from_sdk(EC2.read, &batch_name(chunk), e))?;
            for t in &tags {
                let (Some(id), Some(key)) = (t.resource_id(), t.key()) else { continue };
                found
                    .entry(id.to_string())
                    .or_default()
                    .insert(key.to_string(), t.value().unwrap_or_default().to_string());
            }
        }
        Ok(found)
    }

    /// The volumes attached to each of many instances, with their tags, in as few
    /// `DescribeVolumes` calls as the filter allows; an instance with none yet is absent.
    pub async fn attached_volumes_many(
        &self,
        instance_ids: &[&str],
    ) -> Result<HashMap<String, Vec<(String, TagMap)>>, CloudError> {
        let mut found: HashMap<String, Vec<(String, TagMap)>> = HashMap::new();
        for chunk in instance_ids.chunks(EC2_IDS_PER_FILTER) {
            let (ec2, filter) = (&self.clients.ec2, &ids_filter("attachment.instance-id", chunk));
            let pages = ec2.describe_volumes().filters(filter.clone()).max_results(EC2_VOLUMES_PAGE).into_paginator();
            let volumes = pages.items().send().try_collect().await;
            let volumes = volumes.map_err(|e| crate::error::from_sdk("ec2:DescribeVolumes", &batch_name(chunk), e))?;
            for v in &volumes {
                let Some(volume) = v.volume_id() else { continue };
                let tags: TagMap = v
                    .tags()
                    .iter()
                    .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()))
                    .collect();
                for instance in v.attachments().iter().filter_map(|a| a.instance_id()) {
                    found.entry(instance.to_string()).or_default().push((volume.to_string(), tags.clone()));
                }
            }
        }
        Ok(found)
    }

    /// The volumes attached to each of many instances, with their tags: `RunInstances` events do
    /// not name them, and `DescribeVolumes` already carries the tags, so no second read is needed.
    /// One shared `DescribeVolumes`; the EBS-backed instances (one shared `DescribeInstances`)
    /// whose volumes are not attached yet are asked again together with the read backoff; after
    /// that the error is retryable, so the event comes back rather than leaving the volumes to the
    /// next sweep. Each instance's volumes, or why they could not be found.
    pub async fn attached_volumes_waiting(
        &self,
        instance_ids: &[&str],
    ) -> HashMap<String, Result<Vec<(String, TagMap)>, CloudError>> {
        let found = Mutex::new(HashMap::new());
        let lock = || found.lock().unwrap_or_else(PoisonError::into_inner);
        let missing = |found: &HashMap<String, _>| -> Vec<&str> {
            instance_ids.iter().copied().filter(|id| !found.contains_key(*id)).collect()
        };
        let not_attached = |e: &CloudError| e.code == NOT_ATTACHED;
        let attempt = |attempt| async move {
            let ask = missing(&lock());
            for (id, volumes) in self.attached_volumes_many(&ask).await? {
                lock().insert(id, Ok(volumes));
            }
            let mut waiting = missing(&lock());
            if attempt == 0 && !waiting.is_empty() {
                // An instance-store root has no volume to wait for.
                let ebs = self.ebs_backed_many(&waiting).await?;
                let mut found = lock();
                waiting.retain(|id| {
                    let wait = ebs.contains(*id);
                    if !wait {
                        found.insert(id.to_string(), Ok(Vec::new()));
                    }
                    wait
                });
            }
            match waiting.as_slice() {
                [] => Ok(()),
                ids => Err(CloudError::aws(
                    "ec2:DescribeVolumes",
                    &batch_name(ids),
                    NOT_ATTACHED,
                    "the EBS-backed instance has no attached volume yet",
                    ErrorClass::NotFound,
                )),
            }
        };
        let waited = self.not_found.retry(not_attached, attempt).await;
        let mut out = found.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = waited {
            for id in instance_ids {
                out.entry(id.to_string()).or_insert_with(|| Err(e.clone()));
            }
        }
        out
    }

    /// Which of `instance_ids` have an EBS root device, in shared `DescribeInstances` calls.
    async fn ebs_backed_many(&self, instance_ids: &[&str]) -> Result<HashSet<String>, CloudError> {
        let mut ebs = HashSet::new();
        for chunk in instance_ids.chunks(EC2_IDS_PER_FILTER) {
            let out = self
                .clients
                .ec2
                .describe_instances()
                .set_instance_ids(Some(chunk.iter().map(|s| s.to_string()).collect()))
                .send()
                .await
                .map_err(|e| crate::error::from_sdk("ec2:DescribeInstances", &batch_name(chunk), e))?;
            for i in out.reservations().iter().flat_map(|r| r.instances()) {
                if i.root_device_type() == Some(&aws_sdk_ec2::types::DeviceType::Ebs) {
                    ebs.extend(i.instance_id().map(str::to_owned));
                }
            }
        }
        Ok(ebs)
    }
}

/// The code of the error an instance gets whose EBS volumes are still not attached.
const NOT_ATTACHED: &str = "VolumesNotAttachedYet";

/// An EC2 filter `name` matching any of `ids`.
fn ids_filter(name: &str, ids: &[&str]) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder()
        .name(name)
        .set_values(Some(ids.iter().map(|s| s.to_string()).collect()))
        .build()
}
