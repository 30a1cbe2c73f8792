//! `AWS API Call via CloudTrail` events for EC2, S3, ELBv2 and IAM.
//!
//! The resource IDs come from the places reference/aws.md §1.3 lists. Matching is on the
//! CloudTrail `eventSource` and `eventName` together, because EFS, EMR and Classic ELB reuse
//! names such as `DeleteTags`, `AddTags` and `CreateLoadBalancer`.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{Envelope, Event, EventError, EventKind, IgnoreReason};
use crate::cloud::Cloud;
use crate::resource::ResourceRef;

/// Where an event keeps the IDs of the resources it touches.
#[derive(Debug, Clone, Copy)]
enum Ids {
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
    /// An IAM entity addressed by name: its type, the request's name field and the response
    /// object that carries its ARN.
    IamNamed(&'static str, &'static str, Option<&'static str>),
    /// An IAM entity addressed by ARN, and where the ARN is: `requestParameters.<field>`, or
    /// for creates a `/pointer` into `responseElements`.
    IamArn(&'static str),
}

use EventKind::{Create, TagChange};

const EC2: &[(&str, EventKind, Ids)] = &[
    ("RunInstances", Create, Ids::RunInstances),
    ("CreateVolume", Create, Ids::Ec2Response("volumeId")),
    ("CreateSecurityGroup", Create, Ids::Ec2Response("groupId")),
    ("CreateNetworkInterface", Create, Ids::Ec2Response("networkInterfaceId")),
    ("CreateSnapshot", Create, Ids::Ec2Response("snapshotId")),
    ("CreateImage", Create, Ids::Ec2Response("imageId")),
    ("AllocateAddress", Create, Ids::Ec2Response("allocationId")),
    ("CreateNatGateway", Create, Ids::Ec2Response("natGatewayId")),
    ("CreateVpc", Create, Ids::Ec2Response("vpcId")),
    ("CreateSubnet", Create, Ids::Ec2Response("subnetId")),
    ("CreateRouteTable", Create, Ids::Ec2Response("routeTableId")),
    ("CreateInternetGateway", Create, Ids::Ec2Response("internetGatewayId")),
    ("CreateVpcEndpoint", Create, Ids::Ec2Response("vpcEndpointId")),
    ("CreateLaunchTemplate", Create, Ids::Ec2Response("launchTemplateId")),
    ("CreateTags", TagChange, Ids::Ec2ResourcesSet),
    ("DeleteTags", TagChange, Ids::Ec2ResourcesSet),
];
const S3: &[(&str, EventKind, Ids)] = &[
    ("CreateBucket", Create, Ids::S3Bucket),
    ("PutBucketTagging", TagChange, Ids::S3Bucket),
    ("DeleteBucketTagging", TagChange, Ids::S3Bucket),
];
const ELB: &[(&str, EventKind, Ids)] = &[
    ("CreateLoadBalancer", Create, Ids::ElbResponse("loadBalancers", "loadBalancerArn")),
    ("CreateTargetGroup", Create, Ids::ElbResponse("targetGroups", "targetGroupArn")),
    ("AddTags", TagChange, Ids::ElbRequestArns),
    ("RemoveTags", TagChange, Ids::ElbRequestArns),
];
const IAM: &[(&str, EventKind, Ids)] = &[
    ("CreateRole", Create, Ids::IamNamed("role", "roleName", Some("role"))),
    ("CreateUser", Create, Ids::IamNamed("user", "userName", Some("user"))),
    (
        "CreateInstanceProfile",
        Create,
        Ids::IamNamed("instance-profile", "instanceProfileName", Some("instanceProfile")),
    ),
    ("CreatePolicy", Create, Ids::IamArn("/policy/arn")),
    ("CreateOpenIDConnectProvider", Create, Ids::IamArn("/openIDConnectProviderArn")),
    ("TagRole", TagChange, Ids::IamNamed("role", "roleName", None)),
    ("UntagRole", TagChange, Ids::IamNamed("role", "roleName", None)),
    ("TagUser", TagChange, Ids::IamNamed("user", "userName", None)),
    ("UntagUser", TagChange, Ids::IamNamed("user", "userName", None)),
    ("TagInstanceProfile", TagChange, Ids::IamNamed("instance-profile", "instanceProfileName", None)),
    ("UntagInstanceProfile", TagChange, Ids::IamNamed("instance-profile", "instanceProfileName", None)),
    ("TagPolicy", TagChange, Ids::IamArn("policyArn")),
    ("UntagPolicy", TagChange, Ids::IamArn("policyArn")),
    ("TagOpenIDConnectProvider", TagChange, Ids::IamArn("openIDConnectProviderArn")),
    ("UntagOpenIDConnectProvider", TagChange, Ids::IamArn("openIDConnectProviderArn")),
];

/// The event names tagwarden handles, per CloudTrail `eventSource`; the deployment's EventBridge
/// patterns are generated from the same list.
pub fn handled_events() -> [(&'static str, Vec<&'static str>); 4] {
    let names = |t: &[(&'static str, EventKind, Ids)]| t.iter().map(|(n, _, _)| *n).collect();
    [
        ("ec2.amazonaws.com", names(EC2)),
        ("s3.amazonaws.com", names(S3)),
        ("elasticloadbalancing.amazonaws.com", names(ELB)),
        ("iam.amazonaws.com", names(IAM)),
    ]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Detail<'a> {
    event_source: Option<String>,
    event_name: Option<String>,
    error_code: Option<String>,
    api_version: Option<String>,
    aws_region: Option<String>,
    recipient_account_id: Option<String>,
    user_identity: Option<UserIdentity>,
    #[serde(borrow)]
    request_parameters: Option<&'a RawValue>,
    #[serde(borrow)]
    response_elements: Option<&'a RawValue>,
    event_id: Option<String>,
}

/// Every field optional: IAM-user sessions carry `sessionIssuer: {}`, services carry no ARN.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct UserIdentity {
    arn: Option<String>,
    invoked_by: Option<String>,
    principal_id: Option<String>,
    account_id: Option<String>,
    session_context: Option<SessionContext>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SessionContext {
    session_issuer: Option<SessionIssuer>,
}

#[derive(Deserialize, Default)]
struct SessionIssuer {
    arn: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunInstancesResponse {
    instances_set: Option<Items<Instance>>,
}

#[derive(Deserialize)]
struct Items<T> {
    #[serde(default = "Vec::new")]
    items: Vec<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Instance {
    instance_id: Option<String>,
    network_interface_set: Option<Items<NetworkInterface>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NetworkInterface {
    network_interface_id: Option<String>,
}

pub(super) fn parse(env: &Envelope<'_>, detail: &RawValue) -> Result<Event, EventError> {
    let d: Detail<'_> = serde_json::from_str(detail.get())?;
    let event_source = d.event_source.as_deref().unwrap_or_default();
    let event_name = d.event_name.clone().unwrap_or_default();
    let identity = d.user_identity.unwrap_or_default();
    let issuer = identity.session_context.and_then(|c| c.session_issuer).and_then(|i| i.arn);
    let account = env.account.clone().or(d.recipient_account_id);
    let region = env.region.clone().or(d.aws_region);
    let actor = identity.arn.clone().or(identity.invoked_by).or(identity.principal_id).or(identity.account_id);
    let principals = identity.arn.into_iter().chain(issuer).collect();
    let service = event_source.strip_suffix(".amazonaws.com").unwrap_or(event_source).to_string();

    let event = Event {
        cloud: Cloud::Aws,
        kind: EventKind::Ignored,
        reason: None,
        service,
        event_name,
        account,
        region,
        actor,
        resources: Vec::new(),
        principals,
        tags: None,
        validation_code: None,
        id: d.event_id.or_else(|| env.id.clone()),
    };
    if d.error_code.is_some() {
        return Ok(event.ignored(IgnoreReason::FailedCall));
    }
    let table = match event_source {
        "ec2.amazonaws.com" => EC2,
        "s3.amazonaws.com" => S3,
        "elasticloadbalancing.amazonaws.com" => ELB,
        "iam.amazonaws.com" => IAM,
        _ => return Ok(event.ignored(IgnoreReason::OtherService)),
    };
    let Some(&(_, kind, ids)) = table.iter().find(|(n, _, _)| *n == event.event_name) else {
        return Ok(event.ignored(IgnoreReason::UnsupportedEvent));
    };
    let request = || lazy_value(d.request_parameters);
    let response = || lazy_value(d.response_elements);
    if event_source == "elasticloadbalancing.amazonaws.com" {
        let classic = d.api_version.as_deref() == Some("2012-06-01") || request()?.get("loadBalancerNames").is_some();
        if classic {
            return Ok(event.ignored(IgnoreReason::ClassicElb));
        }
    }

    let region = event.region.clone().unwrap_or_default();
    let account = event.account.clone().unwrap_or_default();
    let mut resources = Vec::new();
    match ids {
        Ids::RunInstances => {
            if let Some(raw) = d.response_elements.filter(|r| r.get() != "null") {
                let r: RunInstancesResponse = serde_json::from_str(raw.get())?;
                // Each instance, then the network interfaces it was launched with.
                for i in r.instances_set.map(|s| s.items).unwrap_or_default() {
                    resources.extend(i.instance_id.map(|id| ResourceRef::ec2(&id, &region, &account)));
                    for n in i.network_interface_set.map(|s| s.items).unwrap_or_default() {
                        resources.extend(n.network_interface_id.map(|id| ResourceRef::ec2(&id, &region, &account)));
                    }
                }
            }
        }
        Ids::Ec2Response(field) => {
            if let Some(id) = find_string(&response()?, field, 8) {
                resources.push(ResourceRef::ec2(id, &region, &account));
            }
        }
        Ids::Ec2ResourcesSet => {
            let req = request()?;
            for item in req.pointer("/resourcesSet/items").and_then(Value::as_array).into_iter().flatten() {
                if let Some(id) = item.get("resourceId").and_then(Value::as_str) {
                    resources.push(ResourceRef::ec2(id, &region, &account));
                }
            }
        }
        Ids::S3Bucket => {
            if let Some(bucket) = request()?.get("bucketName").and_then(Value::as_str) {
                resources.push(ResourceRef::s3_bucket(bucket, &region));
            }
        }
        Ids::ElbResponse(list, field) => {
            let resp = response()?;
            for item in resp.get(list).and_then(Value::as_array).into_iter().flatten() {
                if let Some(arn) = item.get(field).and_then(Value::as_str) {
                    resources.push(arn_ref(arn)?);
                }
            }
            if resources.is_empty() && kind == Create && resp.get(list).is_none() && d.api_version.is_none() {
                // A CreateLoadBalancer with neither an ELBv2 response nor an apiVersion is Classic.
                return Ok(event.ignored(IgnoreReason::ClassicElb));
            }
        }
        Ids::ElbRequestArns => {
            for arn in
                request()?.get("resourceArns").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
            {
                resources.push(arn_ref(arn)?);
            }
        }
        Ids::IamNamed(iam_kind, name_field, response_object) => {
            let arn = response_object.and_then(|o| {
                response()
                    .ok()
                    .and_then(|r| r.get(o).and_then(|o| o.get("arn")).and_then(Value::as_str).map(str::to_owned))
            });
            match (arn, request()?.get(name_field).and_then(Value::as_str)) {
                (Some(arn), _) => resources.push(arn_ref(&arn)?),
                (None, Some(name)) => resources.push(ResourceRef::iam_named(iam_kind, name, &account)),
                (None, None) => {}
            }
        }
        Ids::IamArn(location) => {
            let arn = if let Some(pointer) = location.strip_prefix('/') {
                response()?.pointer(&format!("/{pointer}")).and_then(Value::as_str).map(str::to_owned)
            } else {
                request()?.get(location).and_then(Value::as_str).map(str::to_owned)
            };
            if let Some(arn) = arn {
                resources.push(arn_ref(&arn)?);
            }
        }
    }
    if resources.is_empty() {
        return Ok(event.ignored(IgnoreReason::NoResources));
    }
    Ok(Event { kind, resources, ..event })
}

fn arn_ref(arn: &str) -> Result<ResourceRef, EventError> {
    ResourceRef::from_arn(arn).map_err(|e| EventError::Shape(e.to_string()))
}

/// `requestParameters`/`responseElements` are parsed only when an event needs them; `null`
/// (failed or response-less calls) reads as an empty object.
fn lazy_value(raw: Option<&RawValue>) -> Result<Value, EventError> {
    match raw {
        None => Ok(Value::Null),
        Some(raw) => Ok(serde_json::from_str(raw.get())?),
    }
}

/// The first string value of `field`, searching depth-first at most `depth` levels down.
fn find_string<'v>(v: &'v Value, field: &str, depth: usize) -> Option<&'v str> {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(s)) = map.get(field) {
                return Some(s);
            }
            if depth == 0 {
                return None;
            }
            map.values().find_map(|child| find_string(child, field, depth - 1))
        }
        Value::Array(items) if depth > 0 => items.iter().find_map(|child| find_string(child, field, depth - 1)),
        _ => None,
    }
}
