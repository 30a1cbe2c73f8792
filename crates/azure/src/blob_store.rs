//! The cluster-published policy on Azure (docs/src/concepts/policy.md): one blob, every blob under a
//! prefix (layered in name order), or a cluster set (`…/PREFIX/*/`: one policy per cluster under
//! `PREFIX/<infraID>/`), read over the Blob REST API.
//!
//! `TAGWARDEN_POLICY` is the blob's URL, or the prefix's URL ending in `/`, on the storage
//! account's own endpoint: `https://<account>.blob.core.windows.net/<container>/<name>`, or
//! path-style `http://127.0.0.1:10000/devstoreaccount1/<container>/<name>` for Azurite (any IP or
//! `localhost` host is read path-style). A SAS query string on the URL is passed through as-is;
//! without one, requests carry a managed-identity token for `https://storage.azure.com/`.
//!
//! These are the calls behind the one policy store (`tagwarden_engine::policy_store`, which holds the re-check rules
//! for both clouds): a blob fetched with `If-None-Match` (a 304 downloads nothing), a prefix listed
//! (List Blobs XML), and the status report `tagwarden-status.json` beside the policy.
//!
//! Deliberately not here: shared-key signing (tests use an account SAS), blob versions/snapshots,
//! and any XML beyond the few List Blobs elements read here.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, Url};

use super::identity::{ManagedIdentity, STORAGE_AUDIENCE};
use crate::xml::{xml_elements, xml_text};
use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::policy_store::{self, Layout, ListedObject, Object, PolicySource, PutError};

mod location;

pub use location::{BlobLocation, BlobLocationError};

/// The Blob REST API version sent as `x-ms-version`.
pub const STORAGE_VERSION: &str = "2021-08-06";

pub const OP_GET: &str = "blob:GetBlob";
pub const OP_LIST: &str = "blob:ListBlobs";
pub const OP_PUT: &str = "blob:PutBlob";

/// The policy store on Azure.
pub type BlobPolicyStore = policy_store::PolicyStore<BlobSource>;

/// Blob Storage as a policy [`PolicySource`].
pub struct BlobSource {
    pub location: BlobLocation,
    http: reqwest::Client,
    /// For the bearer token when the URL carries no SAS.
    identity: Option<Arc<ManagedIdentity>>,
    pub calls: CallCounter,
}

impl BlobSource {
    pub fn new(
        location: BlobLocation,
        http: reqwest::Client,
        identity: Option<Arc<ManagedIdentity>>,
        calls: CallCounter,
    ) -> Self {
        BlobSource { location, http, identity, calls }
    }

    pub(crate) async fn request(&self, method: Method, url: Url) -> Result<reqwest::RequestBuilder, CloudError> {
        let mut req = self.http.request(method, url).header("x-ms-version", STORAGE_VERSION);
        if !self.location.has_sas() {
            if let Some(id) = &self.identity {
                req = req.bearer_auth(id.token(STORAGE_AUDIENCE).await?);
            }
        }
        Ok(req)
    }
}

impl BlobSource {
    /// Where cluster `cluster`'s status report is: only ever `<prefix><infraID>/` of the set, never
    /// where a name with `/` or `..` would lead (the URL parser would resolve `..`).
    fn status_name(&self, cluster: Option<&str>) -> Result<String, CloudError> {
        if let Some(why) = cluster.and_then(|c| policy::clusters::valid_infra_id(c).err()) {
            let message = format!("no status report for it: {why}");
            let location = self.location.to_string();
            return Err(CloudError::azure(OP_PUT, &location, None, "InvalidClusterName", &message, ErrorClass::Fatal));
        }
        Ok(self.location.status_name(cluster))
    }
}

/// A store for `location`, re-checked at most every `ttl`.
pub fn blob_policy_store(
    location: BlobLocation,
    ttl: Duration,
    http: reqwest::Client,
    identity: Option<Arc<ManagedIdentity>>,
    calls: CallCounter,
) -> BlobPolicyStore {
    BlobPolicyStore::new(BlobSource::new(location, http, identity, calls), ttl)
}

impl PolicySource for BlobSource {
    type Error = CloudError;

    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn location(&self) -> String {
        self.location.to_string()
    }

    fn layout(&self) -> Layout {
        if self.location.is_set {
            Layout::Set(self.location.name.clone())
        } else if self.location.is_prefix {
            Layout::Prefix(self.location.name.clone())
        } else {
            Layout::One(self.location.name.clone())
        }
    }

    /// `(ETag, text)`, or `None` on 304 Not Modified.
    async fn get(&self, name: &str, etag: Option<&str>) -> Result<Option<Object>, CloudError> {
        let target = self.location.display_name(name);
        let mut req = self.request(Method::GET, self.location.blob_url(name)).await?;
        if let Some(e) = etag {
            req = req.header("if-none-match", e);
        }
        self.calls.record(OP_GET);
        let resp = req.send().await.map_err(|e| transport(OP_GET, &target, e))?;
        let status = resp.status().as_u16();
        if status == 304 {
            return Ok(None);
        }
        let header = |n: &str| resp.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let (etag, code) = (header("etag").unwrap_or_default(), header("x-ms-error-code"));
        if status != 200 {
            let body = resp.text().await.unwrap_or_default();
            return Err(crate::error::from_response(OP_GET, &target, status, code.as_deref(), &body));
        }
        if resp.content_length().is_some_and(|n| n > policy::load::MAX_DOCUMENT_BYTES as u64) {
            return Err(CloudError::azure(
                OP_GET,
                &target,
                Some(200),
                "PolicyTooLarge",
                &format!("the limit is {} bytes", policy::load::MAX_DOCUMENT_BYTES),
                ErrorClass::Fatal,
            ));
        }
        let bytes = resp.bytes().await.map_err(|e| transport(OP_GET, &target, e))?;
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            CloudError::azure(
                OP_GET,
                &target,
                Some(200),
                "NotUtf8",
                "a policy document must be UTF-8 text",
                ErrorClass::Fatal,
            )
        })?;
        Ok(Some(Object { etag, text }))
    }

    /// Every blob under the prefix, by name, with ETags (List Blobs XML, followed by NextMarker).
    async fn list(&self, _prefix: &str) -> Result<Vec<ListedObject>, CloudError> {
        let target = self.location.to_string();
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let req = self.request(Method::GET, self.location.list_url(marker.as_deref())).await?;
            self.calls.record(OP_LIST);
            let resp = req.send().await.map_err(|e| transport(OP_LIST, &target, e))?;
            let status = resp.status().as_u16();
            let code = resp.headers().get("x-ms-error-code").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let body = resp.text().await.map_err(|e| transport(OP_LIST, &target, e))?;
            if status != 200 {
                return Err(crate::error::from_response(OP_LIST, &target, status, code.as_deref(), &body));
            }
            for blob in xml_elements(&body, "Blob") {
                let Some(name) = xml_text(blob, "Name") else { continue };
                let etag = normalize_etag(&xml_text(blob, "Etag").unwrap_or_default());
                let size = xml_text(blob, "Content-Length").and_then(|n| n.trim().parse().ok());
                out.push(ListedObject { name, etag, size });
            }
            marker = xml_text(&body, "NextMarker").filter(|m| !m.is_empty());
            if marker.is_none() {
                break;
            }
        }
        Ok(out)
    }

    fn no_documents(&self) -> CloudError {
        CloudError::azure(
            OP_LIST,
            &self.location.to_string(),
            None,
            "NoPolicyDocuments",
            "no .yaml, .yml or .json blob under the prefix: publish the policy there",
            ErrorClass::Fatal,
        )
    }

    fn is_absent(&self, e: &CloudError) -> bool {
        e.status == Some(404)
    }

    fn location_of(&self, name: &str) -> String {
        self.location.display_name(name)
    }

    async fn put(&self, name: &str, text: &str, expected: Option<&str>) -> Result<String, PutError<CloudError>> {
        let target = self.location.display_name(name);
        let req = self.request(Method::PUT, self.location.blob_url(name)).await.map_err(PutError::Source)?;
        // Put Blob's conditional headers: `If-Match` replaces only that ETag, `If-None-Match: *`
        // creates only. A lost race is 412 ConditionNotMet, or 409 BlobAlreadyExists.
        let req = match expected {
            Some(etag) => req.header("if-match", etag),
            None => req.header("if-none-match", "*"),
        };
        let req = req
            .header("x-ms-blob-type", "BlockBlob")
            .header("content-type", policy_store::content_type(name))
            .body(text.to_string());
        self.calls.record(OP_PUT);
        let resp = req.send().await.map_err(|e| PutError::Source(transport(OP_PUT, &target, e)))?;
        let status = resp.status().as_u16();
        let header = |n: &str| resp.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
        match status {
            200..=299 => Ok(header("etag").unwrap_or_default()),
            409 | 412 => Err(PutError::Conflict { found: "a newer blob".into() }),
            _ => {
                let code = header("x-ms-error-code");
                let body = resp.text().await.unwrap_or_default();
                Err(PutError::Source(crate::error::from_response(OP_PUT, &target, status, code.as_deref(), &body)))
            }
        }
    }

    /// `_tagwarden/contests/<infraID>.json` in the policy's container: outside every publisher's
    /// folder (`tagwarden_engine::policy_store::contest_state_object`).
    fn contest_state_name(&self, infra_id: &str) -> Option<String> {
        policy::clusters::valid_infra_id(infra_id).ok()?;
        Some(policy_store::contest_state_object(infra_id))
    }

    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, CloudError> {
        match self.get(&self.status_name(cluster)?, None).await {
            Ok(found) => Ok(found.map(|o| o.text)),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The status report beside the policy (a block blob).
    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), CloudError> {
        self.write_status(cluster, text, None).await.map_err(|e| match e {
            PutError::Source(e) => e,
            other => {
                CloudError::azure(OP_PUT, "status report", None, "Conflict", &other.to_string(), ErrorClass::Transient)
            }
        })
    }

    async fn get_status_tagged(&self, cluster: Option<&str>) -> Result<Option<Object>, CloudError> {
        match self.get(&self.status_name(cluster)?, None).await {
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
        self.write_status(cluster, text, Some(expected)).await
    }
}

impl BlobSource {
    /// Put the status report; with `condition`, only over that ETag (`Some(None)`: only where
    /// there is none), Put Blob's `If-Match` / `If-None-Match: *` as [`PolicySource::put`] sends
    /// them: a lost race is 412 ConditionNotMet, or 409 BlobAlreadyExists.
    async fn write_status(
        &self,
        cluster: Option<&str>,
        text: &str,
        condition: Option<Option<&str>>,
    ) -> Result<(), PutError<CloudError>> {
        let name = self.status_name(cluster).map_err(PutError::Source)?;
        let target = self.location.display_name(&name);
        let req = self.request(Method::PUT, self.location.blob_url(&name)).await.map_err(PutError::Source)?;
        let req = match condition {
            None => req,
            Some(Some(etag)) => req.header("if-match", etag),
            Some(None) => req.header("if-none-match", "*"),
        };
        let req = req
            .header("x-ms-blob-type", "BlockBlob")
            .header("content-type", "application/json")
            .body(text.as_bytes().to_vec());
        self.calls.record(OP_PUT);
        let resp = req.send().await.map_err(|e| PutError::Source(transport(OP_PUT, &target, e)))?;
        let status = resp.status().as_u16();
        match status {
            200..=299 => Ok(()),
            409 | 412 if condition.is_some() => Err(PutError::Conflict { found: "a newer status report".into() }),
            _ => {
                let code = resp.headers().get("x-ms-error-code").and_then(|v| v.to_str().ok()).map(str::to_owned);
                let body = resp.text().await.unwrap_or_default();
                Err(PutError::Source(crate::error::from_response(OP_PUT, &target, status, code.as_deref(), &body)))
            }
        }
    }
}

/// A request that got no response. reqwest's message names the URL it sent, query and all, and
/// the query is the SAS, a credential: drop the URL (`target` names the blob without its SAS).
fn transport(operation: &'static str, target: &str, e: reqwest::Error) -> CloudError {
    crate::error::transport(operation, target, &e.without_url())
}

/// ETags compare without their quotes (headers quote them, List Blobs may not).
fn normalize_etag(e: &str) -> String {
    let e = e.trim();
    if e.starts_with('"') {
        e.to_string()
    } else {
        format!("\"{e}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::location::percent_decode;
    use super::*;

    fn loc(s: &str) -> BlobLocation {
        s.parse().expect(s)
    }

    #[tokio::test]
    async fn an_unreachable_store_names_the_blob_without_the_sas() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let location =
            loc(&format!("http://127.0.0.1:{port}/devstoreaccount1/policy/p.yaml?sv=2020-08-04&sig=SECRET%2B"));
        let store = blob_policy_store(location, Duration::ZERO, reqwest::Client::new(), None, CallCounter::default());
        let (policy, _) = store.current(false).await;
        let e = policy.expect_err("nothing listens there").to_string();
        assert!(e.contains("Transport") && e.contains("/policy/p.yaml"), "{e}");
        assert!(!e.contains("SECRET") && !e.contains("sig="), "the SAS leaked: {e}");
        let e = store.documents().await.expect_err("unreachable").to_string();
        assert!(!e.contains("SECRET"), "{e}");
        let report =
            tagwarden_core::status::StatusReport::new(Cloud::Azure, &store.location(), None, Vec::new(), Vec::new());
        let e =
            tagwarden_engine::status_store::write(&store, None, &report).await.expect_err("unreachable").to_string();
        assert!(e.contains("tagwarden-status.json") && !e.contains("SECRET"), "{e}");
    }

    /// A cluster name with `/` or `..` never becomes a status report's blob (the URL
    /// parser would resolve `..` out of the set's folder); refused before any request.
    #[tokio::test]
    async fn a_status_report_only_in_a_clusters_own_folder() {
        let location = loc("http://127.0.0.1:9/devstoreaccount1/policy/clusters/*/?sig=S");
        let store = blob_policy_store(location, Duration::ZERO, reqwest::Client::new(), None, CallCounter::default());
        for hostile in ["..", "../../x", "a-1/../b", "a%2F..", ""] {
            let e = store.source.put_status(Some(hostile), "{}").await.expect_err(hostile);
            assert_eq!(e.code, "InvalidClusterName", "{e}");
            let e = store.source.get_status(Some(hostile)).await.expect_err(hostile);
            assert_eq!(e.code, "InvalidClusterName", "{e}");
        }
        assert_eq!(store.source.calls.total(), 0, "nothing was sent");
    }

    #[test]
    fn list_blobs_xml() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://x/" ContainerName="policy"><Prefix>layers/</Prefix><Blobs><Blob><Name>layers/00-a&amp;b.yaml</Name><Properties><Etag>0x8D1</Etag></Properties></Blob><Blob><Name>layers/tagwarden-status.json</Name><Properties><Etag>"0x8D2"</Etag></Properties></Blob></Blobs><NextMarker /></EnumerationResults>"#;
        let blobs = xml_elements(xml, "Blob");
        assert_eq!(blobs.len(), 2);
        assert_eq!(xml_text(blobs[0], "Name").as_deref(), Some("layers/00-a&b.yaml"));
        assert_eq!(normalize_etag(&xml_text(blobs[0], "Etag").unwrap_or_default()), "\"0x8D1\"");
        assert_eq!(normalize_etag("\"0x8D2\""), "\"0x8D2\"");
        assert_eq!(xml_text(xml, "NextMarker"), None);
        assert_eq!(percent_decode("a%20b%2Fc%"), "a b/c%");
    }
}
