//! What the Lambda does with a payload. Kept here, not in the binary, so that tests drive the very
//! same path in-process.
//!
//! - An SQS batch of EventBridge events: handled together (`crate::enforce::batch`: every resource
//!   read and written once, identical deltas in shared calls); the messages whose events failed
//!   are returned as `batchItemFailures`, so SQS retries only those and finally dead-letters them
//!   with their original body.
//! - One EventBridge event (direct invoke): a failure is an error, so EventBridge retries.
//! - A sweep: `{"tagwarden": "sweep"}` from the schedule, an S3 notification or EventBridge
//!   `Object Created` / `Parameter Store Change` for the policy (re-read at once).
//!
//! Deliberately not here: the Runtime API (`functions/aws-lambda`, through `lambda_runtime`), and
//! configuration (`super::config`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::s3::S3Event;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use serde_json::{json, Value};

use super::tags::Tagger;
use crate::cloud::Cloud;
use crate::enforce::Engine;
use crate::events;
use crate::policy::store::{Layout, PolicySource};
use crate::report::Outcome;
use crate::report::{by_cluster, Metrics, ALL_CLUSTERS};
use crate::trigger::Trigger;

/// The result of one invocation: the response, the lines to print (outcome records, then EMF
/// metrics), and an error when the invocation must fail.
#[derive(Debug, Default)]
pub struct Invocation {
    pub response: Value,
    pub lines: Vec<String>,
    pub error: Option<String>,
}

/// How the Lambda was invoked: an SQS batch of events (its host protocol: each message succeeds
/// or is handed back), or one payload asking for one thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invoked {
    SqsBatch,
    Trigger(Trigger),
}

pub fn invoked_by(payload: &Value) -> Invoked {
    let first_source = payload.pointer("/Records/0/eventSource").and_then(Value::as_str);
    let trigger = match first_source {
        Some("aws:sqs") => return Invoked::SqsBatch,
        // An S3 notification: the keys written beside (or as) the policy.
        Some("aws:s3") => {
            let notification: S3Event = serde_json::from_value(payload.clone()).unwrap_or_default();
            Trigger::written(notification.records.into_iter().filter_map(|r| r.s3.object.key).collect())
        }
        _ if payload.get("tagwarden").and_then(Value::as_str) == Some("sweep") => Trigger::Sweep,
        _ => match payload.get("detail-type").and_then(Value::as_str) {
            Some("Scheduled Event") => Trigger::Sweep,
            // EventBridge's S3 `Object Created`, and SSM's `Parameter Store Change` (its name).
            Some("Object Created" | "Parameter Store Change") => Trigger::written(
                ["/detail/object/key", "/detail/name"]
                    .iter()
                    .filter_map(|p| payload.pointer(p)?.as_str())
                    .map(str::to_owned)
                    .collect(),
            ),
            _ => Trigger::Events(serde_json::to_vec(payload).unwrap_or_default()),
        },
    };
    Invoked::Trigger(trigger)
}

pub async fn handle(engine: &Engine<Tagger>, payload: &Value) -> Invocation {
    handle_until(engine, payload, None).await
}

/// How long before the invocation's deadline no new work starts: enough for the work already
/// started (one SDK operation is bounded at 30 s) to finish and its results to be returned —
/// at most this, and at most a fifth of the invocation's time, so a short timeout still works.
pub const DEADLINE_RESERVE: Duration = Duration::from_secs(35);

/// [`handle`] for an invocation that must answer by `deadline`: no new work starts after
/// `deadline - DEADLINE_RESERVE`, and what is left is handed back rather than timed out — unstarted
/// SQS messages as batch item failures, an event's unstarted resources as a failure of that event,
/// a sweep's unstarted writes as deferred (the next sweep re-plans them; finished writes are not
/// redone, they re-read as unchanged).
pub async fn handle_until(engine: &Engine<Tagger>, payload: &Value, deadline: Option<Instant>) -> Invocation {
    let stop_at = deadline.map(|d| {
        let reserve = DEADLINE_RESERVE.min(d.saturating_duration_since(Instant::now()) / 5);
        d.checked_sub(reserve).unwrap_or(d)
    });
    let past = || stop_at.is_some_and(|t| Instant::now() >= t);
    let calls_before = engine.adapter.clients.calls.total();
    let mut inv = Invocation { response: Value::Null, ..Invocation::default() };
    let mut metrics = Metrics::default();
    let mut records = Vec::new();
    let mut infra_id = None;
    let mut absorb = |inv: &mut Invocation, out: Outcome| {
        inv.lines.extend(out.records.iter().map(|r| r.to_json_line()));
        metrics.merge(out.metrics);
        records.extend(out.records);
        infra_id = infra_id.take().or(out.infra_id);
        out.error
    };
    let trigger = match invoked_by(payload) {
        Invoked::Trigger(trigger) => Some(trigger),
        Invoked::SqsBatch => {
            let batch: SqsEvent = match serde_json::from_value(payload.clone()) {
                Ok(batch) => batch,
                Err(e) => {
                    // No message can be named as failed: the whole batch comes back.
                    inv.error = Some(format!("not an SQS batch: {e}"));
                    return inv;
                }
            };
            // Every event of the batch at once: each resource read and written once, in shared
            // calls (`crate::enforce::batch`). A message that is not an event, or that arrives
            // past the deadline, is handed back unstarted.
            let mut handled: Vec<(String, Option<Outcome>)> = Vec::with_capacity(batch.records.len());
            let (mut events, mut at) = (Vec::new(), Vec::new());
            for message in &batch.records {
                let id = message.message_id.clone().unwrap_or_default();
                let body = message.body.as_deref().unwrap_or_default();
                if past() {
                    tracing::warn!(message_id = id, "deadline near: message handed back unstarted");
                } else {
                    match events::parse_one(body.as_bytes()) {
                        Ok(event) => {
                            at.push(handled.len());
                            events.push(event);
                        }
                        // Not an event: retrying will not help, but the dead-letter queue keeps it.
                        Err(e) => tracing::error!(message_id = id, error = %e, "message is not an event"),
                    }
                }
                handled.push((id, None));
            }
            let outcomes = engine.handle_events(&events, stop_at).await;
            for (i, out) in at.into_iter().zip(outcomes) {
                handled[i].1 = Some(out);
            }
            let mut response = SqsBatchResponse::default();
            for (id, out) in handled {
                let failed = match out {
                    Some(out) => {
                        let retry = out.must_retry();
                        if let Some(e) = absorb(&mut inv, out) {
                            tracing::error!(message_id = id, error = e, "event not reconciled");
                        }
                        retry
                    }
                    None => true,
                };
                if failed {
                    let mut failure = BatchItemFailure::default();
                    failure.item_identifier = id;
                    response.batch_item_failures.push(failure);
                }
            }
            inv.response = serde_json::to_value(&response).unwrap_or_default();
            None
        }
    };
    match trigger {
        None => {}
        Some(Trigger::Events(raw)) => match events::parse_one(&raw) {
            Ok(event) => {
                let out = engine.handle_event(&event, stop_at).await;
                let failed = out.failed();
                let retry = out.must_retry();
                let error = absorb(&mut inv, out);
                if retry {
                    inv.error = Some(error.unwrap_or_else(|| format!("{failed} resource(s) failed")));
                }
            }
            Err(e) => inv.error = Some(format!("not an event tagwarden reads: {e}")),
        },
        Some(Trigger::OwnStatusReport) => inv.response = json!({"ignored": "own status report"}),
        Some(trigger @ (Trigger::Sweep | Trigger::PolicyChanged(_))) => {
            let set_prefix = match engine.store.source.layout() {
                Layout::Set(prefix) => Some(prefix),
                _ => None,
            };
            let only = trigger.changed_clusters(set_prefix.as_deref());
            let force = matches!(trigger, Trigger::PolicyChanged(_));
            // Boxed: the sweep's future is deep, and every caller's type would nest it.
            let out = Box::pin(engine.sweep(force, only.as_deref(), stop_at)).await;
            let summary = json!({"sweep": out.records.len(), "failed": out.failed()});
            let retry = out.must_retry();
            let error = absorb(&mut inv, out);
            if retry {
                inv.error = Some(error.unwrap_or_else(|| format!("sweep: {summary}")));
            }
            inv.response = summary;
        }
    }
    if !metrics.is_empty() {
        metrics.api_calls = engine.adapter.clients.calls.total().saturating_sub(calls_before);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
        let deployment = match engine.store.is_set() {
            true => ALL_CLUSTERS,
            false => infra_id.as_deref().unwrap_or("unknown"),
        };
        for (cluster, m) in by_cluster(&metrics, &records, deployment) {
            inv.lines.extend(m.emf_lines(Cloud::Aws, &cluster, now));
        }
    }
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers() {
        assert_eq!(invoked_by(&json!({"Records": [{"eventSource": "aws:sqs", "body": "{}"}]})), Invoked::SqsBatch);
        // The S3 event message structure (S3 user guide, "Event message structure", version 2.1).
        let s3 = |key: &str| {
            json!({"Records": [{
                "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
                "eventTime": "2026-11-24T12:00:00.000Z", "eventName": "ObjectCreated:Put",
                "userIdentity": {"principalId": "AWS:AROAEXAMPLE:tagwarden"},
                "requestParameters": {"sourceIPAddress": "203.0.113.10"},
                "responseElements": {"x-amz-request-id": "C3D13FE58DE4C810", "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"},
                "s3": {"s3SchemaVersion": "1.0", "configurationId": "policy",
                       "bucket": {"name": "policy", "ownerIdentity": {"principalId": "A3NL1KOZZKExample"}, "arn": "arn:aws:s3:::policy"},
                       "object": {"key": key, "size": 1024, "eTag": "d41d8cd98f00b204e9800998ecf8427e", "sequencer": "0055AED6DCD90281E5"}}
            }]})
        };
        let trigger = |payload: &Value| match invoked_by(payload) {
            Invoked::Trigger(t) => t,
            Invoked::SqsBatch => panic!("not a batch: {payload}"),
        };
        let changed = |names: &[&str]| Trigger::PolicyChanged(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(trigger(&s3("cluster/10-infra.yaml")), changed(&["cluster/10-infra.yaml"]));
        assert_eq!(trigger(&s3("cluster/tagwarden-status.json")), Trigger::OwnStatusReport);
        let ssm = json!({"detail-type": "Parameter Store Change", "detail": {"name": "/tw/clusters/c-4", "operation": "Update"}});
        assert_eq!(trigger(&ssm), changed(&["/tw/clusters/c-4"]));
        let created =
            json!({"detail-type": "Object Created", "detail": {"object": {"key": "p/tagwarden-status.json"}}});
        assert_eq!(trigger(&created), Trigger::OwnStatusReport);
        assert_eq!(trigger(&json!({"tagwarden": "sweep"})), Trigger::Sweep);
        assert_eq!(trigger(&json!({"detail-type": "Scheduled Event", "source": "aws.events"})), Trigger::Sweep);
        let call = json!({"detail-type": "AWS API Call via CloudTrail"});
        assert_eq!(trigger(&call), Trigger::Events(call.to_string().into_bytes()));
    }
}
