//! Cloud Asset Inventory's `searchAllResources` as google-cloud-asset-v1 1.15.0 calls it (its
//! `transport.rs`): `GET /v1/{scope}:searchAllResources?query=&assetTypes=&pageSize=&pageToken=
//! &orderBy=`, answering `{"results": [ResourceSearchResult…], "nextPageToken": "…"}`.
//!
//! What the real service does, from the request's reference (the crate's
//! `SearchAllResourcesRequest` docs) and the search query syntax guide, and what the fake does:
//!
//! - `scope`: `projects/{ID}`, `projects/{NUMBER}`, `folders/{N}`, `organizations/{N}`; a folder
//!   or organization covers every project under it at any depth. A scope the fake does not know
//!   answers 403 `PERMISSION_DENIED`, as the service does for a scope the caller cannot search.
//! - `query`: terms separated by spaces must all hold. `labels.KEY:VALUE` is the "has" operator
//!   ("Partial text matching" in the search query syntax guide): the label's value and the query
//!   value are cut into words, and the query's words must appear among the value's in
//!   consecutive order, so `labels.env:prod` finds `prod` and `team-prod` but not `production`;
//!   a query word ending in `*` matches the words it prefixes; `labels.KEY:*` means the label is
//!   there. The fake compares words case-insensitively (the guide says so for neither operator's
//!   words; labels are lower case anyway). `labels.KEY=VALUE` is "Exact text matching": the
//!   whole value, case-sensitive ("Query values are case-sensitive"), no wildcards.
//!   `labels:WORD` matches a label key or value. Terms joined by `OR` are alternatives ("Combine
//!   queries with AND, OR and NOT" in the guide; the fake takes no parentheses or NOT, `AND`
//!   binding first). Any other term answers 400 `INVALID_ARGUMENT` (the fake knows only these).
//! - `assetTypes`: exact types, or RE2 patterns of the forms `prefix.*`, `.*suffix`, `.*infix.*`.
//! - `pageSize`: "capped at 500 even if a larger value is given. If set to zero or a negative
//!   value, server will pick an appropriate default" (the default is not documented; the fake's
//!   is [`DEFAULT_PAGE`], settable per fake). `pageToken` must come from the previous answer
//!   with every other parameter unchanged, else 400 `INVALID_ARGUMENT`.
//! - Results are ordered by name (the service's default order is not documented); `orderBy` and
//!   `readMask` are taken and ignored.

use serde_json::{json, Value};

use super::http::{Req, Resp};
use super::inventory::{Asset, State};

/// The fake's page size when the request has none (the service's is not documented).
pub const DEFAULT_PAGE: usize = 100;
/// "Page size is capped at 500 even if a larger value is given."
pub const MAX_PAGE: usize = 500;

pub fn handle(st: &mut State, r: &Req) -> Resp {
    st.counters.lists += 1;
    let Some(scope) = r.path.strip_prefix("/v1/").and_then(|p| p.strip_suffix(":searchAllResources")) else {
        return Resp::rpc_error(404, "NOT_FOUND", "Method not found.");
    };
    let Some(projects) = projects_in(st, scope) else {
        return Resp::rpc_error(403, "PERMISSION_DENIED", &format!("The caller does not have permission on {scope}"));
    };
    let query = r.param("query").unwrap_or_default();
    let alternatives: Result<Vec<Vec<Term>>, String> = query.split(" OR ").map(parse).collect();
    let alternatives = match alternatives {
        Ok(t) => t,
        Err(term) => {
            return Resp::rpc_error(
                400,
                "INVALID_ARGUMENT",
                &format!("Invalid query: the fake cannot evaluate `{term}`"),
            )
        }
    };
    let types = r.params("assetTypes");
    let size = match r.param("pageSize").and_then(|s| s.parse::<i64>().ok()).unwrap_or(0) {
        n if n <= 0 => st.search_page,
        n => (n as usize).min(MAX_PAGE),
    };
    let request_key = format!("{scope}|{query}|{}|{size}", types.join(","));
    let offset = match r.param("pageToken").filter(|t| !t.is_empty()) {
        None => 0,
        Some(token) => match st.page_tokens.get(&token) {
            Some((offset, key)) if *key == request_key => *offset,
            _ => return Resp::rpc_error(400, "INVALID_ARGUMENT", "Invalid page token."),
        },
    };
    let hits: Vec<&Asset> = st
        .assets
        .values()
        .filter(|a| projects.contains(&a.project))
        .filter(|a| types.is_empty() || types.iter().any(|t| type_matches(t, a.kind.asset_type)))
        .filter(|a| alternatives.iter().any(|terms| terms.iter().all(|t| t.holds(a))))
        .collect();
    let page: Vec<Value> = hits.iter().skip(offset).take(size).map(|a| result_json(st, a)).collect();
    let mut body = json!({});
    if !page.is_empty() {
        body["results"] = json!(page);
    }
    if offset + size < hits.len() {
        st.next_id += 1;
        let token = format!("fake-search-page-{:x}", st.next_id);
        st.page_tokens.insert(token.clone(), (offset + size, request_key));
        body["nextPageToken"] = json!(token);
    }
    Resp::ok(body)
}

/// The project ids a scope covers, `None` for a scope the fake does not know.
fn projects_in(st: &State, scope: &str) -> Option<Vec<String>> {
    if let Some(p) = scope.strip_prefix("projects/") {
        let id =
            st.projects.iter().find(|(id, pr)| *id == p || pr.number.to_string() == p).map(|(id, _)| id.clone())?;
        return Some(vec![id]);
    }
    if !(scope.starts_with("folders/") || scope.starts_with("organizations/")) {
        return None;
    }
    let under: Vec<String> = st
        .projects
        .iter()
        .filter(|(_, pr)| pr.ancestors.iter().any(|a| a == scope))
        .map(|(id, _)| id.clone())
        .collect();
    (!under.is_empty()).then_some(under)
}

/// RE2 of the three forms the reference shows, or an exact type.
fn type_matches(pattern: &str, asset_type: &str) -> bool {
    match (pattern.strip_prefix(".*"), pattern.strip_suffix(".*")) {
        (Some(_), Some(_)) => asset_type.contains(&pattern[2..pattern.len() - 2]),
        (Some(suffix), None) => asset_type.ends_with(suffix),
        (None, Some(prefix)) => asset_type.starts_with(prefix),
        (None, None) => asset_type == pattern,
    }
}

#[derive(Debug)]
enum Term {
    /// `labels.KEY:VALUE` (words in order, case-insensitive; `*` a prefix or any value).
    Has { key: String, value: String },
    /// `labels.KEY=VALUE` (the whole value, case-sensitive).
    Is { key: String, value: String },
    /// `labels:WORD` (a label key or value has the word).
    Any(String),
}

fn parse(query: &str) -> Result<Vec<Term>, String> {
    query
        .split_whitespace()
        .filter(|t| *t != "AND")
        .map(|t| {
            if let Some(word) = t.strip_prefix("labels:") {
                return Ok(Term::Any(word.to_string()));
            }
            let rest = t.strip_prefix("labels.").ok_or_else(|| t.to_string())?;
            match (rest.find(':'), rest.find('=')) {
                (Some(i), e) if e.is_none_or(|e| i < e) => {
                    Ok(Term::Has { key: rest[..i].to_string(), value: unquote(&rest[i + 1..]) })
                }
                (_, Some(e)) => Ok(Term::Is { key: rest[..e].to_string(), value: unquote(&rest[e + 1..]) }),
                _ => Err(t.to_string()),
            }
        })
        .collect()
}

fn unquote(v: &str) -> String {
    v.trim_matches('"').to_string()
}

/// Words as the search service cuts them: runs of letters and digits, lower-cased.
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Whether `query`'s words appear in `value`'s words consecutively (the last may be a prefix).
fn has_words(value: &str, query: &str) -> bool {
    let (v, q) = (words(value), words(query));
    let prefix = query.ends_with('*');
    if q.is_empty() {
        return false;
    }
    v.windows(q.len()).any(|w| {
        w.iter()
            .zip(&q)
            .enumerate()
            .all(|(i, (a, b))| if prefix && i == q.len() - 1 { a.starts_with(b) } else { a == b })
    })
}

impl Term {
    fn holds(&self, a: &Asset) -> bool {
        match self {
            Term::Has { key, value } if value == "*" => a.labels.contains_key(key),
            Term::Has { key, value } => a.labels.get(key).is_some_and(|v| has_words(v, value)),
            Term::Is { key, value } => a.labels.get(key) == Some(value),
            Term::Any(word) => a.labels.iter().any(|(k, v)| has_words(k, word) || has_words(v, word)),
        }
    }
}

/// A `ResourceSearchResult` (the crate's `model::ResourceSearchResult`, the v1 REST reference):
/// `name`, `assetType`, `project` as `projects/NUMBER`, `folders`, `organization`,
/// `displayName`, `description`, `location`, `labels` (left out when empty: proto3 JSON leaves
/// out empty maps and lists), `parentFullResourceName`, `parentAssetType`, and the tags bound
/// to it as `tags` ({tagKey, tagKeyId, tagValue, tagValueId}, namespaced names) and
/// `effectiveTags` ([{attachedResource, effectiveTags}]: the resource's own, then its project's
/// that no direct binding of the same key overrides).
fn result_json(st: &State, a: &Asset) -> Value {
    let project = st.projects.get(&a.project);
    let ancestors = project.map(|p| p.ancestors.clone()).unwrap_or_default();
    let mut v = json!({
        "name": a.full_name,
        "assetType": a.kind.asset_type,
        "project": format!("projects/{}", project.map(|p| p.number).unwrap_or_default()),
        "displayName": a.name,
        "description": "",
        "location": a.location,
        "parentFullResourceName": format!("//cloudresourcemanager.googleapis.com/projects/{}", a.project),
        "parentAssetType": "cloudresourcemanager.googleapis.com/Project",
        "createTime": "2026-01-05T16:41:32Z",
        "updateTime": "2026-01-05T16:41:32Z",
    });
    let folders: Vec<&String> = ancestors.iter().filter(|a| a.starts_with("folders/")).collect();
    if !folders.is_empty() {
        v["folders"] = json!(folders);
    }
    if let Some(org) = ancestors.iter().find(|a| a.starts_with("organizations/")) {
        v["organization"] = json!(org);
    }
    if a.kind.labelable && !a.labels.is_empty() {
        v["labels"] = json!(a.labels);
    }
    let values = |names: &[String]| -> Vec<&super::inventory::TagValue> {
        names.iter().filter_map(|t| st.tag_values.iter().find(|tv| tv.name == *t)).collect()
    };
    let tag_json = |tv: &super::inventory::TagValue| {
        let key = tv.namespaced_name.rsplit_once('/').map(|(k, _)| k).unwrap_or_default();
        json!({"tagKey": key, "tagKeyId": tv.parent, "tagValue": tv.namespaced_name, "tagValueId": tv.name})
    };
    let direct = values(&a.tags);
    let project_tags = st.project_tags.get(&a.project).cloned().unwrap_or_default();
    let inherited: Vec<_> =
        values(&project_tags).into_iter().filter(|p| !direct.iter().any(|d| d.parent == p.parent)).collect();
    let mut effective = Vec::new();
    if !direct.is_empty() {
        let tags: Vec<Value> = direct.iter().map(|tv| tag_json(tv)).collect();
        effective.push(json!({"attachedResource": a.full_name, "effectiveTags": tags}));
        v["tags"] = json!(tags);
    }
    if !inherited.is_empty() {
        let tags: Vec<Value> = inherited.iter().map(|tv| tag_json(tv)).collect();
        let project = format!("//cloudresourcemanager.googleapis.com/projects/{}", a.project);
        effective.push(json!({"attachedResource": project, "effectiveTags": tags}));
    }
    if !effective.is_empty() {
        v["effectiveTags"] = json!(effective);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_is_words_in_order_and_equals_is_exact() {
        assert!(has_words("prod", "prod"));
        assert!(has_words("team-prod-eu", "prod"));
        assert!(has_words("Prod", "prod"));
        assert!(!has_words("production", "prod"));
        assert!(has_words("production", "prod*"));
        assert!(has_words("a-b-c", "b-c"));
        assert!(!has_words("a-b-c", "c-b"));
        let t = parse("labels.env=prod labels.team:core").expect("parses");
        assert!(matches!(&t[0], Term::Is { key, value } if key == "env" && value == "prod"));
        assert!(matches!(&t[1], Term::Has { key, value } if key == "team" && value == "core"));
        assert!(parse("name:foo").is_err());
    }

    #[test]
    fn asset_type_patterns() {
        assert!(type_matches("compute.googleapis.com.*", "compute.googleapis.com/Disk"));
        assert!(type_matches(".*Instance", "compute.googleapis.com/Instance"));
        assert!(type_matches(".*Forwarding.*", "compute.googleapis.com/GlobalForwardingRule"));
        assert!(!type_matches("compute.googleapis.com/Disk", "compute.googleapis.com/Instance"));
    }
}
