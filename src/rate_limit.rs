//! A token bucket for tagwarden's own write calls. EC2 throttles each account and region with
//! token buckets shared by every caller ("Request throttling for the Amazon EC2 API": `CreateTags`
//! holds 100 tokens refilled at 10 a second), so the cluster's own controllers draw on the same
//! bucket. Pacing our writes below the refill keeps a burst of events from draining it: a burst
//! is absorbed by batching and waiting here, not by throttling the cluster.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// At most `rate` calls a second on average, at most `burst` at once; shared by clones.
#[derive(Debug, Clone)]
pub struct RateLimit {
    rate: f64,
    burst: f64,
    state: Arc<Mutex<(f64, Instant)>>,
}

impl RateLimit {
    /// `rate` calls a second (at least a thousandth), with a burst of one second's worth (at
    /// least one call).
    pub fn per_second(rate: f64) -> Self {
        let rate = rate.max(0.001);
        let burst = rate.max(1.0);
        RateLimit { rate, burst, state: Arc::new(Mutex::new((burst, Instant::now()))) }
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
            let tokens = (tokens + now.duration_since(at).as_secs_f64() * self.rate).min(self.burst);
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
    async fn no_window_of_a_second_holds_more_than_the_rate_after_the_burst() {
        let limit = RateLimit::per_second(5.0);
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..30 {
            limit.acquire().await;
            at.push(start.elapsed().as_secs_f64());
        }
        // The first five go at once (the burst), then one every 200 ms.
        assert!(at[..5].iter().all(|t| *t < 1e-6), "{at:?}");
        for w in at[5..].windows(2) {
            assert!((w[1] - w[0] - 0.2).abs() < 1e-3, "{at:?}");
        }
        for (i, t) in at.iter().enumerate() {
            let in_window = at[i..].iter().filter(|u| **u < t + 1.0).count();
            assert!(in_window <= 6, "{in_window} calls in the second from {t}: {at:?}");
        }
    }
}
