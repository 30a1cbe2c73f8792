//! The cluster-published policy on AWS (docs/src/concepts/policy.md): an S3 object, every object under an S3
//! prefix (layered in name order), or an SSM parameter — or a cluster set of them, one policy per
//! cluster under its infraID (`s3://BUCKET/PREFIX/*/`, `ssm:/PATH/*`). These are the calls behind
//! the one policy store (`policy::store`), which holds the re-check rules for both clouds.
//!
//! S3 objects are fetched conditionally on their ETag (`If-None-Match`, 304). An SSM parameter's
//! value comes with its version in one small call; an unchanged version is not parsed again.
//!
//! Deliberately not here: S3 object versions, SecureString parameters (the policy is not a
//! secret, and decryption would need a KMS grant), and parameter hierarchies deeper than a set's
//! one level.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use aws_sdk_ec2::error::ProvideErrorMetadata;

use super::Clients;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy::{self, STATUS_REPORT_NAME};
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::policy_store::{self, Layout, ListedObject, Object, PolicySource, PutError};

/// Where the policy lives, from `TAGWARDEN_POLICY` or `--policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyLocation {
    S3Object {
        bucket: String,
        key: String,
    },
    S3Prefix {
        bucket: String,
        prefix: String,
    },
    Ssm {
        name: String,
    },
    /// A cluster set: `<prefix><infraID>/…` (each layered as a prefix is) or `<prefix><infraID>.yaml`.
    S3Set {
        bucket: String,
        prefix: String,
    },
    /// A cluster set: one parameter per cluster, `<path><infraID>`.
    SsmSet {
        path: String,
    },
}

impl FromStr for PolicyLocation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let usage = "expected s3://BUCKET/KEY (one document), s3://BUCKET/PREFIX/ (every document under it, ending in /), ssm:/PARAMETER/NAME, or a cluster set: s3://BUCKET/PREFIX/*/ or ssm:/PATH/*";
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("policy location {s:?} names no bucket: {usage}"));
            }
            let bucket = bucket.to_string();
            if let Some(prefix) = key.strip_suffix("*/").filter(|p| p.is_empty() || p.ends_with('/')) {
                return Ok(PolicyLocation::S3Set { bucket, prefix: prefix.to_string() });
            }
            if key.contains('*') {
                return Err(format!("policy location {s:?}: a cluster set is written s3://{bucket}/PREFIX/*/ (the * alone, as the last folder): {usage}"));
            }
            return Ok(if key.is_empty() || key.ends_with('/') {
                PolicyLocation::S3Prefix { bucket, prefix: key.to_string() }
            } else {
                PolicyLocation::S3Object { bucket, key: key.to_string() }
            });
        }
        if let Some(name) = s.strip_prefix("ssm:") {
            if name.is_empty() {
                return Err(format!("policy location {s:?} names no parameter: {usage}"));
            }
            if let Some(path) = name.strip_suffix('*').filter(|p| p.starts_with('/') && p.ends_with('/')) {
                return Ok(PolicyLocation::SsmSet { path: path.to_string() });
            }
            if name.ends_with('/') || name.contains('*') {
                return Err(format!("policy location {s:?}: a parameter name cannot end in / or hold *; for one parameter per cluster, write ssm:{}*: {usage}", name.trim_end_matches('*').trim_end_matches('/').to_string() + "/"));
            }
            return Ok(PolicyLocation::Ssm { name: name.to_string() });
        }
        Err(format!("policy location {s:?} is not understood: {usage}"))
    }
}

impl fmt::Display for PolicyLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyLocation::S3Object { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            PolicyLocation::S3Prefix { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            PolicyLocation::Ssm { name } => write!(f, "ssm:{name}"),
            PolicyLocation::S3Set { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}*/"),
            PolicyLocation::SsmSet { path } => write!(f, "ssm:{path}*"),
        }
    }
}

impl PolicyLocation {
    /// Where the status report goes: beside the policy object, or a sibling SSM parameter; in a
    /// set, beside cluster `cluster`'s policy (SSM: under the path's sibling `<path>-status/`, so
    /// a set's listing never sees it).
    pub fn status_location_for(&self, cluster: Option<&str>) -> PolicyLocation {
        match (self, cluster) {
            (PolicyLocation::S3Set { bucket, prefix }, Some(c)) => {
                PolicyLocation::S3Object { bucket: bucket.clone(), key: format!("{prefix}{c}/{STATUS_REPORT_NAME}") }
            }
            (PolicyLocation::SsmSet { path }, Some(c)) => {
                PolicyLocation::Ssm { name: format!("{}-status/{c}", path.trim_end_matches('/')) }
            }
            _ => self.status_location(),
        }
    }

    /// The S3 bucket the policy is in.
    fn bucket(&self) -> Option<&str> {
        match self {
            PolicyLocation::S3Object { bucket, .. }
            | PolicyLocation::S3Prefix { bucket, .. }
            | PolicyLocation::S3Set { bucket, .. } => Some(bucket),
            PolicyLocation::Ssm { .. } | PolicyLocation::SsmSet { .. } => None,
        }
    }

    /// Where the status report of a single policy goes.
    pub fn status_location(&self) -> PolicyLocation {
        match self {
            PolicyLocation::S3Object { bucket, key } => {
                let dir = key.rsplit_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_default();
                PolicyLocation::S3Object { bucket: bucket.clone(), key: format!("{dir}{STATUS_REPORT_NAME}") }
            }
            PolicyLocation::S3Prefix { bucket, prefix } | PolicyLocation::S3Set { bucket, prefix } => {
                PolicyLocation::S3Object { bucket: bucket.clone(), key: format!("{prefix}{STATUS_REPORT_NAME}") }
            }
            PolicyLocation::Ssm { name } => PolicyLocation::Ssm { name: format!("{name}-status") },
            PolicyLocation::SsmSet { path } => {
                PolicyLocation::Ssm { name: format!("{}-status", path.trim_end_matches('/')) }
            }
        }
    }
}

/// The policy store on AWS.
pub type PolicyStore = policy_store::PolicyStore<AwsSource>;

/// S3 and SSM as a policy [`PolicySource`].
pub struct AwsSource {
    clients: Clients,
    pub location: PolicyLocation,
    /// The folder of the bucket where the clusters' contest states are kept
    /// ([`PolicySource::contest_state_name`]): [`CONTESTS_FOLDER`], or the organization hub's
    /// `<prefix>_organization/contests/<account>/`.
    pub contests_folder: String,
}

/// Where a bucket keeps its clusters' contest states, `<folder><infraID>.json`: outside every
/// publisher's folder, written only by the function and the deployment's operators.
pub const CONTESTS_FOLDER: &str = "_tagwarden/contests/";

/// The SSM path under which the clusters' contest states are kept, `<path><infraID>`: outside every
/// policy's and report's parameter path.
pub const CONTESTS_SSM_PATH: &str = "/_tagwarden/contests/";

impl AwsSource {
    pub fn new(clients: Clients, location: PolicyLocation) -> Self {
        AwsSource { clients, location, contests_folder: CONTESTS_FOLDER.to_string() }
    }

    /// The endpoint the store's calls go to, to name the proxy they go through: the configured
    /// one (`AWS_ENDPOINT_URL`), else the region's S3 or SSM endpoint.
    pub fn endpoint(&self) -> String {
        if let Ok(url) = std::env::var("AWS_ENDPOINT_URL") {
            return url;
        }
        let service = if matches!(self.location, PolicyLocation::Ssm { .. }) { "ssm" } else { "s3" };
        format!("https://{service}.{}.amazonaws.com", self.clients.region)
    }
}

/// A store for `location`, re-checked at most every `ttl`.
pub fn policy_store(clients: &Clients, location: PolicyLocation, ttl: Duration) -> PolicyStore {
    PolicyStore::new(AwsSource::new(clients.clone(), location), ttl)
}

impl PolicySource for AwsSource {
    type Error = CloudError;

    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    fn location(&self) -> String {
        self.location.to_string()
    }

    fn layout(&self) -> Layout {
        match &self.location {
            PolicyLocation::S3Object { key, .. } => Layout::One(key.clone()),
            PolicyLocation::S3Prefix { prefix, .. } => Layout::Prefix(prefix.clone()),
            PolicyLocation::Ssm { name } => Layout::One(name.clone()),
            PolicyLocation::S3Set { prefix, .. } => Layout::Set(prefix.clone()),
            PolicyLocation::SsmSet { path } => Layout::Set(path.clone()),
        }
    }

    /// Every parameter of a set's path is a cluster's policy: parameters have no extension.
    fn is_document(&self, name: &str) -> bool {
        matches!(self.location, PolicyLocation::SsmSet { .. }) || policy_store::is_policy_document(name)
    }

    fn cluster_location(&self, infra_id: &str) -> String {
        match &self.location {
            PolicyLocation::SsmSet { path } => format!("ssm:{path}{infra_id}"),
            PolicyLocation::S3Set { bucket, prefix } => format!("s3://{bucket}/{prefix}{infra_id}/"),
            other => other.to_string(),
        }
    }

    async fn get(&self, name: &str, etag: Option<&str>) -> Result<Option<Object>, CloudError> {
        match self.location.bucket() {
            Some(bucket) => get_object(&self.clients, bucket, name, etag).await,
            // A parameter's value comes with its version in one small call: "not modified" is
            // the version seen last.
            None => {
                let out = self
                    .clients
                    .ssm
                    .get_parameter()
                    .name(name)
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("ssm:GetParameter", name, e))?;
                let param = out.parameter();
                let version = param.map(|p| p.version()).unwrap_or_default().to_string();
                if etag == Some(version.as_str()) {
                    return Ok(None);
                }
                let text = param.and_then(|p| p.value()).unwrap_or_default().to_string();
                Ok(Some(Object { etag: version, text }))
            }
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>, CloudError> {
        if let PolicyLocation::SsmSet { path } = &self.location {
            return self.list_parameters(path).await;
        }
        let Some(bucket) = self.location.bucket() else { return Ok(Vec::new()) };
        let listing = self.clients.s3.list_objects_v2().bucket(bucket).prefix(prefix).into_paginator();
        let pages = listing.send().try_collect().await;
        let pages =
            pages.map_err(|e| crate::error::from_sdk("s3:ListObjectsV2", &format!("s3://{bucket}/{prefix}"), e))?;
        let mut out = Vec::new();
        for o in pages.iter().flat_map(|p| p.contents()) {
            let name = o.key().unwrap_or_default().to_string();
            let size = o.size().and_then(|n| u64::try_from(n).ok());
            out.push(ListedObject { name, etag: o.e_tag().unwrap_or_default().to_string(), size });
        }
        Ok(out)
    }

    fn no_documents(&self) -> CloudError {
        if let PolicyLocation::SsmSet { .. } = self.location {
            let op = "ssm:GetParametersByPath";
            return CloudError::aws(
                op,
                &self.location.to_string(),
                "NoPolicyDocuments",
                "no parameter",
                ErrorClass::Fatal,
            );
        }
        CloudError::aws(
            "s3:ListObjectsV2",
            &self.location.to_string(),
            "NoPolicyDocuments",
            "no .yaml, .yml or .json object under the prefix",
            ErrorClass::Fatal,
        )
    }

    fn is_absent(&self, e: &CloudError) -> bool {
        matches!(e.code.as_str(), "NoSuchKey" | "ParameterNotFound")
    }

    fn location_of(&self, name: &str) -> String {
        match self.location.bucket() {
            Some(bucket) => format!("s3://{bucket}/{name}"),
            None => format!("ssm:{name}"),
        }
    }

    async fn put(&self, name: &str, text: &str, expected: Option<&str>) -> Result<String, PutError<CloudError>> {
        let location = self.location_of(name);
        match self.location.bucket() {
            Some(bucket) => {
                let put = self
                    .clients
                    .s3
                    .put_object()
                    .bucket(bucket)
                    .key(name)
                    .content_type(policy_store::content_type(name));
                // S3 conditional writes: `If-None-Match: *` creates only; `If-Match` replaces only
                // that ETag. A lost race is 412 PreconditionFailed, or 409 ConditionalRequestConflict
                // while another conditional write is in flight.
                let put = match expected {
                    Some(etag) => put.if_match(etag),
                    None => put.if_none_match("*"),
                };
                match put.body(text.as_bytes().to_vec().into()).send().await {
                    Ok(out) => Ok(out.e_tag().unwrap_or_default().to_string()),
                    Err(e) if matches!(e.code(), Some("PreconditionFailed" | "ConditionalRequestConflict")) => {
                        Err(PutError::Conflict { found: "a newer object".into() })
                    }
                    Err(e) => Err(PutError::Source(crate::error::from_sdk("s3:PutObject", &location, e))),
                }
            }
            // PutParameter has no condition. Creating uses Overwrite=false (refused if the
            // parameter appeared); replacing re-reads the version right before the put, then
            // checks that the put made exactly the next version.
            None => {
                if let Some(version) = expected {
                    match self.get(name, None).await {
                        Ok(Some(now)) if now.etag == version => {}
                        Ok(Some(now)) => return Err(PutError::Conflict { found: now.etag }),
                        Ok(None) => {}
                        Err(e) if self.is_absent(&e) => return Err(PutError::Conflict { found: "deleted".into() }),
                        Err(e) => return Err(PutError::Source(e)),
                    }
                }
                let mut put = self
                    .clients
                    .ssm
                    .put_parameter()
                    .name(name)
                    .r#type(aws_sdk_ssm::types::ParameterType::String)
                    .overwrite(expected.is_some())
                    .value(text);
                // A Standard parameter holds 4 KB; Intelligent-Tiering picks Advanced (and its
                // charge) only for larger values.
                if text.len() > 4096 {
                    put = put.tier(aws_sdk_ssm::types::ParameterTier::IntelligentTiering);
                }
                let written = match put.send().await {
                    Ok(out) => out.version(),
                    Err(e) if e.code() == Some("ParameterAlreadyExists") => {
                        return Err(PutError::Conflict { found: "created by another writer".into() })
                    }
                    Err(e) => return Err(PutError::Source(crate::error::from_sdk("ssm:PutParameter", name, e))),
                };
                let next = expected.and_then(|v| v.parse::<i64>().ok()).map_or(1, |v| v + 1);
                if written != next {
                    return Err(PutError::Raced { written: written.to_string() });
                }
                Ok(written.to_string())
            }
        }
    }

    /// S3: `<contests folder><infraID>.json` in the policy's bucket; SSM: `/_tagwarden/contests/<infraID>`.
    fn contest_state_name(&self, infra_id: &str) -> Option<String> {
        policy::clusters::valid_infra_id(infra_id).ok()?;
        Some(match self.location.bucket() {
            Some(_) => format!("{}{infra_id}.json", self.contests_folder),
            None => format!("{CONTESTS_SSM_PATH}{infra_id}"),
        })
    }

    async fn get_status(&self, cluster: Option<&str>) -> Result<Option<String>, CloudError> {
        let target = self.status_target(cluster)?;
        match &target {
            PolicyLocation::S3Object { bucket, key } => match get_object(&self.clients, bucket, key, None).await {
                Ok(found) => Ok(found.map(|o| o.text)),
                Err(e) if e.code == "NoSuchKey" => Ok(None),
                Err(e) => Err(e),
            },
            PolicyLocation::Ssm { name } => match self.clients.ssm.get_parameter().name(name).send().await {
                Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_owned)),
                Err(e) if e.code() == Some("ParameterNotFound") => Ok(None),
                Err(e) => Err(crate::error::from_sdk("ssm:GetParameter", name, e)),
            },
            _ => Ok(None),
        }
    }

    fn max_status_bytes(&self) -> Option<usize> {
        matches!(self.location, PolicyLocation::Ssm { .. }).then_some(4096)
    }

    async fn put_status(&self, cluster: Option<&str>, text: &str) -> Result<(), CloudError> {
        let target = self.status_target(cluster)?;
        match &target {
            PolicyLocation::S3Object { bucket, key } => {
                let body = text.as_bytes().to_vec();
                self.clients
                    .s3
                    .put_object()
                    .bucket(bucket)
                    .key(key)
                    .content_type("application/json")
                    .body(body.into())
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("s3:PutObject", &target.to_string(), e))?;
            }
            // A Standard parameter holds 4 KB: `max_status_bytes` has the report fit.
            PolicyLocation::Ssm { name } => {
                self.clients
                    .ssm
                    .put_parameter()
                    .name(name)
                    .r#type(aws_sdk_ssm::types::ParameterType::String)
                    .overwrite(true)
                    .value(text)
                    .send()
                    .await
                    .map_err(|e| crate::error::from_sdk("ssm:PutParameter", name, e))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// S3 answers the report's ETag, for [`PolicySource::put_status_if`]; SSM, none.
    async fn get_status_tagged(&self, cluster: Option<&str>) -> Result<Option<Object>, CloudError> {
        match self.status_target(cluster)? {
            PolicyLocation::S3Object { bucket, key } => match get_object(&self.clients, &bucket, &key, None).await {
                Ok(found) => Ok(found),
                Err(e) if e.code == "NoSuchKey" => Ok(None),
                Err(e) => Err(e),
            },
            _ => Ok(self.get_status(cluster).await?.map(|text| Object { etag: String::new(), text })),
        }
    }

    /// On S3, a conditional write as [`PolicySource::put`]'s (`If-Match`, or `If-None-Match: *`);
    /// PutParameter has no condition, so on SSM the report is written as it stands.
    async fn put_status_if(
        &self,
        cluster: Option<&str>,
        text: &str,
        expected: Option<&str>,
    ) -> Result<(), PutError<CloudError>> {
        let target = self.status_target(cluster).map_err(PutError::Source)?;
        let PolicyLocation::S3Object { bucket, key } = &target else {
            return self.put_status(cluster, text).await.map_err(PutError::Source);
        };
        let put = self.clients.s3.put_object().bucket(bucket).key(key).content_type("application/json");
        let put = match expected {
            Some(etag) if !etag.is_empty() => put.if_match(etag),
            Some(_) => put,
            None => put.if_none_match("*"),
        };
        match put.body(text.as_bytes().to_vec().into()).send().await {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.code(), Some("PreconditionFailed" | "ConditionalRequestConflict")) => {
                Err(PutError::Conflict { found: "a newer report".into() })
            }
            Err(e) => Err(PutError::Source(crate::error::from_sdk("s3:PutObject", &target.to_string(), e))),
        }
    }
}

impl AwsSource {
    /// Where cluster `cluster`'s status report is: only ever `<prefix><infraID>/` of the set (or
    /// `<path>-status/<infraID>`), never where a name with `/` or `..` would lead.
    fn status_target(&self, cluster: Option<&str>) -> Result<PolicyLocation, CloudError> {
        if let Some(why) = cluster.and_then(|c| policy::clusters::valid_infra_id(c).err()) {
            let op = if self.location.bucket().is_some() { "s3:PutObject" } else { "ssm:PutParameter" };
            let message = format!("no status report for it: {why}");
            return Err(CloudError::aws(
                op,
                &self.location.to_string(),
                "InvalidClusterName",
                &message,
                ErrorClass::Fatal,
            ));
        }
        Ok(self.location.status_location_for(cluster))
    }

    /// A set's parameters, one level under `path`, with their versions.
    async fn list_parameters(&self, path: &str) -> Result<Vec<ListedObject>, CloudError> {
        let listing = self.clients.ssm.get_parameters_by_path().path(path.trim_end_matches('/')).recursive(false);
        let pages = listing.into_paginator().send().try_collect().await;
        let pages = pages.map_err(|e| crate::error::from_sdk("ssm:GetParametersByPath", path, e))?;
        let mut out = Vec::new();
        for p in pages.iter().flat_map(|p| p.parameters()) {
            out.push(ListedObject {
                name: p.name().unwrap_or_default().to_string(),
                etag: p.version().to_string(),
                size: p.value().map(|v| v.len() as u64),
            });
        }
        Ok(out)
    }
}

async fn get_object(
    clients: &Clients,
    bucket: &str,
    key: &str,
    etag: Option<&str>,
) -> Result<Option<Object>, CloudError> {
    let name = format!("s3://{bucket}/{key}");
    let out =
        match clients.s3.get_object().bucket(bucket).key(key).set_if_none_match(etag.map(str::to_owned)).send().await {
            Ok(out) => out,
            Err(e)
                if e.raw_response().is_some_and(|r| r.status().as_u16() == 304) || e.code() == Some("NotModified") =>
            {
                return Ok(None)
            }
            Err(e) => return Err(crate::error::from_sdk("s3:GetObject", &name, e)),
        };
    let etag = out.e_tag().unwrap_or_default().to_string();
    let len = out.content_length().unwrap_or_default();
    if len > policy::load::MAX_DOCUMENT_BYTES as i64 {
        return Err(CloudError::aws(
            "s3:GetObject",
            &name,
            "PolicyTooLarge",
            &format!("{len} bytes; the limit is {}", policy::load::MAX_DOCUMENT_BYTES),
            ErrorClass::Fatal,
        ));
    }
    let bytes = out
        .body
        .collect()
        .await
        .map_err(|e| CloudError::aws("s3:GetObject", &name, "ReadBody", &e.to_string(), ErrorClass::Transient))?
        .into_bytes();
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
        CloudError::aws("s3:GetObject", &name, "NotUtf8", "a policy document must be UTF-8 text", ErrorClass::Fatal)
    })?;
    Ok(Some(Object { etag, text }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(
            "s3://b/cluster/policy.yaml".parse(),
            Ok(PolicyLocation::S3Object { bucket: "b".into(), key: "cluster/policy.yaml".into() })
        );
        assert_eq!(
            "s3://b/cluster/".parse(),
            Ok(PolicyLocation::S3Prefix { bucket: "b".into(), prefix: "cluster/".into() })
        );
        assert_eq!("s3://b".parse(), Ok(PolicyLocation::S3Prefix { bucket: "b".into(), prefix: "".into() }));
        assert_eq!("ssm:/tagwarden/policy".parse(), Ok(PolicyLocation::Ssm { name: "/tagwarden/policy".into() }));
        for bad in ["s3:///k", "ssm:", "https://example.com/p.yaml", "policy.yaml"] {
            let err = bad.parse::<PolicyLocation>().expect_err(bad);
            assert!(err.contains("s3://BUCKET/KEY"), "{err}");
        }
        let status = |s: &str| s.parse::<PolicyLocation>().map(|l| l.status_location().to_string());
        assert_eq!(status("s3://b/cluster/policy.yaml"), Ok("s3://b/cluster/tagwarden-status.json".into()));
        assert_eq!(status("s3://b/policy.yaml"), Ok("s3://b/tagwarden-status.json".into()));
        assert_eq!(status("s3://b/layers/"), Ok("s3://b/layers/tagwarden-status.json".into()));
        assert_eq!(status("ssm:/p"), Ok("ssm:/p-status".into()));

        // Cluster sets.
        assert_eq!(
            "s3://b/clusters/*/".parse(),
            Ok(PolicyLocation::S3Set { bucket: "b".into(), prefix: "clusters/".into() })
        );
        assert_eq!("s3://b/*/".parse(), Ok(PolicyLocation::S3Set { bucket: "b".into(), prefix: "".into() }));
        assert_eq!("ssm:/tw/clusters/*".parse(), Ok(PolicyLocation::SsmSet { path: "/tw/clusters/".into() }));
        let set = |s: &str, c| s.parse::<PolicyLocation>().map(|l| l.status_location_for(Some(c)).to_string());
        assert_eq!(set("s3://b/clusters/*/", "a-1"), Ok("s3://b/clusters/a-1/tagwarden-status.json".into()));
        assert_eq!(set("ssm:/tw/clusters/*", "a-1"), Ok("ssm:/tw/clusters-status/a-1".into()));
        for (bad, hint) in [("s3://b/clusters*/", "PREFIX/*/"), ("ssm:/tw/clusters/", "ssm:/tw/clusters/*")] {
            let err = bad.parse::<PolicyLocation>().expect_err(bad);
            assert!(err.contains(hint), "{err}");
        }
    }
}
