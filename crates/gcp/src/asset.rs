//! The sweep's listing: Cloud Asset Inventory `searchAllResources` at each scope, for the
//! resources a cluster's ownership labels mark, labels included.
//!
//! - Scope: `projects/{PROJECT_ID}`, `projects/{PROJECT_NUMBER}`, `folders/{FOLDER_NUMBER}` or
//!   `organizations/{ORGANIZATION_NUMBER}` (`SearchAllResourcesRequest.scope`).
//! - Query: `labels.<key>=<value>` selects resources whose label `<key>` is exactly the value
//!   (search query syntax: `=` is an exact match, `:` a match of words); the cluster's keys are
//!   joined with `OR`. Each result's labels are checked again here for exactly `owned`, so a looser
//!   match by the service costs a page, never a write.
//! - Pages of at most 500 (`page_size`: "The page size must not exceed 500"), followed by
//!   `next_page_token`: one call per 500 owned resources, whatever the number of resource types.
//! - Tags: while a policy names a Resource Manager tag, each result's `effectiveTags` (returned
//!   by default: "If not set, the following fields are returned: … labels, tags, effectiveTags")
//!   join its labels as `<parentID>/<key>: <value>` entries, so a resource whose tags are in
//!   line is not read again; `tagKey` and `tagValue` are namespaced names (`Tag`).
//! - Freshness: Cloud Asset Inventory's search index lags the resources ("updated within
//!   minutes"), so the labels it lists only decide which resources look drifted; each one is read
//!   again before its write (`Batching::Reread`).

use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::{Cloud, ClusterRef, OWNED};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::CloudError;
use tagwarden_engine::enforce::sweep::{ClusterListing, Listed};

use crate::clients::Clients;
use crate::error::from_gax;

pub const PAGE_SIZE: i32 = 500;
const OP_SEARCH: &str = "asset:SearchAllResources";

/// The query for every resource one of `keys` marks as owned.
pub fn owned_query(keys: &[String]) -> String {
    keys.iter().map(|k| format!("labels.{k}={OWNED}")).collect::<Vec<_>>().join(" OR ")
}

impl Clients {
    /// Every resource `cluster` owns in `scopes`, each once, with its labels (and its tags in
    /// effect, with `tags`).
    pub async fn search_owned(
        &self,
        scopes: &[String],
        cluster: ClusterRef<'_>,
        tags: bool,
        calls: &CallCounter,
        pages: &(dyn Fn(usize) + Sync),
    ) -> ClusterListing {
        let keys = cluster.ownership_keys(Cloud::Gcp);
        let query = owned_query(&keys);
        let mut found: Vec<Listed> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut failed: Vec<CloudError> = Vec::new();
        for scope in scopes {
            let mut token = String::new();
            loop {
                calls.record(OP_SEARCH);
                let page = self
                    .asset
                    .search_all_resources()
                    .set_scope(scope)
                    .set_query(&query)
                    .set_page_size(PAGE_SIZE)
                    .set_page_token(&token)
                    .send()
                    .await;
                let page = match page {
                    Ok(p) => p,
                    Err(e) => {
                        failed.push(from_gax(OP_SEARCH, scope, &e));
                        break;
                    }
                };
                for r in page.results {
                    let mut labels: TagMap = r.labels.into_iter().collect();
                    let owned = keys.iter().any(|k| labels.get(k).is_some_and(|v| v == OWNED));
                    if !owned || !seen.insert(r.name.clone()) {
                        continue;
                    }
                    if tags {
                        // The resource's own bindings override its ancestors' of the same key.
                        let (own, inherited): (Vec<_>, Vec<_>) = r
                            .effective_tags
                            .into_iter()
                            .partition(|d| d.attached_resource.as_deref() == Some(r.name.as_str()));
                        for t in inherited.into_iter().chain(own).flat_map(|d| d.effective_tags) {
                            if let (Some(key), Some(value)) = (t.tag_key, t.tag_value) {
                                let short = value.rsplit('/').next().unwrap_or_default().to_string();
                                labels.insert(key, short);
                            }
                        }
                    }
                    found.push((ResourceRef { id: r.name, kind: r.asset_type, arn: None }, Some(labels)));
                }
                pages(found.len());
                if page.next_page_token.is_empty() {
                    break;
                }
                token = page.next_page_token;
            }
        }
        ClusterListing::of(found, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tagwarden_core::cloud::ClusterKind;

    #[test]
    fn one_query_names_every_ownership_label_of_the_cluster() {
        let keys = ClusterRef { kind: ClusterKind::OpenShift, infra_id: "c-1" }.ownership_keys(Cloud::Gcp);
        assert_eq!(owned_query(&keys), "labels.kubernetes-io-cluster-c-1=owned OR labels.capg-cluster-c-1=owned");
    }
}
