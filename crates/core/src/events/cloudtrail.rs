//! `AWS API Call via CloudTrail` events of the services `crate::services` describes: each
//! descriptor names its events and where their resource ids are (reference/aws.md §1.3); this
//! file reads them there. Other services' resources are enforced through `Tag Change on Resource`
//! events and the sweep.
//!
//! Matching is on the CloudTrail `eventSource` and `eventName` together, because EFS, EMR, KMS and
//! Classic ELB reuse names such as `DeleteTags`, `TagResource`, `AddTags` and `CreateLoadBalancer`.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{Envelope, Event, EventError, EventKind, IgnoreReason};
use crate::cloud::Cloud;
use crate::resource::{partition, ResourceRef};
use crate::services::{self, Api, Change, Ids};

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
    event_time: Option<String>,
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
        replaced_with: None,
        validation_code: None,
        id: d.event_id.or_else(|| env.id.clone()),
        // The API call's own time; EventBridge's envelope time is when it was delivered.
        occurred_at_ms: d.event_time.as_deref().and_then(super::parse_rfc3339_ms).or_else(|| env.occurred_at_ms()),
    };
    if d.error_code.is_some() {
        return Ok(event.ignored(IgnoreReason::FailedCall));
    }
    let request = || lazy_value(d.request_parameters);
    let response = || lazy_value(d.response_elements);
    // Classic ELB shares its event source and names with ELBv2: its API version tells them apart.
    let classic = event_source == "elasticloadbalancing.amazonaws.com" && {
        let req = request()?;
        d.api_version.as_deref() == Some("2012-06-01")
            || req.get("loadBalancerNames").is_some()
            || (req.get("loadBalancerName").is_some() && req.get("type").is_none() && d.api_version.is_none())
    };
    let mut of_source = services::SERVICES
        .iter()
        .filter(|s| {
            s.service() == event.service
                && (s.service() != "elasticloadbalancing" || (s.api == Api::ElbClassic) == classic)
        })
        .peekable();
    if of_source.peek().is_none() {
        return Ok(event.ignored(IgnoreReason::OtherService));
    }
    let Some((service, &(_, change, ids))) =
        of_source.find_map(|s| s.events.iter().find(|(n, _, _)| *n == event.event_name).map(|e| (s, e)))
    else {
        return Ok(event.ignored(IgnoreReason::UnsupportedEvent));
    };
    let kind = match change {
        Change::Created => EventKind::Create,
        Change::Tagged => EventKind::TagChange,
    };

    let region = event.region.clone().unwrap_or_default();
    let account = event.account.clone().unwrap_or_default();
    let mut resources = Vec::new();
    let mut replaced_with = None;
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
            let req = request()?;
            if let Some(bucket) = req.get("bucketName").and_then(Value::as_str) {
                resources.push(ResourceRef::s3_bucket(bucket, &region));
            }
            // `PutBucketTagging` replaces the whole set: the one it asked for is the bucket's
            // complete set after the call (reference/aws.md §5: `Tagging.TagSet.Tag`, an array, or
            // an object for one tag, with capitalised `Key`/`Value`).
            if event.event_name == "PutBucketTagging" {
                let tag = req.pointer("/Tagging/TagSet/Tag");
                let items = match tag {
                    Some(Value::Array(items)) => items.iter().collect(),
                    Some(one @ Value::Object(_)) => vec![one],
                    _ => Vec::new(),
                };
                let pair =
                    |t: &Value| Some((t.get("Key")?.as_str()?.to_string(), t.get("Value")?.as_str()?.to_string()));
                replaced_with = Some(items.into_iter().filter_map(pair).collect());
            }
        }
        Ids::ElbResponse(list, field) => {
            let resp = response()?;
            for item in resp.get(list).and_then(Value::as_array).into_iter().flatten() {
                if let Some(arn) = item.get(field).and_then(Value::as_str) {
                    resources.push(arn_ref(arn)?);
                }
            }
        }
        Ids::ElbRequestArns => {
            for arn in
                request()?.get("resourceArns").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
            {
                resources.push(arn_ref(arn)?);
            }
        }
        Ids::IamNamed(name_field, response_object) => {
            let arn = response_object.and_then(|o| {
                response()
                    .ok()
                    .and_then(|r| r.get(o).and_then(|o| o.get("arn")).and_then(Value::as_str).map(str::to_owned))
            });
            match (arn, request()?.get(name_field).and_then(Value::as_str)) {
                (Some(arn), _) => resources.push(arn_ref(&arn)?),
                (None, Some(name)) => resources.push(arn_ref(&service.arn_of(name, &region, &account))?),
                (None, None) => {}
            }
        }
        Ids::Arn(location) => {
            let arn = if let Some(pointer) = location.strip_prefix('/') {
                response()?.pointer(&format!("/{pointer}")).and_then(Value::as_str).map(str::to_owned)
            } else {
                request()?.get(location).and_then(Value::as_str).map(str::to_owned)
            };
            if let Some(arn) = arn {
                resources.push(arn_ref(&arn)?);
            }
        }
        Ids::ElbClassicNames => {
            let req = request()?;
            let names = req.get("loadBalancerNames").and_then(Value::as_array).into_iter().flatten();
            let single = req.get("loadBalancerName").into_iter();
            for name in names.chain(single).filter_map(Value::as_str) {
                resources.push(arn_ref(&service.arn_of(name, &region, &account))?);
            }
        }
        Ids::Route53Created(object, rtype) => {
            if let Some(id) = response()?.get(object).and_then(|o| o.get("id")).and_then(Value::as_str) {
                resources.push(route53_ref(rtype, id, &region)?);
            }
        }
        Ids::Route53Tagged => {
            let req = request()?;
            let rtype = req.get("resourceType").and_then(Value::as_str);
            let id = req.get("resourceId").and_then(Value::as_str);
            if let (Some(rtype @ ("hostedzone" | "healthcheck")), Some(id)) = (rtype, id) {
                resources.push(route53_ref(rtype, id, &region)?);
            }
        }
        Ids::Efs(created) => {
            let arn = match created {
                Some(pointer) => response()?.pointer(pointer).and_then(Value::as_str).map(str::to_owned),
                None => {
                    let req = request()?;
                    let id = req.get("resourceId").or_else(|| req.get("fileSystemId")).and_then(Value::as_str);
                    id.map(|id| {
                        let rtype = if id.starts_with("fsap-") { "access-point" } else { "file-system" };
                        format!("arn:{}:elasticfilesystem:{region}:{account}:{rtype}/{id}", partition(&region))
                    })
                }
            };
            if let Some(arn) = arn {
                resources.push(arn_ref(&arn)?);
            }
        }
        Ids::IdOrArn(field) => {
            if let Some(id) = request()?.get(field).and_then(Value::as_str) {
                let arn = if id.starts_with("arn:") { id.to_string() } else { service.arn_of(id, &region, &account) };
                resources.push(arn_ref(&arn)?);
            }
        }
    }
    if resources.is_empty() {
        return Ok(event.ignored(IgnoreReason::NoResources));
    }
    Ok(Event { kind, resources, replaced_with, ..event })
}

/// `arn:…:route53:::hostedzone/Z…` from an id with or without its `/hostedzone/` prefix.
fn route53_ref(rtype: &str, id: &str, region: &str) -> Result<ResourceRef, EventError> {
    let id = id.rsplit('/').next().unwrap_or(id);
    arn_ref(&format!("arn:{}:route53:::{rtype}/{id}", partition(region)))
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
