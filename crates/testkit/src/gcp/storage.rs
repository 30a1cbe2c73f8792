//! The Cloud Storage JSON API's bucket metadata (no client crate: tagwarden calls it over HTTP):
//!
//! - `GET /storage/v1/b/{bucket}`: the bucket resource;
//! - `PATCH /storage/v1/b/{bucket}?ifMetagenerationMatch=N` with `{"labels": {…}}`: patch
//!   semantics ("Buckets: patch … This method supports patch semantics", the JSON API
//!   reference; the bucket-labels guide: send the labels to add or change, and a label whose
//!   value is `null` to remove it): keys in the body are set or replaced, a key set to `null` is
//!   deleted, the others are kept; `metageneration` goes up by one on every metadata write; a
//!   metageneration that is not the current one answers 412.

use serde_json::{json, Map, Value};

use super::http::{Req, Resp};
use super::inventory::{Asset, State};
use super::time::{now_millis, rfc3339_utc};

pub const FULL_NAME_PREFIX: &str = "//storage.googleapis.com/";

/// The precondition failure Cloud Storage answers, item for item (the Storage JSON API's error
/// format as recorded in a Helm GCS plugin's test fixture: reason `conditionNotMet`, message
/// "At least one of the pre-conditions you specified did not hold.", `locationType` `header`,
/// `location` `If-Match`).
pub const PRECONDITION_FAILED: &str = "At least one of the pre-conditions you specified did not hold.";

pub fn handle(st: &mut State, r: &Req) -> Resp {
    let Some(bucket) = r.path.strip_prefix("/storage/v1/b/").filter(|b| !b.contains('/')) else {
        return Resp::error(404, "notFound", "Not Found", &[]);
    };
    let full = format!("{FULL_NAME_PREFIX}{bucket}");
    match r.method.as_str() {
        "GET" => {
            st.counters.reads += 1;
            match st.assets.get(&full) {
                Some(a) => Resp::ok(bucket_json(a)),
                None => no_such_bucket(),
            }
        }
        "PATCH" => patch(st, r, &full),
        _ => Resp::error(405, "methodNotAllowed", "Method not allowed", &[]),
    }
}

/// 404 for a bucket that is not there (Storage's message for it).
fn no_such_bucket() -> Resp {
    Resp::error(404, "notFound", "The specified bucket does not exist.", &[])
}

fn patch(st: &mut State, r: &Req, full: &str) -> Resp {
    st.apply_race(full);
    st.counters.writes += 1;
    let body = r.json();
    let Some(a) = st.assets.get_mut(full) else { return no_such_bucket() };
    if let Some(want) = r.param("ifMetagenerationMatch") {
        if want.parse::<u64>().ok() != Some(a.metageneration) {
            return Resp::error(
                412,
                "conditionNotMet",
                PRECONDITION_FAILED,
                &[("locationType", "header"), ("location", "If-Match")],
            );
        }
    }
    match body.get("labels") {
        None => {}
        // `"labels": null` clears them all (patch semantics: the field itself is set to null).
        Some(Value::Null) => a.labels.clear(),
        Some(Value::Object(m)) => {
            for (k, v) in m {
                match v {
                    Value::Null => {
                        a.labels.remove(k);
                    }
                    Value::String(s) => {
                        a.labels.insert(k.clone(), s.clone());
                    }
                    _ => return Resp::error(400, "invalid", &format!("Invalid value for labels.{k}"), &[]),
                }
            }
        }
        Some(_) => return Resp::error(400, "invalid", "Invalid value for labels", &[]),
    }
    a.metageneration += 1;
    a.extra.insert("updated".into(), json!(rfc3339_utc(now_millis())));
    Resp::ok(bucket_json(a))
}

/// The bucket resource (Storage JSON API reference, "Buckets" resource representation; the
/// shape gcp-storage-emulator answers too): `kind storage#bucket`, `id`, `selfLink`,
/// `projectNumber` and `metageneration` as strings, `name`, `timeCreated`, `updated`,
/// `location` in capitals, `locationType`, `storageClass`, `etag`, and `labels` when it has any.
pub fn bucket_json(a: &Asset) -> Value {
    let mut v = json!({
        "kind": "storage#bucket",
        "selfLink": format!("https://www.googleapis.com/storage/v1/b/{}", a.name),
        "id": a.name,
        "name": a.name,
        "projectNumber": a.extra.get("projectNumber").cloned().unwrap_or(json!("0")),
        "metageneration": a.metageneration.to_string(),
        "location": a.location.to_ascii_uppercase(),
        "locationType": if a.location.contains('-') { "region" } else { "multi-region" },
        "storageClass": "STANDARD",
        "etag": etag(a.metageneration),
        "timeCreated": "2026-01-05T16:41:32.180Z",
        "updated": "2026-01-05T16:41:32.180Z",
    });
    if !a.labels.is_empty() {
        v["labels"] = json!(a.labels);
    }
    let mut extra: Map<String, Value> = a.extra.clone();
    extra.remove("projectNumber");
    for (k, x) in extra {
        v[k] = x;
    }
    v
}

/// Storage's bucket etags are base64 of a varint-encoded metageneration (`CAE=` for 1, the
/// emulator's and the service's first etag); enough that it changes with every write.
fn etag(metageneration: u64) -> String {
    use base64::Engine;
    let mut bytes = vec![0x08];
    let mut n = metageneration;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
#[test]
fn first_etag_is_the_services() {
    assert_eq!(etag(1), "CAE=");
}
