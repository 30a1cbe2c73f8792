//! The publisher's probes and metrics on one HTTP port: `GET /healthz` (the process serves),
//! `GET /readyz` (the cluster's source was read and a first publish decided), and `GET /metrics`
//! in the Prometheus text exposition format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats).
//!
//! A hand-written HTTP/1.1 answer per connection: three fixed paths, probes and one scraper, so
//! no server framework is worth its build time here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The publisher's counters and gauges, shared with the server.
#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    ready: bool,
    last_success: Option<f64>,
    failures: BTreeMap<Reason, u64>,
    watch_restarts: u64,
    refused: bool,
}

/// Why a publish failed, as the metric's `reason` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The function would reject the cluster's document.
    Refused,
    /// Another publisher wrote the location in between.
    Conflict,
    /// The store denied the write.
    Denied,
    /// No credential, or one the cloud rejected.
    Credentials,
    /// No answer (the endpoint or the proxy down).
    Unreachable,
    /// Anything else.
    Failed,
}

impl Reason {
    /// Every reason, in the order the metrics show them.
    pub const ALL: [Reason; 6] =
        [Reason::Refused, Reason::Conflict, Reason::Denied, Reason::Credentials, Reason::Unreachable, Reason::Failed];

    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Refused => "refused",
            Reason::Conflict => "conflict",
            Reason::Denied => "denied",
            Reason::Credentials => "credentials",
            Reason::Unreachable => "unreachable",
            Reason::Failed => "failed",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Health {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn set_ready(&self) {
        self.state().ready = true;
    }

    pub fn is_ready(&self) -> bool {
        self.state().ready
    }

    /// A publish (or a check that found the store already in line) succeeded at `unix_seconds`.
    pub fn succeeded(&self, unix_seconds: f64) {
        self.state().last_success = Some(unix_seconds);
    }

    /// One failed publish, by reason.
    pub fn failed(&self, reason: Reason) {
        *self.state().failures.entry(reason).or_default() += 1;
    }

    /// The failures counted for `reason` so far.
    pub fn failures(&self, reason: Reason) -> u64 {
        self.state().failures.get(&reason).copied().unwrap_or(0)
    }

    pub fn watch_restarted(&self, times: u64) {
        self.state().watch_restarts = times;
    }

    pub fn set_refused(&self, refused: bool) {
        self.state().refused = refused;
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let s = self.state();
        let mut out = String::new();
        out.push_str("# HELP tagwarden_publish_last_success_timestamp_seconds When the policy at the store last matched the cluster's latest valid document.\n");
        out.push_str("# TYPE tagwarden_publish_last_success_timestamp_seconds gauge\n");
        out.push_str(&format!("tagwarden_publish_last_success_timestamp_seconds {}\n", s.last_success.unwrap_or(0.0)));
        out.push_str("# HELP tagwarden_publish_failures_total Publish attempts that failed, by reason.\n");
        out.push_str("# TYPE tagwarden_publish_failures_total counter\n");
        // Every reason is exported from the start, at 0, so `increase()` sees the first one.
        for reason in Reason::ALL {
            let n = s.failures.get(&reason).copied().unwrap_or(0);
            out.push_str(&format!("tagwarden_publish_failures_total{{reason=\"{reason}\"}} {n}\n"));
        }
        out.push_str("# HELP tagwarden_watch_restarts_total Times the watch on the cluster's source was interrupted and resumed.\n");
        out.push_str("# TYPE tagwarden_watch_restarts_total counter\n");
        out.push_str(&format!("tagwarden_watch_restarts_total {}\n", s.watch_restarts));
        out.push_str("# HELP tagwarden_policy_refused 1 while the cluster's latest document is refused (the last good one stays in force).\n");
        out.push_str("# TYPE tagwarden_policy_refused gauge\n");
        out.push_str(&format!("tagwarden_policy_refused {}\n", u8::from(s.refused)));
        out
    }
}

/// Serve `health` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, health: Arc<Health>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            // Out of file descriptors, say: wait rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let health = health.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            let n = match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let head = String::from_utf8_lossy(&buf[..n]);
            let mut parts = head.split_whitespace();
            let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            let path = path.split('?').next().unwrap_or_default();
            let (status, content_type, body) = match (method, path) {
                ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_string()),
                ("GET", "/readyz") if health.is_ready() => ("200 OK", "text/plain", "ready\n".to_string()),
                ("GET", "/readyz") => (
                    "503 Service Unavailable",
                    "text/plain",
                    "not ready: the cluster's source has not been read and published yet\n".to_string(),
                ),
                ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", health.render()),
                ("GET", _) => ("404 Not Found", "text/plain", "try /healthz, /readyz or /metrics\n".to_string()),
                _ => ("405 Method Not Allowed", "text/plain", "GET only\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            // A prober that hung up early only misses its own answer.
            if let Err(e) = stream.write_all(response.as_bytes()).await {
                tracing::debug!(error = %e, path, "the probe's answer was not sent");
            } else if let Err(e) = stream.shutdown().await {
                tracing::debug!(error = %e, path, "the probe's connection did not close cleanly");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_every_reason_and_the_refused_gauge() {
        let h = Health::default();
        h.failed(Reason::Unreachable);
        h.failed(Reason::Unreachable);
        h.set_refused(true);
        h.succeeded(1_700_000_000.5);
        let text = h.render();
        assert!(text.contains("tagwarden_publish_failures_total{reason=\"unreachable\"} 2\n"), "{text}");
        assert!(text.contains("tagwarden_publish_failures_total{reason=\"refused\"} 0\n"), "{text}");
        assert!(text.contains("tagwarden_policy_refused 1\n"), "{text}");
        assert!(text.contains("tagwarden_publish_last_success_timestamp_seconds 1700000000.5\n"), "{text}");
    }
}
