//! Which API reads and writes each kind of AWS resource, and why: one row per service. A kind no
//! row names goes through the Resource Groups Tagging API, which AWS documents for nearly every
//! taggable service, so any ARN the cluster owns has a path; a type that API refuses is reported
//! `unsupported`, never dropped.
//!
//! Deliberately not here: the calls themselves (`tags.rs`), how a sweep groups writes (`reconcile.rs`, `crate::enforce::sweep`).

use crate::resource::ResourceRef;

/// The API family that serves a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Api {
    Ec2,
    S3,
    Elbv2,
    ElbClassic,
    Route53,
    IamRole,
    IamUser,
    IamInstanceProfile,
    IamPolicy,
    IamOidcProvider,
    /// `tag:GetResources` by ARN / `tag:TagResources`.
    Tagging,
}

/// One row: the kinds it covers, its API, the IAM actions it reads, writes and lists with, and
/// why that API rather than the generic one. The actions are the ones `tags.rs` and `discover.rs`
/// call; tests/iam_policy.rs holds them to the role's grants.
pub struct Row {
    pub kind: &'static str,
    pub api: Api,
    /// The read of one resource's tags.
    pub read: &'static str,
    /// The write of one (or, with `batch` > 1, several) resources' tags.
    pub write: &'static str,
    /// How a sweep finds the owned ones.
    pub list: &'static [&'static str],
    /// Resources one write call may name (sharing one delta).
    pub batch: usize,
    pub why: &'static str,
}

const TAGGED: &[&str] = &["tag:GetResources"];

/// Kinds ending in `*` match by prefix. The first matching row wins.
pub const ROWS: &[Row] = &[
    Row {
        kind: "ec2:*",
        api: Api::Ec2,
        read: "ec2:DescribeTags",
        write: "ec2:CreateTags",
        list: TAGGED,
        batch: 1000,
        why: "CreateTags names up to 1000 resources sharing one delta; TagResources 20",
    },
    Row {
        kind: "s3:bucket",
        api: Api::S3,
        read: "s3:GetBucketTagging",
        write: "s3:PutBucketTagging",
        list: TAGGED,
        batch: 1,
        why: "GetBucketTagging reads the bucket's own tags (the Tagging API's index lags); PutBucketTagging replaces the set, so it is re-read right before the write",
    },
    Row {
        kind: "elasticloadbalancing:classic-loadbalancer",
        api: Api::ElbClassic,
        read: "elasticloadbalancing:DescribeTags",
        write: "elasticloadbalancing:AddTags",
        list: TAGGED,
        batch: 1,
        why: "the Classic ELB API (AddTags takes one name) costs the same per load balancer as TagResources and is the one the emulator implements",
    },
    Row {
        kind: "elasticloadbalancing:*",
        api: Api::Elbv2,
        read: "elasticloadbalancing:DescribeTags",
        write: "elasticloadbalancing:AddTags",
        list: &["tag:GetResources", "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeRules"],
        batch: 1,
        why: "ELBv2 DescribeTags/AddTags (one ARN per AddTags, as the service enforces); listeners and rules too, which the Tagging API does not list",
    },
    Row {
        kind: "route53:*",
        api: Api::Route53,
        read: "route53:ListTagsForResource",
        write: "route53:ChangeTagsForResource",
        list: &["route53:ListHostedZones", "route53:ListHealthChecks", "route53:ListTagsForResources"],
        batch: 1,
        why: "Route 53 is global: ChangeTagsForResource (10 tags a call) and ListTagsForResources, which see hosted zones and health checks wherever the function runs",
    },
    Row {
        kind: "iam:role",
        api: Api::IamRole,
        read: "iam:GetRole",
        write: "iam:TagRole",
        list: &["iam:GetAccountAuthorizationDetails"],
        batch: 1,
        why: "the Tagging API does not cover IAM roles; GetRole carries the tags and the ARN with its path",
    },
    Row {
        kind: "iam:user",
        api: Api::IamUser,
        read: "iam:GetUser",
        write: "iam:TagUser",
        list: &["iam:GetAccountAuthorizationDetails"],
        batch: 1,
        why: "the Tagging API does not cover IAM users",
    },
    Row {
        kind: "iam:instance-profile",
        api: Api::IamInstanceProfile,
        read: "iam:ListInstanceProfileTags",
        write: "iam:TagInstanceProfile",
        list: &["iam:GetAccountAuthorizationDetails", "iam:ListInstanceProfiles"],
        batch: 1,
        why: "IAM's own Tag* calls; profiles attached to a role come with its listing",
    },
    Row {
        kind: "iam:policy",
        api: Api::IamPolicy,
        read: "iam:ListPolicyTags",
        write: "iam:TagPolicy",
        list: &["iam:ListPolicies"],
        batch: 1,
        why: "IAM's own Tag* calls",
    },
    Row {
        kind: "iam:oidc-provider",
        api: Api::IamOidcProvider,
        read: "iam:ListOpenIDConnectProviderTags",
        write: "iam:TagOpenIDConnectProvider",
        list: &["iam:ListOpenIDConnectProviders"],
        batch: 1,
        why: "IAM's own Tag* calls",
    },
];

/// The generic path: every other ARN, 20 per `TagResources`.
pub const TAGGING: Row = Row {
    kind: "*",
    api: Api::Tagging,
    read: "tag:GetResources",
    write: "tag:TagResources",
    list: TAGGED,
    batch: 20,
    why: "Resource Groups Tagging API: any other taggable service",
};

/// The row that serves `r`.
pub fn row_of(r: &ResourceRef) -> &'static Row {
    let kind = r.kind.as_str();
    ROWS.iter()
        .find(|row| match row.kind.strip_suffix('*') {
            Some(prefix) => kind.starts_with(prefix),
            None => kind == row.kind,
        })
        .unwrap_or(&TAGGING)
}

pub fn api_of(r: &ResourceRef) -> Api {
    row_of(r).api
}

/// The last segment of an ARN's resource part: a Classic load balancer's name, a hosted zone's or
/// health check's id.
pub fn arn_name(arn: &str) -> &str {
    arn.rsplit('/').next().unwrap_or(arn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(arn: &str) -> Api {
        api_of(&ResourceRef::from_arn(arn).expect("arn"))
    }

    #[test]
    fn every_arn_has_a_path() {
        assert_eq!(kind("arn:aws:ec2:us-east-1:1:vpc/vpc-1"), Api::Ec2);
        assert_eq!(kind("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/cov-1-ingress"), Api::ElbClassic);
        assert_eq!(kind("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/web/50dc6c495c0c9188"), Api::Elbv2);
        assert_eq!(kind("arn:aws:elasticloadbalancing:us-east-1:1:listener/app/web/50dc/f2f7"), Api::Elbv2);
        assert_eq!(kind("arn:aws:route53:::hostedzone/Z0123"), Api::Route53);
        assert_eq!(kind("arn:aws:elasticfilesystem:us-east-1:1:file-system/fs-1"), Api::Tagging);
        assert_eq!(kind("arn:aws:sns:us-east-1:1:topic"), Api::Tagging);
        assert_eq!(arn_name("arn:aws:route53:::hostedzone/Z0123"), "Z0123");
    }

    #[test]
    fn each_row_reads_with_a_read_and_writes_with_a_write() {
        for row in ROWS.iter().chain([&TAGGING]) {
            assert!(crate::calls::is_write(row.write), "{}: {}", row.kind, row.write);
            assert!(!crate::calls::is_write(row.read), "{}: {}", row.kind, row.read);
            assert!(row.list.iter().all(|l| !crate::calls::is_write(l)), "{}", row.kind);
        }
    }
}
