//! The AWS services tagwarden reads and writes through their own APIs: one descriptor each, and
//! everything about a service is in it — the CloudTrail events that name its resources and where
//! their ids are, the ARN shape, the read, write and list calls (as IAM actions), how many
//! resources one write may name and why that API rather than the generic one. The event parser
//! (`crate::events::cloudtrail`), the AWS adapter's reads, writes and batching (`tagwarden_aws`), the
//! sweep's listings, and tests/iam_policy.rs (the role's grants, the EventBridge patterns and the
//! README's table) are driven from [`SERVICES`].
//!
//! A kind no descriptor names goes through the Resource Groups Tagging API ([`TAGGING`]), which
//! AWS documents for nearly every taggable service, so any ARN the cluster owns has a path; a type
//! that API refuses is reported `unsupported`, never dropped.
//!
//! Deliberately not here: the SDK calls themselves (`tagwarden_aws::services`, one file per service),
//! and parsing (`crate::events::cloudtrail`). Pure data: no I/O, compiled without the cloud features.

use crate::resource::ResourceRef;

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
    /// `tag:GetResources` by ARN / `tag:TagResources`.
    Tagging,
}

/// What a CloudTrail event says of the resources it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Tagged,
}

/// Where a CloudTrail event keeps the ids of the resources it touches (reference/aws.md §1.3).
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

const TAGGED: &[&str] = &["tag:GetResources"];

use Change::{Created, Tagged};

/// The descriptors, in the order they are matched (the first matching kind wins).
pub const SERVICES: &[Service] = &[
    EC2,
    S3,
    ELB_CLASSIC,
    ELBV2,
    ROUTE53,
    IAM_ROLE,
    IAM_USER,
    IAM_INSTANCE_PROFILE,
    IAM_POLICY,
    IAM_OIDC_PROVIDER,
    KMS,
    EFS,
];

pub const EC2: Service = Service {
    kind: "ec2:*",
    api: Api::Ec2,
    arn: "arn:{partition}:ec2:{region}:{account}:volume/{id}",
    events: &[
        ("RunInstances", Created, Ids::RunInstances),
        ("CreateVolume", Created, Ids::Ec2Response("volumeId")),
        ("CreateSecurityGroup", Created, Ids::Ec2Response("groupId")),
        ("CreateNetworkInterface", Created, Ids::Ec2Response("networkInterfaceId")),
        ("CreateSnapshot", Created, Ids::Ec2Response("snapshotId")),
        ("CreateImage", Created, Ids::Ec2Response("imageId")),
        ("AllocateAddress", Created, Ids::Ec2Response("allocationId")),
        ("CreateNatGateway", Created, Ids::Ec2Response("natGatewayId")),
        ("CreateVpc", Created, Ids::Ec2Response("vpcId")),
        ("CreateSubnet", Created, Ids::Ec2Response("subnetId")),
        ("CreateRouteTable", Created, Ids::Ec2Response("routeTableId")),
        ("CreateInternetGateway", Created, Ids::Ec2Response("internetGatewayId")),
        ("CreateVpcEndpoint", Created, Ids::Ec2Response("vpcEndpointId")),
        ("CreateLaunchTemplate", Created, Ids::Ec2Response("launchTemplateId")),
        ("CreateTags", Tagged, Ids::Ec2ResourcesSet),
        ("DeleteTags", Tagged, Ids::Ec2ResourcesSet),
    ],
    read: "ec2:DescribeTags",
    write: "ec2:CreateTags",
    list: TAGGED,
    batch: Batch::Shared(1000),
    why: "CreateTags names up to 1000 resources sharing one delta; TagResources 20",
};

pub const S3: Service = Service {
    kind: "s3:bucket",
    api: Api::S3,
    arn: "arn:{partition}:s3:::{id}",
    events: &[
        ("CreateBucket", Created, Ids::S3Bucket),
        ("PutBucketTagging", Tagged, Ids::S3Bucket),
        ("DeleteBucketTagging", Tagged, Ids::S3Bucket),
    ],
    read: "s3:GetBucketTagging",
    write: "s3:PutBucketTagging",
    list: TAGGED,
    batch: Batch::Reread,
    why: "GetBucketTagging reads the bucket's own tags (the Tagging API's index lags); PutBucketTagging replaces the set, so it is re-read right before the write",
};

pub const ELB_CLASSIC: Service = Service {
    kind: "elasticloadbalancing:classic-loadbalancer",
    api: Api::ElbClassic,
    arn: "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/{id}",
    events: &[
        ("CreateLoadBalancer", Created, Ids::ElbClassicNames),
        ("AddTags", Tagged, Ids::ElbClassicNames),
        ("RemoveTags", Tagged, Ids::ElbClassicNames),
    ],
    read: "elasticloadbalancing:DescribeTags",
    write: "elasticloadbalancing:AddTags",
    list: TAGGED,
    batch: Batch::Alone,
    why: "the Classic ELB API (AddTags takes one name) costs the same per load balancer as TagResources and is the one the emulator implements",
};

pub const ELBV2: Service = Service {
    kind: "elasticloadbalancing:*",
    api: Api::Elbv2,
    arn: "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/app/{id}/50dc6c495c0c9188",
    events: &[
        ("CreateLoadBalancer", Created, Ids::ElbResponse("loadBalancers", "loadBalancerArn")),
        ("CreateTargetGroup", Created, Ids::ElbResponse("targetGroups", "targetGroupArn")),
        ("CreateListener", Created, Ids::ElbResponse("listeners", "listenerArn")),
        ("CreateRule", Created, Ids::ElbResponse("rules", "ruleArn")),
        ("AddTags", Tagged, Ids::ElbRequestArns),
        ("RemoveTags", Tagged, Ids::ElbRequestArns),
    ],
    read: "elasticloadbalancing:DescribeTags",
    write: "elasticloadbalancing:AddTags",
    list: &["tag:GetResources", "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeRules"],
    batch: Batch::Alone,
    why: "ELBv2 DescribeTags/AddTags (one ARN per AddTags, as the service enforces); listeners and rules too, which the Tagging API does not list",
};

// Route 53 is global: its events arrive in us-east-1, like IAM's.
pub const ROUTE53: Service = Service {
    kind: "route53:*",
    api: Api::Route53,
    arn: "arn:{partition}:route53:::hostedzone/{id}",
    events: &[
        ("CreateHostedZone", Created, Ids::Route53Created("hostedZone", "hostedzone")),
        ("CreateHealthCheck", Created, Ids::Route53Created("healthCheck", "healthcheck")),
        ("ChangeTagsForResource", Tagged, Ids::Route53Tagged),
    ],
    read: "route53:ListTagsForResource",
    write: "route53:ChangeTagsForResource",
    list: &["route53:ListHostedZones", "route53:ListHealthChecks", "route53:ListTagsForResources"],
    batch: Batch::Alone,
    why: "Route 53 is global: ChangeTagsForResource (10 tags a call) and ListTagsForResources, which see hosted zones and health checks wherever the function runs",
};

pub const IAM_ROLE: Service = Service {
    kind: "iam:role",
    api: Api::IamRole,
    arn: "arn:{partition}:iam::{account}:role/{id}",
    events: &[
        ("CreateRole", Created, Ids::IamNamed("roleName", Some("role"))),
        ("TagRole", Tagged, Ids::IamNamed("roleName", None)),
        ("UntagRole", Tagged, Ids::IamNamed("roleName", None)),
    ],
    read: "iam:GetRole",
    write: "iam:TagRole",
    list: &["iam:GetAccountAuthorizationDetails"],
    batch: Batch::Alone,
    why: "the Tagging API does not cover IAM roles; GetRole carries the tags and the ARN with its path",
};

pub const IAM_USER: Service = Service {
    kind: "iam:user",
    api: Api::IamUser,
    arn: "arn:{partition}:iam::{account}:user/{id}",
    events: &[
        ("CreateUser", Created, Ids::IamNamed("userName", Some("user"))),
        ("TagUser", Tagged, Ids::IamNamed("userName", None)),
        ("UntagUser", Tagged, Ids::IamNamed("userName", None)),
    ],
    read: "iam:GetUser",
    write: "iam:TagUser",
    list: &["iam:GetAccountAuthorizationDetails"],
    batch: Batch::Alone,
    why: "the Tagging API does not cover IAM users",
};

pub const IAM_INSTANCE_PROFILE: Service = Service {
    kind: "iam:instance-profile",
    api: Api::IamInstanceProfile,
    arn: "arn:{partition}:iam::{account}:instance-profile/{id}",
    events: &[
        ("CreateInstanceProfile", Created, Ids::IamNamed("instanceProfileName", Some("instanceProfile"))),
        ("TagInstanceProfile", Tagged, Ids::IamNamed("instanceProfileName", None)),
        ("UntagInstanceProfile", Tagged, Ids::IamNamed("instanceProfileName", None)),
    ],
    read: "iam:ListInstanceProfileTags",
    write: "iam:TagInstanceProfile",
    list: &["iam:GetAccountAuthorizationDetails", "iam:ListInstanceProfiles"],
    batch: Batch::Alone,
    why: "IAM's own Tag* calls; profiles attached to a role come with its listing",
};

pub const IAM_POLICY: Service = Service {
    kind: "iam:policy",
    api: Api::IamPolicy,
    arn: "arn:{partition}:iam::{account}:policy/{id}",
    events: &[
        ("CreatePolicy", Created, Ids::Arn("/policy/arn")),
        ("TagPolicy", Tagged, Ids::Arn("policyArn")),
        ("UntagPolicy", Tagged, Ids::Arn("policyArn")),
    ],
    read: "iam:ListPolicyTags",
    write: "iam:TagPolicy",
    list: &["iam:ListPolicies"],
    batch: Batch::Alone,
    why: "IAM's own Tag* calls",
};

pub const IAM_OIDC_PROVIDER: Service = Service {
    kind: "iam:oidc-provider",
    api: Api::IamOidcProvider,
    arn: "arn:{partition}:iam::{account}:oidc-provider/{id}",
    events: &[
        ("CreateOpenIDConnectProvider", Created, Ids::Arn("/openIDConnectProviderArn")),
        ("TagOpenIDConnectProvider", Tagged, Ids::Arn("openIDConnectProviderArn")),
        ("UntagOpenIDConnectProvider", Tagged, Ids::Arn("openIDConnectProviderArn")),
    ],
    read: "iam:ListOpenIDConnectProviderTags",
    write: "iam:TagOpenIDConnectProvider",
    list: &["iam:ListOpenIDConnectProviders"],
    batch: Batch::Alone,
    why: "IAM's own Tag* calls",
};

// KMS developer guide, "Logging AWS KMS API calls": CreateKey's `responseElements.keyMetadata.arn`;
// TagResource / UntagResource name the key in `requestParameters.keyId`, by ARN or by key id.
pub const KMS: Service = Service {
    kind: "kms:key",
    api: Api::Kms,
    arn: "arn:{partition}:kms:{region}:{account}:key/{id}",
    events: &[
        ("CreateKey", Created, Ids::Arn("/keyMetadata/arn")),
        ("TagResource", Tagged, Ids::IdOrArn("keyId")),
        ("UntagResource", Tagged, Ids::IdOrArn("keyId")),
    ],
    read: "kms:ListResourceTags",
    write: "kms:TagResource",
    list: TAGGED,
    batch: Batch::Alone,
    why: "ListResourceTags reads the key itself, where the Tagging API's index lags a new key's tags; TagResource names one key",
};

pub const EFS: Service = Service {
    kind: "elasticfilesystem:*",
    api: Api::Tagging,
    arn: "arn:{partition}:elasticfilesystem:{region}:{account}:file-system/{id}",
    events: &[
        ("CreateFileSystem", Created, Ids::Efs(Some("/fileSystemArn"))),
        ("CreateAccessPoint", Created, Ids::Efs(Some("/accessPointArn"))),
        ("TagResource", Tagged, Ids::Efs(None)),
        ("UntagResource", Tagged, Ids::Efs(None)),
        ("CreateTags", Tagged, Ids::Efs(None)),
        ("DeleteTags", Tagged, Ids::Efs(None)),
    ],
    read: TAGGING.read,
    write: TAGGING.write,
    list: TAGGED,
    batch: TAGGING.batch,
    why:
        "the Tagging API, as any other service; its CloudTrail events are parsed so a new file system is tagged at once",
};

/// The generic path: every other ARN, 20 per `TagResources`.
pub const TAGGING: Service = Service {
    kind: "*",
    api: Api::Tagging,
    arn: "arn:{partition}:sns:{region}:{account}:{id}",
    events: &[],
    read: "tag:GetResources",
    write: "tag:TagResources",
    list: TAGGED,
    batch: Batch::Shared(20),
    why: "Resource Groups Tagging API: any other taggable service",
};

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
        assert_eq!(api("arn:aws:sns:us-east-1:1:topic"), Api::Tagging);
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

    #[test]
    fn each_descriptor_reads_with_a_read_and_writes_with_a_write() {
        for s in SERVICES.iter().chain([&TAGGING]) {
            assert!(crate::calls::is_write(s.write), "{}: {}", s.kind, s.write);
            assert!(!crate::calls::is_write(s.read), "{}: {}", s.kind, s.read);
            assert!(s.list.iter().all(|l| !crate::calls::is_write(l)), "{}", s.kind);
        }
    }
}
