//! Counts every HTTP attempt the SDK clients make, by `service:Operation`. API calls are the real
//! cost of an enforcer; tests use the counts to prove "no drift, no write".

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl CallCounter {
    /// `service:Operation` → attempts so far.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub fn reset(&self) {
        if let Ok(mut c) = self.counts.lock() {
            c.clear();
        }
    }

    /// Attempts of operations that change tags.
    pub fn writes(&self) -> u64 {
        self.snapshot().iter().filter(|(op, _)| is_write(op)).map(|(_, n)| n).sum()
    }

    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}

/// Tag-changing operations, as counted here.
pub fn is_write(op: &str) -> bool {
    let name = op.rsplit(':').next().unwrap_or(op);
    ["CreateTags", "PutBucketTagging", "AddTags", "TagResources"].contains(&name)
        || (name.starts_with("Tag") && !name.starts_with("Tagging"))
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "tagwarden-call-counter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(meta) = cfg.load::<Metadata>() {
            let key = format!("{}:{}", meta.service(), meta.name());
            if let Ok(mut c) = self.counts.lock() {
                *c.entry(key).or_default() += 1;
            }
        }
        Ok(())
    }
}
