//! Counts every HTTP request the cloud clients send, by `service:Operation` (`EC2:CreateTags`,
//! `arm:MergeTags`, `blob:GetBlob`…). API calls are the real cost of an enforcer; tests and the
//! measurements use the counts to prove "no drift, no write". The AWS SDK clients feed it through
//! an interceptor (`aws::calls`); the Azure clients call [`CallCounter::record`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CallCounter {
    pub fn record(&self, op: &str) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry(op.to_string()).or_default() += 1;
        }
    }

    /// `service:Operation` → requests so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub fn get(&self, op: &str) -> u64 {
        self.snapshot().get(op).copied().unwrap_or_default()
    }

    pub fn reset(&self) {
        if let Ok(mut c) = self.counts.lock() {
            c.clear();
        }
    }

    /// Requests that change tags.
    pub fn writes(&self) -> u64 {
        self.snapshot().iter().filter(|(op, _)| is_write(op)).map(|(_, n)| n).sum()
    }

    /// Requests to one service (`arm:`, `blob:`, `EC2:`…).
    pub fn to_service(&self, prefix: &str) -> u64 {
        self.snapshot().iter().filter(|(op, _)| op.starts_with(prefix)).map(|(_, n)| n).sum()
    }

    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}

/// Tag-changing operations, as counted here (and as `aws::calls` names grants).
pub fn is_write(op: &str) -> bool {
    let name = op.rsplit(':').next().unwrap_or(op);
    // Google Cloud: Compute's setLabels, the label PATCHes of Cloud Storage and Cloud DNS.
    [
        "CreateTags",
        "PutBucketTagging",
        "AddTags",
        "TagResources",
        "MergeTags",
        "ChangeTagsForResource",
        "SetLabels",
        "PatchLabels",
        "CreateTagBinding",
    ]
    .contains(&name)
        || (name.starts_with("Tag") && !name.starts_with("Tagging"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_of_both_clouds() {
        let c = CallCounter::default();
        for op in
            ["EC2:CreateTags", "S3:PutBucketTagging", "IAM:TagRole", "arm:MergeTags", "arm:GetTags", "EC2:DescribeTags"]
        {
            c.record(op);
        }
        c.record("arm:MergeTags");
        assert_eq!((c.writes(), c.to_service("arm:"), c.total(), c.get("arm:MergeTags")), (5, 3, 7, 2));
        assert!(!is_write("tagging:GetResources") && !is_write("iam:ListRoleTags"));
        assert!(is_write("Route 53:ChangeTagsForResource") && !is_write("route53:ListTagsForResource"));
    }
}
