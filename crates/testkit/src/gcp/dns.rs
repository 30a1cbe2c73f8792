//! Cloud DNS v1's managed zones as google-cloud-dns-v1 2.1.0 calls them (its `transport.rs`):
//! `GET` and `PATCH /dns/v1/projects/{project}/managedZones/{managedZone}`. A PATCH body is a
//! `ManagedZone`; the fields it names replace the zone's (`labels` as a whole map: Cloud DNS has
//! no per-label patch and no label fingerprint), and it answers a DNS `Operation`.

use serde_json::{json, Value};

use super::http::{labels_of, Req, Resp};
use super::inventory::{Asset, State};
use super::time::{now_millis, rfc3339_utc};

pub const FULL_NAME_PREFIX: &str = "//dns.googleapis.com/";

pub fn handle(st: &mut State, r: &Req) -> Resp {
    let Some(rest) = r.path.strip_prefix("/dns/v1/") else { return Resp::not_found(&r.path) };
    let segs: Vec<&str> = rest.split('/').collect();
    if segs.len() != 4 || segs[0] != "projects" || segs[2] != "managedZones" {
        return Resp::not_found(rest);
    }
    let full = format!("{FULL_NAME_PREFIX}{rest}");
    match r.method.as_str() {
        "GET" => {
            st.counters.reads += 1;
            match st.assets.get(&full) {
                Some(a) => Resp::ok(zone_json(a)),
                None => no_such_zone(segs[3]),
            }
        }
        "PATCH" => patch(st, r, &full, segs[3]),
        _ => Resp::not_found(rest),
    }
}

/// Cloud DNS's 404 for a zone that is not there (reason `notFound`).
fn no_such_zone(name: &str) -> Resp {
    Resp::error(404, "notFound", &format!("The 'parameters.managedZone' resource named '{name}' does not exist."), &[])
}

fn patch(st: &mut State, r: &Req, full: &str, name: &str) -> Resp {
    st.apply_race(full);
    st.counters.writes += 1;
    let body = r.json();
    let labels = match body.get("labels") {
        None => None,
        Some(v) => match labels_of(v) {
            Some(l) => Some(l),
            None => return Resp::error(400, "invalid", "Invalid value for 'entity.managedZone.labels'", &[]),
        },
    };
    let id = st.new_id();
    let Some(a) = st.assets.get_mut(full) else { return no_such_zone(name) };
    let old = zone_json(a);
    if let Some(labels) = labels {
        a.labels = labels;
    }
    if let Some(d) = body.get("description").and_then(Value::as_str) {
        a.extra.insert("description".into(), json!(d));
    }
    let new = zone_json(a);
    // The DNS `Operation` (Cloud DNS v1 REST reference, "Operation"; the crate's
    // `model::Operation`: `id`, `startTime`, `status` "done" / "pending" in lower case on the
    // wire, `type`, `user`, `zoneContext {oldValue, newValue}`, `kind dns#operation`).
    Resp::ok(json!({
        "kind": "dns#operation",
        "id": id.to_string(),
        "startTime": rfc3339_utc(now_millis()),
        "status": "done",
        "type": "UPDATE",
        "user": "tagwarden@fake-project.iam.gserviceaccount.com",
        "zoneContext": {"oldValue": old, "newValue": new},
    }))
}

/// The `ManagedZone` resource (Cloud DNS v1 REST reference; the crate's `model::ManagedZone`):
/// `kind dns#managedZone`, `name`, `dnsName`, `description`, `id` as a string, `nameServers`,
/// `creationTime`, `visibility`, and `labels` when it has any.
pub fn zone_json(a: &Asset) -> Value {
    let mut v = json!({
        "kind": "dns#managedZone",
        "name": a.name,
        "dnsName": a.extra.get("dnsName").cloned().unwrap_or(json!(format!("{}.example.com.", a.name))),
        "description": "",
        "id": a.id.to_string(),
        "nameServers": ["ns-cloud-a1.googledomains.com.", "ns-cloud-a2.googledomains.com."],
        "creationTime": "2026-01-05T16:41:32.180Z",
        "visibility": "public",
    });
    if !a.labels.is_empty() {
        v["labels"] = json!(a.labels);
    }
    for (k, x) in &a.extra {
        v[k] = x.clone();
    }
    v
}
