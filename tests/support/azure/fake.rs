//! Faithful fakes of the three Azure HTTP APIs the function calls, each on its own loopback port,
//! served by tagwarden's own HTTP server on a background thread:
//!
//! - **ARM Tags API** (reference/azure.md §3): `GET`/`PATCH` (`Merge`, `Replace`, `Delete`)/`PUT`
//!   on `{resourceId}/providers/Microsoft.Resources/tags/default?api-version=2021-04-01`, answering
//!   `{"id": "<resourceId>/providers/Microsoft.Resources/tags/default", "name": "default", "type":
//!   "Microsoft.Resources/tags", "properties": {"tags": {…}}}`. Every write goes through
//!   [`super::arm_rules`]: what ARM refuses (names, lengths, characters, per-type limits and
//!   rules, untaggable types, PATCH-less types, duplicates differing in case, the tag count at the
//!   end of the operation) is refused with ARM's status and `{"error": {"code", "message"}}`.
//!   Tag names compare case-insensitively (an existing name keeps its casing); 404
//!   `ResourceNotFound` for unknown resources; the tag-filtered `resources` / `resourcegroups`
//!   listings (no tags in the result, paged by `nextLink`). Every request must carry a token the
//!   fake identity issued for ARM. Faults: 429 + `Retry-After`, 202 + `Location` (ARM's
//!   `…/tagsoperationresults?…&$originalLocation=…` shape, polled until done; the write lands then).
//! - **Managed identity** (§4.1): `GET /msi/token?resource=&api-version=2019-08-01&client_id=`
//!   with `X-IDENTITY-HEADER`.
//! - **Azure Monitor custom metrics** (§5.1): `POST /<resourceId>/metrics`, kept for inspection.
//!
//! Every request is logged, so tests count calls by kind. Test set-up ([`FakeAzure::put_resource`],
//! [`FakeAzure::edit_tags`]) bypasses the rules: it describes what a resource carries, however it
//! came to.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tagwarden::azure::server::{self, Request, Response};

use super::arm_rules::{self, Refusal};
use tagwarden::TagMap;

pub const IDENTITY_HEADER: &str = "fake-identity-header-secret";
pub const ARM_AUDIENCE: &str = "https://management.azure.com/";
pub const MONITORING_AUDIENCE: &str = "https://monitoring.azure.com/";
const TAGS_SUFFIX: &str = "/providers/microsoft.resources/tags/default";
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
}

#[derive(Debug, Clone)]
struct Resource {
    id: String,
    tags: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer 429 with this `Retry-After` (seconds).
    Throttle { retry_after: u64 },
    /// Accept a write with 202 + `Location`; the operation answers 202 this many polls, then 200.
    Accept { polls: u32 },
    /// Answer with this status and ARM error code.
    Status { status: u16, code: &'static str },
}

/// An accepted write: (polls left, resource key, tags after the write).
type Operation = (u32, String, Vec<(String, String)>);

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
    /// Reads that still see a resource's tags from before its last write (reference/azure.md
    /// §3.5: "az tag update does not show the updated tags for managed disks … after a couple of
    /// seconds"), and how many each write leaves behind.
    stale: HashMap<String, (u32, Vec<(String, String)>)>,
    stale_reads_after_write: u32,
}

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

    pub fn clear_log(&self) {
        self.st().log.clear();
    }

    /// ARM requests as `METHOD kind`: `GET tags`, `PATCH tags`, `PUT tags`, `GET poll`, `GET list`.
    pub fn arm_calls(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter(|l| l.api == "arm")
            .map(|l| {
                let p = l.path.to_ascii_lowercase();
                let kind = if p.ends_with(TAGS_SUFFIX) {
                    "tags"
                } else if p.ends_with("/tagsoperationresults") {
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
    let resp = f(&mut st);
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

fn tags_body(id: &str, tags: &[(String, String)]) -> Value {
    let map: BTreeMap<&str, &str> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    json!({"id": format!("{id}/providers/Microsoft.Resources/tags/default"), "name": "default", "type": "Microsoft.Resources/tags", "properties": {"tags": map}})
}

fn arm_api(st: &mut State, r: &Request, base: &str) -> Response {
    match bearer_audience(st, r) {
        Some(a) if a.trim_end_matches('/') == ARM_AUDIENCE.trim_end_matches('/') => {}
        _ => return arm_error(401, "InvalidAuthenticationToken", "The access token is missing or invalid."),
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
            Fault::Throttle { retry_after } => {
                return arm_error(429, "TooManyRequests", "The request is being throttled.")
                    .with_header("retry-after", &retry_after.to_string());
            }
            Fault::Status { status, code } => return arm_error(status, code, "injected"),
            Fault::Accept { polls } => {
                if let Some(resp) = write(st, r, Some(polls), base) {
                    return resp;
                }
            }
        }
    }
    let path = r.path.clone();
    let lower = path.to_ascii_lowercase();
    if lower.ends_with("/tagsoperationresults") {
        let op = query_param(&r.query, "$originalLocation").and_then(|o| o.parse::<u64>().ok());
        let Some((left, key, tags)) = op.and_then(|op| st.operations.get_mut(&op)) else {
            return arm_error(404, "NotFound", "no such operation");
        };
        if *left > 0 {
            *left -= 1;
            return Response::json(202, &json!({})).with_header("retry-after", "0");
        }
        let (key, tags) = (key.clone(), tags.clone());
        if let Some(op) = op {
            st.operations.remove(&op);
        }
        apply(st, &key, tags);
        return Response::json(200, &json!({}));
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

fn not_found(id: &str) -> Response {
    arm_error(404, "ResourceNotFound", &format!("The Resource '{id}' was not found."))
}

fn refused(r: Refusal) -> Response {
    arm_error(r.status, r.code, &r.message)
}

/// PATCH/PUT on tags/default. `accept`: answer 202 and apply when polled to completion.
fn write(st: &mut State, r: &Request, accept: Option<u32>, base: &str) -> Option<Response> {
    let lower = r.path.to_ascii_lowercase();
    if !lower.ends_with(TAGS_SUFFIX) || !(r.method == "PATCH" || r.method == "PUT") {
        return None;
    }
    let key = lower[..lower.len() - TAGS_SUFFIX.len()].to_string();
    let Some(res) = st.resources.get(&key).cloned() else {
        return Some(not_found(&r.path[..r.path.len() - TAGS_SUFFIX.len()]));
    };
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
    if let Some(polls) = accept {
        st.next_id += 1;
        let op = st.next_id;
        st.operations.insert(op, (polls, key, after));
        let sub = res.id.split('/').nth(2).unwrap_or_default().to_string();
        // ARM's shape (reference/azure.md §3.5): an opaque `$originalLocation` on the subscription.
        let location =
            format!("{base}/subscriptions/{sub}/tagsoperationresults?api-version=2021-04-01&%24originalLocation={op}");
        return Some(
            Response::json(202, &json!({})).with_header("location", &location).with_header("retry-after", "0"),
        );
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
fn list(st: &State, r: &Request, lower: &str, base: &str) -> Response {
    let filter = query_param(&r.query, "$filter").unwrap_or_default();
    let quoted: Vec<&str> = filter.split('\'').skip(1).step_by(2).collect();
    let (Some(name), Some(value)) = (quoted.first(), quoted.get(1)) else {
        return arm_error(400, "InvalidFilterInQueryString", "the fake only serves tagName eq '…' and tagValue eq '…'");
    };
    let groups = lower.ends_with("/resourcegroups");
    let scope = lower.trim_end_matches("/resources").trim_end_matches("/resourcegroups");
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
    let skip = query_param(&r.query, "$skiptoken").and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
    let page: Vec<Value> = matching
        .iter()
        .skip(skip)
        .take(PAGE)
        .map(|r| {
            let kind = tagwarden::resource::ResourceRef::from_arm_id(&r.id).map(|x| x.kind).unwrap_or_default();
            json!({"id": r.id, "name": r.id.rsplit('/').next(), "type": kind, "location": "westeurope"})
        })
        .collect();
    let mut body = json!({"value": page});
    if skip + PAGE < matching.len() {
        let filter_q: String = filter
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        body["nextLink"] =
            json!(format!("{base}{}?%24filter={filter_q}&api-version=2021-04-01&%24skiptoken={}", r.path, skip + PAGE));
    }
    Response::json(200, &body)
}
