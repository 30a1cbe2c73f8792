//! `tagwarden publish` through a policy store: the decision is `tagwarden_core::publish`'s; this
//! reads what is published, and writes conditionally on the version read.

use tagwarden_core::policy::cache::check;
use tagwarden_core::publish::{
    decide, set_folder, PublishError, PublishOutcome, PublishResult, TagChanges, Verdict, CLUSTER_LAYER,
};

use crate::policy_store::{Layout, PolicySource, PolicyStore, PutError};

impl<S: PolicySource> PolicyStore<S> {
    /// Publish `text` to this store's location (its object, or the cluster layer of its prefix): refuse
    /// what the function would reject, skip what is already published, and otherwise write it
    /// conditionally on the version read.
    ///
    /// Into a cluster set, the folder is `cluster`, which the caller names or proves (`--cluster`,
    /// or the cluster's own Infrastructure object), never the document alone: a document must name
    /// that same infraID, or it is refused. Without `cluster`, a set refuses (the fix is the flag).
    pub async fn publish(
        &self,
        text: &str,
        cluster: Option<&str>,
        dry_run: bool,
    ) -> Result<PublishOutcome, PublishError> {
        let cloud_error = |e: S::Error| PublishError::Cloud(Box::new(e));
        let (name, document, others) = match self.source.layout() {
            Layout::One(name) => (name.clone(), name, Vec::new()),
            Layout::Prefix(prefix) => {
                let others = self.documents().await.map_err(cloud_error)?;
                let others: Vec<(String, String)> = others.into_iter().filter(|(n, _)| n != CLUSTER_LAYER).collect();
                (format!("{prefix}{CLUSTER_LAYER}"), CLUSTER_LAYER.to_string(), others)
            }
            // A set: the document goes into the folder named for it, which it must name itself, beside
            // that cluster's other layers.
            Layout::Set(prefix) => {
                let infra_id = match set_folder(text, cluster) {
                    Ok(id) => id,
                    Err(why) => return Ok(PublishOutcome::refused(self.location(), vec![why.to_string()])),
                };
                // Entries without an extension (SSM parameters) are each a cluster's whole policy.
                if self.source.is_document(&format!("{prefix}{infra_id}")) {
                    (format!("{prefix}{infra_id}"), CLUSTER_LAYER.to_string(), Vec::new())
                } else {
                    let others = self.cluster_documents(&infra_id).await.map_err(cloud_error)?;
                    let others: Vec<(String, String)> =
                        others.into_iter().filter(|(n, _)| n != CLUSTER_LAYER).collect();
                    (format!("{prefix}{infra_id}/{CLUSTER_LAYER}"), CLUSTER_LAYER.to_string(), others)
                }
            }
        };
        let location = self.source.location_of(&name);
        let cloud = self.source.cloud();
        let current = self.read(&name).await.map_err(cloud_error)?;
        let (changes, infra_id) =
            match decide(cloud, &document, text, &others, current.as_ref().map(|o| o.text.as_str())) {
                Verdict::Refuse(violations) => return Ok(PublishOutcome::refused(location, violations)),
                Verdict::Unchanged => {
                    let docs = others.into_iter().chain([(document, text.to_string())]).collect();
                    return Ok(PublishOutcome {
                        location,
                        result: PublishResult::Unchanged,
                        version: current.map(|o| o.etag),
                        infra_id: check(cloud, docs).ok().map(|(_, id)| id),
                        changes: TagChanges::default(),
                        violations: Vec::new(),
                    });
                }
                Verdict::Write { changes, infra_id } => (changes, infra_id),
            };
        let read = current.map(|o| o.etag);
        let (result, version) = if dry_run {
            (PublishResult::WouldWrite, read)
        } else {
            let written = self.source.put(&name, text, read.as_deref()).await.map_err(|e| {
                let read = read.clone().unwrap_or_else(|| "none".into());
                match e {
                    PutError::Conflict { found } => PublishError::Conflict { location: location.clone(), read, found },
                    PutError::Raced { written } => PublishError::Raced { location: location.clone(), read, written },
                    PutError::Source(e) => PublishError::Cloud(Box::new(e)),
                }
            })?;
            (PublishResult::Written, Some(written))
        };
        Ok(PublishOutcome { location, result, version, infra_id: Some(infra_id), changes, violations: Vec::new() })
    }
}
