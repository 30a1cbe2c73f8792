//! Publishing to S3 (an object, or the cluster's layer of a prefix) and SSM Parameter Store.

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ssm::types::{ParameterTier, ParameterType};

use super::{PublishError, Published, Store, CLUSTER_LAYER};
use crate::aws::policy_store::{policy_store, PolicyLocation};
use crate::aws::{AwsError, Clients};
use crate::cloud::Cloud;

/// A Standard SSM parameter holds 4 KB; larger values need the Advanced tier, which
/// `Intelligent-Tiering` picks only when needed (and only then charges for).
const SSM_STANDARD_BYTES: usize = 4096;

pub struct AwsStore<'a> {
    clients: &'a Clients,
    location: PolicyLocation,
}

impl<'a> AwsStore<'a> {
    pub fn new(clients: &'a Clients, location: PolicyLocation) -> Self {
        AwsStore { clients, location }
    }

    /// The one object or parameter the cluster's document goes to.
    fn target(&self) -> PolicyLocation {
        match &self.location {
            PolicyLocation::S3Prefix { bucket, prefix } => {
                PolicyLocation::S3Object { bucket: bucket.clone(), key: format!("{prefix}{CLUSTER_LAYER}") }
            }
            other => other.clone(),
        }
    }
}

fn cloud_error(e: AwsError) -> PublishError {
    PublishError::Cloud(e.to_string())
}

impl Store for AwsStore<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    fn location(&self) -> String {
        self.target().to_string()
    }

    fn document_name(&self) -> String {
        match self.target() {
            PolicyLocation::S3Object { key, .. } => match &self.location {
                PolicyLocation::S3Prefix { prefix, .. } => {
                    key.strip_prefix(prefix.as_str()).unwrap_or(&key).to_string()
                }
                _ => key,
            },
            PolicyLocation::Ssm { name } => name,
            PolicyLocation::S3Prefix { prefix, .. } => prefix,
        }
    }

    async fn others(&self) -> Result<Vec<(String, String)>, PublishError> {
        if !matches!(self.location, PolicyLocation::S3Prefix { .. }) {
            return Ok(Vec::new());
        }
        let store = policy_store(self.clients, self.location.clone(), std::time::Duration::ZERO);
        match store.documents().await {
            Ok(docs) => Ok(docs.into_iter().filter(|(name, _)| name != CLUSTER_LAYER).collect()),
            Err(e) if e.code == "NoPolicyDocuments" => Ok(Vec::new()),
            Err(e) => Err(cloud_error(e)),
        }
    }

    async fn read(&self) -> Result<Option<Published>, PublishError> {
        let target = self.target();
        match &target {
            PolicyLocation::S3Object { bucket, key } => {
                let out = match self.clients.s3.get_object().bucket(bucket).key(key).send().await {
                    Ok(out) => out,
                    Err(e) if e.code() == Some("NoSuchKey") => return Ok(None),
                    Err(e) => return Err(cloud_error(AwsError::from_sdk("s3:GetObject", &target.to_string(), e))),
                };
                let token = out.e_tag().unwrap_or_default().to_string();
                let bytes = out.body.collect().await.map_err(|e| PublishError::Cloud(format!("{target}: {e}")))?;
                let text = String::from_utf8_lossy(&bytes.into_bytes()).into_owned();
                Ok(Some(Published { text, token }))
            }
            PolicyLocation::Ssm { name } => {
                match self.clients.ssm.get_parameter().name(name).with_decryption(true).send().await {
                    Ok(out) => Ok(out.parameter().map(|p| Published {
                        text: p.value().unwrap_or_default().to_string(),
                        token: p.version().to_string(),
                    })),
                    Err(e) if e.code() == Some("ParameterNotFound") => Ok(None),
                    Err(e) => Err(cloud_error(AwsError::from_sdk("ssm:GetParameter", name, e))),
                }
            }
            PolicyLocation::S3Prefix { .. } => Ok(None),
        }
    }

    async fn write(&self, text: &str, expected: Option<&Published>) -> Result<String, PublishError> {
        let target = self.target();
        let location = target.to_string();
        let conflict = |found: &str| PublishError::Conflict {
            location: location.clone(),
            read: expected.map(|p| p.token.clone()).unwrap_or_else(|| "none".into()),
            found: found.to_string(),
        };
        match &target {
            PolicyLocation::S3Object { bucket, key } => {
                let put = self.clients.s3.put_object().bucket(bucket).key(key).content_type(super::content_type(key));
                // S3 conditional writes: `If-None-Match: *` creates only; `If-Match` replaces only
                // that ETag. A lost race is 412 PreconditionFailed, or 409 ConditionalRequestConflict
                // while another conditional write is in flight.
                let put = match expected {
                    Some(p) => put.if_match(&p.token),
                    None => put.if_none_match("*"),
                };
                match put.body(text.as_bytes().to_vec().into()).send().await {
                    Ok(out) => Ok(out.e_tag().unwrap_or_default().to_string()),
                    Err(e) if matches!(e.code(), Some("PreconditionFailed" | "ConditionalRequestConflict")) => {
                        Err(conflict("a newer object"))
                    }
                    Err(e) => Err(cloud_error(AwsError::from_sdk("s3:PutObject", &location, e))),
                }
            }
            PolicyLocation::Ssm { name } => {
                // PutParameter has no condition. Creating uses Overwrite=false (refused if the
                // parameter appeared); replacing re-reads the version right before the put and
                // checks that the put made exactly the next version.
                if let Some(p) = expected {
                    match self.read().await? {
                        Some(now) if now.token == p.token => {}
                        Some(now) => return Err(conflict(&now.token)),
                        None => return Err(conflict("deleted")),
                    }
                }
                let mut put = self
                    .clients
                    .ssm
                    .put_parameter()
                    .name(name)
                    .r#type(ParameterType::String)
                    .overwrite(expected.is_some())
                    .value(text);
                if text.len() > SSM_STANDARD_BYTES {
                    put = put.tier(ParameterTier::IntelligentTiering);
                }
                let version = match put.send().await {
                    Ok(out) => out.version(),
                    Err(e) if e.code() == Some("ParameterAlreadyExists") => return Err(conflict("created by another")),
                    Err(e) => return Err(cloud_error(AwsError::from_sdk("ssm:PutParameter", name, e))),
                };
                let want = expected.and_then(|p| p.token.parse::<i64>().ok()).map_or(1, |v| v + 1);
                if version != want {
                    return Err(PublishError::Raced {
                        location,
                        read: expected.map(|p| p.token.clone()).unwrap_or_else(|| "none".into()),
                        written: version.to_string(),
                    });
                }
                Ok(version.to_string())
            }
            PolicyLocation::S3Prefix { .. } => Err(PublishError::Cloud(format!("{location} is a prefix"))),
        }
    }
}
