//! Cloud events → what they mean: which resources, created or re-tagged, by whom (docs/src/design/architecture.md).
//!
//! An event is only a hint that a resource may have drifted: the reconciler re-reads the
//! resource's tags, so a missed, repeated or reordered event cannot leave a wrong result. Parsing
//! is defensive (CloudTrail's `sessionIssuer: {}`, Event Grid's string-typed `claims`, …) and
//! reads only the fields it needs.
//!
//! - [`cloudtrail`]: `AWS API Call via CloudTrail` through EventBridge;
//! - [`tag_change`]: `Tag Change on Resource` (source `aws.tag`);
//! - [`event_grid`]: Azure Event Grid, in Event Grid and CloudEvents 1.0 schemas;
//! - [`cloud_audit`]: Google Cloud audit logs through a Cloud Logging sink and Pub/Sub push.

pub mod cloud_audit;
pub mod cloudtrail;
pub mod event_grid;
pub mod tag_change;
mod time;

pub use time::civil_from_days;
pub use time::{format_rfc3339_ms, parse_rfc3339_ms};

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::cloud::Cloud;
use crate::resource::ResourceRef;
use crate::TagMap;

/// EventBridge events are at most 256 KiB and Event Grid events 1 MiB; anything larger is refused.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    Create,
    TagChange,
    Ignored,
}

/// Why an event needs no reconcile. Serialized as a stable kebab-case code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IgnoreReason {
    /// The API call failed (`errorCode`): nothing was created or changed.
    FailedCall,
    /// A call of a service without a CloudTrail table here (EMR `AddTags`…): its resources are
    /// enforced through `Tag Change on Resource` events and the sweep.
    OtherService,
    /// A service or event tagwarden does not handle.
    UnsupportedEvent,
    /// A handled call whose event names no resource.
    NoResources,
    /// Event Grid's subscription-validation handshake.
    SubscriptionValidation,
    /// Azure events other than a successful write (deletes, actions, failures).
    NotAWrite,
    /// Azure resource types that cannot carry tags, Google Cloud types that cannot carry labels.
    UntaggableType,
    /// The first audit-log entry of a long-running Google Cloud operation: the resource is acted
    /// on at the operation's last entry, when it exists.
    OperationStarted,
}

impl IgnoreReason {
    pub fn describe(self) -> &'static str {
        match self {
            IgnoreReason::FailedCall => "the API call failed, so nothing changed",
            IgnoreReason::OtherService => "a same-named call of a service tagwarden does not enforce",
            IgnoreReason::UnsupportedEvent => "an event tagwarden does not handle",
            IgnoreReason::NoResources => "the event names no resource",
            IgnoreReason::SubscriptionValidation => "Event Grid's subscription-validation handshake",
            IgnoreReason::NotAWrite => "not a successful resource write",
            IgnoreReason::UntaggableType => "the resource type cannot carry tags",
            IgnoreReason::OperationStarted => "the operation has only started; its last entry is acted on",
        }
    }
}

impl fmt::Display for IgnoreReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        f.write_str(&code)
    }
}

/// A normalized event. The first nine fields are `tagwarden explain --json`'s stable contract.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub cloud: Cloud,
    pub kind: EventKind,
    pub reason: Option<IgnoreReason>,
    pub service: String,
    pub event_name: String,
    /// AWS account, Azure subscription or Google Cloud project.
    pub account: Option<String>,
    pub region: Option<String>,
    /// Who made the call, for people to read.
    pub actor: Option<String>,
    pub resources: Vec<ResourceRef>,
    /// Every identity of the caller that can be compared with the function's own (loop safety).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub principals: Vec<String>,
    /// The resource's complete tag set, when the event carries it (`Tag Change on Resource`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<TagMap>,
    /// The set a replace-style write put (S3 `PutBucketTagging`): never a hint (a later write may
    /// have changed it), only compared with what is read back (`enforce::batch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced_with: Option<TagMap>,
    /// The code to answer Event Grid's validation handshake with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_code: Option<String>,
    /// The event's own id, for logs and de-duplication.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When the change happened (ms since the epoch), by the event's own clock: where the
    /// compliance lag starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occurred_at_ms: Option<u64>,
}

impl Event {
    pub fn is_ignored(&self) -> bool {
        self.kind == EventKind::Ignored
    }

    /// Whether one of `own` (the function's role ARN, managed-identity ids) made this call.
    pub fn is_from(&self, own: &[String]) -> bool {
        self.principals.iter().any(|p| own.iter().any(|o| !o.is_empty() && same_principal(p, o)))
    }

    pub(crate) fn ignored(mut self, reason: IgnoreReason) -> Self {
        self.kind = EventKind::Ignored;
        self.reason = Some(reason);
        self
    }
}

/// Whether two principals are one: ARNs and ids compare ignoring case, and a GUID also ignoring
/// its hyphens, since Event Grid's `authorization.evidence.principalId` carries an object id as
/// 32 hex digits while `claims.oid` and the configured id have the hyphenated form
/// (Azure's documentation).
fn same_principal(a: &str, b: &str) -> bool {
    let guid = |s: &str| {
        let hex: String = s.chars().filter(|c| *c != '-').collect();
        (hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit())).then(|| hex.to_ascii_lowercase())
    };
    match (guid(a), guid(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("event is {size} bytes, larger than the {max}-byte limit")]
    TooLarge { size: usize, max: usize },
    #[error("event is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not an event tagwarden reads: {0}")]
    Shape(String),
}

/// The fields of the three envelopes, read in one pass.
#[derive(Deserialize)]
struct Envelope<'a> {
    // EventBridge
    #[serde(rename = "detail-type")]
    detail_type: Option<String>,
    #[serde(borrow)]
    detail: Option<&'a RawValue>,
    account: Option<String>,
    region: Option<String>,
    #[serde(borrow)]
    resources: Option<&'a RawValue>,
    // EventBridge and CloudEvents
    source: Option<String>,
    id: Option<String>,
    time: Option<String>,
    // Event Grid
    #[serde(rename = "eventType")]
    event_type: Option<String>,
    #[serde(rename = "eventTime")]
    event_time: Option<String>,
    topic: Option<String>,
    // Google Cloud: a Pub/Sub push delivery (`message`, `subscription`) or a bare LogEntry
    // (`protoPayload`), read again whole by `cloud_audit`.
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    subscription: Option<String>,
    #[serde(rename = "protoPayload", borrow)]
    proto_payload: Option<&'a RawValue>,
    // Event Grid and CloudEvents
    subject: Option<String>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    // CloudEvents
    #[serde(rename = "type")]
    ce_type: Option<String>,
    specversion: Option<String>,
}

impl Envelope<'_> {
    /// EventBridge and CloudEvents `time`, Event Grid `eventTime`.
    fn occurred_at_ms(&self) -> Option<u64> {
        self.time.as_deref().or(self.event_time.as_deref()).and_then(parse_rfc3339_ms)
    }
}

/// Parse one delivery: an EventBridge event, an Event Grid / CloudEvents event or array, or a
/// Google Cloud Pub/Sub push delivery or LogEntry of an audit log.
pub fn parse(input: &[u8]) -> Result<Vec<Event>, EventError> {
    if input.len() > MAX_EVENT_BYTES {
        return Err(EventError::TooLarge { size: input.len(), max: MAX_EVENT_BYTES });
    }
    match input.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_slice(input)?;
            if items.is_empty() {
                return Err(EventError::Shape("an empty array holds no event".to_string()));
            }
            items.into_iter().map(|raw| parse_envelope(raw.get().as_bytes(), serde_json::from_str(raw.get())?)).collect()
        }
        Some(b'{') => Ok(vec![parse_envelope(input, serde_json::from_slice(input)?)?]),
        _ => Err(EventError::Shape(
            "expected a JSON object (EventBridge, Event Grid, CloudEvents, a Pub/Sub push delivery or a Cloud Audit Logs LogEntry) or an array of them".to_string(),
        )),
    }
}

/// Parse exactly one event (what the AWS Lambda receives).
pub fn parse_one(input: &[u8]) -> Result<Event, EventError> {
    let mut events = parse(input)?;
    match events.len() {
        1 => Ok(events.remove(0)),
        n => Err(EventError::Shape(format!("expected one event, found {n}"))),
    }
}

/// `raw`: the envelope's own text, for the Google Cloud shapes, which `cloud_audit` reads whole.
fn parse_envelope(raw: &[u8], env: Envelope<'_>) -> Result<Event, EventError> {
    // A Pub/Sub push delivery is `{"message": {...}, "subscription": "..."}` (Pub/Sub, Push
    // subscriptions: "the push request body"); a LogEntry carries its audit log in `protoPayload`.
    if (env.message.is_some() && env.subscription.is_some()) || env.proto_payload.is_some() {
        return cloud_audit::parse_push(raw);
    }
    if let Some(detail_type) = env.detail_type.as_deref() {
        let source = env.source.as_deref().unwrap_or_default();
        return match (detail_type, env.detail) {
            ("AWS API Call via CloudTrail", Some(detail)) => cloudtrail::parse(&env, detail),
            ("Tag Change on Resource", Some(detail)) if source == "aws.tag" => tag_change::parse(&env, detail),
            _ => Ok(aws_unsupported(&env, detail_type)),
        };
    }
    if env.specversion.is_some() {
        let kind = env.ce_type.as_deref().ok_or_else(|| EventError::Shape("CloudEvent without a type".to_string()))?;
        let at = env.occurred_at_ms();
        return event_grid::parse(kind, env.subject.as_deref(), env.source.as_deref(), env.data, env.id)
            .map(|e| Event { occurred_at_ms: at, ..e });
    }
    if let Some(kind) = env.event_type.as_deref() {
        let at = env.occurred_at_ms();
        return event_grid::parse(kind, env.subject.as_deref(), env.topic.as_deref(), env.data, env.id)
            .map(|e| Event { occurred_at_ms: at, ..e });
    }
    Err(EventError::Shape(
        "no detail-type (EventBridge), eventType (Event Grid), specversion (CloudEvents), message and subscription (a Pub/Sub push) or protoPayload (a LogEntry) field".to_string(),
    ))
}

/// Any other EventBridge event (a scheduled event, another service's notification).
fn aws_unsupported(env: &Envelope<'_>, detail_type: &str) -> Event {
    let source = env.source.as_deref().unwrap_or_default();
    Event {
        cloud: Cloud::Aws,
        kind: EventKind::Ignored,
        reason: Some(IgnoreReason::UnsupportedEvent),
        service: source.strip_prefix("aws.").unwrap_or(source).to_string(),
        event_name: detail_type.to_string(),
        account: env.account.clone(),
        region: env.region.clone(),
        actor: None,
        resources: Vec::new(),
        principals: Vec::new(),
        tags: None,
        replaced_with: None,
        validation_code: None,
        id: env.id.clone(),
        occurred_at_ms: env.occurred_at_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::same_principal;

    #[test]
    fn a_principal_id_matches_with_or_without_hyphens() {
        let configured = "7e2a1b3c-4d5e-4f60-8a9b-0c1d2e3f4a5b";
        assert!(same_principal("7E2A1B3C4D5E4F608A9B0C1D2E3F4A5B", configured), "Event Grid's evidence form");
        assert!(same_principal(configured, configured));
        assert!(!same_principal("7e2a1b3c4d5e4f608a9b0c1d2e3f4a5c", configured));
        assert!(same_principal("arn:aws:iam::1:role/X", "arn:aws:iam::1:role/x"));
        assert!(!same_principal("role-x", "rolex"), "only GUIDs drop their hyphens");
    }
}
