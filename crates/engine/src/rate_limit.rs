//! A token bucket for tagwarden's own write calls. EC2 throttles each account and region with
//! token buckets shared by every caller ("Request throttling for the Amazon EC2 API": `CreateTags`
//! holds 100 tokens refilled at 10 a second), so the cluster's own controllers draw on the same
//! bucket. Pacing our writes below the refill keeps a burst of events from draining it: a burst
//! is absorbed by batching and waiting here, not by throttling the cluster.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// At most `rate` calls in any second, evenly spaced (no burst: a bucket of one token), so the
/// bound holds for every 1-second window, not only on average; shared by clones.
#[derive(Debug, Clone)]
pub struct RateLimit {
    rate: f64,
    state: Arc<Mutex<(f64, Instant)>>,
}

impl RateLimit {
    /// `rate` calls a second (at least a thousandth).
    pub fn per_second(rate: f64) -> Self {
        let rate = rate.max(0.001);
        RateLimit { rate, state: Arc::new(Mutex::new((1.0, Instant::now()))) }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Wait for a token, then take it. Callers queue on the lock, so tokens go out in order.
    pub async fn acquire(&self) {
        let mut state = self.state.lock().await;
        loop {
            let (tokens, at) = *state;
            let now = Instant::now();
            let tokens = (tokens + now.duration_since(at).as_secs_f64() * self.rate).min(1.0);
            if tokens >= 1.0 {
                *state = (tokens - 1.0, now);
                return;
            }
            *state = (tokens, now);
            tokio::time::sleep(Duration::from_secs_f64((1.0 - tokens) / self.rate)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn no_window_of_a_second_holds_more_than_the_rate() {
        let limit = RateLimit::per_second(5.0);
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..30 {
            limit.clone().acquire().await;
            at.push(start.elapsed().as_secs_f64());
        }
        // The first at once, then one every 200 ms.
        assert!(at[0] < 1e-6, "{at:?}");
        for w in at.windows(2) {
            assert!((w[1] - w[0] - 0.2).abs() < 1e-3, "{at:?}");
        }
        for (i, t) in at.iter().enumerate() {
            let in_window = at[i..].iter().filter(|u| **u < t + 1.0 - 1e-6).count();
            assert!(in_window <= 5, "{in_window} calls in the second from {t}: {at:?}");
        }
        // Idle time does not build up a burst.
        tokio::time::sleep(Duration::from_secs(10)).await;
        let t0 = Instant::now();
        limit.acquire().await;
        limit.acquire().await;
        assert!((t0.elapsed().as_secs_f64() - 0.2).abs() < 1e-3);
    }
}
