//! Hostile input on every way in, without any cloud: oversized events and policies are refused
//! with a clear error on each path (the parser, the Lambda's SQS bodies and direct events, the
//! Azure Function's bodies and its host envelope), and policy values that look like code or
//! templates are kept verbatim, never expanded (and refused by the clouds' character rules).
//! The clients point at a closed loopback port: nothing here may reach the network.

#![cfg(all(feature = "aws", feature = "azure"))]

use std::time::Duration;

use serde_json::json;
use tagwarden::aws::function as lambda;
use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
use tagwarden::aws::Clients;
use tagwarden::aws::Tagger;
use tagwarden::azure::function::{Delivered, Handler};
use tagwarden::azure::server::Request;
use tagwarden::cloud::Cloud;
use tagwarden::enforce::Engine;
use tagwarden::events::{self, MAX_EVENT_BYTES};
use tagwarden::policy::load::MAX_DOCUMENT_BYTES;
use tagwarden::trigger::Trigger;

const CLOSED: &str = "http://127.0.0.1:9";

/// An EventBridge CloudTrail event padded past the limit.
fn oversized_event() -> String {
    let pad = "x".repeat(MAX_EVENT_BYTES);
    json!({"version": "0", "id": "big", "detail-type": "AWS API Call via CloudTrail", "source": "aws.ec2",
           "account": "111122223333", "region": "us-east-1",
           "detail": {"eventSource": "ec2.amazonaws.com", "eventName": "CreateTags", "pad": pad}})
    .to_string()
}

async fn lambda_reconciler() -> Engine<Tagger> {
    let config = tagwarden::aws::config_loader()
        .expect("network settings")
        .endpoint_url(CLOSED)
        .region(tagwarden::aws::sdk::ec2::config::Region::new("us-east-1"))
        .credentials_provider(tagwarden::aws::sdk::ec2::config::Credentials::new("AKID", "SECRET", None, None, "t"))
        .load()
        .await;
    let clients = Clients::new(&config);
    let store = policy_store(&clients, "s3://b/p.yaml".parse::<PolicyLocation>().unwrap(), Duration::ZERO);
    Engine::new(Tagger::new(clients), store, Vec::new())
}

fn azure_handler() -> Handler {
    let vars = [
        ("TAGWARDEN_POLICY", "http://127.0.0.1:9/devstoreaccount1/policy/p.yaml"),
        ("TAGWARDEN_ARM_ENDPOINT", CLOSED),
        ("IDENTITY_ENDPOINT", CLOSED),
        ("IDENTITY_HEADER", "h"),
    ];
    let config =
        tagwarden::azure::Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
            .expect("config");
    Handler::new(&config).expect("handler")
}

#[test]
fn the_parser_refuses_oversized_events() {
    let big = oversized_event();
    let err = events::parse(big.as_bytes()).expect_err("too large").to_string();
    assert!(err.contains("larger than the 1048576-byte limit"), "{err}");
    let err = events::parse_one(big.as_bytes()).expect_err("too large").to_string();
    assert!(err.contains("larger than"), "{err}");
}

#[tokio::test]
async fn the_lambda_refuses_oversized_sqs_bodies_and_events_without_a_call() {
    let rec = lambda_reconciler().await;
    let big = oversized_event();
    let batch = json!({"Records": [{"messageId": "big", "eventSource": "aws:sqs", "body": big}]});
    let inv = lambda::handle(&rec, batch.to_string()).await;
    // Handed back, so SQS finally dead-letters it with its body; nothing was called.
    assert_eq!(inv.response, json!({"batchItemFailures": [{"itemIdentifier": "big"}]}));
    assert_eq!(rec.adapter.clients.calls.total(), 0);
    let inv = lambda::handle(&rec, big).await;
    let err = inv.error.expect("a direct oversized event fails the invocation");
    assert!(err.contains("larger than the 1048576-byte limit"), "{err}");
    assert_eq!(rec.adapter.clients.calls.total(), 0);
}

#[tokio::test]
async fn the_azure_function_refuses_oversized_bodies_on_every_path() {
    let handler = azure_handler();
    let pad = "x".repeat(MAX_EVENT_BYTES);
    let event = json!([{"id": "big", "topic": "/subscriptions/s", "subject": "/subscriptions/s/resourceGroups/rg",
        "eventType": "Microsoft.Resources.ResourceWriteSuccess", "data": {"pad": pad}, "dataVersion": "2", "metadataVersion": "1"}]);
    // Event Grid delivering directly.
    let req = |body: Vec<u8>, path: &str| Request {
        method: "POST".into(),
        path: path.into(),
        body,
        headers: vec![("content-type".into(), "application/json".into())],
        ..Request::default()
    };
    let resp = handler.handle(req(event.to_string().into_bytes(), "/drift")).await;
    let body = String::from_utf8_lossy(&resp.body).into_owned();
    assert_eq!(resp.status, 500, "{body}");
    assert!(body.contains("larger than the 1048576-byte limit"), "{body}");
    // The Functions host's envelope, the event as a JSON string parsed a second time.
    let envelope = json!({"Data": {"eventGridEvent": event[0].to_string()}, "Metadata": {}});
    let resp = handler.handle(req(envelope.to_string().into_bytes(), "/drift")).await;
    let body = String::from_utf8_lossy(&resp.body).into_owned();
    assert_eq!(resp.status, 500, "{body}");
    assert!(body.contains("larger than"), "{body}");
    // And the pure entry point.
    let out = handler.run(Trigger::Events(event.to_string().into_bytes()), Delivered::Now).await;
    assert!(out.error.expect("refused").contains("larger than"));
    assert_eq!(handler.calls.total(), 0, "{:?}", handler.calls.snapshot());
}

#[tokio::test]
async fn the_lambda_says_what_it_expected_and_ignores_its_own_report_without_a_call() {
    let rec = lambda_reconciler().await;
    let inv = lambda::handle(&rec, r#"{"hello": "world"}"#.to_string()).await;
    let err = inv.error.expect("an unknown payload fails the invocation");
    assert!(err.starts_with("not a payload tagwarden reads: expected an SQS batch"), "{err}");
    // Notifications of the function's own status report: nothing to do, nothing called.
    for own in [
        json!({"Records": [{"eventSource": "aws:s3", "s3": {"object": {"key": "c/tagwarden-status.json"}}}]}),
        json!({"detail-type": "Object Created", "detail": {"object": {"key": "c/tagwarden-status.json"}}}),
    ] {
        let inv = lambda::handle(&rec, own.to_string()).await;
        assert_eq!((inv.response, inv.error), (json!({"ignored": "own status report"}), None), "{own}");
    }
    assert_eq!(rec.adapter.clients.calls.total(), 0);
}

#[tokio::test]
async fn the_azure_function_says_what_it_expected_without_a_call() {
    let handler = azure_handler();
    let post =
        |body: &str| Request { method: "POST".into(), path: "/drift".into(), body: body.into(), ..Request::default() };
    for (body, expected) in [
        (r#"{"Data": {"event": {}}, "Metadata": {}}"#, "unknown variant `event`, expected one of `eventGridEvent`"),
        (r#"{"hello": "world"}"#, "expected an Event Grid or CloudEvents event"),
    ] {
        let resp = handler.handle(post(body)).await;
        let text = String::from_utf8_lossy(&resp.body).into_owned();
        assert!(resp.status == 400 && text.contains(expected), "{body}: {} {text}", resp.status);
    }
    let resp = handler.handle(post(r#"{"Data": {"eventGridEvent": {"hello": "world"}}, "Metadata": {}}"#)).await;
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    assert!(resp.status == 500 && text.contains("expected an Event Grid or CloudEvents event"), "{text}");
    assert_eq!(handler.calls.total(), 0, "{:?}", handler.calls.snapshot());
}

#[test]
fn oversized_policies_are_refused() {
    let big = format!("version: 1\ncloud: aws\ninfraID: c-1\ntags:\n  team: {}\n", "x".repeat(MAX_DOCUMENT_BYTES));
    let err = tagwarden::policy::load_one("p.yaml", &big).expect_err("too large").to_string();
    assert!(err.contains("larger than the 1048576-byte limit"), "{err}");
    // Every document of a layered policy is checked.
    let docs = vec![("00.yaml".to_string(), "team: platform\n".to_string()), ("10.yaml".to_string(), big)];
    assert!(tagwarden::policy::load(docs).is_err());
}

#[test]
fn code_and_template_values_stay_verbatim_and_are_refused_by_the_character_rules() {
    let hostile = ["${jndi:ldap://x}", "{{ .Values.x }}", "$(rm -rf /)", "`id`", "${HOME}", "%{x}", "#{7*7}"];
    for value in hostile {
        for (name, doc) in [
            ("p.yaml", format!("version: 1\ncloud: aws\ninfraID: c-1\ntags:\n  team: '{value}'\n")),
            ("p.json", json!({"version": 1, "cloud": "azure", "infraID": "c-1", "tags": {"team": value}}).to_string()),
        ] {
            let policy = tagwarden::policy::load_one(name, &doc).expect("a value is data, whatever it looks like");
            let tag = policy.status.iter().chain(&policy.spec).find(|t| t.key == "team").expect("team");
            assert_eq!(tag.value, value, "kept verbatim, not expanded");
            let cloud = policy.cloud.expect("cloud");
            let violations = tagwarden::policy::validate::policy(&policy, cloud);
            assert!(
                violations.iter().any(|v| v.key == "team" && v.message.contains("team")),
                "{cloud:?} refuses {value:?} by its character rules: {violations:?}"
            );
        }
    }
    // Allowed characters that a spreadsheet or shell might treat specially are simply data.
    let policy =
        tagwarden::policy::load_one("p.yaml", "version: 1\ncloud: aws\ninfraID: c-1\ntags:\n  team: '=1+1 @x:/y'\n")
            .expect("load");
    assert!(tagwarden::policy::validate::policy(&policy, Cloud::Aws).is_empty());
    let tag = policy.status.iter().chain(&policy.spec).find(|t| t.key == "team").expect("team");
    assert_eq!(tag.value, "=1+1 @x:/y");
}

mod payload_routing {
    //! The Lambda's payload routing (its `Payload`, then each SQS body or the event itself through
    //! the parser) and the Azure Function's (`work_of`, then the parser) on arbitrary JSON shaped
    //! like what they route on: a proptest stands in for a fuzz target here, since a fuzz build
    //! of the AWS SDK takes longer than the fuzzing itself.

    use proptest::prelude::*;
    use serde_json::{Map, Value};
    use tagwarden::aws::function::{EventBridge, Payload, SqsMessage};
    use tagwarden::azure::function::{work_of, Topics};
    use tagwarden::events;
    use tagwarden::trigger::Trigger;

    const WORDS: &[&str] = &[
        "Records",
        "eventSource",
        "aws:sqs",
        "aws:s3",
        "s3",
        "object",
        "key",
        "body",
        "messageId",
        "detail-type",
        "detail",
        "Scheduled Event",
        "Object Created",
        "Parameter Store Change",
        "tagwarden",
        "sweep",
        "tagwarden-status.json",
        "eventType",
        "type",
        "subject",
        "data",
        "Microsoft.Storage.BlobCreated",
        "eventName",
        "RunInstances",
        "source",
        "aws.ec2",
        "AWS API Call via CloudTrail",
        "responseElements",
    ];

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => proptest::sample::select(WORDS).prop_map(str::to_owned),
            1 => "\\PC{0,12}",
        ]
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            word().prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((word(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        #[test]
        fn routing_never_panics_and_errors_say_why(payload in json(), body in json()) {
            // An SQS body is a string holding JSON (or not).
            let mut batch = payload.clone();
            if let Some(records) = batch.get_mut("Records").and_then(Value::as_array_mut) {
                for r in records.iter_mut().filter_map(Value::as_object_mut) {
                    r.insert("body".into(), Value::String(body.to_string()));
                }
            }
            for p in [&payload, &batch] {
                let text = p.to_string();
                match serde_json::from_str::<Payload>(&text) {
                    Ok(Payload::SqsBatch { records }) => {
                        for SqsMessage::Sqs { body, .. } in records {
                            if let Err(e) = events::parse_one(body.as_bytes()) {
                                prop_assert!(!e.to_string().is_empty());
                            }
                        }
                    }
                    Ok(Payload::EventBridge(EventBridge::Event)) => {
                        if let Err(e) = events::parse_one(text.as_bytes()) {
                            prop_assert!(!e.to_string().is_empty());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
                match work_of(text.as_bytes(), &Topics::default()) {
                    Ok(Trigger::Events(raw)) => {
                        if let Err(e) = events::parse(&raw) {
                            prop_assert!(!e.to_string().is_empty());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
            }
        }
    }
}
