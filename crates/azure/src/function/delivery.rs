//! What a delivery asks for: the Event Grid events (or CloudEvents) a request or a queue message
//! holds, in whichever encoding it came, from a topic the deployment accepts.

use std::borrow::Cow;

use base64::Engine as _;
use serde::Deserialize;
use tagwarden_core::reason::StopKind;
use tagwarden_core::report::Outcome;
use tagwarden_core::trigger::Trigger;

use super::BLOB_CREATED;

/// What a trigger delivers (a direct POST's body, or a binding's value), told apart by shape.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    expecting = "expected an Event Grid or CloudEvents event (eventType or type), an array of them, or a \
                 string holding one"
)]
pub enum Delivery {
    /// A batch: Event Grid's own schema, or CloudEvents in batch mode.
    Events(Vec<GridEvent>),
    /// One event: a CloudEvent, or what the host's Event Grid trigger hands over.
    Event(GridEvent),
    /// A delivery as text: the host JSON-encodes string values, and a queue message is its
    /// event's JSON or base64 of it.
    Text(String),
}

/// What says what an event asks for here: its type, its topic, (for a blob) its subject and when
/// it happened. The rest of it is read by `tagwarden_core::events`, from the same text.
#[derive(Debug, Deserialize)]
pub struct GridEvent {
    /// `eventType` (Event Grid), `type` (CloudEvents).
    #[serde(rename = "eventType", alias = "type")]
    pub event_type: String,
    /// `topic` (Event Grid), `source` (CloudEvents).
    #[serde(alias = "source")]
    pub topic: Option<String>,
    pub subject: Option<String>,
    /// `eventTime` (Event Grid), `time` (CloudEvents).
    #[serde(rename = "eventTime", alias = "time")]
    pub time: Option<String>,
}

/// The Event Grid topics whose deliveries are worked on (`TAGWARDEN_EVENT_TOPICS`), by the topic
/// every event names: Event Grid writes it itself ("Full resource path to the event source. This
/// field isn't writeable. Event Grid provides this value", `EventGridEvent.topic`, Azure Functions
/// reference), as CloudEvents' `source` (Azure's documentation: `/subscriptions/{id}` for a
/// subscription's system topic). ARM IDs compare ignoring case.
///
/// Unset, every topic is accepted, with a warning at start-up: the Terraform module always sets
/// it, and a deployment made by hand (or a test harness) that has not is better told than silently
/// stopped from enforcing. Deliveries reach the handler only through the Functions host's keyed
/// Event Grid trigger or the sweep queue, so the list is a second line, not the only one.
#[derive(Debug, Clone, Default)]
pub struct Topics(pub Option<Vec<String>>);

impl Topics {
    pub fn accepts(&self, topic: Option<&str>) -> bool {
        let Some(list) = &self.0 else { return true };
        topic.is_some_and(|t| list.iter().any(|a| a.eq_ignore_ascii_case(t.trim_end_matches('/'))))
    }
}

/// Why a delivery is not worked on. Both fail the delivery: a retry cannot help, but Event Grid
/// dead-letters it (the queue parks it in `<queue>-poison`), where it can be seen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("not an event tagwarden reads: {0}")]
    Unreadable(Unreadable),
    #[error(
        "refused {events} event(s) from Event Grid topic {topic:?}, which is not one of TAGWARDEN_EVENT_TOPICS: if \
         the function subscribes to that topic, add it there (the Terraform module sets it from its system topics); \
         otherwise something delivers events this deployment never subscribed to"
    )]
    Topic { topic: String, events: u64 },
}

/// Why a delivery's text holds no event tagwarden reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("the message is encoded too many times")]
    TooDeep,
    /// A string's content that is neither JSON nor base64 (the decoder's error).
    #[error("the message is neither JSON nor base64 ({0})")]
    NotBase64(base64::DecodeError),
    /// Not JSON of a delivery (the parser's message).
    #[error("{0}")]
    NotADelivery(String),
    #[error("an empty array holds no event")]
    NoEvent,
    #[error("the sweep queue carries policy BlobCreated events only; this message holds another event")]
    NotAPolicyChange,
}

impl Refused {
    /// The outcome of a refused delivery: its events counted as received and ignored, the reason
    /// as its error (so the delivery fails and is kept).
    pub fn into_outcome(self) -> Outcome {
        let mut out = Outcome::default();
        if let Refused::Topic { topic, events } = &self {
            tracing::warn!(topic, events, "delivery refused: {self}");
            out.metrics.events_received = *events;
            out.metrics.events_ignored = *events;
        }
        out.error = Some(StopKind::Unreadable(self.to_string()).into());
        out
    }
}

/// What a delivery's text asks for: a policy change for policy `BlobCreated` events (the blobs
/// their subjects name, `…/blobs/<name>`), unless only the function's own report was written;
/// otherwise its events, to reconcile. Refused whole when one of its events is from a topic
/// `topics` does not accept (one delivery comes from one subscription, so from one topic).
pub fn work_of(text: &[u8], topics: &Topics) -> Result<Trigger, Refused> {
    let (events, text) = events_in(text.into(), 0).map_err(Refused::Unreadable)?;
    if let Some(e) = events.iter().find(|e| !topics.accepts(e.topic.as_deref())) {
        let topic = e.topic.clone().unwrap_or_else(|| "(none)".to_string());
        return Err(Refused::Topic { topic, events: events.len() as u64 });
    }
    if !events.iter().any(|e| e.event_type == BLOB_CREATED) {
        return Ok(Trigger::Events(text.into_owned()));
    }
    let blobs: Vec<&GridEvent> = events.iter().filter(|e| e.event_type == BLOB_CREATED).collect();
    let at: Vec<Option<&str>> = blobs.iter().map(|e| e.time.as_deref()).collect();
    let names = blobs.iter().filter_map(|e| Some(e.subject.as_deref()?.split_once("/blobs/")?.1.to_string()));
    Ok(Trigger::written(names.collect(), &at))
}

/// The output binding of `sweep/function.json` the timer's part messages go to.
pub const PARTS_OUTPUT: &str = "parts";

/// The part a `sweep-queue` message of [`Handler::timer`](super::Handler::timer) names
/// (`{"tagwarden": "sweep", "part": "/subscriptions/<id>"}`), as it came: the object, JSON text
/// of it, or base64 of either (as [`events_in`] reads an event), at most three strings deep.
pub fn part_in(text: &[u8], depth: u8) -> Option<String> {
    #[derive(Deserialize)]
    struct PartMessage {
        tagwarden: String,
        part: String,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Message {
        Part(PartMessage),
        Text(String),
    }
    if depth > 3 {
        return None;
    }
    match serde_json::from_slice::<Message>(text.trim_ascii()) {
        Ok(Message::Part(m)) => (m.tagwarden == "sweep").then_some(m.part),
        Ok(Message::Text(inner)) => part_in(inner.as_bytes(), depth + 1),
        Err(_) if depth > 0 => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim_ascii()).ok()?;
            part_in(&bytes, depth + 1)
        }
        Err(_) => None,
    }
}

/// What a `sweep-queue` message asks for: the policy sweep for a policy `BlobCreated` event,
/// nothing for the function's own status report, and an error for anything else (a retry cannot
/// help; after `maxDequeueCount` attempts the host parks the message in `<queue>-poison`).
pub fn queue_work(message: &[u8], topics: &Topics) -> Result<Trigger, Refused> {
    match work_of(message, topics)? {
        trigger @ (Trigger::PolicyChanged { .. } | Trigger::OwnStatusReport) => Ok(trigger),
        Trigger::Events(_) | Trigger::Sweep => Err(Refused::Unreadable(Unreadable::NotAPolicyChange)),
    }
}

/// The events a delivery's text holds, and their JSON text: the text itself, or what a string in
/// it holds (JSON, or base64 of it, Azure's documentation), at most three strings deep. `depth`
/// is how many strings were opened to reach `text`.
fn events_in(text: Cow<'_, [u8]>, depth: u8) -> Result<(Vec<GridEvent>, Cow<'_, [u8]>), Unreadable> {
    if depth > 3 {
        return Err(Unreadable::TooDeep);
    }
    let delivery = match serde_json::from_slice::<Delivery>(text.trim_ascii()) {
        Ok(delivery) => delivery,
        // A string's content that is not JSON: base64 (no other encoding is used).
        Err(e) if depth > 0 && !e.is_data() => {
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(text.trim_ascii()).map_err(Unreadable::NotBase64)?;
            return events_in(bytes.into(), depth + 1);
        }
        Err(e) => return Err(Unreadable::NotADelivery(e.to_string())),
    };
    match delivery {
        Delivery::Text(inner) => events_in(inner.into_bytes().into(), depth + 1),
        Delivery::Events(events) if events.is_empty() => Err(Unreadable::NoEvent),
        Delivery::Events(events) => Ok((events, text)),
        Delivery::Event(event) => Ok((vec![event], text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn work(delivered: &Value) -> Result<Trigger, Refused> {
        work_of(delivered.to_string().as_bytes(), &Topics::default())
    }

    fn queue(message: &Value) -> Result<Trigger, Refused> {
        queue_work(message.to_string().as_bytes(), &Topics::default())
    }

    #[test]
    fn blob_created_routes_to_a_policy_recheck_except_our_report() {
        let blob = |subject: &str| json!({"eventType": BLOB_CREATED, "subject": subject, "data": {}});
        assert_eq!(
            work(&blob("/blobServices/default/containers/policy/blobs/layers/10.yaml")),
            Ok(Trigger::PolicyChanged { objects: vec!["layers/10.yaml".into()], at_ms: None })
        );
        assert_eq!(
            work(&json!([blob("/blobServices/default/containers/policy/blobs/layers/tagwarden-status.json")])),
            Ok(Trigger::OwnStatusReport)
        );
        // Events are read by `tagwarden_core::events` from the very text delivered.
        let write = br#" [{"eventType": "Microsoft.Resources.ResourceWriteSuccess"}] "#;
        assert_eq!(work_of(write, &Topics::default()), Ok(Trigger::Events(write.to_vec())));
        assert!(work(&json!([])).is_err());
        assert!(work(&json!("x")).is_err());
    }

    #[test]
    fn part_messages_in_every_encoding_and_nothing_else() {
        let part = json!({"tagwarden": "sweep", "part": "/subscriptions/aaaa"});
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let text = part.to_string();
        for message in [part.clone(), Value::String(text.clone()), Value::String(b64(&text))] {
            assert_eq!(part_in(message.to_string().as_bytes(), 0).as_deref(), Some("/subscriptions/aaaa"), "{message}");
        }
        let blob = json!({"eventType": BLOB_CREATED, "subject": "/blobServices/default/containers/p/blobs/10.yaml"});
        for other in [
            blob.clone(),
            Value::String(blob.to_string()),
            Value::String(b64(&blob.to_string())),
            json!({"tagwarden": "publish", "part": "/subscriptions/aaaa"}),
            json!("not a message"),
        ] {
            assert_eq!(part_in(other.to_string().as_bytes(), 0), None, "{other}");
        }
    }

    #[test]
    fn queue_messages_in_every_encoding() {
        let blob = json!({"eventType": BLOB_CREATED, "subject": "/blobServices/default/containers/p/blobs/10.yaml"});
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let text = blob.to_string();
        for message in [
            blob.clone(),
            Value::String(text.clone()),
            Value::String(Value::String(text.clone()).to_string()),
            Value::String(b64(&text)),
            Value::String(b64(&Value::String(text.clone()).to_string())),
        ] {
            let change = Trigger::PolicyChanged { objects: vec!["10.yaml".into()], at_ms: None };
            assert_eq!(queue(&message), Ok(change), "{message}");
        }
        let own = json!({"eventType": BLOB_CREATED, "subject": "/blobServices/default/containers/p/blobs/tagwarden-status.json"});
        assert_eq!(queue(&Value::String(b64(&own.to_string()))), Ok(Trigger::OwnStatusReport));
        let write = json!({"eventType": "Microsoft.Resources.ResourceWriteSuccess", "subject": "/subscriptions/s"});
        assert!(queue(&write).unwrap_err().to_string().contains("policy BlobCreated events only"));
        assert!(queue(&json!("not an event")).unwrap_err().to_string().contains("neither JSON nor base64"));
        assert!(queue(&json!(42)).is_err());
        // A string that decodes to itself forever is refused, not followed.
        let mut nested = Value::String(text);
        for _ in 0..4 {
            nested = Value::String(nested.to_string());
        }
        assert!(queue(&nested).unwrap_err().to_string().contains("too many times"));
    }

    proptest::proptest! {
        /// Hostile queue messages: any text, or base64 of any bytes, is a sweep, nothing or a
        /// reason; never a panic.
        #[test]
        fn queue_messages_never_panic(
            text in "\\PC{0,64}",
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            for message in [Value::String(text.clone()), Value::String(b64), json!({"eventType": text})] {
                if let Err(e) = queue(&message) {
                    proptest::prop_assert!(!e.to_string().is_empty());
                }
            }
        }
    }
}
