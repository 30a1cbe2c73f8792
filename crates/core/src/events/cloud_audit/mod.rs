//! Google Cloud audit logs: Cloud Audit Logs entries that a Cloud Logging sink routes to a Pub/Sub
//! topic, delivered to tagwarden by a push subscription ([`parse_push`]), or a bare `LogEntry`
//! ([`parse_log_entry`]).
//!
//! What is read, all of it optional (a field missing or of another type is absent, never an
//! error: real entries leave out `@type`, `status` and `request` at will):
//! - `protoPayload` (a `google.cloud.audit.AuditLog`): `serviceName`, `methodName`
//!   (`v1.compute.instances.insert`, `beta.compute.disks.insert`, `storage.buckets.create`,
//!   `dns.managedZones.patch`), `resourceName`, `authenticationInfo.principalEmail` (the actor,
//!   and a principal for loop safety with `principalSubject`), `status.code` (non-zero: the call
//!   failed);
//! - `operation {id, producer, first, last}`, `resource.labels` (`project_id`, `zone`, `region`,
//!   `location`), `timestamp`, `insertId`.
//!
//! Resource names: an audit log's `resourceName` is the relative name without the service,
//! mapped here to the Cloud Asset Inventory full resource name of [`crate::gcp::resources`]:
//! Compute's `projects/p/zones/z/instances/vm-1` is
//! `//compute.googleapis.com/projects/p/zones/z/instances/vm-1`; Cloud Storage names a bucket
//! `projects/_/buckets/b` (no project), CAI `//storage.googleapis.com/b`; Cloud DNS names a zone
//! `managedZones/z` without its project, which comes from `resource.labels.project_id`.
//!
//! Long-running operations: a Compute write that returns an operation is logged twice with one
//! `operation.id`, `first: true` when the request is accepted and `last: true` when the operation
//! ends (Cloud Logging `LogEntryOperation`: "first: Set this to True if this is the first log entry
//! in the operation", "last: … the last log entry in the operation"; Compute Engine audit logging:
//! the first entry's `response` is the operation `PENDING`/`RUNNING`). The resource exists only when
//! the operation is done, and a failure shows only then (`status` of the last entry), so the
//! `last` entry is the one acted on, as Google's own VM-labelling sample does (eventarc-samples
//! `gce-vm-labeler`: "make sure we respond to the last event"). A `first` entry that is not also
//! the last is ignored as [`IgnoreReason::OperationStarted`]; an entry with no operation (Cloud
//! Storage, Cloud DNS) is acted on as it comes.
//!
//! Outcomes: creates (`insert`, `create`) → [`EventKind::Create`]; `setLabels`, and `patch` /
//! `update` (which carry labels on buckets, zones and Compute resources) → [`EventKind::TagChange`];
//! deletes and reads → `not-a-write`; other verbs (`start`, `setMetadata`, `setTags`,
//! `createSnapshot`, …) → `unsupported-event`; types without labels → `untaggable-type`; services
//! and types not in [`crate::gcp::resources::RESOURCE_TYPES`] → `unsupported-event`. Ignored events
//! still list the resource they name, when it is one of the table's.

mod push;
#[cfg(test)]
mod tests;

use serde_json::Value;

use super::{parse_rfc3339_ms, Event, EventError, EventKind, IgnoreReason, MAX_EVENT_BYTES};
use crate::cloud::Cloud;
use crate::gcp::resources::{self, ResourceName, DNS_RECORD_COLLECTIONS};
use crate::resource::ResourceRef;

/// Parse one Pub/Sub push delivery (wrapped, or unwrapped: the LogEntry itself) into its event.
pub fn parse_push(input: &[u8]) -> Result<Event, EventError> {
    if input.len() > MAX_EVENT_BYTES {
        return Err(EventError::TooLarge { size: input.len(), max: MAX_EVENT_BYTES });
    }
    let (entry, delivery) = push::unwrap(serde_json::from_slice(input)?)?;
    let mut event = from_entry(&entry)?;
    event.id = event.id.or(delivery.message_id);
    event.occurred_at_ms = event.occurred_at_ms.or_else(|| delivery.publish_time.as_deref().and_then(parse_rfc3339_ms));
    Ok(event)
}

/// Parse one Cloud Logging `LogEntry` (JSON) carrying an audit log.
pub fn parse_log_entry(input: &[u8]) -> Result<Event, EventError> {
    if input.len() > MAX_EVENT_BYTES {
        return Err(EventError::TooLarge { size: input.len(), max: MAX_EVENT_BYTES });
    }
    from_entry(&serde_json::from_slice(input)?)
}

/// What a method does, from its last segment (`v1.compute.instances.setLabels` → `setLabels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Create,
    Relabel,
    ReadOrDelete,
    Other,
}

fn verb(method: &str) -> Verb {
    let last = method.rsplit('.').next().unwrap_or_default();
    match last {
        "insert" | "create" => Verb::Create,
        "setLabels" | "patch" | "update" => Verb::Relabel,
        _ if ["get", "list", "aggregatedList", "delete", "testIamPermissions"].iter().any(|p| last.starts_with(p)) => {
            Verb::ReadOrDelete
        }
        _ => Verb::Other,
    }
}

fn text<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn from_entry(entry: &Value) -> Result<Event, EventError> {
    if !entry.is_object() {
        return Err(EventError::Shape("a Cloud Logging LogEntry is a JSON object".to_string()));
    }
    let payload = entry.get("protoPayload").filter(|p| p.is_object());
    let get = |pointer: &str| payload.and_then(|p| text(p, pointer));
    let service_name = get("/serviceName").unwrap_or_default();
    let method = get("/methodName").unwrap_or_default();
    let project = text(entry, "/resource/labels/project_id");
    let location = ["zone", "region", "location"].iter().find_map(|k| text(entry, &format!("/resource/labels/{k}")));
    let principal = get("/authenticationInfo/principalEmail");
    // `principalSubject` is `user:EMAIL` or `serviceAccount:EMAIL` (and, for federated callers,
    // the only identity given).
    let subject = get("/authenticationInfo/principalSubject").map(|s| s.split_once(':').map_or(s, |(_, id)| id));
    let mut principals: Vec<String> = Vec::new();
    for p in [principal, subject].into_iter().flatten() {
        if !principals.iter().any(|q| q.eq_ignore_ascii_case(p)) {
            principals.push(p.to_string());
        }
    }
    let mut event = Event {
        cloud: Cloud::Gcp,
        kind: EventKind::Ignored,
        reason: None,
        service: service_name.strip_suffix(".googleapis.com").unwrap_or(service_name).to_string(),
        event_name: method.to_string(),
        account: project.map(str::to_owned),
        region: location.map(str::to_owned),
        actor: principal.or(subject).map(str::to_owned),
        resources: Vec::new(),
        principals,
        tags: None,
        replaced_with: None,
        validation_code: None,
        id: text(entry, "/insertId").map(str::to_owned),
        occurred_at_ms: text(entry, "/timestamp").and_then(parse_rfc3339_ms),
    };

    if payload.is_none() || !resources::RESOURCE_TYPES.iter().any(|t| t.service == service_name) {
        return Ok(event.ignored(IgnoreReason::UnsupportedEvent));
    }
    let relative = get("/resourceName").or_else(|| fallback_name(service_name, entry));
    let name = relative.and_then(|r| resolve(service_name, r, project));
    if let Some(name) = &name {
        event.resources.push(ResourceRef::gcp(name));
        event.account = event.account.or_else(|| name.project.clone());
    }

    if payload.and_then(|p| p.pointer("/status/code")).and_then(Value::as_i64).is_some_and(|c| c != 0) {
        return Ok(event.ignored(IgnoreReason::FailedCall));
    }
    let verb = verb(method);
    match verb {
        Verb::ReadOrDelete => return Ok(event.ignored(IgnoreReason::NotAWrite)),
        Verb::Other => return Ok(event.ignored(IgnoreReason::UnsupportedEvent)),
        Verb::Create | Verb::Relabel => {}
    }
    if service_name == "dns.googleapis.com" && is_dns_record(method, relative.unwrap_or_default()) {
        return Ok(event.ignored(IgnoreReason::UntaggableType));
    }
    let Some(name) = name else {
        let reason = if relative.is_some() { IgnoreReason::UnsupportedEvent } else { IgnoreReason::NoResources };
        return Ok(event.ignored(reason));
    };
    if !name.resource_type.is_labelable() {
        return Ok(event.ignored(IgnoreReason::UntaggableType));
    }
    let flag = |k: &str| entry.pointer(&format!("/operation/{k}")).and_then(Value::as_bool) == Some(true);
    if flag("first") && !flag("last") {
        return Ok(event.ignored(IgnoreReason::OperationStarted));
    }
    event.kind = if verb == Verb::Create { EventKind::Create } else { EventKind::TagChange };
    Ok(event)
}

/// The resource an entry without `resourceName` names in its monitored resource's labels.
fn fallback_name<'a>(service: &str, entry: &'a Value) -> Option<&'a str> {
    match service {
        "storage.googleapis.com" => text(entry, "/resource/labels/bucket_name"),
        "dns.googleapis.com" => text(entry, "/resource/labels/zone_name"),
        _ => None,
    }
}

/// An audit log's resource name as the table's full resource name.
fn resolve(service: &str, relative: &str, project: Option<&str>) -> Option<ResourceName> {
    let relative = relative.trim_start_matches('/');
    // Names are sometimes logged in full (`//compute.googleapis.com/…`) or as an API URL path.
    let relative = relative.strip_prefix(service).map_or(relative, |r| r.trim_start_matches('/'));
    if service == "dns.googleapis.com" && !relative.starts_with("projects/") {
        // `managedZones/z`, or a bare zone name from `resource.labels.zone_name`.
        let zone = relative.strip_prefix("managedZones/").unwrap_or(relative);
        return resources::parse_relative(service, &format!("projects/{}/managedZones/{zone}", project?));
    }
    resources::parse_relative(service, relative)
}

/// Cloud DNS record-set methods (`dns.changes.create`, `dns.resourceRecordSets.patch`) or names
/// below a zone (`managedZones/z/rrsets/…`).
fn is_dns_record(method: &str, relative: &str) -> bool {
    let collection = method.rsplit('.').nth(1).unwrap_or_default();
    DNS_RECORD_COLLECTIONS.contains(&collection) || relative.split('/').skip_while(|s| *s != "managedZones").count() > 2
}
