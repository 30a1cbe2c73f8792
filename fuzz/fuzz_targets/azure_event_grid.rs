//! The Azure Function's delivery parsing, without the network: a delivery's text as the handler
//! reads it (a direct POST's body, or the host's binding value: an event, an array, or a string
//! holding one, JSON or base64), then `work_of` and, for events, `events::parse` — what
//! `Handler::run` does before any ARM call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwarden::azure::function::work_of;
use tagwarden::trigger::Trigger;

fuzz_target!(|data: &[u8]| {
    if data.len() > tagwarden::azure::server::MAX_BODY_BYTES {
        return;
    }
    match work_of(data) {
        Ok(Trigger::Events(raw)) => match tagwarden::events::parse(&raw) {
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
