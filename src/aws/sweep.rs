//! The sweep (DESIGN.md §7): find every resource the cluster owns, plan each one, then write in as
//! few calls as the APIs allow.
//!
//! Discovery is the Resource Groups Tagging API (`GetResources` filtered on the ownership tag,
//! which returns every resource's tags too) plus IAM listings, which that API cannot see. Writes
//! are grouped: EC2 `CreateTags` takes up to 1000 ids sharing one identical delta, ELBv2
//! `AddTags` 20 ARNs; S3 (read-merge-write) and IAM take one call per resource. Writes run with
//! bounded concurrency. Throttling left over after the SDK's own retries is waited out with
//! exponential backoff and jitter; a batch that fails for another reason is split in halves so
//! only the resources that really fail are sent again and reported.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use super::reconcile::{Outcome, Reconciler};
use super::{AwsError, ErrorClass};
use crate::cloud::{Cloud, OWNED};
use crate::plan::{self, Plan};
use crate::report::{Record, Status};
use crate::resource::ResourceRef;
use crate::status::StatusReport;
use crate::TagMap;

/// Told `(phase, done, total)` as a sweep goes: `discover`, `plan`, `write`.
pub type Progress = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

#[derive(Debug, Clone, Copy)]
pub struct SweepOptions {
    /// EC2 ids per `CreateTags` call (the API takes up to 1000).
    pub ec2_batch: usize,
    /// ARNs per ELBv2 `AddTags` call.
    pub elbv2_batch: usize,
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
            elbv2_batch: 20,
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
    Elbv2,
    /// S3 and IAM: one resource per call.
    Single,
}

struct Planned {
    resource: ResourceRef,
    current: TagMap,
    plan: Plan,
    started: Instant,
}

impl Reconciler {
    /// Plan (and, unless dry-run, write) every owned resource; `force` re-reads the policy now.
    pub async fn sweep(&self, force: bool) -> Outcome {
        let mut out = Outcome::default();
        let Some(policy) = self.policy(&mut out, force).await else { return out };
        let targets = match self.discover(&policy.infra_id).await {
            Ok(t) => t,
            Err(e) => {
                out.error = Some(format!("listing owned resources failed: {e}"));
                return out;
            }
        };
        let total = targets.len() as u64;
        self.report("plan", 0, total);
        let planned: Vec<Planned> = targets
            .into_iter()
            .map(|(resource, current)| {
                let started = Instant::now();
                let plan = plan::plan(&policy.policy, Cloud::Aws, &policy.infra_id, &resource, &current);
                Planned { resource, current, plan, started }
            })
            .collect();
        self.report("plan", total, total);

        let mut written = vec![false; planned.len()];
        let mut errors: Vec<Option<AwsError>> = vec![None; planned.len()];
        if !self.dry_run {
            let batches = self.batches(&planned);
            let writes: u64 = batches.iter().map(|b| b.members.len() as u64).sum();
            let mut done = 0;
            self.report("write", 0, writes);
            let mut results = stream::iter(batches)
                .map(|b| self.write_batch(&planned, b))
                .buffer_unordered(self.sweep.concurrency.max(1));
            while let Some(result) = results.next().await {
                for (i, r) in result {
                    done += 1;
                    match r {
                        Ok(()) => written[i] = true,
                        Err(e) => errors[i] = Some(e),
                    }
                }
                self.report("write", done, writes);
            }
        }
        for (i, p) in planned.iter().enumerate() {
            let elapsed = p.started.elapsed().as_millis() as u64;
            let mut record = Record::from_plan(Cloud::Aws, &policy.policy, &p.plan, written[i], elapsed);
            if let Some(e) = errors[i].take() {
                record.status = if e.class == ErrorClass::TagLimit { Status::LimitExceeded } else { Status::Failed };
                record.error = Some(e.to_string());
            }
            out.push(record);
        }
        if !self.dry_run {
            let standing = self.store.standing().await;
            let report = StatusReport::of_sweep(
                Cloud::Aws,
                &self.store.location,
                &policy.policy.version,
                standing,
                &out.records,
            );
            if let Err(e) = self.store.write_status(&self.tagger.clients, &report).await {
                tracing::warn!(error = %e, "could not write the status report");
            }
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
            let api = match p.resource.kind.as_str() {
                k if k.starts_with("ec2:") => BatchApi::Ec2,
                k if k.starts_with("elasticloadbalancing:") => BatchApi::Elbv2,
                _ => BatchApi::Single,
            };
            if api == BatchApi::Single {
                singles.push(Batch { api, set: p.plan.set.clone(), members: vec![i] });
            } else {
                groups.entry((api, &p.plan.set)).or_default().push(i);
            }
        }
        let mut batches = singles;
        for ((api, set), members) in groups {
            let size = match api {
                BatchApi::Ec2 => self.sweep.ec2_batch,
                _ => self.sweep.elbv2_batch,
            };
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
                Ok(()) => done.extend(members.into_iter().map(|i| (i, Ok(())))),
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

    async fn send(&self, planned: &[Planned], api: BatchApi, set: &TagMap, members: &[usize]) -> Result<(), AwsError> {
        let mut attempt = 0;
        loop {
            let result = match api {
                BatchApi::Ec2 => {
                    let ids: Vec<&str> = members.iter().map(|i| planned[*i].resource.id.as_str()).collect();
                    self.tagger.ec2_create_tags(&ids, set).await
                }
                BatchApi::Elbv2 => {
                    let arns: Vec<&str> = members.iter().map(|i| planned[*i].resource.id.as_str()).collect();
                    self.tagger.elbv2_add_tags(&arns, set).await
                }
                BatchApi::Single => {
                    let p = &planned[members[0]];
                    self.tagger.write(&p.resource, set, &p.current).await
                }
            };
            match result {
                Err(e) if e.class == ErrorClass::Throttled && attempt < self.sweep.throttle_retries => {
                    let wait = self.sweep.throttle_backoff.saturating_mul(1 << attempt);
                    tokio::time::sleep(wait + jitter(wait)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Owned resources with their current tags: the Tagging API for EC2, S3 and ELBv2, plus IAM
    /// listings, which that API does not cover.
    async fn discover(&self, infra_id: &str) -> Result<Vec<(ResourceRef, TagMap)>, AwsError> {
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
                .resources_per_page(100)
                .set_pagination_token(token.clone())
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("tag:GetResources", &owner_key, e))?;
            for m in page.resource_tag_mapping_list() {
                let Some(r) = m.resource_arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                let supported =
                    r.kind.starts_with("ec2:") || r.kind == "s3:bucket" || r.kind.starts_with("elasticloadbalancing:");
                if supported {
                    let tags = m.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
                    found.push((r, tags));
                }
            }
            self.report("discover", found.len() as u64, 0);
            token = page.pagination_token().filter(|t| !t.is_empty()).map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        let iam = self.tagger.list_iam().await?;
        // Listings carry no tags: read them, keep what this cluster owns.
        let reads = stream::iter(iam)
            .map(|r| async move { self.tagger.read(&r).await.map(|tags| (r, tags)) })
            .buffer_unordered(self.sweep.concurrency.max(1))
            .collect::<Vec<_>>()
            .await;
        for read in reads {
            let (r, tags) = read?;
            if tags.get(&owner_key).map(String::as_str) == Some(OWNED) {
                found.push((r, tags));
            }
        }
        self.report("discover", found.len() as u64, found.len() as u64);
        Ok(found)
    }
}

/// Up to a quarter of `wait`, from the clock's low bits: enough to spread retries apart.
fn jitter(wait: Duration) -> Duration {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    wait.mul_f64(f64::from(nanos % 1000) / 4000.0)
}
