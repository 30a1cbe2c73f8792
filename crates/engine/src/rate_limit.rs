//! A token bucket for tagwarden's own write calls. EC2 throttles each account and region with
//! token buckets shared by every caller ("Request throttling for the Amazon EC2 API": `CreateTags`
//! holds 100 tokens refilled at 10 a second), so the cluster's own controllers draw on the same
//! bucket. Pacing our writes below the refill keeps a burst of events from draining it: a burst
//! is absorbed by batching and waiting here, not by throttling the cluster.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// A token bucket of `burst` tokens refilled at `rate` a second; shared by clones. With a burst of
/// one ([`RateLimit::per_second`]) the calls are evenly spaced, so the bound holds for every
/// 1-second window, not only on average.
#[derive(Debug, Clone)]
pub struct RateLimit {
    rate: f64,
    burst: f64,
    state: Arc<Mutex<(f64, Instant)>>,
}

impl RateLimit {
    /// `rate` calls a second (at least a thousandth), evenly spaced.
    pub fn per_second(rate: f64) -> Self {
        Self::bucket(rate, 1.0)
    }

    /// A bucket of `burst` tokens (at least one), full at the start, refilled at `rate` a second
    /// (at least a thousandth): the shape of the cloud's own buckets, at a share of their size.
    pub fn bucket(rate: f64, burst: f64) -> Self {
        let (rate, burst) = (rate.max(0.001), burst.max(1.0));
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

/// One [`RateLimit`] per key (an Azure subscription, a Google Cloud project), each made on first
/// use with the same rate and burst: a budget the cloud meters per key is paced per key, so one
/// key's pace never holds another's calls.
#[derive(Debug)]
pub struct Keyed {
    pub rate: f64,
    pub burst: f64,
    buckets: std::sync::Mutex<std::collections::HashMap<String, RateLimit>>,
}

impl Keyed {
    pub fn new((rate, burst): (f64, f64)) -> Self {
        Keyed { rate, burst, buckets: std::sync::Mutex::new(std::collections::HashMap::new()) }
    }

    /// The bucket of `key`.
    pub fn of(&self, key: &str) -> RateLimit {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.entry(key.to_string()).or_insert_with(|| RateLimit::bucket(self.rate, self.burst)).clone()
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

    #[tokio::test(start_paused = true)]
    async fn a_bucket_spends_its_burst_then_its_refill() {
        let limit = RateLimit::bucket(10.0, 100.0);
        let start = Instant::now();
        for _ in 0..100 {
            limit.acquire().await;
        }
        assert!(start.elapsed().as_secs_f64() < 1e-6, "the burst goes at once");
        for _ in 0..50 {
            limit.acquire().await;
        }
        assert!((start.elapsed().as_secs_f64() - 5.0).abs() < 1e-3, "then 10 a second: {:?}", start.elapsed());
        tokio::time::sleep(Duration::from_secs(60)).await;
        let t0 = Instant::now();
        for _ in 0..101 {
            limit.acquire().await;
        }
        assert!((t0.elapsed().as_secs_f64() - 0.1).abs() < 1e-3, "idle refills the bucket, never past its size");
    }
}
