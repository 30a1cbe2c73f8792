//! The policy in Cloud Storage: `gs://BUCKET/NAME` (one object), `gs://BUCKET/PREFIX/` (layers) or
//! `gs://BUCKET/PREFIX*/` (a cluster set: one folder per infraID), over the JSON API.
//!
//! JSON API (Cloud Storage reference, Objects): `objects.get` with `alt=media` returns the bytes
//! and the object's generation in `x-goog-generation`; `ifGenerationNotMatch` answers 304 when
//! the generation is unchanged (checked again here, for a server that ignores it); `objects.list`
//! with `prefix`, followed by `nextPageToken`; `objects.insert` (`uploadType=media`) with
//! `ifGenerationMatch` (`0`: only if absent), 412 when the precondition fails. A generation is the
//! ETag the store compares. `STORAGE_EMULATOR_HOST` points every call at an emulator, as Google's
//! client libraries do.

use std::fmt;

use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy::{self, STATUS_REPORT_NAME};
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::policy_store::{self, Layout, ListedObject, Object, PolicySource, PutError};

use crate::clients::{encode_segment as encode, Clients};
use crate::error::{from_response, transport};

const OP_GET: &str = "gcs:GetObject";
const OP_LIST: &str = "gcs:ListObjects";
const OP_PUT: &str = "gcs:PutObject";

/// Where the policy is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcsLocation {
    pub bucket: String,
    /// The object, the prefix (ending in `/`, or empty) or the set's prefix (before the `*`).
    pub name: String,
    pub is_prefix: bool,
    pub is_set: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("TAGWARDEN_POLICY={input:?}: {why}; expected gs://BUCKET/OBJECT.yaml, gs://BUCKET/PREFIX/ (layers) or gs://BUCKET/PREFIX*/ (a cluster set)")]
pub struct BadLocation {
    pub input: String,
    pub why: &'static str,
}

impl GcsLocation {
    pub fn parse(input: &str) -> Result<Self, BadLocation> {
        let bad = |why| BadLocation { input: input.to_string(), why };
        let rest = input.strip_prefix("gs://").ok_or_else(|| bad("not a gs:// URL"))?;
        let (bucket, name) = rest.split_once('/').unwrap_or((rest, ""));
        // Bucket names: 3 to 63 characters of lowercase letters, digits, `-`, `_` and `.`
        // (Cloud Storage, Bucket naming requirements; dotted names up to 222 are left out here).
        let valid = (3..=63).contains(&bucket.len())
            && bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
        if !valid {
            return Err(bad("the bucket name is not a valid Cloud Storage bucket name"));
        }
        let (name, is_set) = match name.strip_suffix("*/") {
            Some(prefix) => (prefix.to_string(), true),
            None if name.contains('*') => return Err(bad("a set is written PREFIX*/, with the * last")),
            None => (name.to_string(), false),
        };
        let is_prefix = !is_set && (name.is_empty() || name.ends_with('/'));
        Ok(GcsLocation { bucket: bucket.to_string(), name, is_prefix, is_set })
    }

    fn status_name(&self, cluster: Option<&str>) -> String {
        match (self.is_set, cluster) {
            (true, Some(c)) => format!("{}{c}/{STATUS_REPORT_NAME}", self.name),
            _ if self.is_prefix => format!("{}{STATUS_REPORT_NAME}", self.name),
            _ => {
                let dir = self.name.rsplit_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_default();
                format!("{dir}{STATUS_REPORT_NAME}")
            }
        }
    }
}

impl fmt::Display for GcsLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gs://{}/{}{}", self.bucket, self.name, if self.is_set { "*/" } else { "" })
    }
}

/// The endpoint of the JSON API: `emulator_host` (`STORAGE_EMULATOR_HOST`: `host:port` or a URL)
/// when set, else Google's.
pub fn storage_endpoint(emulator_host: Option<&str>) -> String {
    match emulator_host.map(|h| h.trim().trim_end_matches('/')) {
        Some(h) if h.starts_with("http://") || h.starts_with("https://") => h.to_string(),
        Some(h) if !h.is_empty() => format!("http://{h}"),
        _ => "https://storage.googleapis.com".to_string(),
    }
}

pub struct GcsSource {
    pub location: GcsLocation,
    endpoint: String,
    clients: std::sync::Arc<Clients>,
    calls: CallCounter,
}

impl GcsSource {
    pub fn new(location: GcsLocation, endpoint: String, clients: std::sync::Arc<Clients>, calls: CallCounter) -> Self {
        GcsSource { location, endpoint: endpoint.trim_end_matches('/').to_string(), clients, calls }
    }

    fn object_url(&self, name: &str) -> String {
        format!("{}/storage/v1/b/{}/o/{}", self.endpoint, self.location.bucket, encode(name))
    }

    fn display(&self, name: &str) -> String {
        format!("gs://{}/{name}", self.location.bucket)
    }

    fn status_object(&self, cluster: Option<&str>) -> Result<String, CloudError> {
        if let Some(why) = cluster.and_then(|c| policy::clusters::valid_infra_id(c).err()) {
            let message = format!("no status report for it: {why}");
            return Err(CloudError::gcp(
                OP_PUT,
                &self.location.to_string(),
                None,
                "InvalidClusterName",
                &message,
                ErrorClass::Fatal,
            ));
        }
        Ok(self.location.status_name(cluster))
    }

    /// A multipart upload (JSON API, "Perform a multipart upload": `uploadType=multipart`, a
    /// `multipart/related` body of the object's metadata, then its bytes), as Google's Storage
    /// clients send small objects; conditional on `generation` (`ifGenerationMatch`, `0`: only if
    /// absent). Multipart, not a media upload, also because an emulator may read a media upload
    /// of `application/json` as metadata.
    async fn write(&self, name: &str, text: &str, generation: Option<&str>) -> Result<String, PutError<CloudError>> {
        let target = self.display(name);
        let url = format!(
            "{}/upload/storage/v1/b/{}/o?uploadType=multipart&ifGenerationMatch={}",
            self.endpoint,
            self.location.bucket,
            generation.unwrap_or("0")
        );
        let content_type = policy_store::content_type(name);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let boundary = format!("tagwarden-{nanos:x}-{}", text.len());
        let metadata = serde_json::json!({"name": name, "contentType": content_type});
        let body = format!(
            "--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n{metadata}\r\n--{boundary}\r\ncontent-type: {content_type}\r\n\r\n{text}\r\n--{boundary}--\r\n"
        );
        let req = self.clients.authorized(self.clients.http.post(url)).await.map_err(PutError::Source)?;
        let req = req.header("content-type", format!("multipart/related; boundary={boundary}")).body(body);
        self.calls.record(OP_PUT);
        let resp = req.send().await.map_err(|e| PutError::Source(transport(OP_PUT, &target, &e)))?;
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        match status {
            200 => {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                Ok(v.get("generation").and_then(|g| g.as_str()).unwrap_or_default().to_string())
            }
            412 => Err(PutError::Conflict { found: "a newer generation".into() }),
            _ => Err(PutError::Source(from_response(OP_PUT, &target, status, &body))),
        }
    }
}

impl PolicySource for GcsSource {
    type Error = CloudError;

    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }

    fn location(&self) -> String {
        self.location.to_string()
    }

    fn layout(&self) -> Layout {
        let name = self.location.name.clone();
        match (self.location.is_set, self.location.is_prefix) {
            (true, _) => Layout::Set(name),
            (_, true) => Layout::Prefix(name),
            _ => Layout::One(name),
        }
    }

    async fn get(&self, name: &str, etag: Option<&str>) -> Result<Option<Object>, CloudError> {
        let target = self.display(name);
        let mut url = format!("{}?alt=media", self.object_url(name));
        if let Some(generation) = etag.filter(|g| !g.is_empty()) {
            url.push_str(&format!("&ifGenerationNotMatch={generation}"));
        }
        let req = self.clients.authorized(self.clients.http.get(url)).await?;
        self.calls.record(OP_GET);
        let resp = req.send().await.map_err(|e| transport(OP_GET, &target, &e))?;
        let status = resp.status().as_u16();
        if status == 304 {
            return Ok(None);
        }
        let generation = resp.headers().get("x-goog-generation").and_then(|v| v.to_str().ok()).map(str::to_owned);
        if status != 200 {
            let body = resp.text().await.unwrap_or_default();
            return Err(from_response(OP_GET, &target, status, &body));
        }
        let generation = generation.unwrap_or_default();
        if etag.is_some_and(|e| !e.is_empty() && e == generation) {
            return Ok(None);
        }
        if resp.content_length().is_some_and(|n| n > policy::load::MAX_DOCUMENT_BYTES as u64) {
            let limit = format!("the limit is {} bytes", policy::load::MAX_DOCUMENT_BYTES);
            return Err(CloudError::gcp(OP_GET, &target, Some(200), "PolicyTooLarge", &limit, ErrorClass::Fatal));
        }
        let bytes = resp.bytes().await.map_err(|e| transport(OP_GET, &target, &e))?;
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            CloudError::gcp(
                OP_GET,
                &target,
                Some(200),
                "NotUtf8",
                "a policy document must be UTF-8 text",
                ErrorClass::Fatal,
            )
        })?;
        Ok(Some(Object { etag: generation, text }))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>, CloudError> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Page {
            #[serde(default)]
            items: Vec<Item>,
            next_page_token: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct Item {
            name: String,
            #[serde(default)]
            generation: String,
            size: Option<String>,
        }
        let target = self.location.to_string();
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url =
                format!("{}/storage/v1/b/{}/o?prefix={}", self.endpoint, self.location.bucket, encode(prefix));
            if let Some(t) = &token {
                url.push_str(&format!("&pageToken={}", encode(t)));
            }
            let req = self.clients.authorized(self.clients.http.get(url)).await?;
            self.calls.record(OP_LIST);
            let resp = req.send().await.map_err(|e| transport(OP_LIST, &target, &e))?;
            let status = resp.status().as_u16();
            let body = resp.text().await.map_err(|e| transport(OP_LIST, &target, &e))?;
            if status != 200 {
                return Err(from_response(OP_LIST, &target, status, &body));
            }
            let page: Page = serde_json::from_str(&body).map_err(|e| {
                CloudError::gcp(OP_LIST, &target, Some(200), "BadAnswer", &e.to_string(), ErrorClass::Fatal)
            })?;
            out.extend(page.items.into_iter().map(|i| ListedObject {
                name: i.name,
                etag: i.generation,
                size: i.size.and_then(|s| s.parse().ok()),
            }));
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        out.sort();
        Ok(out)
    }

    fn no_documents(&self) -> CloudError {
        CloudError::gcp(
            OP_LIST,
            &self.location.to_string(),
            None,
            "NoPolicyDocuments",
            "no .yaml, .yml or .json object under the prefix: publish the policy there",
            ErrorClass::Fatal,
        )
    }

    fn is_absent(&self, e: &CloudError) -> bool {
        e.status == Some(404)
    }

    fn location_of(&self, name: &str) -> String {
        self.display(name)
    }

    async fn put(&self, name: &str, text: &str, expected: Option<&str>) -> Result<String, PutError<CloudError>> {
        self.write(name, text, expected).await
    }

    /// `_tagwarden/contests/<infraID>.json` in the policy's bucket: outside every publisher's folder.
    fn contest_state_name(&self, infra_id: &str) -> Option<String> {
        policy::clusters::valid_infra_id(infra_id).ok()?;
        Some(policy_store::contest_state_object(infra_id))
    }

    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, CloudError> {
        Ok(self.get_status_tagged(cluster).await?.map(|o| o.text))
    }

    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), CloudError> {
        let name = self.status_object(cluster)?;
        let current = self.get_status_tagged(cluster).await?.map(|o| o.etag);
        self.write(&name, text, current.as_deref()).await.map(|_| ()).map_err(|e| match e {
            PutError::Source(e) => e,
            other => CloudError::gcp(OP_PUT, &name, None, "Conflict", &other.to_string(), ErrorClass::Transient),
        })
    }

    async fn get_status_tagged(&self, cluster: Option<&str>) -> Result<Option<Object>, CloudError> {
        match self.get(&self.status_object(cluster)?, None).await {
            Ok(found) => Ok(found),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn put_status_if(
        &self,
        cluster: Option<&str>,
        text: &str,
        expected: Option<&str>,
    ) -> Result<(), PutError<CloudError>> {
        let name = self.status_object(cluster).map_err(PutError::Source)?;
        self.write(&name, text, expected).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        let one = GcsLocation::parse("gs://policies/cluster/policy.yaml").expect("one");
        assert!(!one.is_prefix && !one.is_set);
        assert_eq!(one.status_name(None), "cluster/tagwarden-status.json");
        let set = GcsLocation::parse("gs://policies/clusters/*/").expect("set");
        assert!(set.is_set);
        assert_eq!(set.name, "clusters/");
        assert_eq!(set.status_name(Some("c-1")), "clusters/c-1/tagwarden-status.json");
        assert_eq!(set.to_string(), "gs://policies/clusters/*/");
        assert!(GcsLocation::parse("gs://policies/").expect("prefix").is_prefix);
        for bad in ["s3://b/k", "gs://B/k", "gs://ab/k", "gs://policies/a*/b/"] {
            assert!(GcsLocation::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(encode("a/b c.yaml"), "a%2Fb%20c.yaml");
    }
}
