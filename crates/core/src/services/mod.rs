//! The AWS services tagwarden reads and writes through their own APIs: one descriptor each, and
//! everything about a service is in it — the CloudTrail events that name its resources and where
//! their ids are, the ARN shape, the read, write and list calls (as IAM actions), how many
//! resources one write may name and why that API rather than the generic one, and what the
//! function's IAM role needs for it ([`Grant`]). The event parser (`crate::events::cloudtrail`),
//! the AWS adapter's reads, writes and batching (`tagwarden_aws`), the sweep's listings, and
//! infra/aws (the EventBridge patterns and the role's statements, through
//! infra/aws/generated/services.json, which tests/iam_policy.rs writes and checks, as it does the
//! README's table) are driven from [`SERVICES`].
//!
//! A kind no descriptor names goes through the Resource Groups Tagging API ([`TAGGING`]), which
//! AWS documents for nearly every taggable service, so any ARN the cluster owns has a path; a type
//! that API refuses is reported `unsupported`, never dropped.
//!
//! Deliberately not here: the SDK calls themselves (`tagwarden_aws::services`, one file per service),
//! and parsing (`crate::events::cloudtrail`). Pure data: no I/O, compiled without the cloud features.

use crate::resource::ResourceRef;

mod catalogue;

pub use catalogue::{
    EC2, EFS, ELBV2, ELB_CLASSIC, IAM_INSTANCE_PROFILE, IAM_OIDC_PROVIDER, IAM_POLICY, IAM_ROLE, IAM_USER, KMS,
    ROUTE53, S3, SERVICES, SNS, TAGGING,
};

/// The API family that serves a resource: the key from a descriptor to its SDK calls.
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
    Kms,
    Sns,
    /// `tag:GetResources` by ARN / `tag:TagResources`.
    Tagging,
}

/// What a CloudTrail event says of the resources it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Tagged,
}

/// Where a CloudTrail event keeps the ids of the resources it touches (AWS's documentation).
#[derive(Debug, Clone, Copy)]
pub enum Ids {
    /// `responseElements.instancesSet.items[]`: instances, then each one's ENIs.
    RunInstances,
    /// The first `field` anywhere in `responseElements` (some EC2 responses are wrapped in
    /// `<Action>Response`, others are flat).
    Ec2Response(&'static str),
    /// `requestParameters.resourcesSet.items[].resourceId`.
    Ec2ResourcesSet,
    /// `requestParameters.bucketName`.
    S3Bucket,
    /// `responseElements.<list>[].<field>` (ELBv2 ARNs).
    ElbResponse(&'static str, &'static str),
    /// `requestParameters.resourceArns[]`.
    ElbRequestArns,
    /// A Classic load balancer: `requestParameters.loadBalancerName` or `loadBalancerNames[]`.
    ElbClassicNames,
    /// An IAM entity addressed by name: the request's name field and the response object that
    /// carries its ARN.
    IamNamed(&'static str, Option<&'static str>),
    /// An ARN at a `/pointer` into `responseElements`, or in `requestParameters.<field>`.
    Arn(&'static str),
    /// A Route 53 resource created: `responseElements.<object>.id` (`/hostedzone/Z…` or a bare
    /// id), of ARN type `kind`.
    Route53Created(&'static str, &'static str),
    /// `requestParameters.resourceType` + `resourceId` (`ChangeTagsForResource`).
    Route53Tagged,
    /// An EFS file system or access point: its ARN at a `/pointer` into `responseElements`, or
    /// its id in `requestParameters.resourceId` / `fileSystemId`.
    Efs(Option<&'static str>),
    /// `requestParameters.<field>`: an ARN, or an id that the descriptor's ARN shape completes.
    IdOrArn(&'static str),
}

/// How a sweep sends the writes of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// One resource a call.
    Alone,
    /// One resource a call, re-read right before: the write replaces the whole tag set.
    Reread,
    /// Up to this many resources a call, sharing one delta.
    Shared(usize),
}

impl Batch {
    /// The most resources one write names.
    pub const fn max(self) -> usize {
        match self {
            Batch::Shared(n) => n,
            Batch::Alone | Batch::Reread => 1,
        }
    }
}

/// What the function's IAM role needs for a descriptor beyond its actions: where IAM authorizes
/// them, and what limits the write. Each descriptor's comment cites the Service Authorization
/// Reference ("Actions, resources, and condition keys for <service>") for its entries.
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    /// The ARN patterns (`{partition}`, `{region}`, `{account}` filled in by the module) that the
    /// write and the `scoped` reads are authorized on.
    pub resources: &'static [&'static str],
    /// Its reads and listings that have a resource type, granted on `resources`; the others have
    /// none and are granted on `"*"`.
    pub scoped: &'static [&'static str],
    pub guard: Guard,
}

/// What limits a descriptor's write in the role (infra/aws/iam.tf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// The service evaluates `aws:ResourceTag/${TagKey}` on `resources` and `aws:TagKeys` for the
    /// write: it is granted on the resources a cluster's ownership tag marks, the reserved keys
    /// denied. A new service of this kind needs no edit of the module.
    Owned,
    /// Written through `tag:TagResources`, which also needs the owning service's own tag action on
    /// each resource: that action, granted as [`Guard::Owned`].
    OwnedVia(&'static str),
    /// No tag condition key (Route 53): granted only on the resources the module's
    /// `route53_writable_resources` lists.
    Listed,
    /// No tag condition key, and no account in the ARN (S3): granted on the buckets the module's
    /// name patterns match, in its own account.
    Bucket,
    /// No resource type and no condition key (`tag:TagResources`): granted on `"*"`; what it can
    /// tag is what each resource's own action ([`Guard::OwnedVia`]) allows.
    Anywhere,
}

/// One service: see the module doc.
pub struct Service {
    /// The kinds it covers (`service:type`, as [`ResourceRef::from_arn`] names them); one ending
    /// in `*` matches by prefix. The first matching descriptor wins.
    pub kind: &'static str,
    pub api: Api,
    /// The ARN of one resource, `{partition}`, `{region}`, `{account}` and `{id}` filled in.
    pub arn: &'static str,
    /// The CloudTrail events that name its resources, and where their ids are.
    pub events: &'static [(&'static str, Change, Ids)],
    /// The read of one resource's tags.
    pub read: &'static str,
    /// The write of one (or, [`Batch::Shared`], several) resources' tags.
    pub write: &'static str,
    /// How a sweep finds the owned ones.
    pub list: &'static [&'static str],
    /// Its other reads, which its SDK calls make beside `read` and `list`.
    pub also: &'static [&'static str],
    pub grant: Grant,
    pub batch: Batch,
    pub why: &'static str,
}

impl Service {
    /// The service's prefix in ARNs and IAM actions (`ec2`, `kms`, …); the CloudTrail
    /// `eventSource` of its events is that followed by `.amazonaws.com`.
    pub fn service(&self) -> &'static str {
        self.kind.split(':').next().unwrap_or(self.kind)
    }

    /// The ARN of resource `id` in this descriptor's shape.
    pub fn arn_of(&self, id: &str, region: &str, account: &str) -> String {
        self.arn
            .replace("{partition}", crate::resource::partition(region))
            .replace("{region}", region)
            .replace("{account}", account)
            .replace("{id}", id)
    }
}

/// The descriptor that serves `r`.
pub fn of(r: &ResourceRef) -> &'static Service {
    let kind = r.kind.as_str();
    SERVICES
        .iter()
        .find(|s| match s.kind.strip_suffix('*') {
            Some(prefix) => kind.starts_with(prefix),
            None => kind == s.kind,
        })
        .unwrap_or(&TAGGING)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(arn: &str) -> Api {
        of(&ResourceRef::from_arn(arn).expect("arn")).api
    }

    #[test]
    fn every_arn_has_a_path() {
        assert_eq!(api("arn:aws:ec2:us-east-1:1:vpc/vpc-1"), Api::Ec2);
        assert_eq!(api("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/cov-1-ingress"), Api::ElbClassic);
        assert_eq!(api("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/web/50dc6c495c0c9188"), Api::Elbv2);
        assert_eq!(api("arn:aws:elasticloadbalancing:us-east-1:1:listener/app/web/50dc/f2f7"), Api::Elbv2);
        assert_eq!(api("arn:aws:route53:::hostedzone/Z0123"), Api::Route53);
        assert_eq!(api("arn:aws:kms:us-east-1:1:key/1234abcd-12ab"), Api::Kms);
        assert_eq!(api("arn:aws:kms:us-east-1:1:alias/app"), Api::Tagging);
        assert_eq!(api("arn:aws:elasticfilesystem:us-east-1:1:file-system/fs-1"), Api::Tagging);
        assert_eq!(api("arn:aws:sns:us-east-1:1:alerts"), Api::Sns);
        assert_eq!(api("arn:aws:sqs:us-east-1:1:work"), Api::Tagging);
    }

    /// Each descriptor's ARN shape names a resource it serves: the shape and the kind agree.
    #[test]
    fn each_arn_shape_is_served_by_its_own_descriptor() {
        for s in SERVICES.iter().chain([&TAGGING]) {
            let arn = s.arn_of("x-1", "us-east-1", "111122223333");
            let r = ResourceRef::from_arn(&arn).unwrap_or_else(|e| panic!("{}: {arn}: {e}", s.kind));
            // Kinds are unique: a const's address is not (each use may be its own copy).
            assert_eq!(of(&r).kind, s.kind, "{arn}");
        }
    }

    /// A grant's scoped reads are the descriptor's own, of its own service, on resources it names.
    #[test]
    fn each_grant_scopes_its_own_reads() {
        for s in SERVICES.iter().chain([&TAGGING]) {
            let g = &s.grant;
            let reads: Vec<&str> =
                [s.read].into_iter().chain(s.list.iter().copied()).chain(s.also.iter().copied()).collect();
            for a in g.scoped {
                assert!(reads.contains(a), "{}: {a} is not one of its reads", s.kind);
                assert!(a.starts_with(&format!("{}:", s.service())), "{}: {a}", s.kind);
            }
            let resourced = !matches!(g.guard, Guard::Bucket | Guard::Anywhere);
            assert_eq!(!g.resources.is_empty(), resourced, "{}", s.kind);
            assert!(g.resources.iter().all(|r| r.starts_with(&format!("arn:{{partition}}:{}:", s.service()))));
        }
    }

    #[test]
    fn each_descriptor_reads_with_a_read_and_writes_with_a_write() {
        for s in SERVICES.iter().chain([&TAGGING]) {
            assert!(crate::calls::is_write(s.write), "{}: {}", s.kind, s.write);
            assert!(!crate::calls::is_write(s.read), "{}: {}", s.kind, s.read);
            assert!(s.list.iter().chain(s.also).all(|l| !crate::calls::is_write(l)), "{}", s.kind);
        }
    }
}
