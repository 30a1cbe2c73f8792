//! `tagwarden::events::parse` (EventBridge, Event Grid, CloudEvents; one event or an array):
//! any input gives events or a clear error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match tagwarden::events::parse(data) {
        Ok(events) => {
            for e in events {
                // What `tagwarden explain --json` prints must serialise.
                serde_json::to_string(&e).expect("an event serialises");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let _ = tagwarden::events::parse_one(data);
});
