//! The one in-memory inventory every fake API reads and writes: assets keyed by their Cloud Asset
//! Inventory full resource name (`//compute.googleapis.com/projects/p1/zones/z/instances/vm-1`,
//! `//storage.googleapis.com/bucket`, `//dns.googleapis.com/projects/p1/managedZones/z1`), the
//! projects with their numbers, folders and organization, the tag values that exist, the call log
//! and the test hooks' queued effects.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::http::Req;

pub type Labels = BTreeMap<String, String>;

/// What a kind of asset is called by each API, and where it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// Cloud Asset Inventory's asset type (CAI "Supported asset types").
    pub asset_type: &'static str,
    /// The API's own `kind` (`compute#instance`, `storage#bucket`, `dns#managedZone`).
    pub api_kind: &'static str,
    /// Whether the type carries labels at all (networks, subnetworks, routers, backend services
    /// and health checks do not: Compute's REST reference lists no `labels` field on them).
    pub labelable: bool,
}

pub const INSTANCE: Kind =
    Kind { asset_type: "compute.googleapis.com/Instance", api_kind: "compute#instance", labelable: true };
pub const DISK: Kind = Kind { asset_type: "compute.googleapis.com/Disk", api_kind: "compute#disk", labelable: true };
pub const FORWARDING_RULE: Kind =
    Kind { asset_type: "compute.googleapis.com/ForwardingRule", api_kind: "compute#forwardingRule", labelable: true };
pub const GLOBAL_FORWARDING_RULE: Kind = Kind {
    asset_type: "compute.googleapis.com/GlobalForwardingRule",
    api_kind: "compute#forwardingRule",
    labelable: true,
};
pub const ADDRESS: Kind =
    Kind { asset_type: "compute.googleapis.com/Address", api_kind: "compute#address", labelable: true };
pub const GLOBAL_ADDRESS: Kind =
    Kind { asset_type: "compute.googleapis.com/GlobalAddress", api_kind: "compute#address", labelable: true };
pub const IMAGE: Kind = Kind { asset_type: "compute.googleapis.com/Image", api_kind: "compute#image", labelable: true };
pub const NETWORK: Kind =
    Kind { asset_type: "compute.googleapis.com/Network", api_kind: "compute#network", labelable: false };
pub const SUBNETWORK: Kind =
    Kind { asset_type: "compute.googleapis.com/Subnetwork", api_kind: "compute#subnetwork", labelable: false };
pub const ROUTER: Kind =
    Kind { asset_type: "compute.googleapis.com/Router", api_kind: "compute#router", labelable: false };
pub const BACKEND_SERVICE: Kind =
    Kind { asset_type: "compute.googleapis.com/BackendService", api_kind: "compute#backendService", labelable: false };
pub const HEALTH_CHECK: Kind =
    Kind { asset_type: "compute.googleapis.com/HealthCheck", api_kind: "compute#healthCheck", labelable: false };
pub const BUCKET: Kind =
    Kind { asset_type: "storage.googleapis.com/Bucket", api_kind: "storage#bucket", labelable: true };
pub const MANAGED_ZONE: Kind =
    Kind { asset_type: "dns.googleapis.com/ManagedZone", api_kind: "dns#managedZone", labelable: true };

/// The label fingerprint Compute answers for a resource never labelled (every captured
/// `gcloud compute … describe` of an unlabelled instance, disk, address or forwarding rule shows
/// `"labelFingerprint": "42WmSpB8rSM="`).
pub const EMPTY_LABEL_FINGERPRINT: &str = "42WmSpB8rSM=";

#[derive(Debug, Clone)]
pub struct Asset {
    pub full_name: String,
    pub kind: Kind,
    /// The project id.
    pub project: String,
    /// `us-central1-a`, `us-central1`, `global`, a bucket's `us` / `europe-west1`.
    pub location: String,
    pub name: String,
    /// The numeric id Compute and DNS give a resource (string-encoded on the wire).
    pub id: u64,
    pub labels: Labels,
    /// Compute: base64 of 8 bytes, new on every label write.
    pub fingerprint: String,
    /// Storage: incremented on every metadata write.
    pub metageneration: u64,
    /// Tag values (`tagValues/N`) bound directly to the asset.
    pub tags: Vec<String>,
    /// Extra fields of the API's resource (a zone's `dnsName`).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone)]
pub struct Project {
    pub number: u64,
    /// `folders/N`, closest first, then the `organizations/N` (if any) last.
    pub ancestors: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct TagValue {
    /// `tagValues/N`
    pub name: String,
    /// `tagKeys/N`
    pub parent: String,
    pub short_name: String,
    /// `{org id or project id}/{key short name}/{value short name}`
    pub namespaced_name: String,
}

/// One request as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: String,
    pub status: u16,
}

/// What the test hooks counted: label reads (GETs of one resource), label writes (setLabels,
/// PATCH, tag binding creates), list calls (searches, listings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub reads: u64,
    pub writes: u64,
    pub lists: u64,
}

/// A failure the next matching request answers instead of its own answer.
#[derive(Debug, Clone)]
pub struct Failure {
    /// `GET`, `POST`, `PATCH`, or `*`.
    pub method: String,
    /// Applies when the request's path contains this.
    pub path_contains: String,
    pub status: u16,
}

#[derive(Default)]
pub struct State {
    pub assets: BTreeMap<String, Asset>,
    pub projects: HashMap<String, Project>,
    pub tag_values: Vec<TagValue>,
    /// Project id → the tag values bound to the project, which its resources inherit.
    pub project_tags: HashMap<String, Vec<String>>,
    pub log: Vec<Call>,
    pub counters: Counters,
    /// Full name → the labels another writer sets just before our next write of it.
    pub races: HashMap<String, Labels>,
    pub failures: VecDeque<Failure>,
    pub next_id: u64,
    /// Page token → offset into the result list it continues, and the request it continues.
    pub page_tokens: HashMap<String, (usize, String)>,
    /// `searchAllResources` results a page when the request has no `pageSize`.
    pub search_page: usize,
    /// Compute operations by their path (`/compute/v1/projects/p/zones/z/operations/NAME`).
    pub operations: HashMap<String, serde_json::Value>,
}

impl State {
    pub fn new_id(&mut self) -> u64 {
        self.next_id += 1;
        // Looks like the 19-digit ids Compute gives (`"id": "7020168853507679171"`).
        7_020_168_853_507_000_000 + self.next_id
    }

    /// The project, registered with a number of its own if the test never named it.
    pub fn project(&mut self, id: &str) -> Project {
        let n = self.projects.len() as u64;
        self.projects
            .entry(id.to_string())
            .or_insert_with(|| Project { number: 100_000_000_001 + n, ancestors: vec![] })
            .clone()
    }

    /// A new label fingerprint: URL-safe base64 of 8 bytes, as Compute's are (never the empty
    /// one). URL-safe: google-cloud-compute-v1 4.1.0 reads `labelFingerprint` as
    /// `Base64<UrlSafe>` (its generated `model/deserialize.rs`), so a `+` or `/` from the standard
    /// alphabet is refused ("Invalid symbol 43") — the generator's knowledge of what Compute sends.
    pub fn new_fingerprint(&mut self) -> String {
        use base64::Engine;
        let id = self.new_id();
        base64::engine::general_purpose::URL_SAFE.encode(id.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes())
    }

    /// Insert an asset, with a new id and the fingerprint Compute would give its labels.
    pub fn insert(&mut self, kind: Kind, full_name: String, project: &str, location: &str, name: &str, labels: Labels) {
        self.project(project);
        let id = self.new_id();
        let fingerprint = if labels.is_empty() { EMPTY_LABEL_FINGERPRINT.to_string() } else { self.new_fingerprint() };
        let asset = Asset {
            full_name: full_name.clone(),
            kind,
            project: project.to_string(),
            location: location.to_string(),
            name: name.to_string(),
            id,
            labels,
            fingerprint,
            metageneration: 1,
            tags: vec![],
            extra: serde_json::Map::new(),
        };
        self.assets.insert(full_name, asset);
    }

    /// Another writer's change queued by `race_next_write`, applied now (before our write is
    /// judged), so ours meets a stale fingerprint or metageneration.
    pub fn apply_race(&mut self, full_name: &str) {
        let Some(labels) = self.races.remove(full_name) else { return };
        let fingerprint = self.new_fingerprint();
        if let Some(a) = self.assets.get_mut(full_name) {
            a.labels = labels;
            a.fingerprint = fingerprint;
            a.metageneration += 1;
        }
    }

    /// The failure queued for this request, if any (taken from the queue).
    pub fn take_failure(&mut self, r: &Req) -> Option<u16> {
        let i = self
            .failures
            .iter()
            .position(|f| (f.method == "*" || f.method == r.method) && r.path.contains(&f.path_contains))?;
        self.failures.remove(i).map(|f| f.status)
    }
}
