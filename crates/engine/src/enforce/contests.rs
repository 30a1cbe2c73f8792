//! The engine's side of never fighting another controller (`tagwarden_core::contest`): which keys
//! of a plan are held back, and the count of corrections behind it.
//!
//! Only a change made by a controller the deployment yields to ([`Engine::yield_to`]) is counted,
//! and never on a key the cluster's policy marks `neverYield`: any other change is drift,
//! corrected every time. The count lives in each cluster's contest state, an object of the policy
//! store apart from every publisher's folder (`PolicySource::contest_state_name`), so it outlives
//! the function's instances and cold starts, every path (events, sweeps, parts) reads the same
//! contests, and nobody who can only write the status report (which shows a copy) can forge one.
//! Keeping it costs calls on the policy store only (never the tagged resources' budget), and only
//! where a fight may be starting: a correction answering a yielded-to controller's tag change (one
//! read and one conditional write of the state, and the report's copy), a key with an entry there
//! already, or one this instance corrected before within the window. An Azure write (which may be a
//! creation) is remembered by the instance alone until it happens again. The state is read at most
//! once per [`FRESH`] per cluster and instance, and only when a plan writes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Adapter, Engine};
use crate::policy_store::PolicySource;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::contest::{self, Contest, Correction, Step};
use tagwarden_core::plan::Plan;
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::policy::Policy;

/// How long a cluster's contests as read are used before they are read again: another instance
/// may have contested a key (or an operator lifted one) since, so at most one more correction per
/// instance in this time.
pub const FRESH: Duration = Duration::from_secs(60);

/// Entries of this instance's memory past which the oldest are forgotten.
const REMEMBERED: usize = 10_000;

/// Why a resource is reconciled: only a correction answering somebody's change is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause<'a> {
    /// A tag change (CloudTrail's tagging call, `Tag Change on Resource`, Azure's `tags/write`),
    /// made by `by` when the event named a caller.
    TagChange { by: Option<&'a str> },
    /// An Azure resource write: a creation or an update, which Event Grid does not tell apart
    /// (both are `<type>/write`), and an update may replace the tags. Counted, but kept in the
    /// contest state only from its second correction, so a creation costs no write of it.
    Write { by: Option<&'a str> },
    /// An AWS creation, a sweep, a policy change: the first tagging, or nobody's change.
    Other,
}

impl<'a> Cause<'a> {
    /// Of two events naming one resource, the one whose correction counts most.
    pub fn strongest(self, other: Cause<'a>) -> Cause<'a> {
        let rank = |c: &Cause<'_>| match c {
            Cause::TagChange { by: Some(_) } => 3,
            Cause::TagChange { by: None } => 2,
            Cause::Write { .. } => 1,
            Cause::Other => 0,
        };
        if rank(&other) > rank(&self) {
            other
        } else {
            self
        }
    }
}

/// One cluster's contests as last read or written: when, under which policy fingerprint.
struct Kept {
    at: Instant,
    fingerprint: String,
    contests: Vec<Contest>,
}

/// Each cluster's contests as last read or written, and this instance's own corrections.
#[derive(Default)]
pub struct Contests {
    /// By cluster (infraID).
    kept: Mutex<HashMap<String, Kept>>,
    /// By (policy fingerprint and resource, key): when this instance corrected it, within the
    /// window, until the contest state has an entry for it.
    memory: Mutex<HashMap<(String, String), Vec<u64>>>,
}

impl<A: Adapter> Engine<A> {
    /// Seconds since the epoch, by the engine's clock.
    fn now(&self) -> u64 {
        (self.clock)()
    }

    /// Whether a change of `key` by `writer` may count toward a contest under `policy`.
    fn yields(&self, policy: &Policy, key: &str, writer: Option<&str>) -> bool {
        contest::may_yield(&self.yield_to, &policy.never_yield, key, writer)
    }

    /// Take the contested keys out of `plan` (for cluster `policy`): those held in the contest
    /// state, still by a controller the deployment yields to and not `neverYield`. When `cause` is
    /// such a controller's change, a key already corrected [`contest::CORRECTIONS`] times within
    /// the window is contested now (written to the state), and held back too. Nothing is read
    /// unless the plan writes. The correction is counted once written ([`Engine::count_correction`]).
    pub(super) async fn hold_contested(&self, policy: &LoadedPolicy, plan: &mut Plan, cause: Cause<'_>) {
        if !plan.writes() {
            return;
        }
        let fold = self.cloud() == Cloud::Azure;
        let kept = self.kept_contests(policy).await;
        for c in kept.iter().filter(|c| c.is_contested()) {
            if plan.set.contains_key(&c.key)
                && c.is_about(&plan.resource, &c.key, fold)
                && self.yields(&policy.policy, &c.key, c.writer.as_deref())
            {
                plan.hold(&c.key);
            }
        }
        let Some(by) = counted(cause) else { return };
        // Audited, nothing will be written: nothing is counted toward a contest.
        if self.audits_all(&policy.policy) || !plan.writes() || !self.yield_to.accepts(by) {
            return;
        }
        let now = self.now();
        let id = identity(&policy.fingerprint, &plan.resource, fold);
        // Only a key at the count needs the state; the kept copy says which (this instance's
        // own writes of the state keep it current, another's are at most FRESH old).
        let at_count: Vec<(String, Vec<u64>)> = plan
            .set
            .keys()
            .filter(|k| !policy.policy.audits_key(self.cloud(), k) && self.yields(&policy.policy, k, by))
            .map(|k| (k.clone(), self.remembered(&id, k, now)))
            .filter(|(k, earlier)| {
                let c = Correction { resource: &plan.resource, key: k, policy: &policy.fingerprint, writer: by, fold };
                contest::reached(&kept, &c, earlier, now)
            })
            .collect();
        if at_count.is_empty() {
            return;
        }
        let decide = |contests: &mut Vec<Contest>| -> Vec<(Step, Option<u64>)> {
            at_count
                .iter()
                .map(|(key, earlier)| {
                    let c = Correction { resource: &plan.resource, key, policy: &policy.fingerprint, writer: by, fold };
                    let was = contest::held(contests, &plan.resource, key, fold).is_some();
                    let step = contest::check(contests, &c, earlier, now);
                    let started = (step == Step::Contest && !was)
                        .then(|| contest::held(contests, &plan.resource, key, fold).and_then(|e| e.hold_until))
                        .flatten();
                    (step, started)
                })
                .collect()
        };
        let steps = self.update_kept(policy, kept, now, decide).await;
        for ((key, _), (step, started)) in at_count.iter().zip(steps) {
            if step != Step::Contest {
                continue;
            }
            if let Some(hold_until) = started {
                // The moment a contest starts: an alarm's line, naming the key, the resource and who.
                tracing::warn!(
                    cluster = policy.infra_id,
                    resource = plan.resource,
                    key,
                    writer = by.unwrap_or(contest::UNKNOWN_WRITER),
                    hold_until,
                    "contest started: a controller the deployment yields to keeps changing this key; tagwarden holds it back until hold_until, then corrects it again"
                );
            }
            plan.hold(key);
        }
    }

    /// Count the correction `plan` wrote, when `cause` is the change of a controller the deployment
    /// yields to (keys the policy marks `neverYield` are never counted). Kept in the contest state
    /// when the event named its caller (a tag change), the key has an entry there, or this
    /// instance corrected it within the window; an Azure write (which may be a creation) only in
    /// this instance's memory, until it happens again.
    pub(super) async fn count_correction(&self, policy: &LoadedPolicy, plan: &Plan, cause: Cause<'_>) {
        let Some(by) = counted(cause) else { return };
        if self.audits_all(&policy.policy) || plan.set.is_empty() || !self.yield_to.accepts(by) {
            return;
        }
        let eager = matches!(cause, Cause::TagChange { by: Some(_) });
        let fold = self.cloud() == Cloud::Azure;
        let now = self.now();
        let id = identity(&policy.fingerprint, &plan.resource, fold);
        let kept = self.kept_contests(policy).await;
        /// A written key, and this instance's earlier corrections of it.
        type Written = (String, Vec<u64>);
        let keys: Vec<Written> = plan
            .set
            .keys()
            .filter(|k| self.yields(&policy.policy, k, by))
            .map(|k| (k.clone(), self.remembered(&id, k, now)))
            .collect();
        let (suspect, calm): (Vec<&Written>, Vec<&Written>) = keys.iter().partition(|(k, earlier)| {
            eager || !earlier.is_empty() || kept.iter().any(|c| c.is_about(&plan.resource, k, fold))
        });
        let calm: Vec<String> = calm.into_iter().map(|(k, _)| k.clone()).collect();
        self.remember(&id, &calm, now);
        if suspect.is_empty() {
            return;
        }
        // From here the state's entry holds the key's count (this instance's earlier corrections
        // folded in): the memory would count them twice, and outlive an operator's lift.
        let entered: Vec<String> = suspect.iter().map(|(k, _)| k.clone()).collect();
        self.forget(&id, &entered);
        let record = |contests: &mut Vec<Contest>| {
            for (key, earlier) in &suspect {
                let c = Correction { resource: &plan.resource, key, policy: &policy.fingerprint, writer: by, fold };
                contest::record(contests, &c, earlier, now);
            }
        };
        self.update_kept(policy, kept, now, record).await;
    }

    /// Change cluster `policy`'s contests in its contest state with `change` (the state read
    /// fresh), and keep what was written; if the state cannot be written, change the kept copy
    /// `kept` instead, so a fight is still stopped in this instance (until the copy is read
    /// again, at most [`FRESH`] later: only the state is shared). What `change` answered.
    async fn update_kept<T>(
        &self,
        policy: &LoadedPolicy,
        kept: Vec<Contest>,
        now: u64,
        mut change: impl FnMut(&mut Vec<Contest>) -> T,
    ) -> T {
        if self.store.source.contest_state_name(&policy.infra_id).is_some() {
            match crate::status_store::update_contests(&self.store, policy, now, &mut change).await {
                Ok((answer, written)) => {
                    self.keep(policy, written);
                    return answer;
                }
                Err(e) => tracing::warn!(error = %e, "could not keep the count of corrections in the contest state"),
            }
        }
        let mut local = kept;
        let answer = change(&mut local);
        // Not stamped fresh: the state is read again when the copy was due anyway.
        let mut all = self.contests.kept.lock().unwrap_or_else(|e| e.into_inner());
        match all.get_mut(&policy.infra_id) {
            Some(k) => k.contests = local,
            None => {
                let at = Instant::now().checked_sub(FRESH).unwrap_or_else(Instant::now);
                all.insert(
                    policy.infra_id.clone(),
                    Kept { at, fingerprint: policy.fingerprint.clone(), contests: local },
                );
            }
        }
        answer
    }

    /// Cluster `policy`'s contests in force: as kept if read within [`FRESH`] under the same
    /// policy, else read from its contest state (never from the status report, which anyone who
    /// can write it could have forged). If the state cannot be read, or the store keeps none, the
    /// copy this instance kept (however old) holds its contests back.
    async fn kept_contests(&self, policy: &LoadedPolicy) -> Vec<Contest> {
        let now = self.now();
        let old = {
            let kept = self.contests.kept.lock().unwrap_or_else(|e| e.into_inner());
            let mine = kept.get(&policy.infra_id).filter(|k| k.fingerprint == policy.fingerprint);
            if let Some(k) = mine.filter(|k| k.at.elapsed() < FRESH) {
                return contest::in_force(k.contests.clone(), &policy.fingerprint, now);
            }
            mine.map(|k| k.contests.clone()).unwrap_or_default()
        };
        if self.store.source.contest_state_name(&policy.infra_id).is_none() {
            return contest::in_force(old, &policy.fingerprint, now);
        }
        match crate::status_store::read_contest_state(&self.store, &policy.infra_id).await {
            Ok(state) => {
                let contests = contest::in_force(state.contests, &policy.fingerprint, now);
                self.keep(policy, contests.clone());
                contests
            }
            // Not kept as read: the next plan that writes tries the state again.
            Err(e) => {
                tracing::warn!(error = %e, "could not read the contest state");
                contest::in_force(old, &policy.fingerprint, now)
            }
        }
    }

    fn keep(&self, policy: &LoadedPolicy, contests: Vec<Contest>) {
        let mut kept = self.contests.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.insert(
            policy.infra_id.clone(),
            Kept { at: Instant::now(), fingerprint: policy.fingerprint.clone(), contests },
        );
    }

    /// This instance's corrections of `key` on resource `id` within the window.
    fn remembered(&self, id: &str, key: &str, now: u64) -> Vec<u64> {
        let memory = self.contests.memory.lock().unwrap_or_else(|e| e.into_inner());
        let times = memory.get(&(id.to_string(), key.to_string())).map(Vec::as_slice).unwrap_or_default();
        times.iter().copied().filter(|&t| t + contest::WINDOW_SECS > now).collect()
    }

    fn forget(&self, id: &str, keys: &[String]) {
        let mut memory = self.contests.memory.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            memory.remove(&(id.to_string(), key.clone()));
        }
    }

    /// Remember this instance's correction of `keys` on resource `id` at `now`.
    fn remember(&self, id: &str, keys: &[String], now: u64) {
        let mut memory = self.contests.memory.lock().unwrap_or_else(|e| e.into_inner());
        if memory.len() >= REMEMBERED {
            memory.retain(|_, ts| ts.iter().any(|&t| t + contest::WINDOW_SECS > now));
            if memory.len() >= REMEMBERED {
                memory.clear();
            }
        }
        for key in keys {
            let ts = memory.entry((id.to_string(), key.clone())).or_default();
            ts.retain(|&t| t + contest::WINDOW_SECS > now);
            ts.push(now);
        }
    }
}

/// Who made the change a correction answers, if it is counted at all.
fn counted(cause: Cause<'_>) -> Option<Option<&str>> {
    match cause {
        Cause::TagChange { by } | Cause::Write { by } => Some(by),
        Cause::Other => None,
    }
}

/// A resource's key in this instance's memory, under the policy (`fingerprint`) its corrections
/// were made for, since a new policy starts every count anew; ARM IDs compare without case.
fn identity(fingerprint: &str, resource: &str, fold: bool) -> String {
    let resource = if fold { resource.to_ascii_lowercase() } else { resource.to_string() };
    format!("{fingerprint}\n{resource}")
}

/// Why a record's keys were held back: which keys, and how to lift it.
pub(super) fn reason(plan: &Plan) -> Option<String> {
    (!plan.held.is_empty()).then(|| {
        format!(
            "contested: a controller the deployment yields to keeps changing {} (tagwarden corrected it {} times within {} min), so tagwarden holds it back until the hold ends ({} h the first time, doubling while the fight goes on, at most {} h), then corrects it again; the status report names the writer. A policy change lifts it, or `tagwarden status --lift {}`",
            plan.held.join(", "),
            contest::CORRECTIONS,
            contest::WINDOW_SECS / 60,
            contest::FIRST_HOLD_SECS / 3600,
            contest::MAX_HOLD_SECS / 3600,
            plan.resource
        )
    })
}
