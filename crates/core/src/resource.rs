//! Resource identity: the ID a cloud API takes, a type such as `ec2:instance` or
//! `Microsoft.Compute/virtualMachines`, and the ARN / ARM ID.
//!
//! Parsing here is syntactic only; whether a resource exists is for the cloud clients to find out.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cloud::Cloud;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceRef {
    /// What the service's tag API takes: an EC2 id, a bucket name, an IAM name, an ELBv2 ARN,
    /// an ARM ID, a Google Cloud full resource name (`//compute.googleapis.com/projects/…`).
    pub id: String,
    /// `service:resource-type` on AWS, the ARM resource type on Azure, the Cloud Asset Inventory
    /// asset type on Google Cloud (`compute.googleapis.com/Instance`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The ARN (AWS) or ARM ID (Azure); `None` when only a bare EC2 id was given.
    pub arn: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error("{input:?} is not an ARN: expected arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE")]
    BadArn { input: String },
    #[error("{input:?} is not an ARM resource ID: expected /subscriptions/SUB[/resourceGroups/RG[/providers/NAMESPACE/TYPE/NAME...]]")]
    BadArmId { input: String },
    #[error("{0}")]
    BadFullName(#[from] crate::gcp::resources::NameError),
    #[error("cannot tell what kind of resource {input:?} is: pass an ARN (arn:aws:...), an ARM ID (/subscriptions/...), a Google Cloud full resource name (//compute.googleapis.com/projects/...), or an EC2 id such as i-0123456789abcdef0")]
    Unrecognised { input: String },
}

impl ResourceRef {
    pub fn cloud(&self) -> Cloud {
        // Cloud Asset Inventory asset types: `compute.googleapis.com/Instance`.
        if self.kind.contains(".googleapis.com/") {
            Cloud::Gcp
        } else if self.kind.contains('/') {
            Cloud::Azure
        } else {
            Cloud::Aws
        }
    }

    /// Parse what a user typed: an ARN, an ARM ID, a Google Cloud full resource name or a bare
    /// EC2 id.
    pub fn parse(input: &str) -> Result<Self, ResourceError> {
        let input = input.trim();
        if input.starts_with("arn:") {
            Self::from_arn(input)
        } else if input.starts_with("//") {
            Ok(Self::gcp(&crate::gcp::resources::parse_full_name(input)?))
        } else if input.starts_with('/') {
            Self::from_arm_id(input)
        } else if let Some(kind) = ec2_type_of_id(input) {
            Ok(ResourceRef { id: input.to_string(), kind: format!("ec2:{kind}"), arn: None })
        } else {
            Err(ResourceError::Unrecognised { input: input.to_string() })
        }
    }

    /// A Google Cloud resource: its full resource name, its Cloud Asset Inventory asset type.
    pub fn gcp(name: &crate::gcp::resources::ResourceName) -> Self {
        ResourceRef { id: name.full_name(), kind: name.resource_type.asset_type.to_string(), arn: None }
    }

    /// An EC2 resource from its id, with the ARN built from region and account.
    pub fn ec2(id: &str, region: &str, account: &str) -> Self {
        let kind = ec2_type_of_id(id).unwrap_or("unknown");
        // AMI and snapshot ARNs carry no account (they can be shared across accounts).
        let account = if matches!(kind, "image" | "snapshot") { "" } else { account };
        ResourceRef {
            id: id.to_string(),
            kind: format!("ec2:{kind}"),
            arn: Some(format!("arn:{}:ec2:{region}:{account}:{kind}/{id}", partition(region))),
        }
    }

    /// An S3 bucket; `region` only decides the partition (bucket ARNs carry no region).
    pub fn s3_bucket(bucket: &str, region: &str) -> Self {
        ResourceRef {
            id: bucket.to_string(),
            kind: "s3:bucket".to_string(),
            arn: Some(format!("arn:{}:s3:::{bucket}", partition(region))),
        }
    }

    /// Any AWS ARN. The id is what the service's tagging API takes for that type.
    pub fn from_arn(arn: &str) -> Result<Self, ResourceError> {
        let bad = || ResourceError::BadArn { input: arn.to_string() };
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(partition), Some(service), Some(_region), Some(_account), Some(resource)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if partition.is_empty() || service.is_empty() || resource.is_empty() {
            return Err(bad());
        }
        let (rtype, rest) = match resource.find(['/', ':']) {
            Some(i) => (&resource[..i], Some(&resource[i + 1..])),
            None => (resource, None),
        };
        let (kind, id) = match (service, rest) {
            ("s3", None) => ("bucket", resource),
            ("ec2", Some(id)) => (rtype, id),
            ("iam", Some(path_and_name)) if matches!(rtype, "role" | "user" | "instance-profile") => {
                (rtype, path_and_name.rsplit('/').next().unwrap_or(path_and_name))
            }
            // A Classic load balancer's ARN ends in its bare name; ELBv2 ones in `app/…`, `net/…`.
            ("elasticloadbalancing", Some(rest)) if rtype == "loadbalancer" && !rest.contains('/') => {
                ("classic-loadbalancer", arn)
            }
            // SNS topics and SQS queues are named bare (`arn:…:sns:REGION:ACCOUNT:NAME`, a
            // subscription `…:NAME:ID`; `arn:…:sqs:REGION:ACCOUNT:NAME`: the topic, subscription and
            // queue resource types in the Service Authorization Reference for Amazon SNS and Amazon
            // SQS), so the name is not their type: without this every topic was a kind of its own.
            ("sns", None) => ("topic", arn),
            ("sns", Some(_)) => ("subscription", arn),
            ("sqs", None) => ("queue", arn),
            // ELBv2, IAM policies and OIDC providers are addressed by ARN.
            (_, Some(_)) => (rtype, arn),
            (_, None) => (rtype, arn),
        };
        if id.is_empty() {
            return Err(bad());
        }
        Ok(ResourceRef { id: id.to_string(), kind: format!("{service}:{kind}"), arn: Some(arn.to_string()) })
    }

    /// An ARM resource ID. The type is the provider namespace plus every type segment, so
    /// `.../providers/Microsoft.Network/dnszones/z/A/www` is `Microsoft.Network/dnszones/A`.
    pub fn from_arm_id(id: &str) -> Result<Self, ResourceError> {
        let kind = arm_type_of_id(id).ok_or_else(|| ResourceError::BadArmId { input: id.to_string() })?;
        Ok(ResourceRef { id: id.to_string(), kind, arn: Some(id.to_string()) })
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.arn.as_deref().unwrap_or(&self.id))
    }
}

/// The AWS partition a region belongs to.
pub fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}

/// The ARN resource type of an EC2 id, from its prefix.
pub fn ec2_type_of_id(id: &str) -> Option<&'static str> {
    const PREFIXES: &[(&str, &str)] = &[
        ("i-", "instance"),
        ("vol-", "volume"),
        ("sg-", "security-group"),
        ("eni-", "network-interface"),
        ("snap-", "snapshot"),
        ("ami-", "image"),
        ("eipalloc-", "elastic-ip"),
        ("nat-", "natgateway"),
        ("vpc-", "vpc"),
        ("subnet-", "subnet"),
        ("rtb-", "route-table"),
        ("igw-", "internet-gateway"),
        ("vpce-", "vpc-endpoint"),
        ("lt-", "launch-template"),
        ("acl-", "network-acl"),
        ("dopt-", "dhcp-options"),
        ("eigw-", "egress-only-internet-gateway"),
        ("pcx-", "vpc-peering-connection"),
        ("tgw-", "transit-gateway"),
        ("vgw-", "vpn-gateway"),
        ("cgw-", "customer-gateway"),
        ("key-", "key-pair"),
        ("pl-", "prefix-list"),
    ];
    let (prefix, rest) = id.split_at(id.find('-')? + 1);
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    PREFIXES.iter().find(|(p, _)| *p == prefix).map(|(_, t)| *t)
}

fn arm_type_of_id(id: &str) -> Option<String> {
    let segs: Vec<&str> = id.trim_end_matches('/').split('/').collect();
    // "", "subscriptions", SUB, ...
    if segs.len() < 3 || !segs[0].is_empty() || !segs[1].eq_ignore_ascii_case("subscriptions") || segs[2].is_empty() {
        return None;
    }
    let Some(p) = segs.iter().rposition(|s| s.eq_ignore_ascii_case("providers")) else {
        return match segs.len() {
            3 => Some("Microsoft.Resources/subscriptions".to_string()),
            5 if segs[3].eq_ignore_ascii_case("resourceGroups") && !segs[4].is_empty() => {
                Some("Microsoft.Resources/resourceGroups".to_string())
            }
            _ => None,
        };
    };
    // providers / NAMESPACE / TYPE / NAME [/ TYPE / NAME]...
    let tail = &segs[p + 1..];
    if tail.len() < 3 || tail.len().is_multiple_of(2) || tail.iter().any(|s| s.is_empty()) {
        return None;
    }
    let mut kind = tail[0].to_string();
    for t in tail[1..].iter().step_by(2) {
        kind.push('/');
        kind.push_str(t);
    }
    Some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_google_cloud_type_is_a_gcp_resource_by_its_full_name() {
        for t in crate::gcp::resources::RESOURCE_TYPES {
            let name = t
                .pattern()
                .replace("{project}", "p1")
                .replace("{zone}", "us-central1-a")
                .replace("{region}", "us-central1")
                .replace("{name}", "x-1");
            let r = ResourceRef::parse(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((r.id.as_str(), r.kind.as_str(), r.arn.as_deref()), (name.as_str(), t.asset_type, None));
            assert_eq!(r.cloud(), Cloud::Gcp);
        }
    }

    #[test]
    fn arns() {
        let r = ResourceRef::from_arn("arn:aws:ec2:eu-west-1:111122223333:instance/i-0abc").unwrap();
        assert_eq!((r.id.as_str(), r.kind.as_str()), ("i-0abc", "ec2:instance"));
        let r = ResourceRef::from_arn("arn:aws:s3:::my-bucket").unwrap();
        assert_eq!((r.id.as_str(), r.kind.as_str()), ("my-bucket", "s3:bucket"));
        let lb = "arn:aws:elasticloadbalancing:eu-west-1:111122223333:loadbalancer/app/web/50dc6c495c0c9188";
        let r = ResourceRef::from_arn(lb).unwrap();
        assert_eq!((r.id.as_str(), r.kind.as_str()), (lb, "elasticloadbalancing:loadbalancer"));
        let r = ResourceRef::from_arn("arn:aws:iam::111122223333:role/openshift/worker-role").unwrap();
        assert_eq!((r.id.as_str(), r.kind.as_str()), ("worker-role", "iam:role"));
        let p = "arn:aws:iam::111122223333:policy/team/p1";
        assert_eq!(ResourceRef::from_arn(p).unwrap().id, p);
        for (arn, kind) in [
            ("arn:aws:sns:eu-west-1:111122223333:alerts", "sns:topic"),
            ("arn:aws:sns:eu-west-1:111122223333:alerts:0f1e2d3c-aaaa-bbbb-cccc-1234567890ab", "sns:subscription"),
            ("arn:aws:sqs:eu-west-1:111122223333:work", "sqs:queue"),
        ] {
            let r = ResourceRef::from_arn(arn).unwrap();
            assert_eq!((r.id.as_str(), r.kind.as_str()), (arn, kind));
        }
        assert!(ResourceRef::from_arn("arn:aws:ec2").is_err());
        assert!(ResourceRef::from_arn("arn:aws:ec2:r:a:instance/").is_err());
    }

    #[test]
    fn ec2_ids() {
        assert_eq!(ec2_type_of_id("vpce-0abc"), Some("vpc-endpoint"));
        assert_eq!(ec2_type_of_id("vpc-0abc"), Some("vpc"));
        assert_eq!(ec2_type_of_id("i-"), None);
        assert_eq!(ec2_type_of_id("bucket-name"), None);
        let r = ResourceRef::ec2("ami-0abc", "cn-north-1", "111122223333");
        assert_eq!(r.arn.as_deref(), Some("arn:aws-cn:ec2:cn-north-1::image/ami-0abc"));
        assert!(ResourceRef::parse("my-bucket").is_err());
    }

    #[test]
    fn arm_ids() {
        let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/dnszones/z.example/A/www";
        assert_eq!(ResourceRef::from_arm_id(id).unwrap().kind, "Microsoft.Network/dnszones/A");
        let id = "/subscriptions/s/resourcegroups/rg";
        assert_eq!(ResourceRef::from_arm_id(id).unwrap().kind, "Microsoft.Resources/resourceGroups");
        let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/providers/Microsoft.Insights/diagnosticSettings/d";
        assert_eq!(ResourceRef::from_arm_id(id).unwrap().kind, "Microsoft.Insights/diagnosticSettings");
        assert!(ResourceRef::from_arm_id(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines"
        )
        .is_err());
        assert!(ResourceRef::from_arm_id("/tenants/x").is_err());
    }

    #[test]
    fn google_cloud_full_resource_names() {
        let r =
            ResourceRef::parse(" //compute.googleapis.com/projects/p1/zones/us-central1-a/instances/vm-1 ").unwrap();
        assert_eq!(r.id, "//compute.googleapis.com/projects/p1/zones/us-central1-a/instances/vm-1");
        assert_eq!(
            (r.kind.as_str(), r.arn.as_deref(), r.cloud()),
            ("compute.googleapis.com/Instance", None, Cloud::Gcp)
        );
        let err = ResourceRef::parse("//compute.googleapis.com/projects/p1/zones/z/widgets/w").unwrap_err();
        assert!(matches!(err, ResourceError::BadFullName(_)), "{err}");
    }
}
