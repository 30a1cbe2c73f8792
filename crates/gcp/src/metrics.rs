//! Metrics into Cloud Monitoring: the same names, meanings and dimensions as the CloudWatch EMF
//! lines and Azure Monitor's custom metrics, from the same tables ([`tagwarden_core::report`]),
//! written as custom metrics `custom.googleapis.com/tagwarden/<name>` (declared with their labels
//! by infra/gcp `monitoring.tf`) through the official client's `MetricService::create_time_series`
//! (`POST https://monitoring.googleapis.com/v3/projects/{project}/timeSeries`).
//!
//! The rules this follows (Cloud Monitoring API reference, `projects.timeSeries.create`, and
//! "Quotas and limits", user-defined metrics):
//! - at most 200 time series per request, one point per series per request ([`MAX_SERIES`]);
//! - "the end times of points written to a time series [must] be at least 10 seconds apart", and
//!   a new point must be more recent than any other point of its series ([`MIN_POINT_INTERVAL`]);
//! - custom metrics take the kinds GAUGE and CUMULATIVE, not DELTA. Every point here is a GAUGE
//!   whose value is what happened since the series' previous point (counts; the latencies as a
//!   DISTRIBUTION of milliseconds), so the alerts and charts read them with `ALIGN_SUM` (counts)
//!   and `ALIGN_PERCENTILE_99` (latencies). CUMULATIVE would need one running total per series
//!   from a fixed start, which an instance that Cloud Run starts and stops at will cannot keep;
//! - the monitored resource must be one of the types user-defined metrics accept ("Create
//!   user-defined metrics with the API", "Choose a monitored resource type": `generic_task`,
//!   `generic_node`, `gce_instance`, `k8s_*`, `global` …). `cloud_run_revision` is not among them,
//!   so the points are written against a `generic_task`: namespace `tagwarden`, job the Cloud Run
//!   service (`K_SERVICE`), task the process ([`task_id`]).
//!
//! Why two points never land too close on one series: each Cloud Run instance (process) writes
//! series of its own (its `task_id`), and within the process the [`Publisher`] keeps the time of
//! each series' last point. An invocation that ends within [`MIN_POINT_INTERVAL`] of it holds its
//! counts back and the next invocation's point for that series carries their sum (counts add,
//! latency samples join). Held counts of an instance that Cloud Run stops before its next
//! invocation are lost: metrics are best effort, as on the other clouds.
//!
//! Labels: `cloud`, `infra_id` (the cluster, the other clouds' `InfraID`; "all" for a cluster
//! set's own counts) and, per resource type, `resource_type`. The cluster's sum over resource
//! types of `WouldWrite`, `ResourcesInLine` and `ResourcesDrifted`, which the other clouds emit
//! beside the per-type values, is not written here: in Cloud Monitoring every series of a metric
//! type is one metric, so a total beside its parts would be counted twice by any sum; the total
//! is the per-type series summed by `infra_id`. `CallsPerCorrection` is CloudWatch's only, as on
//! Azure.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use google_cloud_api::model::distribution::bucket_options::{Exponential, Options};
use google_cloud_api::model::distribution::BucketOptions;
use google_cloud_api::model::metric_descriptor::{MetricKind, ValueType};
use google_cloud_api::model::{Distribution, Metric as ApiMetric, MonitoredResource};
use google_cloud_auth::credentials;
use google_cloud_monitoring_v3::client::MetricService;
use google_cloud_monitoring_v3::model::{typed_value, Point, TimeInterval, TimeSeries, TypedValue};
use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::report::{
    by_cluster, Metrics, Record, COMPLIANCE_COUNTS, COMPLIANCE_LAG, EVENT_COUNTS, RECONCILE_LATENCY, TYPE_COUNTS,
};
use tagwarden_engine::cloud_error::CloudError;

use crate::clients::ClientsError;

pub const OP_WRITE: &str = "monitoring:CreateTimeSeries";

/// Every metric type is this and a name of the core's table (infra/gcp `monitoring.tf`).
pub const METRIC_PREFIX: &str = "custom.googleapis.com/tagwarden/";

/// "The maximum number of TimeSeries objects per Create request is 200" (`CreateTimeSeriesRequest`).
pub const MAX_SERIES: usize = 200;

/// "The end times of points written to a time series [must] be at least 10 seconds apart"
/// (Cloud Monitoring, "Quotas and limits", rate at which data can be written to a single series).
pub const MIN_POINT_INTERVAL: Duration = Duration::from_secs(10);

/// Google's own endpoint; `TAGWARDEN_GCP_ENDPOINT` replaces it (a test server).
pub const DEFAULT_ENDPOINT: &str = "https://monitoring.googleapis.com";

/// The latencies' buckets: exponential from 1 ms by a factor of 1.5 (≤ 200 buckets per custom
/// distribution, "Quotas and limits"); the last finite bound, 1.5^60 ms, is beyond 8 days.
const BUCKETS: i32 = 60;
const GROWTH: f64 = 1.5;

/// Where the function writes its metrics (`TAGWARDEN_METRICS_PROJECT` set; infra/gcp sets it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// The project the points are written to, where `monitoring.tf` declares the metrics.
    pub project: String,
    /// Cloud Monitoring's base URL.
    pub endpoint: String,
    /// The `generic_task`'s `location` (`TAGWARDEN_METRICS_LOCATION`, else `global`).
    pub location: String,
    /// The `generic_task`'s `job`: the Cloud Run service (`K_SERVICE`, which Cloud Run sets).
    pub job: String,
}

/// One series' identity: the metric's name and its labels (the resource is the publisher's).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    pub metric: &'static str,
    pub labels: BTreeMap<&'static str, String>,
}

/// A series' value over an invocation (or over the invocations held back for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sample {
    Count(u64),
    /// Milliseconds, one per observation.
    Millis(Vec<u64>),
}

impl Sample {
    fn add(&mut self, other: Sample) {
        match (self, other) {
            (Sample::Count(a), Sample::Count(b)) => *a += b,
            (Sample::Millis(a), Sample::Millis(b)) => a.extend(b),
            // One metric name is always one kind (the table's): nothing else reaches here.
            (this, other) => *this = other,
        }
    }
}

/// One cluster's series of one invocation, in the other clouds' order: the invocation's counts
/// when not zero (labels `cloud`, `infra_id`), the compliance lag, then per resource type every
/// count of [`TYPE_COUNTS`] and [`COMPLIANCE_COUNTS`] (`cloud`, `resource_type`, `infra_id`) and
/// its reconcile latency.
pub fn samples(metrics: &Metrics, infra_id: &str) -> Vec<(SeriesKey, Sample)> {
    let cloud = Cloud::Gcp.as_str();
    let key = |metric, resource_type: Option<&str>| {
        let mut labels = BTreeMap::from([("cloud", cloud.to_string()), ("infra_id", infra_id.to_string())]);
        if let Some(t) = resource_type {
            labels.insert("resource_type", t.to_string());
        }
        SeriesKey { metric, labels }
    };
    let mut out = Vec::new();
    for (m, get) in &EVENT_COUNTS {
        let v = get(metrics);
        if v > 0 {
            out.push((key(m.name, None), Sample::Count(v)));
        }
    }
    if !metrics.compliance_lag_ms.is_empty() {
        out.push((key(COMPLIANCE_LAG.name, None), Sample::Millis(metrics.compliance_lag_ms.clone())));
    }
    for (t, c) in &metrics.by_type {
        for (m, get) in TYPE_COUNTS.iter().chain(&COMPLIANCE_COUNTS) {
            out.push((key(m.name, Some(t)), Sample::Count(get(c))));
        }
        if !c.latency_ms.is_empty() {
            out.push((key(RECONCILE_LATENCY.name, Some(t)), Sample::Millis(c.latency_ms.clone())));
        }
    }
    out
}

/// What the process held back, and when each series last got a point.
#[derive(Debug, Default)]
pub struct Held {
    pending: BTreeMap<SeriesKey, Sample>,
    last: HashMap<SeriesKey, SystemTime>,
}

impl Held {
    /// Add an invocation's samples to what is held, and take every series that may have a point
    /// at `now` (none in the last [`MIN_POINT_INTERVAL`]), marking it written at `now`. A clock
    /// that went back counts as too soon.
    pub fn take(&mut self, samples: Vec<(SeriesKey, Sample)>, now: SystemTime) -> Vec<(SeriesKey, Sample)> {
        let due = |t: &SystemTime| now.duration_since(*t).is_ok_and(|d| d >= MIN_POINT_INTERVAL);
        // A series whose last point is that old needs no memory of it.
        self.last.retain(|_, t| !due(t));
        for (k, s) in samples {
            match self.pending.get_mut(&k) {
                Some(held) => held.add(s),
                None => {
                    self.pending.insert(k, s);
                }
            }
        }
        let (ready, wait): (BTreeMap<_, _>, BTreeMap<_, _>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(k, _)| !self.last.contains_key(k));
        self.pending = wait;
        for k in ready.keys() {
            self.last.insert(k.clone(), now);
        }
        ready.into_iter().collect()
    }

    /// The series held back for a later point.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// One series with its one point at `end`, against `resource`.
pub fn time_series(key: &SeriesKey, sample: &Sample, resource: &MonitoredResource, end: SystemTime) -> TimeSeries {
    let labels = key.labels.iter().map(|(k, v)| (k.to_string(), v.clone()));
    let metric = ApiMetric::new().set_type(format!("{METRIC_PREFIX}{}", key.metric)).set_labels(labels);
    let (value_type, value) = match sample {
        Sample::Count(n) => (ValueType::Int64, typed_value::Value::Int64Value(i64::try_from(*n).unwrap_or(i64::MAX))),
        Sample::Millis(ms) => {
            (ValueType::Distribution, typed_value::Value::DistributionValue(Box::new(distribution(ms))))
        }
    };
    // A GAUGE point's interval is its end time alone (a start, if given, must equal it).
    let end = wkt_time(end);
    let point =
        Point::new().set_interval(TimeInterval::new().set_end_time(end)).set_value(TypedValue::new().set_value(value));
    TimeSeries::new()
        .set_metric(metric)
        .set_resource(resource.clone())
        .set_metric_kind(MetricKind::Gauge)
        .set_value_type(value_type)
        .set_points([point])
}

fn wkt_time(t: SystemTime) -> google_cloud_wkt::Timestamp {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    google_cloud_wkt::Timestamp::clamp(i64::try_from(d.as_secs()).unwrap_or(i64::MAX), d.subsec_nanos() as i32)
}

/// Milliseconds as a distribution over [`BUCKETS`] exponential buckets (with the underflow and
/// overflow buckets, as `Distribution.BucketOptions.Exponential` defines them).
pub fn distribution(ms: &[u64]) -> Distribution {
    let n = ms.len() as f64;
    let mean = if ms.is_empty() { 0.0 } else { ms.iter().map(|&v| v as f64).sum::<f64>() / n };
    let ssd = ms.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>();
    let mut counts = vec![0i64; BUCKETS as usize + 2];
    for &v in ms {
        counts[bucket(v)] += 1;
    }
    let options = Options::ExponentialBuckets(Box::new(
        Exponential::new().set_num_finite_buckets(BUCKETS).set_growth_factor(GROWTH).set_scale(1.0),
    ));
    Distribution::new()
        .set_count(ms.len() as i64)
        .set_mean(mean)
        .set_sum_of_squared_deviation(ssd)
        .set_bucket_options(BucketOptions::new().set_options(options))
        .set_bucket_counts(counts)
}

/// Bucket 0 holds values below the scale (1), bucket i (1 ≤ i ≤ N) `[GROWTH^(i-1), GROWTH^i)`,
/// bucket N+1 the rest.
fn bucket(v: u64) -> usize {
    if v < 1 {
        return 0;
    }
    let i = ((v as f64).ln() / GROWTH.ln()).floor() as usize + 1;
    i.min(BUCKETS as usize + 1)
}

/// This process's task: Cloud Run's revision (`K_REVISION`), the process id and its start time,
/// so two instances never share a series.
pub fn task_id() -> String {
    let revision = std::env::var("K_REVISION").unwrap_or_else(|_| "local".into());
    let started = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{revision}-{}-{started:x}", std::process::id())
}

/// Writes an invocation's metrics, best effort (the caller logs a failure and carries on).
pub struct Publisher {
    client: MetricService,
    project: String,
    resource: MonitoredResource,
    held: Mutex<Held>,
    calls: CallCounter,
}

impl Publisher {
    /// The client at `config.endpoint` with Application Default Credentials (`anonymous`: none,
    /// for a test server).
    pub async fn new(config: &MetricsConfig, anonymous: bool, calls: CallCounter) -> Result<Self, ClientsError> {
        crate::clients::install_crypto();
        let creds = if anonymous {
            credentials::anonymous::Builder::new().build()
        } else {
            credentials::Builder::default().build().map_err(|e| ClientsError::Credentials(e.to_string()))?
        };
        let client = MetricService::builder()
            .with_endpoint(&config.endpoint)
            .with_credentials(creds)
            .build()
            .await
            .map_err(|source| ClientsError::Build { service: "Cloud Monitoring", source })?;
        let resource = MonitoredResource::new().set_type("generic_task").set_labels([
            ("project_id", config.project.clone()),
            ("location", config.location.clone()),
            ("namespace", "tagwarden".to_string()),
            ("job", config.job.clone()),
            ("task_id", task_id()),
        ]);
        Ok(Publisher { client, project: config.project.clone(), resource, held: Mutex::new(Held::default()), calls })
    }

    /// Write an invocation's metrics, per cluster ([`by_cluster`]; `deployment` labels what no
    /// single cluster owns), in requests of at most [`MAX_SERIES`]. Returns the series written;
    /// on a failed request the others are still sent and the last error is returned. Failed
    /// points are not retried: the API writes the series of a request it can, so a retry could
    /// count some twice.
    pub async fn publish(&self, metrics: &Metrics, records: &[Record], deployment: &str) -> Result<usize, CloudError> {
        self.publish_at(metrics, records, deployment, SystemTime::now()).await
    }

    /// The same at a given time (tests).
    pub async fn publish_at(
        &self,
        metrics: &Metrics,
        records: &[Record],
        deployment: &str,
        now: SystemTime,
    ) -> Result<usize, CloudError> {
        let all = by_cluster(metrics, records, deployment).iter().flat_map(|(c, m)| samples(m, c)).collect();
        let due = self.held.lock().unwrap_or_else(|p| p.into_inner()).take(all, now);
        let series: Vec<TimeSeries> = due.iter().map(|(k, s)| time_series(k, s, &self.resource, now)).collect();
        let target = format!("projects/{}", self.project);
        let (mut written, mut failed) = (0, None);
        for chunk in series.chunks(MAX_SERIES) {
            self.calls.record(OP_WRITE);
            match self.client.create_time_series().set_name(&target).set_time_series(chunk.to_vec()).send().await {
                Ok(_) => written += chunk.len(),
                Err(e) => failed = Some(crate::error::from_gax(OP_WRITE, &target, &e)),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::report::{StopCounts, TypeCounters};

    /// Every counter of the table at a value of its own, so each metric has a series.
    fn everything() -> Metrics {
        let c = TypeCounters {
            resources_evaluated: 1,
            drift_detected: 2,
            tags_written: 3,
            write_failures: 4,
            tag_limit_exceeded: 5,
            conflicts: 6,
            unsupported: 7,
            contested: 8,
            would_write: 9,
            in_line: 10,
            drifted: 11,
            latency_ms: vec![5, 50],
        };
        Metrics {
            events_received: 1,
            events_ignored: 2,
            policy_rejected: 3,
            listing_failures: 4,
            listing_fallbacks: 5,
            sweeps_completed: 6,
            corrected: 1,
            api_calls: 3,
            compliance_lag_ms: vec![1, 1000],
            by_type: [("compute.googleapis.com/Instance".to_string(), c)].into(),
            stops: StopCounts { deferred: 1, no_policy: 2, cannot_sweep: 3, member: 4, unreadable: 5 },
        }
    }

    /// Every name of the core's one table has its series, named as the other clouds name it,
    /// with the other clouds' dimensions as labels; a metric added to the table without a value
    /// here fails this test.
    #[test]
    fn every_metric_of_the_table_under_its_name() {
        let out = samples(&everything(), "c-1");
        let has = |name: &str, typed: bool| {
            out.iter().any(|(k, _)| {
                k.metric == name
                    && k.labels.get("cloud").map(String::as_str) == Some("gcp")
                    && k.labels.get("infra_id").map(String::as_str) == Some("c-1")
                    && k.labels.contains_key("resource_type") == typed
            })
        };
        for (m, _) in &EVENT_COUNTS {
            assert!(has(m.name, false), "{} missing", m.name);
        }
        for (m, _) in TYPE_COUNTS.iter().chain(&COMPLIANCE_COUNTS) {
            assert!(has(m.name, true), "{} missing", m.name);
        }
        assert!(has(COMPLIANCE_LAG.name, false) && has(RECONCILE_LATENCY.name, true));
        let names: std::collections::BTreeSet<&str> = out.iter().map(|(k, _)| k.metric).collect();
        let table: std::collections::BTreeSet<&str> = EVENT_COUNTS
            .iter()
            .map(|(m, _)| m.name)
            .chain(TYPE_COUNTS.iter().chain(&COMPLIANCE_COUNTS).map(|(m, _)| m.name))
            .chain([COMPLIANCE_LAG.name, RECONCILE_LATENCY.name])
            .collect();
        assert_eq!(names, table, "exactly the table's names, CloudWatch's CallsPerCorrection aside");
        // The sums over types are not written beside their parts (they would count twice).
        assert!(!out.iter().any(|(k, _)| k.metric == "ResourcesInLine" && !k.labels.contains_key("resource_type")));
    }

    /// infra/gcp declares exactly these metric types, with these labels.
    #[test]
    fn terraform_declares_every_metric() {
        let tf = include_str!("../../../infra/gcp/monitoring.tf");
        assert!(tf.contains(&format!("metric_prefix = \"{METRIC_PREFIX}\"")));
        for (k, s) in samples(&everything(), "c-1") {
            let kind = match s {
                Sample::Count(_) => "count_metrics",
                Sample::Millis(_) => "distribution_metrics",
            };
            let block = tf.split(&format!("  {kind} = {{")).nth(1).and_then(|b| b.split("\n  }").next());
            let declared = block.is_some_and(|b| b.lines().any(|l| l.split_whitespace().next() == Some(k.metric)));
            assert!(declared, "{} not in monitoring.tf's {kind}", k.metric);
            for label in k.labels.keys() {
                assert!(tf.contains(&format!("    {label} ")), "label {label} not declared");
            }
        }
    }

    #[test]
    fn series_shape() {
        let resource = MonitoredResource::new().set_type("generic_task");
        let key = samples(&everything(), "c-1").into_iter().find(|(k, _)| k.metric == "ComplianceLag").expect("lag");
        let ts = time_series(&key.0, &key.1, &resource, UNIX_EPOCH + Duration::from_secs(100));
        assert_eq!(
            ts.metric.as_ref().map(|m| m.r#type.as_str()),
            Some("custom.googleapis.com/tagwarden/ComplianceLag")
        );
        assert_eq!((ts.metric_kind, ts.value_type), (MetricKind::Gauge, ValueType::Distribution));
        assert_eq!(ts.points.len(), 1);
        let Some(typed_value::Value::DistributionValue(d)) = ts.points[0].value.as_ref().and_then(|v| v.value.clone())
        else {
            panic!("a distribution")
        };
        assert_eq!((d.count, d.mean), (2, 500.5));
        assert_eq!(d.bucket_counts.iter().sum::<i64>(), 2);
        assert_eq!((d.bucket_counts[1], d.bucket_counts.len()), (1, BUCKETS as usize + 2), "1 ms in [1, 1.5)");
        assert_eq!((bucket(0), bucket(1), bucket(2), bucket(u64::MAX)), (0, 1, 2, BUCKETS as usize + 1));
    }

    #[test]
    fn configured_by_the_project_variable() {
        let vars = |extra: &[(&'static str, &'static str)]| {
            let mut v = vec![("TAGWARDEN_POLICY", "gs://tw-policies/p.yaml")];
            v.extend_from_slice(extra);
            crate::config::Config::from_lookup(|k| v.iter().find(|(n, _)| *n == k).map(|(_, x)| x.to_string()))
                .expect("config")
                .metrics
        };
        assert_eq!(vars(&[]), None);
        let m = vars(&[("TAGWARDEN_METRICS_PROJECT", "p-1"), ("K_SERVICE", "tw")]).expect("metrics");
        assert_eq!((m.project.as_str(), m.endpoint.as_str()), ("p-1", DEFAULT_ENDPOINT));
        assert_eq!((m.location.as_str(), m.job.as_str()), ("global", "tw"));
        let m = vars(&[("TAGWARDEN_METRICS_PROJECT", "p-1"), ("TAGWARDEN_GCP_ENDPOINT", "http://127.0.0.1:1")]);
        assert_eq!(m.map(|m| m.endpoint), Some("http://127.0.0.1:1".to_string()));
    }

    /// A series gets no second point within the minimum interval: the counts wait, and the next
    /// point carries their sum.
    #[test]
    fn points_of_one_series_stay_ten_seconds_apart() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000);
        let one = |n| samples(&Metrics { events_received: n, ..Metrics::default() }, "all");
        let mut held = Held::default();
        assert_eq!(held.take(one(1), t0), one(1));
        assert!(held.take(one(2), t0 + Duration::from_secs(3)).is_empty());
        assert!(held.take(one(4), t0 + Duration::from_millis(9_999)).is_empty());
        assert_eq!(held.pending(), 1);
        assert_eq!(held.take(vec![], t0 + MIN_POINT_INTERVAL), one(6), "2 + 4 in one point");
        // Another series is not held back by this one's.
        let other = samples(&Metrics { events_ignored: 1, ..Metrics::default() }, "all");
        assert_eq!(held.take(other.clone(), t0 + Duration::from_secs(11)), other);
        // A clock that went back waits.
        assert!(held.take(one(1), t0).is_empty());
    }
}
