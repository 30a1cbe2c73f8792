//! How work arrives, for both clouds: what a delivered payload asks a function to do. Pure: each
//! cloud's function reads its own payload shapes into a [`Trigger`] (`aws::function`,
//! `azure::function`); what stays with each cloud is only its host protocol (SQS batches and their
//! partial failures; the Functions host's invocations and its sweep queue).

use crate::policy::clusters::cluster_of;
use crate::policy::STATUS_REPORT_NAME;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Events naming resources, as delivered (one event, or an array of them): reconcile them.
    Events(Vec<u8>),
    /// The scheduled sweep.
    Sweep,
    /// Objects were written where the policy is (S3 keys, SSM parameter names, blob names):
    /// re-read the policy now.
    PolicyChanged(Vec<String>),
    /// Only the function's own status report was written: nothing to do.
    OwnStatusReport,
}

impl Trigger {
    /// A notification that `objects` were written where the policy is: a policy change, unless
    /// every one of them is the status report the function itself writes beside the policy.
    pub fn written(objects: Vec<String>) -> Trigger {
        let own = |o: &String| o.rsplit('/').next() == Some(STATUS_REPORT_NAME);
        if !objects.is_empty() && objects.iter().all(own) {
            Trigger::OwnStatusReport
        } else {
            Trigger::PolicyChanged(objects)
        }
    }

    /// For a cluster set under `set_prefix`, the clusters whose policy a change names: only those
    /// are swept. `None` (sweep every cluster) for a single policy, or when the change names
    /// something outside every cluster (or nothing).
    pub fn changed_clusters(&self, set_prefix: Option<&str>) -> Option<Vec<String>> {
        let (Trigger::PolicyChanged(objects), Some(prefix)) = (self, set_prefix) else { return None };
        let clusters: Option<Vec<String>> = objects.iter().map(|o| cluster_of(prefix, o)).collect();
        clusters.filter(|c| !c.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_beside_the_policy_is_a_change_unless_it_is_our_report() {
        let written = |names: &[&str]| Trigger::written(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(written(&["cluster/tagwarden-status.json"]), Trigger::OwnStatusReport);
        assert!(
            matches!(written(&["p/10.yaml", "p/tagwarden-status.json"]), Trigger::PolicyChanged(o) if o.len() == 2)
        );
        assert_eq!(written(&[]), Trigger::PolicyChanged(Vec::new()));

        let change = written(&["clusters/c-3/10-cluster.yaml"]);
        assert_eq!(change.changed_clusters(Some("clusters/")), Some(vec!["c-3".to_string()]));
        assert_eq!(change.changed_clusters(None), None, "a single policy sweeps everything");
        assert_eq!(written(&["elsewhere.yaml"]).changed_clusters(Some("clusters/")), None);
        assert_eq!(written(&[]).changed_clusters(Some("clusters/")), None);
        assert_eq!(Trigger::Sweep.changed_clusters(Some("clusters/")), None);
    }
}
