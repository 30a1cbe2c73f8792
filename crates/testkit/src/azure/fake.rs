//! Faithful fakes of the three Azure HTTP APIs the function calls, each on its own loopback port,
//! served by tagwarden's own HTTP server on a background thread:
//!
//! - **ARM Tags API** (Azure's documentation): `GET`/`PATCH` (`Merge`, `Replace`, `Delete`)/`PUT`
//!   on `{resourceId}/providers/Microsoft.Resources/tags/default?api-version=2021-04-01`, answering
//!   `{"id": "<resourceId>/providers/Microsoft.Resources/tags/default", "name": "default", "type":
//!   "Microsoft.Resources/tags", "properties": {"tags": {…}}}`. Every write goes through
//!   [`super::arm_rules`]: what ARM refuses (names, lengths, characters, per-type limits and
//!   rules, untaggable types, PATCH-less types, duplicates differing in case, the tag count at the
//!   end of the operation) is refused with ARM's status and `{"error": {"code", "message"}}`.
//!   Tag names compare case-insensitively (an existing name keeps its casing); 404
//!   `ResourceNotFound` for unknown resources; the tag-filtered `resources` / `resourcegroups`
//!   listings (no tags in the result, paged by `nextLink`). Every request must carry a token the
//!   fake identity issued for ARM. Real ARM's shapes, each cited where it is made: an untagged
//!   resource's `"properties": {}`; 202 with `Location` (`/subscriptions/{s}/operationresults/{id}`)
//!   or with `Azure-AsyncOperation` and its `{"status": …}` monitor, ending `Succeeded`, `Failed` or
//!   `Canceled`; `x-ms-request-id`/`x-ms-correlation-request-id` on every answer; 429
//!   `SubscriptionRequestsThrottled`; 409 `ScopeLocked` under a `ReadOnly` lock; listings whose ids
//!   are cased differently per scope (`resourcegroups/defaultresourcegroup-eus`), names with
//!   parentheses, and an empty page that still has a `nextLink`.
//! - **Azure Resource Graph** (`POST /providers/Microsoft.ResourceGraph/resources`, [`graph_api`]):
//!   the owned-resources query tagwarden sends (`tagwarden_azure::resource_graph`), answered in the
//!   recorded shapes, paged by `$skipToken` at most 1,000 rows a page, with the quota headers on
//!   every answer, 429 `RateLimiting` when the quota is spent, a view that can lag ARM
//!   ([`FakeAzure::freeze_graph`]) and rows the caller may not read left out. It cannot run KQL: it
//!   recognises the query tagwarden builds and refuses any other as Resource Graph refuses a query
//!   it cannot parse.
//! - **Managed identity** (§4.1): `GET /msi/token?resource=&api-version=2019-08-01&client_id=`
//!   with `X-IDENTITY-HEADER`.
//! - **Azure Monitor custom metrics** (§5.1): `POST /<resourceId>/metrics`, kept for inspection.
//!
//! Every request is logged, so tests count calls by kind. Test set-up ([`FakeAzure::put_resource`],
//! [`FakeAzure::edit_tags`]) bypasses the rules: it describes what a resource carries, however it
//! came to.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tagwarden_azure::server::{self, Request, Response};

use super::arm_rules::{self, Refusal};
use tagwarden_core::TagMap;

pub const IDENTITY_HEADER: &str = "fake-identity-header-secret";
pub const ARM_AUDIENCE: &str = "https://management.azure.com/";
pub const MONITORING_AUDIENCE: &str = "https://monitoring.azure.com/";
const TAGS_SUFFIX: &str = "/providers/microsoft.resources/tags/default";
const GRAPH_PATH: &str = "/providers/microsoft.resourcegraph/resources";
/// Rows of an ARM listing page unless a test asks for more: small, so paging is exercised.
const PAGE: usize = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// `arm`, `identity` or `metrics`.
    pub api: &'static str,
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub status: u16,
    /// When the fake answered.
    pub at: Instant,
}

#[derive(Debug, Clone)]
struct Resource {
    id: String,
    tags: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer 429 `SubscriptionRequestsThrottled` with this `Retry-After` (seconds).
    Throttle { retry_after: u64 },
    /// Accept a write with 202 + `Location` only; the operation answers 202 this many polls, then
    /// 200 with no body (azure-sdk-for-js arm-resources recording_resourcegroups_delete_test.json).
    Accept { polls: u32 },
    /// Accept a write with 202 + `Location`, and with `monitor` an `Azure-AsyncOperation` too
    /// (azure-sdk-for-js arm-network recording_virtualnetworks_begindeleteandwait_test.json): the
    /// monitor answers 200 `{"status": "InProgress"}` (MicrosoftDocs azure-docs
    /// async-operations.md), the `Location` 202, this many polls, each with `Retry-After`; then
    /// the operation ends as `end` says.
    Accepted { polls: u32, end: End, retry_after: u64, monitor: bool },
    /// Answer with this status and ARM error code.
    Status { status: u16, code: &'static str },
}

/// How an asynchronous operation ends (ARM RPC async-api-reference.md: "the terminal values can be
/// one of (1) Succeeded, (2) Failed or (3) Canceled"; `error` "Required if status == failed or
/// status == canceled").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Succeeded,
    Failed { code: &'static str, message: &'static str },
    Canceled,
}

/// An accepted write: polls left, resource key, tags after the write, and how it ends.
#[derive(Debug, Clone)]
struct Operation {
    left: u32,
    key: String,
    tags: Vec<(String, String)>,
    end: End,
    retry_after: u64,
}

#[derive(Default)]
struct State {
    resources: HashMap<String, Resource>,
    log: Vec<Logged>,
    /// Faults for the next requests of a method (`PATCH`, `GET`, `*`).
    faults: VecDeque<(String, Fault)>,
    /// Operation id → the accepted write.
    operations: HashMap<u64, Operation>,
    next_id: u64,
    /// Token → audience.
    tokens: HashMap<String, String>,
    expected_client_id: Option<String>,
    metrics_status: u16,
    posted_metrics: Vec<(String, String)>,
    /// Requests (and metrics posts) not kept: in load tests they would grow with every request.
    quiet: bool,
    /// Reads that still see a resource's tags from before its last write (Azure's documentation
    /// §3.5: "az tag update does not show the updated tags for managed disks … after a couple of
    /// seconds"), and how many each write leaves behind.
    stale: HashMap<String, (u32, Vec<(String, String)>)>,
    stale_reads_after_write: u32,
    /// Scopes (lower-case) under a `ReadOnly` management lock.
    locks: Vec<String>,
    /// Scopes (lower-case) whose listings name every id in lower case, as some real listings do.
    lower_case_listing: Vec<String>,
    /// Every listing starts with an empty page that has a `nextLink`.
    empty_first_page: bool,
    /// Resources deleted right after the next listing that names them.
    delete_after_listing: Vec<String>,
    /// Scopes (lower-case) the caller has no role on: their listings answer 403.
    denied: Vec<String>,
    graph: Graph,
    /// Management group (lower case) → the subscriptions (lower case) under it.
    management_groups: HashMap<String, Vec<String>>,
    /// Rows of an ARM listing page (`None`: [`PAGE`]).
    list_page: Option<usize>,
}

/// Resource Graph's side of the fake.
#[derive(Default)]
struct Graph {
    /// What Resource Graph indexed when it was frozen (`None`: it follows ARM at once).
    snapshot: Option<HashMap<String, Resource>>,
    /// Queries a window, the window, and this window's use.
    quota: Option<(u32, Duration)>,
    used: u32,
    window_start: Option<Instant>,
    /// The next queries answer 429 `RateLimiting` whatever the quota says.
    throttles: u32,
    /// Every query is refused with this status and code.
    refusal: Option<(u16, &'static str)>,
    /// `$skipToken` → (offset, the query and subscriptions it continues).
    tokens: HashMap<String, (usize, String)>,
}

/// The documented quota: "a user can send at most 15 queries within every 5-second window"
/// (guidance-for-throttled-requests.md).
const GRAPH_QUOTA: (u32, Duration) = (15, Duration::from_secs(5));

#[derive(Clone)]
pub struct FakeAzure {
    pub arm: String,
    /// The identity endpoint's token URL (IDENTITY_ENDPOINT).
    pub identity: String,
    pub metrics: String,
    state: Arc<Mutex<State>>,
}

impl FakeAzure {
    /// Start the three fakes. `client_id`: the user-assigned identity tokens must be requested for.
    pub fn start(client_id: Option<&str>) -> Self {
        let state = Arc::new(Mutex::new(State {
            expected_client_id: client_id.map(str::to_owned),
            metrics_status: 200,
            ..State::default()
        }));
        let bind = || std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let (arm, identity, metrics) = (bind(), bind(), bind());
        let url = |l: &std::net::TcpListener| format!("http://{}", l.local_addr().expect("addr"));
        let fake = FakeAzure {
            arm: url(&arm),
            identity: format!("{}/msi/token", url(&identity)),
            metrics: url(&metrics),
            state: state.clone(),
        };
        let arm_url = fake.arm.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("fake runtime");
            rt.block_on(async move {
                let listen = |l: std::net::TcpListener| {
                    l.set_nonblocking(true).expect("nonblocking");
                    tokio::net::TcpListener::from_std(l).expect("tokio listener")
                };
                let (s1, s2, s3) = (state.clone(), state.clone(), state);
                let a = tokio::spawn(server::serve(listen(arm), move |r| {
                    // Links (nextLink, Location) name the host the client called, as ARM's do:
                    // a fault proxy in front of the fake stays in the path.
                    let base = r.header("host").map(|h| format!("http://{h}")).unwrap_or_else(|| arm_url.clone());
                    let s = s1.clone();
                    async move { logged(&s, "arm", &r, |st| arm_api(st, &r, &base)) }
                }));
                let b = tokio::spawn(server::serve(listen(identity), move |r| {
                    let s = s2.clone();
                    async move { logged(&s, "identity", &r, |st| identity_api(st, &r)) }
                }));
                let c = tokio::spawn(server::serve(listen(metrics), move |r| {
                    let s = s3.clone();
                    async move { logged(&s, "metrics", &r, |st| metrics_api(st, &r)) }
                }));
                let _ = tokio::join!(a, b, c);
            });
        });
        fake
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Create (or replace) a resource with these tags.
    pub fn put_resource(&self, id: &str, tags: &[(&str, &str)]) {
        let tags = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.st().resources.insert(id.to_ascii_lowercase(), Resource { id: id.to_string(), tags });
    }

    /// A resource's tags now (as ARM keeps them), `None` if it does not exist.
    pub fn tags(&self, id: &str) -> Option<TagMap> {
        self.st().resources.get(&id.to_ascii_lowercase()).map(|r| r.tags.iter().cloned().collect())
    }

    /// An external edit (a user in the portal): set tags without going through the log.
    pub fn edit_tags(&self, id: &str, set: &[(&str, &str)]) {
        let mut st = self.st();
        let r = st.resources.get_mut(&id.to_ascii_lowercase()).expect("resource exists");
        for (k, v) in set {
            merge_one(&mut r.tags, k, v);
        }
    }

    /// Queue a fault for the next request with `method` (`"*"`: any ARM request).
    pub fn inject(&self, method: &str, fault: Fault) {
        self.st().faults.push_back((method.to_string(), fault));
    }

    pub fn fail_metrics(&self, status: u16) {
        self.st().metrics_status = status;
    }

    pub fn log(&self) -> Vec<Logged> {
        self.st().log.clone()
    }

    /// Stop (or resume) logging requests; callers count calls on the client side meanwhile.
    /// After every write, the next `n` GETs of that resource's tags answer the tags from before it.
    pub fn stale_reads_after_write(&self, n: u32) {
        self.st().stale_reads_after_write = n;
    }

    pub fn quiet(&self, quiet: bool) {
        self.st().quiet = quiet;
    }

    /// A `ReadOnly` management lock on `scope`: every write at or under it answers 409 `ScopeLocked`.
    pub fn lock(&self, scope: &str) {
        self.st().locks.push(scope.to_ascii_lowercase());
    }

    /// Every lock [`FakeAzure::lock`] placed is deleted.
    pub fn unlock_all(&self) {
        self.st().locks.clear();
    }

    /// Listings of `scope` name every id in lower case (`resourcegroups/defaultresourcegroup-eus/…`).
    pub fn lower_case_listing(&self, scope: &str) {
        self.st().lower_case_listing.push(scope.to_ascii_lowercase());
    }

    /// Every listing starts with `{"value": [], "nextLink": …}`.
    pub fn empty_first_page(&self) {
        self.st().empty_first_page = true;
    }

    /// The caller has no role on `scope`: listing it answers 403 `AuthorizationFailed`.
    pub fn deny(&self, scope: &str) {
        self.st().denied.push(scope.to_ascii_lowercase());
    }

    /// ARM listings answer `n` rows a page (the fake's default is 2, to exercise paging; real
    /// ARM's page size is not documented: the measurements assume 1,000).
    pub fn list_page(&self, n: usize) {
        self.st().list_page = Some(n.max(1));
    }

    /// Delete `id` right after the next listing that names it.
    pub fn delete_after_listing(&self, id: &str) {
        self.st().delete_after_listing.push(id.to_ascii_lowercase());
    }

    /// Resource Graph keeps answering from what ARM holds now, however ARM changes later (its
    /// index lags ARM, seconds to minutes), until [`FakeAzure::thaw_graph`].
    pub fn freeze_graph(&self) {
        let mut st = self.st();
        st.graph.snapshot = Some(st.resources.clone());
    }

    pub fn thaw_graph(&self) {
        self.st().graph.snapshot = None;
    }

    /// A management group holding `subscriptions` (its Resource Graph scope, its descendants).
    pub fn management_group(&self, group: &str, subscriptions: &[String]) {
        let subs = subscriptions.iter().map(|s| s.to_ascii_lowercase()).collect();
        self.st().management_groups.insert(group.to_ascii_lowercase(), subs);
    }

    /// Resource Graph's quota: `queries` per `window` (by default 15 per 5 s).
    pub fn graph_quota(&self, queries: u32, window: Duration) {
        let mut st = self.st();
        st.graph.quota = Some((queries, window));
        (st.graph.used, st.graph.window_start) = (0, None);
    }

    /// The next `n` Resource Graph queries answer 429 `RateLimiting`.
    pub fn throttle_graph(&self, n: u32) {
        self.st().graph.throttles = n;
    }

    /// Every Resource Graph query is refused with `status` and `code` (a cloud without it: 404
    /// `InvalidResourceType`; no read on any subscription named: 400 `BadRequest`; 403
    /// `AuthorizationFailed`).
    pub fn refuse_graph(&self, status: u16, code: &'static str) {
        self.st().graph.refusal = Some((status, code));
    }

    pub fn clear_log(&self) {
        self.st().log.clear();
    }

    /// ARM requests as `METHOD kind`: `GET tags`, `PATCH tags`, `PUT tags`, `GET poll`, `GET list`,
    /// `POST graph` (a Resource Graph query), `GET descendants` (a management group's).
    pub fn arm_calls(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter(|l| l.api == "arm")
            .map(|l| {
                let p = l.path.to_ascii_lowercase();
                let kind = if p.ends_with(TAGS_SUFFIX) {
                    "tags"
                } else if p == GRAPH_PATH {
                    "graph"
                } else if p.ends_with("/descendants") {
                    "descendants"
                } else if p.contains("/operationresults/") || p.contains("/operations/") {
                    "poll"
                } else {
                    "list"
                };
                format!("{} {kind}", l.method)
            })
            .collect()
    }

    pub fn count(&self, call: &str) -> usize {
        self.arm_calls().iter().filter(|c| *c == call).count()
    }

    /// Every PATCH body sent to ARM.
    pub fn patch_bodies(&self) -> Vec<Value> {
        self.log()
            .iter()
            .filter(|l| l.api == "arm" && l.method == "PATCH")
            .map(|l| serde_json::from_str(&l.body).expect("PATCH body is JSON"))
            .collect()
    }

    pub fn token_requests(&self) -> Vec<Logged> {
        self.log().into_iter().filter(|l| l.api == "identity").collect()
    }

    /// `(content-type, body)` of every metrics POST.
    pub fn posted_metrics(&self) -> Vec<(String, String)> {
        self.st().posted_metrics.clone()
    }
}

fn logged(
    state: &Arc<Mutex<State>>,
    api: &'static str,
    r: &Request,
    f: impl FnOnce(&mut State) -> Response,
) -> Response {
    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
    let mut resp = f(&mut st);
    if api == "arm" {
        // On every ARM answer; for Microsoft.Resources calls the two are one id (azure-sdk-for-js
        // arm-resources recordings: "x-ms-correlation-request-id" equals "x-ms-request-id").
        st.next_id += 1;
        let id = format!("9853708d-0000-4000-8000-{:012x}", st.next_id);
        resp = resp.with_header("x-ms-request-id", &id).with_header("x-ms-correlation-request-id", &id);
    }
    if st.quiet {
        return resp;
    }
    st.log.push(Logged {
        api,
        method: r.method.clone(),
        path: r.path.clone(),
        query: r.query.clone(),
        headers: r.headers.clone(),
        body: String::from_utf8_lossy(&r.body).into_owned(),
        status: resp.status,
        at: Instant::now(),
    });
    resp
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| decode(k) == name).map(|(_, v)| decode(v))
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn arm_error(status: u16, code: &str, message: &str) -> Response {
    Response::json(status, &json!({"error": {"code": code, "message": message}}))
}

fn bearer_audience(st: &State, r: &Request) -> Option<String> {
    let token = r.header("authorization")?.strip_prefix("Bearer ")?;
    st.tokens.get(token).cloned()
}

fn identity_api(st: &mut State, r: &Request) -> Response {
    if r.method != "GET" || r.path != "/msi/token" {
        return Response::text(404, "not found");
    }
    if r.header("x-identity-header") != Some(IDENTITY_HEADER) {
        return Response::json(
            401,
            &json!({"error": "invalid_request", "error_description": "X-IDENTITY-HEADER missing or wrong"}),
        );
    }
    if query_param(&r.query, "api-version").as_deref() != Some("2019-08-01") {
        return Response::json(
            400,
            &json!({"error": "invalid_request", "error_description": "api-version must be 2019-08-01"}),
        );
    }
    let Some(resource) = query_param(&r.query, "resource") else {
        return Response::json(400, &json!({"error": "invalid_request", "error_description": "resource is required"}));
    };
    let client_id = query_param(&r.query, "client_id");
    if st.expected_client_id.is_some() && client_id != st.expected_client_id {
        return Response::json(
            400,
            &json!({"error": "invalid_request", "error_description": "Unable to load the proper Managed Identity: pass client_id of an assigned identity"}),
        );
    }
    st.next_id += 1;
    let token = format!("fake-token-{}", st.next_id);
    st.tokens.insert(token.clone(), resource.clone());
    let expires = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default() + 3600;
    Response::json(
        200,
        &json!({"access_token": token, "expires_on": expires.to_string(), "resource": resource, "token_type": "Bearer", "client_id": client_id.unwrap_or_default()}),
    )
}

fn metrics_api(st: &mut State, r: &Request) -> Response {
    if r.method != "POST" || !r.path.ends_with("/metrics") {
        return Response::text(404, "not found");
    }
    if bearer_audience(st, r).as_deref() != Some(MONITORING_AUDIENCE) {
        return arm_error(401, "InvalidToken", "a token for https://monitoring.azure.com/ is required");
    }
    let ct = r.header("content-type").unwrap_or_default().to_string();
    if !st.quiet {
        st.posted_metrics.push((ct, String::from_utf8_lossy(&r.body).into_owned()));
    }
    Response::json(st.metrics_status, &json!({}))
}

/// [S20]: "Tag names are case-insensitive for operations. A tag with a tag name, regardless of the
/// casing, is updated or retrieved" — the existing name keeps its casing ("the resource provider
/// might keep the casing you provide").
fn merge_one(tags: &mut Vec<(String, String)>, k: &str, v: &str) {
    match tags.iter_mut().find(|(ek, _)| ek.eq_ignore_ascii_case(k)) {
        Some(e) => e.1 = v.to_string(),
        None => tags.push((k.to_string(), v.to_string())),
    }
}

/// The Tags resource (azure-sdk-for-js arm-resources recording_tagsoperations_get_test.json); an
/// untagged scope has no `tags` at all (azure-rest-api-specs Microsoft.Resources 2021-04-01
/// examples/UpdateAtScopeTags.json: `"properties": {}`).
fn tags_body(id: &str, tags: &[(String, String)]) -> Value {
    let map: BTreeMap<&str, &str> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let properties = if map.is_empty() { json!({}) } else { json!({"tags": map}) };
    json!({"id": format!("{id}/providers/Microsoft.Resources/tags/default"), "name": "default", "type": "Microsoft.Resources/tags", "properties": properties})
}

fn arm_api(st: &mut State, r: &Request, base: &str) -> Response {
    match bearer_audience(st, r) {
        Some(a) if a.trim_end_matches('/') == ARM_AUDIENCE.trim_end_matches('/') => {}
        _ => return arm_error(401, "InvalidAuthenticationToken", "The access token is missing or invalid."),
    }
    if r.path.eq_ignore_ascii_case(GRAPH_PATH) {
        return graph_api(st, r);
    }
    if let Some(group) = descendants_of(&r.path) {
        return descendants(st, r, &group);
    }
    if query_param(&r.query, "api-version").as_deref() != Some("2021-04-01") {
        return arm_error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    // Injected faults.
    if let Some(i) = st.faults.iter().position(|(m, _)| m == "*" || m.eq_ignore_ascii_case(&r.method)) {
        let (_, fault) = st.faults.remove(i).expect("fault");
        match fault {
            // The message as ARM words it (velero-io/velero#9171).
            Fault::Throttle { retry_after } => {
                let message = format!("Number of 'write' requests for subscription '{}' actor '{}' exceeded. Please try again after '{retry_after}' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling for additional information.", subscription_of(&r.path), "00000000-0000-0000-0000-000000000001");
                return arm_error(429, "SubscriptionRequestsThrottled", &message)
                    .with_header("retry-after", &retry_after.to_string());
            }
            Fault::Status { status, code } => return arm_error(status, code, &injected_message(code, r)),
            Fault::Accept { polls } => {
                if let Some(resp) = write(st, r, Some((polls, End::Succeeded, 0, false)), base) {
                    return resp;
                }
            }
            Fault::Accepted { polls, end, retry_after, monitor } => {
                if let Some(resp) = write(st, r, Some((polls, end, retry_after, monitor)), base) {
                    return resp;
                }
            }
        }
    }
    let path = r.path.clone();
    let lower = path.to_ascii_lowercase();
    if let Some((monitor, op)) = operation_of(&lower) {
        return poll(st, monitor, op);
    }
    if lower.ends_with(TAGS_SUFFIX) {
        if r.method == "GET" {
            let key = lower[..lower.len() - TAGS_SUFFIX.len()].to_string();
            return match st.resources.get(&key) {
                Some(res) => {
                    let tags = match st.stale.get_mut(&key) {
                        Some((left, before)) if *left > 0 => {
                            *left -= 1;
                            before.clone()
                        }
                        _ => res.tags.clone(),
                    };
                    Response::json(200, &tags_body(&res.id, &tags))
                }
                None => not_found(&path[..path.len() - TAGS_SUFFIX.len()]),
            };
        }
        return write(st, r, None, base)
            .unwrap_or_else(|| arm_error(405, "MethodNotAllowed", "DELETE is not served by the fake"));
    }
    if r.method == "GET" && (lower.ends_with("/resources") || lower.ends_with("/resourcegroups")) {
        return list(st, r, &lower, base);
    }
    arm_error(404, "InvalidResourceType", &format!("the fake does not serve {} {path}", r.method))
}

fn subscription_of(path: &str) -> &str {
    path.split('/').nth(2).unwrap_or_default()
}

/// An injected error worded as ARM words it, where a real message is known.
fn injected_message(code: &str, r: &Request) -> String {
    let scope = r.path.to_ascii_lowercase().replace(TAGS_SUFFIX, "");
    match code {
        // azure-rest-api-specs-examples#4471 (a service principal: its object id in both places).
        "AuthorizationFailed" => format!("The client '{OBJECT_ID}' with object id '{OBJECT_ID}' does not have authorization to perform action 'Microsoft.Resources/tags/write' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh your credentials."),
        // The wording ARM uses when a deny assignment refuses an action the roles allow (recorded
        // answers for managed resource groups; no REST spec example carries it: inferred).
        "DenyAssignmentAuthorizationFailed" => format!("The client '{OBJECT_ID}' with object id '{OBJECT_ID}' has permission to perform action 'Microsoft.Resources/tags/write' on scope '{scope}'; however, the access is denied because of the deny assignment with name 'managed-rg-lockdown' and Id '0b2f6a4e-1c3d-4e5f-8a9b-0c1d2e3f4a5b' at scope '{scope}'."),
        _ => "injected".to_string(),
    }
}

/// The object id of the fake's caller, in ARM's messages.
const OBJECT_ID: &str = "06bc32ab-5ab5-4b8d-9f6c-95d0a420eb95";

/// `…/operationresults/{id}` (a `Location`) or `…/operations/{id}` (an `Azure-AsyncOperation`).
fn operation_of(lower: &str) -> Option<(bool, u64)> {
    let (monitor, rest) = match (lower.split_once("/operationresults/"), lower.split_once("/operations/")) {
        (Some((_, id)), _) => (false, id),
        (None, Some((_, id))) => (true, id),
        (None, None) => return None,
    };
    let id = rest.strip_prefix("op-")?.parse().ok()?;
    Some((monitor, id))
}

/// A poll of an accepted write: the `Location` answers 202 with no body while it runs, then 200
/// with no body — or, failed, "the exact same response that would have been returned had the
/// operation been executed synchronously" (ARM RPC async-api-reference.md); the
/// `Azure-AsyncOperation` monitor answers 200 with the operation's `status` (and `error`) always.
fn poll(st: &mut State, monitor: bool, op: u64) -> Response {
    let Some(o) = st.operations.get_mut(&op) else {
        return arm_error(404, "NotFound", "no such operation");
    };
    if o.left > 0 {
        o.left -= 1;
        let retry_after = o.retry_after.to_string();
        return if monitor {
            Response::json(200, &json!({"status": "InProgress"})).with_header("retry-after", &retry_after)
        } else {
            Response::text(202, "").with_header("retry-after", &retry_after)
        };
    }
    let o = st.operations.remove(&op).expect("operation");
    match (o.end, monitor) {
        (End::Succeeded, true) => {
            apply(st, &o.key, o.tags);
            Response::json(200, &json!({"status": "Succeeded"}))
        }
        (End::Succeeded, false) => {
            apply(st, &o.key, o.tags);
            Response::text(200, "")
        }
        (End::Failed { code, message }, true) => {
            Response::json(200, &json!({"status": "Failed", "error": {"code": code, "message": message}}))
        }
        (End::Failed { code, message }, false) => arm_error(400, code, message),
        (End::Canceled, true) => Response::json(
            200,
            &json!({"status": "Canceled", "error": {"code": "OperationCanceled", "message": "The operation was canceled."}}),
        ),
        (End::Canceled, false) => arm_error(409, "OperationCanceled", "The operation was canceled."),
    }
}

fn not_found(id: &str) -> Response {
    arm_error(404, "ResourceNotFound", &format!("The Resource '{id}' was not found."))
}

fn refused(r: Refusal) -> Response {
    arm_error(r.status, r.code, &r.message)
}

/// PATCH/PUT on tags/default. `accept`: answer 202 (polls, end, `Retry-After`, with an
/// `Azure-AsyncOperation` monitor or a `Location` only) and apply when polled to success.
fn write(st: &mut State, r: &Request, accept: Option<(u32, End, u64, bool)>, base: &str) -> Option<Response> {
    let lower = r.path.to_ascii_lowercase();
    if !lower.ends_with(TAGS_SUFFIX) || !(r.method == "PATCH" || r.method == "PUT") {
        return None;
    }
    let key = lower[..lower.len() - TAGS_SUFFIX.len()].to_string();
    let Some(res) = st.resources.get(&key).cloned() else {
        return Some(not_found(&r.path[..r.path.len() - TAGS_SUFFIX.len()]));
    };
    // A ReadOnly lock blocks tag writes too ("A read-only lock ... prevents ... updating tags",
    // learn.microsoft.com azure-resource-manager/management/lock-resources); ARM's answer is a 409
    // whose two scopes are not normalized to each other (Azure/AzureLocal-Supportability
    // ...ApplianceResourceScopeLocked.md; the write wording from MicrosoftDocs azure-docs
    // automation/troubleshoot/start-stop-vm.md).
    if let Some(lock) = st.locks.iter().find(|l| key == **l || key.starts_with(&format!("{l}/"))) {
        let message = format!("The scope '{}' cannot perform write operation because following scope(s) are locked: '{lock}'. Please remove the lock and try again.", &r.path[..r.path.len() - TAGS_SUFFIX.len()]);
        return Some(arm_error(409, "ScopeLocked", &message));
    }
    let invalid = |why: &str| Some(arm_error(400, "InvalidRequestContent", why));
    let Ok(body) = serde_json::from_slice::<Value>(&r.body) else {
        return invalid("The request content was invalid and could not be deserialized.");
    };
    let Some(given) = body.pointer("/properties/tags").and_then(Value::as_object) else {
        return invalid("properties.tags is required");
    };
    // [S19a]: tags are a string-to-string dictionary.
    let mut tags = Vec::with_capacity(given.len());
    for (k, v) in given {
        let Some(v) = v.as_str() else {
            return invalid(&format!("The value of tag '{k}' is not a string."));
        };
        tags.push((k.clone(), v.to_string()));
    }
    let given = tags;
    let kind = arm_rules::kind_of(&res.id);
    if let Some(refusal) = arm_rules::refuse_request(&kind, &r.method, &given) {
        return Some(refused(refusal));
    }
    let mut after = res.tags.clone();
    if r.method == "PUT" {
        after = given;
    } else {
        match body.get("operation").and_then(Value::as_str) {
            Some("Merge") => given.iter().for_each(|(k, v)| merge_one(&mut after, k, v)),
            Some("Replace") => after = given,
            Some("Delete") => after.retain(|(k, v)| {
                !given.iter().any(|(gk, gv)| gk.eq_ignore_ascii_case(k) && (gv.is_empty() || gv == v))
            }),
            other => return invalid(&format!("operation {other:?} is not Merge, Replace or Delete")),
        }
    }
    if let Some(refusal) = arm_rules::refuse_count(&kind, after.len()) {
        return Some(refused(refusal));
    }
    if let Some((polls, end, retry_after, monitor)) = accept {
        st.next_id += 1;
        let op = st.next_id;
        st.operations.insert(op, Operation { left: polls, key, tags: after, end, retry_after });
        let sub = subscription_of(&res.id).to_string();
        // The Location of a Microsoft.Resources operation (azure-sdk-for-js arm-resources
        // recording_resourcegroups_delete_test.json: `/subscriptions/{s}/operationresults/{opaque}`
        // with the request's api-version); the monitor as a provider's (arm-network
        // recording_virtualnetworks_begindeleteandwait_test.json: `…/locations/{l}/operations/{id}`).
        // Real ARM asks for 10–15 s (`Retry-After`); the fake asks for what the test sets.
        let location = format!("{base}/subscriptions/{sub}/operationresults/op-{op}?api-version=2021-04-01");
        let mut resp = Response::text(202, "")
            .with_header("location", &location)
            .with_header("retry-after", &retry_after.to_string());
        if monitor {
            let monitor = format!(
                "{base}/subscriptions/{sub}/providers/Microsoft.Resources/locations/westeurope/operations/op-{op}?api-version=2021-04-01"
            );
            resp = resp.with_header("azure-asyncoperation", &monitor);
        }
        return Some(resp);
    }
    let resp = tags_body(&res.id, &after);
    apply(st, &key, after);
    Some(Response::json(200, &resp))
}

/// A write lands: the resource carries `tags`, and reads may lag behind it for a while.
fn apply(st: &mut State, key: &str, tags: Vec<(String, String)>) {
    let lag = st.stale_reads_after_write;
    if let Some(res) = st.resources.get_mut(key) {
        let before = std::mem::replace(&mut res.tags, tags);
        // A write that changed nothing leaves the reads as they were.
        if lag > 0 && before != res.tags {
            st.stale.insert(key.to_string(), (lag, before));
        }
    }
}

/// `GET {scope}/resources?$filter=tagName eq 'K' and tagValue eq 'V'` and `…/resourcegroups`.
/// Resource lists leave `tags` out when filtered by tag (learn.microsoft.com/rest/api/resources/
/// resources/list: "the tags for each resource are not returned"). Pages follow the RPC
/// (resource-api-reference.md): "Returning zero records with NextLink is an acceptable response".
fn list(st: &mut State, r: &Request, lower: &str, base: &str) -> Response {
    let filter = query_param(&r.query, "$filter").unwrap_or_default();
    let quoted: Vec<&str> = filter.split('\'').skip(1).step_by(2).collect();
    let (Some(name), Some(value)) = (quoted.first(), quoted.get(1)) else {
        return arm_error(400, "InvalidFilterInQueryString", "the fake only serves tagName eq '…' and tagValue eq '…'");
    };
    let groups = lower.ends_with("/resourcegroups");
    let scope = lower.trim_end_matches("/resources").trim_end_matches("/resourcegroups");
    if st.denied.iter().any(|d| d == scope) {
        // azure-rest-api-specs-examples#4471, for the listing's action.
        let message = format!("The client '{OBJECT_ID}' with object id '{OBJECT_ID}' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourceGroups/resources/read' over scope '{scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.");
        return arm_error(403, "AuthorizationFailed", &message);
    }
    let mut matching: Vec<&Resource> = st
        .resources
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{scope}/")))
        .filter(|(k, _)| {
            let is_group = k.split('/').count() == 5;
            is_group == groups
        })
        .filter(|(_, r)| r.tags.iter().any(|(k, v)| k.eq_ignore_ascii_case(name) && v == value))
        .map(|(_, r)| r)
        .collect();
    matching.sort_by(|a, b| a.id.cmp(&b.id));
    let token = query_param(&r.query, "$skiptoken");
    let filter_q: String = filter
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    let next =
        |skip: usize| format!("{base}{}?%24filter={filter_q}&api-version=2021-04-01&%24skiptoken={skip}", r.path);
    if token.is_none() && st.empty_first_page {
        return Response::json(200, &json!({"value": [], "nextLink": next(0)}));
    }
    let skip = token.and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
    let page = st.list_page.unwrap_or(PAGE);
    // Some listings name ids all in lower case, others as created (a real AKS add-on's
    // `resourceGroups/defaultresourcegroup-sec`; MicrosoftDocs azure-docs#24010's type casing).
    let lower_ids = st.lower_case_listing.iter().any(|l| l == scope);
    let named: Vec<(String, Value)> = matching
        .iter()
        .skip(skip)
        .take(page)
        .map(|r| {
            let kind = tagwarden_core::resource::ResourceRef::from_arm_id(&r.id).map(|x| x.kind).unwrap_or_default();
            let id = if lower_ids { r.id.to_ascii_lowercase() } else { r.id.clone() };
            let item = json!({"id": id, "name": id.rsplit('/').next(), "type": kind, "location": "westeurope"});
            (r.id.to_ascii_lowercase(), item)
        })
        .collect();
    let mut body = json!({"value": named.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()});
    if skip + page < matching.len() {
        body["nextLink"] = json!(next(skip + page));
    }
    for (key, _) in &named {
        if let Some(at) = st.delete_after_listing.iter().position(|d| d == key) {
            st.delete_after_listing.remove(at);
            st.resources.remove(key);
        }
    }
    Response::json(200, &body)
}

/// Resource Graph's error (azure-sdk-for-python `azure-mgmt-resourcegraph` recording
/// test_resources_malformed_query.yaml: 400 `{"error": {"code": "BadRequest", "message": "Please
/// provide below info when asking for support: timestamp = …, correlationId = ….", "details":
/// [{"code": "InvalidQuery", "message": …}, …]}}`). The details of refusals that recording does not
/// show (`$top` out of range, a format the fake does not serve, a stale `$skipToken`, no
/// subscription the caller may read) are worded here: their codes and texts are inferred.
fn graph_error(status: u16, code: &str, detail_code: &str, detail: &str) -> Response {
    let message = "Please provide below info when asking for support: timestamp = 2026-11-21T10:12:00.0000000Z, correlationId = 8e1c247b-0c97-4b10-ac62-1b18099a3ef4.";
    Response::json(
        status,
        &json!({"error": {"code": code, "message": message, "details": [{"code": detail_code, "message": detail}]}}),
    )
}

/// A query Resource Graph cannot parse (the recorded `InvalidQuery`): whatever the fake does not
/// recognise as tagwarden's.
fn invalid_query(why: &str) -> Response {
    graph_error(
        400,
        "BadRequest",
        "InvalidQuery",
        &format!("Query is invalid. Please refer to the documentation for the Azure Resource Graph service and fix the error before retrying. ({why})"),
    )
}

/// The group of `/providers/Microsoft.Management/managementGroups/{group}/descendants`.
fn descendants_of(path: &str) -> Option<String> {
    let lower = path.to_ascii_lowercase();
    let rest = lower.strip_prefix("/providers/microsoft.management/managementgroups/")?;
    rest.strip_suffix("/descendants").filter(|g| !g.is_empty() && !g.contains('/')).map(str::to_owned)
}

/// `GET …/managementGroups/{group}/descendants?api-version=2020-05-01` (azure-rest-api-specs
/// `specification/managementgroups` stable/2020-05-01, `ManagementGroups_GetDescendants`, example
/// GetDescendants.json): `{"value": [{"id", "type", "name", "properties": {"displayName",
/// "parent": {"id"}}}], "nextLink": null}`, a subscription's `type`
/// `Microsoft.Management/managementGroups/subscriptions` and `name` its id. One page: the fake's
/// groups have no child groups. An unknown group: ARM's 404 (wording inferred).
fn descendants(st: &State, r: &Request, group: &str) -> Response {
    if query_param(&r.query, "api-version").as_deref() != Some("2020-05-01") {
        return arm_error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let Some(subs) = st.management_groups.get(group) else {
        return arm_error(404, "NotFound", &format!("'{group}' not found"));
    };
    let parent = format!("/providers/Microsoft.Management/managementGroups/{group}");
    let value: Vec<Value> = subs
        .iter()
        .map(|sub| {
            json!({
                "id": format!("/subscriptions/{sub}"),
                "type": "Microsoft.Management/managementGroups/subscriptions",
                "name": sub,
                "properties": {"displayName": format!("Subscription {sub}"), "parent": {"id": parent}},
            })
        })
        .collect();
    Response::json(200, &json!({"value": value, "nextLink": null}))
}

/// The owned-resources query tagwarden sends, as the fake recognises it: the whole subscriptions
/// and the (subscription, resource groups) pairs of its `where` (or no `where`: all of the request's
/// scope), whether resource groups are unioned in from `resourcecontainers` (for which
/// subscriptions), and the lower-cased ownership keys.
#[derive(Debug, Default)]
struct OwnedQuery {
    whole: Vec<String>,
    groups: Vec<(String, Vec<String>)>,
    containers: Vec<String>,
    /// No scope filter: everything the request's scope holds (a management group), resource
    /// groups included.
    everything: bool,
    keys: Vec<String>,
}

/// The single-quoted KQL literals of `s`, in order (`\'` and `\\` unescaped).
fn kql_literals(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut inside, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in s.chars() {
        match (inside, escaped, c) {
            (true, true, c) => {
                cur.push(c);
                escaped = false;
            }
            (true, false, '\\') => escaped = true,
            (true, false, '\'') => {
                out.push(std::mem::take(&mut cur));
                inside = false;
            }
            (true, false, c) => cur.push(c),
            (false, _, '\'') => inside = true,
            _ => {}
        }
    }
    out
}

/// Why the fake refuses a Resource Graph query: the text is the message of its 400
/// `InvalidQuery` answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum QueryRefused {
    #[error("empty query")]
    Empty,
    #[error("the fake serves only tagwarden's owned-resources query, not {0:?}")]
    NotOwnedQuery(String),
    #[error("no scope filter")]
    NoScopeFilter,
    #[error("a scope clause the fake does not know")]
    UnknownGroupClause,
    #[error("a scope clause the fake does not know: {0:?}")]
    UnknownScopeClause(String),
    #[error("no subscription")]
    NoSubscription,
    #[error("no lower-cased tag bag")]
    NoLowerTags,
    #[error("no ownership filter")]
    NoOwnershipFilter,
    #[error("an ownership filter the fake does not know")]
    UnknownOwnershipFilter,
    #[error("no ownership key")]
    NoOwnershipKey,
    #[error("a projection other than id, type, tags")]
    Projection,
}

fn parse_owned_query(q: &str) -> Result<OwnedQuery, QueryRefused> {
    let lines: Vec<&str> = q.lines().collect();
    let mut out = OwnedQuery::default();
    let (first, rest) = lines.split_first().ok_or(QueryRefused::Empty)?;
    if *first != "resources" {
        return Err(QueryRefused::NotOwnedQuery(q.to_string()));
    }
    let mut rest = rest.iter().peekable();
    const ALL_GROUPS: &str =
        "| union (resourcecontainers | where type =~ 'microsoft.resources/subscriptions/resourcegroups')";
    if rest.peek() == Some(&&ALL_GROUPS) {
        out.everything = true;
        rest.next();
    } else {
        let scope = rest.next().and_then(|l| l.strip_prefix("| where ")).ok_or(QueryRefused::NoScopeFilter)?;
        for clause in scope.split(" or ") {
            if let Some(list) = clause.strip_prefix("subscriptionId in~ (").and_then(|c| c.strip_suffix(')')) {
                out.whole.extend(kql_literals(list));
            } else if let Some(pair) = clause.strip_prefix("(subscriptionId =~ ").and_then(|c| c.strip_suffix("))")) {
                let (sub, groups) =
                    pair.split_once(" and resourceGroup in~ (").ok_or(QueryRefused::UnknownGroupClause)?;
                let sub = kql_literals(sub).pop().ok_or(QueryRefused::NoSubscription)?;
                out.groups.push((sub, kql_literals(groups)));
            } else {
                return Err(QueryRefused::UnknownScopeClause(clause.to_string()));
            }
        }
        const UNION: &str = "| union (resourcecontainers | where type =~ 'microsoft.resources/subscriptions/resourcegroups' and subscriptionId in~ (";
        if let Some(list) = rest.peek().and_then(|l| l.strip_prefix(UNION)).and_then(|l| l.strip_suffix("))")) {
            out.containers = kql_literals(list);
            rest.next();
        }
    }
    if rest.next() != Some(&"| extend lowerTags = parse_json(tolower(tostring(tags)))") {
        return Err(QueryRefused::NoLowerTags);
    }
    let owned = rest.next().and_then(|l| l.strip_prefix("| where ")).ok_or(QueryRefused::NoOwnershipFilter)?;
    for clause in owned.split(" or ") {
        let key = clause
            .strip_prefix("tostring(lowerTags[")
            .and_then(|l| l.strip_suffix("]) == 'owned'"))
            .ok_or(QueryRefused::UnknownOwnershipFilter)?;
        out.keys.push(kql_literals(key).pop().ok_or(QueryRefused::NoOwnershipKey)?);
    }
    if rest.next() != Some(&"| project id, type, tags") || rest.next().is_some() {
        return Err(QueryRefused::Projection);
    }
    Ok(out)
}

/// `hh:mm:ss`, whole seconds rounded up.
fn timespan(d: Duration) -> String {
    let s = d.as_millis().div_ceil(1000) as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `POST /providers/Microsoft.ResourceGraph/resources?api-version=…` (azure-rest-api-specs
/// Microsoft.ResourceGraph stable/2022-10-01 and 2024-04-01 resourcegraph.json, operation
/// `Resources`). Its answers:
/// - 200 `{"totalRecords", "count", "resultTruncated": "false", "facets": [], "$skipToken"?,
///   "data": [{"id", "type", "tags"}]}` (examples ResourcesFirstPageQuery.json and
///   ResourcesNextPageQuery.json: `$skipToken` while rows are left, sent back in `options` with
///   the same query and scopes; types in lower case; ResourcesMgBasicQuery.json: `"tags": {}`
///   for an untagged row). At most `$top` rows a page, which the spec bounds to 1..=1000; without
///   `$top`, 100 ("By default, Resource Graph limits any query to returning only 100 records",
///   MicrosoftDocs azure-docs concepts/work-with-data.md). Rows in id order (paging is stable
///   once `id` is projected, the examples say).
/// - on every answer, the quota: `x-ms-user-quota-remaining`, `x-ms-user-quota-resets-after`
///   (`hh:mm:ss`) and `x-ms-ratelimit-remaining-tenant-resource-requests` (the recordings
///   test_resources_basic_query_object_array.yaml and test_resources_malformed_query.yaml: an
///   error answer carries them too, so a refused query spends quota).
/// - 429 `RateLimiting` once the quota is spent (Azure/azure-cli-extensions#3325: code and detail
///   `RateLimiting`, "Client application has been throttled and should not attempt to repeat the
///   request until an amount of time has elapsed."); no `Retry-After` is known to be sent: the
///   quota's reset is the wait (inferred).
/// - rows the caller may not read are left out without an error (Resource Graph filters by the
///   caller's RBAC); a request none of whose subscriptions the caller may read is a 400
///   `BadRequest` (Azure/aztfexport#331: "there must be a subscription that is eligible").
/// - a missing api-version is ARM's 400 `MissingApiVersionParameter`, as for every ARM request.
fn graph_api(st: &mut State, r: &Request) -> Response {
    let (limit, window) = st.graph.quota.unwrap_or(GRAPH_QUOTA);
    let now = Instant::now();
    if st.graph.window_start.is_none_or(|t| now.duration_since(t) >= window) {
        (st.graph.window_start, st.graph.used) = (Some(now), 0);
    }
    let resets = window.saturating_sub(now.duration_since(st.graph.window_start.unwrap_or(now)));
    let spent = st.graph.used >= limit;
    let throttled = spent || st.graph.throttles > 0;
    if !spent {
        st.graph.used += 1;
    }
    let remaining = limit.saturating_sub(st.graph.used).to_string();
    let resp = if throttled {
        st.graph.throttles = st.graph.throttles.saturating_sub(1);
        let detail = "Client application has been throttled and should not attempt to repeat the request until an amount of time has elapsed. Please see https://aka.ms/resourcegraph-throttling for help.";
        graph_error(429, "RateLimiting", "RateLimiting", detail)
    } else {
        graph_query(st, r)
    };
    let remaining = if throttled { "0".to_string() } else { remaining };
    resp.with_header("x-ms-user-quota-remaining", &remaining)
        .with_header("x-ms-user-quota-resets-after", &timespan(resets))
        .with_header("x-ms-ratelimit-remaining-tenant-resource-requests", &remaining)
}

fn graph_query(st: &mut State, r: &Request) -> Response {
    match query_param(&r.query, "api-version").as_deref() {
        None => {
            return arm_error(
                400,
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        }
        // The GA versions in the spec.
        Some("2019-04-01" | "2021-03-01" | "2022-10-01" | "2024-04-01") => {}
        // ARM's answer for a version a provider does not serve (wording inferred).
        Some(v) => {
            return arm_error(400, "NoRegisteredProviderFound", &format!("No registered resource provider found for location 'global' and API version '{v}' for type 'resources'. The supported api-versions are '2019-04-01, 2021-03-01, 2022-10-01, 2024-04-01'."))
        }
    }
    if let Some((status, code)) = st.graph.refusal {
        return match status {
            404 => arm_error(404, code, "The resource type 'resources' could not be found in the namespace 'Microsoft.ResourceGraph' for api version '2022-10-01'."),
            403 => arm_error(403, code, &format!("The client '{OBJECT_ID}' with object id '{OBJECT_ID}' does not have authorization to perform action 'Microsoft.ResourceGraph/resources/read' over scope '/providers/Microsoft.ResourceGraph' or the scope is invalid. If access was recently granted, please refresh your credentials.")),
            _ => graph_error(status, code, code, "refused (injected)"),
        };
    }
    if r.method != "POST" {
        return arm_error(405, "MethodNotAllowed", "The Resources operation is a POST");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&r.body) else {
        return arm_error(
            400,
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized.",
        );
    };
    let Some(query) = body.get("query").and_then(Value::as_str) else {
        return graph_error(400, "BadRequest", "InvalidQuery", "The query is required.");
    };
    let options = body.get("options").cloned().unwrap_or(json!({}));
    let top = match options.get("$top") {
        None => 100,
        Some(t) => match t.as_u64().filter(|t| (1..=1000).contains(t)) {
            Some(t) => t as usize,
            None => {
                return graph_error(
                    400,
                    "BadRequest",
                    "InvalidQueryOptions",
                    &format!("$top {t} is out of range: it must be between 1 and 1000."),
                )
            }
        },
    };
    if let Some(f) = options.get("resultFormat").and_then(Value::as_str).filter(|f| *f != "objectArray") {
        return graph_error(
            400,
            "BadRequest",
            "UnsupportedResultFormat",
            &format!("the fake serves objectArray, not {f}"),
        );
    }
    let parsed = match parse_owned_query(query) {
        Ok(q) => q,
        Err(why) => return invalid_query(&why.to_string()),
    };
    // The request's scope: its subscriptions, or the subscriptions of its management groups
    // (none: every one the fake holds, as a tenant query).
    let names = |field: &str| -> Option<Vec<String>> {
        body.get(field)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_ascii_lowercase).collect())
    };
    let subs: Option<Vec<String>> = match (names("subscriptions"), names("managementGroups")) {
        (Some(_), Some(_)) => {
            // Inferred: the spec describes both fields, the docs give a request one scope or the other.
            return graph_error(
                400,
                "BadRequest",
                "InvalidScope",
                "A query names subscriptions or management groups, not both.",
            );
        }
        (None, Some(groups)) => {
            let mut subs = Vec::new();
            for g in &groups {
                match st.management_groups.get(g) {
                    Some(members) => subs.extend(members.iter().cloned()),
                    // Wording inferred; the shape is ARM's error.
                    None => {
                        return graph_error(
                            400,
                            "BadRequest",
                            "InvalidManagementGroup",
                            &format!("Management group '{g}' was not found or the caller may not read it."),
                        )
                    }
                }
            }
            Some(subs)
        }
        (subs, None) => subs,
    };
    let denied = st.denied.clone();
    let readable = |key: &str| !denied.iter().any(|d| key == d || key.starts_with(&format!("{d}/")));
    if let Some(subs) = &subs {
        if !subs.iter().any(|s| readable(&format!("/subscriptions/{s}"))) {
            return graph_error(400, "BadRequest", "NoValidSubscriptionsInQueryRequest", "There must be at least one subscription that is eligible to contain resources and that the caller may read.");
        }
    }
    let context = format!("{query}\n{:?}", subs);
    let offset = match options.get("$skipToken").and_then(Value::as_str) {
        None => 0,
        Some(t) => match st.graph.tokens.get(t) {
            Some((offset, c)) if *c == context => *offset,
            _ => {
                return graph_error(
                    400,
                    "BadRequest",
                    "InvalidSkipToken",
                    "The $skipToken does not continue this query and scope.",
                )
            }
        },
    };
    let view = st.graph.snapshot.as_ref().unwrap_or(&st.resources);
    let keys = parsed.keys.clone();
    let mut rows: Vec<(&String, &Resource)> = view
        .iter()
        .filter(|(k, _)| readable(k))
        .filter(|(k, _)| {
            let parts: Vec<&str> = k.split('/').collect();
            let (sub, rg) = (parts.get(2).copied().unwrap_or_default(), parts.get(4).copied().unwrap_or_default());
            if subs.as_ref().is_some_and(|s| !s.iter().any(|s| s == sub)) {
                return false;
            }
            let is_group = parts.len() == 5;
            if parsed.everything {
                return true;
            }
            if is_group {
                return parsed.containers.iter().any(|s| s.eq_ignore_ascii_case(sub));
            }
            parsed.whole.iter().any(|s| s.eq_ignore_ascii_case(sub))
                || parsed
                    .groups
                    .iter()
                    .any(|(s, gs)| s.eq_ignore_ascii_case(sub) && gs.iter().any(|g| g.eq_ignore_ascii_case(rg)))
        })
        .filter(|(_, res)| {
            res.tags
                .iter()
                .any(|(k, v)| keys.iter().any(|key| k.eq_ignore_ascii_case(key)) && v.eq_ignore_ascii_case("owned"))
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let lower_ids = st.lower_case_listing.clone();
    let all: Vec<(String, Value)> = rows
        .iter()
        .map(|(k, res)| {
            let lower = lower_ids.iter().any(|l| k.starts_with(&format!("{l}/")));
            let id = if lower { res.id.to_ascii_lowercase() } else { res.id.clone() };
            let kind = if k.split('/').count() == 5 {
                "microsoft.resources/subscriptions/resourcegroups".to_string()
            } else {
                tagwarden_core::resource::ResourceRef::from_arm_id(&res.id)
                    .map(|x| x.kind)
                    .unwrap_or_default()
                    .to_ascii_lowercase()
            };
            let tags: serde_json::Map<String, Value> = res.tags.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            ((*k).clone(), json!({"id": id, "type": kind, "tags": tags}))
        })
        .collect();
    let total = all.len();
    let page: Vec<(String, Value)> = all.into_iter().skip(offset).take(top).collect();
    let mut answer = json!({
        "totalRecords": total,
        "count": page.len(),
        "resultTruncated": "false",
        "facets": [],
        "data": page.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
    });
    if offset + top < total {
        st.next_id += 1;
        let token =
            super::azurite::base64_encode(format!("{{\"$skip\":{},\"n\":{}}}", offset + top, st.next_id).as_bytes());
        st.graph.tokens.insert(token.clone(), (offset + top, context));
        answer["$skipToken"] = json!(token);
    }
    for (key, _) in &page {
        if let Some(at) = st.delete_after_listing.iter().position(|d| d == key) {
            st.delete_after_listing.remove(at);
            st.resources.remove(key);
        }
    }
    Response::json(200, &answer)
}
