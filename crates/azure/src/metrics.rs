//! Metrics into Azure Monitor (docs/src/lookup/metrics.md): the same names and dimensions as the CloudWatch EMF
//! lines, from the same tables ([`tagwarden_core::report`]), converted to the custom-metrics REST API's documents
//! (Azure's documentation) and sent as one `application/x-ndjson` POST per invocation to
//! `https://<region>.monitoring.azure.com/<resourceId>/metrics` with a token for
//! `https://monitoring.azure.com/`.
//!
//! Best effort by design: the caller logs a failed POST and carries on — metrics never fail an
//! invocation. Deliberately not here: Application Insights telemetry (the Functions host already
//! ships the handler's logs there) and any pre-aggregation across invocations.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Url;
use serde_json::{json, Value};

use super::identity::{ManagedIdentity, MONITORING_AUDIENCE};
use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::report::{
    Metrics, COMPLIANCE_COUNTS, COMPLIANCE_LAG, EVENT_COUNTS, NAMESPACE, RECONCILE_LATENCY, TYPE_COUNTS,
};
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

pub const OP_POST: &str = "monitor:PostMetrics";

/// The custom-metrics documents for one invocation: event-level metrics with dimensions
/// `Cloud, InfraID`, per-resource-type metrics with `Cloud, ResourceType, InfraID`.
pub fn documents(metrics: &Metrics, infra_id: &str, time: SystemTime) -> Vec<Value> {
    let time = iso8601(time);
    let cloud = Cloud::Azure.as_str();
    let doc = |name: &str, dims: &[&str], series: Vec<Value>| json!({"time": time, "data": {"baseData": {"metric": name, "namespace": NAMESPACE, "dimNames": dims, "series": series}}});
    let count = |dims: Vec<&str>, v: u64| json!({"dimValues": dims, "min": v, "max": v, "sum": v, "count": 1});
    let mut out = Vec::new();
    for (m, get) in &EVENT_COUNTS {
        let v = get(metrics);
        if v > 0 {
            out.push(doc(m.name, &["Cloud", "InfraID"], vec![count(vec![cloud, infra_id], v)]));
        }
    }
    // Azure Monitor custom metrics keep min/max/sum/count, no percentiles: the alert reads Maximum.
    let lag = &metrics.compliance_lag_ms;
    if let (Some(min), Some(max)) = (lag.iter().min(), lag.iter().max()) {
        let series = json!({"dimValues": [cloud, infra_id], "min": min, "max": max, "sum": lag.iter().sum::<u64>(), "count": lag.len()});
        out.push(doc(COMPLIANCE_LAG.name, &["Cloud", "InfraID"], vec![series]));
    }
    // The cluster's compliance, all three together whenever an owned resource was evaluated:
    // in line / (in line + drifted), in audit mode as in enforce.
    if metrics.compliance().is_some() {
        for (m, get) in &COMPLIANCE_COUNTS {
            let v = metrics.by_type.values().map(get).sum::<u64>();
            out.push(doc(m.name, &["Cloud", "InfraID"], vec![count(vec![cloud, infra_id], v)]));
        }
    }
    if metrics.by_type.is_empty() {
        return out;
    }
    let dims = ["Cloud", "ResourceType", "InfraID"];
    for (m, get) in TYPE_COUNTS.iter().chain(&COMPLIANCE_COUNTS) {
        let series = metrics.by_type.iter().map(|(t, c)| count(vec![cloud, t, infra_id], get(c))).collect();
        out.push(doc(m.name, &dims, series));
    }
    let latency: Vec<Value> = metrics
        .by_type
        .iter()
        .filter(|(_, c)| !c.latency_ms.is_empty())
        .map(|(t, c)| {
            let (min, max) = (c.latency_ms.iter().min().copied(), c.latency_ms.iter().max().copied());
            json!({"dimValues": [cloud, t, infra_id], "min": min, "max": max, "sum": c.latency_ms.iter().sum::<u64>(), "count": c.latency_ms.len()})
        })
        .collect();
    if !latency.is_empty() {
        out.push(doc(RECONCILE_LATENCY.name, &dims, latency));
    }
    out
}

/// Sends the documents of one invocation.
pub struct MetricsPublisher {
    http: reqwest::Client,
    url: Url,
    identity: Arc<ManagedIdentity>,
    calls: CallCounter,
}

impl MetricsPublisher {
    /// `endpoint`: `https://<region>.monitoring.azure.com` (or a fake); `resource_id`: the Function
    /// App's ARM ID, which the metrics are published against.
    pub fn new(
        http: reqwest::Client,
        endpoint: &Url,
        resource_id: &str,
        identity: Arc<ManagedIdentity>,
        calls: CallCounter,
    ) -> Self {
        let mut url = endpoint.clone();
        let base = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{base}/{}/metrics", resource_id.trim_matches('/')));
        MetricsPublisher { http, url, identity, calls }
    }

    /// One POST with every document, newline-delimited. Nothing to send, no request.
    pub async fn publish(&self, metrics: &Metrics, infra_id: &str) -> Result<usize, CloudError> {
        let docs = documents(metrics, infra_id, SystemTime::now());
        if docs.is_empty() {
            return Ok(0);
        }
        let body: String = docs.iter().map(|d| format!("{d}\n")).collect();
        let target = self.url.to_string();
        let token = self.identity.token(MONITORING_AUDIENCE).await?;
        self.calls.record(OP_POST);
        let resp = self
            .http
            .post(self.url.clone())
            .bearer_auth(token)
            .header("content-type", "application/x-ndjson")
            .body(body)
            .send()
            .await
            .map_err(|e| crate::error::transport(OP_POST, &target, &e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let body = resp.text().await.unwrap_or_default();
            let mut e = crate::error::from_response(OP_POST, &target, status, None, &body);
            if e.class == ErrorClass::NotFound {
                e.message = format!("{} (is TAGWARDEN_METRICS_RESOURCE_ID in the region of the endpoint?)", e.message);
            }
            return Err(e);
        }
        Ok(docs.len())
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn iso8601(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = tagwarden_core::events::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use tagwarden_core::report::{Record, Status};

    #[test]
    fn time_format() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(UNIX_EPOCH + Duration::from_secs(1_536_856_460)), "2018-09-13T16:34:20Z");
        assert_eq!(iso8601(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn documents_follow_the_documented_shape() {
        let mut m = Metrics { events_received: 2, events_ignored: 1, ..Metrics::default() };
        let rec = |status, latency_ms| Record {
            resource: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d".into(),
            changes: vec![tagwarden_core::report::ChangeRecord { key: "team".into(), old: None, new: "p".into() }],
            policy_version: "v".into(),
            latency_ms,
            compliance_lag_ms: Some(latency_ms * 100),
            ..Record::sample(Cloud::Azure, "Microsoft.Compute/disks", status)
        };
        m.observe(&rec(Status::Applied, 10));
        m.observe(&rec(Status::Unchanged, 4));
        let docs = documents(&m, "c1", UNIX_EPOCH);
        let names: Vec<&str> =
            docs.iter().filter_map(|d| d.pointer("/data/baseData/metric").and_then(Value::as_str)).collect();
        assert_eq!(
            names,
            [
                "EventsReceived",
                "EventsIgnored",
                "ComplianceLag",
                "WouldWrite",
                "ResourcesInLine",
                "ResourcesDrifted",
                "ResourcesEvaluated",
                "DriftDetected",
                "TagsWritten",
                "WriteFailures",
                "TagLimitExceeded",
                "Conflicts",
                "Unsupported",
                "Contested",
                "WouldWrite",
                "ResourcesInLine",
                "ResourcesDrifted",
                "ReconcileLatency"
            ]
        );
        for d in &docs {
            let base = &d["data"]["baseData"];
            assert_eq!(base["namespace"], NAMESPACE);
            let dims = base["dimNames"].as_array().expect("dimNames").len();
            for s in base["series"].as_array().expect("series") {
                assert_eq!(s["dimValues"].as_array().expect("dimValues").len(), dims);
                for k in ["min", "max", "sum", "count"] {
                    assert!(s[k].is_u64(), "{k} in {s}");
                }
            }
        }
        let stats = |d: &Value| {
            let s = &d["data"]["baseData"]["series"][0];
            (s["min"].as_u64(), s["max"].as_u64(), s["sum"].as_u64(), s["count"].as_u64())
        };
        assert_eq!(stats(&docs[17]), (Some(4), Some(10), Some(14), Some(2)), "ReconcileLatency");
        assert_eq!(stats(&docs[4]), (Some(2), Some(2), Some(2), Some(1)), "ResourcesInLine");
        assert_eq!(docs[4]["data"]["baseData"]["dimNames"], serde_json::json!(["Cloud", "InfraID"]));
        assert_eq!(stats(&docs[2]), (Some(400), Some(1000), Some(1400), Some(2)), "ComplianceLag");
        assert_eq!(docs[2]["data"]["baseData"]["dimNames"], serde_json::json!(["Cloud", "InfraID"]));
        assert_eq!(docs[8]["data"]["baseData"]["series"][0]["sum"], 1, "TagsWritten");
        assert!(documents(&Metrics::default(), "c1", UNIX_EPOCH).is_empty());
    }
}
