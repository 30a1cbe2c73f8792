//! The sweep's listing through Azure Resource Graph: one query for a cluster's owned resources
//! (and resource groups) across every sweep scope, tags included, so a sweep of N owned resources
//! costs `ceil(N / 1000)` queries and no per-resource read — where ARM's tag-filtered
//! `Resources - List` returns no tags and costs a read per resource (`super::arm::ArmClient::list_owned`).
//!
//! The contract (azure-rest-api-specs, `specification/resourcegraph/resource-manager/
//! Microsoft.ResourceGraph/stable/2022-10-01/resourcegraph.json`, operation `Resources`):
//! `POST {arm}/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01` with
//! `{"subscriptions": […], "query": "<KQL>", "options": {"$top": 1000, "resultFormat":
//! "objectArray", "$skipToken": …}}`; `$top` is at most 1000; the answer is `{"totalRecords",
//! "count", "resultTruncated": "true"|"false", "$skipToken"?, "data": [{…}], "facets": []}`, and a
//! `$skipToken` is sent back with the same query and scopes for the next page (examples
//! `ResourcesFirstPageQuery.json`, `ResourcesNextPageQuery.json`: paging needs `id` in the
//! projection). Errors are ARM's `{"error": {"code", "message", "details"}}` (azure-sdk-for-python
//! `azure-mgmt-resourcegraph` recording `test_resources_malformed_query.yaml`: 400 `BadRequest`
//! with details `InvalidQuery`). 2022-10-01 is a GA version with everything used here
//! (`resultFormat`, `$skipToken`, `$top` up to 1000), the same request and answer as 2024-04-01's
//! examples; the older one is chosen for clouds that take new versions later.
//!
//! Quota (MicrosoftDocs azure-docs `articles/governance/resource-graph/concepts/
//! guidance-for-throttled-requests.md`): every answer carries `x-ms-user-quota-remaining` (queries
//! left in the window) and `x-ms-user-quota-resets-after` (`hh:mm:ss`), about 15 queries per 5 s
//! per user, each page one query; beyond it, 429 `RateLimiting` (Azure/azure-cli-extensions#3325).
//! So no page is started while the quota is spent: the reset is waited for when it is within the
//! wait budget of every ARM wait ([`MAX_RETRY_AFTER`]), else the listing fails, retryably, for the
//! next sweep. A 429 is retried by the ARM client (`Retry-After`, else the quota's reset).
//!
//! Three things Resource Graph does differently from ARM, and what the sweep does about each:
//! - **It lags ARM** (its index is updated from ARM's notifications, seconds to minutes behind).
//!   Planning on its tags is safe for the resources it shows in line: a Merge never removes a tag,
//!   so a stale "in line" only defers a correction to the next event or sweep, and a stale
//!   "drifted" costs a re-read, never a wrong write — because every resource that appears drifted is
//!   re-read through the Tags API right before its write (`ArmTagger::batching` answers
//!   `Batching::Reread`), and re-planned from what ARM says: a resource whose ownership tag was
//!   removed since the snapshot is not written. One extra read per drifted resource, none for
//!   the rest. A resource created or tagged after the snapshot is not listed: its own event
//!   (`ResourceWriteSuccess`) covers it, else the next sweep.
//! - **It shows only what the caller may read**, silently (rows the identity has no `*/read` on are
//!   left out, where ARM's listing answers 403). The deployment grants Reader at every enforcement
//!   scope (infra/azure/rbac.tf) for this; a subscription the identity cannot read at all is
//!   refused (400), which falls back to the ARM listing, which names the missing role.
//! - **It may be refused** where ARM's listing is not: a cloud without Resource Graph (Azure Stack
//!   Hub: 404), a query a sovereign cloud's version does not take (400), no read on a subscription
//!   (400/403). Any 4xx but 408/409/429 is such a refusal ([`GraphError::Refused`]): the sweep
//!   lists through ARM as before, and says why. Throttling beyond the budget, 5xx and no answer are
//!   not ([`GraphError::Failed`]): the ARM listing would spend N+1 calls of the subscription's ARM
//!   read budget — which its owner's own deployments share — to save one sweep a few seconds; the
//!   listing fails, retryably, and the next sweep queries again.
//!
//! The ownership tag is matched ignoring the case of its name, as ARM treats tag names: the query
//! compares on a lower-cased copy of the tag bag and projects the original `tags`, so the value is
//! matched ignoring case too — a superset the engine narrows, since it decides ownership from the
//! tags themselves.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::arm::{parse_resets_after, ArmClient, Response, QUOTA_RESETS_AFTER};
use tagwarden_core::cloud::OWNED;
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::retry::MAX_RETRY_AFTER;

/// A GA version of the `Resources` operation (see the module's notes).
pub const API_VERSION: &str = "2022-10-01";
pub const QUERY_PATH: &str = "/providers/Microsoft.ResourceGraph/resources";
pub const OP_QUERY: &str = "resourcegraph:Resources";
/// Rows a page: the most `$top` takes.
pub const PAGE_ROWS: usize = 1000;
/// Subscriptions a query names: the guidance for throttled requests groups them "less than 300"
/// (its example groups 100).
pub const SUBSCRIPTIONS_PER_QUERY: usize = 100;
pub const QUOTA_REMAINING: &str = "x-ms-user-quota-remaining";
/// The window when an answer says the quota is spent but not when it resets (documented: 5 s).
const QUOTA_WINDOW: Duration = Duration::from_secs(5);

/// The ID prefix of a management group scope (`Management Groups - Get`, azure-rest-api-specs
/// `specification/managementgroups`: `/providers/Microsoft.Management/managementGroups/{groupId}`).
pub const MANAGEMENT_GROUP_PREFIX: &str = "/providers/Microsoft.Management/managementGroups/";

/// Sweep scopes: by subscription (lower case), the whole subscription (`None`) or some of its
/// resource groups; and management groups, which a query names as such (`managementGroups` in its
/// request: everything under the group, at any depth, that the caller may read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes {
    subscriptions: BTreeMap<String, Option<BTreeSet<String>>>,
    management_groups: BTreeSet<String>,
}

/// A management group's id from its scope ID, if `scope` is one (the prefix in any case).
pub fn management_group_of(scope: &str) -> Option<&str> {
    let scope = scope.trim_end_matches('/');
    let n = MANAGEMENT_GROUP_PREFIX.len();
    let id =
        scope.get(n..).filter(|_| scope.get(..n).is_some_and(|p| p.eq_ignore_ascii_case(MANAGEMENT_GROUP_PREFIX)))?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// A sweep scope that is neither a subscription, a resource group nor a management group ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sweep scope {0:?} is neither a subscription, a resource group nor a management group ID")]
pub struct ScopeError(pub String);

impl Scopes {
    /// `/subscriptions/ID`, `/subscriptions/ID/resourceGroups/NAME` and
    /// `/providers/Microsoft.Management/managementGroups/ID`, as the configuration takes them; a
    /// subscription swallows its resource groups.
    pub fn parse(scopes: &[String]) -> Result<Scopes, ScopeError> {
        let mut out = Scopes::default();
        for scope in scopes {
            if let Some(group) = management_group_of(scope) {
                out.management_groups.insert(group.to_ascii_lowercase());
                continue;
            }
            let parts: Vec<&str> = scope.trim_matches('/').split('/').collect();
            match parts.as_slice() {
                [s, sub] if s.eq_ignore_ascii_case("subscriptions") && !sub.is_empty() => {
                    out.subscriptions.insert(sub.to_ascii_lowercase(), None);
                }
                [s, sub, g, rg]
                    if s.eq_ignore_ascii_case("subscriptions")
                        && g.eq_ignore_ascii_case("resourcegroups")
                        && !sub.is_empty()
                        && !rg.is_empty() =>
                {
                    let entry =
                        out.subscriptions.entry(sub.to_ascii_lowercase()).or_insert_with(|| Some(BTreeSet::new()));
                    if let Some(groups) = entry {
                        groups.insert(rg.to_ascii_lowercase());
                    }
                }
                _ => return Err(ScopeError(scope.clone())),
            }
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> bool {
        self.subscriptions.is_empty() && self.management_groups.is_empty()
    }

    /// The management groups (their ids, lower case).
    pub fn management_groups(&self) -> impl Iterator<Item = &str> {
        self.management_groups.iter().map(String::as_str)
    }

    /// The scopes (as IDs) that lie in subscription `sub` as named: the subscription, or the
    /// resource groups of it that are named; none when it is not named (it may still be under a
    /// management group).
    pub fn named_in(&self, sub: &str) -> Vec<String> {
        let sub = sub.to_ascii_lowercase();
        match self.subscriptions.get(&sub) {
            None => Vec::new(),
            Some(None) => vec![format!("/subscriptions/{sub}")],
            Some(Some(groups)) => groups.iter().map(|g| format!("/subscriptions/{sub}/resourceGroups/{g}")).collect(),
        }
    }

    /// The `subscriptions` of the request.
    pub fn subscriptions(&self) -> Vec<&str> {
        self.subscriptions.keys().map(String::as_str).collect()
    }

    /// The requests' scopes: at most `n` subscriptions each, then at most `n` management groups
    /// each (a request names one kind or the other).
    fn chunks(&self, n: usize) -> Vec<Scopes> {
        let subs: Vec<_> = self.subscriptions.iter().collect();
        let groups: Vec<_> = self.management_groups.iter().collect();
        let by_sub = subs.chunks(n.max(1)).map(|c| Scopes {
            subscriptions: c.iter().map(|(k, v)| ((*k).clone(), (*v).clone())).collect(),
            management_groups: BTreeSet::new(),
        });
        let by_group = groups.chunks(n.max(1)).map(|c| Scopes {
            subscriptions: BTreeMap::new(),
            management_groups: c.iter().map(|g| (*g).clone()).collect(),
        });
        by_sub.chain(by_group).collect()
    }

    /// The request body's scope: its `managementGroups`, else its `subscriptions`.
    fn request_scope(&self) -> (&'static str, Vec<&str>) {
        if self.management_groups.is_empty() {
            ("subscriptions", self.subscriptions())
        } else {
            ("managementGroups", self.management_groups.iter().map(String::as_str).collect())
        }
    }

    /// The scopes as IDs (lower case).
    pub fn ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for (sub, groups) in &self.subscriptions {
            match groups {
                None => ids.push(format!("/subscriptions/{sub}")),
                Some(gs) => ids.extend(gs.iter().map(|g| format!("/subscriptions/{sub}/resourceGroups/{g}"))),
            }
        }
        ids.extend(self.management_groups.iter().map(|g| format!("{MANAGEMENT_GROUP_PREFIX}{g}")));
        ids
    }

    /// The subscription and resource-group scopes (as IDs) none of `found` lies in. A management
    /// group is never among them: which subscriptions it holds only ARM can say, and ARM cannot
    /// list a management group's resources.
    fn empty_in(&self, found: &[(ResourceRef, TagMap)]) -> Vec<String> {
        let mut hit: BTreeSet<(String, Option<String>)> = BTreeSet::new();
        for (r, _) in found {
            let parts: Vec<String> = r.id.split('/').map(str::to_ascii_lowercase).collect();
            if let Some(sub) = parts.get(2) {
                hit.insert((sub.clone(), None));
                if let Some(rg) = parts.get(4) {
                    hit.insert((sub.clone(), Some(rg.clone())));
                }
            }
        }
        let mut empty = Vec::new();
        for (sub, groups) in &self.subscriptions {
            match groups {
                None if !hit.contains(&(sub.clone(), None)) => empty.push(format!("/subscriptions/{sub}")),
                None => {}
                Some(gs) => empty.extend(
                    gs.iter()
                        .filter(|g| !hit.contains(&(sub.clone(), Some((*g).clone()))))
                        .map(|g| format!("/subscriptions/{sub}/resourceGroups/{g}")),
                ),
            }
        }
        empty
    }

    /// The scopes as IDs, for errors and records.
    pub fn describe(&self) -> String {
        self.ids().join(", ")
    }
}

/// `s` as a KQL string literal.
fn kql(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn kql_list<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    items.into_iter().map(|s| kql(s)).collect::<Vec<_>>().join(", ")
}

/// The query for the resources under `scopes` (and, for a whole subscription or a management
/// group, its resource groups from `resourcecontainers`, as ARM's subscription listing has them)
/// that any of `ownership_keys` (any casing) marks `owned`, projecting `id` (which paging needs),
/// `type` and the original `tags`. Several keys: a cluster set's clusters in one query, split by
/// key afterwards. A management-group request's scope is the request's, so it needs no filter.
pub fn owned_query(scopes: &Scopes, ownership_keys: &[String]) -> String {
    let containers = "resourcecontainers | where type =~ 'microsoft.resources/subscriptions/resourcegroups'";
    let mut q = "resources".to_string();
    if !scopes.management_groups.is_empty() {
        q.push_str(&format!("\n| union ({containers})"));
    } else {
        let whole: Vec<&String> = scopes.subscriptions.iter().filter(|(_, g)| g.is_none()).map(|(s, _)| s).collect();
        let mut clauses = Vec::new();
        if !whole.is_empty() {
            clauses.push(format!("subscriptionId in~ ({})", kql_list(whole.iter().copied())));
        }
        for (sub, groups) in &scopes.subscriptions {
            if let Some(groups) = groups {
                clauses.push(format!("(subscriptionId =~ {} and resourceGroup in~ ({}))", kql(sub), kql_list(groups)));
            }
        }
        q.push_str(&format!("\n| where {}", clauses.join(" or ")));
        if !whole.is_empty() {
            q.push_str(&format!(
                "\n| union ({containers} and subscriptionId in~ ({}))",
                kql_list(whole.iter().copied())
            ));
        }
    }
    let owned: Vec<String> = ownership_keys
        .iter()
        .map(|k| format!("tostring(lowerTags[{}]) == {}", kql(&k.to_ascii_lowercase()), kql(OWNED)))
        .collect();
    q.push_str(&format!(
        "\n| extend lowerTags = parse_json(tolower(tostring(tags)))\n| where {}\n| project id, type, tags",
        owned.join(" or ")
    ));
    q
}

/// Why Resource Graph gave no listing.
#[derive(Debug)]
pub enum GraphError {
    /// Refused (a 4xx but 408/409/429, or an answer outside the contract): the ARM listing is used
    /// instead, and the sweep says why.
    Refused(CloudError),
    /// Throttled beyond the wait budget, 5xx, no answer: the listing fails, retryably.
    Failed(CloudError),
}

impl GraphError {
    fn of(e: CloudError) -> GraphError {
        match e.status {
            Some(408 | 409 | 429) => GraphError::Failed(e),
            Some(s) if (400..500).contains(&s) => GraphError::Refused(e),
            _ => GraphError::Failed(e),
        }
    }
}

/// What the last answer said of the caller's quota.
#[derive(Debug, Clone, Copy, Default)]
struct Quota {
    remaining: Option<u64>,
    resets_after: Option<Duration>,
}

impl Quota {
    fn of(resp: &Response) -> Quota {
        Quota {
            remaining: resp.header(QUOTA_REMAINING).and_then(|v| v.trim().parse().ok()),
            resets_after: resp.header(QUOTA_RESETS_AFTER).and_then(|v| parse_resets_after(&v)),
        }
    }
}

/// One page: the rows with their tags, and the token for the next.
struct Page {
    rows: Vec<(ResourceRef, TagMap)>,
    skip_token: Option<String>,
}

/// What Resource Graph listed: the owned resources with their tags, and the sweep scopes where it
/// showed none. Resource Graph leaves out without a word what the caller may not read, so an empty
/// scope may be one the identity has no role on: only ARM's listing can tell (403, naming the
/// missing role), at a call or two for a scope that is really empty. (A scope where it shows some
/// resources and hides others for want of `*/read` on their types is not told apart: the
/// deployment grants Reader at every enforcement scope.)
#[derive(Debug, Default)]
pub struct GraphListing {
    pub found: Vec<(ResourceRef, TagMap)>,
    pub unseen: Vec<String>,
}

fn parse_page(body: &str, target: &str) -> Result<Page, GraphError> {
    let refused = |code: &str, why: String| {
        GraphError::Refused(CloudError::azure(OP_QUERY, target, Some(200), code, &why, ErrorClass::Fatal))
    };
    let v: Value = serde_json::from_str(body).map_err(|e| {
        GraphError::Failed(CloudError::azure(
            OP_QUERY,
            target,
            Some(200),
            "BadGraphResponse",
            &e.to_string(),
            ErrorClass::Transient,
        ))
    })?;
    let Some(data) = v.get("data").and_then(Value::as_array) else {
        return Err(refused("BadGraphResponse", "the answer's data is not an object array".into()));
    };
    let skip_token = v.get("$skipToken").and_then(Value::as_str).filter(|t| !t.is_empty()).map(str::to_owned);
    let truncated = v.get("resultTruncated").and_then(Value::as_str) == Some("true");
    if truncated && skip_token.is_none() {
        let why = "Resource Graph truncated the result and gave no $skipToken to page on".to_string();
        return Err(refused("ResultTruncated", why));
    }
    let mut rows = Vec::with_capacity(data.len());
    for row in data {
        let Some(r) = row.get("id").and_then(Value::as_str).and_then(|id| ResourceRef::from_arm_id(id).ok()) else {
            tracing::debug!(row = %row, "a Resource Graph row without a usable id: skipped");
            continue;
        };
        let mut tags = TagMap::new();
        // `tags` may be `{}` or `null` (azure-sdk-for-python recording
        // test_resources_basic_query_object_array.yaml has both).
        for (k, val) in row.get("tags").and_then(Value::as_object).into_iter().flatten() {
            let val = val.as_str().map(str::to_owned).unwrap_or_else(|| val.to_string());
            tags.insert(k.clone(), val);
        }
        rows.push((r, tags));
    }
    Ok(Page { rows, skip_token })
}

impl ArmClient {
    /// Every resource (and, for a whole subscription or a management group, resource group) under
    /// `scopes` that carries `<key>=owned` for one of `ownership_keys`, with its tags as Resource
    /// Graph last indexed them. `pages` is told
    /// how many were found as pages arrive.
    pub async fn graph_owned(
        &self,
        scopes: &Scopes,
        ownership_keys: &[String],
        pages: &(dyn Fn(usize) + Sync),
    ) -> Result<GraphListing, GraphError> {
        let mut out = GraphListing::default();
        let mut quota = Quota::default();
        for chunk in scopes.chunks(SUBSCRIPTIONS_PER_QUERY) {
            let target = format!("Resource Graph over {}", chunk.describe());
            let query = owned_query(&chunk, ownership_keys);
            let (scope_field, scope_ids) = chunk.request_scope();
            let mut skip_token: Option<String> = None;
            loop {
                wait_for_quota(quota, &target).await?;
                let mut options = json!({"$top": PAGE_ROWS, "resultFormat": "objectArray"});
                if let Some(t) = &skip_token {
                    options["$skipToken"] = json!(t);
                }
                let body = json!({scope_field: scope_ids, "query": query, "options": options});
                let url = self.url_at(QUERY_PATH, &[], API_VERSION);
                let resp = self.send(OP_QUERY, &target, Method::POST, url, Some(body)).await.map_err(GraphError::of)?;
                quota = Quota::of(&resp);
                if resp.status != StatusCode::OK {
                    return Err(GraphError::of(resp.error(OP_QUERY, &target)));
                }
                let page = parse_page(&resp.body, &target)?;
                out.found.extend(page.rows);
                pages(out.found.len());
                match page.skip_token {
                    Some(t) if skip_token.as_ref() == Some(&t) => {
                        let why = "Resource Graph answered the same $skipToken twice";
                        let e = CloudError::azure(
                            OP_QUERY,
                            &target,
                            Some(200),
                            "RepeatedSkipToken",
                            why,
                            ErrorClass::Transient,
                        );
                        return Err(GraphError::Failed(e));
                    }
                    Some(t) => skip_token = Some(t),
                    None => break,
                }
            }
        }
        out.unseen = scopes.empty_in(&out.found);
        Ok(out)
    }
}

/// No query while the quota is spent: its reset is waited for within [`MAX_RETRY_AFTER`], else the
/// listing fails, throttled, for the next sweep.
async fn wait_for_quota(quota: Quota, target: &str) -> Result<(), GraphError> {
    if quota.remaining != Some(0) {
        return Ok(());
    }
    let wait = quota.resets_after.unwrap_or(QUOTA_WINDOW);
    if wait > MAX_RETRY_AFTER {
        let why = format!(
            "the Resource Graph quota is spent and resets after {wait:?}, beyond the {MAX_RETRY_AFTER:?} wait budget; the next sweep queries again"
        );
        let e = CloudError::azure(OP_QUERY, target, Some(429), "QuotaExhausted", &why, ErrorClass::Throttled);
        return Err(GraphError::Failed(e));
    }
    tracing::info!(wait_ms = wait.as_millis() as u64, "Resource Graph quota spent: waiting for its reset");
    tokio::time::sleep(wait).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(s: &[&str]) -> Scopes {
        Scopes::parse(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("scopes")
    }

    #[test]
    fn scopes_group_by_subscription_and_a_subscription_swallows_its_groups() {
        let s = scopes(&[
            "/subscriptions/A/resourceGroups/RG-1",
            "/subscriptions/b",
            "/subscriptions/a/resourcegroups/rg-2",
        ]);
        assert_eq!(s.subscriptions(), ["a", "b"]);
        assert_eq!(
            s.describe(),
            "/subscriptions/a/resourceGroups/rg-1, /subscriptions/a/resourceGroups/rg-2, /subscriptions/b"
        );
        let s = scopes(&["/subscriptions/a/resourceGroups/rg-1", "/subscriptions/a"]);
        assert_eq!(s.describe(), "/subscriptions/a");
        assert!(Scopes::parse(&["/subscriptions/a/resourceGroups/rg/providers/x".into()]).is_err());
        assert_eq!(scopes(&["/subscriptions/1", "/subscriptions/2", "/subscriptions/3"]).chunks(2).len(), 2);
    }

    #[test]
    fn the_query_filters_scopes_and_the_ownership_key_ignoring_case() {
        let q = owned_query(
            &scopes(&["/subscriptions/s1", "/subscriptions/s2/resourceGroups/My-RG"]),
            &["kubernetes.io_cluster.Infra-1".into()],
        );
        assert_eq!(
            q,
            "resources\n\
             | where subscriptionId in~ ('s1') or (subscriptionId =~ 's2' and resourceGroup in~ ('my-rg'))\n\
             | union (resourcecontainers | where type =~ 'microsoft.resources/subscriptions/resourcegroups' and subscriptionId in~ ('s1'))\n\
             | extend lowerTags = parse_json(tolower(tostring(tags)))\n\
             | where tostring(lowerTags['kubernetes.io_cluster.infra-1']) == 'owned'\n\
             | project id, type, tags"
        );
        let only_groups = owned_query(&scopes(&["/subscriptions/s/resourceGroups/a'b"]), &["k".into()]);
        assert!(!only_groups.contains("resourcecontainers"), "a resource-group scope lists no resource groups");
        assert!(only_groups.contains(r"('a\'b')"), "quotes are escaped: {only_groups}");

        // A management group: the request names it, the query lists every resource group too, and
        // a cluster set's keys share one query.
        let mg = scopes(&["/providers/Microsoft.Management/managementGroups/Fleet-MG"]);
        assert_eq!(mg.request_scope(), ("managementGroups", vec!["fleet-mg"]));
        assert_eq!(
            owned_query(&mg, &["k.A".into(), "k.b".into()]),
            "resources\n\
             | union (resourcecontainers | where type =~ 'microsoft.resources/subscriptions/resourcegroups')\n\
             | extend lowerTags = parse_json(tolower(tostring(tags)))\n\
             | where tostring(lowerTags['k.a']) == 'owned' or tostring(lowerTags['k.b']) == 'owned'\n\
             | project id, type, tags"
        );
    }

    #[test]
    fn management_groups_are_scopes_of_their_own() {
        let s = scopes(&[
            "/subscriptions/a",
            "/providers/microsoft.management/managementgroups/mg-1/",
            "/providers/Microsoft.Management/managementGroups/mg-2",
        ]);
        assert_eq!(
            s.describe(),
            "/subscriptions/a, /providers/Microsoft.Management/managementGroups/mg-1, /providers/Microsoft.Management/managementGroups/mg-2"
        );
        let chunks = s.chunks(100);
        assert_eq!(chunks.len(), 2, "subscriptions and management groups are never in one request");
        assert_eq!(chunks[1].request_scope(), ("managementGroups", vec!["mg-1", "mg-2"]));
        assert_eq!(s.empty_in(&[]), ["/subscriptions/a"], "a management group is never re-listed through ARM");
        assert_eq!(management_group_of("/providers/Microsoft.Management/managementGroups/x/subscriptions/y"), None);
        assert!(Scopes::parse(&["/providers/Microsoft.Management/managementGroups/".into()]).is_err());
    }

    #[test]
    fn quota_resets_are_read_as_timespans() {
        assert_eq!(parse_resets_after("00:00:05"), Some(Duration::from_secs(5)));
        assert_eq!(parse_resets_after("00:01:02.5000000"), Some(Duration::from_millis(62_500)));
        assert_eq!(parse_resets_after("5"), None);
        assert_eq!(parse_resets_after("a:b:c"), None);
    }

    #[test]
    fn pages_keep_tags_and_refuse_what_is_outside_the_contract() {
        let body = r#"{"totalRecords":2,"count":2,"resultTruncated":"false","facets":[],"$skipToken":"t1","data":[
            {"id":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d","type":"microsoft.compute/disks","tags":{"A":"1"}},
            {"id":"/subscriptions/s/resourceGroups/rg","type":"microsoft.resources/subscriptions/resourcegroups","tags":null}]}"#;
        let Ok(page) = parse_page(body, "t") else { panic!("a page") };
        assert_eq!(page.skip_token.as_deref(), Some("t1"));
        assert_eq!(page.rows.len(), 2);
        let s = scopes(&[
            "/subscriptions/S",
            "/subscriptions/t",
            "/subscriptions/u/resourceGroups/rg",
            "/subscriptions/s/resourceGroups/X",
        ]);
        assert_eq!(s.empty_in(&page.rows), ["/subscriptions/t", "/subscriptions/u/resourceGroups/rg"]);
        assert_eq!(page.rows[0].1.get("A").map(String::as_str), Some("1"));
        assert!(page.rows[1].1.is_empty());
        let truncated = r#"{"totalRecords":2,"count":1,"resultTruncated":"true","data":[]}"#;
        assert!(matches!(parse_page(truncated, "t"), Err(GraphError::Refused(_))));
        let table = r#"{"totalRecords":0,"count":0,"resultTruncated":"false","data":{"columns":[],"rows":[]}}"#;
        assert!(matches!(parse_page(table, "t"), Err(GraphError::Refused(_))));
        assert!(matches!(parse_page("<html>", "t"), Err(GraphError::Failed(_))));
    }

    #[test]
    fn refusals_fall_back_and_the_rest_fail() {
        let e = |s: Option<u16>| CloudError::azure(OP_QUERY, "t", s, "X", "m", ErrorClass::Fatal);
        for s in [400, 401, 403, 404] {
            assert!(matches!(GraphError::of(e(Some(s))), GraphError::Refused(_)), "{s}");
        }
        for s in [Some(408), Some(409), Some(429), Some(500), Some(503), None] {
            assert!(matches!(GraphError::of(e(s)), GraphError::Failed(_)), "{s:?}");
        }
    }
}
