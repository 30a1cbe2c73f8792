//! The OpenShift `Infrastructure` object (`config.openshift.io/v1`, cluster-scoped, one object
//! named `cluster`), modelled only as far as tagwarden reads it: the platform type,
//! `spec.platformSpec.<cloud>.resourceTags`, `status.platformStatus.<cloud>.resourceTags` and
//! `status.infrastructureName` (openshift/api `config/v1/types_infrastructure.go`); on Google
//! Cloud `status.platformStatus.gcp.resourceLabels` (`[]GCPResourceLabel`, `{key, value}`, the
//! policy's labels) and `resourceTags` (`[]GCPResourceTag`, `{parentID, key, value}`, Resource
//! Manager tags, the policy's `<parentID>/<key>` entries).
//! Unknown fields are ignored on read and never written into the document.
//!
//! The tag and label lists stay raw JSON: their shape is judged by the policy loader, with the
//! same messages as for a document given as a file.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const GROUP: &str = "config.openshift.io";
pub const VERSION: &str = "v1";
pub const KIND: &str = "Infrastructure";
pub const PLURAL: &str = "infrastructures";
/// The one Infrastructure object every OpenShift cluster has.
pub const NAME: &str = "cluster";

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Infrastructure {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: InfrastructureSpec,
    #[serde(default)]
    pub status: InfrastructureStatus,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_spec: Option<Platform>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_status: Option<Platform>,
}

/// `platformSpec` and `platformStatus` share the part tagwarden reads.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Platform {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub platform_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<CloudTags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<CloudTags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GcpLabels>,
}

/// `platformStatus.gcp` as far as tagwarden reads it (`GCPPlatformStatus`; `GCPPlatformSpec` has
/// neither field, so in `platformSpec` this stays empty).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GcpLabels {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_labels: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_tags: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudTags {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_tags: Option<Value>,
}

impl kube::Resource for Infrastructure {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        KIND.into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        PLURAL.into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What is published: the object as `oc get infrastructure cluster -o yaml` shows it, less every
/// field tagwarden does not read (metadata.resourceVersion and managedFields among them), so that
/// the bytes change only when the tags, the platform or the infraID do.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: DocumentMeta<'a>,
    spec: &'a InfrastructureSpec,
    status: &'a InfrastructureStatus,
}

#[derive(Serialize)]
struct DocumentMeta<'a> {
    name: &'a str,
}

impl Infrastructure {
    /// The policy document (YAML) this object publishes.
    pub fn to_document(&self) -> Result<String, serde_yaml_ng::Error> {
        serde_yaml_ng::to_string(&Document {
            api_version: "config.openshift.io/v1",
            kind: KIND,
            metadata: DocumentMeta { name: self.metadata.name.as_deref().unwrap_or(NAME) },
            spec: &self.spec,
            status: &self.status,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::policy::load::load_one;

    const OBJECT: &str = r#"{
      "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
      "metadata": {"name": "cluster", "resourceVersion": "731", "uid": "u-1",
                   "managedFields": [{"manager": "cluster-bootstrap"}]},
      "spec": {"cloudConfig": {"name": ""},
               "platformSpec": {"type": "AWS", "aws": {"resourceTags": [{"key": "cost-center", "value": "4242"}]}}},
      "status": {"apiServerURL": "https://api.example:6443", "infrastructureName": "c-7xk2p", "platform": "AWS",
                 "platformStatus": {"type": "AWS", "aws": {"region": "eu-west-1",
                                    "resourceTags": [{"key": "team", "value": "platform"}]}}}
    }"#;

    #[test]
    fn document_keeps_what_the_loader_reads_and_nothing_else() {
        let infra: Infrastructure = serde_json::from_str(OBJECT).expect("object");
        let doc = infra.to_document().expect("yaml");
        for absent in ["resourceVersion", "managedFields", "apiServerURL", "region", "cloudConfig", "uid"] {
            assert!(!doc.contains(absent), "{absent} leaked into the document:\n{doc}");
        }
        let policy = load_one("infrastructure/cluster", &doc).expect("the loader accepts the document");
        assert_eq!(policy.infra_id.as_deref(), Some("c-7xk2p"));
        let tags =
            |l: &[tagwarden_core::policy::Tag]| l.iter().map(|t| format!("{}={}", t.key, t.value)).collect::<Vec<_>>();
        assert_eq!(
            (tags(&policy.status), tags(&policy.spec)),
            (vec!["team=platform".into()], vec!["cost-center=4242".into()])
        );

        let mut moved = infra.clone();
        moved.metadata.resource_version = Some("999".into());
        assert_eq!(moved.to_document().expect("yaml"), doc, "a new resourceVersion alone is no new document");
    }

    /// On Google Cloud the labels and the tags are kept; the project, the region and the load
    /// balancer configuration are not.
    #[test]
    fn a_gcp_document_keeps_the_labels_and_the_tags() {
        let object = r#"{
          "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
          "metadata": {"name": "cluster", "resourceVersion": "12"},
          "spec": {"cloudConfig": {"key": "config", "name": "cloud-provider-config"}, "platformSpec": {"type": "GCP"}},
          "status": {"infrastructureName": "g-5m8tq", "platform": "GCP",
                     "platformStatus": {"type": "GCP", "gcp": {"projectID": "my-project", "region": "us-central1",
                        "cloudLoadBalancerConfig": {"dnsType": "PlatformDefault"},
                        "resourceLabels": [{"key": "team", "value": "platform"}],
                        "resourceTags": [{"parentID": "123456789012", "key": "env", "value": "prod"}]}}}
        }"#;
        let infra: Infrastructure = serde_json::from_str(object).expect("object");
        let doc = infra.to_document().expect("yaml");
        for absent in ["projectID", "us-central1", "dnsType", "cloudConfig", "resourceVersion"] {
            assert!(!doc.contains(absent), "{absent} leaked into the document:\n{doc}");
        }
        let policy = load_one("infrastructure/cluster", &doc).expect("the loader accepts the document");
        assert_eq!(policy.cloud, Some(tagwarden_core::cloud::Cloud::Gcp));
        assert_eq!(
            policy.status.iter().map(|t| format!("{}={}", t.key, t.value)).collect::<Vec<_>>(),
            ["team=platform", "123456789012/env=prod"]
        );
    }

    #[test]
    fn malformed_tags_reach_the_loader_and_are_refused_there() {
        let text = OBJECT.replace(r#"[{"key": "team", "value": "platform"}]"#, r#""team=platform""#);
        let infra: Infrastructure = serde_json::from_str(&text).expect("still an object");
        let err = load_one("infrastructure/cluster", &infra.to_document().expect("yaml")).expect_err("refused");
        assert!(err.to_string().contains("status.platformStatus.aws.resourceTags"), "{err}");
    }
}
