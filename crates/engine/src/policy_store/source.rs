//! What a cloud implements for the store: the [`PolicySource`] trait, the objects it returns, and
//! the names of what the store keeps beside the policy.

use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy::STATUS_REPORT_NAME;

/// One document as a source returns it.
#[derive(Debug, Clone)]
pub struct Object {
    /// The ETag, or the SSM parameter's version.
    pub etag: String,
    pub text: String,
}

/// One entry of a prefix listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListedObject {
    pub name: String,
    pub etag: String,
    /// Its size, when the listing says (S3, blobs, SSM values): limits are checked before
    /// anything is downloaded.
    pub size: Option<u64>,
}

/// What the policy is made of at a location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One object, blob or parameter.
    One(String),
    /// Every document under a prefix (`""` or ending in `/`), layered in name order.
    Prefix(String),
    /// A cluster set: one policy per cluster under the prefix, keyed by infraID
    /// ([`cluster_of`]).
    Set(String),
}

/// The calls a cloud's policy storage answers.
#[allow(async_fn_in_trait)]
pub trait PolicySource: Send + Sync {
    type Error: std::error::Error + Send + Sync + 'static;

    fn cloud(&self) -> Cloud;
    /// Where the policy is, as messages show it (never a credential).
    fn location(&self) -> String;
    fn layout(&self) -> Layout;
    /// Whether a listed name is a policy document (SSM parameters have no extension).
    fn is_document(&self, name: &str) -> bool {
        is_policy_document(name)
    }
    /// Where cluster `infra_id`'s policy in a set is, as messages show it.
    fn cluster_location(&self, infra_id: &str) -> String {
        match self.layout() {
            Layout::Set(prefix) => self.location_of(&format!("{prefix}{infra_id}/")),
            _ => self.location(),
        }
    }
    /// `name`, unless its ETag (or version) is still `etag`: then `None`. Refuses documents over
    /// [`super::load::MAX_DOCUMENT_BYTES`] and text that is not UTF-8.
    async fn get(&self, name: &str, etag: Option<&str>) -> Result<Option<Object>, Self::Error>;
    /// Every object under `prefix`, with its ETag.
    async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>, Self::Error>;
    /// The error for a prefix that holds no policy document.
    fn no_documents(&self) -> Self::Error;
    /// Whether `e` says the object does not exist.
    fn is_absent(&self, e: &Self::Error) -> bool;
    /// Where object `name` is, as messages show it.
    fn location_of(&self, name: &str) -> String;
    /// Write `text` at `name` only if its ETag (or version) is still `expected`, or with `None`
    /// only if it does not exist: the new ETag or version.
    async fn put(&self, name: &str, text: &str, expected: Option<&str>) -> Result<String, PutError<Self::Error>>;
    /// Where cluster `infra_id`'s contest state is kept (`tagwarden_core::contest::ContestState`),
    /// read with [`PolicySource::get`] and written with [`PolicySource::put`] (conditionally, as
    /// the status report is): an object apart from every publisher's folder, which the deployment
    /// lets only the function and its operators write. Never derived from a name a publisher
    /// chose: `infra_id` is a cluster the deployment enforces. `None`: this store keeps none, and
    /// contests are counted in each function instance's memory alone.
    fn contest_state_name(&self, infra_id: &str) -> Option<String> {
        let _ = infra_id;
        None
    }
    /// The status report's text beside the policy (of cluster `cluster` in a set), if one was
    /// written.
    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, Self::Error>;
    /// The most bytes a status report may take there (an SSM Standard parameter: 4 KB).
    fn max_status_bytes(&self) -> Option<usize> {
        None
    }
    /// Write the status report's JSON `text` there (`tagwarden_core::status` makes and reads it).
    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), Self::Error>;
    /// [`PolicySource::get_status`] with the report's ETag, for [`PolicySource::put_status_if`].
    /// A store without conditional writes answers an empty ETag.
    async fn get_status_tagged(&self, cluster: Option<&str>) -> Result<Option<Object>, Self::Error> {
        Ok(self.get_status(cluster).await?.map(|text| Object { etag: String::new(), text }))
    }
    /// [`PolicySource::put_status`] only if the report is still at `expected` (`None`: only if
    /// there is none), so that the sweeps of parts of a deployment running at once never lose each
    /// other's failures. A store without conditional writes writes unconditionally: it is never
    /// swept in parts.
    async fn put_status_if(
        &self,
        cluster: Option<&str>,
        text: &str,
        _expected: Option<&str>,
    ) -> Result<(), PutError<Self::Error>> {
        self.put_status(cluster, text).await.map_err(PutError::Source)
    }
}

/// The content type a policy document is written with.
pub fn content_type(name: &str) -> &'static str {
    if name.ends_with(".json") {
        "application/json"
    } else {
        "application/yaml"
    }
}

/// The folder, at the root of a policy bucket or container, where the function keeps its own
/// state (the contests, `tagwarden_core::contest`): never a policy document, never a cluster's
/// folder (an infraID starts with a letter or digit).
pub const STATE_FOLDER: &str = "_tagwarden/";

/// The name of cluster `infra_id`'s contest state object in a bucket or container.
pub fn contest_state_object(infra_id: &str) -> String {
    format!("{STATE_FOLDER}contests/{infra_id}.json")
}

/// Whether an object under a prefix is a policy layer.
pub fn is_policy_document(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    [".yaml", ".yml", ".json"].iter().any(|e| base.ends_with(e))
        && base != STATUS_REPORT_NAME
        && !base.starts_with('.')
        && !name.starts_with(STATE_FOLDER)
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
