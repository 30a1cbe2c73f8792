//! Azure Event Grid events from a subscription or resource-group system topic, in the Event Grid
//! schema or CloudEvents 1.0 (the same `data` in both).
//!
//! Two events can mean drift:
//! - `Microsoft.Resources.ResourceWriteSuccess` (a subscription or resource-group system topic):
//!   creates and updates of the resource itself (tags set by PUT/PATCH on the resource) and Tags-API
//!   writes (`Microsoft.Resources/tags/write`). `claims` and `authorization` arrive as objects in
//!   real events but as strings in SDK fixtures, so both are read leniently. No tags: the resource
//!   is read.
//! - `Microsoft.ResourceNotifications.Resources.CreatedOrUpdated` (a
//!   `Microsoft.ResourceNotifications.Resources` system topic, subscription scope, in preview): the
//!   resource as Resource Graph holds it, its tags at `data.resourceInfo.tags` (azure-rest-api-specs
//!   `specification/eventgrid/data-plane/Microsoft.ResourceNotifications/stable/2018-01-01/examples/
//!   event-grid-schema/Resources_CreatedOrUpdated.json`; a string map in the TypeSpec
//!   `Microsoft.ResourceNotifications/common.tsp`, optional). They are carried as the event's
//!   tags, a hint that spares the read where they show that no enforced cluster owns the resource
//!   (the engine's `hint`: a claim of ownership is always verified by a read). No caller is named,
//!   so loop safety is the idempotent plan: the echo of tagwarden's own Merge is read once and
//!   writes nothing. The types it covers are
//!   Resource Graph's `resources` table, "not yet all" of them (Learn, "Azure Resource
//!   Notifications - Resources events"): a type it leaves out still comes through
//!   `ResourceWriteSuccess`, read as before.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{Event, EventError, EventKind, IgnoreReason};
use crate::cloud::{starts_with_ignore_case, Cloud};
use crate::resource::ResourceRef;

pub const WRITE_SUCCESS: &str = "Microsoft.Resources.ResourceWriteSuccess";
pub const RESOURCE_CHANGED: &str = "Microsoft.ResourceNotifications.Resources.CreatedOrUpdated";
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
    resource_info: Option<ResourceInfo>,
}

/// `data.resourceInfo` of a Resource Notifications event.
#[derive(Deserialize, Default)]
struct ResourceInfo {
    id: Option<String>,
    tags: Option<serde_json::Map<String, Value>>,
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

    let info_id = data.resource_info.as_ref().and_then(|i| i.id.as_deref());
    let uri = data.resource_uri.as_deref().or(info_id).or(subject).unwrap_or_default();
    let uri = strip_suffix_ignore_case(uri, TAGS_SUFFIX);
    if let Ok(resource) = ResourceRef::from_arm_id(uri) {
        event.service = resource.kind.split('/').next().unwrap_or_default().to_string();
        event.account = event.account.or_else(|| subscription_of(uri));
        event.resources.push(resource);
    }

    let changed = event_type.eq_ignore_ascii_case(RESOURCE_CHANGED);
    if event_type != WRITE_SUCCESS && !changed {
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
    if changed {
        // A write of the resource, tags included; which one, the event does not say.
        event.kind = EventKind::Create;
        event.tags = data.resource_info.and_then(|i| i.tags).map(|tags| {
            tags.into_iter().map(|(k, v)| (k, v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()))).collect()
        });
        return Ok(event);
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

#[cfg(test)]
mod tests {
    use super::super::parse_one;

    #[test]
    fn resource_notifications_carry_the_resource_s_tags_and_only_they() {
        let event = |tags: &str| {
            format!(
                r#"{{"id":"e","topic":"/subscriptions/s","subject":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d",
                "eventType":"Microsoft.ResourceNotifications.Resources.CreatedOrUpdated","eventTime":"2023-07-28T20:13:10Z","dataVersion":"1",
                "data":{{"resourceInfo":{{"id":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d","name":"d",
                "type":"Microsoft.Compute/disks"{tags}}},"apiVersion":"2023-04-02","operationalInfo":{{"resourceEventTime":"2023-07-28T20:13:10Z"}}}}}}"#
            )
        };
        let e = parse_one(event(r#","tags":{"team":"a","n":1}"#).as_bytes()).expect("event");
        let tags = e.tags.expect("tags carried");
        assert_eq!((tags["team"].as_str(), tags["n"].as_str()), ("a", "1"));
        assert!(e.principals.is_empty() && e.actor.is_none(), "no caller is named");
        // No tags in the payload (they are optional): nothing carried, the resource is read.
        assert!(parse_one(event("").as_bytes()).expect("event").tags.is_none());
        // A ResourceWriteSuccess never carries tags.
        let write = r#"{"id":"w","subject":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d","eventType":"Microsoft.Resources.ResourceWriteSuccess",
            "data":{"operationName":"Microsoft.Compute/disks/write","resourceInfo":{"tags":{"team":"x"}}},"dataVersion":"","metadataVersion":"1","eventTime":"2023-07-28T20:13:10Z"}"#;
        assert!(parse_one(write.as_bytes()).expect("write").tags.is_none());
    }
}
