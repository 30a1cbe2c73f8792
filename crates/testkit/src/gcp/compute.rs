//! Compute Engine v1 as google-cloud-compute-v1 4.1.0 calls it (its `transport.rs`):
//!
//! - `GET /compute/v1/projects/{p}/{zones/{z} | regions/{r} | global}/{collection}/{name}`: the
//!   resource, with `labels` (left out when empty, as Compute does) and `labelFingerprint` on
//!   the labelable types;
//! - `POST …/{name}/setLabels` with `{"labels": {…}, "labelFingerprint": "…"}` (Compute's
//!   `ZoneSetLabelsRequest` / `RegionSetLabelsRequest` / `GlobalSetLabelsRequest`): the labels are
//!   REPLACED by the body's map ("Sets the labels on an instance", the REST reference: the body is
//!   the whole new set), and a fingerprint that is not the current one answers 412;
//! - `GET …/operations/{operation}` and `POST …/operations/{operation}/wait` (zone, region and
//!   global operations): the operation, always `DONE`.

use serde_json::{json, Value};

use super::http::{labels_of, Req, Resp};
use super::inventory::State;
use super::time::{now_millis, rfc3339_pacific};

/// Every link Compute writes names the public endpoint, whichever endpoint was called (captured
/// describes: `"selfLink": "https://www.googleapis.com/compute/v1/projects/…"`).
pub const LINK_BASE: &str = "https://www.googleapis.com/compute/v1";
const FULL_NAME_PREFIX: &str = "//compute.googleapis.com";

/// The message and reason Compute answers a stale fingerprint with: the Go client shows it as
/// `googleapi: Error 412: Labels fingerprint either invalid or resource labels have changed,
/// conditionNotMet` (a recorded disk setLabels failure in a CSI driver's tests), Python's
/// `PreconditionFailed.errors[0]["message"]` compares equal to the same text, and the audit log
/// of `v1.compute.instances.setLabels` carries it as the status message.
pub const STALE_FINGERPRINT: &str = "Labels fingerprint either invalid or resource labels have changed";

pub fn handle(st: &mut State, r: &Req) -> Resp {
    let Some(rest) = r.path.strip_prefix("/compute/v1") else { return Resp::not_found(&r.path) };
    let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    if segs.first() != Some(&"projects") || segs.len() < 4 {
        return Resp::not_found(rest);
    }
    // projects/{p}/global/{coll}/{name}… or projects/{p}/{zones|regions}/{s}/{coll}/{name}…
    let head = if segs[2] == "global" { 3 } else { 4 };
    let (Some(coll), Some(name)) = (segs.get(head), segs.get(head + 1)) else { return Resp::not_found(rest) };
    let verb = segs.get(head + 2).copied();
    if *coll == "operations" {
        return operation(st, r, rest, name, verb);
    }
    let target = format!("/{}", segs[..head + 2].join("/"));
    let full = format!("{FULL_NAME_PREFIX}{target}");
    match (r.method.as_str(), verb) {
        ("GET", None) => {
            st.counters.reads += 1;
            match st.assets.get(&full) {
                Some(a) => Resp::ok(resource_json(a)),
                None => Resp::not_found(&target),
            }
        }
        ("POST", Some("setLabels")) => set_labels(st, r, &full, &target),
        _ => Resp::not_found(rest),
    }
}

/// The resource as Compute's GET answers it: the fields every resource has (`kind`, `id` as a
/// string, `creationTimestamp`, `name`, `description`, `selfLink`, its `zone` / `region` link),
/// and `labels` / `labelFingerprint` on labelable types (captured describes of an instance, an
/// address and a forwarding rule; the crate's `model::Instance` et al. read exactly these names).
pub fn resource_json(a: &super::inventory::Asset) -> Value {
    let target = a.full_name.trim_start_matches(FULL_NAME_PREFIX);
    let mut v = json!({
        "kind": a.kind.api_kind,
        "id": a.id.to_string(),
        "creationTimestamp": "2026-01-05T08:41:32.180-08:00",
        "name": a.name,
        "description": "",
        "selfLink": format!("{LINK_BASE}{target}"),
    });
    if let Some((scope, place)) = scope_link(target) {
        v[scope] = json!(place);
    }
    if a.kind.labelable {
        if !a.labels.is_empty() {
            v["labels"] = json!(a.labels);
        }
        v["labelFingerprint"] = json!(a.fingerprint);
    }
    if a.kind.api_kind == "compute#instance" {
        v["status"] = json!("RUNNING");
    }
    for (k, x) in &a.extra {
        v[k] = x.clone();
    }
    v
}

/// (`zone` | `region`, its link) for a zonal or regional path; `None` for a global one.
fn scope_link(target: &str) -> Option<(&'static str, String)> {
    let segs: Vec<&str> = target.trim_start_matches('/').split('/').collect();
    let key = match segs.get(2) {
        Some(&"zones") => "zone",
        Some(&"regions") => "region",
        _ => return None,
    };
    Some((key, format!("{LINK_BASE}/{}", segs[..4].join("/"))))
}

fn set_labels(st: &mut State, r: &Req, full: &str, target: &str) -> Resp {
    st.apply_race(full);
    st.counters.writes += 1;
    let body = r.json();
    let Some(labels) = labels_of(body.get("labels").unwrap_or(&json!({}))) else {
        return Resp::error(400, "invalid", "Invalid value for field 'labels'", &[]);
    };
    let fingerprint = st.new_fingerprint();
    let Some(a) = st.assets.get_mut(full).filter(|a| a.kind.labelable) else { return Resp::not_found(target) };
    if !same_fingerprint(body.get("labelFingerprint").and_then(Value::as_str), &a.fingerprint) {
        return Resp::error(412, "conditionNotMet", STALE_FINGERPRINT, &[]);
    }
    a.labels = labels;
    a.fingerprint = fingerprint;
    let target_id = a.id;
    let op = new_operation(st, target, target_id, "setLabels");
    Resp::ok(op)
}

/// Fingerprints are bytes in base64 (the crate's `label_fingerprint` is `bytes::Bytes`, which
/// it encodes again on the way out): compare the bytes, whichever base64 alphabet was used. A
/// missing fingerprint is not the current one.
fn same_fingerprint(sent: Option<&str>, current: &str) -> bool {
    use base64::Engine;
    let decode = |s: &str| {
        let e = base64::engine::general_purpose::STANDARD;
        e.decode(s).or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(s)).ok()
    };
    sent.and_then(decode).is_some_and(|b| Some(b) == decode(current))
}

/// A finished operation, kept so `get` and `wait` find it. Compute's `Operation` resource (REST
/// reference; the crate's `model::Operation` fields): `kind compute#operation`, `id`, `name`,
/// `zone` or `region`, `operationType`, `targetLink`, `targetId`, `status`, `user`, `progress`,
/// `insertTime`, `startTime`, `endTime`, `selfLink`. Every label write is done by the time the
/// call answers here; the real one may still be `RUNNING`, which the crate's poller handles.
fn new_operation(st: &mut State, target: &str, target_id: u64, kind: &str) -> Value {
    let id = st.new_id();
    let name = format!("operation-{}-{:013x}-{:08x}-{:08x}", now_millis(), id, id >> 7, id ^ 0x5a5a);
    let segs: Vec<&str> = target.trim_start_matches('/').split('/').collect();
    let scope_path = if segs.get(2) == Some(&"global") { segs[..3].join("/") } else { segs[..4].join("/") };
    let now = rfc3339_pacific(now_millis());
    let mut op = json!({
        "kind": "compute#operation",
        "id": id.to_string(),
        "name": name,
        "operationType": kind,
        "targetLink": format!("{LINK_BASE}{target}"),
        "targetId": target_id.to_string(),
        "status": "DONE",
        "user": "tagwarden@fake-project.iam.gserviceaccount.com",
        "progress": 100,
        "insertTime": now,
        "startTime": now,
        "endTime": now,
        "selfLink": format!("{LINK_BASE}/{scope_path}/operations/{name}"),
    });
    if let Some((scope, place)) = scope_link(target) {
        op[scope] = json!(place);
    }
    st.operations.insert(format!("/compute/v1/{scope_path}/operations/{name}"), op.clone());
    op
}

fn operation(st: &mut State, r: &Req, rest: &str, _name: &str, verb: Option<&str>) -> Resp {
    let key = format!("/compute/v1{}", rest.trim_end_matches("/wait"));
    match (r.method.as_str(), verb) {
        ("GET", None) | ("POST", Some("wait")) => match st.operations.get(&key) {
            Some(op) => Resp::ok(op.clone()),
            None => Resp::not_found(rest),
        },
        _ => Resp::not_found(rest),
    }
}
