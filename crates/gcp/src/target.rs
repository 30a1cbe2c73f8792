//! Where a resource's labels are read and written: the API coordinates of a Cloud Asset Inventory
//! full resource name (`//compute.googleapis.com/projects/p/zones/z/instances/vm-1`).
//!
//! Full resource names: Cloud Asset Inventory, "Resource name format" (the service's host, then
//! the resource's relative name); the relative names are the Compute Engine REST paths
//! (`projects/{project}/zones/{zone}/instances/{instance}`, `…/regions/{region}/forwardingRules/…`,
//! `…/global/images/…`), Cloud Storage's bucket name, Cloud DNS's
//! `projects/{project}/managedZones/{managedZone}`.

use std::fmt;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeKind {
    Instance,
    Disk,
    ForwardingRule,
    Address,
    Image,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Zone(String),
    Region(String),
    Global,
}

/// A full resource name tagwarden cannot write labels on: a type that takes none, or a name it
/// cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {why}")]
pub struct Unsupported {
    pub name: String,
    pub why: &'static str,
}

impl Target {
    pub fn parse(full_name: &str) -> Result<Target, Unsupported> {
        let bad = |why| Unsupported { name: full_name.to_string(), why };
        let rest = full_name.strip_prefix("//").ok_or_else(|| bad("not a full resource name (//SERVICE/…)"))?;
        let (host, path) = rest.split_once('/').ok_or_else(|| bad("not a full resource name (//SERVICE/…)"))?;
        let parts: Vec<&str> = path.split('/').collect();
        match (host, parts.as_slice()) {
            ("storage.googleapis.com", [bucket]) if !bucket.is_empty() => {
                Ok(Target::Bucket { name: bucket.to_string() })
            }
            ("dns.googleapis.com", ["projects", project, "managedZones", zone]) => {
                Ok(Target::ManagedZone { project: project.to_string(), name: zone.to_string() })
            }
            ("compute.googleapis.com", ["projects", project, scope @ .., collection, name]) => {
                let location = match scope {
                    ["zones", z] => Location::Zone(z.to_string()),
                    ["regions", r] => Location::Region(r.to_string()),
                    ["global"] => Location::Global,
                    _ => return Err(bad("a Compute Engine name tagwarden does not know")),
                };
                let kind = match (*collection, &location) {
                    ("instances", Location::Zone(_)) => ComputeKind::Instance,
                    ("disks", Location::Zone(_)) => ComputeKind::Disk,
                    ("forwardingRules", Location::Region(_) | Location::Global) => ComputeKind::ForwardingRule,
                    ("addresses", Location::Region(_) | Location::Global) => ComputeKind::Address,
                    ("images", Location::Global) => ComputeKind::Image,
                    _ => return Err(bad("this Compute Engine type takes no labels tagwarden writes")),
                };
                Ok(Target::Compute { kind, project: project.to_string(), location, name: name.to_string() })
            }
            _ => Err(bad("a resource type tagwarden does not write labels on")),
        }
    }
}

impl fmt::Display for ComputeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ComputeKind::Instance => "instances",
            ComputeKind::Disk => "disks",
            ComputeKind::ForwardingRule => "forwardingRules",
            ComputeKind::Address => "addresses",
            ComputeKind::Image => "images",
        })
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
            "projects/p1/zones/z/instances/vm-1",
        ] {
            assert!(Target::parse(unlabelable).is_err(), "{unlabelable}");
        }
    }
}
