//! `AWS API Call via CloudTrail` events of the services `crate::services` describes: each
//! descriptor names its events and where their resource ids are (AWS's documentation); this
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
use crate::services::{self, Api, Change, Ids, Service};
use crate::TagMap;

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
    let failed = d.error_code.is_some();
    let elb = d.event_source.as_deref() == Some("elasticloadbalancing.amazonaws.com");
    let (request, response, api_version) = (d.request_parameters, d.response_elements, d.api_version.clone());
    let event = header(env, d);
    if failed {
        return Ok(event.ignored(IgnoreReason::FailedCall));
    }
    // Classic ELB shares its event source and names with ELBv2: its API version tells them apart.
    let classic = elb && classic_elb(&lazy_value(request)?, api_version.as_deref());
    let (service, change, ids) = match described(&event, classic) {
        Ok(described) => described,
        Err(reason) => return Ok(event.ignored(reason)),
    };
    let (region, account) = (event.region.clone().unwrap_or_default(), event.account.clone().unwrap_or_default());
    let call = Call { request, response, service, event_name: &event.event_name, region, account };
    let (resources, replaced_with) = named(ids, &call)?;
    if resources.is_empty() {
        return Ok(event.ignored(IgnoreReason::NoResources));
    }
    let kind = match change {
        Change::Created => EventKind::Create,
        Change::Tagged => EventKind::TagChange,
    };
    Ok(Event { kind, resources, replaced_with, ..event })
}

/// The event as its envelope and `detail` say, before its resources are found.
fn header(env: &Envelope<'_>, d: Detail<'_>) -> Event {
    let event_source = d.event_source.as_deref().unwrap_or_default();
    let identity = d.user_identity.unwrap_or_default();
    let issuer = identity.session_context.and_then(|c| c.session_issuer).and_then(|i| i.arn);
    let actor = identity.arn.clone().or(identity.invoked_by).or(identity.principal_id).or(identity.account_id);
    Event {
        cloud: Cloud::Aws,
        kind: EventKind::Ignored,
        reason: None,
        service: event_source.strip_suffix(".amazonaws.com").unwrap_or(event_source).to_string(),
        event_name: d.event_name.unwrap_or_default(),
        account: env.account.clone().or(d.recipient_account_id),
        region: env.region.clone().or(d.aws_region),
        actor,
        resources: Vec::new(),
        principals: identity.arn.into_iter().chain(issuer).collect(),
        tags: None,
        replaced_with: None,
        validation_code: None,
        id: d.event_id.or_else(|| env.id.clone()),
        // The API call's own time; EventBridge's envelope time is when it was delivered.
        occurred_at_ms: d.event_time.as_deref().and_then(super::parse_rfc3339_ms).or_else(|| env.occurred_at_ms()),
    }
}

/// Whether an `elasticloadbalancing` call is Classic ELB's (API version 2012-06-01, or its
/// request's shape) rather than ELBv2's.
fn classic_elb(req: &Value, api_version: Option<&str>) -> bool {
    api_version == Some("2012-06-01")
        || req.get("loadBalancerNames").is_some()
        || (req.get("loadBalancerName").is_some() && req.get("type").is_none() && api_version.is_none())
}

/// The descriptor of the event's service, with what it says of the event: the change, and where
/// its ids are; else why the event is ignored.
fn described(event: &Event, classic: bool) -> Result<(&'static Service, Change, Ids), IgnoreReason> {
    let mut of_source = services::SERVICES
        .iter()
        .filter(|s| {
            s.service() == event.service
                && (s.service() != "elasticloadbalancing" || (s.api == Api::ElbClassic) == classic)
        })
        .peekable();
    if of_source.peek().is_none() {
        return Err(IgnoreReason::OtherService);
    }
    of_source
        .find_map(|s| s.events.iter().find(|(n, _, _)| *n == event.event_name).map(|&(_, c, ids)| (s, c, ids)))
        .ok_or(IgnoreReason::UnsupportedEvent)
}

/// One call, as its id location reads it: the payloads (parsed only when read), the descriptor,
/// and where it ran.
struct Call<'a> {
    request: Option<&'a RawValue>,
    response: Option<&'a RawValue>,
    service: &'static Service,
    event_name: &'a str,
    region: String,
    account: String,
}

impl Call<'_> {
    fn request(&self) -> Result<Value, EventError> {
        lazy_value(self.request)
    }

    fn response(&self) -> Result<Value, EventError> {
        lazy_value(self.response)
    }

    fn ec2(&self, id: &str) -> ResourceRef {
        ResourceRef::ec2(id, &self.region, &self.account)
    }

    /// The ARN the descriptor's shape makes of an id or name.
    fn arn_of(&self, id: &str) -> String {
        self.service.arn_of(id, &self.region, &self.account)
    }
}

/// The resources named where `ids` says, and (`PutBucketTagging`) the tag set the call replaced.
fn named(ids: Ids, call: &Call<'_>) -> Result<(Vec<ResourceRef>, Option<TagMap>), EventError> {
    let resources = match ids {
        Ids::S3Bucket => return s3_bucket(call),
        Ids::RunInstances => Ok(run_instances(call)?.map(|id| call.ec2(&id)).collect()),
        Ids::Ec2Response(field) => {
            Ok(find_string(&call.response()?, field, 8).map(|id| call.ec2(id)).into_iter().collect())
        }
        Ids::Ec2ResourcesSet => {
            Ok(fields(call.request()?.pointer("/resourcesSet/items"), "resourceId").map(|id| call.ec2(id)).collect())
        }
        Ids::ElbResponse(list, field) => fields(call.response()?.get(list), field).map(arn_ref).collect(),
        Ids::ElbRequestArns => strings(call.request()?.get("resourceArns")).map(arn_ref).collect(),
        Ids::ElbClassicNames => elb_classic_names(call),
        Ids::IamNamed(name_field, response_object) => iam_named(call, name_field, response_object),
        Ids::Arn(location) => one_arn(string_at(call, location)?),
        Ids::Route53Created(object, rtype) => {
            let id = call.response()?.get(object).and_then(|o| o.get("id")).and_then(Value::as_str).map(str::to_owned);
            id.map(|id| route53_ref(rtype, &id, &call.region)).into_iter().collect()
        }
        Ids::Route53Tagged => route53_tagged(call),
        Ids::Efs(created) => one_arn(efs_arn(call, created)?),
        Ids::IdOrArn(field) => {
            let id = call.request()?.get(field).and_then(Value::as_str).map(str::to_owned);
            one_arn(id.map(|id| if id.starts_with("arn:") { id } else { call.arn_of(&id) }))
        }
    };
    Ok((resources?, None))
}

/// Each instance `RunInstances` launched, then the network interfaces it was launched with.
fn run_instances(call: &Call<'_>) -> Result<impl Iterator<Item = String>, EventError> {
    let response = call.response.filter(|r| r.get() != "null").map(|r| serde_json::from_str(r.get()));
    let r: Option<RunInstancesResponse> = response.transpose()?;
    let instances = r.and_then(|r| r.instances_set).map(|s| s.items).unwrap_or_default();
    Ok(instances.into_iter().flat_map(|i| {
        let interfaces = i.network_interface_set.map(|s| s.items).unwrap_or_default();
        i.instance_id.into_iter().chain(interfaces.into_iter().filter_map(|n| n.network_interface_id))
    }))
}

/// The bucket, and for `PutBucketTagging`, which replaces the whole set, the one it asked for:
/// the bucket's complete set after the call (AWS's documentation: `Tagging.TagSet.Tag`, an
/// array, or an object for one tag, with capitalised `Key`/`Value`).
fn s3_bucket(call: &Call<'_>) -> Result<(Vec<ResourceRef>, Option<TagMap>), EventError> {
    let req = call.request()?;
    let bucket = req.get("bucketName").and_then(Value::as_str);
    let resources = bucket.map(|b| ResourceRef::s3_bucket(b, &call.region)).into_iter().collect();
    if call.event_name != "PutBucketTagging" {
        return Ok((resources, None));
    }
    let items = match req.pointer("/Tagging/TagSet/Tag") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => Vec::new(),
    };
    let pair = |t: &Value| Some((t.get("Key")?.as_str()?.to_string(), t.get("Value")?.as_str()?.to_string()));
    Ok((resources, Some(items.into_iter().filter_map(pair).collect())))
}

fn elb_classic_names(call: &Call<'_>) -> Result<Vec<ResourceRef>, EventError> {
    let req = call.request()?;
    let single = req.get("loadBalancerName").and_then(Value::as_str);
    strings(req.get("loadBalancerNames")).chain(single).map(|name| arn_ref(&call.arn_of(name))).collect()
}

/// The ARN in the response's object, if it names one, else the one the request's name makes.
fn iam_named(call: &Call<'_>, name_field: &str, object: Option<&str>) -> Result<Vec<ResourceRef>, EventError> {
    let arn = object.and_then(|o| call.response().ok()?.get(o)?.get("arn")?.as_str().map(str::to_owned));
    let req = call.request()?;
    one_arn(arn.or_else(|| req.get(name_field).and_then(Value::as_str).map(|name| call.arn_of(name))))
}

fn route53_tagged(call: &Call<'_>) -> Result<Vec<ResourceRef>, EventError> {
    let req = call.request()?;
    let rtype = req.get("resourceType").and_then(Value::as_str);
    match (rtype, req.get("resourceId").and_then(Value::as_str)) {
        (Some(rtype @ ("hostedzone" | "healthcheck")), Some(id)) => Ok(vec![route53_ref(rtype, id, &call.region)?]),
        _ => Ok(Vec::new()),
    }
}

/// The file system's or access point's ARN: at a `/pointer` into the response, else made from
/// the request's id.
fn efs_arn(call: &Call<'_>, created: Option<&str>) -> Result<Option<String>, EventError> {
    if let Some(pointer) = created {
        return Ok(call.response()?.pointer(pointer).and_then(Value::as_str).map(str::to_owned));
    }
    let req = call.request()?;
    let id = req.get("resourceId").or_else(|| req.get("fileSystemId")).and_then(Value::as_str);
    Ok(id.map(|id| {
        let rtype = if id.starts_with("fsap-") { "access-point" } else { "file-system" };
        format!("arn:{}:elasticfilesystem:{}:{}:{rtype}/{id}", partition(&call.region), call.region, call.account)
    }))
}

/// The string at a `/pointer` into the response, or in the request's `field`.
fn string_at(call: &Call<'_>, location: &str) -> Result<Option<String>, EventError> {
    Ok(match location.starts_with('/') {
        true => call.response()?.pointer(location).and_then(Value::as_str).map(str::to_owned),
        false => call.request()?.get(location).and_then(Value::as_str).map(str::to_owned),
    })
}

fn one_arn(arn: Option<String>) -> Result<Vec<ResourceRef>, EventError> {
    arn.as_deref().map(arn_ref).into_iter().collect()
}

/// The strings of an array.
fn strings(array: Option<&Value>) -> impl Iterator<Item = &str> {
    array.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// Each item's string `field`, in an array of objects.
fn fields<'v>(array: Option<&'v Value>, field: &'v str) -> impl Iterator<Item = &'v str> {
    array.and_then(Value::as_array).into_iter().flatten().filter_map(move |item| item.get(field)?.as_str())
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
