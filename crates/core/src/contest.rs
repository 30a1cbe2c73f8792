//! Never fight another controller (issue 33): a key that tagwarden keeps correcting on one resource
//! because something keeps changing or removing it is *contested*, and tagwarden stops writing it.
//!
//! Some controllers remove what they did not put there: the AWS Load Balancer Controller "owns all
//! the tags of the managed AWS resources, unsolicited tags are removed" (aws-load-balancer-operator's
//! API), and CAPA and CAPZ remove additional tags they applied earlier and no longer want (the
//! `sigs.k8s.io/cluster-api-provider-aws-last-applied-tags` annotation). Correcting such a key again
//! after every removal is a loop between two controllers, each spending the account's request
//! budget forever.
//!
//! The rule: tagwarden counts its *corrections* of a key on a resource — written answers to a change
//! somebody else made (a tag change; an Azure write, which may also be a creation), never the
//! first tagging after an AWS creation event, never a sweep's — and once
//! it has made [`CORRECTIONS`] within [`WINDOW_SECS`], the next one is not made: the key is contested,
//! with who changed it, until the cluster's policy changes or an operator lifts it
//! (`tagwarden status --lift`). An ordinary drift (one edit) is one correction; a person editing the
//! same key back three times in an hour is a contest worth a human's look too; a controller loop
//! runs at event speed (CloudTrail to EventBridge in minutes) and is stopped within its fourth
//! round. Contested keys are reported in the cluster's status report, where this state is kept.
//!
//! Pure: the engine (`tagwarden_engine::contests`) reads and writes the state.

use serde::{Deserialize, Serialize};

/// Corrections of one key on one resource within [`WINDOW_SECS`] after which the next is not made.
pub const CORRECTIONS: usize = 3;

/// The window the corrections are counted in, in seconds.
pub const WINDOW_SECS: u64 = 3600;

/// What a contested entry names when no event said who changed the key (AWS's `Tag Change on
/// Resource` names no caller; CloudTrail's own event of the call does).
pub const UNKNOWN_WRITER: &str = "unknown (the events named no caller)";

/// One key on one resource that tagwarden has corrected recently, or stopped correcting.
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
    /// When tagwarden stopped correcting it (seconds since the epoch); `None` while it still does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contested_since: Option<u64>,
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

/// The entries still in force under the cluster's policy `fingerprint` at `now`: a contest made
/// under another policy is lifted, corrections older than the window are forgotten, and an entry
/// with none left goes.
pub fn in_force(contests: Vec<Contest>, fingerprint: &str, now: u64) -> Vec<Contest> {
    contests
        .into_iter()
        .filter(|c| c.policy == fingerprint)
        .filter_map(|mut c| {
            c.corrections.retain(|&t| t + WINDOW_SECS > now && t <= now);
            (c.is_contested() || !c.corrections.is_empty()).then_some(c)
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
    /// Do not: [`CORRECTIONS`] were made within the window; the key is contested now.
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
/// writer) and the answer is [`Step::Contest`]. Only a correction that was written is counted
/// ([`record`]): a write that failed is tried again, not mistaken for a fight.
pub fn check(contests: &mut Vec<Contest>, c: &Correction<'_>, earlier: &[u64], now: u64) -> Step {
    if !reached(contests, c, earlier, now) {
        return Step::Correct;
    }
    let e = entry(contests, c, earlier, now);
    if e.is_contested() {
        return Step::Contest;
    }
    e.contested_since = Some(now);
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
            });
            contests.len() - 1
        }
    };
    &mut contests[at]
}

/// Lift the contests on `resource` (only `key`'s, if given): an operator's acknowledgement. The
/// count starts again from nothing. How many were lifted.
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
        assert_eq!(in_force(book.clone(), "fp", 100 + 10 * WINDOW_SECS).len(), 1, "a contest does not age out");
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

    proptest! {
        /// However corrections arrive, no more than CORRECTIONS are made within any window, and
        /// once contested a key stays so under the same policy.
        #[test]
        fn never_more_than_the_count_within_a_window(gaps in proptest::collection::vec(0u64..2 * WINDOW_SECS, 1..40)) {
            let mut book = Vec::new();
            let mut now = 10_000u64;
            let mut made = Vec::new();
            let mut contested = false;
            for gap in gaps {
                now += gap;
                book = in_force(book, "fp", now);
                match count(&mut book, R, "k", None, &[], now) {
                    Step::Correct => {
                        prop_assert!(!contested, "a contested key is never corrected again");
                        made.push(now);
                    }
                    Step::Contest => contested = true,
                }
            }
            for (i, &t) in made.iter().enumerate() {
                let within = made[i..].iter().take_while(|&&u| u < t + WINDOW_SECS).count();
                prop_assert!(within <= CORRECTIONS, "{within} corrections from {t}: {made:?}");
            }
        }
    }
}
