//! The ARM Tags API (Azure's documentation): read a resource's tags with
//! `GET {id}/providers/Microsoft.Resources/tags/default` and write with one
//! `PATCH … {"operation": "Merge", "properties": {"tags": {…}}}` per resource — never `Replace`,
//! never `Delete`, never a `PUT`, so every tag outside the write survives. Also lists the resources
//! carrying the ownership tag, for the sweep.
//!
//! Throttling (429), 408, 409 (resource busy) and 5xx wait for `Retry-After` or back off, except
//! what ARM's error code says is permanent (a `ScopeLocked` lock answers 409 too). A 202 is followed by
//! ARM's documented protocol (its `Azure-AsyncOperation` monitor, else its `Location`) until ARM says
//! the operation ended, and the write counts only if it `Succeeded`. A write is never verified by reading
//! the tags right after it: ARM serves stale reads for seconds to minutes after a write
//! (Azure's documentation). The PATCH response is the record, and planning is idempotent, so a
//! later stale read can only cause a repeated, harmless Merge. Every request carries an
//! `x-ms-client-request-id`, and errors keep ARM's `x-ms-request-id` and correlation id.
//!
//! Deliberately not here: deciding what to write (`tagwarden_core::plan`), resource-level `PUT`s, and
//! resource types' own update APIs (IP Groups and Firewall Policies, which refuse the Tags PATCH).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode, Url};
use serde_json::{json, Value};

use super::identity::{ManagedIdentity, ARM_AUDIENCE};
use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::OWNED;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::retry::{server_wait, Backoff, RetryAfter, ARM_POLL_TIMEOUT, MAX_RETRY_AFTER};

pub const API_VERSION: &str = "2021-04-01";
pub const TAGS_PATH: &str = "/providers/Microsoft.Resources/tags/default";

pub const OP_GET: &str = "arm:GetTags";
pub const OP_MERGE: &str = "arm:MergeTags";
pub const OP_POLL: &str = "arm:PollOperation";
pub const OP_LIST: &str = "arm:ListResources";
pub const OP_DESCENDANTS: &str = "arm:ListManagementGroupDescendants";
/// The Management Groups API's GA version with `descendants` (azure-rest-api-specs
/// `specification/managementgroups`, stable/2020-05-01).
pub const MANAGEMENT_GROUPS_API_VERSION: &str = "2020-05-01";

/// Retry budgets (defaults: [`tagwarden_engine::retry`]). They keep one event well inside Event Grid's
/// patience; what still fails goes back to Event Grid, which retries and finally dead-letters it.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Each request on 429, 408, 409, 5xx and transport errors; its `first` is also the poll interval.
    pub busy: Backoff,
    /// Reads of a resource that is not visible yet (404 right after its creation).
    pub not_found: Backoff,
    /// How long a 202 is polled before the write is reported as unfinished.
    pub poll_timeout: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry { busy: Backoff::ARM_BUSY, not_found: Backoff::ARM_NOT_FOUND, poll_timeout: ARM_POLL_TIMEOUT }
    }
}

/// The Tags API client.
#[derive(Clone)]
pub struct ArmClient {
    http: reqwest::Client,
    endpoint: Url,
    /// The token audience ARM at `endpoint` accepts ([`arm_audience`]).
    audience: String,
    identity: Arc<ManagedIdentity>,
    pub retry: Retry,
    pub calls: CallCounter,
}

/// How a write that ARM accepted asynchronously is followed (ARM RPC, async-api-reference.md,
/// "Asynchronous Operations"): `Azure-AsyncOperation` is preferred where both are given.
enum Monitor {
    /// `Azure-AsyncOperation`: answers 200 with `{"status": …}` until the status is terminal
    /// (`Succeeded`, `Failed`, `Canceled`); a failed operation names its `error`.
    AsyncOperation(Url),
    /// `Location`: answers 202 while the operation runs, then 200/204 when it succeeded, or the
    /// operation's error status and body when it failed.
    Location(Url),
}

impl ArmClient {
    /// `endpoint`: `https://management.azure.com` or a sovereign cloud's / a fake's; tokens are
    /// asked for the audience that endpoint accepts.
    pub fn new(http: reqwest::Client, endpoint: Url, identity: Arc<ManagedIdentity>, calls: CallCounter) -> Self {
        let audience = arm_audience(&endpoint, None);
        ArmClient { http, endpoint, audience, identity, retry: Retry::default(), calls }
    }

    /// The same client asking tokens for `audience` (Azure Stack Hub, a private cloud).
    pub fn with_audience(mut self, audience: &str) -> Self {
        self.audience = audience.to_string();
        self
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    fn url(&self, path: &str, query: &[(&str, &str)]) -> Url {
        self.url_at(path, query, API_VERSION)
    }

    /// `path` on the ARM endpoint with `query` and another API's `api_version` (Resource Graph's).
    pub(crate) fn url_at(&self, path: &str, query: &[(&str, &str)], api_version: &str) -> Url {
        let mut url = self.endpoint.clone();
        let base = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{base}{path}"));
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in query {
                q.append_pair(k, v);
            }
            q.append_pair("api-version", api_version);
        }
        url
    }

    fn tags_url(&self, resource_id: &str) -> Url {
        self.url(&format!("{}{TAGS_PATH}", resource_id.trim_end_matches('/')), &[])
    }

    /// The resource's tags. A 404 is retried with backoff (a resource just created may not be
    /// visible yet), then returned as a retryable `NotFound`.
    pub async fn get_tags(&self, resource_id: &str) -> Result<TagMap, CloudError> {
        let not_found = |e: &CloudError| e.class == ErrorClass::NotFound;
        self.retry.not_found.retry(not_found, |_| self.get_tags_listed(resource_id)).await
    }

    /// The tags of a resource a listing just named: a 404 means it was deleted since, and is
    /// returned at once.
    pub async fn get_tags_listed(&self, resource_id: &str) -> Result<TagMap, CloudError> {
        let resp = self.send(OP_GET, resource_id, Method::GET, self.tags_url(resource_id), None).await?;
        match resp.status {
            StatusCode::OK => parse_tags(OP_GET, resource_id, &resp.body),
            _ => Err(resp.error(OP_GET, resource_id)),
        }
    }

    /// Merge `tags` into the resource's tags: one PATCH, and after a 202 the operation followed
    /// until ARM says it finished. `Ok` only when it succeeded: a write that is still running, ends
    /// `Failed` or `Canceled`, or was accepted with nothing to follow is an error.
    pub async fn merge_tags(&self, resource_id: &str, tags: &TagMap) -> Result<(), CloudError> {
        let url = self.tags_url(resource_id);
        let body = json!({"operation": "Merge", "properties": {"tags": tags}});
        let resp = self.send(OP_MERGE, resource_id, Method::PATCH, url, Some(body)).await?;
        match resp.status.as_u16() {
            200 | 204 => Ok(()),
            201 | 202 => {
                let monitor = self.monitor(resource_id, &resp)?;
                self.follow(resource_id, monitor, resp.retry_after()).await
            }
            _ => Err(resp.error(OP_MERGE, resource_id)),
        }
    }

    /// Where an accepted write is followed; only on the ARM endpoint that accepted it (the bearer
    /// token goes nowhere else).
    fn monitor(&self, resource_id: &str, resp: &Response) -> Result<Monitor, CloudError> {
        let fail = |code: &str, message: String, class| {
            let mut e = CloudError::azure(OP_POLL, resource_id, Some(resp.status.as_u16()), code, &message, class);
            e.request_ids = resp.request_ids();
            e
        };
        let (header, link) = match (resp.header("azure-asyncoperation"), resp.header("location")) {
            (Some(a), _) => ("Azure-AsyncOperation", a),
            (None, Some(l)) => ("Location", l),
            (None, None) => {
                let why = "ARM accepted the write (202) without Azure-AsyncOperation or Location, so its end cannot be known; handed back to be read again".to_string();
                return Err(fail("OperationNotFollowable", why, ErrorClass::Transient));
            }
        };
        let url = Url::parse(&link)
            .or_else(|_| self.endpoint.join(&link))
            .map_err(|e| fail("BadLocation", format!("{header} {link:?}: {e}"), ErrorClass::Fatal))?;
        if url.origin() != self.endpoint.origin() {
            let why = format!("{header} {url} is not on the ARM endpoint {}", self.endpoint);
            return Err(fail("ForeignLocation", why, ErrorClass::Fatal));
        }
        Ok(if header == "Location" { Monitor::Location(url) } else { Monitor::AsyncOperation(url) })
    }

    /// Poll `monitor` until the operation ends, waiting each response's `Retry-After` (else the
    /// first backoff), for at most [`Retry::poll_timeout`]. Not a retry: each answer is a success
    /// that says "still running", so waits do not grow; and polling sooner than an over-long
    /// `Retry-After` asks is harmless, so it is polled at the limit instead of given up.
    async fn follow(
        &self,
        resource_id: &str,
        monitor: Monitor,
        first_wait: Option<Duration>,
    ) -> Result<(), CloudError> {
        let deadline = Instant::now() + self.retry.poll_timeout;
        let url = match &monitor {
            Monitor::AsyncOperation(u) | Monitor::Location(u) => u.clone(),
        };
        let next = |asked| server_wait(asked, self.retry.busy.first).unwrap_or(MAX_RETRY_AFTER);
        let mut wait = next(first_wait);
        loop {
            if Instant::now() + wait > deadline {
                let why = format!("still running after {:?}; not known to have finished", self.retry.poll_timeout);
                return Err(CloudError::azure(
                    OP_POLL,
                    resource_id,
                    Some(202),
                    "OperationNotFinished",
                    &why,
                    ErrorClass::Transient,
                ));
            }
            tokio::time::sleep(wait).await;
            let resp = self.send(OP_POLL, resource_id, Method::GET, url.clone(), None).await?;
            match (&monitor, resp.status.as_u16()) {
                (Monitor::Location(_), 202) => {}
                (Monitor::Location(_), 200 | 204) => return Ok(()),
                (Monitor::AsyncOperation(_), 200) => match operation_status(&resp.body) {
                    OperationStatus::Succeeded => return Ok(()),
                    OperationStatus::Running => {}
                    OperationStatus::Ended { status, code, message } => {
                        let class = match status.as_str() {
                            // Canceled by someone else: the next delivery writes again.
                            "Canceled" => ErrorClass::Transient,
                            _ => operation_class(&code, &message),
                        };
                        let message = format!("the operation ended {status}: {message}");
                        let mut e = CloudError::azure(OP_MERGE, resource_id, Some(200), &code, &message, class);
                        e.request_ids = resp.request_ids();
                        return Err(e);
                    }
                },
                // The Location of a failed operation answers with its error.
                _ => return Err(resp.error(OP_MERGE, resource_id)),
            }
            wait = next(resp.retry_after());
        }
    }

    /// Resources under `scope` (a subscription or resource group ID) that carry
    /// `<ownership key>=owned`, and, for a subscription scope, resource groups that do. The listing
    /// carries no tags when filtered by tag, so the caller re-reads each resource.
    pub async fn list_owned(&self, scope: &str, ownership_key: &str) -> Result<Vec<ResourceRef>, CloudError> {
        let scope = scope.trim_end_matches('/');
        let filter = format!("tagName eq '{}' and tagValue eq '{OWNED}'", ownership_key.replace('\'', "''"));
        let mut urls = vec![self.url(&format!("{scope}/resources"), &[("$filter", &filter)])];
        let is_subscription = scope.split('/').filter(|s| !s.is_empty()).count() == 2;
        if is_subscription {
            urls.push(self.url(&format!("{scope}/resourcegroups"), &[("$filter", &filter)]));
        }
        let mut out = Vec::new();
        for url in urls {
            let items = self.list_values(OP_LIST, scope, url).await?;
            out.extend(items.iter().filter_map(|item| {
                item.get("id").and_then(Value::as_str).and_then(|id| ResourceRef::from_arm_id(id).ok())
            }));
        }
        Ok(out)
    }

    /// The subscriptions under management group `group`, at any depth (`Management Groups - Get
    /// Descendants`, azure-rest-api-specs `specification/managementgroups` 2020-05-01, example
    /// `GetDescendants.json`: `value[]` of groups and subscriptions, a subscription's `type`
    /// `Microsoft.Management/managementGroups/subscriptions` and its `name` the subscription id;
    /// `nextLink` pages): what an ARM listing of a management group walks, as ARM lists no
    /// resources at that scope.
    pub async fn subscriptions_under(&self, group: &str) -> Result<Vec<String>, CloudError> {
        let target = format!("/providers/Microsoft.Management/managementGroups/{group}");
        let url = self.url_at(&format!("{target}/descendants"), &[], MANAGEMENT_GROUPS_API_VERSION);
        let items = self.list_values(OP_DESCENDANTS, &target, url).await?;
        let is_subscription = |item: &&Value| {
            item.get("type").and_then(Value::as_str).is_some_and(|t| {
                t.eq_ignore_ascii_case("Microsoft.Management/managementGroups/subscriptions")
                    || t.eq_ignore_ascii_case("/subscriptions")
            })
        };
        Ok(items
            .iter()
            .filter(is_subscription)
            .filter_map(|item| item.get("name").and_then(Value::as_str))
            .map(|sub| format!("/subscriptions/{sub}"))
            .collect())
    }

    /// Every `value[]` item of an ARM list from `first`, following `nextLink` on the ARM endpoint
    /// only.
    async fn list_values(&self, op: &'static str, target: &str, first: Url) -> Result<Vec<Value>, CloudError> {
        let mut out = Vec::new();
        let mut next = Some(first);
        while let Some(url) = next.take() {
            let resp = self.send(op, target, Method::GET, url, None).await?;
            if resp.status != StatusCode::OK {
                return Err(resp.error(op, target));
            }
            let mut page: Value = serde_json::from_str(&resp.body).map_err(|e| {
                CloudError::azure(op, target, Some(200), "BadListResponse", &e.to_string(), ErrorClass::Transient)
            })?;
            if let Some(Value::Array(items)) = page.get_mut("value").map(Value::take) {
                out.extend(items);
            }
            if let Some(link) = page.get("nextLink").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                let link = Url::parse(link).map_err(|e| {
                    CloudError::azure(op, target, Some(200), "BadNextLink", &e.to_string(), ErrorClass::Fatal)
                })?;
                if link.origin() != self.endpoint.origin() {
                    let why = format!("nextLink {link} is not on the ARM endpoint");
                    return Err(CloudError::azure(op, target, Some(200), "ForeignNextLink", &why, ErrorClass::Fatal));
                }
                next = Some(link);
            }
        }
        Ok(out)
    }

    /// One request with the retry policy for throttling and transient failures. Other statuses
    /// (including 404 and 202) are returned for the caller to interpret.
    pub(crate) async fn send(
        &self,
        op: &'static str,
        target: &str,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<Response, CloudError> {
        let (method, url, body) = (&method, &url, &body);
        // A lock or a disabled subscription answers 409 too; a token refused was retried already.
        let busy = |Busy(e, _): &Busy| e.operation == op && e.class.is_retryable();
        let attempt = |_| async move {
            let token = self.identity.token(&self.audience).await.map_err(|e| Busy(e, None))?;
            // ARM logs it with the request and echoes it back: a support case can name the call.
            let client_request_id = client_request_id();
            let mut req = self
                .http
                .request(method.clone(), url.clone())
                .bearer_auth(token)
                .header("x-ms-client-request-id", &client_request_id);
            if let Some(b) = body {
                req = req.header("content-type", "application/json").body(b.to_string());
            }
            self.calls.record(op);
            let resp = req.send().await.map_err(|e| Busy(crate::error::transport(op, target, &e), None))?;
            let resp = Response::read(resp, client_request_id).await;
            match resp.status.as_u16() {
                408 | 409 | 429 | 500..=599 => Err(Busy(resp.error(op, target), resp.retry_after())),
                _ => Ok(resp),
            }
        };
        self.retry.busy.retry(busy, attempt).await.map_err(|Busy(mut e, after)| {
            // Not waited for: say why.
            if let Some(after) = after.filter(|a| server_wait(Some(*a), Duration::ZERO).is_none()) {
                e.message = format!("{} (Retry-After {after:?} exceeds the {MAX_RETRY_AFTER:?} budget)", e.message);
            }
            e
        })
    }
}

/// The token audience ARM at `endpoint` accepts: `configured` if given, else the audience of the
/// known cloud whose Resource Manager endpoint it is (azure-sdk-for-go `sdk/azcore/cloud`,
/// `AzurePublic`/`AzureChina`/`AzureGovernment`: ResourceManager Audience and Endpoint), else the
/// public cloud's (a test fake, a proxy in front of ARM).
pub fn arm_audience(endpoint: &Url, configured: Option<&str>) -> String {
    if let Some(a) = configured.filter(|a| !a.trim().is_empty()) {
        return a.trim().to_string();
    }
    match endpoint.host_str().map(str::to_ascii_lowercase).as_deref() {
        Some("management.chinacloudapi.cn") => "https://management.core.chinacloudapi.cn/".to_string(),
        Some("management.usgovcloudapi.net") => "https://management.core.usgovcloudapi.net/".to_string(),
        _ => ARM_AUDIENCE.to_string(),
    }
}

/// A fresh UUID (version 4 layout) for `x-ms-client-request-id`, from the process's random hasher
/// keys and a counter: unique per request without a random-number dependency.
fn client_request_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(std::collections::hash_map::RandomState::new);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let half = |salt: u64| {
        let mut h = keys.build_hasher();
        h.write_u64(n);
        h.write_u64(salt);
        h.finish()
    };
    let (a, b) = (half(1), half(2));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        (b >> 48) & 0x3fff | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// What an `Azure-AsyncOperation` monitor says (ARM RPC async-api-reference.md: `status` is
/// `Succeeded`, `Failed` or `Canceled` when terminal; anything else, e.g. `InProgress`, is running).
#[derive(Debug, PartialEq, Eq)]
enum OperationStatus {
    Succeeded,
    Running,
    Ended { status: String, code: String, message: String },
}

fn operation_status(body: &str) -> OperationStatus {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let status = v.get("status").and_then(Value::as_str).unwrap_or_default();
    if status.eq_ignore_ascii_case("Succeeded") {
        return OperationStatus::Succeeded;
    }
    let terminal = ["Failed", "Canceled"].into_iter().find(|t| status.eq_ignore_ascii_case(t));
    let Some(status) = terminal else { return OperationStatus::Running };
    let error = v.get("error");
    let text = |k: &str| error.and_then(|e| e.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
    let code = Some(text("code")).filter(|c| !c.is_empty()).unwrap_or_else(|| format!("Operation{status}"));
    OperationStatus::Ended { status: status.to_string(), code, message: text("message") }
}

/// A failed operation's class, from its error code alone (the monitor answered 200): ARM's
/// permanent codes and refused requests are not retried; anything else may pass another time.
fn operation_class(code: &str, message: &str) -> ErrorClass {
    match super::error::classify(400, code, message) {
        ErrorClass::Fatal if code.contains("Internal") || code.contains("Timeout") || code.contains("Retryable") => {
            ErrorClass::Transient
        }
        class => class,
    }
}

/// A failed attempt and the wait ARM asked for, which only the retry reads.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Busy(CloudError, Option<Duration>);

impl RetryAfter for Busy {
    fn retry_after(&self) -> Option<Duration> {
        self.1
    }
}

/// A response read to the end.
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    headers: reqwest::header::HeaderMap,
    pub(crate) body: String,
    client_request_id: String,
}

/// Resource Graph's header for when the caller's quota resets (its throttling guidance).
pub const QUOTA_RESETS_AFTER: &str = "x-ms-user-quota-resets-after";

/// `x-ms-user-quota-resets-after`: `hh:mm:ss`, perhaps with a fraction of a second (.NET's
/// `TimeSpan`), as documented and recorded (`00:00:05`).
pub fn parse_resets_after(v: &str) -> Option<Duration> {
    let mut parts = v.trim().split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (h, m): (u64, u64) = (h.parse().ok()?, m.parse().ok()?);
    let s: f64 = s.parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs(h * 3600 + m * 60) + Duration::from_secs_f64(s))
}

impl Response {
    async fn read(r: reqwest::Response, client_request_id: String) -> Self {
        let status = r.status();
        let headers = r.headers().clone();
        let body = r.text().await.unwrap_or_default();
        Response { status, headers, body, client_request_id }
    }

    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    /// `Retry-After` in seconds (ARM sends seconds); for a 429 without one, the time until the
    /// caller's quota resets, where the service says (Resource Graph's [`QUOTA_RESETS_AFTER`]).
    fn retry_after(&self) -> Option<Duration> {
        let asked = self.header("retry-after").and_then(|v| v.trim().parse::<u64>().ok()).map(Duration::from_secs);
        let quota = || {
            (self.status == StatusCode::TOO_MANY_REQUESTS)
                .then(|| self.header(QUOTA_RESETS_AFTER))
                .flatten()
                .and_then(|v| parse_resets_after(&v))
        };
        asked.or_else(quota)
    }

    /// ARM's ids of this request (and the one tagwarden sent), for a support case.
    fn request_ids(&self) -> Vec<(&'static str, String)> {
        let mut ids: Vec<(&'static str, String)> = ["x-ms-request-id", "x-ms-correlation-request-id"]
            .into_iter()
            .filter_map(|h| self.header(h).map(|v| (h, v)))
            .collect();
        ids.push(("x-ms-client-request-id", self.client_request_id.clone()));
        ids
    }

    pub(crate) fn error(&self, op: &'static str, target: &str) -> CloudError {
        let mut e = crate::error::from_response(
            op,
            target,
            self.status.as_u16(),
            self.header("x-ms-error-code").as_deref(),
            &self.body,
        );
        e.request_ids = self.request_ids();
        e
    }
}

/// `properties.tags` of a Tags resource (absent or null: no tags).
fn parse_tags(op: &'static str, target: &str, body: &str) -> Result<TagMap, CloudError> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        CloudError::azure(op, target, Some(200), "BadTagsResponse", &e.to_string(), ErrorClass::Transient)
    })?;
    let mut tags = TagMap::new();
    if let Some(map) = v.pointer("/properties/tags").and_then(Value::as_object) {
        for (k, val) in map {
            // Values are strings; anything else is kept as its JSON text rather than dropped.
            let val = val.as_str().map(str::to_owned).unwrap_or_else(|| val.to_string());
            tags.insert(k.clone(), val);
        }
    }
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_read_leniently() {
        let t = parse_tags(OP_GET, "r", r#"{"id":"x","properties":{"tags":{"a":"1","B":"2"}}}"#).expect("tags");
        assert_eq!(t.len(), 2);
        assert!(parse_tags(OP_GET, "r", r#"{"properties":{}}"#).expect("empty").is_empty());
        assert!(parse_tags(OP_GET, "r", r#"{"properties":{"tags":null}}"#).expect("null").is_empty());
        assert!(parse_tags(OP_GET, "r", "not json").is_err());
    }
}
