//! Cloud Monitoring v3's `projects.timeSeries.create` as google-cloud-monitoring-v3 1.14 calls it
//! (its `transport.rs`): `POST /v3/projects/{project}/timeSeries` with a `CreateTimeSeriesRequest`
//! body (`{"timeSeries": [TimeSeries…]}`), answered `{}` when every series was written.
//!
//! The rules the real API holds a request to, checked here so a test meets them (Cloud
//! Monitoring API reference, `projects.timeSeries.create`; "Quotas and limits", user-defined
//! metrics): at most 200 series, exactly one point per series, metric types under
//! `custom.googleapis.com/`, a GAUGE or CUMULATIVE kind (no DELTA for custom metrics), a
//! monitored resource type user-defined metrics take, and each new point at least 10 seconds
//! after the series' previous one. A breach answers 400 `INVALID_ARGUMENT` in the gRPC-transcoded
//! error shape, as the real API does, and writes none of the request's series (the real API
//! writes the valid ones; the tests only need the refusal).

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use super::http::{Req, Resp};

/// "The maximum number of TimeSeries objects per Create request is 200."
pub const MAX_SERIES: usize = 200;

/// The minimum distance between the end times of two points of one series, in milliseconds.
pub const MIN_INTERVAL_MS: i64 = 10_000;

/// The monitored resource types user-defined metrics may be written against ("Create
/// user-defined metrics with the API", "Choose a monitored resource type").
const RESOURCE_TYPES: [&str; 12] = [
    "aws_ec2_instance",
    "dataflow_job",
    "gae_instance",
    "gce_instance",
    "generic_node",
    "generic_task",
    "gke_container",
    "global",
    "k8s_cluster",
    "k8s_container",
    "k8s_node",
    "k8s_pod",
];

/// One series as written, with its one point.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenSeries {
    pub project: String,
    /// `custom.googleapis.com/tagwarden/EventsReceived`.
    pub metric_type: String,
    pub labels: BTreeMap<String, String>,
    pub resource_type: String,
    pub resource_labels: BTreeMap<String, String>,
    pub metric_kind: String,
    pub value_type: String,
    /// The point's end time, ms since the epoch.
    pub end_ms: i64,
    /// The point's `TypedValue` as sent (`{"int64Value": "3"}`, `{"distributionValue": {…}}`).
    pub value: Value,
}

impl WrittenSeries {
    /// The name after `custom.googleapis.com/tagwarden/`.
    pub fn name(&self) -> &str {
        self.metric_type.rsplit('/').next().unwrap_or_default()
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// An INT64 point's value (proto3 JSON writes an int64 as a string; a number is read too).
    pub fn int64(&self) -> Option<i64> {
        let v = self.value.get("int64Value")?;
        v.as_i64().or_else(|| v.as_str()?.parse().ok())
    }

    /// A DISTRIBUTION point's count.
    pub fn count(&self) -> Option<i64> {
        let v = self.value.pointer("/distributionValue/count")?;
        v.as_i64().or_else(|| v.as_str()?.parse().ok())
    }
}

/// Every series written, in order, and each series' last end time.
#[derive(Debug, Default)]
pub struct Store {
    pub written: Vec<WrittenSeries>,
    last: HashMap<String, i64>,
}

pub fn handle(store: &mut Store, r: &Req) -> Resp {
    let project = r.path.strip_prefix("/v3/projects/").and_then(|p| p.strip_suffix("/timeSeries"));
    let Some(project) = project.filter(|p| !p.is_empty() && !p.contains('/')) else { return Resp::not_found(&r.path) };
    if r.method != "POST" {
        return Resp::not_found(&r.path);
    }
    let body = r.json();
    let Some(series) = body.get("timeSeries").and_then(Value::as_array).filter(|s| !s.is_empty()) else {
        return invalid("Field timeSeries had an invalid value: at least one TimeSeries is required.");
    };
    if series.len() > MAX_SERIES {
        return invalid(&format!(
            "Field timeSeries had an invalid value: at most {MAX_SERIES} TimeSeries per request."
        ));
    }
    let mut parsed = Vec::new();
    for (i, s) in series.iter().enumerate() {
        match read(project, s) {
            Ok(w) => parsed.push(w),
            Err(why) => {
                return invalid(&format!("One or more TimeSeries could not be written: {why}: timeSeries[{i}]"))
            }
        }
    }
    for (i, w) in parsed.iter().enumerate() {
        let id = identity(w);
        let earlier = parsed[..i].iter().any(|p| identity(p) == id);
        let too_soon = store.last.get(&id).is_some_and(|last| w.end_ms < last + MIN_INTERVAL_MS);
        if earlier || too_soon {
            return invalid(&format!(
                "One or more TimeSeries could not be written: One or more points were written more frequently than the maximum sampling period configured for the metric.: timeSeries[{i}]"
            ));
        }
    }
    for w in parsed {
        store.last.insert(identity(&w), w.end_ms);
        store.written.push(w);
    }
    Resp::ok(json!({}))
}

fn invalid(message: &str) -> Resp {
    Resp::rpc_error(400, "INVALID_ARGUMENT", message)
}

/// A series' identity: its metric and monitored resource, fully labelled.
fn identity(w: &WrittenSeries) -> String {
    format!("{}{:?}{}{:?}", w.metric_type, w.labels, w.resource_type, w.resource_labels)
}

fn labels(v: Option<&Value>) -> BTreeMap<String, String> {
    let Some(map) = v.and_then(Value::as_object) else { return BTreeMap::new() };
    map.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect()
}

fn read(project: &str, s: &Value) -> Result<WrittenSeries, String> {
    let metric_type = s.pointer("/metric/type").and_then(Value::as_str).unwrap_or_default().to_string();
    if !metric_type.starts_with("custom.googleapis.com/") {
        return Err(format!("Unknown metric: {metric_type}"));
    }
    let resource_type = s.pointer("/resource/type").and_then(Value::as_str).unwrap_or_default().to_string();
    if !RESOURCE_TYPES.contains(&resource_type.as_str()) {
        return Err(format!("The set of resource labels is incomplete or the resource type {resource_type} is not allowed for custom metrics"));
    }
    let metric_kind = s.get("metricKind").and_then(Value::as_str).unwrap_or("GAUGE").to_string();
    if !matches!(metric_kind.as_str(), "GAUGE" | "CUMULATIVE") {
        return Err(format!("Metric kind {metric_kind} is not allowed for custom metrics"));
    }
    let points = s.get("points").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let [point] = points else {
        return Err(format!("Exactly one point per TimeSeries in a request, not {}", points.len()));
    };
    let end = point.pointer("/interval/endTime").and_then(Value::as_str).unwrap_or_default();
    let end_ms = parse_rfc3339_utc(end).ok_or_else(|| format!("Invalid point end time {end:?}"))?;
    Ok(WrittenSeries {
        project: project.to_string(),
        metric_type,
        labels: labels(s.pointer("/metric/labels")),
        resource_type,
        resource_labels: labels(s.pointer("/resource/labels")),
        metric_kind,
        value_type: s.get("valueType").and_then(Value::as_str).unwrap_or_default().to_string(),
        end_ms,
        value: point.get("value").cloned().unwrap_or(Value::Null),
    })
}

/// `2026-11-29T15:33:00.123456789Z` (a protobuf `Timestamp` in JSON: UTC, 0 to 9 fraction
/// digits) as ms since the epoch.
fn parse_rfc3339_utc(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next()??);
    let millis = format!("{frac:0<3}").get(..3)?.parse::<i64>().ok()?;
    // Howard Hinnant's days-from-civil algorithm.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + millis)
}

#[cfg(test)]
#[test]
fn a_point_too_soon_is_refused() {
    let series = |end: &str| {
        json!({"timeSeries": [{
            "metric": {"type": "custom.googleapis.com/tagwarden/EventsReceived", "labels": {"infra_id": "all"}},
            "resource": {"type": "generic_task", "labels": {"task_id": "t-1"}},
            "metricKind": "GAUGE", "valueType": "INT64",
            "points": [{"interval": {"endTime": end}, "value": {"int64Value": "2"}}],
        }]})
    };
    let post = |store: &mut Store, body: Value| {
        let r = Req {
            method: "POST".into(),
            path: "/v3/projects/p-1/timeSeries".into(),
            query: String::new(),
            headers: vec![],
            body: body.to_string().into_bytes(),
        };
        handle(store, &r)
    };
    let mut store = Store::default();
    assert_eq!(post(&mut store, series("2026-11-29T15:00:00Z")).status, 200);
    let soon = post(&mut store, series("2026-11-29T15:00:09.999Z"));
    assert_eq!((soon.status, soon.body["error"]["status"].as_str()), (400, Some("INVALID_ARGUMENT")));
    assert_eq!(post(&mut store, series("2026-11-29T15:00:10Z")).status, 200);
    assert_eq!(store.written.len(), 2);
    assert_eq!((store.written[1].name(), store.written[1].int64()), ("EventsReceived", Some(2)));
    let mut delta = series("2026-11-29T16:00:00Z");
    delta["timeSeries"][0]["metricKind"] = json!("DELTA");
    assert_eq!(post(&mut store, delta).status, 400, "no DELTA for custom metrics");
}

#[cfg(test)]
#[test]
fn timestamps() {
    assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_rfc3339_utc("2024-03-01T00:00:00.123456Z"), Some(1_709_251_200_123));
    assert_eq!(parse_rfc3339_utc("2024-03-01T00:00:01.5Z"), Some(1_709_251_201_500));
    assert_eq!(parse_rfc3339_utc("2024-03-01T00:00:00+01:00"), None);
}
