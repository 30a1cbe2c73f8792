//! The descriptors themselves, one per service, each with the sources its calls, events, ARN shape
//! and batch size are taken from.

use super::{Api, Batch, Change, Grant, Guard, Ids, Service};

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
    SNS,
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
    also: &["ec2:DescribeInstances", "ec2:DescribeVolumes"],
    // EC2's Describe* have no resource type; CreateTags evaluates aws:ResourceTag/${TagKey} and
    // aws:TagKeys on every EC2 resource type (Service Authorization Reference, "Actions, resources,
    // and condition keys for Amazon EC2"). AMI and snapshot ARNs have no account.
    grant: Grant {
        resources: &[
            "arn:{partition}:ec2:{region}:{account}:*",
            "arn:{partition}:ec2:{region}::image/*",
            "arn:{partition}:ec2:{region}::snapshot/*",
        ],
        scoped: &[],
        guard: Guard::Owned,
    },
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
    also: &[],
    // PutBucketTagging's condition keys are s3:authType, s3:ResourceAccount, s3:signatureAge,
    // s3:signatureversion, s3:TlsVersion and s3:x-amz-content-sha256: no aws:ResourceTag and no
    // aws:TagKeys on general purpose buckets (Service Authorization Reference, "Actions,
    // resources, and condition keys for Amazon S3"); infra/aws/iam.tf says what limits it instead.
    grant: Grant { resources: &[], scoped: &["s3:GetBucketTagging"], guard: Guard::Bucket },
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
    also: &[],
    // The Classic ELB API's AddTags, the same action name as ELBv2's, on loadbalancer/<name>, with
    // aws:ResourceTag/${TagKey} and aws:TagKeys (Service Authorization Reference, "Actions,
    // resources, and condition keys for Elastic Load Balancing"); DescribeTags has no resource type.
    grant: Grant {
        resources: &["arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/*"],
        scoped: &[],
        guard: Guard::Owned,
    },
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
    also: &[],
    // AddTags authorizes load balancers, target groups, listeners (listener/{app,net,gwy}/...) and
    // listener rules (listener-rule/{app,net}/...) as their own resource types, each with
    // aws:ResourceTag/${TagKey}, and evaluates aws:TagKeys (Service Authorization Reference,
    // "Actions, resources, and condition keys for Elastic Load Balancing V2"); the installer tags
    // listeners and rules too. The Describe* calls have no resource type. loadbalancer/* covers
    // both ELBv2's loadbalancer/{app,net,gwy}/<name>/<id> and Classic's loadbalancer/<name>.
    grant: Grant {
        resources: &[
            "arn:{partition}:elasticloadbalancing:{region}:{account}:loadbalancer/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:targetgroup/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener/*",
            "arn:{partition}:elasticloadbalancing:{region}:{account}:listener-rule/*",
        ],
        scoped: &[],
        guard: Guard::Owned,
    },
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
    also: &[],
    // ListTagsForResource(s) and ChangeTagsForResource are authorized on the hostedzone and
    // healthcheck resource types, with no condition key at all: no aws:ResourceTag, no
    // aws:TagKeys (Service Authorization Reference, "Actions, resources, and condition keys for
    // Amazon Route 53"). The ARNs carry neither region nor account.
    grant: Grant {
        resources: &["arn:{partition}:route53:::hostedzone/*", "arn:{partition}:route53:::healthcheck/*"],
        scoped: &["route53:ListTagsForResource", "route53:ListTagsForResources"],
        guard: Guard::Listed,
    },
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
    also: &[],
    // IAM evaluates aws:ResourceTag/${TagKey} on roles, users, instance profiles, customer managed
    // policies and OIDC providers, and aws:TagKeys for their Tag* actions (IAM User Guide,
    // "Controlling access to IAM resources"; Service Authorization Reference, "Actions, resources,
    // and condition keys for AWS Identity and Access Management"); its listings have no resource type.
    grant: Grant {
        resources: &["arn:{partition}:iam::{account}:role/*"],
        scoped: &["iam:GetRole"],
        guard: Guard::Owned,
    },
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
    also: &[],
    // As IAM_ROLE's.
    grant: Grant {
        resources: &["arn:{partition}:iam::{account}:user/*"],
        scoped: &["iam:GetUser"],
        guard: Guard::Owned,
    },
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
    also: &[],
    // As IAM_ROLE's.
    grant: Grant {
        resources: &["arn:{partition}:iam::{account}:instance-profile/*"],
        scoped: &["iam:ListInstanceProfileTags"],
        guard: Guard::Owned,
    },
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
    also: &[],
    // As IAM_ROLE's.
    grant: Grant {
        resources: &["arn:{partition}:iam::{account}:policy/*"],
        scoped: &["iam:ListPolicyTags"],
        guard: Guard::Owned,
    },
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
    also: &[],
    // As IAM_ROLE's.
    grant: Grant {
        resources: &["arn:{partition}:iam::{account}:oidc-provider/*"],
        scoped: &["iam:ListOpenIDConnectProviderTags"],
        guard: Guard::Owned,
    },
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
    also: &[],
    // ListResourceTags and TagResource on the key resource type, which has aws:ResourceTag/${TagKey};
    // TagResource evaluates aws:TagKeys (Service Authorization Reference, "Actions, resources, and
    // condition keys for AWS Key Management Service"). A key policy must delegate to IAM, as the
    // default one's "Enable IAM User Permissions" statement does (AWS KMS Developer Guide,
    // "Default key policy"), for these grants to count.
    grant: Grant {
        resources: &["arn:{partition}:kms:{region}:{account}:key/*"],
        scoped: &["kms:ListResourceTags"],
        guard: Guard::Owned,
    },
    batch: Batch::Alone,
    why: "ListResourceTags reads the key itself, where the Tagging API's index lags a new key's tags; TagResource names one key",
};

// Amazon SNS Developer Guide, "Logging Amazon SNS API calls using CloudTrail": CreateTopic's
// `responseElements.topicArn`. TagResource / UntagResource name the topic in the API's
// `ResourceArn`, recorded camel-cased in `requestParameters.resourceArn` as CloudTrail records every
// request parameter (inferred from the API reference: no recorded SNS TagResource event at hand).
pub const SNS: Service = Service {
    kind: "sns:topic",
    api: Api::Sns,
    arn: "arn:{partition}:sns:{region}:{account}:{id}",
    events: &[
        ("CreateTopic", Created, Ids::Arn("/topicArn")),
        ("TagResource", Tagged, Ids::Arn("resourceArn")),
        ("UntagResource", Tagged, Ids::Arn("resourceArn")),
    ],
    read: "sns:ListTagsForResource",
    write: "sns:TagResource",
    list: TAGGED,
    also: &[],
    // ListTagsForResource and TagResource on the topic resource type, which has
    // aws:ResourceTag/${TagKey}; TagResource evaluates aws:TagKeys (Service Authorization
    // Reference, "Actions, resources, and condition keys for Amazon SNS").
    grant: Grant {
        resources: &["arn:{partition}:sns:{region}:{account}:*"],
        scoped: &["sns:ListTagsForResource"],
        guard: Guard::Owned,
    },
    batch: Batch::Alone,
    why: "ListTagsForResource reads the topic itself, where the Tagging API's index lags a new topic's tags; TagResource names one topic (SNS allows 10 tagging calls a second per account and region)",
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
    also: &[],
    // TagResources needs the owning service's own tag action on each ARN ("you must have [...]
    // permission to call the tagging action of the service that owns the resource", Resource
    // Groups Tagging API Reference, TagResources). EFS evaluates aws:ResourceTag/${TagKey} on file
    // systems and access points and aws:TagKeys for TagResource (Service Authorization Reference,
    // "Actions, resources, and condition keys for Amazon Elastic File System").
    grant: Grant {
        resources: &[
            "arn:{partition}:elasticfilesystem:{region}:{account}:file-system/*",
            "arn:{partition}:elasticfilesystem:{region}:{account}:access-point/*",
        ],
        scoped: &[],
        guard: Guard::OwnedVia("elasticfilesystem:TagResource"),
    },
    batch: TAGGING.batch,
    why:
        "the Tagging API, as any other service; its CloudTrail events are parsed so a new file system is tagged at once",
};

/// The generic path: every other ARN, 20 per `TagResources`.
pub const TAGGING: Service = Service {
    kind: "*",
    api: Api::Tagging,
    arn: "arn:{partition}:sqs:{region}:{account}:{id}",
    events: &[],
    read: "tag:GetResources",
    write: "tag:TagResources",
    list: TAGGED,
    also: &[],
    // Neither action has a resource type or a condition key (Service Authorization Reference,
    // "Actions, resources, and condition keys for Amazon Resource Group Tagging API").
    grant: Grant { resources: &[], scoped: &[], guard: Guard::Anywhere },
    batch: Batch::Shared(20),
    why: "Resource Groups Tagging API: any other taggable service",
};
