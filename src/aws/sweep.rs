//! The sweep (DESIGN.md §7): find every resource the cluster owns (each cluster of a set), plan
//! each one against its cluster's policy, then write in as few calls as the APIs allow.
//!
//! Discovery is the Resource Groups Tagging API (`GetResources` filtered on each cluster's
//! ownership tag, which returns every resource's tags too) plus Route 53 and IAM listings, which
//! that API cannot see and which are listed once for every cluster. Writes are grouped across
//! clusters wherever the deltas are identical: EC2 `CreateTags` takes up to 1000 ids sharing one identical delta; ELBv2 `AddTags`
//! (the service takes one ARN per call, whatever its list-typed parameter suggests) and IAM take
//! one call per resource. S3's `PutBucketTagging` replaces the whole set, and the Tagging API
//! answers from an index that lags the bucket's own tags, so a drifted bucket is re-read, its
//! ownership and plan re-checked, right before its write: nothing added since the listing is lost,
//! and a bucket no longer owned is not written. Writes run with bounded concurrency. Throttling
//! left over after the SDK's own retries is waited out with exponential backoff and jitter; a
//! batch that fails for another reason is split in halves so only the resources that really fail
//! are sent again and reported. Past the caller's deadline no new write starts: what is left is
//! reported as deferred, for the next run.
//!
//! Deliberately not here: which API tags which kind (`super::kinds`), the retry and report table
//! (`crate::error_policy`), and the status report's content (`crate::policy::store`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use super::kinds::{self, Api};
use super::reconcile::{Outcome, Reconciler};
use super::{AwsError, ErrorClass};
use crate::cloud::{ownership_for, Cloud, Ownership, OWNED};
use crate::enforce::answer_to;
use crate::plan::{self, Plan};
use crate::policy::cache::LoadedPolicy;
use crate::policy::clusters::Policies;
use crate::report::{epoch_ms, Failure, Record, Status};
use crate::resource::ResourceRef;
use crate::TagMap;

/// Told `(phase, done, total)` as a sweep goes: `discover`, `plan`, `write`.
pub type Progress = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

#[derive(Debug, Clone, Copy)]
pub struct SweepOptions {
    /// EC2 ids per `CreateTags` call (the API takes up to 1000).
    pub ec2_batch: usize,
    /// Write calls in flight at once.
    pub concurrency: usize,
    /// Extra attempts for a batch still throttled after the SDK's own retries.
    pub throttle_retries: u32,
    /// First wait before such an attempt; doubled each time, with jitter.
    pub throttle_backoff: Duration,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            ec2_batch: 1000,
            concurrency: 4,
            throttle_retries: 4,
            throttle_backoff: Duration::from_millis(500),
        }
    }
}

/// One write call's worth of resources sharing a delta.
struct Batch {
    api: BatchApi,
    set: TagMap,
    members: Vec<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum BatchApi {
    Ec2,
    /// `TagResources`: up to 20 ARNs sharing one delta, failures reported per ARN.
    Tagging,
    /// ELBv2 and IAM: one resource per call.
    Single,
    /// A replace-style write: re-read, re-planned and written as the event path does.
    Reread,
}

/// What became of one batch.
enum Sent {
    Batch(Vec<(usize, Result<(), AwsError>)>),
    Reread(Box<Record>),
    /// Not started: the deadline was near.
    Deferred,
}

/// Kinds whose write replaces the whole tag set: re-read and re-planned right before writing.
fn replace_style(kind: &str) -> bool {
    kind == "s3:bucket"
}

struct Planned {
    policy: Arc<LoadedPolicy>,
    resource: ResourceRef,
    current: TagMap,
    plan: Plan,
    started: Instant,
    seen_ms: u64,
}

impl Reconciler {
    /// Plan (and, unless dry-run, write) every owned resource; `force` re-reads the policy now.
    pub async fn sweep(&self, force: bool) -> Outcome {
        self.sweep_until(force, None).await
    }

    /// [`Self::sweep`], starting no write after `stop_at`.
    pub async fn sweep_until(&self, force: bool, stop_at: Option<Instant>) -> Outcome {
        self.sweep_clusters(force, None, stop_at).await
    }

    /// [`Self::sweep_until`] of the clusters named in `only` (every cluster with `None`): a
    /// policy change of one cluster of a set sweeps that cluster alone.
    pub async fn sweep_clusters(&self, force: bool, only: Option<&[String]>, stop_at: Option<Instant>) -> Outcome {
        let mut out = Outcome::default();
        let Some(policies) = self.policies(&mut out, force).await else { return out };
        let swept: Vec<Arc<LoadedPolicy>> =
            policies.iter().filter(|p| only.is_none_or(|o| o.contains(&p.infra_id))).cloned().collect();
        let (targets, unreadable) = match self.discover(&policies, &swept).await {
            Ok(t) => t,
            Err(e) => {
                out.error = Some(format!("listing owned resources failed: {e}"));
                return out;
            }
        };
        // An entity that could not be read is reported on its own; the rest is still swept.
        for (r, e) in unreadable {
            out.push(e.into_record(Record::failed(Cloud::Aws, &r, &policies.version(), String::new())));
        }
        let total = targets.len() as u64;
        self.report("plan", 0, total);
        // When the sweep first saw the drift: where a correction's compliance lag starts (when the
        // drift itself began, no listing can say).
        let seen_ms = epoch_ms();
        let mut planned = Vec::with_capacity(targets.len());
        for (resource, current) in targets {
            let started = Instant::now();
            match answer_to(&policies, Cloud::Aws, &resource, &current) {
                Ok(policy) => {
                    let plan = plan::plan(&policy.policy, Cloud::Aws, &policy.infra_id, &resource, &current);
                    planned.push(Planned { policy: policy.clone(), resource, current, plan, started, seen_ms });
                }
                // Owned by two clusters: reported, never written.
                Err(record) => out.push(*record),
            }
        }
        self.report("plan", total, total);

        let mut written = vec![false; planned.len()];
        let mut errors: Vec<Option<AwsError>> = vec![None; planned.len()];
        let mut deferred = vec![false; planned.len()];
        let mut reread: Vec<Option<Record>> = vec![None; planned.len()];
        if !self.engine.dry_run {
            let batches = self.batches(&planned);
            let writes: u64 = batches.iter().map(|b| b.members.len() as u64).sum();
            let mut done = 0;
            self.report("write", 0, writes);
            let past = |at: Option<Instant>| at.is_some_and(|t| Instant::now() >= t);
            let mut results = stream::iter(batches)
                .map(|b| async {
                    if past(stop_at) {
                        return (b.members, Sent::Deferred);
                    }
                    match b.api {
                        BatchApi::Reread => {
                            // Re-read, and the owner re-checked, right before the write.
                            let p = &planned[b.members[0]];
                            let record = self.engine.reconcile(&self.tagger, &policies, &p.resource, None).await;
                            (b.members, Sent::Reread(Box::new(record)))
                        }
                        _ => (b.members.clone(), Sent::Batch(self.write_batch(&planned, b).await)),
                    }
                })
                .buffer_unordered(self.sweep.concurrency.max(1));
            while let Some((members, sent)) = results.next().await {
                match sent {
                    Sent::Deferred => members.iter().for_each(|i| deferred[*i] = true),
                    Sent::Reread(record) => reread[members[0]] = Some(*record),
                    Sent::Batch(result) => {
                        for (i, r) in result {
                            match r {
                                Ok(()) => written[i] = true,
                                Err(e) => errors[i] = Some(e),
                            }
                        }
                    }
                }
                done += members.len() as u64;
                self.report("write", done.min(writes), writes);
            }
        }
        for (i, p) in planned.iter().enumerate() {
            if let Some(record) = reread[i].take() {
                let corrected = record.status == Status::Applied;
                out.push(if corrected { record.in_line_since(Some(p.seen_ms), epoch_ms()) } else { record });
                continue;
            }
            let elapsed = p.started.elapsed().as_millis() as u64;
            let mut record = Record::from_plan(Cloud::Aws, &p.policy.policy, &p.plan, written[i], elapsed);
            if policies.is_set() {
                record.infra_id = Some(p.policy.infra_id.clone());
            }
            if let Some(e) = errors[i].take() {
                record = e.into_record(record);
            } else if deferred[i] {
                let why = "deferred: the invocation's deadline was near; the next sweep writes it".to_string();
                record = record.failing(Failure::Transient, why);
            } else if written[i] {
                record = record.in_line_since(Some(p.seen_ms), epoch_ms());
            }
            out.push(record);
        }
        if !self.engine.dry_run {
            crate::enforce::report_sweeps(&self.store, &policies, &swept, &out.records).await;
        }
        out
    }

    fn report(&self, phase: &str, done: u64, total: u64) {
        if let Some(p) = &self.progress {
            p(phase, done, total);
        }
    }

    /// Group the planned writes into calls.
    fn batches(&self, planned: &[Planned]) -> Vec<Batch> {
        let mut groups: BTreeMap<(BatchApi, &TagMap), Vec<usize>> = BTreeMap::new();
        let mut singles = Vec::new();
        for (i, p) in planned.iter().enumerate() {
            if !p.plan.writes() {
                continue;
            }
            let api = match kinds::api_of(&p.resource) {
                Api::Ec2 => BatchApi::Ec2,
                Api::Tagging => BatchApi::Tagging,
                _ if replace_style(&p.resource.kind) => BatchApi::Reread,
                _ => BatchApi::Single,
            };
            if !matches!(api, BatchApi::Ec2 | BatchApi::Tagging) {
                singles.push(Batch { api, set: p.plan.set.clone(), members: vec![i] });
            } else {
                groups.entry((api, &p.plan.set)).or_default().push(i);
            }
        }
        let mut batches = singles;
        for ((api, set), members) in groups {
            let size = if api == BatchApi::Ec2 { self.sweep.ec2_batch } else { kinds::TAGGING.batch };
            for chunk in members.chunks(size.max(1)) {
                batches.push(Batch { api, set: set.clone(), members: chunk.to_vec() });
            }
        }
        batches
    }

    /// Send one batch; on a failure that is not throttling, send each half again, down to single
    /// resources, so one bad id does not fail its neighbours.
    async fn write_batch(&self, planned: &[Planned], batch: Batch) -> Vec<(usize, Result<(), AwsError>)> {
        let mut done = Vec::with_capacity(batch.members.len());
        let mut queue = vec![batch.members];
        while let Some(members) = queue.pop() {
            match self.send(planned, batch.api, &batch.set, &members).await {
                Ok(failed) => done.extend(members.into_iter().map(|i| match failed.iter().find(|(f, _)| *f == i) {
                    Some((_, e)) => (i, Err(e.clone())),
                    None => (i, Ok(())),
                })),
                Err(e) if members.len() > 1 && e.class != ErrorClass::Throttled => {
                    let (a, b) = members.split_at(members.len() / 2);
                    queue.push(a.to_vec());
                    queue.push(b.to_vec());
                }
                Err(e) => done.extend(members.into_iter().map(|i| (i, Err(e.clone())))),
            }
        }
        done
    }

    /// One call for `members`; on success, the members it failed for (`TagResources` answers
    /// per ARN).
    async fn send(
        &self,
        planned: &[Planned],
        api: BatchApi,
        set: &TagMap,
        members: &[usize],
    ) -> Result<Vec<(usize, AwsError)>, AwsError> {
        let mut attempt = 0;
        loop {
            let result = match api {
                BatchApi::Ec2 => {
                    let ids: Vec<&str> = members.iter().map(|i| planned[*i].resource.id.as_str()).collect();
                    self.tagger.ec2_create_tags(&ids, set).await.map(|()| Vec::new())
                }
                BatchApi::Tagging => {
                    let arn = |i: &usize| planned[*i].resource.arn.as_deref().unwrap_or(&planned[*i].resource.id);
                    let arns: Vec<&str> = members.iter().map(arn).collect();
                    self.tagger.tag_resources(&arns, set).await.map(|failed| {
                        failed
                            .into_iter()
                            .filter_map(|(a, e)| members.iter().find(|i| arn(i) == a).map(|i| (*i, e)))
                            .collect()
                    })
                }
                BatchApi::Single | BatchApi::Reread => {
                    let p = &planned[members[0]];
                    self.tagger.write(&p.resource, set, &p.current).await.map(|()| Vec::new())
                }
            };
            match result {
                Err(e) if e.class == ErrorClass::Throttled && attempt < self.sweep.throttle_retries => {
                    let wait = self.sweep.throttle_backoff.saturating_mul(1 << attempt);
                    tokio::time::sleep(wait + crate::error_policy::jitter(wait)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Owned resources with their current tags: every ARN the Tagging API lists with the
    /// ownership tag (whatever its service: each has a path, see `kinds.rs`), plus Route 53 and
    /// IAM listings, which that API does not (fully) cover; and the IAM entities that could not be
    /// read (one deleted since the listing, or denied, fails alone).
    async fn discover(&self, policies: &Policies, swept: &[Arc<LoadedPolicy>]) -> Result<Discovered, AwsError> {
        let mut found: Vec<(ResourceRef, TagMap)> = Vec::new();
        for policy in swept {
            for (r, tags) in self.tagged(&policy.infra_id, found.len()).await? {
                // Owned by two swept clusters: listed twice, reported once.
                if !found.iter().any(|(f, _)| f.arn == r.arn) {
                    found.push((r, tags));
                }
            }
        }
        // Whether a listed resource belongs to a cluster being swept (or conflicts with one).
        let ours = |r: &ResourceRef, tags: &TagMap| match answer_to(policies, Cloud::Aws, r, tags) {
            Ok(p) => {
                ownership_for(Cloud::Aws, &r.kind, &p.infra_id, tags) == Ownership::Owned
                    && swept.iter().any(|s| s.infra_id == p.infra_id)
            }
            Err(record) => {
                record.status == Status::Failed
                    && record.infra_id.as_ref().is_some_and(|id| swept.iter().any(|s| &s.infra_id == id))
            }
        };
        // ELBv2 listeners and rules of the owned load balancers, and Route 53 (global): where the
        // Tagging API lists them too, its copy is kept.
        let lbs: Vec<&str> = found
            .iter()
            .filter(|(r, _)| r.kind == "elasticloadbalancing:loadbalancer")
            .map(|(r, _)| r.id.as_str())
            .collect();
        let children = self.tagger.list_elbv2_children(&lbs).await?;
        let route53 = self.tagger.list_route53().await?;
        for (r, tags) in children.into_iter().chain(route53) {
            if ours(&r, &tags) && !found.iter().any(|(f, _)| f.arn == r.arn) {
                found.push((r, tags));
            }
        }
        let iam = self.tagger.list_iam().await?;
        // Entities listed without their tags are read; keep what the swept clusters own.
        let reads = stream::iter(iam)
            .map(|(r, listed)| async move {
                let read = match listed {
                    Some(tags) => Ok(tags),
                    // Listed a moment ago: not-found means deleted, not "not visible yet".
                    None => self.tagger.read_now(&r).await.map(|(tags, _)| tags),
                };
                (r, read)
            })
            .buffer_unordered(self.sweep.concurrency.max(1))
            .collect::<Vec<_>>()
            .await;
        let mut unreadable = Vec::new();
        for (r, read) in reads {
            match read {
                Ok(tags) if ours(&r, &tags) => found.push((r, tags)),
                Ok(_) => {}
                // Deleted between the listing and the read: nothing left to enforce.
                Err(e) if e.class == ErrorClass::NotFound => {}
                Err(e) => unreadable.push((r, e)),
            }
        }
        self.report("discover", found.len() as u64, found.len() as u64);
        Ok((found, unreadable))
    }

    /// Every resource the Tagging API lists with cluster `infra_id`'s ownership tag, with its tags.
    async fn tagged(&self, infra_id: &str, already: usize) -> Result<Vec<(ResourceRef, TagMap)>, AwsError> {
        let c = &self.tagger.clients;
        let owner_key = Cloud::Aws.ownership_key(infra_id);
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = c
                .tagging
                .get_resources()
                .tag_filters(
                    aws_sdk_resourcegroupstagging::types::TagFilter::builder().key(&owner_key).values(OWNED).build(),
                )
                // Pages hold at most 100 resources and, by a default moto applies (100 tags) and
                // AWS documents no default for, fewer when each carries many tags: every tag
                // tagwarden adds made the next sweep's listing longer. The documented maximum of
                // 500 tags keeps a page at 100 resources of up to 5 tags (AWS API Reference,
                // GetResources: TagsPerPage 100–500, a resource never split across pages).
                .resources_per_page(100)
                .tags_per_page(500)
                .set_pagination_token(token.clone())
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("tag:GetResources", &owner_key, e))?;
            for m in page.resource_tag_mapping_list() {
                let Some(r) = m.resource_arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                let tags = m.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
                found.push((r, tags));
            }
            self.report("discover", (already + found.len()) as u64, 0);
            token = page.pagination_token().filter(|t| !t.is_empty()).map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        Ok(found)
    }
}

/// Owned resources with their tags, and the ones that could not be read.
type Discovered = (Vec<(ResourceRef, TagMap)>, Vec<(ResourceRef, AwsError)>);
