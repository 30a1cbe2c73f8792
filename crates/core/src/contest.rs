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

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cloud::Cloud;

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

/// The writers a deployment yields to (`TAGWARDEN_YIELD_TO`): principal patterns with `*` (any
/// run of characters, `/` too) and `?` (one character), matched without case against the writer an
/// event names (CloudTrail's `userIdentity.arn`; on Azure the caller's UPN, `appid` claim or
/// principal id). Only such a writer's changes are counted toward a contest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YieldTo {
    patterns: Vec<String>,
}

/// The AWS controllers tagwarden yields to unless told otherwise: the AWS Load Balancer Controller
/// and Cluster API's AWS provider (CAPA), by the role sessions they act through.
pub const AWS_DEFAULT_YIELD_TO: &[&str] = &[
    "arn:aws*:sts::*:assumed-role/*aws-load-balancer-controller*/*",
    "arn:aws*:sts::*:assumed-role/*controllers.cluster-api-provider-aws.sigs.k8s.io*/*",
    "arn:aws*:sts::*:assumed-role/*capa-controller*/*",
];

/// What `TAGWARDEN_YIELD_TO` is set to to yield to no controller at all.
pub const YIELD_TO_NONE: &str = "none";

impl YieldTo {
    /// Yield to no one: every change is drift.
    pub fn none() -> Self {
        YieldTo { patterns: Vec::new() }
    }

    /// The default for `cloud`: on AWS, [`AWS_DEFAULT_YIELD_TO`]; on Azure none, since an Azure
    /// event names a service principal by its application (client) id only, which differs in every
    /// tenant: a deployment names CAPZ's there.
    pub fn default_for(cloud: Cloud) -> Self {
        match cloud {
            Cloud::Aws => YieldTo { patterns: AWS_DEFAULT_YIELD_TO.iter().map(|p| p.to_string()).collect() },
            Cloud::Azure => Self::none(),
        }
    }

    /// Comma-separated patterns ([`YIELD_TO_NONE`]: none). The error names the bad pattern and why.
    pub fn parse(list: &str) -> Result<Self, YieldToError> {
        if list.trim().eq_ignore_ascii_case(YIELD_TO_NONE) {
            return Ok(Self::none());
        }
        let mut patterns = Vec::new();
        for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if p.len() > 512 {
                return Err(YieldToError::TooLong(p.to_string()));
            }
            if let Some(c) = p.chars().find(|c| c.is_whitespace() || c.is_control()) {
                return Err(YieldToError::Space { pattern: p.to_string(), found: c });
            }
            if p.chars().all(|c| c == '*' || c == '?') {
                return Err(YieldToError::Everyone(p.to_string()));
            }
            patterns.push(p.to_string());
        }
        if patterns.is_empty() {
            return Err(YieldToError::Empty);
        }
        Ok(YieldTo { patterns })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether a change by `writer` may count toward a contest: an event that names no caller
    /// never does.
    pub fn accepts(&self, writer: Option<&str>) -> bool {
        writer.is_some_and(|w| self.patterns.iter().any(|p| wildcard(p, w)))
    }
}

/// Why a list of patterns is no `YieldTo` (`YieldTo::parse`): the bad pattern and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YieldToError {
    #[error("pattern {0:?} is longer than 512 characters")]
    TooLong(String),
    #[error("pattern {pattern:?} holds {found:?}; a principal has no spaces or control characters")]
    Space { pattern: String, found: char },
    #[error(
        "pattern {0:?} matches every writer, which would let anyone who can remove a tag stop its enforcement; name the controllers' roles (e.g. arn:aws:sts::*:assumed-role/*aws-load-balancer-controller*/*)"
    )]
    Everyone(String),
    #[error("names no pattern; to yield to no controller, set it to {YIELD_TO_NONE}")]
    Empty,
}

/// `*`/`?` wildcard match, ASCII case-insensitive.
fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let t: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether a correction of `key` may count toward a contest: its writer is one the deployment
/// yields to, and the policy does not mark the key `neverYield` (`fold`: keys compare without
/// case, as on Azure).
pub fn may_yield(yield_to: &YieldTo, never_yield: &BTreeSet<String>, key: &str, writer: Option<&str>) -> bool {
    yield_to.accepts(writer) && !never_yield.iter().any(|k| k.eq_ignore_ascii_case(key))
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    const R: &str = "arn:aws:elasticloadbalancing:us-east-1:111122223333:loadbalancer/app/web/1";
    const LBC: &str = "arn:aws:sts::111122223333:assumed-role/aws-load-balancer-controller/1700000000";

    /// [`check`] of key `key` on `resource` under policy `fp`, and [`record`] if it may be written.
    fn count(
        book: &mut Vec<Contest>,
        resource: &str,
        key: &str,
        writer: Option<&str>,
        earlier: &[u64],
        now: u64,
    ) -> Step {
        let fold = resource.starts_with('/');
        let c = Correction { resource, key, policy: "fp", writer, fold };
        let step = check(book, &c, earlier, now);
        if step == Step::Correct {
            record(book, &c, earlier, now);
        }
        step
    }

    #[test]
    fn a_controller_that_removes_the_key_each_time_is_stopped_after_the_count() {
        let mut book = Vec::new();
        let steps: Vec<Step> = (0..6).map(|i| count(&mut book, R, "team", Some(LBC), &[], 1000 + i * 60)).collect();
        assert_eq!(steps[..CORRECTIONS], [Step::Correct; CORRECTIONS]);
        assert!(steps[CORRECTIONS..].iter().all(|s| *s == Step::Contest), "{steps:?}");
        let c = held(&book, R, "team", false).expect("contested");
        assert_eq!((c.writer(), c.contested_since, c.corrections.len()), (LBC, Some(1000 + 3 * 60), CORRECTIONS));
        assert_eq!((c.holds, c.hold_until), (1, Some(1000 + 3 * 60 + FIRST_HOLD_SECS)), "the first hold: an hour");
        assert!(held(&book, R, "env", false).is_none(), "only that key");
    }

    #[test]
    fn ordinary_drift_is_corrected_every_time() {
        // One edit a day, for a week: never contested.
        let mut book = Vec::new();
        for day in 0..7u64 {
            let now = 1_000_000 + day * 86_400;
            book = in_force(book, "fp", now);
            assert_eq!(count(&mut book, R, "team", None, &[], now), Step::Correct);
        }
        // Three edits within the hour are corrected; the fourth is the contest.
        let mut book = Vec::new();
        let now = 5_000_000;
        for i in 0..3 {
            assert_eq!(count(&mut book, R, "team", None, &[], now + i * 600), Step::Correct);
        }
        assert_eq!(count(&mut book, R, "team", None, &[], now + 1800), Step::Contest);
        assert_eq!(held(&book, R, "team", false).map(Contest::writer), Some(UNKNOWN_WRITER));
    }

    #[test]
    fn a_policy_change_or_an_operator_lifts_a_contest() {
        let mut book = Vec::new();
        for i in 0..4 {
            count(&mut book, R, "team", Some(LBC), &[], 100 + i);
        }
        assert!(held(&book, R, "team", false).is_some());
        assert!(in_force(book.clone(), "fp-2", 200).is_empty(), "a new policy lifts it");
        let later = in_force(book.clone(), "fp", 100 + 10 * WINDOW_SECS);
        assert!(held(&later, R, "team", false).is_none(), "a contest ages out: its hold ends");
        let mut lifted = book.clone();
        assert_eq!(lift(&mut lifted, &R.to_uppercase(), Some("env")), 0, "another key");
        assert_eq!(lift(&mut lifted, R, Some("team")), 1);
        assert!(lifted.is_empty());
        assert_eq!(count(&mut lifted, R, "team", None, &[], 300), Step::Correct, "counted anew");
    }

    #[test]
    fn corrections_remembered_elsewhere_count_and_arm_ids_fold_case() {
        let id = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb";
        let mut book = Vec::new();
        assert_eq!(count(&mut book, id, "team", None, &[90, 95], 100), Step::Correct);
        assert_eq!(book[0].corrections, [90, 95, 100]);
        assert_eq!(count(&mut book, &id.to_uppercase(), "team", None, &[], 101), Step::Contest);
        assert_eq!(book.len(), 1, "one entry whatever the casing");
        // Remembered corrections alone reach the count: contested without an entry before.
        let mut book = Vec::new();
        let c = Correction { resource: id, key: "env", policy: "fp", writer: Some("capz"), fold: true };
        assert_eq!(check(&mut book, &c, &[1, 2, 3], 4), Step::Contest);
        assert_eq!((book[0].writer(), book[0].corrections.len()), ("capz", 3));
    }

    #[test]
    fn a_write_that_failed_is_not_counted() {
        // Checked four times, written (recorded) never: still correctable.
        let mut book = Vec::new();
        let c = Correction { resource: R, key: "team", policy: "fp", writer: Some(LBC), fold: false };
        for now in 0..4 {
            assert_eq!(check(&mut book, &c, &[], now), Step::Correct);
        }
        assert!(book.is_empty());
    }

    #[test]
    fn yield_to_matches_the_controllers_roles_and_nobody_else() {
        let aws = YieldTo::default_for(Cloud::Aws);
        for writer in [
            LBC,
            "arn:aws:sts::111122223333:assumed-role/mycluster-7xk2p-openshift-aws-load-balancer-operator-aws-load-balancer-controller-cluster/1700",
            "arn:aws-us-gov:sts::111122223333:assumed-role/controllers.cluster-api-provider-aws.sigs.k8s.io/i-0abc",
            "arn:aws:sts::111122223333:assumed-role/CAPA-Controller-Role/session",
        ] {
            assert!(aws.accepts(Some(writer)), "{writer}");
        }
        for writer in [
            "arn:aws:iam::111122223333:user/alice",
            "arn:aws:iam::111122223333:user/aws-load-balancer-controller",
            "arn:aws:sts::111122223333:assumed-role/admin/alice",
            "arn:aws:sts::111122223333:assumed-role/aws-load-balancer-controller",
            "arn:aws:iam::111122223333:role/aws-load-balancer-controller",
        ] {
            assert!(!aws.accepts(Some(writer)), "{writer}");
        }
        assert!(!aws.accepts(None), "an event that names no caller never counts");
        assert!(!YieldTo::default_for(Cloud::Azure).accepts(Some("capz")), "Azure names its controllers");

        let mine = YieldTo::parse(" arn:aws:sts::1:assumed-role/ctl-?/* , 0c1d2e3f-*").expect("valid");
        assert_eq!(mine.patterns().len(), 2);
        assert!(mine.accepts(Some("arn:aws:sts::1:assumed-role/ctl-a/s")));
        assert!(!mine.accepts(Some("arn:aws:sts::1:assumed-role/ctl-ab/s")), "? is one character");
        assert!(mine.accepts(Some("0C1D2E3F-0000-1111")), "without case");
        assert!(!mine.accepts(Some(LBC)), "the defaults are replaced, not added to");
        assert_eq!(YieldTo::parse("None"), Ok(YieldTo::none()));
        for bad in ["*", "**,?", "arn:aws:sts::1:assumed-role/a b/*", ",,"] {
            assert!(YieldTo::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_never_yield_key_or_another_writer_is_never_counted() {
        let never: BTreeSet<String> = ["cost-center".to_string()].into();
        let aws = YieldTo::default_for(Cloud::Aws);
        assert!(may_yield(&aws, &never, "team", Some(LBC)));
        assert!(!may_yield(&aws, &never, "cost-center", Some(LBC)), "never yields");
        assert!(!may_yield(&aws, &never, "Cost-Center", Some(LBC)), "without case");
        assert!(!may_yield(&aws, &never, "team", Some("arn:aws:iam::111122223333:user/alice")));
        assert!(!may_yield(&aws, &never, "team", None));
    }

    #[test]
    fn a_hold_expires_and_the_next_one_is_twice_as_long_up_to_the_cap() {
        assert_eq!(
            (1..=8).map(hold_secs).collect::<Vec<_>>(),
            [3600, 7200, 14_400, 28_800, 57_600, 86_400, 86_400, 86_400]
        );
        assert_eq!(hold_secs(u32::MAX), MAX_HOLD_SECS);
        let mut book = Vec::new();
        let mut now = 1_000_000;
        let fight = |book: &mut Vec<Contest>, now: &mut u64| {
            // The controller removes the key a minute after each correction.
            loop {
                *book = in_force(std::mem::take(book), "fp", *now);
                let step = count(book, R, "team", Some(LBC), &[], *now);
                *now += 60;
                if step == Step::Contest {
                    return;
                }
            }
        };
        fight(&mut book, &mut now);
        let c = held(&book, R, "team", false).expect("held").clone();
        assert_eq!(c.holds, 1);
        let until = c.hold_until.expect("until");
        // Still held a second before the end; corrected again at the end.
        assert!(held(&in_force(book.clone(), "fp", until - 1), R, "team", false).is_some());
        book = in_force(book, "fp", until);
        assert!(held(&book, R, "team", false).is_none());
        assert_eq!((book[0].holds, book[0].corrections.len()), (1, 0), "the back-off is kept, the count starts anew");
        now = until;
        fight(&mut book, &mut now);
        let c = held(&book, R, "team", false).expect("held again");
        assert_eq!((c.holds, c.hold_until.map(|u| u - c.contested_since.unwrap_or_default())), (2, Some(7200)));
        // Left alone for a day after its hold: the back-off is forgotten.
        let end = c.hold_until.unwrap_or_default();
        assert_eq!(in_force(book.clone(), "fp", end + MAX_HOLD_SECS - 1).len(), 1);
        assert!(in_force(book, "fp", end + MAX_HOLD_SECS).is_empty());
    }

    #[test]
    fn the_state_keeps_the_recent_lifts_and_a_bounded_count() {
        let mut s = ContestState::default();
        for i in 0..MAX_LIFTS + 5 {
            s.record_lift(Lift { resource: R.into(), key: None, by: "op".into(), at: i as u64, lifted: 1 });
        }
        assert_eq!((s.lifts.len(), s.lifts[0].at), (MAX_LIFTS, 5));
        let entry = |i: usize, contested: bool| Contest {
            resource: format!("{R}{i}"),
            key: "k".into(),
            policy: "fp".into(),
            corrections: vec![i as u64],
            writer: None,
            contested_since: contested.then_some(1),
            hold_until: contested.then_some(10),
            holds: u32::from(contested),
        };
        s.contests = (0..MAX_ENTRIES + 10).map(|i| entry(i, i == 3)).collect();
        s.bound();
        assert_eq!(s.contests.len(), MAX_ENTRIES);
        assert!(s.contests[0].is_contested(), "the contested entry stays");
        let json = serde_json::to_string(&s).expect("json");
        assert_eq!(serde_json::from_str::<ContestState>(&json).expect("back"), s);
    }

    proptest! {
        /// A controller the deployment yields to, fighting forever at any pace: within each hold
        /// cycle at most CORRECTIONS corrections are made (the first of them the retry after a
        /// hold ends), never one while held, and the holds double up to the cap.
        #[test]
        fn an_accepted_controller_fighting_forever_is_held_ever_longer(
            gaps in proptest::collection::vec(1u64..3 * WINDOW_SECS, 1..120),
        ) {
            let mut book = Vec::new();
            let mut now = 10_000u64;
            let mut made: Vec<u64> = Vec::new();
            let mut holds_seen: Vec<u64> = Vec::new();
            for gap in gaps {
                now += gap;
                book = in_force(book, "fp", now);
                let was_held = held(&book, R, "k", false).is_some();
                match count(&mut book, R, "k", Some(LBC), &[], now) {
                    Step::Correct => {
                        prop_assert!(!was_held, "never corrected while held");
                        made.push(now);
                    }
                    Step::Contest => {
                        if !was_held {
                            let c = held(&book, R, "k", false).expect("held");
                            let length = c.hold_until.unwrap_or_default() - c.contested_since.unwrap_or_default();
                            prop_assert_eq!(length, hold_secs(c.holds));
                            holds_seen.push(length);
                            // The cycle the hold ends: CORRECTIONS corrections within the window
                            // before it, the first of them the retry after the last hold.
                            let since = c.contested_since.unwrap_or_default().saturating_sub(WINDOW_SECS);
                            prop_assert_eq!(made.iter().filter(|&&t| t > since).count(), CORRECTIONS);
                        }
                    }
                }
            }
            for (i, &t) in made.iter().enumerate() {
                let within = made[i..].iter().take_while(|&&u| u < t + WINDOW_SECS).count();
                prop_assert!(within <= CORRECTIONS, "{within} corrections from {t}: {made:?}");
            }
            for w in holds_seen.windows(2) {
                // Each hold is twice the one before, up to the cap; or the first again when the
                // back-off was forgotten after a day of peace.
                prop_assert!(w[1] == (w[0] * 2).min(MAX_HOLD_SECS) || w[1] == FIRST_HOLD_SECS, "{holds_seen:?}");
            }
        }

        /// However corrections arrive, no more than CORRECTIONS are made within any window, and
        /// a contested key is not corrected while its hold lasts.
        #[test]
        fn never_more_than_the_count_within_a_window(gaps in proptest::collection::vec(0u64..2 * WINDOW_SECS, 1..40)) {
            let mut book = Vec::new();
            let mut now = 10_000u64;
            let mut made = Vec::new();
            for gap in gaps {
                now += gap;
                book = in_force(book, "fp", now);
                let held_now = held(&book, R, "k", false).is_some();
                match count(&mut book, R, "k", None, &[], now) {
                    Step::Correct => {
                        prop_assert!(!held_now, "a held key is not corrected");
                        made.push(now);
                    }
                    Step::Contest => {}
                }
            }
            for (i, &t) in made.iter().enumerate() {
                let within = made[i..].iter().take_while(|&&u| u < t + WINDOW_SECS).count();
                prop_assert!(within <= CORRECTIONS, "{within} corrections from {t}: {made:?}");
            }
        }
    }
}
