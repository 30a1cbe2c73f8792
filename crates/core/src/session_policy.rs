//! The session policies the AWS organization hub passes to STS `AssumeRole` (pure: no I/O).
//!
//! Every session the hub starts in a member account carries a session policy that allows each tag
//! write only on what one of that session's clusters owns; an account with more clusters than one
//! policy holds has them packed into groups ([`pack`]), a session each. The hub
//! (`tagwarden_aws::organization`) assumes the roles; this module only writes the documents.

use crate::services::{Guard, S3, SERVICES};

/// "The plaintext that you use for both inline and managed session policies can't exceed 2,048
/// characters" (STS API reference, `AssumeRole`, `Policy`).
pub const SESSION_POLICY_MAX: usize = 2048;

/// The writes a session may make only on what its clusters own: every descriptor's write whose
/// service evaluates `aws:ResourceTag` (`Guard::Owned`) and the service actions `tag:TagResources`
/// needs (`Guard::OwnedVia`), from `tagwarden_core::services`.
fn owned_writes() -> Vec<&'static str> {
    let mut writes: Vec<&'static str> = SERVICES
        .iter()
        .filter_map(|s| match s.grant.guard {
            Guard::Owned => Some(s.write),
            Guard::OwnedVia(action) => Some(action),
            _ => None,
        })
        .collect();
    writes.sort_unstable();
    writes.dedup();
    writes
}

/// The session policy of a group of clusters, each with its ownership keys: everything but the
/// tag writes as the role grants it; the owned-resource writes only where one of the keys is
/// `owned`; S3's `PutBucketTagging` (no tag condition key) only on the clusters' bucket name
/// patterns (`<infraID>-*`, the hub module's default). Compact JSON: the limit counts characters.
pub fn session_policy(partition: &str, clusters: &[(String, Vec<String>)]) -> String {
    let mut not_action = owned_writes();
    not_action.push(S3.write);
    let mut statements = vec![serde_json::json!({"Effect": "Allow", "NotAction": not_action, "Resource": "*"})];
    for key in clusters.iter().flat_map(|(_, keys)| keys) {
        // Every action, on what the key marks owned: the role grants only the tag reads and
        // writes, so this adds the writes on owned resources and nothing else.
        statements.push(serde_json::json!({
            "Effect": "Allow",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringEquals": {format!("aws:ResourceTag/{key}"): "owned"}},
        }));
    }
    let buckets: Vec<String> = clusters.iter().map(|(c, _)| format!("arn:{partition}:s3:::{c}-*")).collect();
    if !buckets.is_empty() {
        statements.push(serde_json::json!({"Effect": "Allow", "Action": S3.write, "Resource": buckets}));
    }
    serde_json::json!({"Version": "2012-10-17", "Statement": statements}).to_string()
}

/// The clusters (each with its ownership keys) in groups whose session policies each fit
/// [`SESSION_POLICY_MAX`], in order; positions into `clusters`.
pub fn pack(partition: &str, clusters: &[(String, Vec<String>)]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in 0..clusters.len() {
        current.push(i);
        let members: Vec<(String, Vec<String>)> = current.iter().map(|&j| clusters[j].clone()).collect();
        if current.len() > 1 && session_policy(partition, &members).len() > SESSION_POLICY_MAX {
            current.pop();
            groups.push(std::mem::take(&mut current));
            current.push(i);
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{Cloud, ClusterKind};
    use crate::policy::clusters::valid_infra_id;
    use proptest::prelude::*;

    /// The session policies at 1, 20, 100 and 1,000 clusters in one account,
    /// each within STS's 2,048 characters, every cluster in exactly one group, in order.
    #[test]
    fn session_policies_fit_sts_and_cover_every_cluster_once() {
        let cluster = |i: usize| {
            let id = format!("cluster-{i:04}-7xk2p");
            let keys = if i % 10 == 9 { ClusterKind::ClusterApi } else { ClusterKind::OpenShift };
            (id.clone(), Cloud::Aws.ownership_keys(keys, &id))
        };
        for n in [1usize, 20, 100, 1000] {
            let clusters: Vec<(String, Vec<String>)> = (0..n).map(cluster).collect();
            let groups = pack("aws", &clusters);
            let flat: Vec<usize> = groups.iter().flatten().copied().collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>(), "{n}: every cluster once, in order");
            let sizes: Vec<usize> = groups
                .iter()
                .map(|g| session_policy("aws", &g.iter().map(|&i| clusters[i].clone()).collect::<Vec<_>>()).len())
                .collect();
            assert!(sizes.iter().all(|&s| s <= SESSION_POLICY_MAX), "{n}: {sizes:?}");
            println!(
                "{n} clusters: {} session(s), largest policy {} characters, {} clusters in the largest group",
                groups.len(),
                sizes.iter().max().unwrap_or(&0),
                groups.iter().map(Vec::len).max().unwrap_or(0)
            );
        }
        let one = session_policy("aws", &[cluster(0)]);
        println!("one cluster's session policy: {one}");
        let doc: serde_json::Value = serde_json::from_str(&one).expect("json");
        let statements = doc["Statement"].as_array().expect("statements");
        assert_eq!(statements.len(), 3, "reads, the owned writes, the buckets: {one}");
        let not = statements[0]["NotAction"].as_array().expect("NotAction");
        for write in ["ec2:CreateTags", "iam:TagRole", "s3:PutBucketTagging", "elasticfilesystem:TagResource"] {
            assert!(not.iter().any(|a| a == write), "{write} is never granted unconditionally: {one}");
        }
        let condition =
            &statements[1]["Condition"]["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/cluster-0000-7xk2p"];
        assert_eq!(condition, "owned", "{one}");
        assert_eq!(statements[2]["Resource"], serde_json::json!(["arn:aws:s3:::cluster-0000-7xk2p-*"]));
    }

    /// A valid infraID (`crate::policy::clusters::valid_infra_id`), up to its longest.
    fn infra_id() -> impl Strategy<Value = String> {
        "[a-z0-9][a-z0-9._-]{0,63}"
    }

    fn kind() -> impl Strategy<Value = ClusterKind> {
        prop_oneof![Just(ClusterKind::OpenShift), Just(ClusterKind::HyperShift), Just(ClusterKind::ClusterApi)]
    }

    proptest! {
        /// Any clusters (distinct valid infraIDs, any kinds): every cluster's ownership keys are
        /// in exactly one session's policy, the clusters in order, and no session policy is over
        /// STS's 2,048 characters.
        #[test]
        fn every_key_in_exactly_one_session_and_no_policy_over_the_limit(
            clusters in prop::collection::btree_map(infra_id(), kind(), 0..120),
            partition in prop_oneof![Just("aws"), Just("aws-us-gov"), Just("aws-cn")],
        ) {
            let clusters: Vec<(String, Vec<String>)> =
                clusters.into_iter().map(|(id, kind)| (id.clone(), Cloud::Aws.ownership_keys(kind, &id))).collect();
            for (id, _) in &clusters {
                prop_assert!(valid_infra_id(id).is_ok(), "{}", id);
            }
            let groups = pack(partition, &clusters);
            let flat: Vec<usize> = groups.iter().flatten().copied().collect();
            prop_assert_eq!(flat, (0..clusters.len()).collect::<Vec<_>>(), "every cluster once, in order");
            let policies: Vec<String> = groups
                .iter()
                .map(|g| session_policy(partition, &g.iter().map(|&i| clusters[i].clone()).collect::<Vec<_>>()))
                .collect();
            for policy in &policies {
                prop_assert!(policy.len() <= SESSION_POLICY_MAX, "{} characters: {}", policy.len(), policy);
            }
            for (i, (_, keys)) in clusters.iter().enumerate() {
                for key in keys {
                    let condition = format!("\"aws:ResourceTag/{key}\"");
                    let holding: Vec<usize> = (0..policies.len()).filter(|&g| policies[g].contains(&condition)).collect();
                    prop_assert_eq!(holding.len(), 1, "{} in exactly one session", key);
                    prop_assert!(groups[holding[0]].contains(&i), "{} in its own cluster's session", key);
                }
            }
        }
    }
}
