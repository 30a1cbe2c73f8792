//! Where the policy comes from, for every cloud: one store over a small [`Source`] trait (get with
//! an ETag, list by prefix, read and write the status report), so the re-check rules are written
//! once (DESIGN.md §2, §6):
//!
//! - a warm function re-checks at most every `ttl`;
//! - one document is fetched conditionally on its ETag (S3, blobs) or version (SSM), so an
//!   unchanged one is not downloaded, or not parsed, again;
//! - a prefix is listed, and only documents whose ETag changed are downloaded; a prefix's documents
//!   are the `.yaml`/`.yml`/`.json` objects under it that are not dot-files and not the status
//!   report, layered in name order;
//! - what is fetched goes to the [`PolicyCache`], which decides what is in force.
//!
//! AWS (`aws::policy_store`: S3 and SSM) and Azure (`azure::blob_store`) implement [`Source`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::cache::{Fetched, LoadedPolicy, PolicyCache, PolicyChange, PolicyUnavailable};
use super::STATUS_REPORT_NAME;
use crate::cloud::Cloud;
use crate::report::{Outcome, Record};
use crate::status::StatusReport;

/// One document as a source returns it.
#[derive(Debug, Clone)]
pub struct Object {
    /// The ETag, or the SSM parameter's version.
    pub etag: String,
    pub text: String,
}

/// One entry of a prefix listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Listed {
    pub name: String,
    pub etag: String,
}

/// What the policy is made of at a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One object, blob or parameter.
    One(String),
    /// Every document under a prefix (`""` or ending in `/`), layered in name order.
    Prefix(String),
}

/// The calls a cloud's policy storage answers.
#[allow(async_fn_in_trait)]
pub trait Source: Send + Sync {
    type Error: std::error::Error + Send + Sync + 'static;

    fn cloud(&self) -> Cloud;
    /// Where the policy is, as messages show it (never a credential).
    fn location(&self) -> String;
    fn layout(&self) -> Layout;
    /// `name`, unless its ETag (or version) is still `etag`: then `None`. Refuses documents over
    /// [`super::load::MAX_DOCUMENT_BYTES`] and text that is not UTF-8.
    async fn get(&self, name: &str, etag: Option<&str>) -> Result<Option<Object>, Self::Error>;
    /// Every object under `prefix`, with its ETag.
    async fn list(&self, prefix: &str) -> Result<Vec<Listed>, Self::Error>;
    /// The error for a prefix that holds no policy document.
    fn no_documents(&self) -> Self::Error;
    /// Whether `e` says the object does not exist.
    fn is_absent(&self, e: &Self::Error) -> bool;
    /// Where object `name` is, as messages show it.
    fn location_of(&self, name: &str) -> String;
    /// Write `text` at `name` only if its ETag (or version) is still `expected`, or with `None`
    /// only if it does not exist: the new ETag or version.
    async fn put(&self, name: &str, text: &str, expected: Option<&str>) -> Result<String, PutError<Self::Error>>;
    /// The status report's text beside the policy, if one was written.
    async fn get_status(&self) -> Result<Option<String>, Self::Error>;
    async fn put_status(&self, report: &StatusReport) -> Result<(), Self::Error>;
}

/// The content type a policy document is written with.
pub fn content_type(name: &str) -> &'static str {
    if name.ends_with(".json") {
        "application/json"
    } else {
        "application/yaml"
    }
}

/// Whether an object under a prefix is a policy layer.
pub fn is_policy_document(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    [".yaml", ".yml", ".json"].iter().any(|e| base.ends_with(e)) && base != STATUS_REPORT_NAME && !base.starts_with('.')
}

/// Why a conditional write did not happen as asked.
#[derive(Debug, thiserror::Error)]
pub enum PutError<E: std::error::Error + 'static> {
    /// The object is not at the version read (or exists when it was read absent): not written.
    #[error("it changed since it was read (now {found})")]
    Conflict { found: String },
    /// SSM only, which has no conditional put: another write landed between the version check
    /// and this put, which is version `written`. Both are in the parameter's history.
    #[error("another write landed between the version check and this write, now version {written}")]
    Raced { written: String },
    #[error(transparent)]
    Source(E),
}

#[derive(Debug, thiserror::Error)]
pub enum ReadStatusError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Source(E),
    #[error("the status report beside {location} is not one tagwarden wrote ({message}); the next sweep replaces it")]
    NotAReport { location: String, message: String },
}

pub struct PolicyStore<S> {
    pub source: S,
    pub ttl: Duration,
    downloads: AtomicU64,
    state: Mutex<PolicyCache>,
}

impl<S: Source> PolicyStore<S> {
    pub fn new(source: S, ttl: Duration) -> Self {
        PolicyStore { source, ttl, downloads: AtomicU64::new(0), state: Mutex::new(PolicyCache::default()) }
    }

    pub fn location(&self) -> String {
        self.source.location()
    }

    /// Policy documents downloaded so far (a not-modified answer or an unchanged listed ETag
    /// downloads nothing).
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::Relaxed)
    }

    /// The policy in force, re-checked when the TTL has passed (or when `force`).
    pub async fn current(&self, force: bool) -> (Result<Arc<LoadedPolicy>, PolicyUnavailable>, Option<PolicyChange>) {
        let mut st = self.state.lock().await;
        let location = self.location();
        let mut change = None;
        if st.due(self.ttl, force) {
            let fetched = self.fetch(&mut st, false).await;
            match st.record(self.source.cloud(), &location, fetched) {
                Ok(c) => change = c,
                Err(unavailable) => return (Err(unavailable), None),
            }
        }
        (st.current(&location), change)
    }

    /// The policy for an invocation, into `out`: a rejected new version is counted and reported
    /// beside the policy; with no valid version, `out.error` says why and nothing is written.
    pub async fn policy_for(&self, out: &mut Outcome, force: bool) -> Option<Arc<LoadedPolicy>> {
        let (policy, change) = self.current(force).await;
        if let Some(PolicyChange::Rejected { errors }) = change {
            out.metrics.policy_rejected += 1;
            let version = policy.as_ref().ok().map(|p| p.policy.version.clone());
            let report = StatusReport::new(self.source.cloud(), &self.location(), version, errors, Vec::new());
            self.write_status(&report).await;
        }
        match policy {
            Ok(p) => {
                out.infra_id = Some(p.infra_id.clone());
                Some(p)
            }
            Err(e) => {
                tracing::error!(error = %e, "fail closed");
                out.error = Some(e.to_string());
                None
            }
        }
    }

    /// A sweep's status report: the version it applied, how the published policy stands now, and
    /// its failures.
    pub async fn report_sweep(&self, version: &str, records: &[Record]) {
        let standing = self.state.lock().await.standing();
        let report = StatusReport::of_sweep(self.source.cloud(), &self.location(), version, standing, records);
        self.write_status(&report).await;
    }

    /// A report that cannot be written is logged: it never fails the invocation that made it.
    async fn write_status(&self, report: &StatusReport) {
        if let Err(e) = self.source.put_status(report).await {
            tracing::warn!(error = %e, "could not write the status report");
        }
    }

    /// The status report beside the policy, if one was written.
    pub async fn read_status(&self) -> Result<Option<StatusReport>, ReadStatusError<S::Error>> {
        let text = self.source.get_status().await.map_err(ReadStatusError::Source)?;
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| ReadStatusError::NotAReport { location: self.location(), message: e.to_string() })
        })
        .transpose()
    }

    /// Every document of the policy as published now, bypassing the cache: `(name, text)`. An
    /// empty prefix has none.
    pub async fn documents(&self) -> Result<Vec<(String, String)>, S::Error> {
        let mut scratch = PolicyCache::default();
        Ok(self.fetch(&mut scratch, true).await?.map(|f| f.documents).unwrap_or_default())
    }

    /// Object `name` as published now, or `None` when it does not exist.
    pub async fn read(&self, name: &str) -> Result<Option<Object>, S::Error> {
        match self.source.get(name, None).await {
            Err(e) if self.source.is_absent(&e) => Ok(None),
            other => other,
        }
    }

    /// The documents, or `None` when nothing changed since the last version seen.
    async fn fetch(&self, st: &mut PolicyCache, empty_ok: bool) -> Result<Option<Fetched>, S::Error> {
        match self.source.layout() {
            Layout::One(name) => {
                let etag = st.documents.get(&name).map(|(e, _)| e.clone());
                let Some(object) = self.source.get(&name, etag.as_deref()).await? else { return Ok(None) };
                self.downloads.fetch_add(1, Ordering::Relaxed);
                let fingerprint = format!("{name}@{}", object.etag);
                if st.seen() == Some(fingerprint.as_str()) {
                    return Ok(None);
                }
                st.documents.clear();
                st.documents.insert(name.clone(), (object.etag, object.text.clone()));
                Ok(Some(Fetched { fingerprint, documents: vec![(name, object.text)] }))
            }
            Layout::Prefix(prefix) => {
                let mut listed: Vec<Listed> =
                    self.source.list(&prefix).await?.into_iter().filter(|l| is_policy_document(&l.name)).collect();
                listed.sort();
                let fingerprint: String = listed.iter().map(|l| format!("{}@{};", l.name, l.etag)).collect();
                if st.seen() == Some(fingerprint.as_str()) {
                    return Ok(None);
                }
                if listed.is_empty() && !empty_ok {
                    return Err(self.source.no_documents());
                }
                let mut documents = Vec::with_capacity(listed.len());
                let mut kept = BTreeMap::new();
                for Listed { name, etag } in listed {
                    let text = match st.documents.get(&name) {
                        Some((e, text)) if *e == etag => text.clone(),
                        // Gone between the listing and the read: the next re-check lists again.
                        _ => match self.source.get(&name, None).await? {
                            Some(object) => {
                                self.downloads.fetch_add(1, Ordering::Relaxed);
                                object.text
                            }
                            None => continue,
                        },
                    };
                    let short = name.strip_prefix(prefix.as_str()).unwrap_or(&name).to_string();
                    kept.insert(name, (etag, text.clone()));
                    documents.push((short, text));
                }
                st.documents = kept;
                Ok(Some(Fetched { fingerprint, documents }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_documents_under_a_prefix() {
        for yes in ["p/00-defaults.yaml", "p/10-cluster.json", "p/sub/20.yml", "x.yaml"] {
            assert!(is_policy_document(yes), "{yes}");
        }
        for no in ["p/tagwarden-status.json", "p/.hidden.yaml", "p/README.md", "p/"] {
            assert!(!is_policy_document(no), "{no}");
        }
    }
}
