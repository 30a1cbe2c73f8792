//! When an invocation stops starting new work: the one [`Deadline`] every part of the Lambda's
//! walk asks ("passed?"), instead of each computing it from the Runtime API's deadline.
//!
//! Deliberately not here: what is handed back when it has passed (`super::function`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long before the invocation's deadline no new work starts: enough for the work already
/// started (one SDK operation is bounded at 30 s) to finish and its results to be returned —
/// at most this, and at most a fifth of the invocation's time, so a short timeout still works.
pub const DEADLINE_RESERVE: Duration = Duration::from_secs(35);

/// The moment after which an invocation starts no new work ([`DEADLINE_RESERVE`] before the
/// invocation's own deadline, at most a fifth of what is left), or none: run to the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadline {
    stop_at: Option<Instant>,
}

impl Deadline {
    /// No deadline: every piece of work starts.
    pub const NONE: Deadline = Deadline { stop_at: None };

    /// For an invocation that must answer by `deadline`, as of now.
    pub fn answer_by(deadline: Instant) -> Self {
        Self::answer_by_from(deadline, Instant::now())
    }

    /// [`Deadline::answer_by`], as of `now`.
    pub fn answer_by_from(deadline: Instant, now: Instant) -> Self {
        let reserve = DEADLINE_RESERVE.min(deadline.saturating_duration_since(now) / 5);
        Deadline { stop_at: Some(deadline.checked_sub(reserve).unwrap_or(deadline)) }
    }

    /// [`Deadline::answer_by`] for an optional deadline (`None`: [`Deadline::NONE`]).
    pub fn of(deadline: Option<Instant>) -> Self {
        deadline.map_or(Self::NONE, Self::answer_by)
    }

    /// The Runtime API's deadline (`Lambda-Runtime-Deadline-Ms`, milliseconds since the epoch).
    /// One that has passed already at the start is not a deadline the function could meet but a
    /// clock or emulator artefact: it is logged and ignored.
    pub fn from_epoch_ms(deadline_ms: u64) -> Self {
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
        Self::from_epoch_ms_at(deadline_ms, now_ms, Instant::now())
    }

    /// [`Deadline::from_epoch_ms`], when the wall clock reads `now_ms` at the instant `now`.
    pub fn from_epoch_ms_at(deadline_ms: u64, now_ms: u64, now: Instant) -> Self {
        if deadline_ms <= now_ms {
            tracing::warn!(deadline_ms, now_ms, "the invocation's deadline has passed at its start; not enforced");
            return Self::NONE;
        }
        Self::answer_by_from(now + Duration::from_millis(deadline_ms - now_ms), now)
    }

    /// Whether no new work may start now.
    pub fn passed(&self) -> bool {
        self.passed_at(Instant::now())
    }

    /// Whether no new work may start at `now`.
    pub fn passed_at(&self, now: Instant) -> bool {
        self.stop_at.is_some_and(|t| now >= t)
    }

    /// The moment as the engine takes it (`stop_at`: no new work after it).
    pub fn stop_at(&self) -> Option<Instant> {
        self.stop_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_never_passes() {
        let now = Instant::now();
        assert!(!Deadline::NONE.passed_at(now + Duration::from_secs(86_400)));
        assert_eq!(Deadline::of(None), Deadline::NONE);
        assert_eq!(Deadline::default().stop_at(), None);
    }

    #[test]
    fn the_reserve_is_35_seconds_or_a_fifth_of_what_is_left() {
        let now = Instant::now();
        // 15 minutes: 35 s before.
        let long = Deadline::answer_by_from(now + Duration::from_secs(900), now);
        assert_eq!(long.stop_at(), Some(now + Duration::from_secs(865)));
        assert!(!long.passed_at(now + Duration::from_secs(864)));
        assert!(long.passed_at(now + Duration::from_secs(865)));
        // 10 s: a fifth, 2 s before.
        let short = Deadline::answer_by_from(now + Duration::from_secs(10), now);
        assert_eq!(short.stop_at(), Some(now + Duration::from_secs(8)));
        // Already there: passed at once.
        let due = Deadline::answer_by_from(now, now);
        assert!(due.passed_at(now));
    }

    #[test]
    fn the_runtime_apis_deadline_in_epoch_ms() {
        let now = Instant::now();
        let d = Deadline::from_epoch_ms_at(1_700_000_060_000, 1_700_000_000_000, now);
        assert_eq!(d.stop_at(), Some(now + Duration::from_secs(48)), "60 s left: a fifth, 12 s, kept");
        // A deadline already past at the start is an artefact: ignored, not "stop at once".
        assert_eq!(Deadline::from_epoch_ms_at(1_000, 2_000, now), Deadline::NONE);
        assert_eq!(Deadline::from_epoch_ms_at(2_000, 2_000, now), Deadline::NONE);
    }
}
