//! What the custom handler does with a request. Kept here, not in the binary, so that tests drive
//! the very same path in-process (and, through [`super::server`], over HTTP).
//!
//! Two ways in (Azure's documentation):
//! - **The Functions host** (`eventGridTrigger` / `timerTrigger` / `queueTrigger`):
//!   `POST /<function>` with `{"Data": {<binding>: <value>}, "Metadata": {…}}`, answered with
//!   `{"Outputs": {}, "Logs": [...], "ReturnValue": …}`. The binding names the function: `drift`'s
//!   `eventGridEvent` is one Event Grid event (sometimes as a JSON string), `sweep`'s `timer` the
//!   timer, `sweep-queue`'s `message` one queue message holding a policy `BlobCreated` event.
//! - **Event Grid directly** (a webhook subscription, or a local test): the body is the event array
//!   (Event Grid schema) or a CloudEvents batch. `aeg-event-type: SubscriptionValidation` is
//!   answered `200 {"validationResponse": code}`; CloudEvents' `OPTIONS` abuse-protection handshake
//!   is answered with `WebHook-Allowed-Origin`.
//!
//! A resource write event is reconciled. `Microsoft.Storage.BlobCreated` for the policy (not for
//! the function's own status report) only re-checks the policy and answers at once: Event Grid
//! waits 30 s for an answer, and a sweep (disk writes answered 202 are polled for up to 120 s)
//! can take far longer. The sweep runs from the storage queue the same events are routed to
//! (`sweep-queue`), where the host's `functionTimeout` bounds it and a failure is retried, then
//! parked in the poison queue. Any failure answers non-2xx, so Event Grid (or the queue) retries
//! and finally dead-letters. Metrics go to Azure Monitor once per invocation, best effort.
//! `GET /` answers the host's readiness probe.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine as _;
use futures_util::stream::{self, StreamExt};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::adapter::ArmTagger;
use super::arm::ArmClient;
use super::blob_store::blob_policy_store;
use super::config::Config;
use super::identity::ManagedIdentity;
use super::metrics::MetricsPublisher;
use super::server::{Request, Response};
use tagwarden_core::calls::CallCounter;
use tagwarden_core::events;
use tagwarden_core::reason::StopKind;
use tagwarden_core::report::Outcome;
use tagwarden_core::trigger::Trigger;
use tagwarden_engine::cloud_error::CloudError;
use tagwarden_engine::enforce::Engine;

pub const BLOB_CREATED: &str = "Microsoft.Storage.BlobCreated";

/// Everything an invocation needs, built once at start-up and shared by every invocation.
pub struct Handler {
    pub engine: Engine<ArmTagger>,
    /// The Event Grid topics whose deliveries are worked on.
    pub topics: Topics,
    pub metrics: Option<MetricsPublisher>,
    /// Every request the clients sent, by operation.
    pub calls: CallCounter,
}

/// How a trigger was delivered (the host protocol): now (Event Grid, the timer), or from the sweep
/// queue, where a policy change is swept rather than only re-checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    Now,
    Queued,
}

impl Handler {
    /// Build the clients from the configuration (no network yet).
    pub fn new(config: &Config) -> Result<Self, CloudError> {
        let http = super::http_client(config.http_timeout)?;
        let calls = CallCounter::default();
        let identity = Arc::new(ManagedIdentity::new(
            config.identity.endpoint.clone(),
            config.identity.header.clone(),
            config.identity.client_id.clone(),
            http.clone(),
            calls.clone(),
        ));
        let arm = ArmClient::new(http.clone(), config.arm_endpoint.clone(), identity.clone(), calls.clone())
            .with_audience(&config.arm_audience);
        let store = blob_policy_store(
            config.policy.clone(),
            config.policy_ttl,
            http.clone(),
            Some(identity.clone()),
            calls.clone(),
        )
        .with_clusters(config.clusters.clone());
        let adapter =
            ArmTagger { resource_graph: config.resource_graph, ..ArmTagger::new(arm, config.sweep_scopes.clone()) };
        let mut engine = Engine::new(adapter, store, config.own.clone());
        engine.set_concurrency(config.concurrency);
        engine.yield_to = config.yield_to.clone();
        engine.mode = config.mode;
        let metrics = config
            .metrics
            .as_ref()
            .map(|m| MetricsPublisher::new(http.clone(), &m.endpoint, &m.resource_id, identity.clone(), calls.clone()));
        let topics = Topics(config.event_topics.clone());
        if topics.0.is_none() {
            tracing::warn!(
                "TAGWARDEN_EVENT_TOPICS is unset: deliveries from every Event Grid topic are accepted; set it to the \
                 ARM IDs of the topics this function subscribes to (the Terraform module does)"
            );
        }
        Ok(Handler { engine, topics, metrics, calls })
    }

    /// Answer one HTTP request.
    pub async fn handle(&self, req: Request) -> Response {
        match req.method.as_str() {
            // The host's readiness probe (any response counts) and a health check.
            "GET" | "HEAD" => Response::text(200, "tagwarden-azure-function ready\n"),
            "OPTIONS" => abuse_protection(&req),
            "POST" => self.post(&req).await,
            other => Response::text(405, &format!("method {other} is not served; POST events, OPTIONS, GET /"))
                .with_header("allow", "GET, POST, OPTIONS"),
        }
    }

    async fn post(&self, req: &Request) -> Response {
        // The Functions host's invocation is an object with `Data`; anything else is Event Grid
        // delivering directly (an array, or one CloudEvent).
        if req.body.trim_ascii_start().starts_with(b"{") {
            match serde_json::from_slice::<HostInvocation>(&req.body) {
                Ok(HostInvocation { data: Some(bound), metadata }) => return self.invocation(bound, metadata).await,
                Ok(_) => {}
                Err(e) => return Response::json(400, &json!({"error": format!("not a request tagwarden reads: {e}")})),
            }
        }
        if req.header("aeg-event-type").is_some_and(|t| t.eq_ignore_ascii_case("SubscriptionValidation")) {
            return validation(&req.body);
        }
        let out = match work_of(&req.body, &self.topics) {
            Ok(trigger) => self.run(trigger, Delivered::Now).await,
            // Event Grid retries neither 400 nor 403: dead-lettered at once, where it can be seen.
            Err(e @ Refused::Unreadable(_)) => return Response::json(400, &json!({"error": e.to_string()})),
            Err(refused) => {
                let out = refused.into_outcome();
                let body = json!({"error": out.error});
                self.finish(out).await;
                return Response::json(403, &body);
            }
        };
        let failed = out.must_retry();
        let summary = summary(&out);
        self.finish(out).await;
        Response::json(if failed { 500 } else { 200 }, &summary)
    }

    /// The Functions host's `{Data, Metadata}` invocation of a function, by its trigger binding.
    async fn invocation(&self, binding: Binding<'_>, metadata: Metadata) -> Response {
        let work = match binding {
            Binding::Timer(_) => return self.timer().await,
            Binding::Message(message) => {
                if let Some(part) = part_in(message.get().as_bytes(), 0) {
                    tracing::info!(dequeue_count = metadata.dequeue_count, part, "sweep of one part from the queue");
                    return self.answer(self.sweep_part(&part).await, Vec::new()).await;
                }
                tracing::info!(dequeue_count = metadata.dequeue_count, "policy sweep from the queue");
                queue_work(message.get().as_bytes(), &self.topics).map(|t| (t, Delivered::Queued))
            }
            Binding::EventGridEvent(event) => {
                work_of(event.get().as_bytes(), &self.topics).map(|t| (t, Delivered::Now))
            }
        };
        let (out, logs) = match work {
            Ok((trigger, delivered)) => (self.run(trigger, delivered).await, Vec::new()),
            // A retry cannot help, but failing keeps it for the dead-letter container (or the
            // poison queue).
            Err(refused) => {
                let log = refused.to_string();
                (refused.into_outcome(), vec![log])
            }
        };
        self.answer(out, logs).await
    }

    /// The host's answer to an invocation that ran `out` (`logs` first): non-2xx when it must be
    /// retried.
    async fn answer(&self, out: Outcome, mut logs: Vec<String>) -> Response {
        let failed = out.must_retry();
        let summary = summary(&out);
        logs.extend(out.records.iter().map(|r| r.to_json_line()));
        logs.extend(out.fallbacks.iter().map(|why| format!("listing fell back: {why}")));
        if let Some(e) = &out.error {
            logs.push(format!("error: {e}"));
        }
        self.finish(out).await;
        let body = json!({"Outputs": {}, "Logs": logs, "ReturnValue": summary});
        Response::json(if failed { 500 } else { 200 }, &body)
    }

    /// The timer: a deployment whose scopes span one subscription is swept here and now; one
    /// that spans several is sent on as one sweep-queue message per subscription (the `parts`
    /// output binding, `sweep/function.json`), each swept by whichever instance takes it, one
    /// at a time per instance (`host.json`), retried and finally parked in the poison queue on
    /// its own. So no invocation sweeps more than one subscription's share, none comes near the
    /// host's `functionTimeout`, and the host's own scale-out, not a loop in here, sweeps a
    /// management group. Where the parts cannot be told (Get Descendants refused), the sweep runs
    /// whole, here, saying why.
    async fn timer(&self) -> Response {
        // The parts come from the scopes as named, at no call, but for a management group's
        // subscriptions (Get Descendants).
        let mut logs = Vec::new();
        match self.engine.adapter.parts().await {
            Ok(parts) if parts.len() > 1 => {
                tracing::info!(parts = parts.len(), "sweep sent on in parts, one queue message per subscription");
                let messages: Vec<String> =
                    parts.iter().map(|p| json!({"tagwarden": "sweep", "part": p}).to_string()).collect();
                let body = json!({
                    "Outputs": {PARTS_OUTPUT: messages},
                    "Logs": [format!("sweep sent on in {} parts: {}", parts.len(), parts.join(", "))],
                    "ReturnValue": {"parts": parts},
                });
                return Response::json(200, &body);
            }
            Ok(_) => {}
            Err(e) => {
                let why = format!("the sweep runs whole: its parts could not be told ({e})");
                tracing::warn!("{why}");
                logs.push(why);
            }
        }
        self.answer(self.engine.sweep(false, None, None).await, logs).await
    }

    /// One part's sweep (`/subscriptions/<id>`, a message [`Handler::timer`] sent): the engine
    /// narrowed to it; a part outside the deployment's scopes is refused (and, failing, parked in
    /// the poison queue).
    pub async fn sweep_part(&self, part: &str) -> Outcome {
        match self.engine.adapter.narrowed(part).await {
            Ok(adapter) => self.engine.part(adapter, part.to_ascii_lowercase()).sweep(false, None, None).await,
            Err(why) => {
                tracing::error!("{why}");
                Outcome { error: Some(StopKind::CannotSweep(why.to_string()).into()), ..Outcome::default() }
            }
        }
    }

    /// Do what a trigger asks for: a policy change delivered now is only re-checked (Event Grid
    /// wants its answer within 30 s); from the sweep queue, it is swept.
    pub async fn run(&self, trigger: Trigger, delivered: Delivered) -> Outcome {
        match trigger {
            Trigger::OwnStatusReport => {
                let mut out = Outcome::default();
                out.metrics.events_received = 1;
                out.metrics.events_ignored = 1;
                out
            }
            Trigger::Sweep => self.engine.sweep(false, None, None).await,
            // Delivered now, only re-checked (Event Grid wants its answer within 30 s); from the
            // queue, swept.
            Trigger::PolicyChanged { objects, at_ms } => {
                self.engine.policy_changed(&objects, at_ms, delivered == Delivered::Queued, None).await
            }
            Trigger::Events(raw) => match events::parse(&raw) {
                Ok(list) => {
                    // Side by side, in order; the per-resource lock keeps one write per resource.
                    // Indices, not references (rust-lang/rust#102211: `&T` closures and `Send`).
                    let outs = stream::iter(0..list.len())
                        .map(|i| self.engine.handle_event(&list[i], None))
                        .buffered(self.engine.concurrency())
                        .collect::<Vec<_>>()
                        .await;
                    let mut all = Outcome::default();
                    outs.into_iter().for_each(|out| all.absorb(out));
                    all
                }
                Err(e) => Outcome {
                    error: Some(StopKind::Unreadable(format!("not an event tagwarden reads: {e}")).into()),
                    ..Outcome::default()
                },
            },
        }
    }

    /// Log the records and send the metrics (best effort).
    async fn finish(&self, out: Outcome) {
        for r in &out.records {
            tracing::info!(record = %r.to_json_line(), "reconciled");
        }
        if let Some(e) = &out.error {
            tracing::error!(error = %e, "invocation failed; Event Grid will retry");
        }
        let Some(publisher) = &self.metrics else { return };
        if out.metrics.is_empty() {
            return;
        }
        let deployment = match self.engine.store.is_set() {
            true => tagwarden_core::report::ALL_CLUSTERS,
            false => out.infra_id.as_deref().unwrap_or("unknown"),
        };
        for (cluster, metrics) in tagwarden_core::report::by_cluster(&out.metrics, &out.records, deployment) {
            if let Err(e) = publisher.publish(&metrics, &cluster).await {
                tracing::warn!(error = %e, "metrics not sent (best effort; the invocation is unaffected)");
            }
        }
    }
}

/// The Functions host's invocation, `{"Data": {<binding>: <value>}, "Metadata": {…}}`
/// (Azure's documentation); `Data` is missing when Event Grid delivers one CloudEvent directly.
#[derive(Deserialize)]
struct HostInvocation<'a> {
    #[serde(rename = "Data", borrow)]
    data: Option<Binding<'a>>,
    #[serde(rename = "Metadata", default)]
    metadata: Metadata,
}

/// A function's one trigger binding, by the name its `function.json` gives it; a value is kept as
/// its JSON text, which `tagwarden_core::events` reads as it came.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum Binding<'a> {
    /// `drift`: one Event Grid event (resource writes, and the policy's `BlobCreated`).
    EventGridEvent(#[serde(borrow)] &'a RawValue),
    /// `sweep-queue`: a queue message holding a policy `BlobCreated` event.
    Message(#[serde(borrow)] &'a RawValue),
    /// `sweep`: the timer.
    Timer(IgnoredAny),
}

#[derive(Default, Deserialize)]
struct Metadata {
    #[serde(rename = "DequeueCount")]
    dequeue_count: Option<u64>,
}

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

/// The part a `sweep-queue` message of [`Handler::timer`] names
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

/// `200 {"validationResponse": code}` for Event Grid's synchronous handshake.
fn validation(body: &[u8]) -> Response {
    let code = events::parse(body).ok().and_then(|evs| evs.into_iter().find_map(|e| e.validation_code));
    match code {
        Some(code) => {
            tracing::info!("answered Event Grid's subscription validation");
            Response::json(200, &json!({"validationResponse": code}))
        }
        None => Response::json(
            400,
            &json!({"error": "aeg-event-type is SubscriptionValidation but the body holds no data.validationCode"}),
        ),
    }
}

/// CloudEvents 1.0 webhook abuse protection: allow the requesting origin.
fn abuse_protection(req: &Request) -> Response {
    let mut resp = Response::text(200, "").with_header("allow", "GET, POST, OPTIONS");
    if let Some(origin) = req.header("webhook-request-origin") {
        resp = resp.with_header("webhook-allowed-origin", origin).with_header("webhook-allowed-rate", "*");
    }
    resp
}

fn summary(out: &Outcome) -> Value {
    let by_status = out.records.iter().fold(serde_json::Map::new(), |mut m, r| {
        let n = m.get(r.status.as_str()).and_then(Value::as_u64).unwrap_or_default();
        m.insert(r.status.as_str().to_string(), json!(n + 1));
        m
    });
    json!({
        "events": out.metrics.events_received,
        "ignored": out.metrics.events_ignored,
        "resources": out.records.len(),
        "failed": out.failed(),
        "by_status": by_status,
        "error": out.error,
        "listing_fallbacks": out.fallbacks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn handshakes() {
        let body = br#"[{"id":"1","topic":"/subscriptions/s","subject":"","data":{"validationCode":"512d38b6","validationUrl":"https://x"},"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","eventTime":"2018-01-25T22:12:19Z","metadataVersion":"1","dataVersion":"1"}]"#;
        let r = validation(body);
        assert_eq!(r.status, 200);
        assert_eq!(serde_json::from_slice::<Value>(&r.body).ok(), Some(json!({"validationResponse": "512d38b6"})));
        assert_eq!(validation(b"[]").status, 400);
        let req = Request {
            method: "OPTIONS".into(),
            headers: vec![("webhook-request-origin".into(), "eventgrid.azure.net".into())],
            ..Request::default()
        };
        let r = abuse_protection(&req);
        assert!(r.headers.contains(&("webhook-allowed-origin".to_string(), "eventgrid.azure.net".to_string())));
    }
}
