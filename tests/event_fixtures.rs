//! Every event under tests/fixtures/events normalizes to its `.expected.json`
//! (the `tagwarden explain --json` contract).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

const CONTRACT: &[&str] =
    &["cloud", "kind", "reason", "service", "event_name", "account", "region", "actor", "resources"];

fn contract_view(event: &tagwarden::events::Event) -> Value {
    let full = serde_json::to_value(event).expect("events serialize");
    let mut out = Map::new();
    for k in CONTRACT {
        out.insert(k.to_string(), full.get(*k).cloned().unwrap_or(Value::Null));
    }
    Value::Object(out)
}

fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.to_string_lossy().ends_with(".expected.json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_fixture_normalizes_as_expected() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events");
    let mut checked = 0;
    let mut failures = Vec::new();
    for cloud in ["aws", "azure"] {
        for input in cases(&root.join(cloud)) {
            let expected_path = input.with_extension("expected.json");
            let expected: Value =
                serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("expected file exists"))
                    .expect("expected file is JSON");
            let bytes = std::fs::read(&input).expect("fixture readable");
            let got = match tagwarden::events::parse(&bytes) {
                Ok(events) if events.len() == 1 => contract_view(&events[0]),
                Ok(events) => Value::Array(events.iter().map(contract_view).collect()),
                Err(e) => Value::String(format!("parse error: {e}")),
            };
            if got != expected {
                failures.push(format!(
                    "{}:\n  expected {}\n  got      {}",
                    input.display(),
                    serde_json::to_string(&expected).unwrap_or_default(),
                    serde_json::to_string(&got).unwrap_or_default()
                ));
            }
            checked += 1;
        }
    }
    assert!(checked >= 80, "only {checked} fixtures found");
    assert!(failures.is_empty(), "{} of {checked} fixtures differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn loop_safety_recognises_own_role() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events/aws");
    let own = std::fs::read(root.join("ec2-create-tags-by-reconciler.json")).expect("fixture");
    let event = tagwarden::events::parse_one(&own).expect("parses");
    let role = event.principals.iter().find(|p| p.contains(":role/")).cloned().expect("issuer role in principals");
    assert!(event.is_from(std::slice::from_ref(&role)));
    let other = std::fs::read(root.join("ec2-create-tags-console.json")).expect("fixture");
    let event = tagwarden::events::parse_one(&other).expect("parses");
    assert!(!event.is_from(&[role]));
}

#[test]
fn hostile_inputs_are_errors_not_panics() {
    use tagwarden::events::parse;
    for input in [
        &b""[..],
        b"null",
        b"[]",
        b"42",
        b"{}",
        b"{\"detail-type\": 5}",
        b"{\"detail-type\": \"AWS API Call via CloudTrail\", \"source\": \"aws.ec2\", \"detail\": []}",
        b"{\"eventType\": \"Microsoft.Resources.ResourceWriteSuccess\", \"data\": 7}",
        b"[{\"specversion\": \"1.0\"}]",
        b"{\"detail-type\": \"AWS API Call via CloudTrail\", \"source\": \"aws.ec2\", \"detail\": {\"eventSource\": \"ec2.amazonaws.com\", \"eventName\": \"RunInstances\", \"responseElements\": {\"instancesSet\": 3}}}",
    ] {
        assert!(parse(input).is_err(), "{:?} should be rejected", String::from_utf8_lossy(input));
    }
    let big = vec![b' '; tagwarden::events::MAX_EVENT_BYTES + 1];
    assert!(matches!(parse(&big), Err(tagwarden::events::EventError::TooLarge { .. })));
    // Deep nesting hits serde_json's recursion limit, not the stack.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(parse(deep.as_bytes()).is_err());
}

/// Every recorded event carries its own time (CloudTrail `detail.eventTime`, else EventBridge or
/// CloudEvents `time`, Event Grid `eventTime`), and it becomes `occurred_at_ms`: where the
/// compliance lag starts.
#[test]
fn every_fixture_keeps_its_own_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events");
    let mut checked = 0;
    for cloud in ["aws", "azure"] {
        for input in cases(&root.join(cloud)) {
            let text = std::fs::read_to_string(&input).expect("fixture");
            let raw: Value = serde_json::from_str(&text).expect("fixture is JSON");
            let Ok(events) = tagwarden::events::parse(text.as_bytes()) else { continue };
            let items: Vec<&Value> = match &raw {
                Value::Array(a) => a.iter().collect(),
                one => vec![one],
            };
            for (event, item) in events.iter().zip(items) {
                let stamp = item
                    .pointer("/detail/eventTime")
                    .or_else(|| item.get("time"))
                    .or_else(|| item.get("eventTime"))
                    .and_then(Value::as_str);
                let want = stamp.and_then(tagwarden::events::parse_rfc3339_ms);
                assert!(stamp.is_none() || want.is_some(), "{}: unreadable time {stamp:?}", input.display());
                assert_eq!(event.occurred_at_ms, want, "{}", input.display());
                checked += usize::from(want.is_some());
            }
        }
    }
    assert!(checked > 40, "only {checked} fixtures carried a time");
}

/// Every payload the Lambda accepts lands in the variant of its shape (the fixtures alone and in
/// an SQS batch, and each trigger); anything else is an error naming what was expected.
#[cfg(feature = "aws")]
mod lambda_payloads {
    use std::path::Path;

    use serde_json::{json, Value};
    use tagwarden::aws::function::{EventBridge, Payload, S3Record, SqsMessage, SweepRequest};

    fn read(payload: &Value) -> Result<Payload, String> {
        serde_json::from_str(&payload.to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn every_aws_fixture_is_an_eventbridge_event_alone_and_in_an_sqs_batch() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events/aws");
        let cases = super::cases(&root);
        assert!(cases.len() >= 60, "only {} fixtures found", cases.len());
        for input in cases {
            let text = std::fs::read_to_string(&input).expect("fixture");
            let scheduled = input.ends_with("scheduled-event.json");
            match serde_json::from_str::<Payload>(&text) {
                Ok(Payload::EventBridge(EventBridge::Scheduled)) if scheduled => {}
                Ok(Payload::EventBridge(EventBridge::Event)) if !scheduled => {}
                other => panic!("{}: {other:?}", input.display()),
            }
            // In an SQS message, the event is the body, as sent.
            let batch = json!({"Records": [{"messageId": "m1", "eventSource": "aws:sqs", "body": text}]});
            match read(&batch) {
                Ok(Payload::SqsBatch { records }) => match &records[..] {
                    [SqsMessage::Sqs { message_id, body }] => assert!(message_id == "m1" && *body == text),
                    other => panic!("{}: {other:?}", input.display()),
                },
                other => panic!("{}: {other:?}", input.display()),
            }
        }
    }

    #[test]
    fn each_trigger_is_read_as_its_shape() {
        // The S3 event message structure (S3 user guide, "Event message structure", version 2.1).
        let s3 = json!({"Records": [{
            "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
            "eventTime": "2026-11-24T12:00:00.000Z", "eventName": "ObjectCreated:Put",
            "userIdentity": {"principalId": "AWS:AROAEXAMPLE:tagwarden"},
            "requestParameters": {"sourceIPAddress": "203.0.113.10"},
            "responseElements": {"x-amz-request-id": "C3D13FE58DE4C810", "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5JgHvANOjpD"},
            "s3": {"s3SchemaVersion": "1.0", "configurationId": "policy",
                   "bucket": {"name": "policy", "ownerIdentity": {"principalId": "A3NL1KOZZKExample"}, "arn": "arn:aws:s3:::policy"},
                   "object": {"key": "cluster/10-infra.yaml", "size": 1024, "eTag": "d41d8cd98f00b204e9800998ecf8427e", "sequencer": "0055AED6DCD90281E5"}}
        }]});
        match read(&s3) {
            Ok(Payload::S3Notification { records }) => match &records[..] {
                [S3Record::S3 { s3, event_time }] => {
                    assert_eq!(s3.object.key, "cluster/10-infra.yaml");
                    assert!(event_time.is_some(), "the time the policy changes from");
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        assert!(matches!(read(&json!({"tagwarden": "sweep"})), Ok(Payload::Sweep(SweepRequest::Sweep))));
        let created = json!({"detail-type": "Object Created", "source": "aws.s3",
            "detail": {"bucket": {"name": "policy"}, "object": {"key": "p/tagwarden-status.json", "size": 10}}});
        match read(&created) {
            Ok(Payload::EventBridge(EventBridge::ObjectCreated { detail, .. })) => {
                assert_eq!(detail.object.key, "p/tagwarden-status.json")
            }
            other => panic!("{other:?}"),
        }
        let ssm = json!({"detail-type": "Parameter Store Change", "source": "aws.ssm",
            "detail": {"name": "/tw/clusters/c-4", "operation": "Update"}});
        match read(&ssm) {
            Ok(Payload::EventBridge(EventBridge::ParameterStoreChange { detail, .. })) => {
                assert_eq!(detail.name, "/tw/clusters/c-4")
            }
            other => panic!("{other:?}"),
        }
        // An EventBridge event of any other type is one for the event parser, whatever it holds.
        let other = json!({"detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2"});
        assert!(matches!(read(&other), Ok(Payload::EventBridge(EventBridge::Event))));
    }

    #[test]
    fn a_payload_of_no_known_shape_says_what_was_expected() {
        for payload in [
            json!({"hello": "world"}),
            json!({"tagwarden": "sweeps"}),
            // Records from another source; an SQS message without its body; a mixed batch.
            json!({"Records": [{"eventSource": "aws:sns", "body": "{}"}]}),
            json!({"Records": [{"eventSource": "aws:sqs", "messageId": "m1"}]}),
            json!({"Records": [{"eventSource": "aws:sqs", "messageId": "m1", "body": "{}"},
                               {"eventSource": "aws:s3", "s3": {"object": {"key": "k"}}}]}),
            // A policy notification without the name it is about.
            json!({"detail-type": "Object Created", "detail": {"bucket": {"name": "policy"}}}),
            json!({"detail-type": "Parameter Store Change"}),
            // Event Grid's array is not a Lambda payload.
            json!([{"eventType": "Microsoft.Resources.ResourceWriteSuccess"}]),
        ] {
            let e = read(&payload).expect_err(&payload.to_string());
            assert!(e.starts_with("expected an SQS batch") && e.contains("detail-type"), "{payload}: {e}");
        }
    }
}

/// Every Azure fixture is read as an event or a batch, and reconciled from the very text delivered
/// (directly, or JSON-encoded by the Functions host); anything else says what was expected.
#[cfg(feature = "azure")]
/// S3's `PutBucketTagging` event carries the whole set it put (AWS's documentation): an array of
/// capitalised `Key`/`Value`, or one object for one tag.
#[test]
fn put_bucket_tagging_carries_the_set_it_put() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events/aws/s3-put-bucket-tagging.json");
    let text = std::fs::read_to_string(path).expect("fixture");
    let event = tagwarden::events::parse_one(text.as_bytes()).expect("event");
    let want: tagwarden::TagMap =
        [("Owner", "bob"), ("Env", "dev")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(event.replaced_with, Some(want));
    let one = text.replace(
        r#"[{"Value": "bob", "Key": "Owner"}, {"Value": "dev", "Key": "Env"}]"#,
        r#"{"Value": "bob", "Key": "Owner"}"#,
    );
    let event = tagwarden::events::parse_one(one.as_bytes()).expect("event");
    assert_eq!(event.replaced_with.map(|t| t.len()), Some(1), "one tag, as an object");
}

#[cfg(feature = "azure")]
mod azure_deliveries {
    use std::path::Path;

    use serde_json::Value;
    use tagwarden::azure::function::{work_of, Delivery, Topics};
    use tagwarden::trigger::Trigger;

    #[test]
    fn every_azure_fixture_is_an_event_or_a_batch_read_from_its_own_text() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events/azure");
        let cases = super::cases(&root);
        assert!(cases.len() >= 20, "only {} fixtures found", cases.len());
        for input in cases {
            let text = std::fs::read_to_string(&input).expect("fixture");
            let batch = text.trim_start().starts_with('[');
            match serde_json::from_str::<Delivery>(&text) {
                Ok(Delivery::Events(events)) if batch && !events.is_empty() => {}
                Ok(Delivery::Event(_)) if !batch => {}
                other => panic!("{}: {other:?}", input.display()),
            }
            let events = Ok(Trigger::Events(text.clone().into_bytes()));
            assert_eq!(work_of(text.as_bytes(), &Topics::default()), events, "{}", input.display());
            let encoded = Value::String(text.clone()).to_string();
            assert!(matches!(serde_json::from_str(&encoded), Ok(Delivery::Text(_))), "{}", input.display());
            assert_eq!(
                work_of(encoded.as_bytes(), &Topics::default()),
                events,
                "{}: as the host encodes it",
                input.display()
            );
        }
    }

    #[test]
    fn a_delivery_of_no_known_shape_says_what_was_expected() {
        for body in [&br#"{"hello": "world"}"#[..], br#"[{"subject": "/subscriptions/s"}]"#, b"42"] {
            let e = work_of(body, &Topics::default()).expect_err(&String::from_utf8_lossy(body)).to_string();
            assert!(e.starts_with("not an event tagwarden reads: expected an Event Grid or CloudEvents event"), "{e}");
        }
    }
}
