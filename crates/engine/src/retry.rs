//! Every retry of the codebase: one [`Backoff`] and its [`Backoff::retry`] (but the cluster watch's,
//! which kube-runtime owns). The caller says what is worth another attempt (for the clouds, from
//! `cloud_error::ErrorClass`); the limits are here:
//!
//! | limit | attempts | waits | for |
//! |---|---|---|---|
//! | [`Backoff::NOT_FOUND`] | 6 | 250 ms doubling to 4 s | AWS: a resource not visible yet after its creation, S3 `OperationAborted`, volumes not attached yet |
//! | [`Backoff::ARM_NOT_FOUND`] | 4 | 500 ms doubling to 8 s | ARM: a resource not visible yet (404) |
//! | [`Backoff::ARM_BUSY`] | 5 | 500 ms doubling to 8 s, or `Retry-After` | ARM: 429, 408, 409 busy, 5xx, no answer |
//! | [`Backoff::TOKEN`] | 3 | 400 ms, then 800 ms | a token request unanswered or refused as retryable |
//! | [`Backoff::CONFLICT`] | 3 | none: read again at once | the status ConfigMap written concurrently (409) |
//! | [`Backoff::PUBLISH`] | until it works | 1 s doubling to 60 s | the publisher: the policy location unreachable, a document not published |
//! | [`MAX_RETRY_AFTER`] | | 30 s | a longer `Retry-After` is not waited for: the error is returned at once |
//! | [`ARM_POLL_TIMEOUT`] | | 120 s, polling every `Retry-After` (at most 30 s), else 500 ms | ARM: a write accepted with 202, until it ends; a poll, not a retry |
//!
//! Each wait is up to a quarter longer at random (not a server's `Retry-After`), so that the
//! retries of many callers spread apart. No wait follows the last attempt: the error is returned at
//! once, so no budget is spent on a call that will not be made. The AWS SDK's own retries (standard
//! mode, 5 attempts) come before these and are configured in `aws`.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

/// A longer `Retry-After` is not waited for: better the event back in its queue than asleep.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// How long ARM's 202 is followed before the write is reported as unfinished.
pub const ARM_POLL_TIMEOUT: Duration = Duration::from_secs(120);

/// `attempts` tries, waiting `first`, doubling, at most `max`, between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub attempts: u32,
    pub first: Duration,
    pub max: Duration,
}

const fn backoff(attempts: u32, first_ms: u64, max_ms: u64) -> Backoff {
    Backoff { attempts, first: Duration::from_millis(first_ms), max: Duration::from_millis(max_ms) }
}

impl Backoff {
    pub const NOT_FOUND: Backoff = backoff(6, 250, 4_000);
    pub const ARM_NOT_FOUND: Backoff = backoff(4, 500, 8_000);
    pub const ARM_BUSY: Backoff = backoff(5, 500, 8_000);
    pub const TOKEN: Backoff = backoff(3, 400, 800);
    pub const CONFLICT: Backoff = backoff(3, 0, 0);
    pub const PUBLISH: Backoff = backoff(u32::MAX, 1_000, 60_000);

    /// The wait after failed attempt number `attempt` (0-based), jitter included.
    pub fn delay(&self, attempt: u32) -> Duration {
        let wait = self.first.saturating_mul(1 << attempt.min(16)).min(self.max);
        wait + jitter(wait)
    }

    /// `call(attempt)` until it succeeds, fails with an error `when` does not retry, or
    /// `attempts` are made (at least one). Between attempts it waits the error's `Retry-After`, else
    /// [`Backoff::delay`]; a `Retry-After` over [`MAX_RETRY_AFTER`] ends it with that error.
    pub async fn retry<T, E, F>(&self, when: impl Fn(&E) -> bool, mut call: impl FnMut(u32) -> F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: RetryAfter + Display,
    {
        let mut attempt = 0;
        loop {
            match call(attempt).await {
                Err(e) if when(&e) && attempt + 1 < self.attempts => {
                    let Some(wait) = server_wait(e.retry_after(), self.delay(attempt)) else { return Err(e) };
                    tracing::debug!(attempt, wait_ms = wait.as_millis() as u64, error = %e, "retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                done => return done,
            }
        }
    }
}

/// An error that may carry the server's own wait before another attempt.
pub trait RetryAfter {
    /// The wait the server asked for (`Retry-After`), if it named one.
    fn retry_after(&self) -> Option<Duration> {
        None
    }
}

// The CLI's setup names no wait.
impl RetryAfter for anyhow::Error {}

/// The one reading of `Retry-After`: the server's wait if it named one, else `otherwise`; `None`
/// when it asked for more than [`MAX_RETRY_AFTER`].
pub fn server_wait(asked: Option<Duration>, otherwise: Duration) -> Option<Duration> {
    match asked {
        Some(asked) if asked > MAX_RETRY_AFTER => None,
        asked => Some(asked.unwrap_or(otherwise)),
    }
}

/// Up to a quarter of `wait` more, drawn afresh for each wait (not from the clock, whose low
/// digits are zero at microsecond resolution and alike for tasks that start together).
fn jitter(wait: Duration) -> Duration {
    wait.mul_f64(fastrand::f64() / 4.0)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::time::Instant;

    use super::*;

    /// A failure: whether `when` retries it, and the server's wait in seconds.
    #[derive(Debug, Clone, PartialEq, thiserror::Error)]
    #[error("failed")]
    struct Failed(bool, Option<u64>);

    impl RetryAfter for Failed {
        fn retry_after(&self) -> Option<Duration> {
            self.1.map(Duration::from_secs)
        }
    }

    /// `B.retry` answered by `answers` in turn (the last repeated): the attempts made, the time
    /// taken (paused, so only the waits count) and the outcome.
    async fn run(answers: &[Result<u32, Failed>]) -> (Vec<u32>, Duration, Result<u32, Failed>) {
        const B: Backoff = backoff(4, 100, 300);
        let (made, start) = (Mutex::new(Vec::new()), Instant::now());
        let result = B
            .retry(
                |e: &Failed| e.0,
                |attempt| {
                    made.lock().expect("made").push(attempt);
                    let answer = answers[(attempt as usize).min(answers.len() - 1)].clone();
                    // Async work in each attempt, as a write that reads again first does.
                    async move {
                        tokio::task::yield_now().await;
                        answer
                    }
                },
            )
            .await;
        (made.into_inner().expect("made"), start.elapsed(), result)
    }

    fn around(took: Duration, ms: u64) -> bool {
        (ms..=ms + ms / 4 + 1).contains(&(took.as_millis() as u64))
    }

    #[test]
    fn waits_double_to_the_most_with_up_to_a_quarter_more() {
        for (attempt, base) in [250, 500, 1000, 2000, 4000, 4000].into_iter().enumerate() {
            assert!(around(Backoff::NOT_FOUND.delay(attempt as u32), base), "attempt {attempt}");
        }
        assert_eq!(Backoff::CONFLICT.delay(2), Duration::ZERO);
        assert!(around(Backoff::PUBLISH.delay(u32::MAX - 1), 60_000));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_only_what_when_says_and_never_waits_after_the_last() {
        assert_eq!(run(&[Ok(7)]).await, (vec![0], Duration::ZERO, Ok(7)));
        assert_eq!(run(&[Err(Failed(false, None))]).await, (vec![0], Duration::ZERO, Err(Failed(false, None))));
        let (made, took, result) = run(&[Err(Failed(true, None)), Err(Failed(false, None))]).await;
        assert_eq!((made, result), (vec![0, 1], Err(Failed(false, None))));
        assert!(around(took, 100), "{took:?}");
        let (made, took, result) = run(&[Err(Failed(true, None)), Err(Failed(true, None)), Ok(3)]).await;
        assert_eq!((made, result), (vec![0, 1, 2], Ok(3)));
        assert!(around(took, 300), "{took:?}");
        // `attempts` calls, three waits (100, 200, 300 ms), none after the last.
        let (made, took, result) = run(&[Err(Failed(true, None))]).await;
        assert_eq!((made, result), (vec![0, 1, 2, 3], Err(Failed(true, None))));
        assert!(around(took, 600), "{took:?}");
        // One call at least, whatever the budget.
        let none = Backoff { attempts: 0, ..Backoff::NOT_FOUND };
        assert!(none.retry(|_: &Failed| true, |_| async { Err::<(), _>(Failed(true, None)) }).await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn waits_the_servers_retry_after_up_to_the_limit_and_refuses_a_longer_one() {
        // The server's wait, without jitter, instead of the backoff.
        let (made, took, _) = run(&[Err(Failed(true, Some(2))), Ok(1)]).await;
        assert_eq!((made, took.as_millis()), (vec![0, 1], 2_000));
        let (made, took, _) = run(&[Err(Failed(true, Some(30))), Ok(1)]).await;
        assert_eq!((made, took.as_millis()), (vec![0, 1], MAX_RETRY_AFTER.as_millis()));
        assert_eq!(
            run(&[Err(Failed(true, Some(31))), Ok(1)]).await,
            (vec![0], Duration::ZERO, Err(Failed(true, Some(31))))
        );
        assert_eq!(server_wait(None, Duration::from_millis(5)), Some(Duration::from_millis(5)));
    }
}
