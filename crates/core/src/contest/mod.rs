//! Never fight another controller: a key that tagwarden keeps correcting on one resource because a
//! controller the deployment yields to keeps changing or removing it is *contested*, and tagwarden
//! stops writing it for a while.
//!
//! Some controllers remove what they did not put there: the AWS Load Balancer Controller "owns all
//! the tags of the managed AWS resources, unsolicited tags are removed" (aws-load-balancer-operator's
//! API), and CAPA and CAPZ remove additional tags they applied earlier and no longer want (the
//! `sigs.k8s.io/cluster-api-provider-aws-last-applied-tags` annotation). Correcting such a key again
//! after every removal is a loop between two controllers, each spending the account's request
//! budget forever.
//!
//! The rules:
//!
//! - **Only for the controllers the deployment yields to** ([`YieldTo`], `TAGWARDEN_YIELD_TO`):
//!   a change by any other principal, or by one the event does not name, is drift, corrected every
//!   time and never counted. So nobody switches enforcement off by removing a tag again and again.
//! - **Never for the keys the policy marks `neverYield`**: corrected every time, whoever writes.
//! - tagwarden counts its *corrections* of a key on a resource — written answers to a change a
//!   yielded-to controller made (a tag change; an Azure write, which may also be a creation), never
//!   the first tagging after an AWS creation event, never a sweep's — and once it has made
//!   [`CORRECTIONS`] within [`WINDOW_SECS`], the next one is not made: the key is contested, with
//!   who changed it.
//! - **A contest is a hold, not for good**: the first holds [`FIRST_HOLD_SECS`]; then tagwarden
//!   corrects again (the count starts anew). If the controller fights again, the next hold is twice
//!   as long, up to [`MAX_HOLD_SECS`] ([`hold_secs`]); a key left alone for [`MAX_HOLD_SECS`] after
//!   its last hold forgets its back-off. A new policy version, or an operator's lift
//!   (`tagwarden status --lift`, recorded with who and when, [`Lift`]), ends it at once.
//!
//! The state ([`ContestState`]) is kept in an object only the function (and the operators the
//! deployment names) may write, apart from the status report, which only shows a copy: a forged
//! entry in the report changes nothing.
//!
//! Pure: the engine (`tagwarden_engine::contests`) reads and writes the state.

use serde::{Deserialize, Serialize};

mod yield_to;

pub use yield_to::{may_yield, YieldTo, YieldToError, AWS_DEFAULT_YIELD_TO, YIELD_TO_NONE};

/// Corrections of one key on one resource within [`WINDOW_SECS`] after which the next is not made.
pub const CORRECTIONS: usize = 3;

/// The window the corrections are counted in, in seconds.
pub const WINDOW_SECS: u64 = 3600;

/// How long the first contest of a key on a resource holds, in seconds.
pub const FIRST_HOLD_SECS: u64 = 3600;

/// The longest hold, in seconds; and how long after its last hold a key forgets its back-off.
pub const MAX_HOLD_SECS: u64 = 86_400;

/// Lifts the state keeps (the most recent), for the status report to show.
pub const MAX_LIFTS: usize = 20;

/// Entries the state keeps at most (the contested first): a bound on the object's size.
pub const MAX_ENTRIES: usize = 1_000;

/// What a contested entry names when no event said who changed the key. Such a change is never
/// counted any more; kept for entries written by earlier versions.
pub const UNKNOWN_WRITER: &str = "unknown (the events named no caller)";

/// How long the `holds`-th hold of a key lasts (1-based): [`FIRST_HOLD_SECS`], doubled each time,
/// at most [`MAX_HOLD_SECS`].
pub fn hold_secs(holds: u32) -> u64 {
    let doublings = holds.saturating_sub(1).min(32);
    FIRST_HOLD_SECS.saturating_mul(1u64 << doublings).min(MAX_HOLD_SECS)
}

/// One key on one resource that tagwarden has corrected recently, or holds back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contest {
    /// The resource's ARN or ARM ID.
    pub resource: String,
    pub key: String,
    /// The fingerprint of the cluster's policy the corrections were made under: a new policy
    /// lifts the contest.
    pub policy: String,
    /// When tagwarden corrected the key (seconds since the epoch), within the window.
    pub corrections: Vec<u64>,
    /// Who changed or removed the key, as the last event that named a caller said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    /// When tagwarden stopped correcting it (seconds since the epoch); `None` while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contested_since: Option<u64>,
    /// When the current hold ends (or the last one ended), seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<u64>,
    /// How many holds the key has had on this resource: the back-off.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub holds: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Contest {
    pub fn is_contested(&self) -> bool {
        self.contested_since.is_some()
    }

    /// Whether this entry is about `key` on `resource` (`fold`: ARM IDs compare without case).
    pub fn is_about(&self, resource: &str, key: &str, fold: bool) -> bool {
        self.key == key && if fold { self.resource.eq_ignore_ascii_case(resource) } else { self.resource == resource }
    }

    /// Who to name: the writer, or that no event said.
    pub fn writer(&self) -> &str {
        self.writer.as_deref().unwrap_or(UNKNOWN_WRITER)
    }
}

/// An operator's lift of contests, as the state records it and the status report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lift {
    pub resource: String,
    /// The key lifted; `None`: every key of the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The principal that lifted it, as its credentials resolved (or `unknown`).
    pub by: String,
    /// When, in seconds since the epoch.
    pub at: u64,
    /// How many contests it lifted.
    pub lifted: usize,
}

/// One cluster's contest state: the object only the function and the deployment's operators
/// write, apart from the status report (which shows a copy and is never read back for it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContestState {
    /// The cluster's infraID.
    #[serde(default)]
    pub cluster: String,
    /// When it was last written, in seconds since the epoch.
    #[serde(default)]
    pub updated_at: u64,
    #[serde(default)]
    pub contests: Vec<Contest>,
    /// The most recent operators' lifts, newest last ([`MAX_LIFTS`]).
    #[serde(default)]
    pub lifts: Vec<Lift>,
}

impl ContestState {
    /// Record a lift, keeping the most recent [`MAX_LIFTS`].
    pub fn record_lift(&mut self, lift: Lift) {
        self.lifts.push(lift);
        let over = self.lifts.len().saturating_sub(MAX_LIFTS);
        self.lifts.drain(..over);
    }

    /// Keep at most [`MAX_ENTRIES`] entries: the contested first, then the most recently corrected.
    pub fn bound(&mut self) {
        if self.contests.len() <= MAX_ENTRIES {
            return;
        }
        self.contests.sort_by_key(|c| {
            (!c.is_contested(), std::cmp::Reverse(c.corrections.iter().max().copied().unwrap_or_default()))
        });
        self.contests.truncate(MAX_ENTRIES);
    }
}

/// The entries still in force under the cluster's policy `fingerprint` at `now`: a contest made
/// under another policy is lifted; a hold that has ended is no longer contested (its corrections
/// are forgotten, so the count starts anew, and its back-off is kept); corrections older than the
/// window are forgotten; an entry with nothing left goes, and so does a back-off whose last hold
/// ended [`MAX_HOLD_SECS`] ago.
pub fn in_force(contests: Vec<Contest>, fingerprint: &str, now: u64) -> Vec<Contest> {
    contests
        .into_iter()
        .filter(|c| c.policy == fingerprint)
        .filter_map(|mut c| {
            if c.is_contested() && c.hold_until.is_none_or(|u| now >= u) {
                c.contested_since = None;
                c.corrections.clear();
            }
            c.corrections.retain(|&t| t + WINDOW_SECS > now && t <= now);
            if !c.is_contested() && c.hold_until.is_none_or(|u| now >= u.saturating_add(MAX_HOLD_SECS)) {
                (c.holds, c.hold_until) = (0, None);
            }
            (c.is_contested() || !c.corrections.is_empty() || c.holds > 0).then_some(c)
        })
        .collect()
}

/// The contested entry for `key` on `resource`, if tagwarden must not write it.
pub fn held<'c>(contests: &'c [Contest], resource: &str, key: &str, fold: bool) -> Option<&'c Contest> {
    contests.iter().find(|c| c.is_contested() && c.is_about(resource, key, fold))
}

/// What to do about one correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Make it (and [`record`] it once written).
    Correct,
    /// Do not: [`CORRECTIONS`] were made within the window; the key is contested (held) now.
    Contest,
}

/// One correction: of `key` on `resource`, under the cluster's policy `policy` (its fingerprint),
/// answering a change by `writer` when the event said who; `fold`: ARM IDs compare without case.
#[derive(Debug, Clone, Copy)]
pub struct Correction<'a> {
    pub resource: &'a str,
    pub key: &'a str,
    pub policy: &'a str,
    pub writer: Option<&'a str>,
    pub fold: bool,
}

/// Whether correction `c` may be made at `now`, given `contests` (already [`in_force`]) and
/// `earlier`, the corrections this function instance remembers making before the key had an entry:
/// once [`CORRECTIONS`] were made within the window the key is marked contested (naming the
/// writer), held for the next hold of its back-off ([`hold_secs`]), and the answer is
/// [`Step::Contest`]. The caller counts only corrections [`may_yield`] allows. Only a correction that was written is counted
/// ([`record`]): a write that failed is tried again, not mistaken for a fight.
pub fn check(contests: &mut Vec<Contest>, c: &Correction<'_>, earlier: &[u64], now: u64) -> Step {
    if !reached(contests, c, earlier, now) {
        return Step::Correct;
    }
    let e = entry(contests, c, earlier, now);
    if e.is_contested() {
        return Step::Contest;
    }
    e.holds = e.holds.saturating_add(1);
    e.contested_since = Some(now);
    e.hold_until = Some(now.saturating_add(hold_secs(e.holds)));
    if let Some(w) = c.writer {
        e.writer = Some(w.to_string());
    }
    Step::Contest
}

/// Whether [`check`] would answer [`Step::Contest`], without marking anything.
pub fn reached(contests: &[Contest], c: &Correction<'_>, earlier: &[u64], now: u64) -> bool {
    match contests.iter().find(|e| e.is_about(c.resource, c.key, c.fold)) {
        Some(e) => e.is_contested() || recent(&e.corrections, now).count() >= CORRECTIONS,
        None => recent(earlier, now).count() >= CORRECTIONS,
    }
}

/// Count correction `c`, written at `now` (`earlier`: as for [`check`]).
pub fn record(contests: &mut Vec<Contest>, c: &Correction<'_>, earlier: &[u64], now: u64) {
    let e = entry(contests, c, earlier, now);
    e.corrections.push(now);
    if let Some(w) = c.writer {
        e.writer = Some(w.to_string());
    }
}

fn recent(times: &[u64], now: u64) -> impl Iterator<Item = &u64> {
    times.iter().filter(move |&&t| t + WINDOW_SECS > now && t <= now)
}

/// The entry for `c`, made from `earlier` if there is none yet.
fn entry<'c>(contests: &'c mut Vec<Contest>, c: &Correction<'_>, earlier: &[u64], now: u64) -> &'c mut Contest {
    let at = match contests.iter().position(|e| e.is_about(c.resource, c.key, c.fold)) {
        Some(at) => at,
        None => {
            contests.push(Contest {
                resource: c.resource.to_string(),
                key: c.key.to_string(),
                policy: c.policy.to_string(),
                corrections: recent(earlier, now).copied().collect(),
                writer: None,
                contested_since: None,
                hold_until: None,
                holds: 0,
            });
            contests.len() - 1
        }
    };
    &mut contests[at]
}

/// Lift the contests on `resource` (only `key`'s, if given): an operator's acknowledgement. The
/// count and the back-off start again from nothing. How many were lifted.
pub fn lift(contests: &mut Vec<Contest>, resource: &str, key: Option<&str>) -> usize {
    let before = contests.len();
    contests.retain(|c| !(c.resource.eq_ignore_ascii_case(resource) && key.is_none_or(|k| c.key == k)));
    before - contests.len()
}

#[cfg(test)]
mod tests;
