//! What the Lambda does with a payload, read once as its [`Payload`], on either deployment: one
//! account's engine or an organization's hub ([`Target`]; `super::handler::Handler` owns one).
//! Kept here, not in the binary, so that tests drive the very same path in-process.
//!
//! - An SQS batch of EventBridge events (and, on a hub, sweep shards): one walk for both
//!   (`batch`); events handled together (`tagwarden_engine::enforce::batch`: every resource
//!   read and written once, identical deltas in shared calls); the messages whose events failed
//!   are returned as `batchItemFailures`, so SQS retries only those and finally dead-letters them
//!   with their original body.
//! - One EventBridge event (direct invoke): a failure is an error, so EventBridge retries.
//! - A sweep: `{"tagwarden": "sweep"}` from the schedule, an S3 notification or EventBridge
//!   `Object Created` / `Parameter Store Change` for the policy (re-read at once); on a hub, the
//!   schedule's shards ([`handle_organization_until`]).
//!
//! Every walk asks one [`Deadline`] whether new work may start, ends in one tail (the records,
//! then the EMF metrics, `finish`), and a failed invocation says whether a retry can help
//! ([`InvocationError`], `super::failure`).
//!
//! Deliberately not here: the Runtime API (`functions/aws-lambda`, through `lambda_runtime`), and
//! configuration (`super::config`, `super::handler`).

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::SqsBatchResponse;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::deadline::Deadline;
use crate::failure::{FailureClass, InvocationError};
use crate::organization::{member_metric_lines, Organization, Scheduled, Shard, ShardMessage, ShardReport};
use crate::Tagger;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::events::{self, Event};
use tagwarden_core::report::{by_cluster, Outcome, ALL_CLUSTERS};
use tagwarden_core::trigger::Trigger;
use tagwarden_engine::enforce::Engine;

/// The result of one invocation: the response, the lines to print (outcome records, then EMF
/// metrics), and an error, with its class, when the invocation must fail.
#[derive(Debug, Default)]
pub struct Invocation {
    pub response: Value,
    pub lines: Vec<String>,
    pub error: Option<InvocationError>,
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

/// Handle one payload, the invocation's JSON text, with one account's engine and no deadline.
pub async fn handle(engine: &Engine<Tagger>, payload: String) -> Invocation {
    walk(Target::Account(engine), payload, Deadline::NONE).await
}

/// [`handle`] for an invocation that must answer by `deadline` ([`Deadline`]): no new work
/// starts after it, and what is left is handed back rather than timed out — unstarted SQS
/// messages as batch item failures, an event's unstarted resources as a failure of that event, a
/// sweep's unstarted writes as deferred (the next sweep re-plans them; finished writes are not
/// redone, they re-read as unchanged).
pub async fn handle_until(engine: &Engine<Tagger>, payload: String, deadline: Option<Instant>) -> Invocation {
    walk(Target::Account(engine), payload, Deadline::of(deadline)).await
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
    walk(Target::Hub(org), payload, Deadline::of(deadline)).await
}

/// What a payload is handled with: one account's engine, or an organization's hub.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    Account(&'a Engine<Tagger>),
    Hub(&'a Organization),
}

impl<'a> Target<'a> {
    /// Every call its clients made so far.
    fn calls(self) -> u64 {
        match self {
            Target::Account(engine) => engine.adapter.clients.calls.total(),
            Target::Hub(org) => org.calls.total(),
        }
    }

    /// The `Deployment` dimension of its metrics: a hub's, and a cluster set's, are every
    /// cluster's; one cluster's is its infraID.
    fn deployment(self, infra_id: Option<&str>) -> &str {
        match self {
            Target::Account(engine) if !engine.store.is_set() => infra_id.unwrap_or("unknown"),
            Target::Account(_) | Target::Hub(_) => ALL_CLUSTERS,
        }
    }

    /// A hub's shard message (one account never reads one: to it, it is a sweep).
    fn shard(self, body: &str) -> Option<(&'a Organization, Shard)> {
        match self {
            Target::Hub(org) => ShardMessage::parse(body).map(|shard| (org, shard)),
            Target::Account(_) => None,
        }
    }

    async fn handle_events(self, events: &[Event], deadline: Deadline) -> Vec<Outcome> {
        match self {
            Target::Account(engine) => engine.handle_events(events, deadline.stop_at()).await,
            Target::Hub(org) => org.handle_events(events, deadline.stop_at()).await,
        }
    }

    async fn handle_event(self, event: &Event, deadline: Deadline) -> Outcome {
        match self {
            Target::Account(engine) => engine.handle_event(event, deadline.stop_at()).await,
            Target::Hub(org) => {
                org.handle_events(std::slice::from_ref(event), deadline.stop_at()).await.pop().unwrap_or_default()
            }
        }
    }
}

/// What an invocation gathered on its way to `finish`.
#[derive(Default)]
struct Tail {
    /// Every outcome, folded.
    all: Outcome,
    /// Shards refused, by account (a hub's).
    refused: BTreeMap<String, u64>,
    /// The schedule's run (a hub's).
    run: Option<Scheduled>,
}

/// An invocation's answer before its tail: the response, and its error.
type Answer = (Value, Option<InvocationError>);

/// The one walk: the payload read once, handed to what handles its shape, then `finish`.
pub async fn walk(target: Target<'_>, payload: String, deadline: Deadline) -> Invocation {
    let calls_before = target.calls();
    let mut tail = Tail::default();
    let (response, error) = answer(target, payload, deadline, &mut tail).await;
    finish(target, response, error, tail, calls_before)
}

async fn answer(target: Target<'_>, payload: String, deadline: Deadline, tail: &mut Tail) -> Answer {
    if let Some((org, shard)) = target.shard(&payload) {
        return shard_alone(org, &shard, deadline, tail).await;
    }
    let parsed = match serde_json::from_str::<Payload>(&payload) {
        Ok(p) => p,
        Err(e) => {
            return (Value::Null, Some(InvocationError::permanent(format!("not a payload tagwarden reads: {e}"))))
        }
    };
    match (parsed, target) {
        (Payload::SqsBatch { records }, _) => (batch(target, records, deadline, tail).await, None),
        // Read by `tagwarden_core::events` from the text as it came.
        (Payload::EventBridge(EventBridge::Event), _) => (Value::Null, event(target, &payload, deadline, tail).await),
        (Payload::Sweep(_) | Payload::EventBridge(EventBridge::Scheduled), Target::Account(engine)) => {
            // Boxed: the sweep's future is deep, and every caller's type would nest it.
            swept(Box::pin(engine.sweep(false, None, deadline.stop_at())).await, tail)
        }
        (Payload::Sweep(_) | Payload::EventBridge(EventBridge::Scheduled), Target::Hub(org)) => {
            schedule(org, deadline, tail).await
        }
        (Payload::S3Notification { records }, _) => {
            let (keys, at): (Vec<String>, Vec<Option<String>>) =
                records.into_iter().map(|S3Record::S3 { s3, event_time }| (s3.object.key, event_time)).unzip();
            written(target, keys, &at, deadline, tail).await
        }
        (Payload::EventBridge(EventBridge::ObjectCreated { detail, time }), _) => {
            written(target, vec![detail.object.key], &[time], deadline, tail).await
        }
        (Payload::EventBridge(EventBridge::ParameterStoreChange { detail, time }), Target::Account(_)) => {
            written(target, vec![detail.name], &[time], deadline, tail).await
        }
        (Payload::EventBridge(EventBridge::ParameterStoreChange { detail, .. }), Target::Hub(_)) => {
            (json!({"ignored": format!("parameter {}: an organization's policies are in S3", detail.name)}), None)
        }
    }
}

/// One event (a direct invoke): a failure a retry can fix fails the invocation.
async fn event(target: Target<'_>, raw: &str, deadline: Deadline, tail: &mut Tail) -> Option<InvocationError> {
    match events::parse_one(raw.as_bytes()) {
        Ok(event) => {
            let out = target.handle_event(&event, deadline).await;
            let error = out
                .must_retry()
                .then(|| InvocationError::of_outcome(&out, || format!("{} resource(s) failed", out.failed())));
            tail.all.absorb(out);
            error
        }
        Err(e) => Some(InvocationError::permanent(format!("not an event tagwarden reads: {e}"))),
    }
}

/// An SQS batch, message by message: past the deadline handed back unstarted; a hub's shard
/// swept; an event kept for [`Target::handle_events`] with the batch's others; anything else
/// handed back (a retry will not help, but the dead-letter queue keeps it). The messages that
/// failed are the response's `batchItemFailures`, in the batch's order.
async fn batch(target: Target<'_>, messages: Vec<SqsMessage>, deadline: Deadline, tail: &mut Tail) -> Value {
    enum Message {
        /// Not started, or not an event: handed back.
        Back,
        /// Done already (a shard): whether it failed.
        Done(bool),
        /// The batch's event at this index.
        Event(usize),
    }
    let mut walked: Vec<(String, Message)> = Vec::with_capacity(messages.len());
    let mut events = Vec::new();
    for SqsMessage::Sqs { message_id: id, body } in messages {
        let message = if deadline.passed() {
            tracing::warn!(message_id = id, "deadline near: message handed back unstarted");
            Message::Back
        } else if let Some((org, shard)) = target.shard(&body) {
            let (out, report) = org.sweep_shard(&shard, deadline.stop_at()).await;
            count_refused(&mut tail.refused, &report);
            let failed = out.must_retry();
            if failed {
                tracing::error!(
                    message_id = id,
                    account = shard.account,
                    region = shard.region,
                    failed = report.failed,
                    error = out.error.as_deref(),
                    "shard not swept whole; SQS redelivers it"
                );
            }
            tail.all.absorb(out);
            Message::Done(failed)
        } else {
            match events::parse_one(body.as_bytes()) {
                Ok(event) => {
                    events.push(event);
                    Message::Event(events.len() - 1)
                }
                Err(e) => {
                    tracing::error!(message_id = id, error = %e, "message is not an event");
                    Message::Back
                }
            }
        };
        walked.push((id, message));
    }
    // Every event of the batch at once: each resource read and written once, in shared calls.
    let mut outcomes: Vec<Option<Outcome>> =
        target.handle_events(&events, deadline).await.into_iter().map(Some).collect();
    let mut response = SqsBatchResponse::default();
    for (id, message) in walked {
        let failed = match message {
            Message::Back => true,
            Message::Done(failed) => failed,
            Message::Event(i) => match outcomes.get_mut(i).and_then(Option::take) {
                Some(out) => {
                    let retry = out.must_retry();
                    if let Some(e) = &out.error {
                        tracing::error!(message_id = id, error = %e, "event not reconciled");
                    }
                    tail.all.absorb(out);
                    retry
                }
                None => true,
            },
        };
        if failed {
            response.add_failure(id);
        }
    }
    serde_json::to_value(&response).unwrap_or_default()
}

/// A sweep's (or a policy change's) outcome: a failure a retry can fix fails the invocation.
fn swept(out: Outcome, tail: &mut Tail) -> Answer {
    let summary = json!({"sweep": out.records.len(), "failed": out.failed()});
    let error = out.must_retry().then(|| InvocationError::of_outcome(&out, || format!("sweep: {summary}")));
    tail.all.absorb(out);
    (summary, error)
}

/// Objects written where the policy is (S3 keys, an SSM parameter's name), each at its time:
/// one account re-reads the policy and sweeps what it changed (its own status report is
/// ignored); a hub sends (or sweeps) the shards of the accounts' folders written.
async fn written(
    target: Target<'_>,
    objects: Vec<String>,
    at: &[Option<String>],
    deadline: Deadline,
    tail: &mut Tail,
) -> Answer {
    match target {
        Target::Account(engine) => {
            let at: Vec<Option<&str>> = at.iter().map(Option::as_deref).collect();
            let Trigger::PolicyChanged { objects, at_ms } = Trigger::written(objects, &at) else {
                return (json!({"ignored": "own status report"}), None);
            };
            swept(Box::pin(engine.policy_changed(&objects, at_ms, true, deadline.stop_at())).await, tail)
        }
        Target::Hub(org) => {
            let shards = org.config.shards_for(&objects);
            shards_of(org, shards, deadline, tail).await
        }
    }
}

/// A shard sent alone (a direct invoke): a failure a retry can fix fails the invocation; a
/// refused one is counted, not an error.
async fn shard_alone(org: &Organization, shard: &Shard, deadline: Deadline, tail: &mut Tail) -> Answer {
    let (out, report) = org.sweep_shard(shard, deadline.stop_at()).await;
    let error = out.must_retry().then(|| {
        InvocationError::of_outcome(&out, || {
            format!("shard {}/{}: {} failed", shard.account, shard.region, report.failed)
        })
    });
    count_refused(&mut tail.refused, &report);
    tail.all.absorb(out);
    (serde_json::to_value(&report).unwrap_or_default(), error)
}

/// A hub's schedule: with a shard queue, the shards sent account by account as they were
/// computed; without one, swept here ([`shards_of`]).
async fn schedule(org: &Organization, deadline: Deadline, tail: &mut Tail) -> Answer {
    let scheduled = Box::pin(org.schedule(deadline.stop_at(), true)).await;
    if org.config.shard_queue.is_some() {
        let response = json!({
            "shards": scheduled.sent,
            "accounts": scheduled.reached.len(),
            "over_cap": scheduled.over_cap,
            "unreached": scheduled.unreached,
            "stale": scheduled.stale,
        });
        // The sends' errors come as text, their class lost: the queue is assumed reachable again
        // (a refusal is in the text, and the next schedule sends the same shards anyway).
        let error = scheduled.error.as_ref().map(|e| InvocationError::retryable(format!("shards not sent: {e}")));
        tail.run = Some(scheduled);
        return (response, error);
    }
    let shards = scheduled.shards.clone();
    tail.run = Some(scheduled);
    shards_of(org, shards, deadline, tail).await
}

/// A hub's shards: sent to the shard queue, or with none swept here, in turn.
async fn shards_of(org: &Organization, shards: Vec<Shard>, deadline: Deadline, tail: &mut Tail) -> Answer {
    if org.config.shard_queue.is_some() {
        return match org.enqueue(&shards).await {
            Ok(sent) => (json!({"shards": sent}), None),
            Err(e) => (
                Value::Null,
                Some(InvocationError { class: FailureClass::of_enqueue(&e), message: format!("shards not sent: {e}") }),
            ),
        };
    }
    let reports = org.sweep_shards(&shards, deadline.stop_at(), &|_| {}).await;
    let (mut failed, mut class) = (0, None);
    for (out, report) in reports {
        if out.must_retry() {
            failed += 1;
            let this = FailureClass::of_outcome(&out);
            class = Some(class.map_or(this, |c: FailureClass| c.or(this)));
        }
        count_refused(&mut tail.refused, &report);
        tail.all.absorb(out);
    }
    let error = class.map(|class| InvocationError {
        class,
        message: format!("{failed} of {} shard(s) not swept whole", shards.len()),
    });
    // A refused shard is failed, but not the invocation's error: a retry of the whole sweep
    // cannot help it; `MemberRefused` and its alarm say so.
    let mut response = json!({
        "shards": shards.len(),
        "failed": failed + tail.refused.values().sum::<u64>() as usize,
        "refused": tail.refused.keys().collect::<Vec<_>>(),
    });
    if let Some(run) = &tail.run {
        response["over_cap"] = json!(run.over_cap);
        response["unreached"] = json!(run.unreached);
        response["stale"] = json!(run.stale);
    }
    (response, error)
}

/// A shard refused (its member role, or its account over the cap): counted for its account.
fn count_refused(refused: &mut BTreeMap<String, u64>, report: &ShardReport) {
    if let Some(why) = &report.refused {
        tracing::error!(account = report.account, region = report.region, error = why, "shard refused: not enforced");
        *refused.entry(report.account.clone()).or_default() += 1;
    }
}

/// The one tail of every invocation: its records, its EMF metrics per cluster, then a hub's
/// member metrics ([`crate::organization::member_metric_lines`]; none when nothing was refused
/// and no schedule ran, as for one account).
fn finish(
    target: Target<'_>,
    response: Value,
    error: Option<InvocationError>,
    tail: Tail,
    calls_before: u64,
) -> Invocation {
    let Tail { all, refused, run } = tail;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
    let mut lines: Vec<String> = all.records.iter().map(|r| r.to_json_line()).collect();
    let mut metrics = all.metrics;
    if let Some(why) = &all.error {
        metrics.stopped(why.kind());
    }
    if !metrics.is_empty() {
        metrics.api_calls = target.calls().saturating_sub(calls_before);
        for (cluster, m) in by_cluster(&metrics, &all.records, target.deployment(all.infra_id.as_deref())) {
            lines.extend(crate::emf::lines(&m, Cloud::Aws, &cluster, now));
        }
    }
    lines.extend(member_metric_lines(&refused, run.as_ref(), now));
    Invocation { response, lines, error }
}
