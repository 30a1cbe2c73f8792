//! The resource types tagwarden enforces on Google Cloud, in one table ([`RESOURCE_TYPES`]) that
//! the event parser, the cloud adapter and the test fake all read: each type's Cloud Asset
//! Inventory (CAI) asset type, its full resource name, whether it takes labels, and the write that
//! sets them. Pure: names in, names out.
//!
//! Sources:
//! - Asset types: Cloud Asset Inventory, "Supported asset types"
//!   (<https://cloud.google.com/asset-inventory/docs/supported-asset-types>). Global forwarding
//!   rules and global addresses are asset types of their own there
//!   (`compute.googleapis.com/GlobalForwardingRule`, `compute.googleapis.com/GlobalAddress`), as
//!   are regional backend services (`compute.googleapis.com/RegionBackendService`).
//! - Full resource names: Google's API design guide, "Resource names" (`//SERVICE/RELATIVE_NAME`),
//!   and the Compute Engine REST paths (`projects/{project}/zones/{zone}/instances/{instance}`, …).
//!   CAI names a bucket `//storage.googleapis.com/BUCKET`; IAM and Resource Manager tag bindings
//!   use `//storage.googleapis.com/projects/_/buckets/BUCKET` ("Full resource names": "Some
//!   services use a different format for this resource type"), which [`parse_full_name`] also
//!   reads, answering the CAI form.
//! - Label writes: Compute `setLabels` with the resource's current `labelFingerprint` ("Labeling
//!   resources": the fingerprint "prevents conflicts"), Cloud Storage `buckets.patch` with
//!   `ifMetagenerationMatch`, Cloud DNS `managedZones.patch`.
//! - Types without labels: openshift/enhancements `enhancements/api-review/gcp_user_defined_labels.md`,
//!   "Below list of GCP Resources does not support labeling: VPC Network, VM Instance Group,
//!   Subnetwork, Target Pool, DNS Zone, Records, Router, NAT Rules, Backend Service, Health Check".
//!   Cloud NAT is configured inside a router (it has no asset of its own), so NAT rules are the
//!   Router's. Firewall rules are added: Compute's `Firewall` resource has no `labels` field.
//!   "DNS Zone" in that list contradicts the same document, which labels `google_dns_managed_zone`
//!   and lists "DNS Zone" among the resources whose labels can be updated, and Cloud DNS's
//!   `ManagedZone` has a `labels` field: the zone is labelable here and its record sets are not.

use std::fmt;

use serde::Serialize;

/// How a labelable type's labels are written (the adapter's side of the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelWrite {
    /// Compute Engine `POST …/{collection}/{name}/setLabels` with `{labels, labelFingerprint}`:
    /// the complete new set, refused with 412 when the fingerprint is stale.
    ComputeSetLabels,
    /// Cloud Storage `PATCH /storage/v1/b/{bucket}?ifMetagenerationMatch=N` with `{labels}`
    /// (a label set to `null` is removed), refused with 412 when the metageneration moved on.
    StoragePatch,
    /// Cloud DNS `PATCH /dns/v1/projects/{project}/managedZones/{zone}` with `{labels}`.
    DnsPatch,
    /// The type carries no labels: reported `unsupported`, never written, never retried.
    Unsupported,
}

/// Where a name places a resource: the part of its path between the project and the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// `projects/{project}/zones/{zone}/…`
    Zonal,
    /// `projects/{project}/regions/{region}/…`
    Regional,
    /// `projects/{project}/global/…`
    Global,
    /// `projects/{project}/…` (Cloud DNS managed zones).
    Project,
    /// `{name}` alone (Cloud Storage buckets: bucket names are global).
    Bare,
}

/// One resource type tagwarden knows on Google Cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ResourceType {
    /// CAI asset type, the [`ResourceRef::kind`] of every resource of the type.
    pub asset_type: &'static str,
    /// The API host, first part of the full resource name.
    pub service: &'static str,
    /// The collection segment in the resource's path (`instances`, `forwardingRules`, `buckets`).
    pub collection: &'static str,
    /// The collection as audit-log method names spell it (`v1.compute.globalForwardingRules.insert`):
    /// Compute names global forwarding rules and addresses apart from the regional ones there,
    /// though their paths share a collection name.
    pub method_collection: &'static str,
    pub placement: Placement,
    pub write: LabelWrite,
}

impl ResourceType {
    pub fn is_labelable(&self) -> bool {
        self.write != LabelWrite::Unsupported
    }

    /// Whether Resource Manager tags bind to the type. Compute Engine's instances, disks, images,
    /// snapshots, forwarding rules and addresses (regional and global) each have the
    /// `createTagBinding`, `deleteTagBinding` and `listEffectiveTags` permissions, and buckets
    /// `storage.buckets.createTagBinding` (Cloud Storage, "Tags and labels"). Cloud DNS names no
    /// tag-binding permission for managed zones, so they are taken as unable to hold one
    /// (inferred from that absence; their labels are enforced).
    pub fn binds_tags(&self) -> bool {
        matches!(self.write, LabelWrite::ComputeSetLabels | LabelWrite::StoragePatch)
    }

    /// The pattern of the type's full resource name, for documentation and error messages.
    pub fn pattern(&self) -> String {
        let at = match self.placement {
            Placement::Zonal => "projects/{project}/zones/{zone}/",
            Placement::Regional => "projects/{project}/regions/{region}/",
            Placement::Global => "projects/{project}/global/",
            Placement::Project => "projects/{project}/",
            Placement::Bare => return format!("//{}/{{name}}", self.service),
        };
        format!("//{}/{at}{}/{{name}}", self.service, self.collection)
    }
}

const COMPUTE: &str = "compute.googleapis.com";
const STORAGE: &str = "storage.googleapis.com";
const DNS: &str = "dns.googleapis.com";

const fn compute(
    asset_type: &'static str,
    collection: &'static str,
    method_collection: &'static str,
    placement: Placement,
    write: LabelWrite,
) -> ResourceType {
    ResourceType { asset_type, service: COMPUTE, collection, method_collection, placement, write }
}

use LabelWrite::{ComputeSetLabels, DnsPatch, StoragePatch, Unsupported};
use Placement::{Bare, Global, Project, Regional, Zonal};

/// Every type tagwarden enforces (labelable) or knowingly leaves alone (`Unsupported`). A type not
/// here is not tagwarden's: its events are `unsupported-event`.
pub const RESOURCE_TYPES: &[ResourceType] = &[
    compute("compute.googleapis.com/Instance", "instances", "instances", Zonal, ComputeSetLabels),
    compute("compute.googleapis.com/Disk", "disks", "disks", Zonal, ComputeSetLabels),
    compute("compute.googleapis.com/ForwardingRule", "forwardingRules", "forwardingRules", Regional, ComputeSetLabels),
    compute(
        "compute.googleapis.com/GlobalForwardingRule",
        "forwardingRules",
        "globalForwardingRules",
        Global,
        ComputeSetLabels,
    ),
    compute("compute.googleapis.com/Address", "addresses", "addresses", Regional, ComputeSetLabels),
    compute("compute.googleapis.com/GlobalAddress", "addresses", "globalAddresses", Global, ComputeSetLabels),
    compute("compute.googleapis.com/Image", "images", "images", Global, ComputeSetLabels),
    compute("compute.googleapis.com/Snapshot", "snapshots", "snapshots", Global, ComputeSetLabels),
    ResourceType {
        asset_type: "storage.googleapis.com/Bucket",
        service: STORAGE,
        collection: "buckets",
        method_collection: "buckets",
        placement: Bare,
        write: StoragePatch,
    },
    ResourceType {
        asset_type: "dns.googleapis.com/ManagedZone",
        service: DNS,
        collection: "managedZones",
        method_collection: "managedZones",
        placement: Project,
        write: DnsPatch,
    },
    // No labels (the OpenShift enhancement's list, plus firewall rules).
    compute("compute.googleapis.com/Network", "networks", "networks", Global, Unsupported),
    compute("compute.googleapis.com/Subnetwork", "subnetworks", "subnetworks", Regional, Unsupported),
    compute("compute.googleapis.com/Router", "routers", "routers", Regional, Unsupported),
    compute("compute.googleapis.com/Firewall", "firewalls", "firewalls", Global, Unsupported),
    compute("compute.googleapis.com/BackendService", "backendServices", "backendServices", Global, Unsupported),
    compute(
        "compute.googleapis.com/RegionBackendService",
        "backendServices",
        "regionBackendServices",
        Regional,
        Unsupported,
    ),
    compute("compute.googleapis.com/HealthCheck", "healthChecks", "healthChecks", Global, Unsupported),
    compute("compute.googleapis.com/TargetPool", "targetPools", "targetPools", Regional, Unsupported),
    compute("compute.googleapis.com/InstanceGroup", "instanceGroups", "instanceGroups", Zonal, Unsupported),
];

/// Cloud DNS record sets: no labels (the enhancement's "Records"), and no entry in the table since
/// tagwarden never addresses one; their audit-log methods are recognised by this collection.
pub const DNS_RECORD_COLLECTIONS: &[&str] = &["changes", "resourceRecordSets"];

/// The table's entry for an asset type.
pub fn resource_type(asset_type: &str) -> Option<&'static ResourceType> {
    RESOURCE_TYPES.iter().find(|t| t.asset_type == asset_type)
}

/// Whether tagwarden writes labels on `asset_type`: false for the unlabelable types and for any
/// type not in the table.
pub fn is_labelable(asset_type: &str) -> bool {
    resource_type(asset_type).is_some_and(ResourceType::is_labelable)
}

/// The asset types tagwarden enforces, for a CAI search's `assetTypes`.
pub fn labelable_asset_types() -> impl Iterator<Item = &'static str> {
    RESOURCE_TYPES.iter().filter(|t| t.is_labelable()).map(|t| t.asset_type)
}

/// Where a resource is, as the API that writes it needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case", tag = "scope", content = "location")]
pub enum Location {
    Zone(String),
    Region(String),
    /// Compute's `global` collections, DNS managed zones and buckets.
    Global,
}

/// A full resource name taken apart: the type, and the parts its API's path needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ResourceName {
    #[serde(rename = "type")]
    pub resource_type: &'static ResourceType,
    /// The project id; `None` for a bucket, whose name does not carry one.
    pub project: Option<String>,
    pub location: Location,
    /// The resource's own name (Compute's `instance`, Storage's `bucket`, DNS's `managedZone`).
    pub name: String,
}

impl ResourceName {
    pub fn zone(&self) -> Option<&str> {
        match &self.location {
            Location::Zone(z) => Some(z),
            _ => None,
        }
    }

    /// The region: a regional resource's own, or the one a zone belongs to (`us-central1-a` →
    /// `us-central1`: a zone is its region and a one-letter suffix).
    pub fn region(&self) -> Option<&str> {
        match &self.location {
            Location::Region(r) => Some(r),
            Location::Zone(z) => z.rsplit_once('-').map(|(region, _)| region),
            Location::Global => None,
        }
    }

    /// The CAI full resource name.
    pub fn full_name(&self) -> String {
        let t = self.resource_type;
        let project = self.project.as_deref().unwrap_or_default();
        match (&self.location, t.placement) {
            (_, Bare) => format!("//{}/{}", t.service, self.name),
            (_, Project) => format!("//{}/projects/{project}/{}/{}", t.service, t.collection, self.name),
            (Location::Zone(z), _) => {
                format!("//{}/projects/{project}/zones/{z}/{}/{}", t.service, t.collection, self.name)
            }
            (Location::Region(r), _) => {
                format!("//{}/projects/{project}/regions/{r}/{}/{}", t.service, t.collection, self.name)
            }
            (Location::Global, _) => {
                format!("//{}/projects/{project}/global/{}/{}", t.service, t.collection, self.name)
            }
        }
    }

    /// The Compute Engine API path below `compute/v1/` (`projects/p/zones/z/instances/vm-1`);
    /// `None` for other services' types.
    pub fn compute_path(&self) -> Option<String> {
        (self.resource_type.service == COMPUTE)
            .then(|| self.full_name().trim_start_matches("//compute.googleapis.com/").to_string())
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full_name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{input:?} is not a Google Cloud full resource name: expected //SERVICE.googleapis.com/RELATIVE_NAME")]
    NotAFullName { input: String },
    #[error("{input:?} names no resource type tagwarden knows on {service} (known: {known})")]
    UnknownType { input: String, service: String, known: String },
}

/// Parse a full resource name (`//compute.googleapis.com/projects/p1/zones/us-central1-a/instances/vm-1`)
/// into its type and parts. The asset type comes from the name's shape alone.
pub fn parse_full_name(input: &str) -> Result<ResourceName, NameError> {
    let not_full = || NameError::NotAFullName { input: input.to_string() };
    let rest = input.trim().strip_prefix("//").ok_or_else(not_full)?;
    let (service, relative) = rest.split_once('/').ok_or_else(not_full)?;
    if !service.ends_with(".googleapis.com") || relative.is_empty() {
        return Err(not_full());
    }
    parse_relative(service, relative).ok_or_else(|| NameError::UnknownType {
        input: input.to_string(),
        service: service.to_string(),
        known: RESOURCE_TYPES
            .iter()
            .filter(|t| t.service == service)
            .map(ResourceType::pattern)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// A relative resource name (the full name without `//SERVICE/`) of `service`'s types.
pub fn parse_relative(service: &str, relative: &str) -> Option<ResourceName> {
    let segs: Vec<&str> = relative.trim_end_matches('/').split('/').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return None;
    }
    let find = |placement: Placement, collection: &str| {
        RESOURCE_TYPES.iter().find(|t| t.service == service && t.placement == placement && t.collection == collection)
    };
    let named = |t: &'static ResourceType, project: &str, location: Location, name: &str| ResourceName {
        resource_type: t,
        project: Some(project.to_string()),
        location,
        name: name.to_string(),
    };
    match segs.as_slice() {
        ["projects", p, "zones", z, c, n] => Some(named(find(Zonal, c)?, p, Location::Zone(z.to_string()), n)),
        ["projects", p, "regions", r, c, n] => Some(named(find(Regional, c)?, p, Location::Region(r.to_string()), n)),
        ["projects", p, "global", c, n] => Some(named(find(Global, c)?, p, Location::Global, n)),
        // Buckets: `projects/_/buckets/NAME` is IAM's and the audit logs' spelling of the CAI name.
        ["projects", "_", "buckets", n] | [n] => Some(ResourceName {
            resource_type: find(Bare, "buckets")?,
            project: None,
            location: Location::Global,
            name: n.to_string(),
        }),
        ["projects", p, c, n] => Some(named(find(Project, c)?, p, Location::Global, n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_s_pattern_parses_back_to_it() {
        for t in RESOURCE_TYPES {
            let name = t
                .pattern()
                .replace("{project}", "p1")
                .replace("{zone}", "us-central1-a")
                .replace("{region}", "us-central1")
                .replace("{name}", "x-1");
            let parsed = parse_full_name(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(parsed.resource_type.asset_type, t.asset_type, "{name}");
            assert_eq!(parsed.full_name(), name, "round trip");
            assert_eq!(parsed.name, "x-1");
        }
    }

    #[test]
    fn the_table_names_each_asset_type_once_and_each_path_once() {
        for (i, a) in RESOURCE_TYPES.iter().enumerate() {
            for b in &RESOURCE_TYPES[i + 1..] {
                assert_ne!(a.asset_type, b.asset_type);
                assert!(a.pattern() != b.pattern(), "{} and {} share a name", a.asset_type, b.asset_type);
            }
        }
    }

    #[test]
    fn compute_parts() {
        let n = parse_full_name("//compute.googleapis.com/projects/p1/zones/us-central1-a/instances/vm-1").unwrap();
        assert_eq!(n.resource_type.asset_type, "compute.googleapis.com/Instance");
        assert_eq!(
            (n.project.as_deref(), n.zone(), n.region(), n.name.as_str()),
            (Some("p1"), Some("us-central1-a"), Some("us-central1"), "vm-1")
        );
        assert_eq!(n.compute_path().as_deref(), Some("projects/p1/zones/us-central1-a/instances/vm-1"));
        assert_eq!(n.resource_type.write, LabelWrite::ComputeSetLabels);

        let g = parse_full_name("//compute.googleapis.com/projects/p1/global/forwardingRules/api").unwrap();
        assert_eq!(g.resource_type.asset_type, "compute.googleapis.com/GlobalForwardingRule");
        assert_eq!((g.location.clone(), g.region()), (Location::Global, None));
        let r =
            parse_full_name("//compute.googleapis.com/projects/p1/regions/europe-west4/forwardingRules/api").unwrap();
        assert_eq!(r.resource_type.asset_type, "compute.googleapis.com/ForwardingRule");
        assert_eq!(r.region(), Some("europe-west4"));
        let a = parse_full_name("//compute.googleapis.com/projects/p1/global/addresses/ip").unwrap();
        assert_eq!(a.resource_type.asset_type, "compute.googleapis.com/GlobalAddress");
        assert_eq!(a.resource_type.method_collection, "globalAddresses");
    }

    #[test]
    fn buckets_and_zones() {
        let b = parse_full_name("//storage.googleapis.com/my-bucket").unwrap();
        assert_eq!((b.resource_type.asset_type, b.project.clone()), ("storage.googleapis.com/Bucket", None));
        assert_eq!(b.resource_type.write, LabelWrite::StoragePatch);
        assert_eq!(b.compute_path(), None);
        // IAM's spelling answers the CAI one.
        let iam = parse_full_name("//storage.googleapis.com/projects/_/buckets/my-bucket").unwrap();
        assert_eq!(iam.full_name(), "//storage.googleapis.com/my-bucket");
        let z = parse_full_name("//dns.googleapis.com/projects/p1/managedZones/z1").unwrap();
        assert_eq!((z.resource_type.asset_type, z.project.as_deref()), ("dns.googleapis.com/ManagedZone", Some("p1")));
        assert_eq!(z.resource_type.write, LabelWrite::DnsPatch);
    }

    #[test]
    fn labelable_and_not() {
        for t in ["compute.googleapis.com/Instance", "storage.googleapis.com/Bucket", "dns.googleapis.com/ManagedZone"]
        {
            assert!(is_labelable(t), "{t}");
        }
        for t in [
            "compute.googleapis.com/Network",
            "compute.googleapis.com/Router",
            "compute.googleapis.com/Firewall",
            "compute.googleapis.com/TargetPool",
            "pubsub.googleapis.com/Topic",
        ] {
            assert!(!is_labelable(t), "{t}");
        }
        assert_eq!(labelable_asset_types().count(), 10);
        assert!(labelable_asset_types().all(is_labelable));
    }

    #[test]
    fn what_is_not_a_name() {
        for bad in [
            "",
            "projects/p/zones/z/instances/vm",
            "//compute.googleapis.com",
            "//compute.googleapis.com/",
            "//example.com/projects/p/zones/z/instances/vm",
            "arn:aws:s3:::b",
        ] {
            assert!(matches!(parse_full_name(bad), Err(NameError::NotAFullName { .. })), "{bad:?}");
        }
        for unknown in [
            "//compute.googleapis.com/projects/p/zones/z/widgets/w",
            "//compute.googleapis.com/projects/p/zones/z/instances",
            "//compute.googleapis.com/projects/p/zones//instances/vm",
            "//pubsub.googleapis.com/projects/p/topics/t",
            "//compute.googleapis.com/projects/p/regions/r/instances/vm",
        ] {
            let err = parse_full_name(unknown).expect_err(unknown);
            assert!(matches!(err, NameError::UnknownType { .. }), "{unknown}: {err}");
        }
        let err = parse_full_name("//compute.googleapis.com/projects/p/zones/z/widgets/w").unwrap_err().to_string();
        assert!(err.contains("//compute.googleapis.com/projects/{project}/zones/{zone}/instances/{name}"), "{err}");
    }
}
