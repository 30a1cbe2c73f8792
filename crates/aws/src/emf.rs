//! An invocation's metrics as CloudWatch Embedded Metric Format lines (docs/src/lookup/metrics.md):
//! JSON lines on stdout that CloudWatch Logs turns into metrics without an API call. The metrics
//! and their units are `tagwarden_core::report`'s tables, which Azure's encoder reads too.

use serde_json::{json, Map, Value};

use tagwarden_core::cloud::Cloud;
use tagwarden_core::report::{
    Metric, Metrics, CALLS_PER_CORRECTION, COMPLIANCE_COUNTS, COMPLIANCE_LAG, EVENT_COUNTS, NAMESPACE,
    RECONCILE_LATENCY, TYPE_COUNTS,
};

/// EMF lines: one with the event-level metrics (dimensions Cloud, InfraID) and one per resource
/// type (Cloud, ResourceType, InfraID). The cluster's `WouldWrite`, `ResourcesInLine` and
/// `ResourcesDrifted` are on both: all three together whenever an owned resource was evaluated, so
/// compliance = in line / (in line + drifted) has its terms.
pub fn lines(metrics: &Metrics, cloud: Cloud, infra_id: &str, timestamp_ms: u64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut event_metrics: Vec<(&Metric, u64)> =
        EVENT_COUNTS.iter().map(|(m, count)| (m, count(metrics))).filter(|(_, v)| *v > 0).collect();
    if metrics.compliance().is_some() {
        event_metrics
            .extend(COMPLIANCE_COUNTS.iter().map(|(m, count)| (m, metrics.by_type.values().map(count).sum::<u64>())));
    }
    let lag = !metrics.compliance_lag_ms.is_empty();
    // Beside the lag, what a correction cost: the invocation's calls per resource corrected.
    let cost =
        (metrics.api_calls > 0 && metrics.corrected > 0).then(|| metrics.api_calls as f64 / metrics.corrected as f64);
    if !event_metrics.is_empty() || lag || cost.is_some() {
        let named = event_metrics.iter().map(|(m, _)| *m);
        let named = named.chain(lag.then_some(&COMPLIANCE_LAG)).chain(cost.map(|_| &CALLS_PER_CORRECTION));
        let mut doc = header(timestamp_ms, &["Cloud", "InfraID"], named);
        doc.insert("Cloud".into(), cloud.as_str().into());
        doc.insert("InfraID".into(), infra_id.into());
        for (m, v) in event_metrics {
            doc.insert(m.name.into(), v.into());
        }
        if lag {
            // An array: EMF keeps every value, so CloudWatch's percentiles are exact.
            doc.insert(COMPLIANCE_LAG.name.into(), metrics.compliance_lag_ms.clone().into());
        }
        if let Some(cost) = cost {
            doc.insert(CALLS_PER_CORRECTION.name.into(), ((cost * 1000.0).round() / 1000.0).into());
        }
        lines.push(Value::Object(doc).to_string());
    }
    for (rtype, c) in &metrics.by_type {
        let counts: Vec<(&Metric, u64)> =
            TYPE_COUNTS.iter().chain(&COMPLIANCE_COUNTS).map(|(m, count)| (m, count(c))).collect();
        let latency = !c.latency_ms.is_empty();
        let named = counts.iter().map(|(m, _)| *m).chain(latency.then_some(&RECONCILE_LATENCY));
        let mut doc = header(timestamp_ms, &["Cloud", "ResourceType", "InfraID"], named);
        doc.insert("Cloud".into(), cloud.as_str().into());
        doc.insert("ResourceType".into(), rtype.as_str().into());
        doc.insert("InfraID".into(), infra_id.into());
        for (m, v) in counts {
            doc.insert(m.name.into(), v.into());
        }
        if latency {
            doc.insert(RECONCILE_LATENCY.name.into(), c.latency_ms.clone().into());
        }
        lines.push(Value::Object(doc).to_string());
    }
    lines
}

/// The `_aws` member naming the line's metrics, each with its unit, and its dimensions.
fn header<'a>(timestamp_ms: u64, dimensions: &[&str], metrics: impl Iterator<Item = &'a Metric>) -> Map<String, Value> {
    let metrics: Vec<Value> = metrics.map(|m| json!({"Name": m.name, "Unit": m.unit})).collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [dimensions], "Metrics": metrics}],
        }),
    );
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::report::TypeCounters;

    #[test]
    fn emf_shape() {
        let ec2 = TypeCounters {
            resources_evaluated: 2,
            drift_detected: 1,
            tags_written: 3,
            in_line: 2,
            latency_ms: vec![7, 7],
            ..TypeCounters::default()
        };
        let s3 = TypeCounters { resources_evaluated: 1, write_failures: 1, ..TypeCounters::default() };
        let m = Metrics {
            events_received: 2,
            events_ignored: 1,
            by_type: [("ec2:instance".to_string(), ec2), ("s3:bucket".to_string(), s3)].into(),
            ..Metrics::default()
        };
        let lines: Vec<Value> = lines(&m, Cloud::Aws, "c1", 1_700_000_000_000)
            .iter()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 3);
        let ev = &lines[0];
        assert_eq!(ev["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
        assert_eq!(ev["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Cloud", "InfraID"]]));
        assert_eq!((ev["EventsReceived"].as_u64(), ev["EventsIgnored"].as_u64()), (Some(2), Some(1)));
        let ec2 = &lines[1];
        assert_eq!(ec2["ResourceType"], "ec2:instance");
        assert_eq!(
            (ec2["ResourcesEvaluated"].as_u64(), ec2["DriftDetected"].as_u64(), ec2["TagsWritten"].as_u64()),
            (Some(2), Some(1), Some(3))
        );
        assert_eq!(ec2["ReconcileLatency"], json!([7, 7]));
        // Every metric named in the header has a value at the top level, as EMF requires.
        for line in &lines {
            for metric in line["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().expect("metrics") {
                let name = metric["Name"].as_str().expect("name");
                assert!(line.get(name).is_some(), "{name} missing");
            }
            for dim in line["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0].as_array().expect("dims") {
                assert!(line.get(dim.as_str().expect("dim")).is_some());
            }
        }
        assert_eq!(lines[2]["WriteFailures"].as_u64(), Some(1));
    }

    /// The exact text CloudWatch reads, as it was when the encoder lived in the core.
    #[test]
    fn emf_text_is_unchanged() {
        let ec2 = TypeCounters {
            resources_evaluated: 2,
            drift_detected: 1,
            tags_written: 3,
            in_line: 2,
            latency_ms: vec![7],
            ..TypeCounters::default()
        };
        let m = Metrics {
            events_received: 2,
            sweeps_completed: 1,
            corrected: 1,
            api_calls: 3,
            compliance_lag_ms: vec![4_250, 10],
            by_type: [("ec2:instance".to_string(), ec2)].into(),
            ..Metrics::default()
        };
        assert_eq!(
            lines(&m, Cloud::Aws, "c1", 5),
            [
                r#"{"CallsPerCorrection":3.0,"Cloud":"aws","ComplianceLag":[4250,10],"EventsReceived":2,"InfraID":"c1","ResourcesDrifted":0,"ResourcesInLine":2,"SweepsCompleted":1,"WouldWrite":0,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Cloud","InfraID"]],"Metrics":[{"Name":"EventsReceived","Unit":"Count"},{"Name":"SweepsCompleted","Unit":"Count"},{"Name":"WouldWrite","Unit":"Count"},{"Name":"ResourcesInLine","Unit":"Count"},{"Name":"ResourcesDrifted","Unit":"Count"},{"Name":"ComplianceLag","Unit":"Milliseconds"},{"Name":"CallsPerCorrection","Unit":"None"}],"Namespace":"TagWarden"}],"Timestamp":5}}"#,
                r#"{"Cloud":"aws","Conflicts":0,"Contested":0,"DriftDetected":1,"InfraID":"c1","ReconcileLatency":[7],"ResourceType":"ec2:instance","ResourcesDrifted":0,"ResourcesEvaluated":2,"ResourcesInLine":2,"TagLimitExceeded":0,"TagsWritten":3,"Unsupported":0,"WouldWrite":0,"WriteFailures":0,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Cloud","ResourceType","InfraID"]],"Metrics":[{"Name":"ResourcesEvaluated","Unit":"Count"},{"Name":"DriftDetected","Unit":"Count"},{"Name":"TagsWritten","Unit":"Count"},{"Name":"WriteFailures","Unit":"Count"},{"Name":"TagLimitExceeded","Unit":"Count"},{"Name":"Conflicts","Unit":"Count"},{"Name":"Unsupported","Unit":"Count"},{"Name":"Contested","Unit":"Count"},{"Name":"WouldWrite","Unit":"Count"},{"Name":"ResourcesInLine","Unit":"Count"},{"Name":"ResourcesDrifted","Unit":"Count"},{"Name":"ReconcileLatency","Unit":"Milliseconds"}],"Namespace":"TagWarden"}],"Timestamp":5}}"#,
            ]
        );
    }

    /// The encoder as it was in the core (`tagwarden_core::report::Metrics::emf_lines`), to hold
    /// this one to its exact text.
    fn old_lines(m: &Metrics, cloud: Cloud, infra_id: &str, timestamp_ms: u64) -> Vec<String> {
        let this = m;
        let mut lines = Vec::new();
        let mut event_metrics: Vec<(&str, u64)> = [
            ("EventsReceived", this.events_received),
            ("EventsIgnored", this.events_ignored),
            ("PolicyRejected", this.policy_rejected),
            ("ListingFailures", this.listing_failures),
            ("ListingFallbacks", this.listing_fallbacks),
            ("SweepsCompleted", this.sweeps_completed),
        ]
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .collect();
        if let Some((would, in_line, drifted)) = this.compliance() {
            event_metrics.extend([("WouldWrite", would), ("ResourcesInLine", in_line), ("ResourcesDrifted", drifted)]);
        }
        let lag = !this.compliance_lag_ms.is_empty();
        // Beside the lag, what a correction cost: the invocation's calls per resource corrected.
        let cost = (this.api_calls > 0 && this.corrected > 0).then(|| this.api_calls as f64 / this.corrected as f64);
        if !event_metrics.is_empty() || lag || cost.is_some() {
            let units = event_metrics.iter().map(|(n, _)| (*n, "Count"));
            let units = units.chain(lag.then_some(("ComplianceLag", "Milliseconds")));
            let units = units.chain(cost.map(|_| ("CallsPerCorrection", "None")));
            let mut doc = old_header(timestamp_ms, &["Cloud", "InfraID"], units);
            doc.insert("Cloud".into(), cloud.as_str().into());
            doc.insert("InfraID".into(), infra_id.into());
            for (name, v) in event_metrics {
                doc.insert(name.into(), v.into());
            }
            if lag {
                // An array: EMF keeps every value, so CloudWatch's percentiles are exact.
                doc.insert("ComplianceLag".into(), this.compliance_lag_ms.clone().into());
            }
            if let Some(cost) = cost {
                doc.insert("CallsPerCorrection".into(), ((cost * 1000.0).round() / 1000.0).into());
            }
            lines.push(serde_json::Value::Object(doc).to_string());
        }
        for (rtype, c) in &this.by_type {
            let counts = [
                ("ResourcesEvaluated", c.resources_evaluated),
                ("DriftDetected", c.drift_detected),
                ("TagsWritten", c.tags_written),
                ("WriteFailures", c.write_failures),
                ("TagLimitExceeded", c.tag_limit_exceeded),
                ("Conflicts", c.conflicts),
                ("Unsupported", c.unsupported),
                ("Contested", c.contested),
                ("WouldWrite", c.would_write),
                ("ResourcesInLine", c.in_line),
                ("ResourcesDrifted", c.drifted),
            ];
            let mut units: Vec<(&str, &str)> = counts.iter().map(|(n, _)| (*n, "Count")).collect();
            if !c.latency_ms.is_empty() {
                units.push(("ReconcileLatency", "Milliseconds"));
            }
            let mut doc = old_header(timestamp_ms, &["Cloud", "ResourceType", "InfraID"], units.into_iter());
            doc.insert("Cloud".into(), cloud.as_str().into());
            doc.insert("ResourceType".into(), rtype.as_str().into());
            doc.insert("InfraID".into(), infra_id.into());
            for (name, v) in counts {
                doc.insert(name.into(), v.into());
            }
            if !c.latency_ms.is_empty() {
                doc.insert("ReconcileLatency".into(), c.latency_ms.clone().into());
            }
            lines.push(serde_json::Value::Object(doc).to_string());
        }
        lines
    }

    fn old_header<'a>(
        timestamp_ms: u64,
        dimensions: &[&str],
        metrics: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> serde_json::Map<String, serde_json::Value> {
        let metrics: Vec<serde_json::Value> =
            metrics.map(|(name, unit)| serde_json::json!({"Name": name, "Unit": unit})).collect();
        let mut doc = serde_json::Map::new();
        doc.insert(
            "_aws".into(),
            serde_json::json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [dimensions], "Metrics": metrics}],
            }),
        );
        doc
    }

    #[test]
    fn the_text_is_the_cores_encoders() {
        let ec2 = TypeCounters {
            resources_evaluated: 4,
            drift_detected: 2,
            tags_written: 3,
            write_failures: 1,
            tag_limit_exceeded: 1,
            conflicts: 1,
            unsupported: 1,
            contested: 1,
            would_write: 1,
            in_line: 2,
            drifted: 2,
            latency_ms: vec![7, 12],
        };
        let bare = TypeCounters { resources_evaluated: 1, unsupported: 1, ..TypeCounters::default() };
        let full = Metrics {
            events_received: 5,
            events_ignored: 1,
            policy_rejected: 1,
            listing_failures: 2,
            listing_fallbacks: 1,
            sweeps_completed: 1,
            corrected: 3,
            api_calls: 10,
            compliance_lag_ms: vec![4_250, 10],
            by_type: [("ec2:instance".to_string(), ec2), ("s3:bucket".to_string(), bare.clone())].into(),
            // Counted only since the former encoder: `stops_are_counted_by_kind` below.
            stops: Default::default(),
        };
        let events_only = Metrics { events_ignored: 3, ..Metrics::default() };
        let no_compliance = Metrics { by_type: [("x".to_string(), bare)].into(), ..Metrics::default() };
        for m in [full, events_only, no_compliance, Metrics::default()] {
            assert_eq!(lines(&m, Cloud::Aws, "c-1", 17), old_lines(&m, Cloud::Aws, "c-1", 17), "{m:?}");
        }
    }

    /// Why an invocation stopped short reaches CloudWatch: one count per kind, with the
    /// invocation's own dimensions.
    #[test]
    fn stops_are_counted_by_kind() {
        use tagwarden_core::reason::{Deferred, StopKind};
        let mut m = Metrics::default();
        m.stopped(&StopKind::Several(vec![
            StopKind::Member("account 1: refused".into()),
            StopKind::Deferred(Deferred::NextSweep),
            StopKind::Member("account 2: refused".into()),
        ]));
        let lines: Vec<Value> =
            lines(&m, Cloud::Aws, "c1", 17).iter().map(|l| serde_json::from_str(l).expect("json")).collect();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["MembersUnavailable"], 2);
        assert_eq!(lines[0]["WorkDeferred"], 1);
        assert!(lines[0].get("NoValidPolicy").is_none(), "zeros are not sent: {}", lines[0]);
        assert_eq!(lines[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Cloud", "InfraID"]]));
    }
}
