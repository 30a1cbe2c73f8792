//! `tagwarden publish`: put the cluster's policy where the function reads it, checked first.
//!
//! A document is validated whole with the function's own rules ([`check`]) before anything is
//! read or written: what the function would reject is refused here. A valid document is written
//! only when its bytes differ from what is published, and only as a conditional write on the
//! version that was read (S3 `If-Match` / `If-None-Match: *`, blob ETags; SSM, which has no
//! conditional put, by its version counter), so two publishers never overwrite each other unseen.
//!
//! This module decides; `tagwarden_engine`'s `PolicyStore::publish` reads and writes through each
//! cloud's policy source.

use serde::Serialize;

use crate::cloud::Cloud;
use crate::policy::cache::check;
use crate::TagMap;

/// The name a layered prefix gets for the cluster's document (docs/src/concepts/policy.md's example layering:
/// `00-defaults.yaml`, `10-cluster.json`, `20-overrides.yaml`).
pub const CLUSTER_LAYER: &str = "10-cluster.yaml";

/// The tag changes a publish makes against what is published now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TagChanges {
    pub added: TagMap,
    /// key → [old, new]
    pub changed: std::collections::BTreeMap<String, [String; 2]>,
    pub removed: TagMap,
}

impl TagChanges {
    pub fn between(old: &TagMap, new: &TagMap) -> Self {
        let mut c = TagChanges::default();
        for (k, v) in new {
            match old.get(k) {
                None => {
                    c.added.insert(k.clone(), v.clone());
                }
                Some(o) if o != v => {
                    c.changed.insert(k.clone(), [o.clone(), v.clone()]);
                }
                Some(_) => {}
            }
        }
        for (k, v) in old {
            if !new.contains_key(k) {
                c.removed.insert(k.clone(), v.clone());
            }
        }
        c
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// The same changes with the values of keys `policies` mark sensitive as hashes, as the
    /// function logs them (`Policy::loggable`): a publisher's output is a log too.
    pub fn masked(self, policies: &[&crate::policy::Policy]) -> Self {
        let show = |k: &str, v: String| match policies.iter().find(|p| p.loggable(k, &v) != v.as_str()) {
            Some(p) => p.loggable(k, &v).into_owned(),
            None => v,
        };
        let map = |m: TagMap| m.into_iter().map(|(k, v)| (k.clone(), show(&k, v))).collect();
        TagChanges {
            added: map(self.added),
            changed: self.changed.into_iter().map(|(k, [o, n])| (k.clone(), [show(&k, o), show(&k, n)])).collect(),
            removed: map(self.removed),
        }
    }
}

/// What `publish` decided before writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The function would reject the document: every reason. Nothing is written.
    Refuse(Vec<String>),
    /// The published bytes are these bytes already.
    Unchanged,
    /// Write it; these are the tag changes (against nothing, when nothing valid is published).
    Write { changes: TagChanges, infra_id: String },
}

/// Decide a publish of `text` (named `name`) for `cloud`. `others` are the other documents of a
/// layered prefix as published (empty for a single object): the merged whole must be valid.
/// Removing a key from the policy never removes the tag from resources (tagwarden never deletes);
/// `removed` says which keys stop being enforced.
pub fn decide(cloud: Cloud, name: &str, text: &str, others: &[(String, String)], current: Option<&str>) -> Verdict {
    let with = |doc: Option<&str>| {
        let mut docs: Vec<(String, String)> = others.to_vec();
        if let Some(d) = doc {
            docs.push((name.to_string(), d.to_string()));
        }
        docs
    };
    let (new, infra_id) = match check(cloud, with(Some(text))) {
        Ok(ok) => ok,
        Err(errors) => return Verdict::Refuse(errors),
    };
    if current == Some(text) {
        return Verdict::Unchanged;
    }
    // What is published now may itself be invalid (or absent): then every tag is an addition.
    let old = check(cloud, with(current)).ok().map(|(p, _)| p);
    let changes =
        TagChanges::between(&old.as_ref().map(|p| p.base_tags(cloud)).unwrap_or_default(), &new.base_tags(cloud));
    let changes = changes.masked(&[Some(&new), old.as_ref()].into_iter().flatten().collect::<Vec<_>>());
    Verdict::Write { changes, infra_id }
}

/// What a publish did, as its outcome's `result` (`written`, `would-write`, `unchanged`, `refused`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PublishResult {
    /// The document was written.
    Written,
    /// A dry run: the document would have been written.
    WouldWrite,
    /// The document is already what is published: nothing was written.
    Unchanged,
    /// The function would reject the document: nothing was written.
    Refused,
}

impl PublishResult {
    /// The wire form, as in the outcome's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PublishResult::Written => "written",
            PublishResult::WouldWrite => "would-write",
            PublishResult::Unchanged => "unchanged",
            PublishResult::Refused => "refused",
        }
    }
}

impl std::fmt::Display for PublishResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a publish ended.
#[derive(Debug, Clone, Serialize)]
pub struct PublishOutcome {
    /// Where it went (no credential).
    pub location: String,
    /// What the publish did.
    pub result: PublishResult,
    /// The version now published: the new ETag or parameter version, or the one left in place.
    pub version: Option<String>,
    pub infra_id: Option<String>,
    pub changes: TagChanges,
    /// Why the document was refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

impl PublishOutcome {
    pub fn refused(location: String, violations: Vec<String>) -> Self {
        PublishOutcome {
            location,
            result: PublishResult::Refused,
            version: None,
            infra_id: None,
            changes: TagChanges::default(),
            violations,
        }
    }
}

/// The folder of a set a document goes into: `cluster`, which the document must name itself (as
/// the function requires of every layer), and a valid infraID. The document alone never chooses.
pub fn set_folder(text: &str, cluster: Option<&str>) -> Result<String, SetFolderError> {
    let declared = crate::policy::load::declared_infra_id(CLUSTER_LAYER, text)?;
    let Some(cluster) = cluster else {
        return Err(SetFolderError::NoClusterNamed { declared });
    };
    crate::policy::clusters::valid_infra_id(cluster)?;
    match declared {
        Some(id) if id == cluster => Ok(id),
        Some(id) => Err(SetFolderError::OtherCluster { declared: id, cluster: cluster.to_string() }),
        None => Err(SetFolderError::NoInfraId { cluster: cluster.to_string() }),
    }
}

/// Why a document goes into no folder of a cluster set (`set_folder`).
#[derive(Debug, thiserror::Error)]
pub enum SetFolderError {
    /// The document is not a valid layer.
    #[error(transparent)]
    Invalid(#[from] crate::policy::load::PolicyError),
    /// The publisher named no cluster (the document's own infraID, if any).
    #[error(
        "a cluster set keeps each cluster's policy in the folder of its infraID, and a publisher names that folder, not the document: pass --cluster {} (or publish --from-cluster, which reads it from the cluster's Infrastructure object)",
        declared.as_deref().unwrap_or("INFRA_ID")
    )]
    NoClusterNamed { declared: Option<String> },
    /// The cluster named is no infraID.
    #[error(transparent)]
    NotAnInfraId(#[from] crate::policy::clusters::NotAnInfraId),
    /// The document names another cluster than the one it is published for.
    #[error(
        "the document names infraID {declared:?}, but it is published for cluster {cluster}: the function refuses a layer that does not name its folder's cluster; publish the policy of {cluster}, or correct the document's infraID"
    )]
    OtherCluster { declared: String, cluster: String },
    /// The document names no cluster.
    #[error(
        "the document names no infraID, and every layer of a cluster set must name its cluster: add infraID: {cluster} (or publish the Infrastructure object, whose status.infrastructureName names it)"
    )]
    NoInfraId { cluster: String },
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Someone else published between this publisher's read and its write.
    #[error("{location} changed while publishing (read version {read}, now {found}): another publisher wrote it; nothing of theirs was overwritten unseen. Run publish again to review their change and publish on top of it")]
    Conflict { location: String, read: String, found: String },
    /// SSM only, which has no conditional put: another write landed between the version check
    /// and this put. Both are in the parameter's history.
    #[error("{location}: another publisher wrote it while this one did (read version {read}, this write is version {written}); the versions between are in the parameter's history (aws ssm get-parameter-history --name …). Review them and publish again")]
    Raced { location: String, read: String, written: String },
    /// The store's own error (a `CloudError` from either cloud), kept whole so callers can
    /// classify it.
    #[error("{0}")]
    Cloud(Box<dyn std::error::Error + Send + Sync>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(tags: &str) -> String {
        format!("version: 1\ninfraID: c-1\ntags: {{{tags}}}\n")
    }

    #[test]
    fn a_result_serializes_as_its_wire_form() {
        use PublishResult::*;
        for (result, wire) in
            [(Written, "written"), (WouldWrite, "would-write"), (Unchanged, "unchanged"), (Refused, "refused")]
        {
            assert_eq!((result.as_str(), result.to_string()), (wire, wire.to_string()));
            assert_eq!(serde_json::to_value(result).expect("json"), serde_json::json!(wire));
        }
        let refused =
            serde_json::to_value(PublishOutcome::refused("s3://b/k".into(), vec!["bad".into()])).expect("json");
        assert_eq!(refused["result"], "refused");
    }

    #[test]
    fn refuses_what_the_function_would_reject_and_reports_changes() {
        let bad = decide(Cloud::Aws, "p.yaml", &doc("aws:x: y, Name: n"), &[], None);
        let Verdict::Refuse(errors) = bad else { panic!("{bad:?}") };
        assert!(!errors.is_empty());
        let no_infra = decide(Cloud::Aws, "p.yaml", "version: 1\ntags: {a: b}\n", &[], None);
        assert!(matches!(no_infra, Verdict::Refuse(e) if e[0].contains("infraID")));
        let azure = decide(Cloud::Aws, "p.yaml", "version: 1\ncloud: azure\ninfraID: c\ntags: {a: b}\n", &[], None);
        assert!(matches!(azure, Verdict::Refuse(e) if e[0].contains("azure")));

        let (old, new) = (doc("team: a, env: dev, gone: x"), doc("team: b, env: dev, cost: '1'"));
        assert_eq!(decide(Cloud::Aws, "p.yaml", &old, &[], Some(&old)), Verdict::Unchanged);
        let Verdict::Write { changes, infra_id } = decide(Cloud::Aws, "p.yaml", &new, &[], Some(&old)) else {
            panic!("a write")
        };
        assert_eq!(infra_id, "c-1");
        assert_eq!(changes.added.keys().collect::<Vec<_>>(), ["cost"]);
        assert_eq!(changes.changed["team"], ["a".to_string(), "b".to_string()]);
        assert_eq!(changes.removed.keys().collect::<Vec<_>>(), ["gone"]);
        // Against an invalid published version, everything is added.
        let Verdict::Write { changes, .. } = decide(Cloud::Aws, "p.yaml", &new, &[], Some("{not yaml")) else {
            panic!("a write")
        };
        assert_eq!(changes.added.len(), 3);
    }

    /// Into a set, the folder is named by the publisher and proven by the document.
    #[test]
    fn a_sets_folder_is_named_not_taken_from_the_document() {
        assert_eq!(set_folder(&doc("a: b"), Some("c-1")).expect("its folder"), "c-1");
        let e = set_folder(&doc("a: b"), None).expect_err("no folder named").to_string();
        assert!(e.contains("pass --cluster c-1") && e.contains("--from-cluster"), "{e}");
        let e = set_folder(&doc("a: b"), Some("c-2")).expect_err("another cluster's folder").to_string();
        assert!(e.contains("names infraID \"c-1\", but it is published for cluster c-2"), "{e}");
        let e = set_folder("version: 1\ntags: {a: b}\n", Some("c-2")).expect_err("names none").to_string();
        assert!(e.contains("add infraID: c-2"), "{e}");
        let hostile = "version: 1\ninfraID: ../c-2\ntags: {a: b}\n";
        assert!(set_folder(hostile, Some("../c-2"))
            .expect_err("not a folder")
            .to_string()
            .contains("is not an infraID"));
    }

    /// The publisher prints sensitive values as the function logs them, hashed.
    #[test]
    fn sensitive_values_are_printed_as_hashes() {
        let old = "version: 1\ninfraID: c-1\nsensitive: [cost-center]\ntags: {cost-center: '4711', team: a}\n";
        let new = "version: 1\ninfraID: c-1\nsensitive: [Cost-Center]\ntags: {cost-center: '4712', team: b, x: y}\n";
        let Verdict::Write { changes, .. } = decide(Cloud::Aws, "p.yaml", new, &[], Some(old)) else {
            panic!("a write")
        };
        let shown = serde_json::to_string(&changes).expect("json");
        assert!(!shown.contains("4711") && !shown.contains("4712") && shown.contains("sha256:"), "{shown}");
        assert_eq!(changes.changed["team"], ["a".to_string(), "b".to_string()], "others are shown");
        let Verdict::Write { changes, .. } = decide(Cloud::Aws, "p.yaml", &doc("cost-center: '1'"), &[], Some(old))
        else {
            panic!("a write")
        };
        assert!(
            changes.changed["cost-center"].iter().all(|v| v.starts_with("sha256:")),
            "sensitive before: {changes:?}"
        );
    }

    #[test]
    fn a_layer_is_checked_with_the_other_layers() {
        let others = vec![("00-defaults.yaml".to_string(), "version: 1\ninfraID: c-1\ntags: {owner: x}\n".to_string())];
        let clash = decide(Cloud::Aws, CLUSTER_LAYER, "version: 1\ninfraID: c-2\ntags: {a: b}\n", &others, None);
        assert!(matches!(clash, Verdict::Refuse(e) if e[0].contains("disagree")), "the layers name two clusters");
        let Verdict::Write { changes, .. } = decide(Cloud::Aws, CLUSTER_LAYER, &doc("a: b"), &others, None) else {
            panic!("a write")
        };
        assert_eq!(changes.added.keys().collect::<Vec<_>>(), ["a"], "the other layer's tags are published already");
    }
}
