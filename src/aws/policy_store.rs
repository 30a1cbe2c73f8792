//! The cluster-published policy on AWS (DESIGN.md §2, §6): an S3 object, every object under an S3
//! prefix (layered in name order), or an SSM parameter.
//!
//! A warm function re-checks at most every `POLICY_TTL`. S3 objects are fetched conditionally on
//! their ETag and a prefix's objects are downloaded only when their ETag changed, so an unchanged
//! document is never downloaded twice. (An SSM parameter's value comes with its version in one
//! small call; an unchanged version is not parsed again.) A new version is validated as a whole:
//! an invalid one is rejected and the last known good version stays in force; with no valid
//! version at all, nothing is written.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use tokio::sync::Mutex;

use super::{AwsError, Clients, ErrorClass};
use crate::cloud::Cloud;
use crate::policy::cache::PolicyCache;
use crate::policy::{self, STATUS_REPORT_NAME};
use crate::status::StatusReport;

/// Where the policy lives, from `TAGWARDEN_POLICY` or `--policy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyLocation {
    S3Object { bucket: String, key: String },
    S3Prefix { bucket: String, prefix: String },
    Ssm { name: String },
}

impl FromStr for PolicyLocation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let usage = "expected s3://BUCKET/KEY (one document), s3://BUCKET/PREFIX/ (every document under it, ending in /) or ssm:/PARAMETER/NAME";
        if let Some(rest) = s.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("policy location {s:?} names no bucket: {usage}"));
            }
            let bucket = bucket.to_string();
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
        }
    }
}

impl PolicyLocation {
    /// Where the status report goes: beside the policy object, or a sibling SSM parameter.
    pub fn status_location(&self) -> PolicyLocation {
        match self {
            PolicyLocation::S3Object { bucket, key } => {
                let dir = key.rsplit_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_default();
                PolicyLocation::S3Object { bucket: bucket.clone(), key: format!("{dir}{STATUS_REPORT_NAME}") }
            }
            PolicyLocation::S3Prefix { bucket, prefix } => {
                PolicyLocation::S3Object { bucket: bucket.clone(), key: format!("{prefix}{STATUS_REPORT_NAME}") }
            }
            PolicyLocation::Ssm { name } => PolicyLocation::Ssm { name: format!("{name}-status") },
        }
    }
}

pub use crate::policy::cache::{LoadedPolicy, PolicyChange, PolicyUnavailable};

pub struct PolicyStore {
    pub location: PolicyLocation,
    pub ttl: Duration,
    state: Mutex<PolicyCache>,
}

impl PolicyStore {
    pub fn new(location: PolicyLocation, ttl: Duration) -> Self {
        PolicyStore { location, ttl, state: Mutex::new(PolicyCache::default()) }
    }

    /// The policy in force, re-checked when the TTL has passed (or when `force`).
    pub async fn current(
        &self,
        clients: &Clients,
        force: bool,
    ) -> (Result<Arc<LoadedPolicy>, PolicyUnavailable>, Option<PolicyChange>) {
        let mut st = self.state.lock().await;
        let location = self.location.to_string();
        let mut change = None;
        if st.due(self.ttl, force) {
            let fetched = self.fetch(clients, &mut st).await;
            match st.record(Cloud::Aws, &location, fetched) {
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
    async fn fetch(
        &self,
        clients: &Clients,
        st: &mut PolicyCache,
    ) -> Result<Option<(String, Vec<(String, String)>)>, AwsError> {
        match &self.location {
            PolicyLocation::S3Object { bucket, key } => {
                let etag = st.documents.get(key).map(|(e, _)| e.clone());
                match get_object(clients, bucket, key, etag.as_deref()).await? {
                    None => Ok(None),
                    Some((etag, text)) => {
                        st.documents.clear();
                        st.documents.insert(key.clone(), (etag.clone(), text.clone()));
                        Ok(Some((format!("{key}@{etag}"), vec![(key.clone(), text)])))
                    }
                }
            }
            PolicyLocation::S3Prefix { bucket, prefix } => {
                let listed = list_policy_objects(clients, bucket, prefix).await?;
                let fingerprint: String = listed.iter().map(|(k, e)| format!("{k}@{e};")).collect();
                if st.seen() == Some(fingerprint.as_str()) {
                    return Ok(None);
                }
                if listed.is_empty() {
                    return Err(AwsError::new(
                        "s3:ListObjectsV2",
                        &self.location.to_string(),
                        "NoPolicyDocuments",
                        "no .yaml, .yml or .json object under the prefix",
                        ErrorClass::Fatal,
                    ));
                }
                let mut docs = Vec::with_capacity(listed.len());
                let mut kept = BTreeMap::new();
                for (key, etag) in listed {
                    let text = match st.documents.get(&key) {
                        Some((e, text)) if *e == etag => text.clone(),
                        _ => match get_object(clients, bucket, &key, None).await? {
                            Some((_, text)) => text,
                            None => continue,
                        },
                    };
                    let name = key.strip_prefix(prefix.as_str()).unwrap_or(&key).to_string();
                    kept.insert(key, (etag, text.clone()));
                    docs.push((name, text));
                }
                st.documents = kept;
                Ok(Some((fingerprint, docs)))
            }
            PolicyLocation::Ssm { name } => {
                let out = clients
                    .ssm
                    .get_parameter()
                    .name(name)
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("ssm:GetParameter", name, e))?;
                let param = out.parameter();
                let fingerprint = format!("{name}@{}", param.map(|p| p.version()).unwrap_or_default());
                if st.seen() == Some(fingerprint.as_str()) {
                    return Ok(None);
                }
                let text = param.and_then(|p| p.value()).unwrap_or_default().to_string();
                Ok(Some((fingerprint, vec![(name.clone(), text)])))
            }
        }
    }

    /// Every document of the policy as published now, bypassing the cache (for the CLI).
    pub async fn documents(&self, clients: &Clients) -> Result<Vec<(String, String)>, AwsError> {
        let mut scratch = PolicyCache::default();
        Ok(self.fetch(clients, &mut scratch).await?.map(|(_, docs)| docs).unwrap_or_default())
    }

    /// The status report beside the policy, if one was written.
    pub async fn read_status(&self, clients: &Clients) -> Result<Option<StatusReport>, AwsError> {
        let target = self.location.status_location();
        let text = match &target {
            PolicyLocation::S3Object { bucket, key } => match get_object(clients, bucket, key, None).await {
                Ok(found) => found.map(|(_, text)| text),
                Err(e) if e.code == "NoSuchKey" => None,
                Err(e) => return Err(e),
            },
            PolicyLocation::Ssm { name } => match clients.ssm.get_parameter().name(name).send().await {
                Ok(out) => out.parameter().and_then(|p| p.value()).map(str::to_owned),
                Err(e) if e.code() == Some("ParameterNotFound") => None,
                Err(e) => return Err(AwsError::from_sdk("ssm:GetParameter", name, e)),
            },
            PolicyLocation::S3Prefix { .. } => None,
        };
        text.map(|t| {
            serde_json::from_str(&t).map_err(|e| {
                AwsError::new("status", &target.to_string(), "NotAStatusReport", &e.to_string(), ErrorClass::Fatal)
            })
        })
        .transpose()
    }

    /// Write the status report beside the policy.
    pub async fn write_status(&self, clients: &Clients, report: &StatusReport) -> Result<(), AwsError> {
        let target = self.location.status_location();
        match &target {
            PolicyLocation::S3Object { bucket, key } => {
                let body = serde_json::to_vec_pretty(report).unwrap_or_default();
                clients
                    .s3
                    .put_object()
                    .bucket(bucket)
                    .key(key)
                    .content_type("application/json")
                    .body(body.into())
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("s3:PutObject", &target.to_string(), e))?;
            }
            PolicyLocation::Ssm { name } => {
                clients
                    .ssm
                    .put_parameter()
                    .name(name)
                    .r#type(aws_sdk_ssm::types::ParameterType::String)
                    .overwrite(true)
                    .value(report.to_json_within(4096))
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("ssm:PutParameter", name, e))?;
            }
            PolicyLocation::S3Prefix { .. } => {}
        }
        Ok(())
    }
}

async fn get_object(
    clients: &Clients,
    bucket: &str,
    key: &str,
    etag: Option<&str>,
) -> Result<Option<(String, String)>, AwsError> {
    let name = format!("s3://{bucket}/{key}");
    let out =
        match clients.s3.get_object().bucket(bucket).key(key).set_if_none_match(etag.map(str::to_owned)).send().await {
            Ok(out) => out,
            Err(e)
                if e.raw_response().is_some_and(|r| r.status().as_u16() == 304) || e.code() == Some("NotModified") =>
            {
                return Ok(None)
            }
            Err(e) => return Err(AwsError::from_sdk("s3:GetObject", &name, e)),
        };
    let etag = out.e_tag().unwrap_or_default().to_string();
    let len = out.content_length().unwrap_or_default();
    if len > policy::load::MAX_DOCUMENT_BYTES as i64 {
        return Err(AwsError::new(
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
        .map_err(|e| AwsError::new("s3:GetObject", &name, "ReadBody", &e.to_string(), ErrorClass::Transient))?
        .into_bytes();
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
        AwsError::new("s3:GetObject", &name, "NotUtf8", "a policy document must be UTF-8 text", ErrorClass::Fatal)
    })?;
    Ok(Some((etag, text)))
}

/// Policy documents under a prefix (not sub-prefixes' markers, not the status report), by key.
async fn list_policy_objects(clients: &Clients, bucket: &str, prefix: &str) -> Result<Vec<(String, String)>, AwsError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = clients
            .s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("s3:ListObjectsV2", &format!("s3://{bucket}/{prefix}"), e))?;
        for o in page.contents() {
            let key = o.key().unwrap_or_default();
            let name = key.rsplit('/').next().unwrap_or(key);
            let policy_ext = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
            if policy_ext && name != STATUS_REPORT_NAME && !name.starts_with('.') {
                out.push((key.to_string(), o.e_tag().unwrap_or_default().to_string()));
            }
        }
        token = page.next_continuation_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    out.sort();
    Ok(out)
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
    }
}
