//! The Azure Function's request parsing, without the network: the body as the handler reads it
//! (the Functions host's `{Data: {eventGridEvent: …}}` envelope, whose value may be a JSON string
//! parsed a second time, or Event Grid / CloudEvents delivering directly), then `work_of` and,
//! for events, `events::parse` — what `Handler::run` does before any ARM call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tagwarden::azure::function::{work_of, Work};

fuzz_target!(|data: &[u8]| {
    if data.len() > tagwarden::azure::server::MAX_BODY_BYTES {
        return;
    }
    let Ok(body) = serde_json::from_slice::<Value>(data) else { return };
    let payload = match body.get("Data").filter(|_| body.is_object()) {
        Some(d) => match d.get("eventGridEvent").or_else(|| d.as_object().and_then(|m| m.values().next())) {
            None => return,
            Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                Ok(v) => v,
                Err(_) => return,
            },
            Some(v) => v.clone(),
        },
        None => body,
    };
    match work_of(&payload) {
        Ok(Work::Events(raw)) => match tagwarden::events::parse(&raw) {
            Ok(events) => {
                for e in events {
                    serde_json::to_string(&e).expect("an event serialises");
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        },
        Ok(_) => {}
        Err(e) => assert!(!e.is_empty()),
    }
    // The subscription-validation handshake parses the raw body.
    let _ = tagwarden::events::parse(data);
});
