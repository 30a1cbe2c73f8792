//! The SDK calls of each service `tagwarden_core::services` describes, one file per service: how it reads
//! and writes one resource's tags, and the shared calls or listings only it has. Which one serves a
//! resource is its descriptor's [`Api`]; [`read`] and [`write`] are the one place that maps it.

mod ec2;
mod elb;
mod iam;
mod kms;
mod route53;
mod s3;
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
        Api::Tagging => tagging::write(t, r, set, current).await,
    }
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
