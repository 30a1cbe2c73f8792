//! The cluster-published policy on Azure (DESIGN.md §2, §6): one blob, or every blob under a
//! prefix (layered in name order), read over the Blob REST API.
//!
//! `TAGWARDEN_POLICY` is the blob's URL, or the prefix's URL ending in `/`, on the storage
//! account's own endpoint: `https://<account>.blob.core.windows.net/<container>/<name>`, or
//! path-style `http://127.0.0.1:10000/devstoreaccount1/<container>/<name>` for Azurite (any IP or
//! `localhost` host is read path-style). A SAS query string on the URL is passed through as-is;
//! without one, requests carry a managed-identity token for `https://storage.azure.com/`.
//!
//! Mirrors the AWS store: a warm function re-checks at most every `POLICY_TTL`; a single blob is
//! fetched with `If-None-Match` (a 304 downloads nothing); a prefix is listed (List Blobs XML) and
//! only blobs whose ETag changed are downloaded. A new version is validated as a whole; an invalid
//! one is rejected and the last known good version stays; with none, the function fails closed.
//! The status report `tagwarden-status.json` is written beside the policy and never read as a layer.
//!
//! Deliberately not here: shared-key signing (tests use an account SAS), blob versions/snapshots,
//! and any XML beyond the few List Blobs elements read here.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, Url};
use tokio::sync::Mutex;

use super::identity::{ManagedIdentity, STORAGE_AUDIENCE};
use super::{AzureError, CallCounter, ErrorClass};
use crate::cloud::Cloud;
use crate::policy::cache::PolicyCache;
use crate::policy::{self, STATUS_REPORT_NAME};
use crate::status::StatusReport;

/// The Blob REST API version sent as `x-ms-version`.
pub const STORAGE_VERSION: &str = "2021-08-06";

pub const OP_GET: &str = "blob:GetBlob";
pub const OP_LIST: &str = "blob:ListBlobs";
pub const OP_PUT: &str = "blob:PutBlob";

/// Where the policy lives.
#[derive(Clone, PartialEq, Eq)]
pub struct BlobLocation {
    /// `scheme://host[:port]/[account/]container`, no query.
    container: Url,
    /// The blob name, or the prefix (`""` or ending in `/`).
    pub name: String,
    /// A SAS query string, passed through as-is. Never printed.
    sas: Option<String>,
    pub is_prefix: bool,
}

impl fmt::Debug for BlobLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobLocation({self})")
    }
}

/// Printed without the SAS: a SAS is a credential.
impl fmt::Display for BlobLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.container.as_str().trim_end_matches('/'), self.name)?;
        if self.sas.is_some() {
            f.write_str("?<sas>")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for BlobLocation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "expected https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB (one document) or …/CONTAINER/PREFIX/ (every document under it, ending in /), optionally with a SAS query string; for Azurite http://127.0.0.1:10000/devstoreaccount1/CONTAINER/…";
        // Messages show the URL without its query: a SAS is a credential.
        let shown = s.split('?').next().unwrap_or_default();
        let url = Url::parse(s).map_err(|e| format!("policy location {shown:?} is not a URL ({e}): {usage}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("policy location {shown:?} is not an http(s) URL: {usage}"));
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(format!("policy location {shown:?} names no host: {usage}"));
        };
        let path_style = host.eq_ignore_ascii_case("localhost")
            || host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_ok();
        let path = url.path().trim_start_matches('/');
        let mut parts = path.splitn(if path_style { 3 } else { 2 }, '/');
        let account = if path_style { parts.next().filter(|a| !a.is_empty()) } else { None };
        if path_style && account.is_none() {
            return Err(format!("policy location {shown:?} names no storage account (path-style URL): {usage}"));
        }
        let container = parts
            .next()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| format!("policy location {shown:?} names no container: {usage}"))?;
        let name = percent_decode(parts.next().unwrap_or_default());
        let mut base = url.clone();
        base.set_query(None);
        base.set_fragment(None);
        base.set_path(&match account {
            Some(a) => format!("/{a}/{container}"),
            None => format!("/{container}"),
        });
        let sas = url.query().filter(|q| !q.is_empty()).map(str::to_owned);
        let is_prefix = name.is_empty() || name.ends_with('/');
        Ok(BlobLocation { container: base, name, sas, is_prefix })
    }
}

impl BlobLocation {
    pub fn has_sas(&self) -> bool {
        self.sas.is_some()
    }

    /// The URL of blob `name` in the container, with the SAS.
    pub fn blob_url(&self, name: &str) -> Url {
        let mut u = self.container.clone();
        if let Ok(mut segs) = u.path_segments_mut() {
            segs.pop_if_empty();
            for seg in name.split('/') {
                segs.push(seg);
            }
        }
        u.set_query(self.sas.as_deref());
        u
    }

    fn list_url(&self, marker: Option<&str>) -> Url {
        let mut u = self.container.clone();
        u.set_query(self.sas.as_deref());
        {
            let mut q = u.query_pairs_mut();
            q.append_pair("restype", "container").append_pair("comp", "list").append_pair("prefix", &self.name);
            if let Some(m) = marker {
                q.append_pair("marker", m);
            }
        }
        u
    }

    /// Where the status report goes: beside the blob, or under the prefix.
    pub fn status_name(&self) -> String {
        if self.is_prefix {
            format!("{}{STATUS_REPORT_NAME}", self.name)
        } else {
            let dir = self.name.rsplit_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_default();
            format!("{dir}{STATUS_REPORT_NAME}")
        }
    }

    /// A blob's URL as logs may show it (no SAS).
    pub fn display_name(&self, name: &str) -> String {
        format!("{}/{name}", self.container.as_str().trim_end_matches('/'))
    }
}

pub use crate::policy::cache::{LoadedPolicy, PolicyChange, PolicyUnavailable};

pub struct BlobPolicyStore {
    pub location: BlobLocation,
    pub ttl: Duration,
    http: reqwest::Client,
    /// For the bearer token when the URL carries no SAS.
    identity: Option<Arc<ManagedIdentity>>,
    pub calls: CallCounter,
    downloads: AtomicU64,
    state: Mutex<PolicyCache>,
}

impl BlobPolicyStore {
    pub fn new(
        location: BlobLocation,
        ttl: Duration,
        http: reqwest::Client,
        identity: Option<Arc<ManagedIdentity>>,
        calls: CallCounter,
    ) -> Self {
        BlobPolicyStore {
            location,
            ttl,
            http,
            identity,
            calls,
            downloads: AtomicU64::new(0),
            state: Mutex::new(PolicyCache::default()),
        }
    }

    /// Policy documents downloaded so far (a 304 or an unchanged listed ETag downloads nothing).
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::Relaxed)
    }

    /// The policy in force, re-checked when the TTL has passed (or when `force`).
    pub async fn current(&self, force: bool) -> (Result<Arc<LoadedPolicy>, PolicyUnavailable>, Option<PolicyChange>) {
        let mut st = self.state.lock().await;
        let location = self.location.to_string();
        let mut change = None;
        if st.due(self.ttl, force) {
            let fetched = self.fetch(&mut st).await;
            match st.record(Cloud::Azure, &location, fetched) {
                Ok(c) => change = c,
                Err(unavailable) => return (Err(unavailable), None),
            }
        }
        (st.current(&location), change)
    }

    /// How the published policy stands against the version in force (for the status report).
    pub async fn standing(&self) -> (&'static str, Vec<String>) {
        self.state.lock().await.standing()
    }

    /// The documents, or `None` when nothing changed since the last version seen.
    async fn fetch(&self, st: &mut PolicyCache) -> Result<Option<(String, Vec<(String, String)>)>, AzureError> {
        if !self.location.is_prefix {
            let name = self.location.name.clone();
            let etag = st.documents.get(&name).map(|(e, _)| e.clone());
            return match self.get_blob(&name, etag.as_deref()).await? {
                None => Ok(None),
                Some((etag, text)) => {
                    st.documents.clear();
                    st.documents.insert(name.clone(), (etag.clone(), text.clone()));
                    let base = name.rsplit('/').next().unwrap_or(&name).to_string();
                    Ok(Some((format!("{name}@{etag}"), vec![(base, text)])))
                }
            };
        }
        let listed = self.list().await?;
        let fingerprint: String = listed.iter().map(|(k, e)| format!("{k}@{e};")).collect();
        if st.seen() == Some(fingerprint.as_str()) {
            return Ok(None);
        }
        if listed.is_empty() {
            return Err(AzureError::new(
                OP_LIST,
                &self.location.to_string(),
                None,
                "NoPolicyDocuments",
                "no .yaml, .yml or .json blob under the prefix: publish the policy there",
                ErrorClass::Fatal,
            ));
        }
        let mut docs = Vec::with_capacity(listed.len());
        let mut kept = BTreeMap::new();
        for (name, etag) in listed {
            let text = match st.documents.get(&name) {
                Some((e, text)) if *e == etag => text.clone(),
                _ => match self.get_blob(&name, None).await? {
                    Some((_, text)) => text,
                    None => continue,
                },
            };
            let short = name.strip_prefix(self.location.name.as_str()).unwrap_or(&name).to_string();
            kept.insert(name, (etag, text.clone()));
            docs.push((short, text));
        }
        st.documents = kept;
        Ok(Some((fingerprint, docs)))
    }

    /// Every document of the policy as published now, bypassing the cache.
    pub async fn documents(&self) -> Result<Vec<(String, String)>, AzureError> {
        let mut scratch = PolicyCache::default();
        Ok(self.fetch(&mut scratch).await?.map(|(_, d)| d).unwrap_or_default())
    }

    pub(crate) async fn request(&self, method: Method, url: Url) -> Result<reqwest::RequestBuilder, AzureError> {
        let mut req = self.http.request(method, url).header("x-ms-version", STORAGE_VERSION);
        if !self.location.has_sas() {
            if let Some(id) = &self.identity {
                req = req.bearer_auth(id.token(STORAGE_AUDIENCE).await?);
            }
        }
        Ok(req)
    }

    /// `(ETag, text)`, or `None` on 304 Not Modified.
    async fn get_blob(&self, name: &str, etag: Option<&str>) -> Result<Option<(String, String)>, AzureError> {
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
            return Err(AzureError::from_response(OP_GET, &target, status, code.as_deref(), &body));
        }
        if resp.content_length().is_some_and(|n| n > policy::load::MAX_DOCUMENT_BYTES as u64) {
            return Err(AzureError::new(
                OP_GET,
                &target,
                Some(200),
                "PolicyTooLarge",
                &format!("the limit is {} bytes", policy::load::MAX_DOCUMENT_BYTES),
                ErrorClass::Fatal,
            ));
        }
        let bytes = resp.bytes().await.map_err(|e| transport(OP_GET, &target, e))?;
        self.downloads.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
            AzureError::new(
                OP_GET,
                &target,
                Some(200),
                "NotUtf8",
                "a policy document must be UTF-8 text",
                ErrorClass::Fatal,
            )
        })?;
        Ok(Some((etag, text)))
    }

    /// Policy blobs under the prefix (not the status report, not dot-files), by name, with ETags.
    async fn list(&self) -> Result<Vec<(String, String)>, AzureError> {
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
                return Err(AzureError::from_response(OP_LIST, &target, status, code.as_deref(), &body));
            }
            for blob in xml_elements(&body, "Blob") {
                let Some(name) = xml_text(blob, "Name") else { continue };
                let etag = xml_text(blob, "Etag").unwrap_or_default();
                let base = name.rsplit('/').next().unwrap_or(&name);
                let policy_ext = [".yaml", ".yml", ".json"].iter().any(|e| base.ends_with(e));
                if policy_ext && base != STATUS_REPORT_NAME && !base.starts_with('.') {
                    out.push((name.clone(), normalize_etag(&etag)));
                }
            }
            marker = xml_text(&body, "NextMarker").filter(|m| !m.is_empty());
            if marker.is_none() {
                break;
            }
        }
        out.sort();
        Ok(out)
    }

    /// The status report beside the policy, if one was written.
    pub async fn read_status(&self) -> Result<Option<StatusReport>, AzureError> {
        let name = self.location.status_name();
        let text = match self.get_blob(&name, None).await {
            Ok(found) => found.map(|(_, text)| text),
            Err(e) if e.status == Some(404) => None,
            Err(e) => return Err(e),
        };
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| {
                let target = self.location.display_name(&name);
                AzureError::new("status", &target, None, "NotAStatusReport", &e.to_string(), ErrorClass::Fatal)
            })
        })
        .transpose()
    }

    /// Write the status report beside the policy (a block blob).
    pub async fn write_status(&self, report: &StatusReport) -> Result<(), AzureError> {
        let name = self.location.status_name();
        let target = self.location.display_name(&name);
        let body = serde_json::to_vec_pretty(report).unwrap_or_default();
        let req = self
            .request(Method::PUT, self.location.blob_url(&name))
            .await?
            .header("x-ms-blob-type", "BlockBlob")
            .header("content-type", "application/json")
            .body(body);
        self.calls.record(OP_PUT);
        let resp = req.send().await.map_err(|e| transport(OP_PUT, &target, e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let code = resp.headers().get("x-ms-error-code").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let body = resp.text().await.unwrap_or_default();
            return Err(AzureError::from_response(OP_PUT, &target, status, code.as_deref(), &body));
        }
        Ok(())
    }
}

/// A request that got no response. reqwest's message names the URL it sent, query and all, and
/// the query is the SAS, a credential: drop the URL (`target` names the blob without its SAS).
fn transport(operation: &'static str, target: &str, e: reqwest::Error) -> AzureError {
    AzureError::transport(operation, target, &e.without_url())
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

/// The inner text of every `<tag>…</tag>` element (no attributes, no nesting of the same tag).
pub(crate) fn xml_elements<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        out.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    out
}

/// The unescaped text of the first `<tag>…</tag>`.
pub(crate) fn xml_text(xml: &str, tag: &str) -> Option<String> {
    xml_elements(xml, tag).first().map(|t| {
        t.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> BlobLocation {
        s.parse().expect(s)
    }

    #[test]
    fn locations() {
        let l = loc("https://acct.blob.core.windows.net/policy/cluster/infrastructure.yaml");
        assert!(!l.is_prefix);
        assert_eq!(l.name, "cluster/infrastructure.yaml");
        assert_eq!(l.status_name(), "cluster/tagwarden-status.json");
        assert_eq!(l.blob_url("a/b.yaml").as_str(), "https://acct.blob.core.windows.net/policy/a/b.yaml");

        let l = loc("http://127.0.0.1:10000/devstoreaccount1/policy/layers/?sv=2020-08-04&sig=abc%2B");
        assert!(l.is_prefix && l.has_sas());
        assert_eq!(l.name, "layers/");
        assert_eq!(l.status_name(), "layers/tagwarden-status.json");
        assert_eq!(
            l.blob_url("layers/00 base.yaml").as_str(),
            "http://127.0.0.1:10000/devstoreaccount1/policy/layers/00%20base.yaml?sv=2020-08-04&sig=abc%2B"
        );
        let list = l.list_url(Some("m1")).to_string();
        assert!(list.starts_with("http://127.0.0.1:10000/devstoreaccount1/policy?sv=2020-08-04&sig=abc%2B&restype=container&comp=list&prefix=layers%2F&marker=m1"), "{list}");
        // The SAS never appears in what is printed.
        assert_eq!(l.to_string(), "http://127.0.0.1:10000/devstoreaccount1/policy/layers/?<sas>");

        let l = loc("https://acct.blob.core.windows.net/policy");
        assert!(l.is_prefix);
        assert_eq!(l.status_name(), "tagwarden-status.json");
        for bad in [
            "policy.yaml",
            "s3://b/k",
            "https://acct.blob.core.windows.net/",
            "http://127.0.0.1:10000/devstoreaccount1",
        ] {
            let e = bad.parse::<BlobLocation>().expect_err(bad);
            assert!(e.contains("CONTAINER"), "{e}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_store_names_the_blob_without_the_sas() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let location =
            loc(&format!("http://127.0.0.1:{port}/devstoreaccount1/policy/p.yaml?sv=2020-08-04&sig=SECRET%2B"));
        let store =
            BlobPolicyStore::new(location, Duration::ZERO, reqwest::Client::new(), None, CallCounter::default());
        let (policy, _) = store.current(false).await;
        let e = policy.expect_err("nothing listens there").to_string();
        assert!(e.contains("Transport") && e.contains("/policy/p.yaml"), "{e}");
        assert!(!e.contains("SECRET") && !e.contains("sig="), "the SAS leaked: {e}");
        let e = store.documents().await.expect_err("unreachable").to_string();
        assert!(!e.contains("SECRET"), "{e}");
        let report = StatusReport::new(Cloud::Azure, &store.location, None, Vec::new(), Vec::new());
        let e = store.write_status(&report).await.expect_err("unreachable").to_string();
        assert!(e.contains("tagwarden-status.json") && !e.contains("SECRET"), "{e}");
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
