//! The AWS SDK clients' feed into the shared [`CallCounter`]: an interceptor that counts every
//! HTTP attempt, by `service:Operation`.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

use tagwarden_core::calls::CallCounter;

/// The interceptor each SDK client is built with; it records into the one [`CallCounter`].
#[derive(Debug, Clone)]
pub struct CountCalls(pub CallCounter);

impl Intercept for CountCalls {
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
            self.0.record(&key);
        }
        Ok(())
    }
}
