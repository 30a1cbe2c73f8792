//! Where a resource's labels are written: the API coordinates of a Cloud Asset Inventory full
//! resource name, from the one table of Google Cloud types (`tagwarden_core::gcp::resources`,
//! which cites the names' formats and which types take labels).

pub use tagwarden_core::gcp::resources::Location;
use tagwarden_core::gcp::resources::{parse_full_name, LabelWrite};

/// How a resource's labels are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Compute Engine resource: `setLabels` with its `labelFingerprint`.
    Compute { kind: ComputeKind, project: String, location: Location, name: String },
    /// A Cloud Storage bucket: PATCH with `ifMetagenerationMatch`.
    Bucket { name: String },
    /// A Cloud DNS managed zone: PATCH (the API offers no precondition).
    ManagedZone { project: String, name: String },
}

/// The Compute Engine collections whose `setLabels` tagwarden calls (regional or global by the
/// name's location).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeKind {
    Instance,
    Disk,
    ForwardingRule,
    Address,
    Image,
    Snapshot,
}

/// A full resource name tagwarden cannot write labels on: a type that takes none, or a name it
/// cannot read. Reported `unsupported`, never retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {why}")]
pub struct Unsupported {
    pub name: String,
    pub why: String,
}

impl Target {
    pub fn parse(full_name: &str) -> Result<Target, Unsupported> {
        let bad = |why: String| Unsupported { name: full_name.to_string(), why };
        let n = parse_full_name(full_name).map_err(|e| bad(e.to_string()))?;
        let project = n.project.clone().unwrap_or_default();
        match n.resource_type.write {
            LabelWrite::StoragePatch => Ok(Target::Bucket { name: n.name }),
            LabelWrite::DnsPatch => Ok(Target::ManagedZone { project, name: n.name }),
            LabelWrite::ComputeSetLabels => {
                let kind = match n.resource_type.collection {
                    "instances" => ComputeKind::Instance,
                    "disks" => ComputeKind::Disk,
                    "forwardingRules" => ComputeKind::ForwardingRule,
                    "addresses" => ComputeKind::Address,
                    "images" => ComputeKind::Image,
                    "snapshots" => ComputeKind::Snapshot,
                    other => return Err(bad(format!("no setLabels client for Compute Engine's {other}"))),
                };
                Ok(Target::Compute { kind, project, location: n.location, name: n.name })
            }
            LabelWrite::Unsupported => Err(bad(format!("{} takes no labels", n.resource_type.asset_type))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_names_map_to_their_write() {
        let t =
            Target::parse("//compute.googleapis.com/projects/p1/zones/us-central1-a/instances/vm-1").expect("instance");
        assert_eq!(
            t,
            Target::Compute {
                kind: ComputeKind::Instance,
                project: "p1".into(),
                location: Location::Zone("us-central1-a".into()),
                name: "vm-1".into()
            }
        );
        let t = Target::parse("//compute.googleapis.com/projects/p1/global/forwardingRules/api").expect("global rule");
        assert!(matches!(t, Target::Compute { kind: ComputeKind::ForwardingRule, location: Location::Global, .. }));
        assert_eq!(Target::parse("//storage.googleapis.com/b-1"), Ok(Target::Bucket { name: "b-1".into() }));
        assert_eq!(
            Target::parse("//dns.googleapis.com/projects/p1/managedZones/z1"),
            Ok(Target::ManagedZone { project: "p1".into(), name: "z1".into() })
        );
        for unlabelable in [
            "//compute.googleapis.com/projects/p1/global/networks/n",
            "//compute.googleapis.com/projects/p1/regions/r/subnetworks/s",
            "//compute.googleapis.com/projects/p1/global/backendServices/b",
            "//container.googleapis.com/projects/p1/locations/l/clusters/c",
            "projects/p1/zones/z/instances/vm-1",
        ] {
            assert!(Target::parse(unlabelable).is_err(), "{unlabelable}");
        }
    }
}
