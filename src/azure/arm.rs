//! The ARM Tags API (reference/azure.md §3): read a resource's tags with
//! `GET {id}/providers/Microsoft.Resources/tags/default` and write with one
//! `PATCH … {"operation": "Merge", "properties": {"tags": {…}}}` per resource — never `Replace`,
//! never `Delete`, never a `PUT`, so every tag outside the write survives. Also lists the resources
//! carrying the ownership tag, for the sweep.
//!
//! Throttling (429) waits for `Retry-After`; 5xx and 409 (resource busy) back off; a 202 is
//! followed to its `Location` until the operation finishes. A write is never verified by reading
//! the tags right after it: ARM serves stale reads for seconds to minutes after a write
//! (reference/azure.md §3.5). The PATCH response is the record, and planning is idempotent, so a
//! later stale read can only cause a repeated, harmless Merge.
//!
//! Deliberately not here: deciding what to write (`crate::plan`), resource-level `PUT`s, and
//! resource types' own update APIs (IP Groups and Firewall Policies, which refuse the Tags PATCH).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode, Url};
use serde_json::{json, Value};

use super::identity::{ManagedIdentity, ARM_AUDIENCE};
use crate::calls::CallCounter;
use crate::cloud::OWNED;
use crate::error_policy::Backoff;
use crate::error_policy::{CloudError, ErrorClass};
use crate::resource::ResourceRef;
use crate::TagMap;

pub const API_VERSION: &str = "2021-04-01";
pub const TAGS_PATH: &str = "/providers/Microsoft.Resources/tags/default";

pub const OP_GET: &str = "arm:GetTags";
pub const OP_MERGE: &str = "arm:MergeTags";
pub const OP_POLL: &str = "arm:PollOperation";
pub const OP_LIST: &str = "arm:ListResources";

/// Retry budgets. The defaults keep one event well inside Event Grid's patience; what still fails
/// goes back to Event Grid, which retries and finally dead-letters it.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Attempts per request on 429, 409, 5xx and transport errors.
    pub attempts: u32,
    /// First backoff (doubling) when the server names no `Retry-After`; also the poll interval.
    pub first: Duration,
    pub max: Duration,
    /// A `Retry-After` longer than this is not waited for: the call fails as throttled.
    pub max_retry_after: Duration,
    /// How long a 202 is polled before the write is reported as unfinished.
    pub poll_timeout: Duration,
    /// Reads of a resource that is not visible yet (404 right after its creation).
    pub not_found_attempts: u32,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 5,
            first: Duration::from_millis(500),
            max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
            poll_timeout: Duration::from_secs(120),
            not_found_attempts: 4,
        }
    }
}

impl Retry {
    fn backoff(&self, attempt: u32) -> Duration {
        Backoff { attempts: self.attempts, first: self.first, max: self.max }.delay(attempt)
    }
}

/// How a Merge ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The tags as the PATCH response gave them (`None` after a 202: the poll result has no body).
    pub tags: Option<TagMap>,
    /// 202 + `Location`: the operation was polled to completion.
    pub polled: bool,
}

/// The Tags API client.
pub struct ArmClient {
    http: reqwest::Client,
    endpoint: Url,
    identity: Arc<ManagedIdentity>,
    pub retry: Retry,
    pub calls: CallCounter,
}

impl ArmClient {
    /// `endpoint`: `https://management.azure.com` or a sovereign cloud's / a fake's.
    pub fn new(http: reqwest::Client, endpoint: Url, identity: Arc<ManagedIdentity>, calls: CallCounter) -> Self {
        ArmClient { http, endpoint, identity, retry: Retry::default(), calls }
    }

    fn url(&self, path: &str, query: &[(&str, &str)]) -> Url {
        let mut url = self.endpoint.clone();
        let base = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{base}{path}"));
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in query {
                q.append_pair(k, v);
            }
            q.append_pair("api-version", API_VERSION);
        }
        url
    }

    fn tags_url(&self, resource_id: &str) -> Url {
        self.url(&format!("{}{TAGS_PATH}", resource_id.trim_end_matches('/')), &[])
    }

    /// The resource's tags. A 404 is retried with backoff (a resource just created may not be
    /// visible yet), then returned as a retryable `NotFound`.
    pub async fn get_tags(&self, resource_id: &str) -> Result<TagMap, CloudError> {
        let url = self.tags_url(resource_id);
        let mut attempt = 0;
        loop {
            let resp = self.send(OP_GET, resource_id, Method::GET, url.clone(), None).await?;
            match resp.status {
                StatusCode::OK => return parse_tags(OP_GET, resource_id, &resp.body),
                StatusCode::NOT_FOUND if attempt + 1 < self.retry.not_found_attempts => {
                    tracing::debug!(resource = resource_id, attempt, "not visible yet; retrying");
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    attempt += 1;
                }
                _ => return Err(resp.error(OP_GET, resource_id)),
            }
        }
    }

    /// Merge `tags` into the resource's tags: one PATCH (plus polls after a 202).
    pub async fn merge_tags(&self, resource_id: &str, tags: &TagMap) -> Result<Written, CloudError> {
        let url = self.tags_url(resource_id);
        let body = json!({"operation": "Merge", "properties": {"tags": tags}});
        let resp = self.send(OP_MERGE, resource_id, Method::PATCH, url, Some(body)).await?;
        match resp.status {
            StatusCode::OK => Ok(Written { tags: parse_tags(OP_MERGE, resource_id, &resp.body).ok(), polled: false }),
            StatusCode::ACCEPTED => {
                let location = resp.header("location").or_else(|| resp.header("azure-asyncoperation"));
                let Some(location) = location else {
                    // Accepted with nothing to follow: ARM will finish it; idempotent planning
                    // catches it on the next event or sweep if it did not.
                    tracing::warn!(resource = resource_id, "202 without Location; treating the write as accepted");
                    return Ok(Written { tags: None, polled: false });
                };
                self.poll(resource_id, &location, resp.retry_after()).await?;
                Ok(Written { tags: None, polled: true })
            }
            _ => Err(resp.error(OP_MERGE, resource_id)),
        }
    }

    /// Follow a 202's `Location` until it answers 200/204.
    async fn poll(&self, resource_id: &str, location: &str, first_wait: Option<Duration>) -> Result<(), CloudError> {
        let url = Url::parse(location).or_else(|_| self.endpoint.join(location)).map_err(|e| {
            CloudError::azure(
                OP_POLL,
                resource_id,
                Some(202),
                "BadLocation",
                &format!("{location:?}: {e}"),
                ErrorClass::Fatal,
            )
        })?;
        // The bearer token goes only to the ARM endpoint that issued the 202.
        if url.origin() != self.endpoint.origin() {
            return Err(CloudError::azure(
                OP_POLL,
                resource_id,
                Some(202),
                "ForeignLocation",
                &format!("Location {url} is not on the ARM endpoint {}", self.endpoint),
                ErrorClass::Fatal,
            ));
        }
        let deadline = Instant::now() + self.retry.poll_timeout;
        let mut wait = first_wait.unwrap_or(self.retry.first).min(self.retry.max_retry_after);
        loop {
            tokio::time::sleep(wait).await;
            let resp = self.send(OP_POLL, resource_id, Method::GET, url.clone(), None).await?;
            match resp.status.as_u16() {
                200 | 204 => return Ok(()),
                202 => {
                    if Instant::now() >= deadline {
                        return Err(CloudError::azure(
                            OP_POLL,
                            resource_id,
                            Some(202),
                            "OperationNotFinished",
                            &format!("still running after {:?}", self.retry.poll_timeout),
                            ErrorClass::Transient,
                        ));
                    }
                    wait = resp.retry_after().unwrap_or(self.retry.first).min(self.retry.max_retry_after);
                }
                _ => return Err(resp.error(OP_POLL, resource_id)),
            }
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
        for first in urls {
            let mut next = Some(first);
            while let Some(url) = next.take() {
                let resp = self.send(OP_LIST, scope, Method::GET, url, None).await?;
                if resp.status != StatusCode::OK {
                    return Err(resp.error(OP_LIST, scope));
                }
                let page: Value = serde_json::from_str(&resp.body).map_err(|e| {
                    CloudError::azure(
                        OP_LIST,
                        scope,
                        Some(200),
                        "BadListResponse",
                        &e.to_string(),
                        ErrorClass::Transient,
                    )
                })?;
                for item in page.get("value").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(r) =
                        item.get("id").and_then(Value::as_str).and_then(|id| ResourceRef::from_arm_id(id).ok())
                    {
                        out.push(r);
                    }
                }
                if let Some(link) = page.get("nextLink").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                    let link = Url::parse(link).map_err(|e| {
                        CloudError::azure(OP_LIST, scope, Some(200), "BadNextLink", &e.to_string(), ErrorClass::Fatal)
                    })?;
                    if link.origin() != self.endpoint.origin() {
                        return Err(CloudError::azure(
                            OP_LIST,
                            scope,
                            Some(200),
                            "ForeignNextLink",
                            &format!("nextLink {link} is not on the ARM endpoint"),
                            ErrorClass::Fatal,
                        ));
                    }
                    next = Some(link);
                }
            }
        }
        Ok(out)
    }

    /// One request with the retry policy for throttling and transient failures. Other statuses
    /// (including 404 and 202) are returned for the caller to interpret.
    async fn send(
        &self,
        op: &'static str,
        target: &str,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<Response, CloudError> {
        let mut last = None;
        for attempt in 0..self.retry.attempts.max(1) {
            let token = self.identity.token(ARM_AUDIENCE).await?;
            let mut req = self.http.request(method.clone(), url.clone()).bearer_auth(token);
            if let Some(b) = &body {
                req = req.header("content-type", "application/json").body(b.to_string());
            }
            self.calls.record(op);
            let resp = match req.send().await {
                Ok(r) => Response::read(r).await,
                Err(e) => {
                    last = Some(CloudError::transport(op, target, &e));
                    tokio::time::sleep(self.retry.backoff(attempt)).await;
                    continue;
                }
            };
            let wait = match resp.status.as_u16() {
                429 => match resp.retry_after() {
                    Some(after) if after > self.retry.max_retry_after => {
                        let mut e = resp.error(op, target);
                        e.message = format!(
                            "{} (Retry-After {after:?} exceeds the {:?} budget)",
                            e.message, self.retry.max_retry_after
                        );
                        return Err(e);
                    }
                    Some(after) => after,
                    None => self.retry.backoff(attempt),
                },
                408 | 409 | 500..=599 => {
                    resp.retry_after().unwrap_or(self.retry.backoff(attempt)).min(self.retry.max_retry_after)
                }
                _ => return Ok(resp),
            };
            tracing::info!(op, target, status = resp.status.as_u16(), wait_ms = wait.as_millis() as u64, "retrying");
            last = Some(resp.error(op, target));
            tokio::time::sleep(wait).await;
        }
        Err(last.unwrap_or_else(|| CloudError::azure(op, target, None, "NoAttempt", "", ErrorClass::Transient)))
    }
}

/// A response read to the end.
struct Response {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Response {
    async fn read(r: reqwest::Response) -> Self {
        let status = r.status();
        let headers = r.headers().clone();
        let body = r.text().await.unwrap_or_default();
        Response { status, headers, body }
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    /// `Retry-After` in seconds (ARM sends seconds).
    fn retry_after(&self) -> Option<Duration> {
        self.header("retry-after").and_then(|v| v.trim().parse::<u64>().ok()).map(Duration::from_secs)
    }

    fn error(&self, op: &'static str, target: &str) -> CloudError {
        CloudError::from_response(
            op,
            target,
            self.status.as_u16(),
            self.header("x-ms-error-code").as_deref(),
            &self.body,
        )
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
