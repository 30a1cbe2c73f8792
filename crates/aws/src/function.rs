//! What the Lambda does with a payload, read once as its [`Payload`]. Kept here, not in the
//! binary, so that tests drive the very same path in-process.
//!
//! - An SQS batch of EventBridge events: handled together (`tagwarden_engine::enforce::batch`: every resource
//!   read and written once, identical deltas in shared calls); the messages whose events failed
//!   are returned as `batchItemFailures`, so SQS retries only those and finally dead-letters them
//!   with their original body.
//! - One EventBridge event (direct invoke): a failure is an error, so EventBridge retries.
//! - A sweep: `{"tagwarden": "sweep"}` from the schedule, an S3 notification or EventBridge
//!   `Object Created` / `Parameter Store Change` for the policy (re-read at once).
//!
//! Deliberately not here: the Runtime API (`functions/aws-lambda`, through `lambda_runtime`), and
//! configuration (`super::config`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsBatchResponse;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::organization::{member_metric_lines, Organization, ShardMessage, ShardReport};
use crate::Tagger;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::events;
use tagwarden_core::report::Outcome;
use tagwarden_core::report::{by_cluster, Metrics, ALL_CLUSTERS};
use tagwarden_core::trigger::Trigger;
use tagwarden_engine::enforce::Engine;

/// The result of one invocation: the response, the lines to print (outcome records, then EMF
/// metrics), and an error when the invocation must fail.
#[derive(Debug, Default)]
pub struct Invocation {
    pub response: Value,
    pub lines: Vec<String>,
    pub error: Option<String>,
}

/// Every payload the Lambda is invoked with, each matched by the value that makes it that shape
/// (`eventSource`, `tagwarden`, `detail-type`), never by defaulted fields (as `aws_lambda_events`'
/// structs would be). A bare event's text goes on to `tagwarden_core::events` as it came ([`handle_until`]):
/// serde cannot hand a `RawValue` through an untagged enum.
#[derive(Debug, Deserialize)]
#[serde(
    untagged,
    rename_all_fields = "PascalCase",
    expecting = "expected an SQS batch, an S3 notification, {\"tagwarden\": \"sweep\"} or an EventBridge event \
                 (a detail-type; Object Created with detail.object.key, Parameter Store Change with detail.name)"
)]
pub enum Payload {
    /// An SQS batch of EventBridge events, one in each message's body.
    SqsBatch { records: Vec<SqsMessage> },
    /// An S3 notification: the keys written beside (or as) the policy.
    S3Notification { records: Vec<S3Record> },
    /// The scheduled sweep's own input.
    Sweep(SweepRequest),
    /// One EventBridge event.
    EventBridge(EventBridge),
}

/// An SQS message (`eventSource: aws:sqs`); its body holds one EventBridge event.
#[derive(Debug, Deserialize)]
#[serde(tag = "eventSource")]
pub enum SqsMessage {
    #[serde(rename = "aws:sqs", rename_all = "camelCase")]
    Sqs { message_id: String, body: String },
}

/// An S3 notification's record (`eventSource: aws:s3`).
#[derive(Debug, Deserialize)]
#[serde(tag = "eventSource")]
pub enum S3Record {
    #[serde(rename = "aws:s3")]
    S3 {
        s3: Written,
        #[serde(rename = "eventTime")]
        event_time: Option<String>,
    },
}

/// `{"tagwarden": "sweep"}`.
#[derive(Debug, Deserialize)]
#[serde(tag = "tagwarden")]
pub enum SweepRequest {
    #[serde(rename = "sweep")]
    Sweep,
}

/// An EventBridge event, by its `detail-type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "detail-type")]
pub enum EventBridge {
    /// The schedule's rule: a sweep.
    #[serde(rename = "Scheduled Event")]
    Scheduled,
    /// S3 wrote an object of the policy's bucket.
    #[serde(rename = "Object Created")]
    ObjectCreated { detail: Written, time: Option<String> },
    /// SSM changed a parameter of the policy (its `name`).
    #[serde(rename = "Parameter Store Change")]
    ParameterStoreChange { detail: Parameter, time: Option<String> },
    /// Any other: read by `tagwarden_core::events` (a CloudTrail call, a tag change, or one it ignores).
    #[serde(other)]
    Event,
}

/// An object written: `{"object": {"key": …}}` (an S3 record's `s3`, `Object Created`'s detail).
#[derive(Debug, Deserialize)]
pub struct Written {
    pub object: Key,
}

#[derive(Debug, Deserialize)]
pub struct Key {
    pub key: String,
}

#[derive(Debug, Deserialize)]
pub struct Parameter {
    pub name: String,
}

/// Handle one payload, the invocation's JSON text.
pub async fn handle(engine: &Engine<Tagger>, payload: String) -> Invocation {
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
pub async fn handle_until(engine: &Engine<Tagger>, payload: String, deadline: Option<Instant>) -> Invocation {
    let stop_at = stop_at(deadline);
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
        out.error.map(|e| e.to_string())
    };
    let trigger = match serde_json::from_str::<Payload>(&payload) {
        Err(e) => {
            inv.error = Some(format!("not a payload tagwarden reads: {e}"));
            return inv;
        }
        Ok(Payload::S3Notification { records: written }) => {
            let at: Vec<Option<&str>> =
                written.iter().map(|S3Record::S3 { event_time, .. }| event_time.as_deref()).collect();
            Some(Trigger::written(written.iter().map(|S3Record::S3 { s3, .. }| s3.object.key.clone()).collect(), &at))
        }
        Ok(Payload::Sweep(_)) => Some(Trigger::Sweep),
        Ok(Payload::EventBridge(event)) => Some(match event {
            EventBridge::Scheduled => Trigger::Sweep,
            EventBridge::ObjectCreated { detail, time } => {
                Trigger::written(vec![detail.object.key], &[time.as_deref()])
            }
            EventBridge::ParameterStoreChange { detail, time } => {
                Trigger::written(vec![detail.name], &[time.as_deref()])
            }
            // Read by `tagwarden_core::events` from the text as it came.
            EventBridge::Event => Trigger::Events(payload.into_bytes()),
        }),
        Ok(Payload::SqsBatch { records: messages }) => {
            // Every event of the batch at once: each resource read and written once, in shared
            // calls (`tagwarden_engine::enforce::batch`). A message that is not an event, or that arrives
            // past the deadline, is handed back unstarted.
            let mut handled: Vec<(String, Option<Outcome>)> = Vec::with_capacity(messages.len());
            let (mut events, mut at) = (Vec::new(), Vec::new());
            for SqsMessage::Sqs { message_id: id, body } in messages {
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
                    response.add_failure(id);
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
        Some(trigger @ (Trigger::Sweep | Trigger::PolicyChanged { .. })) => {
            // Boxed: the sweep's future is deep, and every caller's type would nest it.
            let out = match trigger {
                Trigger::PolicyChanged { objects, at_ms } => {
                    Box::pin(engine.policy_changed(&objects, at_ms, true, stop_at)).await
                }
                _ => Box::pin(engine.sweep(false, None, stop_at)).await,
            };
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

/// When no new work starts: [`DEADLINE_RESERVE`] before `deadline`, at most a fifth of what is left.
fn stop_at(deadline: Option<Instant>) -> Option<Instant> {
    deadline.map(|d| {
        let reserve = DEADLINE_RESERVE.min(d.saturating_duration_since(Instant::now()) / 5);
        d.checked_sub(reserve).unwrap_or(d)
    })
}

/// [`handle_until`] for an organization's hub (`crate::organization`):
/// - the schedule (or `{"tagwarden": "sweep"}`) sends one shard per member account and region to
///   the shard queue, account by account as each one's are computed, in a rotating order, until
///   the deadline ([`Organization::schedule`]), or with no queue sweeps them here, in turn; the
///   accounts over the cap and those not reached are in the response and the metrics;
/// - a shard (`{"tagwarden": "sweep", "account": …, "region": …}`, directly or as an SQS message)
///   is swept in that account and region; failing, its message is handed back, so SQS redelivers
///   it and finally dead-letters it; refused (the member role, or the account over the cap), it
///   is a failed shard in the metrics (`MemberRefused`) and the response, not handed back: a
///   retry cannot help, and on the FIFO queue it would hold its account-region's group;
/// - a policy written under an account's folder sends (or sweeps) that account's shards for the
///   clusters written;
/// - events, alone or in an SQS batch, each go to their account and region's engine.
pub async fn handle_organization_until(org: &Organization, payload: String, deadline: Option<Instant>) -> Invocation {
    let stop_at = stop_at(deadline);
    let calls_before = org.calls.total();
    let mut inv = Invocation { response: Value::Null, ..Invocation::default() };
    let mut all = Outcome::default();
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    if let Some(shard) = ShardMessage::parse(&payload) {
        let (out, report) = org.sweep_shard(&shard, stop_at).await;
        if out.must_retry() {
            inv.error = Some(
                out.error
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_else(|| format!("shard {}/{}: {} failed", shard.account, shard.region, report.failed)),
            );
        }
        count_refused(&mut refused, &report);
        inv.response = serde_json::to_value(&report).unwrap_or_default();
        all.absorb(out);
        return finish_org(inv, all, org.calls.total() - calls_before, &refused, None);
    }
    let mut run = None;
    let shards = match serde_json::from_str::<Payload>(&payload) {
        Err(e) => {
            inv.error = Some(format!("not a payload tagwarden reads: {e}"));
            return inv;
        }
        Ok(Payload::Sweep(_) | Payload::EventBridge(EventBridge::Scheduled)) => {
            let scheduled = Box::pin(org.schedule(stop_at, true)).await;
            if org.config.shard_queue.is_some() {
                // Sent account by account as they were computed.
                inv.response = json!({
                    "shards": scheduled.sent,
                    "accounts": scheduled.reached.len(),
                    "over_cap": scheduled.over_cap,
                    "unreached": scheduled.unreached,
                    "stale": scheduled.stale,
                });
                if let Some(e) = &scheduled.error {
                    inv.error = Some(format!("shards not sent: {e}"));
                }
                return finish_org(inv, all, org.calls.total() - calls_before, &refused, Some(&scheduled));
            }
            let shards = scheduled.shards.clone();
            run = Some(scheduled);
            shards
        }
        Ok(Payload::S3Notification { records }) => {
            let keys: Vec<String> = records.into_iter().map(|S3Record::S3 { s3, .. }| s3.object.key).collect();
            org.config.shards_for(&keys)
        }
        Ok(Payload::EventBridge(EventBridge::ObjectCreated { detail, .. })) => {
            org.config.shards_for(&[detail.object.key])
        }
        Ok(Payload::EventBridge(EventBridge::ParameterStoreChange { detail, .. })) => {
            inv.response =
                json!({"ignored": format!("parameter {}: an organization's policies are in S3", detail.name)});
            return inv;
        }
        Ok(Payload::EventBridge(EventBridge::Event)) => {
            match events::parse_one(payload.as_bytes()) {
                Ok(event) => {
                    let out = org.handle_events(std::slice::from_ref(&event), stop_at).await.pop().unwrap_or_default();
                    if out.must_retry() {
                        inv.error = Some(
                            out.error
                                .as_ref()
                                .map_or_else(|| format!("{} resource(s) failed", out.failed()), ToString::to_string),
                        );
                    }
                    all.absorb(out);
                }
                Err(e) => inv.error = Some(format!("not an event tagwarden reads: {e}")),
            }
            return finish_org(inv, all, org.calls.total() - calls_before, &refused, None);
        }
        Ok(Payload::SqsBatch { records: messages }) => {
            let mut response = SqsBatchResponse::default();
            let (mut events, mut ids) = (Vec::new(), Vec::new());
            for SqsMessage::Sqs { message_id: id, body } in messages {
                if stop_at.is_some_and(|t| Instant::now() >= t) {
                    response.add_failure(id);
                } else if let Some(shard) = ShardMessage::parse(&body) {
                    let (out, report) = org.sweep_shard(&shard, stop_at).await;
                    count_refused(&mut refused, &report);
                    if out.must_retry() {
                        tracing::error!(
                            message_id = id,
                            account = shard.account,
                            region = shard.region,
                            failed = report.failed,
                            error = out.error.as_deref(),
                            "shard not swept whole; SQS redelivers it"
                        );
                        response.add_failure(id);
                    }
                    all.absorb(out);
                } else {
                    match events::parse_one(body.as_bytes()) {
                        Ok(event) => {
                            events.push(event);
                            ids.push(id);
                        }
                        Err(e) => {
                            tracing::error!(message_id = id, error = %e, "message is not an event");
                            response.add_failure(id);
                        }
                    }
                }
            }
            for (id, out) in ids.into_iter().zip(org.handle_events(&events, stop_at).await) {
                if out.must_retry() {
                    response.add_failure(id);
                }
                all.absorb(out);
            }
            inv.response = serde_json::to_value(&response).unwrap_or_default();
            return finish_org(inv, all, org.calls.total() - calls_before, &refused, None);
        }
    };
    // A sweep, or a policy change: its shards.
    if org.config.shard_queue.is_some() {
        match org.enqueue(&shards).await {
            Ok(sent) => inv.response = json!({"shards": sent}),
            Err(e) => inv.error = Some(format!("shards not sent: {e}")),
        }
        return inv;
    }
    let reports = org.sweep_shards(&shards, stop_at, &|_| {}).await;
    let mut failed = 0;
    for (out, report) in reports {
        failed += usize::from(out.must_retry());
        count_refused(&mut refused, &report);
        all.absorb(out);
    }
    if failed > 0 {
        inv.error = Some(format!("{failed} of {} shard(s) not swept whole", shards.len()));
    }
    // A refused shard is failed, but not the invocation's error: a retry of the whole sweep
    // cannot help it; `MemberRefused` and its alarm say so.
    let mut response = json!({
        "shards": shards.len(),
        "failed": failed + refused.values().sum::<u64>() as usize,
        "refused": refused.keys().collect::<Vec<_>>(),
    });
    if let Some(run) = &run {
        response["over_cap"] = json!(run.over_cap);
        response["unreached"] = json!(run.unreached);
        response["stale"] = json!(run.stale);
    }
    inv.response = response;
    finish_org(inv, all, org.calls.total() - calls_before, &refused, run.as_ref())
}

/// A shard refused (its member role, or its account over the cap): counted for its account.
fn count_refused(refused: &mut BTreeMap<String, u64>, report: &ShardReport) {
    if let Some(why) = &report.refused {
        tracing::error!(account = report.account, region = report.region, error = why, "shard refused: not enforced");
        *refused.entry(report.account.clone()).or_default() += 1;
    }
}

/// [`finish`], then the organization's member metrics
/// ([`crate::organization::member_metric_lines`]).
fn finish_org(
    inv: Invocation,
    out: Outcome,
    api_calls: u64,
    refused: &BTreeMap<String, u64>,
    run: Option<&crate::organization::Scheduled>,
) -> Invocation {
    let mut inv = finish(inv, out, api_calls);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
    inv.lines.extend(member_metric_lines(refused, run, now));
    inv
}

/// The invocation's records and EMF metrics, per cluster.
fn finish(mut inv: Invocation, out: Outcome, api_calls: u64) -> Invocation {
    inv.lines.extend(out.records.iter().map(|r| r.to_json_line()));
    let mut metrics = out.metrics;
    if !metrics.is_empty() {
        metrics.api_calls = api_calls;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
        for (cluster, m) in by_cluster(&metrics, &out.records, ALL_CLUSTERS) {
            inv.lines.extend(m.emf_lines(Cloud::Aws, &cluster, now));
        }
    }
    inv
}
