//! `Tag Change on Resource` events (source `aws.tag`). They carry the resource's complete tag set
//! after the change, so a reconcile can plan without reading the tags again, but no caller:
//! only idempotent planning keeps tagwarden's own writes from looping here. Every service's
//! events are handled: each ARN has a tag path (`aws::kinds`), or is reported unsupported.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Envelope, Event, EventError, EventKind, IgnoreReason};
use crate::cloud::Cloud;
use crate::resource::ResourceRef;

#[derive(Deserialize)]
struct Detail {
    service: Option<String>,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
}

pub(super) fn parse(env: &Envelope<'_>, detail: &RawValue) -> Result<Event, EventError> {
    let d: Detail = serde_json::from_str(detail.get())?;
    let arns: Vec<String> = match env.resources {
        Some(raw) => serde_json::from_str(raw.get())?,
        None => Vec::new(),
    };
    let service = d.service.unwrap_or_default();
    let event = Event {
        cloud: Cloud::Aws,
        kind: EventKind::TagChange,
        reason: None,
        service,
        event_name: "Tag Change on Resource".to_string(),
        account: env.account.clone(),
        region: env.region.clone(),
        actor: None,
        resources: arns
            .iter()
            .map(|a| ResourceRef::from_arn(a))
            .collect::<Result<_, _>>()
            .map_err(|e| EventError::Shape(e.to_string()))?,
        principals: Vec::new(),
        tags: d.tags,
        replaced_with: None,
        validation_code: None,
        id: env.id.clone(),
        occurred_at_ms: env.occurred_at_ms(),
    };
    if event.resources.is_empty() {
        return Ok(event.ignored(IgnoreReason::NoResources));
    }
    Ok(event)
}
