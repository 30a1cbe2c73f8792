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

use std::sync::Arc;

use futures_util::stream::{self, StreamExt};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

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

mod delivery;

pub use delivery::{part_in, queue_work, work_of, Delivery, GridEvent, Refused, Topics, Unreadable, PARTS_OUTPUT};

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
        let summary = out.summary();
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
        let summary = out.summary();
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
    async fn finish(&self, mut out: Outcome) {
        for r in &out.records {
            tracing::info!(record = %r.to_json_line(), "reconciled");
        }
        if let Some(e) = &out.error {
            tracing::error!(error = %e, "invocation failed; Event Grid will retry");
            out.metrics.stopped(e.kind());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes() {
        let body = br#"[{"id":"1","topic":"/subscriptions/s","subject":"","data":{"validationCode":"512d38b6","validationUrl":"https://x"},"eventType":"Microsoft.EventGrid.SubscriptionValidationEvent","eventTime":"2018-01-25T22:12:19Z","metadataVersion":"1","dataVersion":"1"}]"#;
        let r = validation(body);
        assert_eq!(r.status, 200);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&r.body).ok(),
            Some(json!({"validationResponse": "512d38b6"}))
        );
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
