//! Resource Manager v3's tag bindings and tag values as google-cloud-resourcemanager-v3 1.14.0
//! calls them (its `transport.rs`; `$alt=json;enum-encoding=int`):
//!
//! - `GET /v3/tagBindings?parent=//…&pageSize=&pageToken=`: `{"tagBindings": [TagBinding…]}`;
//! - `POST /v3/tagBindings` with a `TagBinding` (`parent`, and `tagValue` or
//!   `tagValueNamespacedName`): a long-running `Operation`, done, whose `response` is the binding;
//! - `DELETE /v3/tagBindings/{parent, URL-encoded}/tagValues/{id}`: a done long-running
//!   `Operation` whose `response` is `Empty`;
//! - `GET /v3/effectiveTags?parent=//…`: `{"effectiveTags": [EffectiveTag…]}`, the namespaced
//!   names in the form the key was created under (`{project id or org id}/{key}`, as a recorded
//!   `gcloud resource-manager tags bindings list --effective` answers), `inherited: false` for
//!   a direct binding; the fake's project-level bindings are inherited by the project's resources;
//! - `GET /v3/tagValues/namespaced?name={org or project}/{key}/{value}`: the `TagValue`;
//! - `GET /v3/operations/{id}`: an operation the create answered.
//!
//! A resource holds one value a key: a create naming another value of a key already bound
//! directly is refused with 400 `FAILED_PRECONDITION` ("A binding already exists between the given
//! resource and a Tag value presented by the same tagKey as the given tag value", as a Terraform
//! user quoted the service; the status name is inferred). A bucket's binding names it
//! `//storage.googleapis.com/projects/_/buckets/{name}` (Cloud Storage, "Tags and labels").
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
        ("GET", "/v3/effectiveTags") => effective(st, r),
        ("DELETE", p) if p.starts_with("/v3/tagBindings/") => delete(st, p),
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

/// The inventory's full name for a binding's parent: the name itself, a bucket's binding form, or
/// the numeric-id form.
fn resolve_parent(st: &State, parent: &str) -> Option<String> {
    if st.assets.contains_key(parent) {
        return Some(parent.to_string());
    }
    if let Some(bucket) = parent.strip_prefix("//storage.googleapis.com/projects/_/buckets/") {
        let full = format!("//storage.googleapis.com/{bucket}");
        return st.assets.contains_key(&full).then_some(full);
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
    let same_key: Vec<String> =
        st.tag_values.iter().filter(|v| v.parent == value.parent).map(|v| v.name.clone()).collect();
    let asset = st.assets.get_mut(&full).expect("resolved");
    if asset.tags.contains(&value.name) {
        return Resp::rpc_error(
            409,
            "ALREADY_EXISTS",
            "A binding already exists between the given resource and TagValue.",
        );
    }
    if asset.tags.iter().any(|t| same_key.contains(t)) {
        return Resp::rpc_error(
            400,
            "FAILED_PRECONDITION",
            "A binding already exists between the given resource and a Tag value presented by the same tagKey as the given tag value.",
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

fn delete(st: &mut State, path: &str) -> Resp {
    st.counters.writes += 1;
    // `tagBindings/{parent, URL-encoded}/tagValues/{id}`: the parent is one segment.
    let name = path.trim_start_matches("/v3/");
    let parsed = name
        .strip_prefix("tagBindings/")
        .and_then(|rest| rest.split_once("/tagValues/"))
        .map(|(parent, id)| (super::http::decode(parent), format!("tagValues/{id}")));
    let Some((parent, value)) = parsed else {
        return Resp::rpc_error(400, "INVALID_ARGUMENT", "Invalid tag binding name.");
    };
    let Some(full) = resolve_parent(st, &parent) else { return denied(&parent) };
    let asset = st.assets.get_mut(&full).expect("resolved");
    let Some(at) = asset.tags.iter().position(|t| *t == value) else {
        return Resp::rpc_error(404, "NOT_FOUND", &format!("TagBinding {name} not found."));
    };
    asset.tags.remove(at);
    let id = st.new_id();
    let op = format!("operations/rdtb.fake-{id:x}");
    Resp::ok(json!({
        "name": op,
        "metadata": {"@type": "type.googleapis.com/google.cloud.resourcemanager.v3.DeleteTagBindingMetadata"},
        "done": true,
        "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
    }))
}

/// The tags in effect on a resource: its direct bindings, then its project's it does not
/// override (a direct binding of a key wins over an inherited one, Cloud Asset Inventory
/// `EffectiveTagDetails`).
fn effective(st: &mut State, r: &Req) -> Resp {
    st.counters.reads += 1;
    let parent = r.param("parent").unwrap_or_default();
    let Some(full) = resolve_parent(st, &parent) else { return denied(&parent) };
    let asset = &st.assets[&full];
    let value = |name: &String| st.tag_values.iter().find(|v| v.name == *name);
    let direct: Vec<&TagValue> = asset.tags.iter().filter_map(value).collect();
    let project_tags = st.project_tags.get(&asset.project).cloned().unwrap_or_default();
    let inherited: Vec<&TagValue> =
        project_tags.iter().filter_map(value).filter(|v| !direct.iter().any(|d| d.parent == v.parent)).collect();
    let number = st.projects.get(&asset.project).map(|p| p.number).unwrap_or_default();
    let tags: Vec<Value> = direct
        .iter()
        .map(|v| (v, false))
        .chain(inherited.iter().map(|v| (v, true)))
        .map(|(v, inherited)| {
            let key = v.namespaced_name.rsplit_once('/').map_or("", |(k, _)| k);
            let owner = key.split('/').next().unwrap_or_default();
            // A key under a project names the project by number here, an organization's by its id.
            let parent_name = if owner.starts_with(|c: char| c.is_ascii_digit()) {
                format!("organizations/{owner}")
            } else {
                format!("projects/{number}")
            };
            json!({
                "tagValue": v.name,
                "namespacedTagValue": v.namespaced_name,
                "tagKey": v.parent,
                "namespacedTagKey": key,
                "tagKeyParentName": parent_name,
                "inherited": inherited,
            })
        })
        .collect();
    Resp::ok(if tags.is_empty() { json!({}) } else { json!({"effectiveTags": tags}) })
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
