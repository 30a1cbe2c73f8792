//! Azure Event Grid events from a subscription or resource-group system topic, in the Event Grid
//! schema or CloudEvents 1.0 (the same `data` in both).
//!
//! `Microsoft.Resources.ResourceWriteSuccess` is the only event that can mean drift: creates and
//! updates of the resource itself (tags set by PUT/PATCH on the resource) and Tags-API writes
//! (`Microsoft.Resources/tags/write`). `claims` and `authorization` arrive as objects in real
//! events but as strings in SDK fixtures, so both are read leniently.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{Event, EventError, EventKind, IgnoreReason};
use crate::cloud::{starts_with_ignore_case, Cloud};
use crate::resource::ResourceRef;

pub const WRITE_SUCCESS: &str = "Microsoft.Resources.ResourceWriteSuccess";
pub const VALIDATION: &str = "Microsoft.EventGrid.SubscriptionValidationEvent";
pub const TAGS_WRITE: &str = "Microsoft.Resources/tags/write";
const TAGS_SUFFIX: &str = "/providers/Microsoft.Resources/tags/default";
const UPN: &str = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn";
const OID: &str = "http://schemas.microsoft.com/identity/claims/objectidentifier";

/// Types that cannot carry tags, or that the cluster never owns (deployments).
const UNTAGGABLE: &[&str] = &[
    "Microsoft.Authorization/",
    "Microsoft.Resources/deployments",
    "Microsoft.Resources/tags",
    "Microsoft.Resources/providers",
    "Microsoft.Resources/tenants",
    "Microsoft.Security/",
    "Microsoft.SecurityInsights/",
    "Microsoft.ResourceHealth/",
    "Microsoft.Advisor/",
    "Microsoft.EventGrid/eventSubscriptions",
    // DNS record sets carry metadata, not tags; the zone itself is taggable.
    "Microsoft.Network/dnszones/",
    "Microsoft.Storage/storageAccounts/blobServices",
    "Microsoft.Storage/storageAccounts/fileServices",
    "Microsoft.Storage/storageAccounts/queueServices",
    "Microsoft.Storage/storageAccounts/tableServices",
];

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Data {
    authorization: Option<Value>,
    claims: Option<Value>,
    resource_uri: Option<String>,
    operation_name: Option<String>,
    subscription_id: Option<String>,
    validation_code: Option<String>,
}

pub(super) fn parse(
    event_type: &str,
    subject: Option<&str>,
    topic: Option<&str>,
    data: Option<&RawValue>,
    id: Option<String>,
) -> Result<Event, EventError> {
    let data: Data = match data {
        Some(raw) if raw.get() != "null" => serde_json::from_str(raw.get())?,
        _ => Data::default(),
    };
    let claim =
        |name: &str| data.claims.as_ref().and_then(|c| c.get(name)).and_then(Value::as_str).filter(|s| !s.is_empty());
    let evidence_principal = data
        .authorization
        .as_ref()
        .and_then(|a| a.pointer("/evidence/principalId"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let actor = claim(UPN).or(claim("appid")).or(evidence_principal).map(str::to_owned);
    let principals =
        [claim("appid"), claim(OID), evidence_principal].into_iter().flatten().map(str::to_owned).collect();

    let mut event = Event {
        cloud: Cloud::Azure,
        kind: EventKind::Ignored,
        reason: None,
        service: String::new(),
        event_name: data.operation_name.clone().unwrap_or_else(|| event_type.to_string()),
        account: data.subscription_id.clone(),
        region: None,
        actor,
        resources: Vec::new(),
        principals,
        tags: None,
        replaced_with: None,
        validation_code: None,
        id,
        occurred_at_ms: None,
    };

    if event_type == VALIDATION {
        event.service = "Microsoft.EventGrid".to_string();
        event.event_name = event_type.to_string();
        event.validation_code = data.validation_code;
        event.account = event.account.or_else(|| topic.and_then(subscription_of));
        return Ok(event.ignored(IgnoreReason::SubscriptionValidation));
    }

    let uri = data.resource_uri.as_deref().or(subject).unwrap_or_default();
    let uri = strip_suffix_ignore_case(uri, TAGS_SUFFIX);
    if let Ok(resource) = ResourceRef::from_arm_id(uri) {
        event.service = resource.kind.split('/').next().unwrap_or_default().to_string();
        event.account = event.account.or_else(|| subscription_of(uri));
        event.resources.push(resource);
    }

    if event_type != WRITE_SUCCESS {
        return Ok(event.ignored(IgnoreReason::NotAWrite));
    }
    let Some(kind) = event.resources.first().map(|r| r.kind.clone()) else {
        return Ok(event.ignored(IgnoreReason::NoResources));
    };
    let operation = data.operation_name.as_deref().unwrap_or_default();
    let untaggable = UNTAGGABLE.iter().any(|p| starts_with_ignore_case(&kind, p))
        || starts_with_ignore_case(operation, "Microsoft.Resources/deployments/");
    if untaggable {
        return Ok(event.ignored(IgnoreReason::UntaggableType));
    }
    event.kind = if operation.eq_ignore_ascii_case(TAGS_WRITE) { EventKind::TagChange } else { EventKind::Create };
    Ok(event)
}

fn strip_suffix_ignore_case<'a>(s: &'a str, suffix: &str) -> &'a str {
    let n = s.len().saturating_sub(suffix.len());
    match s.get(n..) {
        Some(tail) if tail.eq_ignore_ascii_case(suffix) => &s[..n],
        _ => s,
    }
}

fn subscription_of(id: &str) -> Option<String> {
    let mut segs = id.split('/').skip(1);
    match (segs.next(), segs.next()) {
        (Some(s), Some(sub)) if s.eq_ignore_ascii_case("subscriptions") && !sub.is_empty() => Some(sub.to_string()),
        _ => None,
    }
}
