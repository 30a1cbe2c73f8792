//! The SDK calls of each service `tagwarden_core::services` describes, one file per service: how it reads
//! and writes one resource's tags, and the shared calls or listings only it has. Which one serves a
//! resource is its descriptor's [`Api`]; [`read`] and [`write`] are the one place that maps it.

mod ec2;
mod elb;
mod iam;
mod kms;
mod route53;
mod s3;
mod sns;
mod tagging;

use crate::Tagger;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::Api;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// One read of `r`'s tags through its service's API and, where the read says it (IAM roles and
/// users), the resource's real ARN.
pub(super) async fn read(t: &Tagger, api: Api, r: &ResourceRef) -> Result<(TagMap, Option<String>), CloudError> {
    let tags = match api {
        Api::IamRole => return iam::read_role(t, r).await,
        Api::IamUser => return iam::read_user(t, r).await,
        Api::Ec2 => ec2::read(t, r).await,
        Api::S3 => s3::read(t, r).await,
        Api::Elbv2 => elb::read_v2(t, r).await,
        Api::ElbClassic => elb::read_classic(t, r).await,
        Api::Route53 => route53::read(t, r).await,
        Api::IamInstanceProfile => iam::read_instance_profile(t, r).await,
        Api::IamPolicy => iam::read_policy(t, r).await,
        Api::IamOidcProvider => iam::read_oidc_provider(t, r).await,
        Api::Kms => kms::read(t, r).await,
        Api::Sns => sns::read(t, r).await,
        Api::Tagging => tagging::read(t, r).await,
    };
    tags.map(|tags| (tags, None))
}

/// One write of `set` on `r` through its service's API; `current` is the set the plan was made
/// from, for the services whose write replaces the whole set.
pub(super) async fn write(
    t: &Tagger,
    api: Api,
    r: &ResourceRef,
    set: &TagMap,
    current: &TagMap,
) -> Result<(), CloudError> {
    match api {
        Api::Ec2 => ec2::write(t, r, set, current).await,
        Api::S3 => s3::write(t, r, set, current).await,
        Api::Elbv2 => elb::write_v2(t, r, set, current).await,
        Api::ElbClassic => elb::write_classic(t, r, set, current).await,
        Api::Route53 => route53::write(t, r, set, current).await,
        Api::IamRole => iam::write_role(t, r, set, current).await,
        Api::IamUser => iam::write_user(t, r, set, current).await,
        Api::IamInstanceProfile => iam::write_instance_profile(t, r, set, current).await,
        Api::IamPolicy => iam::write_policy(t, r, set, current).await,
        Api::IamOidcProvider => iam::write_oidc_provider(t, r, set, current).await,
        Api::Kms => kms::write(t, r, set, current).await,
        Api::Sns => sns::write(t, r, set, current).await,
        Api::Tagging => tagging::write(t, r, set, current).await,
    }
}

/// One write of `set` on several resources of `api` sharing one delta (its descriptor's
/// `Batch::Shared`), and the ones that failed alone, by position. Only EC2's `CreateTags` and the
/// Tagging API's `TagResources` name several resources; any other API is refused here, never sent
/// to another API's call (the test below holds the descriptors to it).
pub(super) async fn write_shared(
    t: &Tagger,
    api: Api,
    resources: &[&ResourceRef],
    set: &TagMap,
) -> Result<Vec<(usize, CloudError)>, CloudError> {
    match api {
        Api::Ec2 => ec2::write_shared(t, resources, set).await,
        Api::Tagging => tagging::write_shared(t, resources, set).await,
        other => {
            let ids: Vec<&str> = resources.iter().map(|r| r.id.as_str()).collect();
            let why = format!("{other:?} writes one resource a call: its descriptor's batch cannot be Batch::Shared");
            Err(CloudError::aws("write_shared", &batch_name(&ids), NO_SHARED_WRITE, &why, ErrorClass::Fatal))
        }
    }
}

/// The code of a shared write asked of an API that has none.
const NO_SHARED_WRITE: &str = "NoSharedWrite";

/// How many items the SDK calls ask for or name at once, in one table: each the API reference's
/// maximum unless said. Batches of writes are the descriptors' (`tagwarden_core::services`).
mod limits {
    /// ec2:DescribeTags `MaxResults` (5–1000).
    pub const EC2_TAGS_PAGE: i32 = 1000;
    /// ec2:DescribeVolumes `MaxResults` (5–500).
    pub const EC2_VOLUMES_PAGE: i32 = 500;
    /// EC2 ids named in one `resource-id` (or `attachment.instance-id`) filter. The API reference
    /// models no maximum for a filter's values; 200 keeps each query-string request small, and at
    /// 5 tags an id, one [`EC2_TAGS_PAGE`].
    pub const EC2_IDS_PER_FILTER: usize = 200;
    /// iam:GetAccountAuthorizationDetails, ListInstanceProfiles and ListPolicies `MaxItems` (1–1000).
    pub const IAM_PAGE: i32 = 1000;
    /// kms:ListResourceTags `Limit` (1–50): a key holds at most 50 tags, so one page in practice.
    pub const KMS_TAGS_PAGE: i32 = 50;
    /// tag:GetResources `ResourcesPerPage` (1–100) and `TagsPerPage` (100–500; a resource is never
    /// split across pages). Without `TagsPerPage`, pages hold fewer resources when each carries
    /// many tags (moto applies a default of 100 tags, and AWS documents none): every tag tagwarden
    /// adds made the next sweep's listing longer. 500 keeps a page at 100 resources of up to 5 tags.
    pub const TAGGING_RESOURCES_PAGE: i32 = 100;
    pub const TAGGING_TAGS_PAGE: i32 = 500;
    /// route53:ChangeTagsForResource's `AddTags` holds at most 10 tags, and ListTagsForResources
    /// names at most 10 resources (Route 53 API Reference).
    pub const ROUTE53_PER_CALL: usize = 10;
}

/// The last segment of an ARN's resource part: a Classic load balancer's name, a hosted zone's or
/// health check's id.
fn arn_name(arn: &str) -> &str {
    arn.rsplit('/').next().unwrap_or(arn)
}

fn build_error(operation: &'static str, id: &str, e: impl std::fmt::Display) -> CloudError {
    CloudError::aws(operation, id, "BuildError", &e.to_string(), ErrorClass::Fatal)
}

/// How a batch is named in errors: its first id and how many more.
fn batch_name(ids: &[&str]) -> String {
    match ids {
        [] => String::new(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::services::{Batch, SERVICES, TAGGING};
    use tagwarden_engine::enforce::Adapter;

    /// Clients whose every call fails at once, without retries: a closed port on loopback.
    fn offline() -> Tagger {
        let config = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("AKIDTEST", "secret", None, None, "test"),
            ))
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build();
        Tagger::new(crate::Clients::new(&config))
    }

    /// A shared write goes to its own API's call, or is refused without a call: never to
    /// another API's (it once went to EC2's `CreateTags` for any API but the Tagging API's).
    #[tokio::test]
    async fn a_shared_write_goes_to_its_own_api() {
        let t = offline();
        let key = ResourceRef::from_arn("arn:aws:kms:us-east-1:111122223333:key/k-1").expect("arn");
        let set: TagMap = [("team".to_string(), "a".to_string())].into();
        let e = t.write_shared(Api::Kms, &[&key], &set).await.expect_err("KMS has no shared write");
        assert_eq!((e.code.as_str(), e.class), (NO_SHARED_WRITE, ErrorClass::Fatal), "{e}");
        assert!(t.clients.calls.snapshot().is_empty(), "{:?}", t.clients.calls.snapshot());

        // Every descriptor that batches has a shared write: its call is made (and fails offline).
        for s in SERVICES.iter().chain([&TAGGING]).filter(|s| matches!(s.batch, Batch::Shared(_))) {
            let r = ResourceRef::from_arn(&s.arn_of("x-1", "us-east-1", "111122223333")).expect("arn");
            let e = t.write_shared(s.api, &[&r], &set).await.expect_err("offline");
            assert_ne!(e.code, NO_SHARED_WRITE, "{}: {e}", s.kind);
        }
        let calls = t.clients.calls.snapshot();
        assert!(
            calls.keys().any(|k| k.ends_with(":CreateTags")) && calls.keys().any(|k| k.ends_with(":TagResources")),
            "{calls:?}"
        );
    }
}
