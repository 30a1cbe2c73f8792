use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::push::encode_base64;
use super::{parse_log_entry, parse_push};
use crate::events::{Event, EventError, EventKind, IgnoreReason};

/// `tagwarden explain --json`'s stable fields, as the fixtures' `.expected.json` hold them.
const CONTRACT: &[&str] =
    &["cloud", "kind", "reason", "service", "event_name", "account", "region", "actor", "resources"];

fn contract_view(event: &Event) -> Value {
    let full = serde_json::to_value(event).expect("events serialize");
    let mut out = Map::new();
    for k in CONTRACT {
        out.insert(k.to_string(), full.get(*k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(out)
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/events/gcp")
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(name)).expect("fixture readable")
}

/// A wrapped push delivery of `entry`, as Pub/Sub sends it.
fn wrap(entry: &[u8]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "message": {"data": encode_base64(entry), "messageId": "m-1", "message_id": "m-1",
                    "publishTime": "2021-07-12T10:39:52.000Z", "publish_time": "2021-07-12T10:39:52.000Z"},
        "subscription": "projects/p/subscriptions/tagwarden"
    }))
    .expect("serializes")
}

fn entry(e: Value) -> Event {
    parse_log_entry(&serde_json::to_vec(&e).expect("serializes")).expect("parses")
}

#[test]
fn every_fixture_parses_to_its_expected_event() {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.to_string_lossy().ends_with(".expected.json"))
        .collect();
    inputs.sort();
    let mut failures = Vec::new();
    for input in &inputs {
        let expected: Value =
            serde_json::from_slice(&std::fs::read(input.with_extension("expected.json")).expect("expected file"))
                .expect("expected file is JSON");
        let bytes = std::fs::read(input).expect("fixture readable");
        let push = input.file_name().is_some_and(|n| n.to_string_lossy().starts_with("push-"));
        // A LogEntry is checked bare and inside a push delivery; a delivery as it is.
        let mut got = vec![parse_push(if push { bytes.clone() } else { wrap(&bytes) }.as_slice())];
        if !push {
            got.push(parse_log_entry(&bytes));
        }
        for g in got {
            let view = match g {
                Ok(e) => contract_view(&e),
                Err(e) => Value::String(format!("parse error: {e}")),
            };
            if view != expected {
                failures.push(format!("{}:\n  expected {expected}\n  got      {view}", input.display()));
            }
        }
    }
    assert!(inputs.len() >= 9, "only {} fixtures found", inputs.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_compute_insert_is_acted_on_at_its_last_entry() {
    let first = parse_log_entry(&fixture("compute-instance-insert-first.json")).expect("first");
    let last = parse_log_entry(&fixture("compute-instance-insert-last.json")).expect("last");
    assert_eq!((first.kind, first.reason), (EventKind::Ignored, Some(IgnoreReason::OperationStarted)));
    assert_eq!((last.kind, last.reason), (EventKind::Create, None));
    assert_eq!(first.resources, last.resources, "both entries name the one instance");
    assert_eq!(
        last.resources[0].id,
        "//compute.googleapis.com/projects/events-atamel/zones/us-central1-a/instances/instance-1"
    );
    assert_eq!(last.id.as_deref(), Some("-636tbld2li0"));
    assert_eq!(last.occurred_at_ms, Some(1_626_086_390_422), "2021-07-12T10:39:50.422795Z");
    // An operation done at once is logged once, first and last: acted on.
    let mut both: Value = serde_json::from_slice(&fixture("compute-instance-insert-first.json")).expect("json");
    both["operation"]["last"] = json!(true);
    assert_eq!(entry(both).kind, EventKind::Create);
}

#[test]
fn the_push_delivery_fills_in_what_the_entry_lacks() {
    let bare = json!({"protoPayload": {"serviceName": "storage.googleapis.com", "methodName": "storage.buckets.create",
        "resourceName": "projects/_/buckets/b1"}, "resource": {"labels": {"project_id": "p1"}}});
    let e = parse_push(&wrap(&serde_json::to_vec(&bare).expect("json"))).expect("parses");
    assert_eq!(e.id.as_deref(), Some("m-1"), "no insertId: the message id");
    assert_eq!(e.occurred_at_ms, Some(1_626_086_392_000), "no timestamp: the publish time");
    assert_eq!((e.kind, e.resources[0].id.as_str()), (EventKind::Create, "//storage.googleapis.com/b1"));
    // Unwrapped delivery (payload unwrapping): the body is the entry.
    let e = parse_push(&serde_json::to_vec(&bare).expect("json")).expect("unwrapped");
    assert_eq!((e.kind, e.account.as_deref()), (EventKind::Create, Some("p1")));
}

fn compute(method: &str, name: &str) -> Value {
    json!({
        "insertId": "i-1",
        "timestamp": "2024-05-01T10:00:00.123456Z",
        "operation": {"id": "operation-1", "producer": "compute.googleapis.com", "last": true},
        "protoPayload": {
            "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
            "serviceName": "compute.googleapis.com", "methodName": method, "resourceName": name,
            "authenticationInfo": {"principalEmail": "tagwarden@p1.iam.gserviceaccount.com",
                                   "principalSubject": "serviceAccount:tagwarden@p1.iam.gserviceaccount.com"}
        },
        "resource": {"type": "gce_instance", "labels": {"project_id": "p1", "zone": "us-central1-a"}}
    })
}

/// Method, resource name, expected kind and reason, expected asset type.
type Case = (&'static str, &'static str, EventKind, Option<IgnoreReason>, Option<&'static str>);

#[test]
fn methods_and_types() {
    let cases: &[Case] = &[
        (
            "v1.compute.instances.setLabels",
            "projects/p1/zones/us-central1-a/instances/vm-1",
            EventKind::TagChange,
            None,
            Some("compute.googleapis.com/Instance"),
        ),
        (
            "beta.compute.disks.insert",
            "projects/p1/zones/us-central1-a/disks/d-1",
            EventKind::Create,
            None,
            Some("compute.googleapis.com/Disk"),
        ),
        (
            "v1.compute.globalForwardingRules.insert",
            "projects/p1/global/forwardingRules/api",
            EventKind::Create,
            None,
            Some("compute.googleapis.com/GlobalForwardingRule"),
        ),
        (
            "v1.compute.forwardingRules.setLabels",
            "projects/p1/regions/us-central1/forwardingRules/api",
            EventKind::TagChange,
            None,
            Some("compute.googleapis.com/ForwardingRule"),
        ),
        (
            "v1.compute.globalAddresses.insert",
            "projects/p1/global/addresses/ip",
            EventKind::Create,
            None,
            Some("compute.googleapis.com/GlobalAddress"),
        ),
        (
            "v1.compute.addresses.insert",
            "projects/p1/regions/us-central1/addresses/ip",
            EventKind::Create,
            None,
            Some("compute.googleapis.com/Address"),
        ),
        (
            "v1.compute.images.insert",
            "projects/p1/global/images/rhcos",
            EventKind::Create,
            None,
            Some("compute.googleapis.com/Image"),
        ),
        (
            "v1.compute.snapshots.setLabels",
            "projects/p1/global/snapshots/s",
            EventKind::TagChange,
            None,
            Some("compute.googleapis.com/Snapshot"),
        ),
        (
            "v1.compute.instances.delete",
            "projects/p1/zones/us-central1-a/instances/vm-1",
            EventKind::Ignored,
            Some(IgnoreReason::NotAWrite),
            Some("compute.googleapis.com/Instance"),
        ),
        (
            "v1.compute.instances.get",
            "projects/p1/zones/us-central1-a/instances/vm-1",
            EventKind::Ignored,
            Some(IgnoreReason::NotAWrite),
            Some("compute.googleapis.com/Instance"),
        ),
        (
            "v1.compute.instances.setTags",
            "projects/p1/zones/us-central1-a/instances/vm-1",
            EventKind::Ignored,
            Some(IgnoreReason::UnsupportedEvent),
            Some("compute.googleapis.com/Instance"),
        ),
        (
            "v1.compute.networks.insert",
            "projects/p1/global/networks/net",
            EventKind::Ignored,
            Some(IgnoreReason::UntaggableType),
            Some("compute.googleapis.com/Network"),
        ),
        (
            "v1.compute.firewalls.insert",
            "projects/p1/global/firewalls/fw",
            EventKind::Ignored,
            Some(IgnoreReason::UntaggableType),
            Some("compute.googleapis.com/Firewall"),
        ),
        (
            "v1.compute.targetPools.insert",
            "projects/p1/regions/us-central1/targetPools/tp",
            EventKind::Ignored,
            Some(IgnoreReason::UntaggableType),
            Some("compute.googleapis.com/TargetPool"),
        ),
        (
            "v1.compute.instanceGroups.insert",
            "projects/p1/zones/us-central1-a/instanceGroups/ig",
            EventKind::Ignored,
            Some(IgnoreReason::UntaggableType),
            Some("compute.googleapis.com/InstanceGroup"),
        ),
        (
            "v1.compute.regionBackendServices.insert",
            "projects/p1/regions/us-central1/backendServices/bs",
            EventKind::Ignored,
            Some(IgnoreReason::UntaggableType),
            Some("compute.googleapis.com/RegionBackendService"),
        ),
        // A type tagwarden does not know.
        (
            "v1.compute.instanceTemplates.insert",
            "projects/p1/global/instanceTemplates/t",
            EventKind::Ignored,
            Some(IgnoreReason::UnsupportedEvent),
            None,
        ),
    ];
    for (method, name, kind, reason, asset_type) in cases {
        let e = entry(compute(method, name));
        assert_eq!((e.kind, e.reason), (*kind, *reason), "{method}");
        assert_eq!(e.resources.first().map(|r| r.kind.as_str()), *asset_type, "{method}");
        assert_eq!((e.service.as_str(), e.event_name.as_str()), ("compute", *method));
        assert_eq!((e.account.as_deref(), e.region.as_deref()), (Some("p1"), Some("us-central1-a")));
        assert!(e
            .resources
            .iter()
            .all(|r| r.arn.is_none() && r.id.starts_with("//compute.googleapis.com/projects/p1/")));
    }
}

#[test]
fn storage_and_dns() {
    let storage = |method: &str, labels: Value| {
        entry(json!({"protoPayload": {"serviceName": "storage.googleapis.com", "methodName": method,
            "resourceName": "projects/_/buckets/b1", "status": {}}, "resource": {"type": "gcs_bucket", "labels": labels}}))
    };
    let e = storage("storage.buckets.update", json!({"project_id": "p1", "bucket_name": "b1", "location": "us"}));
    assert_eq!((e.kind, e.account.as_deref(), e.region.as_deref()), (EventKind::TagChange, Some("p1"), Some("us")));
    assert_eq!(e.resources[0].id, "//storage.googleapis.com/b1");
    assert_eq!(storage("storage.buckets.delete", json!({})).reason, Some(IgnoreReason::NotAWrite));
    assert_eq!(storage("storage.setIamPermissions", json!({})).reason, Some(IgnoreReason::UnsupportedEvent));

    let dns = |method: &str, name: Option<&str>| {
        let mut p = json!({"serviceName": "dns.googleapis.com", "methodName": method});
        if let Some(n) = name {
            p["resourceName"] = json!(n);
        }
        entry(json!({"protoPayload": p, "resource": {"type": "dns_managed_zone",
            "labels": {"project_id": "p1", "zone_name": "z1", "location": "global"}}}))
    };
    let e = dns("dns.managedZones.patch", Some("managedZones/z1"));
    assert_eq!(
        (e.kind, e.resources[0].id.as_str()),
        (EventKind::TagChange, "//dns.googleapis.com/projects/p1/managedZones/z1")
    );
    // No resourceName: the monitored resource's zone_name.
    assert_eq!(
        dns("dns.managedZones.create", None).resources[0].id,
        "//dns.googleapis.com/projects/p1/managedZones/z1"
    );
    assert_eq!(dns("dns.changes.create", Some("managedZones/z1")).reason, Some(IgnoreReason::UntaggableType));
    assert_eq!(
        dns("dns.resourceRecordSets.create", Some("managedZones/z1/rrsets/www.example./A")).reason,
        Some(IgnoreReason::UntaggableType)
    );
}

#[test]
fn failures_and_gaps() {
    let mut failed = compute("v1.compute.instances.insert", "projects/p1/zones/us-central1-a/instances/vm-1");
    failed["protoPayload"]["status"] = json!({"code": 7, "message": "PERMISSION_DENIED"});
    let e = entry(failed);
    assert_eq!((e.kind, e.reason), (EventKind::Ignored, Some(IgnoreReason::FailedCall)));
    assert_eq!(e.resources.len(), 1, "the resource it names is still listed");
    let mut ok = compute("v1.compute.instances.insert", "projects/p1/zones/us-central1-a/instances/vm-1");
    ok["protoPayload"]["status"] = json!({"code": 0});
    assert_eq!(entry(ok).kind, EventKind::Create);

    let mut nameless = compute("v1.compute.instances.insert", "x");
    nameless["protoPayload"].as_object_mut().expect("object").remove("resourceName");
    assert_eq!(entry(nameless).reason, Some(IgnoreReason::NoResources));
    let pubsub = parse_log_entry(&fixture("pubsub-create-topic.json")).expect("parses");
    assert_eq!((pubsub.reason, pubsub.service.as_str()), (Some(IgnoreReason::UnsupportedEvent), "pubsub"));
    let text_only = entry(json!({"insertId": "t", "textPayload": "hello", "logName": "projects/p/logs/x"}));
    assert_eq!((text_only.reason, text_only.id.as_deref()), (Some(IgnoreReason::UnsupportedEvent), Some("t")));
}

#[test]
fn loop_safety_knows_the_function_s_own_service_account() {
    let own = "tagwarden@p1.iam.gserviceaccount.com".to_string();
    let e = entry(compute("v1.compute.instances.setLabels", "projects/p1/zones/us-central1-a/instances/vm-1"));
    assert_eq!(e.principals, vec![own.clone()], "principalEmail and principalSubject are one");
    assert!(e.is_from(std::slice::from_ref(&own)));
    let other = parse_log_entry(&fixture("compute-instance-insert-last.json")).expect("parses");
    assert_eq!(other.actor.as_deref(), Some("user@example.com"));
    assert!(!other.is_from(&[own]));
    let sa = parse_log_entry(&fixture("pubsub-create-topic.json")).expect("parses");
    assert!(sa.is_from(&["robot@test-project.iam.gserviceaccount.com".to_string()]));
}

#[test]
fn a_malformed_delivery_is_an_error_naming_what_is_missing() {
    let err = |body: &str| parse_push(body.as_bytes()).expect_err(body).to_string();
    assert!(err(r#"{"subscription":"projects/p/subscriptions/s"}"#).contains("`message`"));
    assert!(err(r#"{"message":"x"}"#).contains("`message` is not an object"));
    assert!(err(r#"{"message":{"messageId":"1"}}"#).contains("no `data`"));
    assert!(err(r#"{"message":{"data":""}}"#).contains("no `data`"));
    assert!(err(r#"{"message":{"data":5}}"#).contains("not a base64 string"));
    assert!(err(r#"{"message":{"data":"not base64!"}}"#).contains("not base64"));
    let not_json = format!(r#"{{"message":{{"data":"{}"}}}}"#, encode_base64(b"hello"));
    assert!(err(&not_json).contains("not a JSON LogEntry"));
    let array = format!(r#"{{"message":{{"data":"{}"}}}}"#, encode_base64(b"[1]"));
    assert!(err(&array).contains("LogEntry is a JSON object"));
    assert!(err("[]").contains("JSON object"));
    assert!(matches!(parse_push(b"{"), Err(EventError::Json(_))));
    let big = vec![b' '; crate::events::MAX_EVENT_BYTES + 1];
    assert!(matches!(parse_push(&big), Err(EventError::TooLarge { .. })));
    assert!(matches!(parse_log_entry(&big), Err(EventError::TooLarge { .. })));
}

#[test]
fn missing_and_mistyped_fields_never_panic() {
    for e in [
        json!({}),
        json!({"protoPayload": 5}),
        json!({"protoPayload": {}}),
        json!({"protoPayload": {"serviceName": 7, "methodName": [], "resourceName": {}}}),
        json!({"protoPayload": {"serviceName": "compute.googleapis.com"}}),
        json!({"protoPayload": {"serviceName": "compute.googleapis.com", "methodName": "", "resourceName": ""}}),
        json!({"protoPayload": {"serviceName": "compute.googleapis.com", "methodName": ".", "resourceName": "/"}}),
        json!({"protoPayload": {"serviceName": "dns.googleapis.com", "methodName": "dns.managedZones.create", "resourceName": "managedZones/z"}}),
        json!({"protoPayload": {"serviceName": "storage.googleapis.com", "methodName": "storage.buckets.create", "status": "x"}}),
        json!({"operation": "x", "resource": [], "timestamp": 5, "insertId": null, "protoPayload": {"authenticationInfo": 3}}),
        json!({"protoPayload": {"serviceName": "compute.googleapis.com", "methodName": "v1.compute.instances.insert",
               "resourceName": "projects/p/zones/z/instances/vm", "status": {"code": "7"}}, "operation": {"first": "true"}}),
    ] {
        let event = entry(e.clone());
        assert_eq!(event.cloud, crate::cloud::Cloud::Gcp, "{e}");
    }
    // A DNS zone whose project is nowhere: no resource, never a guess.
    let e = entry(
        json!({"protoPayload": {"serviceName": "dns.googleapis.com", "methodName": "dns.managedZones.create", "resourceName": "managedZones/z"}}),
    );
    assert_eq!((e.resources.len(), e.reason), (0, Some(IgnoreReason::UnsupportedEvent)));
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            "protoPayload",
            "compute.googleapis.com",
            "storage.googleapis.com",
            "dns.googleapis.com",
            "v1.compute.instances.insert",
            "projects/p/zones/z/instances/vm",
            "managedZones/z",
            "projects/_/buckets/b",
            "",
            "/",
            "//",
            "first",
            "last",
            "a.b.c",
            "2024-01-01T00:00:00Z",
        ])
        .prop_map(Value::from),
        "[a-z/._:-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "protoPayload",
                    "serviceName",
                    "methodName",
                    "resourceName",
                    "status",
                    "code",
                    "authenticationInfo",
                    "principalEmail",
                    "principalSubject",
                    "operation",
                    "first",
                    "last",
                    "resource",
                    "labels",
                    "project_id",
                    "zone",
                    "zone_name",
                    "bucket_name",
                    "insertId",
                    "timestamp",
                    "message",
                    "data",
                    "messageId",
                ]),
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        let bytes = serde_json::to_vec(&v).expect("serializes");
        let _ = parse_log_entry(&bytes);
        let _ = parse_push(&bytes);
        let _ = parse_push(&wrap(&bytes));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_push(&bytes);
        let _ = parse_push(&wrap(&bytes));
    }
}
