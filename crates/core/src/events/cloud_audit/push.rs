//! The Pub/Sub push delivery around a Cloud Logging entry.
//!
//! Pub/Sub, "Push subscriptions" (<https://cloud.google.com/pubsub/docs/push>): a push endpoint
//! receives each message "wrapped" by default, as the JSON body of a POST:
//! `{"message": {"attributes": {…}, "data": BASE64, "messageId": …, "message_id": …,
//! "publishTime": …, "publish_time": …}, "subscription": "projects/P/subscriptions/S"}` (both
//! spellings of the id and time are sent), or "unwrapped", the body being the message data itself
//! (payload unwrapping). A Cloud Logging sink publishes each routed entry as one message whose
//! data is the `LogEntry` JSON (Cloud Logging, "View logs routed to Pub/Sub").

use serde_json::{Map, Value};

use super::super::EventError;

/// What the push delivery says besides the entry.
#[derive(Debug, Default)]
pub(super) struct Delivery {
    pub message_id: Option<String>,
    pub publish_time: Option<String>,
}

/// The LogEntry of a wrapped delivery (decoded from `message.data`), or the body itself when it
/// is an unwrapped one.
pub(super) fn unwrap(body: Value) -> Result<(Value, Delivery), EventError> {
    let Value::Object(obj) = body else {
        return Err(shape("a Pub/Sub push delivery is a JSON object {message, subscription}"));
    };
    let Some(message) = obj.get("message") else {
        if is_log_entry(&obj) {
            return Ok((Value::Object(obj), Delivery::default()));
        }
        return Err(shape(
            "neither a Pub/Sub push envelope (no `message`) nor a Cloud Logging LogEntry (no `protoPayload`, `logName` or `insertId`)",
        ));
    };
    let message = message.as_object().ok_or_else(|| shape("the Pub/Sub push envelope's `message` is not an object"))?;
    let text = |a: &str, b: &str| {
        message.get(a).or_else(|| message.get(b)).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
    };
    let delivery =
        Delivery { message_id: text("messageId", "message_id"), publish_time: text("publishTime", "publish_time") };
    let data = match message.get("data") {
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(shape("the Pub/Sub message has no `data` (the base64-encoded LogEntry)"))
        }
        Some(_) => return Err(shape("the Pub/Sub message's `data` is not a base64 string")),
    };
    let bytes = decode_base64(data).map_err(|e| shape(&format!("the Pub/Sub message's `data` is not base64: {e}")))?;
    let entry = serde_json::from_slice(&bytes)
        .map_err(|e| shape(&format!("the Pub/Sub message's `data` is not a JSON LogEntry: {e}")))?;
    Ok((entry, delivery))
}

fn is_log_entry(obj: &Map<String, Value>) -> bool {
    ["protoPayload", "logName", "insertId"].iter().any(|k| obj.contains_key(*k))
}

fn shape(what: &str) -> EventError {
    EventError::Shape(what.to_string())
}

/// Standard base64 (RFC 4648 §4, what JSON carries for `bytes` fields), padding optional; the
/// URL-safe alphabet (§5) is accepted too. Hand-written: the pure core takes no codec crate for
/// one field.
pub(super) fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim_end_matches('=');
    if s.len() % 4 == 1 {
        return Err(format!("{} characters cannot be base64", s.len()));
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, c) in s.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(format!("byte {i} ({:?}) is not a base64 character", char::from(c))),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(super) fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_what_is_not() {
        for s in ["", "f", "fo", "foo", "foob", "fooba", "foobar", "{\"a\":\"é\"}"] {
            assert_eq!(decode_base64(&encode_base64(s.as_bytes())).as_deref(), Ok(s.as_bytes()), "{s:?}");
        }
        // The Pub/Sub documentation's example message.
        let doc = decode_base64("SGVsbG8gQ2xvdWQgUHViL1N1YiEgSGVyZSBpcyBteSBtZXNzYWdlIQ==").unwrap();
        assert_eq!(String::from_utf8(doc).unwrap(), "Hello Cloud Pub/Sub! Here is my message!");
        assert_eq!(decode_base64("Zm9vYg").unwrap(), b"foob", "padding is optional");
        assert_eq!(decode_base64("-_-_").unwrap(), decode_base64("+/+/").unwrap(), "URL-safe alphabet");
        assert!(decode_base64("Zm9v!A").unwrap_err().contains("byte 4"));
        assert!(decode_base64("Zm9vY").is_err(), "a lone trailing character");
    }
}
