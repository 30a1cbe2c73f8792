//! A policy on this machine — a file, a directory of layers, or a cluster-set directory
//! (`DIR/<infraID>/…` or `DIR/<infraID>.yaml`) — read through the same policy store (limits,
//! layering, validation, one cache per cluster) as a published one, so `tagwarden sweep --dry-run`
//! can preview a policy before it is published anywhere. It is read only: nothing is ever written
//! beside it (a dry run writes no status report, and this source refuses every write).
//!
//! The engine ties a cloud's adapter to its store's source type, so [`Local`] wraps a cloud's
//! adapter (listing, reading and batching exactly as the cloud's own) with this source in place
//! of the cloud's policy storage.

use std::path::{Path, PathBuf};

use tagwarden::cloud::{Cloud, ClusterRef};
use tagwarden::cloud_error::CloudError;
use tagwarden::enforce::sweep::{Batching, ClusterListing, Listed, Unindexed};
use tagwarden::enforce::{Adapter, Implied, Read};
use tagwarden::events::Event;
use tagwarden::policy::STATUS_REPORT_NAME;
use tagwarden::policy_store::{Layout, ListedObject, Object, PolicySource, PutError};
use tagwarden::resource::ResourceRef;
use tagwarden::TagMap;

/// Whether `policy` names a location on this machine rather than a store: anything that is not
/// `s3://`, `ssm:`, `gs://` or an `http(s)://` blob URL.
pub fn is_local(policy: &str) -> bool {
    !(policy.starts_with("s3://")
        || policy.starts_with("ssm:")
        || policy.starts_with("gs://")
        || policy.starts_with("https://")
        || policy.starts_with("http://"))
}

/// A policy file or directory on this machine, as a [`PolicySource`].
#[derive(Debug, Clone)]
pub struct LocalSource {
    /// The directory names are relative to.
    base: PathBuf,
    layout: Layout,
    cloud: Cloud,
    /// As the user wrote it, for messages.
    shown: String,
}

impl LocalSource {
    /// `policy`: a file (one document), a directory (its `.yaml`/`.yml`/`.json` files layered in
    /// name order), or a cluster set written as a store's is, `DIR/*/` (quoted: one folder or
    /// `<infraID>.yaml` per cluster). `cloud`: whose tag rules validate it.
    pub fn open(policy: &str, cloud: Cloud) -> anyhow::Result<Self> {
        let (path, set) = match policy.strip_suffix("*/").or_else(|| policy.strip_suffix('*')) {
            Some(dir) => (Path::new(if dir.is_empty() { "." } else { dir }), true),
            None => (Path::new(policy), false),
        };
        let meta = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("cannot read the policy at {policy}: {e}"))?;
        let (base, layout) = if set {
            if !meta.is_dir() {
                anyhow::bail!(
                    "{policy}: a cluster set is a directory (DIR/*/, one folder or DIR/<infraID>.yaml per cluster)"
                );
            }
            (path.to_path_buf(), Layout::Set(String::new()))
        } else if meta.is_dir() {
            (path.to_path_buf(), Layout::Prefix(String::new()))
        } else {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            (parent.to_path_buf(), Layout::One(name))
        };
        Ok(LocalSource { base, layout, cloud, shown: policy.to_string() })
    }

    /// Whether this is a cluster set (`DIR/*/`).
    pub fn is_set(&self) -> bool {
        matches!(self.layout, Layout::Set(_))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// The status report beside the policy (a cluster's, in a set), if one is there: a report a
    /// store's `tagwarden-status.json` was copied from, or a fixture.
    fn status_path(&self, cluster: Option<&str>) -> PathBuf {
        match (&self.layout, cluster) {
            (_, Some(c)) => self.base.join(c).join(STATUS_REPORT_NAME),
            _ => self.base.join(STATUS_REPORT_NAME),
        }
    }
}

/// A short, stable digest of a document's bytes: its "ETag" here.
fn etag(text: &str) -> String {
    // FNV-1a, 64 bits: stable across runs and builds (std's hasher is not).
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    format!("{hash:016x}")
}

fn read_only(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("{what}: a policy on this machine is read only to tagwarden (publish it with tagwarden publish)"),
    )
}

impl PolicySource for LocalSource {
    type Error = std::io::Error;

    fn cloud(&self) -> Cloud {
        self.cloud
    }

    fn location(&self) -> String {
        self.shown.clone()
    }

    fn layout(&self) -> Layout {
        self.layout.clone()
    }

    async fn get(&self, name: &str, etag_seen: Option<&str>) -> Result<Option<Object>, Self::Error> {
        let path = self.path(name);
        let size = std::fs::metadata(&path)?.len();
        if size > tagwarden::policy::load::MAX_DOCUMENT_BYTES as u64 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {size} bytes, over MAX_DOCUMENT_BYTES", path.display()),
            ));
        }
        let text = std::fs::read_to_string(&path)?;
        let tag = etag(&text);
        if etag_seen == Some(tag.as_str()) {
            return Ok(None);
        }
        Ok(Some(Object { etag: tag, text }))
    }

    /// A layered directory's own files; a set's files and each sub-directory's files (one level,
    /// as `DIR/<infraID>/…`).
    async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>, Self::Error> {
        let depth = if matches!(self.layout, Layout::Set(_)) { 2 } else { 1 };
        let mut out = Vec::new();
        let root = self.path(prefix);
        walk(&root, "", depth, &mut out)?;
        for l in &mut out {
            l.name = format!("{prefix}{}", l.name);
        }
        out.sort();
        Ok(out)
    }

    fn no_documents(&self) -> Self::Error {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} holds no .yaml, .yml or .json policy document", self.shown),
        )
    }

    fn is_absent(&self, e: &Self::Error) -> bool {
        e.kind() == std::io::ErrorKind::NotFound
    }

    fn location_of(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    async fn put(&self, name: &str, _text: &str, _expected: Option<&str>) -> Result<String, PutError<Self::Error>> {
        Err(PutError::Source(read_only(&self.location_of(name))))
    }

    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, Self::Error> {
        match std::fs::read_to_string(self.status_path(cluster)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Nothing is written beside a local policy: a dry run writes no report, and a rejected
    /// policy's report (which the store writes even then) is said on stderr instead.
    async fn put_status(&self, _cluster: Option<&str>, _text: &str) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The files under `dir` (`depth` levels), named relative to it with `/`.
fn walk(dir: &Path, under: &str, depth: usize, out: &mut Vec<ListedObject>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let meta = entry.metadata()?;
        let rel = format!("{under}{name}");
        if meta.is_dir() {
            if depth > 1 {
                walk(&entry.path(), &format!("{rel}/"), depth - 1, out)?;
            }
        } else if meta.is_file() {
            // The listing's ETag is what `get` answers, so an unchanged document is not read twice.
            let tag = std::fs::read_to_string(entry.path()).map(|t| etag(&t)).unwrap_or_default();
            out.push(ListedObject { name: rel, etag: tag, size: Some(meta.len()) });
        }
    }
    Ok(())
}

/// A cloud's adapter with the policy read from this machine: every call is the cloud's own.
pub struct Local<A>(pub A);

impl<A: Adapter> Adapter for Local<A> {
    type Source = LocalSource;
    type Group = A::Group;
    const CONCURRENCY: usize = A::CONCURRENCY;

    fn cloud(&self) -> Cloud {
        self.0.cloud()
    }
    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.0.read(r).await
    }
    async fn read_listed(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.0.read_listed(r).await
    }
    async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        self.0.write(r, set, current).await
    }
    async fn read_all(&self, resources: &[&ResourceRef], concurrency: usize) -> Vec<Result<Read, CloudError>> {
        self.0.read_all(resources, concurrency).await
    }
    async fn implied_all(&self, events: &[&Event], version: &str) -> Implied {
        self.0.implied_all(events, version).await
    }
    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        self.0.list_owned(cluster, pages).await
    }
    async fn list_owned_noting(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        self.0.list_owned_noting(cluster, pages).await
    }
    async fn list_owned_all(&self, clusters: &[ClusterRef<'_>], pages: &(dyn Fn(usize) + Sync)) -> Vec<ClusterListing> {
        self.0.list_owned_all(clusters, pages).await
    }
    async fn list_unindexed(&self, owned: &[Listed]) -> Unindexed {
        self.0.list_unindexed(owned).await
    }
    fn cannot_sweep(&self) -> Option<&'static str> {
        self.0.cannot_sweep()
    }
    fn pacing_key<'r>(&self, r: &'r ResourceRef) -> &'r str {
        self.0.pacing_key(r)
    }
    fn batching(&self, r: &ResourceRef) -> Batching<Self::Group> {
        self.0.batching(r)
    }
    async fn write_shared(
        &self,
        group: Self::Group,
        resources: &[&ResourceRef],
        set: &TagMap,
    ) -> Result<Vec<(usize, CloudError)>, CloudError> {
        self.0.write_shared(group, resources, set).await
    }
}

/// A single local policy (a file or a directory of layers) checked whole before anything is
/// listed, as `tagwarden validate` checks it: refused (exit 1) with every violation. A set's
/// clusters are each refused alone by the store, as a published set's are.
pub fn check(policy: &str, cloud: Cloud) -> anyhow::Result<()> {
    if policy.ends_with('*') || policy.ends_with("*/") {
        return Ok(());
    }
    let (loaded, _) = crate::input::read_policy(&[PathBuf::from(policy)])?;
    let violations = tagwarden::policy::validate::policy(&loaded, cloud);
    if violations.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = violations.iter().map(|v| v.message.clone()).collect();
    Err(crate::input::InvalidInput(format!(
        "{policy} is not a valid {cloud} policy ({} violation(s); tagwarden validate {policy} lists them): {}",
        listed.len(),
        listed.join("; ")
    ))
    .into())
}

/// The cloud a local policy is for: `--cloud`, else what its documents say (every cluster of a
/// set must agree), else the cloud whose scopes `--scope` names (`scoped`: Azure's or Google
/// Cloud's); else the user must say.
pub fn cloud_of(policy: &str, flag: Option<Cloud>, scoped: Option<Cloud>) -> anyhow::Result<Cloud> {
    if let Some(c) = flag {
        return Ok(c);
    }
    let probe = LocalSource::open(policy, Cloud::Aws)?;
    let mut docs: Vec<(String, String)> = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let listed = match &probe.layout {
        Layout::One(name) => vec![name.clone()],
        _ => runtime.block_on(probe.list(""))?.into_iter().map(|l| l.name).collect(),
    };
    for name in listed.iter().filter(|n| tagwarden::policy_store::is_policy_document(n)) {
        if let Ok(text) = std::fs::read_to_string(probe.path(name)) {
            docs.push((name.clone(), text));
        }
    }
    let mut clouds: Vec<Cloud> = Vec::new();
    for (name, text) in docs {
        if let Ok(p) = tagwarden::policy::load(vec![(name, text)]) {
            if let Some(c) = p.cloud.filter(|c| !clouds.contains(c)) {
                clouds.push(c);
            }
        }
    }
    match clouds.as_slice() {
        [one] => Ok(*one),
        [] => match scoped {
            Some(cloud) => Ok(cloud),
            None => Err(crate::input::InvalidInput(format!(
                "{policy}: the policy does not say which cloud it is for (a bare tag map, or a tagwarden.yaml without `cloud`): pass --cloud aws, --cloud azure or --cloud gcp"
            ))
            .into()),
        },
        _ => Err(crate::input::InvalidInput(format!(
            "{policy}: its documents are for different clouds ({}): sweep one cloud's at a time",
            clouds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(files: &[(&str, &str)]) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tagwarden-local-{}-{}",
            std::process::id(),
            etag(&format!("{files:?}"))
        ));
        let _ = std::fs::remove_dir_all(&d);
        for (name, text) in files {
            let p = d.join(name);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        d
    }

    #[test]
    fn layouts_and_listings() {
        let d = dir(&[("a/p.yaml", "x"), ("b.yaml", "y"), (".hidden.yaml", "z"), ("a/deeper/q.yaml", "w")]);
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("rt");
        let set = LocalSource::open(&format!("{}/*/", d.display()), Cloud::Aws).expect("set");
        assert_eq!(set.layout, Layout::Set(String::new()));
        let names: Vec<String> = rt.block_on(set.list("")).expect("list").into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["a/p.yaml", "b.yaml"]);
        let prefix = LocalSource::open(&d.display().to_string(), Cloud::Aws).expect("dir");
        let names: Vec<String> = rt.block_on(prefix.list("")).expect("list").into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["b.yaml"]);
        let one = LocalSource::open(&d.join("b.yaml").display().to_string(), Cloud::Aws).expect("file");
        assert_eq!(one.layout, Layout::One("b.yaml".into()));
        let got = rt.block_on(one.get("b.yaml", None)).expect("get").expect("text");
        assert_eq!(got.text, "y");
        assert!(rt.block_on(one.get("b.yaml", Some(&got.etag))).expect("get").is_none(), "unchanged");
        assert!(rt.block_on(one.put("b.yaml", "x", None)).is_err(), "read only");
        assert!(is_local("./p") && is_local("/tmp/x") && !is_local("s3://b/k") && !is_local("https://a/b"));
        assert!(!is_local("gs://bucket/p.yaml"));
    }
}
