//! Which policy a resource answers to, and the policies of an invocation: loaded with their
//! rejections counted, and each swept cluster's status report written beside its policy.

use std::sync::Arc;

use super::{Adapter, Mode};
use crate::policy_store::{PolicySource, PolicyStore};
use tagwarden_core::cloud::Cloud;
use tagwarden_core::plan;
use tagwarden_core::policy::cache::LoadedPolicy;
use tagwarden_core::policy::clusters::{Owner, Policies};
use tagwarden_core::reason::StopKind;
use tagwarden_core::report::{Failure, Outcome, Record};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::TagMap;

/// Event-carried tags (`Tag Change on Resource`) as a stand-in for a read of `r`, if they may be:
/// they are a hint, never proof of ownership, since whoever can put an event on the bus can claim
/// anything. They spare the read only when, read the way `r`'s service compares keys (IAM and
/// Azure ignore case: `Kubernetes.io/cluster/<id>` is the ownership tag on a role), they say no
/// enforced cluster owns `r`, and the plan made from them writes nothing. A claim of ownership or
/// a conflict is re-read, so a hint never makes writable what a fresh read would not.
pub(super) fn hint(policies: &Policies, cloud: Cloud, r: &ResourceRef, tags: Option<&TagMap>) -> Option<TagMap> {
    let tags = tags?;
    let unclaimed = matches!(policies.owner(cloud, &r.kind, tags), Owner::NotOwned | Owner::Unpublished(_));
    let writes =
        answer_to(policies, cloud, r, tags).is_ok_and(|p| plan::plan(&p.policy, cloud, &p.infra_id, r, tags).writes());
    (unclaimed && !writes).then(|| tags.clone())
}

/// The policy a resource with `tags` is planned against, or the record of why it is left alone:
/// with one policy, everything is planned (the plan says what is not owned); in a set, a resource
/// owned by no enforced cluster is not owned, one owned by a cluster with no valid policy here is
/// ignored, and one owned by two clusters is a permanent failure, never written.
pub fn answer_to<'p>(
    policies: &'p Policies,
    cloud: Cloud,
    r: &ResourceRef,
    tags: &TagMap,
) -> Result<&'p Arc<LoadedPolicy>, Box<Record>> {
    match (policies.owner(cloud, &r.kind, tags), policies.single()) {
        (Owner::Cluster(p), _) | (Owner::NotOwned, Some(p)) => Ok(p),
        (Owner::NotOwned, None) => Err(Box::new(Record::not_owned(cloud, r, None, None))),
        (Owner::Unpublished(id), _) => {
            let why = format!("owned by cluster {id}, which has published no valid policy here: ignored");
            Err(Box::new(Record::not_owned(cloud, r, Some(id), Some(why))))
        }
        (Owner::Conflict(ids), _) => {
            let why = format!(
                "owned by clusters {}: a resource has one owner, so no cluster's policy is applied; remove the ownership tag that is wrong",
                ids.join(" and ")
            );
            let mut record =
                Record::failed(cloud, r, &policies.version(), String::new()).failing(Failure::Permanent, why);
            record.infra_id = ids.iter().find(|id| policies.get(id).is_some()).cloned();
            Err(Box::new(record))
        }
    }
}

/// The policies for an invocation, into `out`: each newer version that was rejected is counted,
/// listed, and reported beside its cluster's policy; with no valid version anywhere, `out.error`
/// says why and nothing is written. The adapter is told what was loaded
/// ([`Adapter::policies_loaded`]).
pub async fn load_policies<A: Adapter>(
    adapter: &A,
    store: &PolicyStore<A::Source>,
    out: &mut Outcome,
    force: bool,
) -> Option<Policies> {
    let loaded = store.load(force).await;
    for r in &loaded.rejected {
        out.metrics.policy_rejected += 1;
        crate::status_store::report_rejection(store, r).await;
        out.rejected.push(tagwarden_core::report::RejectedPolicy {
            cluster: r.cluster.clone(),
            in_force: r.in_force.clone(),
            errors: r.errors.clone(),
        });
    }
    match loaded.policies {
        Ok(p) => {
            out.infra_id = p.single().map(|p| p.infra_id.clone());
            adapter.policies_loaded(&p);
            Some(p)
        }
        Err(e) => {
            tracing::error!(error = %e, "fail closed");
            out.error = Some(StopKind::NoPolicy(e.to_string()).into());
            None
        }
    }
}

/// One status report per swept cluster, beside its policy, with its own records and its audit
/// section (the deployment in `mode`).
pub async fn report_sweeps<S: PolicySource>(
    store: &PolicyStore<S>,
    policies: &Policies,
    swept: &[Arc<LoadedPolicy>],
    records: &[Record],
    part: Option<&str>,
    mode: Mode,
) {
    for policy in swept {
        if policies.is_set() {
            // A listing made for every cluster (IAM, Route 53) that failed is each one's failure.
            let own: Vec<Record> = records
                .iter()
                .filter(|r| match r.infra_id.as_deref() {
                    Some(id) => id == policy.infra_id,
                    None => r.is_listing(),
                })
                .cloned()
                .collect();
            crate::status_store::report_sweep(store, policy, &own, part, mode).await;
        } else {
            crate::status_store::report_sweep(store, policy, records, part, mode).await;
        }
    }
}
