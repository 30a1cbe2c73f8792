//! The Azure side of the engine (`tagwarden_engine::enforce`): [`ArmTagger`], the ARM client over the scopes a
//! sweep lists, as its [`Adapter`]. A resource's tags are read through the Tags API and written
//! with at most one Merge; every write is one resource's, so nothing is grouped. The loop guards
//! (the function's own identity, `TAGWARDEN_SELF_CLIENT_ID` / `TAGWARDEN_SELF_PRINCIPAL_ID`, and
//! idempotent planning) are the engine's, the same as on AWS.
//!
//! A sweep lists through Azure Resource Graph (`super::resource_graph`): one query a thousand owned
//! resources, tags included, so only the resources that appear drifted are read (once, right
//! before their write: Resource Graph lags ARM). Where Resource Graph refuses, ARM's tag-filtered
//! listing is used as before (no tags: every resource is read), and the sweep says why.
//!
//! Deliberately not here: the reconcile itself (`tagwarden_engine::enforce`), the HTTP calls and their
//! retries (`super::arm`), the protocol of the Functions host (`super::function`) and the decision
//! itself (`tagwarden_core::plan`).

use std::collections::BTreeSet;
use std::convert::Infallible;

use super::arm::ArmClient;
use super::blob_store::BlobSource;
use super::resource_graph::{management_group_of, GraphError, GraphListing, Scopes};
use tagwarden_core::cloud::{Cloud, ClusterRef, OWNED};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::enforce::sweep::{Batching, ClusterListing};
use tagwarden_engine::enforce::{Adapter, Read};
use tagwarden_engine::rate_limit::{Keyed, RateLimit};

/// The ARM client, and the subscription, resource-group or management-group IDs a sweep lists.
pub struct ArmTagger {
    pub arm: ArmClient,
    pub sweep_scopes: Vec<String>,
    /// List through Resource Graph first (the default); `false`: ARM's listing only.
    pub resource_graph: bool,
    pub writes: WritePacing,
}

/// ARM meters writes per subscription (and principal and region) in a token bucket of 200 refilled
/// at 10 a second ("Understand how Azure Resource Manager throttles requests", its token-bucket
/// table), which the subscription owner's deployments draw on too. tagwarden's Merges in each
/// subscription are paced by a bucket of their own at half that, 100 refilled at 5 a second, so
/// enforcing one subscription never takes more than half of its budget and never waits on another
/// subscription's. (Each function instance holds its own buckets, for its sweeps and events alike;
/// instances running at once in one subscription share ARM's bucket, and ARM's 429 and
/// `Retry-After` are still honoured.)
/// Resources reconciled, and calls in flight, at once in an invocation (`TAGWARDEN_CONCURRENCY`).
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The subscription ID of an ARM resource ID (`/subscriptions/{id}/…`), as written.
fn subscription_of(resource_id: &str) -> &str {
    resource_id.split('/').nth(2).unwrap_or_default()
}

#[derive(Debug)]
pub struct WritePacing(Keyed);

impl WritePacing {
    /// Half of ARM's subscription write bucket: 5 a second, a burst of 100.
    pub const HALF_OF_ARM: (f64, f64) = (5.0, 100.0);

    pub fn new(rate_and_burst: (f64, f64)) -> Self {
        WritePacing(Keyed::new(rate_and_burst))
    }

    /// The bucket of the subscription `resource_id` is in.
    fn of(&self, resource_id: &str) -> RateLimit {
        self.0.of(&subscription_of(resource_id).to_ascii_lowercase())
    }
}

/// A sweep part (a queue message's subscription) this deployment does not sweep, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sweep part {part:?}: {why}")]
pub struct PartRefused {
    pub part: String,
    pub why: String,
}

impl ArmTagger {
    /// Sweeping `sweep_scopes` through Resource Graph, ARM's listing where it is refused, and
    /// writing at most half of each subscription's ARM write budget ([`WritePacing`]).
    pub fn new(arm: ArmClient, sweep_scopes: Vec<String>) -> Self {
        ArmTagger { arm, sweep_scopes, resource_graph: true, writes: WritePacing::new(WritePacing::HALF_OF_ARM) }
    }

    /// The parts a sweep of the deployment runs in: one per subscription (`/subscriptions/<id>`,
    /// lower case, in order), those the scopes name and every one under each management group
    /// (`Management Groups - Get Descendants`, one call or a few per group). Each part is swept on
    /// its own (`super::function`: one queue message each), so one subscription's sweep never
    /// waits for, or spends the budget of, another's.
    pub async fn parts(&self) -> Result<Vec<String>, CloudError> {
        let scopes = Scopes::parse(&self.sweep_scopes).map_err(|why| {
            CloudError::azure(
                "sweep scopes",
                "TAGWARDEN_SWEEP_SCOPES",
                None,
                "InvalidScope",
                &why.to_string(),
                ErrorClass::Fatal,
            )
        })?;
        let mut parts: BTreeSet<String> =
            scopes.subscriptions().iter().map(|s| format!("/subscriptions/{s}")).collect();
        for group in scopes.management_groups() {
            parts.extend(self.arm.subscriptions_under(group).await?.iter().map(|s| s.to_ascii_lowercase()));
        }
        Ok(parts.into_iter().collect())
    }

    /// This tagger over one part (`/subscriptions/<id>`) of its scopes: the subscription, or the
    /// resource groups of it the scopes name, or the subscription when it is under one of the
    /// scopes' management groups. A part outside the scopes is refused, naming them: a queue
    /// message can name any subscription, and a deployment sweeps only its own. Its writes are
    /// paced on buckets of its own (one subscription's, as before).
    pub async fn narrowed(&self, part: &str) -> Result<ArmTagger, PartRefused> {
        let refused = |why: String| PartRefused { part: part.to_string(), why };
        let sub = match part.trim_matches('/').split('/').collect::<Vec<_>>().as_slice() {
            [s, sub] if s.eq_ignore_ascii_case("subscriptions") && !sub.is_empty() => sub.to_ascii_lowercase(),
            _ => return Err(refused("not a subscription ID (/subscriptions/<id>)".into())),
        };
        let scopes = Scopes::parse(&self.sweep_scopes).map_err(|e| refused(e.to_string()))?;
        let mut within = scopes.named_in(&sub);
        if within.is_empty() {
            for group in scopes.management_groups() {
                let under = self.arm.subscriptions_under(group).await.map_err(|e| refused(e.to_string()))?;
                if under.iter().any(|s| s.eq_ignore_ascii_case(&format!("/subscriptions/{sub}"))) {
                    within.push(format!("/subscriptions/{sub}"));
                    break;
                }
            }
        }
        if within.is_empty() {
            return Err(refused(format!("not within the deployment's sweep scopes {:?}", self.sweep_scopes)));
        }
        Ok(ArmTagger {
            arm: self.arm.clone(),
            sweep_scopes: within,
            resource_graph: self.resource_graph,
            writes: WritePacing::new((self.writes.0.rate, self.writes.0.burst)),
        })
    }

    /// Resource Graph's listing of every cluster in `infra_ids` at once, split by ownership key;
    /// and each scope where it showed nothing, listed through ARM for each cluster (Resource Graph
    /// leaves out without a word what the caller may not read): ARM names a scope it may not read
    /// (403: grant Reader) or confirms it empty in a call or two; a scope where ARM finds what
    /// Resource Graph did not show is noted as a fallback.
    async fn split_with_unseen(
        &self,
        listing: GraphListing,
        clusters: &[ClusterRef<'_>],
        pages: &(dyn Fn(usize) + Sync),
    ) -> Vec<ClusterListing> {
        let keys: Vec<Vec<String>> = clusters.iter().map(|c| c.ownership_keys(Cloud::Azure)).collect();
        let mut out: Vec<ClusterListing> = keys.iter().map(|_| ClusterListing::default()).collect();
        for (r, tags) in listing.found {
            // A resource two clusters claim is listed for both: the engine reports the conflict.
            let carries =
                |k: &String| tags.iter().any(|(t, v)| t.eq_ignore_ascii_case(k) && v.eq_ignore_ascii_case(OWNED));
            for (i, _) in keys.iter().enumerate().filter(|(_, ks)| ks.iter().any(carries)) {
                out[i].found.push((r.clone(), Some(tags.clone())));
            }
        }
        let mut found: usize = out.iter().map(|o| o.found.len()).sum();
        for scope in listing.unseen {
            for (i, cluster_keys) in keys.iter().enumerate() {
                let arm =
                    self.arm_listing_keys(std::slice::from_ref(&scope), cluster_keys, &|n| pages(found + n)).await;
                let arm_found = arm.found;
                out[i].failed.extend(arm.failed);
                if !arm_found.is_empty() {
                    out[i].fallbacks.push(format!(
                        "Resource Graph showed none of cluster {}'s {} owned resources in {scope} (it leaves out what the identity may not read: grant Reader there); they were listed through ARM's Resources - List, which costs a read per owned resource",
                        clusters[i].infra_id,
                        arm_found.len()
                    ));
                }
                found += arm_found.len();
                out[i].found.extend(arm_found);
            }
        }
        out
    }

    /// [`Self::arm_listing`] for each of a cluster's ownership keys, each resource kept once (a
    /// Cluster API resource may carry both of its cluster's keys).
    async fn arm_listing_keys(
        &self,
        scopes: &[String],
        keys: &[String],
        pages: &(dyn Fn(usize) + Sync),
    ) -> ClusterListing {
        let mut out = ClusterListing::default();
        let mut seen = BTreeSet::new();
        for key in keys {
            let before = out.found.len();
            let listed = self.arm_listing(scopes, key, &|n| pages(before + n)).await;
            out.found.extend(listed.found.into_iter().filter(|(r, _)| seen.insert(r.id.to_ascii_lowercase())));
            out.failed.extend(listed.failed);
        }
        out
    }

    /// ARM's tag-filtered listing of `scopes` (a management group's: each subscription under it),
    /// which carries no tags: each resource is read before it is planned. A scope that cannot be
    /// listed is named; the others are still swept.
    async fn arm_listing(&self, scopes: &[String], key: &str, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        let (mut found, mut failed) = (Vec::new(), Vec::new());
        for scope in scopes {
            // ARM lists no resources at a management group: each subscription under it instead.
            let subscriptions = match management_group_of(scope) {
                None => vec![scope.clone()],
                Some(group) => match self.arm.subscriptions_under(group).await {
                    Ok(subs) => subs,
                    Err(e) => {
                        failed.push(e);
                        continue;
                    }
                },
            };
            for sub in &subscriptions {
                match self.arm.list_owned(sub, key).await {
                    Ok(listed) => found.extend(listed.into_iter().map(|r| (r, None))),
                    Err(e) => failed.push(e),
                }
                pages(found.len());
            }
        }
        ClusterListing::of(found, failed)
    }
}

impl Adapter for ArmTagger {
    type Source = BlobSource;
    type Group = Infallible;
    const CONCURRENCY: usize = DEFAULT_CONCURRENCY;

    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn cannot_sweep(&self) -> Option<&'static str> {
        self.sweep_scopes.is_empty().then_some(
            "no sweep scope: set TAGWARDEN_SWEEP_SCOPES (or TAGWARDEN_METRICS_RESOURCE_ID, whose subscription is the default)",
        )
    }

    async fn read(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.arm.get_tags(&r.id).await.map(|tags| Read { tags, arn: None })
    }

    async fn read_listed(&self, r: &ResourceRef) -> Result<Read, CloudError> {
        self.arm.get_tags_listed(&r.id).await.map(|tags| Read { tags, arn: None })
    }

    /// One Merge: ARM's answer (or, after a 202, its operation's end) is the record of the
    /// write, with no read-back (reads can be stale). ARM's own checks end in the record: the limit
    /// (a concurrent writer got there first), a type that refuses the PATCH, a refused tag, a lock,
    /// or a failure worth another delivery.
    async fn write(&self, r: &ResourceRef, set: &TagMap, _current: &TagMap) -> Result<(), CloudError> {
        self.writes.of(&r.id).acquire().await;
        self.arm.merge_tags(&r.id, set).await
    }

    async fn list_owned(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        let mut all = self.list_owned_all(&[cluster], pages).await;
        all.pop().map(|listing| ClusterListing::of(listing.found, listing.failed)).unwrap_or_default()
    }

    async fn list_owned_noting(&self, cluster: ClusterRef<'_>, pages: &(dyn Fn(usize) + Sync)) -> ClusterListing {
        self.list_owned_all(&[cluster], pages).await.pop().unwrap_or_default()
    }

    /// Resource Graph's listing of every swept cluster in one query (`ceil(N / 1000)` pages for N
    /// owned resources, whatever the number of clusters), tags included; ARM's, cluster by cluster,
    /// where Resource Graph refuses (noted, for the sweep to report). Resource Graph throttled
    /// beyond the wait budget, failing or unreachable fails the listing, retryably, instead: ARM's
    /// listing would spend a read per owned resource of the subscription's ARM budget, which its
    /// owner's deployments share (`super::resource_graph`).
    async fn list_owned_all(&self, clusters: &[ClusterRef<'_>], pages: &(dyn Fn(usize) + Sync)) -> Vec<ClusterListing> {
        let refused = if !self.resource_graph {
            None
        } else {
            let keys: Vec<String> = clusters.iter().flat_map(|c| c.ownership_keys(Cloud::Azure)).collect();
            match Scopes::parse(&self.sweep_scopes) {
                Ok(scopes) => match self.arm.graph_owned(&scopes, &keys, pages).await {
                    Ok(listing) => return self.split_with_unseen(listing, clusters, pages).await,
                    Err(GraphError::Failed(e)) => {
                        return clusters.iter().map(|_| ClusterListing::of(Vec::new(), vec![e.clone()])).collect()
                    }
                    Err(GraphError::Refused(e)) => Some(e.to_string()),
                },
                Err(why) => Some(why.to_string()),
            }
        };
        let mut out = Vec::with_capacity(clusters.len());
        for cluster in clusters {
            let id = cluster.infra_id;
            let notes = refused.iter().map(|why| format!(
                "Resource Graph refused the owned listing of cluster {id} ({why}); listed through ARM's Resources - List instead, which costs a read per owned resource"
            ));
            let keys = cluster.ownership_keys(Cloud::Azure);
            let listing = self.arm_listing_keys(&self.sweep_scopes, &keys, pages).await;
            out.push(ClusterListing { fallbacks: notes.collect(), ..listing });
        }
        out
    }

    /// Its subscription: Merges are paced per subscription ([`WritePacing`]).
    fn pacing_key<'r>(&self, r: &'r ResourceRef) -> &'r str {
        subscription_of(&r.id)
    }

    /// Every write is re-read and re-planned right before it is sent: a sweep's listed tags are
    /// Resource Graph's, which lag ARM's, so a resource that appears drifted is read through the
    /// Tags API first (its ownership tag may have been removed since; then nothing is written).
    /// The resources that appear in line cost no read: a stale view of them can only defer a
    /// correction to the next event or sweep, since a Merge never removes a tag. (Outside a sweep
    /// nothing reads this: events carry no tag sets that replace.)
    fn batching(&self, _r: &ResourceRef) -> Batching<Infallible> {
        Batching::Reread
    }
}
