//! The sweep's shards (one account × region × cluster group each): which there are, sweeping
//! them here, or enqueueing them to SQS.

use super::*;

/// One account and region of a sweep, as its SQS message carries it:
/// `{"tagwarden": "sweep", "account": …, "region": …, "clusters": […]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub account: String,
    pub region: String,
    /// Only these clusters (a policy change); `None`: every cluster of the account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    /// The account's cluster group ([`pack`]) when it has several; `None`: every group, in turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
}

/// A shard's message: the sweep request with its account and region.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "tagwarden")]
pub enum ShardMessage {
    #[serde(rename = "sweep")]
    Sweep(Shard),
}

impl Shard {
    /// The API budget the shard spends: its account-region's (`GetResources` and EC2's request
    /// buckets are per account and region), shared by the shards of its cluster groups.
    pub fn budget(&self) -> String {
        format!("{}/{}", self.account, self.region)
    }
}

/// A FIFO message's deduplication id, distinct for every send (up to 128 characters).
pub(super) fn dedup_id(body: &str, attempt: usize, entry: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(body.as_bytes());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{now:x}-{attempt}-{entry}-{:016x}", h.finish())
}

impl ShardMessage {
    /// A shard's message, and nothing else: a body without both `account` and `region` is not one.
    pub fn parse(body: &str) -> Option<Shard> {
        match serde_json::from_str::<ShardMessage>(body) {
            Ok(ShardMessage::Sweep(shard)) if is_account(&shard.account) && !shard.region.is_empty() => Some(shard),
            _ => None,
        }
    }
}

impl Organization {
    /// Every shard of a whole sweep: each listed account × region, × cluster group where the
    /// account's clusters need more than one session. An account whose clusters cannot be told
    /// (its folder unreadable) is one shard per region, which fails naming why.
    /// An account over the cap ([`OrgConfig::folders_max`]) has none (see [`Organization::schedule`],
    /// which says so).
    pub async fn shards(&self) -> Vec<Shard> {
        let mut shards = Vec::new();
        for account in self.config.clusters.keys() {
            if let Ok(more) = self.account_shards(account).await {
                shards.extend(more);
            }
        }
        shards
    }

    /// Account `account`'s shards: one per region, × cluster group where it has several; one per
    /// region when its clusters cannot be told (it fails naming why); none when it is over the cap.
    pub async fn account_shards(&self, account: &str) -> Result<Vec<Shard>, OverCap> {
        let groups = match self.member(account).await {
            Ok(m) if m.groups.len() > 1 => m.groups.iter().map(|g| g.clusters.clone()).collect(),
            Err(MemberError::OverCap(over)) => return Err(over),
            _ => Vec::new(),
        };
        let mut shards = Vec::new();
        for region in &self.config.regions {
            let shard = Shard { account: account.to_string(), region: region.clone(), clusters: None, group: None };
            if groups.is_empty() {
                shards.push(shard);
                continue;
            }
            // A group's shard names its clusters: the instance that takes it may have packed them
            // otherwise (the index only names its outcome).
            for (g, clusters) in groups.iter().enumerate() {
                shards.push(Shard { clusters: Some(clusters.clone()), group: Some(g), ..shard.clone() });
            }
        }
        Ok(shards)
    }

    /// Sweep one shard, starting no write after `stop_at`, and (unless a dry run) write its
    /// outcome beside the accounts' folders, whatever became of it. A policy change's shard (some
    /// clusters of a whole account-region) writes none: it would stand for the account-region.
    pub async fn sweep_shard(&self, shard: &Shard, stop_at: Option<Instant>) -> (Outcome, ShardReport) {
        let started = Instant::now();
        let calls_before = self.calls.total();
        let (out, swept, refused, groups) = self.sweep_groups(shard, stop_at).await;
        let mut report = ShardReport::of(shard, swept, &out, started, self.calls.total() - calls_before);
        report.refused = refused;
        report.groups = groups;
        let partial = shard.clusters.is_some() && shard.group.is_none();
        if !self.settings.dry_run && !partial {
            if let Err(e) = self.write_report(&report).await {
                tracing::warn!(error = %e, account = shard.account, region = shard.region, "shard outcome not written");
            }
        }
        (out, report)
    }

    /// What sweeping `shard` found: the outcome, the clusters swept, why the member role was
    /// refused, and how many groups the account's clusters are in.
    pub(super) async fn sweep_groups(
        &self,
        shard: &Shard,
        stop_at: Option<Instant>,
    ) -> (Outcome, Vec<String>, Option<String>, Option<usize>) {
        let mut member = self.member(&shard.account).await;
        // A cluster named by a policy write that the cached list does not hold yet: list again.
        let unknown = |m: &Member| shard.clusters.as_ref().is_some_and(|c| c.iter().any(|c| !m.clusters.contains(c)));
        if matches!(&member, Ok(m) if unknown(m)) {
            member = self.member_checked(&shard.account, true).await;
        }
        let member = match member {
            Ok(m) => m,
            // Over the cap: refused, as a refused role is (a record, not a shard handed back).
            Err(MemberError::OverCap(over)) => {
                return (Outcome::default(), shard.clusters.clone().unwrap_or_default(), Some(over.to_string()), None)
            }
            Err(why) => {
                let error = Some(StopKind::Member(why.to_string()).into());
                return (Outcome { error, ..Outcome::default() }, Vec::new(), None, None);
            }
        };
        let (mut out, mut swept, mut refused) = (Outcome::default(), Vec::new(), None);
        for (g, group) in member.groups.iter().enumerate() {
            let clusters: Vec<String> = match &shard.clusters {
                Some(only) => group.clusters.iter().filter(|c| only.contains(c)).cloned().collect(),
                None => group.clusters.clone(),
            };
            if clusters.is_empty() {
                continue;
            }
            if stop_at.is_some_and(|t| Instant::now() >= t) {
                out.error = Some(Deferred::BeforeClusters(clusters).into());
                break;
            }
            // The session first: a refused account is one record naming the fix (the shard's
            // outcome, the summary), not a failure per listing, and not a shard handed back: on the
            // FIFO queue it would hold its account-region's group for every redelivery while the
            // hourly sweeps pile up behind it, and the next sweep asks again anyway. A throttled
            // STS fails the shard at once, so SQS retries it whole.
            match self.sessions.credentials(&shard.account, g, &group.role, &group.policy).await {
                Err(why) if why.transient => {
                    out.error = Some(StopKind::Member(why.to_string()).into());
                    break;
                }
                Err(why) => {
                    refused = Some(why.to_string());
                    // Its clusters still count as the account's (the summary's cluster count),
                    // each group's that the shard covers.
                    for group in &member.groups[g..] {
                        swept.extend(
                            group
                                .clusters
                                .iter()
                                .filter(|c| shard.clusters.as_ref().is_none_or(|only| only.contains(c)))
                                .cloned(),
                        );
                    }
                    break;
                }
                Ok(_) => {
                    let engine = self.engine(&shard.account, &member, g, &shard.region);
                    out.absorb(Box::pin(engine.sweep(false, Some(&clusters), stop_at)).await);
                }
            }
            swept.extend(clusters);
        }
        (out, swept, refused, Some(member.groups.len()))
    }

    /// Every shard of `shards`: [`SHARDS_AT_ONCE`] account-regions at once, the shards of one
    /// account-region (its cluster groups) one after another, as the FIFO shard queue delivers
    /// them, since they share its budget; `done` told of each as it finishes.
    pub async fn sweep_shards(
        &self,
        shards: &[Shard],
        stop_at: Option<Instant>,
        done: &(dyn Fn(&ShardReport) + Sync),
    ) -> Vec<(Outcome, ShardReport)> {
        // Owned, not borrowed: a stream of futures over borrowed shards is not general enough
        // for the Lambda's boxed handler future.
        let mut by_budget: BTreeMap<String, Vec<Shard>> = BTreeMap::new();
        for s in shards {
            by_budget.entry(s.budget()).or_default().push(s.clone());
        }
        let finished = stream::iter(by_budget.into_values())
            .map(|same| self.sweep_in_turn(same, stop_at, done))
            .buffer_unordered(SHARDS_AT_ONCE);
        finished.concat().await
    }

    /// `shards` one after another, `done` told of each.
    pub(super) async fn sweep_in_turn(
        &self,
        shards: Vec<Shard>,
        stop_at: Option<Instant>,
        done: &(dyn Fn(&ShardReport) + Sync),
    ) -> Vec<(Outcome, ShardReport)> {
        let mut all = Vec::with_capacity(shards.len());
        for shard in &shards {
            let (out, report) = self.sweep_shard(shard, stop_at).await;
            done(&report);
            all.push((out, report));
        }
        all
    }

    /// Send `shards` to the shard queue, 10 a call; the number sent, or why not all were.
    pub async fn enqueue(&self, shards: &[Shard]) -> Result<usize, EnqueueError> {
        let Some(queue) = &self.config.shard_queue else { return Err(EnqueueError::NoQueue) };
        // SQS Developer Guide, "Amazon SQS FIFO queues": "The name of a FIFO queue must end with
        // the .fifo suffix".
        let fifo = queue.ends_with(".fifo");
        let mut sent = 0;
        for chunk in shards.chunks(SQS_BATCH) {
            // The entries a call refused alone are sent again (a sweep shard twice costs calls, never a
            // write: the second finds nothing to do); a refused call fails the invocation.
            let mut pending: Vec<(usize, &Shard)> = chunk.iter().enumerate().collect();
            for attempt in 1..=ENQUEUE_ATTEMPTS {
                let entries = pending
                    .iter()
                    .map(|(i, s)| {
                        let body = serde_json::to_string(&ShardMessage::Sweep((*s).clone())).unwrap_or_default();
                        let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder().id(i.to_string());
                        // A FIFO queue (the organization module's) delivers one message of a group
                        // at a time, and Lambda invokes at most one per group ("concurrent
                        // invocations are capped at the number of message group IDs", Lambda
                        // Developer Guide, "Configuring scaling behavior for SQS event source
                        // mappings"): the group is the account-region, whose API budget the shards
                        // of its cluster groups share. It needs a deduplication id; each send is
                        // its own (a sweep shard twice costs calls, never a write).
                        let entry = if fifo {
                            entry.message_group_id(s.budget()).message_deduplication_id(dedup_id(&body, attempt, *i))
                        } else {
                            entry
                        };
                        entry.message_body(body).build()
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| EnqueueError::Entry(e.to_string()))?;
                let out =
                    self.sqs.send_message_batch().queue_url(queue).set_entries(Some(entries)).send().await.map_err(
                        |e| EnqueueError::Call {
                            error: crate::error::from_sdk("sqs:SendMessageBatch", queue, e),
                            sent,
                        },
                    )?;
                sent += out.successful().len();
                let failed: Vec<&str> = out.failed().iter().map(|f| f.id()).collect();
                if failed.is_empty() {
                    break;
                }
                if attempt == ENQUEUE_ATTEMPTS {
                    let f = &out.failed()[0];
                    return Err(EnqueueError::Refused {
                        refused: failed.len(),
                        sent,
                        code: f.code().to_string(),
                        message: f.message().unwrap_or_default().to_string(),
                    });
                }
                pending.retain(|(i, _)| failed.contains(&i.to_string().as_str()));
            }
        }
        Ok(sent)
    }
}

/// Why [`Organization::enqueue`] did not send every shard.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EnqueueError {
    /// The hub has no shard queue.
    #[error("no TAGWARDEN_SHARD_QUEUE_URL")]
    NoQueue,
    /// A shard's entry could not be built.
    #[error("{0}")]
    Entry(String),
    /// A `SendMessageBatch` call failed: the shards sent before it were sent.
    #[error("{error} ({sent} shard(s) sent before)")]
    Call { error: CloudError, sent: usize },
    /// `SendMessageBatch` refused entries every time they were sent again; the first's answer.
    #[error(
        "sqs:SendMessageBatch refused {refused} shard(s) {ENQUEUE_ATTEMPTS} times ({sent} sent): {code}: {message}"
    )]
    Refused { refused: usize, sent: usize, code: String, message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn a_shard_message_round_trips_and_nothing_else_is_one() {
        let shard = Shard { account: "111122223333".into(), region: "us-east-1".into(), clusters: None, group: None };
        let body = serde_json::to_string(&ShardMessage::Sweep(shard.clone())).expect("json");
        assert_eq!(body, r#"{"tagwarden":"sweep","account":"111122223333","region":"us-east-1"}"#);
        assert_eq!(ShardMessage::parse(&body), Some(shard));
        for not in [r#"{"tagwarden":"sweep"}"#, r#"{"tagwarden":"sweep","account":"1","region":"r"}"#, "{}"] {
            assert_eq!(ShardMessage::parse(not), None, "{not}");
        }
    }
}
