//! What a warm function knows about its published policy between re-checks, for both clouds'
//! stores: the last known good version (the one in force), what was last seen (so an unchanged
//! version is neither downloaded nor parsed again), the documents by ETag, and why the published
//! policy is not in force when it is not. The stores fetch; this decides, without I/O:
//!
//! - a new version is validated whole: valid, it is in force at once; invalid, it is rejected and
//!   the last known good version stays;
//! - a failed re-check keeps the last known good version; with none, nothing can be used (fail
//!   closed: nothing is written until a valid policy is published).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::validate;
use crate::cloud::Cloud;
use crate::policy::{self, Policy};

/// How the published policy stands against the version in force (the status report's
/// `policy.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyState {
    /// The published policy is the version in force.
    Ok,
    /// A newer published version was rejected; the last known good version stays in force.
    RejectedKeepingLastGood,
    /// The published policy could not be re-read (deleted, forbidden, unreachable, too large);
    /// the last known good version stays in force.
    UnreadableKeepingLastGood,
    /// No valid version has ever been read: nothing is written.
    Unavailable,
}

impl PolicyState {
    pub const ALL: [PolicyState; 4] = [
        PolicyState::Ok,
        PolicyState::RejectedKeepingLastGood,
        PolicyState::UnreadableKeepingLastGood,
        PolicyState::Unavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PolicyState::Ok => "ok",
            PolicyState::RejectedKeepingLastGood => "rejected-keeping-last-good",
            PolicyState::UnreadableKeepingLastGood => "unreadable-keeping-last-good",
            PolicyState::Unavailable => "unavailable",
        }
    }
}

impl std::fmt::Display for PolicyState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state, and the errors behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    pub state: PolicyState,
    pub errors: Vec<String>,
}

/// A validated policy in force.
#[derive(Debug)]
pub struct LoadedPolicy {
    pub policy: Policy,
    pub infra_id: String,
    /// The ETag(s) or parameter version it was read from.
    pub fingerprint: String,
}

/// Why no policy can be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no valid policy from {location}: {reason}; nothing is written until one is published")]
pub struct PolicyUnavailable {
    pub location: String,
    pub reason: String,
}

/// What a re-check found, for metrics and the status report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyChange {
    /// A new valid version is in force.
    Loaded { version: String },
    /// A new version was rejected; the last known good one (if any) stays.
    Rejected { errors: Vec<String> },
}

/// A fetched version.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The ETag(s) or version it was read at: a version seen before is not parsed again.
    pub fingerprint: String,
    /// `(name, text)`, in any order: they are layered in name order.
    pub documents: Vec<(String, String)>,
    /// Why documents of this version were refused before they were read (a limit a listing
    /// showed passed): with none left, the version is rejected whole.
    pub refused: Vec<String>,
}

impl Fetched {
    pub fn new(fingerprint: String, documents: Vec<(String, String)>) -> Self {
        Fetched { fingerprint, documents, refused: Vec::new() }
    }

    /// A version refused whole before it was read, for `why`.
    pub fn refused(fingerprint: String, why: String) -> Self {
        Fetched { fingerprint, documents: Vec::new(), refused: vec![why] }
    }
}

#[derive(Default)]
pub struct PolicyCache {
    good: Option<Arc<LoadedPolicy>>,
    /// Fingerprint of the last version seen, good or rejected: not parsed again.
    seen: Option<String>,
    /// In a cluster set, the infraID the cluster's key names: a layer that does not name it is
    /// refused alone.
    expected_infra_id: Option<String>,
    /// A single policy's deployment that lists its clusters (`TAGWARDEN_CLUSTERS`): a policy
    /// for another cluster is rejected.
    listed: Option<Vec<String>>,
    /// Document name → (ETag, text): a prefix re-downloads only what changed.
    // Read by `tagwarden_engine::policy_store`.
    pub documents: BTreeMap<String, (String, String)>,
    last_rejection: Option<Vec<String>>,
    /// Why the last re-check failed while a good version stayed in force.
    read_error: Option<String>,
}

impl PolicyCache {
    /// The cache of the cluster a set keeps under `infra_id`.
    pub fn for_cluster(infra_id: &str) -> Self {
        PolicyCache { expected_infra_id: Some(infra_id.to_string()), ..PolicyCache::default() }
    }

    /// The cache of a single policy whose deployment lists `listed` clusters (`None`: any).
    pub fn single(listed: Option<Vec<String>>) -> Self {
        PolicyCache { listed, ..PolicyCache::default() }
    }

    /// Whether a valid version has ever been read.
    pub fn has_good(&self) -> bool {
        self.good.is_some()
    }

    /// The fingerprint of the last version seen.
    pub fn seen(&self) -> Option<&str> {
        self.seen.as_deref()
    }

    /// Take a re-check's result: `Ok(None)` is "unchanged since the last version seen", `Err` says
    /// why nothing could be read. Fails only when no version can be used at all.
    pub fn record<E: std::fmt::Display>(
        &mut self,
        cloud: Cloud,
        location: &str,
        fetched: Result<Option<Fetched>, E>,
    ) -> Result<Option<PolicyChange>, PolicyUnavailable> {
        match fetched {
            Ok(found) => {
                self.read_error = None;
                Ok(found.map(|f| self.accept(cloud, location, f)))
            }
            Err(e) if self.good.is_some() => {
                tracing::warn!(location, error = %e, "policy re-check failed; keeping the last known good version");
                self.read_error = Some(e.to_string());
                Ok(None)
            }
            Err(e) => Err(PolicyUnavailable { location: location.to_string(), reason: e.to_string() }),
        }
    }

    /// The version in force.
    pub fn current(&self, location: &str) -> Result<Arc<LoadedPolicy>, PolicyUnavailable> {
        self.good.clone().ok_or_else(|| PolicyUnavailable {
            location: location.to_string(),
            reason: match &self.last_rejection {
                Some(errors) => format!("the published version is invalid: {}", errors.join("; ")),
                None => "no policy has been read yet".to_string(),
            },
        })
    }

    /// How the published policy stands against the version in force, for the status report:
    /// `ok`, the last re-check failed (why), or a newer version was rejected (its errors). A sweep
    /// reports it, so the report never says `ok` while the published policy is not in force.
    pub fn standing(&self) -> Standing {
        // What is true now first: a policy that cannot be read, then a rejected version.
        let (state, errors) = match (&self.read_error, &self.last_rejection) {
            (Some(e), _) => (PolicyState::UnreadableKeepingLastGood, vec![e.clone()]),
            (None, Some(errors)) => (PolicyState::RejectedKeepingLastGood, errors.clone()),
            (None, None) => (PolicyState::Ok, Vec::new()),
        };
        Standing { state, errors }
    }

    fn accept(&mut self, cloud: Cloud, location: &str, fetched: Fetched) -> PolicyChange {
        let Fetched { fingerprint, documents, mut refused } = fetched;
        self.seen = Some(fingerprint.clone());
        let read = documents.len();
        let documents = match &self.expected_infra_id {
            Some(key) => own_layers(key, location, documents, &mut refused),
            None => documents,
        };
        let checked =
            if documents.is_empty() && !refused.is_empty() { Err(Vec::new()) } else { check(cloud, documents) };
        let checked = match (checked, &self.expected_infra_id) {
            // Every layer that was read was refused: fail closed for this cluster alone.
            (Err(mut errors), Some(key)) if read > 0 && errors.is_empty() => {
                errors.push(format!("no layer of {location} names cluster {key}: nothing of it is put in force (the version in force before, if any, stays); publish its policy with infraID {key} there"));
                Err(errors)
            }
            (checked, _) => checked,
        };
        let checked = checked.and_then(|(policy, infra_id)| match &self.listed {
            Some(listed) if !listed.contains(&infra_id) => Err(vec![format!(
                "{location} holds the policy of cluster {infra_id}, which this deployment does not list (TAGWARDEN_CLUSTERS={}): add {infra_id} to the deployment's infra_ids, or publish the policy of a listed cluster there",
                listed.join(",")
            )]),
            _ => Ok((policy, infra_id)),
        });
        match checked {
            Ok((policy, infra_id)) => {
                let version = policy.version.clone();
                self.good = Some(Arc::new(LoadedPolicy { policy, infra_id, fingerprint }));
                tracing::info!(location, version, "policy loaded");
                if refused.is_empty() {
                    self.last_rejection = None;
                    PolicyChange::Loaded { version }
                } else {
                    // The valid layers are in force; the refused ones are reported as a rejection.
                    tracing::error!(location, errors = ?refused, "policy layers refused; the cluster's own layers are in force");
                    self.last_rejection = Some(refused.clone());
                    PolicyChange::Rejected { errors: refused }
                }
            }
            Err(mut errors) => {
                errors.extend(refused);
                tracing::error!(location, ?errors, "policy rejected; keeping the last known good version");
                self.last_rejection = Some(errors.clone());
                PolicyChange::Rejected { errors }
            }
        }
    }
}

/// A set's cluster `key`: the layers that name its infraID themselves. A layer that names no
/// infraID or another one is refused alone (into `refused`, with the fix), so no publisher can
/// add tags to another cluster's policy or get it rejected by writing into its folder. A layer
/// that cannot be read is kept: the whole version is rejected for it, as for any invalid layer.
fn own_layers(
    key: &str,
    location: &str,
    documents: Vec<(String, String)>,
    refused: &mut Vec<String>,
) -> Vec<(String, String)> {
    documents
        .into_iter()
        .filter(|(name, text)| {
            let why = match policy::load::declared_infra_id(name, text) {
                Ok(Some(id)) if id == key => return true,
                Err(_) => return true,
                Ok(Some(other)) => format!(
                    "layer {name:?} of {location} names infraID {other:?}, not {key}: refused, and the cluster's other layers stay in force; publish it into the folder of {other}, or correct its infraID to {key}"
                ),
                Ok(None) => format!(
                    "layer {name:?} of {location} names no infraID: refused, and the cluster's other layers stay in force; every layer of a cluster set names its cluster: add infraID: {key} (or status.infrastructureName in an Infrastructure object)"
                ),
            };
            refused.push(why);
            false
        })
        .collect()
}

/// Load, validate and check a candidate version for `cloud`, with the function's rules: what the
/// function would accept, and its infraID, or every reason it would reject it. `publish` refuses
/// what this refuses.
pub fn check(cloud: Cloud, docs: Vec<(String, String)>) -> Result<(Policy, String), Vec<String>> {
    let policy = policy::load(docs).map_err(|e| vec![e.to_string()])?;
    if let Some(other) = policy.cloud.filter(|c| *c != cloud) {
        return Err(vec![format!("the policy is for {other}, but this deployment enforces {cloud}")]);
    }
    let violations = validate::policy(&policy, cloud);
    if !violations.is_empty() {
        return Err(violations.into_iter().map(|v| v.message).collect());
    }
    let Some(infra_id) = policy.infra_id.clone() else {
        return Err(vec!["the policy does not name the cluster's infraID (status.infrastructureName, or infraID in a tagwarden.yaml), so there is no telling which resources it owns".to_string()]);
    };
    Ok((policy, infra_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(tags: &str) -> Fetched {
        Fetched::new(
            format!("fp-{tags}"),
            vec![("p.yaml".into(), format!("version: 1\ninfraID: c-1\ntags: {{{tags}}}\n"))],
        )
    }

    #[test]
    fn last_known_good_rejection_read_errors_and_fail_closed() {
        let mut cache = PolicyCache::default();
        // Cold and unreadable: nothing to use.
        let e = cache.record(Cloud::Aws, "s3://b/p", Err::<Option<Fetched>, _>("AccessDenied")).expect_err("cold");
        assert!(e.to_string().contains("AccessDenied") && e.to_string().contains("nothing is written"), "{e}");
        assert!(cache.current("s3://b/p").is_err());

        let change = cache.record(Cloud::Aws, "s3://b/p", Ok::<_, String>(Some(doc("team: a")))).expect("loaded");
        assert!(matches!(change, Some(PolicyChange::Loaded { .. })));
        let v1 = cache.current("l").expect("in force").policy.version.clone();
        assert_eq!(cache.standing().state, PolicyState::Ok);

        // A rejected version keeps v1 and says why.
        let change = cache.record(Cloud::Aws, "l", Ok::<_, String>(Some(doc("aws:x: y")))).expect("kept");
        assert!(matches!(change, Some(PolicyChange::Rejected { .. })));
        assert_eq!(cache.current("l").expect("v1").policy.version, v1);
        assert_eq!(cache.standing().state, PolicyState::RejectedKeepingLastGood);
        // Then unreadable: still v1, and that is what stands now.
        assert_eq!(cache.record(Cloud::Aws, "l", Err::<Option<Fetched>, _>("NoSuchKey")), Ok(None));
        assert_eq!(
            cache.standing(),
            Standing { state: PolicyState::UnreadableKeepingLastGood, errors: vec!["NoSuchKey".to_string()] }
        );
        // Unchanged and readable again: the rejection stands.
        assert_eq!(cache.record(Cloud::Aws, "l", Ok::<Option<Fetched>, String>(None)), Ok(None));
        assert_eq!(cache.standing().state, PolicyState::RejectedKeepingLastGood);
        // A policy for the other cloud is rejected.
        let other = Fetched::new(
            "fp-az".to_string(),
            vec![("p.yaml".into(), "version: 1\ncloud: azure\ninfraID: c\ntags: {a: b}\n".into())],
        );
        let change = cache.record(Cloud::Aws, "l", Ok::<_, String>(Some(other))).expect("kept");
        assert!(matches!(change, Some(PolicyChange::Rejected { errors }) if errors[0].contains("azure")));
    }

    #[test]
    fn a_clusters_key_must_name_its_infra_id() {
        let mut cache = PolicyCache::for_cluster("c-2");
        let change = cache.record(Cloud::Aws, "s3://b/clusters/c-2/", Ok::<_, String>(Some(doc("team: a"))));
        let Ok(Some(PolicyChange::Rejected { errors })) = change else { panic!("{change:?}") };
        assert!(errors.iter().any(|e| e.contains("names infraID \"c-1\", not c-2")), "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("no layer of s3://b/clusters/c-2/ names cluster c-2")), "{errors:?}");
        assert!(!cache.has_good());
        let mut cache = PolicyCache::for_cluster("c-1");
        let change = cache.record(Cloud::Aws, "s3://b/clusters/c-1/", Ok::<_, String>(Some(doc("team: a"))));
        assert!(matches!(change, Ok(Some(PolicyChange::Loaded { .. }))) && cache.has_good());
    }
}
