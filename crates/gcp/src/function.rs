//! What the Cloud Run service does with a request. Kept here, not in the binary, so that tests
//! drive the very same path in-process and over HTTP.
//!
//! Why Cloud Run with a container, not Cloud Run functions: functions' runtimes are language
//! runtimes (Node.js, Python, Go, Java, .NET, Ruby, PHP) with no custom one for a native binary,
//! while a Cloud Run service runs any container that listens on `PORT` (container runtime
//! contract); the image holds the one static binary.
//!
//! One way in: a Pub/Sub push subscription (infra/gcp `events.tf`) POSTs each message as
//! `{"message": {"data": base64, "attributes": {…}, "messageId", "publishTime"}, "subscription"}`
//! (Pub/Sub, "Push subscriptions": "a success response is 102, 200, 201, 202 or 204"; any other
//! is a failed delivery, redelivered by the subscription's retry policy with exponential backoff,
//! and after `max_delivery_attempts` sent to the dead-letter topic). Pub/Sub delivers at least
//! once and, without ordering keys, in no order: an event is only a hint, the labels are always
//! read again, so a repeat or a reorder changes nothing.
//! - attribute `tagwarden = sweep` (the Cloud Scheduler job): a sweep of every owned resource;
//! - attribute `eventType = OBJECT_FINALIZE` (a Cloud Storage notification of the policy bucket:
//!   `bucketId`, `objectId`): the policy changed, so the clusters it covers are swept;
//! - anything else: a Cloud Audit Logs entry from the log sink (`tagwarden_core::events::cloud_audit`).
//!
//! A permanent failure is answered 2xx (a retry would end the same; it is in the logs and the
//! status report); a retryable one non-2xx, so nothing is dropped.

use serde::Deserialize;
use serde_json::json;

use tagwarden_core::calls::CallCounter;
use tagwarden_core::events::cloud_audit;
use tagwarden_core::report::Outcome;
use tagwarden_engine::enforce::Engine;
use tagwarden_engine::policy_store::PolicyStore;
use tagwarden_engine::server::{Request, Response};

use crate::adapter::GcpTagger;
use crate::clients::{Clients, ClientsError};
use crate::config::Config;
use crate::gcs::GcsSource;
use crate::metrics::Publisher;

/// Everything an invocation needs, built once at start-up.
pub struct Handler {
    pub engine: Engine<GcpTagger>,
    pub calls: CallCounter,
    /// Cloud Monitoring's custom metrics, when `TAGWARDEN_METRICS_PROJECT` is set.
    pub metrics: Option<Publisher>,
}

/// What a push delivery asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    Sweep,
    PolicyChanged { object: String },
    AuditLog,
}

#[derive(Deserialize, Default)]
struct Envelope {
    #[serde(default)]
    message: Message,
}

#[derive(Deserialize, Default)]
struct Message {
    #[serde(default)]
    attributes: std::collections::BTreeMap<String, String>,
}

/// What a push body asks for, by its message's attributes (a body that is no envelope is read as
/// an audit-log entry, which says what is wrong with it).
pub fn work_of(body: &[u8]) -> Work {
    let attributes = serde_json::from_slice::<Envelope>(body).map(|e| e.message.attributes).unwrap_or_default();
    if attributes.get("tagwarden").is_some_and(|v| v == "sweep") {
        Work::Sweep
    } else if attributes.get("eventType").is_some_and(|v| v == "OBJECT_FINALIZE") {
        Work::PolicyChanged { object: attributes.get("objectId").cloned().unwrap_or_default() }
    } else {
        Work::AuditLog
    }
}

impl Handler {
    /// Build the clients from the configuration (credentials are loaded, no call is made).
    pub async fn new(config: &Config) -> Result<Self, ClientsError> {
        let calls = CallCounter::default();
        let clients = std::sync::Arc::new(Clients::new(config.endpoints.clone(), config.anonymous).await?);
        let source =
            GcsSource::new(config.policy.clone(), config.policy_endpoint.clone(), clients.clone(), calls.clone());
        let store = PolicyStore::new(source, config.policy_ttl).with_clusters(config.clusters.clone());
        let tagger = GcpTagger::new(clients, config.sweep_scopes.clone(), calls.clone());
        let mut engine = Engine::new(tagger, store, config.own.clone());
        engine.set_concurrency(config.concurrency);
        engine.yield_to = config.yield_to.clone();
        engine.mode = config.mode;
        let metrics = match &config.metrics {
            Some(m) => Some(Publisher::new(m, config.anonymous, calls.clone()).await?),
            None => None,
        };
        Ok(Handler { engine, calls, metrics })
    }

    /// Answer one HTTP request.
    pub async fn handle(&self, req: Request) -> Response {
        match req.method.as_str() {
            "GET" | "HEAD" => Response::text(200, "tagwarden-gcp-function ready\n"),
            "POST" => self.post(&req.body).await,
            other => Response::text(405, &format!("method {other} is not served; Pub/Sub pushes with POST"))
                .with_header("allow", "GET, POST"),
        }
    }

    async fn post(&self, body: &[u8]) -> Response {
        let out = match work_of(body) {
            Work::Sweep => self.engine.sweep(false, None, None).await,
            Work::PolicyChanged { object } => self.engine.policy_changed(&[object], None, true, None).await,
            Work::AuditLog => match cloud_audit::parse_push(body) {
                Ok(event) => self.engine.handle_event(&event, None).await,
                Err(e) => {
                    // Unreadable: a retry cannot help; answered 2xx so it is not redelivered for
                    // a week, and logged.
                    tracing::error!(error = %e, "not a Pub/Sub push of an audit-log entry tagwarden reads");
                    return Response::json(200, &json!({"error": format!("not an event tagwarden reads: {e}")}));
                }
            },
        };
        let retry = out.must_retry();
        let summary = out.summary();
        self.finish(out).await;
        Response::json(if retry { 500 } else { 200 }, &summary)
    }

    /// Log the records, and what stopped the invocation; write the metrics (best effort: a
    /// failure is logged, the invocation's answer is unaffected).
    async fn finish(&self, mut out: Outcome) {
        for r in &out.records {
            println!("{}", log_line(r));
        }
        if let Some(e) = &out.error {
            tracing::error!(error = %e, "invocation failed; Pub/Sub redelivers it");
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
        if let Err(e) = publisher.publish(&out.metrics, &out.records, deployment).await {
            tracing::warn!(error = %e, "metrics not written (best effort; the invocation is unaffected)");
        }
    }
}

/// A record as one structured Cloud Logging entry: the record's own JSON fields (so a query reads
/// `jsonPayload.record="reconcile"`, `jsonPayload.status="failed"`) and `severity`, which Cloud
/// Logging takes from a JSON line on stdout ("Structured logging": special JSON fields).
fn log_line(r: &tagwarden_core::report::Record) -> String {
    let mut line = serde_json::to_value(r).unwrap_or_default();
    let severity = if r.error.is_some() { "ERROR" } else { "INFO" };
    if let Some(fields) = line.as_object_mut() {
        fields.insert("severity".into(), json!(severity));
    }
    line.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_structured_entry_with_its_severity() {
        use tagwarden_core::report::{Record, Status};
        let ok = Record::sample(tagwarden_core::cloud::Cloud::Gcp, "compute.googleapis.com/Instance", Status::Applied);
        let line: serde_json::Value = serde_json::from_str(&log_line(&ok)).expect("JSON");
        assert_eq!(
            (line["record"].as_str(), line["status"].as_str(), line["severity"].as_str()),
            (Some("reconcile"), Some("applied"), Some("INFO"))
        );
        let failed = Record { error: Some("compute:SetLabels: HTTP 403".into()), ..ok };
        assert_eq!(serde_json::from_str::<serde_json::Value>(&log_line(&failed)).expect("JSON")["severity"], "ERROR");
    }

    #[test]
    fn push_attributes_decide_the_work() {
        let sweep = br#"{"message":{"data":"eyJ0YWd3YXJkZW4iOiJzd2VlcCJ9","attributes":{"tagwarden":"sweep"},"messageId":"1"},"subscription":"projects/p/subscriptions/s"}"#;
        assert_eq!(work_of(sweep), Work::Sweep);
        let gcs = br#"{"message":{"data":"","attributes":{"eventType":"OBJECT_FINALIZE","bucketId":"b","objectId":"clusters/c-1/policy.yaml"}}}"#;
        assert_eq!(work_of(gcs), Work::PolicyChanged { object: "clusters/c-1/policy.yaml".into() });
        assert_eq!(work_of(br#"{"message":{"data":"e30="}}"#), Work::AuditLog);
        assert_eq!(work_of(b"not json"), Work::AuditLog);
    }
}
