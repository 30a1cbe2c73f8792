//! Test support for the Google Cloud side: [`FakeGcp`], one loopback HTTP server that answers
//! the five APIs tagwarden calls in the shapes the real ones answer, over one in-memory
//! inventory (`inventory.rs`) keyed by Cloud Asset Inventory full resource names:
//!
//! - Compute Engine v1 (`compute.rs`): GET and `setLabels` with label fingerprints (412 on a
//!   stale one), and the zone / region / global operations;
//! - the Cloud Storage JSON API's bucket metadata (`storage.rs`): GET and PATCH with
//!   `ifMetagenerationMatch` (412 on a stale one);
//! - Cloud DNS v1's managed zones (`dns.rs`): GET and PATCH;
//! - Cloud Asset Inventory's `searchAllResources` (`asset.rs`) at a project, folder or
//!   organization scope, with label queries, asset types and paging;
//! - Resource Manager v3's tag bindings and namespaced tag values (`tags.rs`);
//! - Cloud Monitoring v3's `timeSeries.create` (`monitoring.rs`), recording the series written
//!   ([`FakeGcp::time_series`]).
//!
//! Point each Google client crate at [`FakeGcp::endpoint`] (`with_endpoint`) with anonymous
//! credentials. The test hooks seed resources, read labels back, count calls, let another writer
//! win the race to the next write ([`FakeGcp::race_next_write`]) and inject failures. Besides,
//! [`emulator`] runs the real gcp-storage-emulator for the policy objects.

mod asset;
mod compute;
mod dns;
pub mod emulator;
pub mod http;
mod inventory;
mod monitoring;
mod storage;
mod tags;
mod time;

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::json;

pub use asset::{DEFAULT_PAGE, MAX_PAGE};
pub use compute::STALE_FINGERPRINT;
use http::{Req, Resp};
pub use inventory::{Call, Counters, Labels, EMPTY_LABEL_FINGERPRINT};
use inventory::{Failure, Kind, Project, State, TagValue};
pub use monitoring::WrittenSeries;
pub use storage::PRECONDITION_FAILED;

/// The fake Google Cloud APIs on one loopback port.
#[derive(Clone)]
pub struct FakeGcp {
    /// `http://127.0.0.1:PORT`, every API's endpoint (the client crates add their own path).
    pub endpoint: String,
    state: Arc<Mutex<State>>,
    monitoring: Arc<Mutex<monitoring::Store>>,
}

impl FakeGcp {
    /// Start the fake on a free loopback port, served from a thread of its own for as long as the
    /// test process lives.
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let state = State { search_page: asset::DEFAULT_PAGE, ..State::default() };
        let fake = FakeGcp { endpoint, state: Arc::new(Mutex::new(state)), monitoring: Arc::default() };
        let serving = fake.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("fake runtime");
            rt.block_on(async move {
                listener.set_nonblocking(true).expect("nonblocking");
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                http::serve(listener, Arc::new(move |r| serving.answer(&r))).await;
            });
        });
        fake
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn answer(&self, r: &Req) -> Resp {
        let mut st = self.st();
        let legacy = !(r.path.starts_with("/v1/") || r.path.starts_with("/v3/"));
        let resp = match st.take_failure(r) {
            Some(status) if legacy => Resp::error(status, failure_reason(status), "Injected by the fake", &[]),
            Some(status) => Resp::rpc_error(status, failure_code(status), "Injected by the fake"),
            None if r.path.starts_with("/compute/v1/") => compute::handle(&mut st, r),
            None if r.path.starts_with("/storage/v1/b/") => storage::handle(&mut st, r),
            None if r.path.starts_with("/dns/v1/") => dns::handle(&mut st, r),
            None if r.path.starts_with("/v1/") && r.path.ends_with(":searchAllResources") => asset::handle(&mut st, r),
            None if r.path.starts_with("/v3/projects/") && r.path.ends_with("/timeSeries") => {
                monitoring::handle(&mut self.monitoring.lock().unwrap_or_else(|p| p.into_inner()), r)
            }
            None if r.path.starts_with("/v3/") => tags::handle(&mut st, r),
            None => Resp::error(404, "notFound", &format!("No API at {}", r.path), &[]),
        };
        st.log.push(Call {
            method: r.method.clone(),
            path: r.path.clone(),
            query: r.query.clone(),
            status: resp.status,
        });
        resp
    }

    /// A project with its number and its ancestors, closest first: `["folders/12",
    /// "folders/1", "organizations/9"]`. A project a test does not add gets a number of its own
    /// and no folder or organization when its first resource is added.
    pub fn add_project(&self, project: &str, number: u64, ancestors: &[&str]) {
        let ancestors = ancestors.iter().map(|a| a.to_string()).collect();
        self.st().projects.insert(project.to_string(), Project { number, ancestors });
    }

    /// A project's number (registering the project if needed).
    pub fn project_number(&self, project: &str) -> u64 {
        self.st().project(project).number
    }

    fn add(
        &self,
        kind: Kind,
        full_name: String,
        project: &str,
        location: &str,
        name: &str,
        labels: &[(&str, &str)],
    ) -> String {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.st().insert(kind, full_name.clone(), project, location, name, labels);
        full_name
    }

    fn add_compute(
        &self,
        kind: Kind,
        project: &str,
        scope: &str,
        coll: &str,
        name: &str,
        labels: &[(&str, &str)],
    ) -> String {
        let full = format!("//compute.googleapis.com/projects/{project}/{scope}/{coll}/{name}");
        let location = scope.rsplit('/').next().unwrap_or("global");
        self.add(kind, full, project, location, name, labels)
    }

    /// Each `add_*` returns the resource's full name, the key every other hook takes.
    pub fn add_instance(&self, project: &str, zone: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(inventory::INSTANCE, project, &format!("zones/{zone}"), "instances", name, labels)
    }

    pub fn add_disk(&self, project: &str, zone: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(inventory::DISK, project, &format!("zones/{zone}"), "disks", name, labels)
    }

    pub fn add_forwarding_rule(&self, project: &str, region: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(
            inventory::FORWARDING_RULE,
            project,
            &format!("regions/{region}"),
            "forwardingRules",
            name,
            labels,
        )
    }

    pub fn add_global_forwarding_rule(&self, project: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(inventory::GLOBAL_FORWARDING_RULE, project, "global", "forwardingRules", name, labels)
    }

    pub fn add_address(&self, project: &str, region: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(inventory::ADDRESS, project, &format!("regions/{region}"), "addresses", name, labels)
    }

    pub fn add_global_address(&self, project: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(inventory::GLOBAL_ADDRESS, project, "global", "addresses", name, labels)
    }

    pub fn add_image(&self, project: &str, name: &str, labels: &[(&str, &str)]) -> String {
        self.add_compute(inventory::IMAGE, project, "global", "images", name, labels)
    }

    /// Networks, subnetworks, routers, backend services and health checks carry no labels.
    pub fn add_network(&self, project: &str, name: &str) -> String {
        self.add_compute(inventory::NETWORK, project, "global", "networks", name, &[])
    }

    pub fn add_subnetwork(&self, project: &str, region: &str, name: &str) -> String {
        self.add_compute(inventory::SUBNETWORK, project, &format!("regions/{region}"), "subnetworks", name, &[])
    }

    pub fn add_router(&self, project: &str, region: &str, name: &str) -> String {
        self.add_compute(inventory::ROUTER, project, &format!("regions/{region}"), "routers", name, &[])
    }

    pub fn add_backend_service(&self, project: &str, name: &str) -> String {
        self.add_compute(inventory::BACKEND_SERVICE, project, "global", "backendServices", name, &[])
    }

    pub fn add_health_check(&self, project: &str, name: &str) -> String {
        self.add_compute(inventory::HEALTH_CHECK, project, "global", "healthChecks", name, &[])
    }

    /// A bucket; `location` as Cloud Storage names it (`us`, `europe-west1`), any case.
    pub fn add_bucket(&self, project: &str, name: &str, location: &str, labels: &[(&str, &str)]) -> String {
        let full = format!("{}{name}", storage::FULL_NAME_PREFIX);
        self.add(inventory::BUCKET, full.clone(), project, &location.to_ascii_lowercase(), name, labels);
        let number = self.project_number(project);
        self.edit(&full, |a| {
            a.extra.insert("projectNumber".into(), json!(number.to_string()));
        });
        full
    }

    /// A managed zone serving `dns_name` (`example.com.`); Cloud DNS zones are global.
    pub fn add_managed_zone(&self, project: &str, name: &str, dns_name: &str, labels: &[(&str, &str)]) -> String {
        let full = format!("{}projects/{project}/managedZones/{name}", dns::FULL_NAME_PREFIX);
        self.add(inventory::MANAGED_ZONE, full.clone(), project, "global", name, labels);
        self.edit(&full, |a| {
            a.extra.insert("dnsName".into(), json!(dns_name));
        });
        full
    }

    /// A tag value that exists, by its namespaced name `{org id or project id}/{key}/{value}`;
    /// returns its `tagValues/N` (values of one key share one `tagKeys/N`).
    pub fn add_tag_value(&self, namespaced_name: &str) -> String {
        let mut st = self.st();
        let (key_path, short) = namespaced_name.rsplit_once('/').expect("namespaced name {parent}/{key}/{value}");
        let key = st
            .tag_values
            .iter()
            .find(|v| v.namespaced_name.rsplit_once('/').map(|(k, _)| k) == Some(key_path))
            .map(|v| v.parent.clone());
        let key = key.unwrap_or_else(|| format!("tagKeys/{}", st.new_id() % 1_000_000_000_000));
        let name = format!("tagValues/{}", st.new_id() % 1_000_000_000_000);
        st.tag_values.push(TagValue {
            name: name.clone(),
            parent: key,
            short_name: short.to_string(),
            namespaced_name: namespaced_name.to_string(),
        });
        name
    }

    /// Bind a tag value to a resource directly (set-up, not logged).
    pub fn bind_tag(&self, full_name: &str, tag_value: &str) {
        self.edit(full_name, |a| a.tags.push(tag_value.to_string()));
    }

    /// Bind a tag value to a project (set-up, not logged): its resources inherit it.
    pub fn bind_project_tag(&self, project: &str, tag_value: &str) {
        self.st().project_tags.entry(project.to_string()).or_default().push(tag_value.to_string());
    }

    /// The tag values (`tagValues/N`) bound to a resource.
    pub fn tag_bindings(&self, full_name: &str) -> Vec<String> {
        self.st().assets.get(full_name).map(|a| a.tags.clone()).unwrap_or_default()
    }

    fn edit(&self, full_name: &str, f: impl FnOnce(&mut inventory::Asset)) {
        let mut st = self.st();
        let a = st.assets.get_mut(full_name).unwrap_or_else(|| panic!("no resource {full_name} in the fake"));
        f(a);
    }

    /// A resource's labels now, `None` if it does not exist.
    pub fn labels(&self, full_name: &str) -> Option<Labels> {
        self.st().assets.get(full_name).map(|a| a.labels.clone())
    }

    /// A Compute resource's label fingerprint now.
    pub fn fingerprint(&self, full_name: &str) -> Option<String> {
        self.st().assets.get(full_name).map(|a| a.fingerprint.clone())
    }

    /// A bucket's metageneration now.
    pub fn metageneration(&self, full_name: &str) -> Option<u64> {
        self.st().assets.get(full_name).map(|a| a.metageneration)
    }

    /// The numeric id Compute and DNS answer for a resource (a tag binding's parent uses it).
    pub fn id(&self, full_name: &str) -> Option<u64> {
        self.st().assets.get(full_name).map(|a| a.id)
    }

    /// Another writer (a user in the console) replaces the labels now: the fingerprint and the
    /// metageneration move on, as after any write.
    pub fn edit_labels(&self, full_name: &str, labels: &[(&str, &str)]) {
        let mut st = self.st();
        st.races.insert(full_name.to_string(), labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        st.apply_race(full_name);
    }

    /// Just before the next label write of `full_name` is judged, another writer replaces its
    /// labels with `labels`: that write then meets a stale fingerprint or metageneration (412),
    /// or, on Cloud DNS, which has neither, is applied over the other writer's labels.
    pub fn race_next_write(&self, full_name: &str, labels: &[(&str, &str)]) {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.st().races.insert(full_name.to_string(), labels);
    }

    /// The next request with `method` (`"*"`: any) whose path contains `path_contains` answers
    /// `status` in its API's error shape instead (`429`, `500`, `503`, `403`…). Queue several for
    /// several requests.
    pub fn fail_next(&self, method: &str, path_contains: &str, status: u16) {
        let failure = Failure { method: method.to_string(), path_contains: path_contains.to_string(), status };
        self.st().failures.push_back(failure);
    }

    /// Every request so far (method, decoded path, raw query, status).
    pub fn calls(&self) -> Vec<Call> {
        self.st().log.clone()
    }

    pub fn clear_log(&self) {
        let mut st = self.st();
        st.log.clear();
        st.counters = Counters::default();
    }

    /// Reads (GETs of one resource or tag value), writes (setLabels, PATCH, tag binding
    /// creates) and list calls (searches, tag binding listings) so far.
    pub fn counters(&self) -> Counters {
        self.st().counters
    }

    /// Every time series written to Cloud Monitoring so far, in order, each with its one point.
    pub fn time_series(&self) -> Vec<WrittenSeries> {
        self.monitoring.lock().unwrap_or_else(|p| p.into_inner()).written.clone()
    }

    /// `searchAllResources` pages hold `n` results when the request has no `pageSize`.
    pub fn search_default_page(&self, n: usize) {
        self.st().search_page = n.clamp(1, asset::MAX_PAGE);
    }
}

/// The `errors[].reason` Google's discovery-based APIs give each status.
fn failure_reason(status: u16) -> &'static str {
    match status {
        403 => "forbidden",
        404 => "notFound",
        429 => "rateLimitExceeded",
        503 => "backendError",
        _ => "internalError",
    }
}

/// The google.rpc code of each status (AIP-193's mapping).
fn failure_code(status: u16) -> &'static str {
    match status {
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}
