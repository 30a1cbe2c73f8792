//! Resource Manager v3's tag bindings and tag values as google-cloud-resourcemanager-v3 1.14.0
//! calls them (its `transport.rs`; `$alt=json;enum-encoding=int`):
//!
//! - `GET /v3/tagBindings?parent=//…&pageSize=&pageToken=`: `{"tagBindings": [TagBinding…]}`;
//! - `POST /v3/tagBindings` with a `TagBinding` (`parent`, and `tagValue` or
//!   `tagValueNamespacedName`): a long-running `Operation`, done, whose `response` is the binding;
//! - `GET /v3/tagValues/namespaced?name={org or project}/{key}/{value}`: the `TagValue`;
//! - `GET /v3/operations/{id}`: an operation the create answered.
//!
//! tagwarden binds existing values only: the fake knows the values a test added and answers a
//! bind of any other as the service does a value the caller cannot see (403
//! `PERMISSION_DENIED`). A compute resource's binding names its parent by numeric id
//! (`//compute.googleapis.com/projects/p/zones/z/instances/1234…`, Resource Manager's "Attaching
//! tags to resources" guide); the fake takes that form and the name form alike. Real bindings of
//! zonal and regional resources go to the location's endpoint
//! (`{location}-cloudresourcemanager.googleapis.com`); the fake serves every location on its one
//! endpoint.

use serde_json::{json, Value};

use super::http::{encode, Req, Resp};
use super::inventory::{State, TagValue};

pub fn handle(st: &mut State, r: &Req) -> Resp {
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/v3/tagBindings") => list(st, r),
        ("POST", "/v3/tagBindings") => create(st, r),
        ("GET", "/v3/tagValues/namespaced") => {
            st.counters.reads += 1;
            let name = r.param("name").unwrap_or_default();
            match st.tag_values.iter().find(|v| v.namespaced_name == name) {
                Some(v) => Resp::ok(value_json(v)),
                None => denied(&name),
            }
        }
        ("GET", p) if p.starts_with("/v3/operations/") => match st.operations.get(p) {
            Some(op) => Resp::ok(op.clone()),
            None => Resp::rpc_error(404, "NOT_FOUND", &format!("Operation {p} not found")),
        },
        _ => Resp::rpc_error(404, "NOT_FOUND", "Method not found."),
    }
}

/// What Resource Manager answers for a name the caller cannot see or that does not exist (it does
/// not say which).
fn denied(name: &str) -> Resp {
    Resp::rpc_error(403, "PERMISSION_DENIED", &format!("Permission denied on resource '{name}' (or it may not exist)."))
}

/// The inventory's full name for a binding's parent: the name itself, or the numeric-id form.
fn resolve_parent(st: &State, parent: &str) -> Option<String> {
    if st.assets.contains_key(parent) {
        return Some(parent.to_string());
    }
    let (head, id) = parent.rsplit_once('/')?;
    st.assets
        .values()
        .find(|a| a.id.to_string() == id && a.full_name.rsplit_once('/').map(|(h, _)| h) == Some(head))
        .map(|a| a.full_name.clone())
}

fn list(st: &mut State, r: &Req) -> Resp {
    st.counters.lists += 1;
    let parent = r.param("parent").unwrap_or_default();
    let Some(full) = resolve_parent(st, &parent) else { return denied(&parent) };
    let bindings: Vec<Value> = st.assets[&full]
        .tags
        .iter()
        .filter_map(|t| st.tag_values.iter().find(|v| v.name == *t))
        .map(|v| binding_json(&parent, v))
        .collect();
    // proto3 JSON leaves an empty list out: an unbound resource answers `{}`.
    Resp::ok(if bindings.is_empty() { json!({}) } else { json!({"tagBindings": bindings}) })
}

fn create(st: &mut State, r: &Req) -> Resp {
    st.counters.writes += 1;
    let body = r.json();
    let parent = body.get("parent").and_then(Value::as_str).unwrap_or_default().to_string();
    let by_name = body.get("tagValue").and_then(Value::as_str).filter(|s| !s.is_empty());
    let by_path = body.get("tagValueNamespacedName").and_then(Value::as_str).filter(|s| !s.is_empty());
    let value = st
        .tag_values
        .iter()
        .find(|v| Some(v.name.as_str()) == by_name || Some(v.namespaced_name.as_str()) == by_path)
        .cloned();
    let Some(value) = value else { return denied(by_name.or(by_path).unwrap_or("tagValues/")) };
    let Some(full) = resolve_parent(st, &parent) else { return denied(&parent) };
    let asset = st.assets.get_mut(&full).expect("resolved");
    if asset.tags.contains(&value.name) {
        return Resp::rpc_error(
            409,
            "ALREADY_EXISTS",
            "A binding already exists between the given resource and TagValue.",
        );
    }
    asset.tags.push(value.name.clone());
    let mut binding = binding_json(&parent, &value);
    binding["@type"] = json!("type.googleapis.com/google.cloud.resourcemanager.v3.TagBinding");
    let id = st.new_id();
    let name = format!("operations/rctb.fake-{id:x}");
    // A done long-running operation (google.longrunning.Operation in JSON: `name`, `metadata` and
    // `response` as Any with `@type`, `done`); the crate's poller decodes `response` as a
    // TagBinding and `metadata` as CreateTagBindingMetadata.
    let op = json!({
        "name": name,
        "metadata": {"@type": "type.googleapis.com/google.cloud.resourcemanager.v3.CreateTagBindingMetadata"},
        "done": true,
        "response": binding,
    });
    st.operations.insert(format!("/v3/{name}"), op.clone());
    Resp::ok(op)
}

/// A `TagBinding` (Resource Manager v3 REST reference; the crate's `model::TagBinding`): its
/// `name` is `tagBindings/{parent, URL-encoded}/tagValues/{id}`.
fn binding_json(parent: &str, v: &TagValue) -> Value {
    let id = v.name.trim_start_matches("tagValues/");
    json!({
        "name": format!("tagBindings/{}/tagValues/{id}", encode(parent)),
        "parent": parent,
        "tagValue": v.name,
        "tagValueNamespacedName": v.namespaced_name,
    })
}

/// A `TagValue` (Resource Manager v3 REST reference; the crate's `model::TagValue`).
fn value_json(v: &TagValue) -> Value {
    json!({
        "name": v.name,
        "parent": v.parent,
        "shortName": v.short_name,
        "namespacedName": v.namespaced_name,
        "description": "",
        "createTime": "2026-01-05T16:41:32.180Z",
        "updateTime": "2026-01-05T16:41:32.180Z",
        "etag": format!("W/\"{}\"", v.name.len()),
    })
}
