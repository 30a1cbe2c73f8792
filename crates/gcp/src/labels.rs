//! A resource's labels, read with what guards their write, and written only under that guard.
//!
//! - Compute Engine: `get` returns `labels` and `labelFingerprint`; `setLabels` replaces the
//!   whole map and takes the fingerprint: "the fingerprint … must be provided in order to update
//!   or change labels", and a stale one is refused with 412 (Compute Engine API reference,
//!   `instances.setLabels`, `InstancesSetLabelsRequest.labelFingerprint`). Writes go through the
//!   official client (`google-cloud-compute-v1`) and wait for the operation it returns.
//! - Cloud Storage: a bucket's `labels` are patched with `ifMetagenerationMatch` (JSON API,
//!   `buckets.patch`: "Makes the return of the bucket metadata conditional on whether the
//!   bucket's current metageneration matches the given value", 412 otherwise). The whole map is
//!   sent: under PATCH semantics a key not named is kept, so the result is the same either way,
//!   and a server that replaces the map loses nothing.
//! - Cloud DNS: a managed zone's `labels` through `managedZones.patch` (official client
//!   `google-cloud-dns-v1`). The API offers no precondition: the map is read right before it is
//!   written, and a label another writer adds in between can be lost (reported as a known limit).
//!
//! Never a key removed: the map written is always the map read with `set` laid over it.

use std::collections::HashMap;

use bytes::Bytes;
use google_cloud_compute_v1 as compute;
use google_cloud_lro::Poller;
use tagwarden_core::calls::CallCounter;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

use crate::clients::Clients;
use crate::error::{from_gax, from_response, transport};
use crate::tags::{endpoint_for, BindingParent, Effective};
use crate::target::{ComputeKind, Location, Target};

/// Labels as read, with what the write must present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    pub labels: TagMap,
    pub guard: Guard,
    /// Where its tags are bound; `None` where none can be (Cloud DNS).
    pub binding: Option<BindingParent>,
    /// The tags in effect on it, when read (`crate::tags`).
    pub tags: Vec<Effective>,
}

impl Current {
    /// The resource as the engine plans it: its labels and its tags in effect, each tag the
    /// entry `<parentID>/<key>: <value>` (`tagwarden_core::gcp::TagRef::entry`).
    pub fn map(&self) -> TagMap {
        let mut map = self.labels.clone();
        map.extend(self.tags.iter().map(|t| (t.key.clone(), t.value.clone())));
        map
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// Compute Engine's `labelFingerprint`.
    Fingerprint(Bytes),
    /// Cloud Storage's bucket `metageneration`.
    Metageneration(String),
    /// Cloud DNS: nothing to present.
    None,
}

const OP_GET: &str = "compute:Get";
const OP_SET: &str = "compute:SetLabels";
const OP_BUCKET_GET: &str = "storage:GetBucket";
const OP_BUCKET_PATCH: &str = "storage:PatchLabels";
const OP_ZONE_GET: &str = "dns:GetManagedZone";
const OP_ZONE_PATCH: &str = "dns:PatchLabels";

fn to_map(labels: HashMap<String, String>) -> TagMap {
    labels.into_iter().collect()
}

fn to_hash(labels: &TagMap) -> HashMap<String, String> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// An instance or disk named outside a zone (the table never parses one so).
fn not_zonal() -> google_cloud_gax::error::Error {
    google_cloud_gax::error::Error::io("an instance or disk outside a zone")
}

fn missing_fingerprint(name: &str) -> CloudError {
    CloudError::gcp(
        OP_GET,
        name,
        Some(200),
        "NoFingerprint",
        "the answer carried no labelFingerprint",
        ErrorClass::Fatal,
    )
}

impl Clients {
    /// `name`'s labels and guard.
    pub async fn get_labels(&self, name: &str, target: &Target, calls: &CallCounter) -> Result<Current, CloudError> {
        match target {
            Target::Compute { kind, project, location, name: rname } => {
                calls.record(OP_GET);
                let (labels, fp, id) =
                    self.compute_get(*kind, project, location, rname).await.map_err(|e| from_gax(OP_GET, name, &e))?;
                let fp = fp.ok_or_else(|| missing_fingerprint(name))?;
                // A binding names a Compute resource by its numeric id (`crate::tags`).
                let binding = id.and_then(|id| {
                    let (prefix, _) = name.rsplit_once('/')?;
                    let at = match location {
                        Location::Zone(l) | Location::Region(l) => Some(l.as_str()),
                        Location::Global => None,
                    };
                    Some(BindingParent {
                        parent: format!("{prefix}/{id}"),
                        endpoint: endpoint_for(&self.endpoints.resource_manager, at),
                    })
                });
                Ok(Current { labels: to_map(labels), guard: Guard::Fingerprint(fp), binding, tags: Vec::new() })
            }
            Target::Bucket { name: bucket } => {
                calls.record(OP_BUCKET_GET);
                let url =
                    format!("{}/storage/v1/b/{bucket}?fields=labels,metageneration,location", self.endpoints.storage);
                let resp = self
                    .authorized(self.http.get(url))
                    .await?
                    .send()
                    .await
                    .map_err(|e| transport(OP_BUCKET_GET, name, &e))?;
                let status = resp.status().as_u16();
                let body = resp.text().await.map_err(|e| transport(OP_BUCKET_GET, name, &e))?;
                if status != 200 {
                    return Err(from_response(OP_BUCKET_GET, name, status, &body));
                }
                #[derive(serde::Deserialize)]
                struct Bucket {
                    #[serde(default)]
                    labels: TagMap,
                    metageneration: String,
                    #[serde(default)]
                    location: String,
                }
                let b: Bucket = serde_json::from_str(&body).map_err(|e| {
                    CloudError::gcp(OP_BUCKET_GET, name, Some(200), "BadAnswer", &e.to_string(), ErrorClass::Fatal)
                })?;
                let binding = BindingParent {
                    parent: format!("//storage.googleapis.com/projects/_/buckets/{bucket}"),
                    endpoint: endpoint_for(&self.endpoints.resource_manager, Some(&b.location)),
                };
                Ok(Current {
                    labels: b.labels,
                    guard: Guard::Metageneration(b.metageneration),
                    binding: Some(binding),
                    tags: Vec::new(),
                })
            }
            Target::ManagedZone { project, name: zone } => {
                calls.record(OP_ZONE_GET);
                let z = self
                    .dns
                    .get()
                    .set_project(project)
                    .set_managed_zone(zone)
                    .send()
                    .await
                    .map_err(|e| from_gax(OP_ZONE_GET, name, &e))?;
                Ok(Current { labels: to_map(z.labels), guard: Guard::None, binding: None, tags: Vec::new() })
            }
        }
    }

    /// Write `labels` (the whole map) on `name` under `guard`. A guard that no longer holds is an
    /// error with status 412 ([`crate::error::PRECONDITION_FAILED`]).
    pub async fn set_labels(
        &self,
        name: &str,
        target: &Target,
        labels: &TagMap,
        guard: &Guard,
        calls: &CallCounter,
    ) -> Result<(), CloudError> {
        match (target, guard) {
            (Target::Compute { kind, project, location, name: rname }, Guard::Fingerprint(fp)) => {
                calls.record(OP_SET);
                self.compute_set(*kind, project, location, rname, to_hash(labels), fp.clone())
                    .await
                    .map_err(|e| from_gax(OP_SET, name, &e))
            }
            (Target::Bucket { name: bucket }, Guard::Metageneration(generation)) => {
                calls.record(OP_BUCKET_PATCH);
                let url = format!(
                    "{}/storage/v1/b/{bucket}?ifMetagenerationMatch={generation}&fields=labels,metageneration",
                    self.endpoints.storage
                );
                let body = serde_json::json!({ "labels": labels });
                let req = self.authorized(self.http.patch(url).json(&body)).await?;
                let resp = req.send().await.map_err(|e| transport(OP_BUCKET_PATCH, name, &e))?;
                let status = resp.status().as_u16();
                if status == 200 {
                    return Ok(());
                }
                let body = resp.text().await.unwrap_or_default();
                Err(from_response(OP_BUCKET_PATCH, name, status, &body))
            }
            (Target::ManagedZone { project, name: zone }, _) => {
                calls.record(OP_ZONE_PATCH);
                let body = google_cloud_dns_v1::model::ManagedZone::new().set_labels(to_hash(labels));
                self.dns
                    .patch()
                    .set_project(project)
                    .set_managed_zone(zone)
                    .set_body(body)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| from_gax(OP_ZONE_PATCH, name, &e))
            }
            _ => Err(CloudError::gcp(
                OP_SET,
                name,
                None,
                "NoGuard",
                "the labels were read without their guard",
                ErrorClass::Fatal,
            )),
        }
    }

    async fn compute_get(
        &self,
        kind: ComputeKind,
        project: &str,
        location: &Location,
        name: &str,
    ) -> Result<(HashMap<String, String>, Option<Bytes>, Option<u64>), google_cloud_gax::error::Error> {
        let c = &self.compute;
        Ok(match (kind, location) {
            (ComputeKind::Instance, Location::Zone(z)) => {
                let r = c.instances.get().set_project(project).set_zone(z).set_instance(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::Disk, Location::Zone(z)) => {
                let r = c.disks.get().set_project(project).set_zone(z).set_disk(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::ForwardingRule, Location::Region(reg)) => {
                let r = c
                    .forwarding_rules
                    .get()
                    .set_project(project)
                    .set_region(reg)
                    .set_forwarding_rule(name)
                    .send()
                    .await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::ForwardingRule, _) => {
                let r = c.global_forwarding_rules.get().set_project(project).set_forwarding_rule(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::Address, Location::Region(reg)) => {
                let r = c.addresses.get().set_project(project).set_region(reg).set_address(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::Address, _) => {
                let r = c.global_addresses.get().set_project(project).set_address(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::Image, _) => {
                let r = c.images.get().set_project(project).set_image(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            (ComputeKind::Snapshot, _) => {
                let r = c.snapshots.get().set_project(project).set_snapshot(name).send().await?;
                (r.labels, r.label_fingerprint, r.id)
            }
            // The table places instances and disks in zones: never reached.
            (ComputeKind::Instance | ComputeKind::Disk, _) => return Err(not_zonal()),
        })
    }

    async fn compute_set(
        &self,
        kind: ComputeKind,
        project: &str,
        location: &Location,
        name: &str,
        labels: HashMap<String, String>,
        fp: Bytes,
    ) -> Result<(), google_cloud_gax::error::Error> {
        use compute::model::{
            GlobalSetLabelsRequest, InstancesSetLabelsRequest, RegionSetLabelsRequest, ZoneSetLabelsRequest,
        };
        // Each collection has a client and a request body type of its own; the call is the same:
        // its location and name, the body (the whole map and the fingerprint read), then the
        // operation waited out.
        macro_rules! set_labels {
            ($client:expr, $body:ty, $($setter:ident($arg:expr)),+) => {
                $client
                    .set_labels()
                    .set_project(project)
                    $(.$setter($arg))+
                    .set_body(<$body>::new().set_labels(labels).set_label_fingerprint(fp))
                    .poller()
                    .until_done()
                    .await?
            };
        }
        let c = &self.compute;
        match (kind, location) {
            (ComputeKind::Instance, Location::Zone(z)) => {
                set_labels!(c.instances, InstancesSetLabelsRequest, set_zone(z), set_instance(name));
            }
            (ComputeKind::Disk, Location::Zone(z)) => {
                set_labels!(c.disks, ZoneSetLabelsRequest, set_zone(z), set_resource(name));
            }
            (ComputeKind::ForwardingRule, Location::Region(reg)) => {
                set_labels!(c.forwarding_rules, RegionSetLabelsRequest, set_region(reg), set_resource(name));
            }
            (ComputeKind::ForwardingRule, _) => {
                set_labels!(c.global_forwarding_rules, GlobalSetLabelsRequest, set_resource(name));
            }
            (ComputeKind::Address, Location::Region(reg)) => {
                set_labels!(c.addresses, RegionSetLabelsRequest, set_region(reg), set_resource(name));
            }
            (ComputeKind::Address, _) => {
                set_labels!(c.global_addresses, GlobalSetLabelsRequest, set_resource(name));
            }
            (ComputeKind::Image, _) => {
                set_labels!(c.images, GlobalSetLabelsRequest, set_resource(name));
            }
            (ComputeKind::Snapshot, _) => {
                set_labels!(c.snapshots, GlobalSetLabelsRequest, set_resource(name));
            }
            (ComputeKind::Instance | ComputeKind::Disk, _) => return Err(not_zonal()),
        }
        Ok(())
    }
}
