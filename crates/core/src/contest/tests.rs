use std::collections::BTreeSet;

use super::*;
use crate::cloud::Cloud;
use proptest::prelude::*;

const R: &str = "arn:aws:elasticloadbalancing:us-east-1:111122223333:loadbalancer/app/web/1";
const LBC: &str = "arn:aws:sts::111122223333:assumed-role/aws-load-balancer-controller/1700000000";

/// [`check`] of key `key` on `resource` under policy `fp`, and [`record`] if it may be written.
fn count(book: &mut Vec<Contest>, resource: &str, key: &str, writer: Option<&str>, earlier: &[u64], now: u64) -> Step {
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
