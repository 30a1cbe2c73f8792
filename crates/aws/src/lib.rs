//! The AWS side: SDK clients, reading and writing tags per service, the policy store (S3 or SSM),
//! and the engine's adapter over them; the Lambda and the CLI drive the engine (`tagwarden_engine::enforce`).
//!
//! Configuration is the standard AWS SDK environment (region, credentials, `AWS_ENDPOINT_URL`),
//! so the same code runs against AWS and against a local emulator.

pub mod adapter;
pub mod calls;
pub mod config;
pub mod deadline;
pub mod discover;
pub mod emf;
pub mod error;
pub mod failure;
pub mod function;
pub mod handler;
pub mod organization;
pub mod policy_store;
mod services;
pub mod tags;

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::tls;

use tagwarden_core::calls::CallCounter;
use tagwarden_engine::network::NetworkError;
use tagwarden_engine::rate_limit::RateLimit;
use tagwarden_engine::retry::Backoff;

/// The AWS side of the engine's adapter: the clients and how reads and writes are paced; its
/// reads and writes of one resource are in [`tags`], each service's calls in `services`.
#[derive(Debug, Clone)]
pub struct Tagger {
    pub clients: Clients,
    pub not_found: Backoff,
    /// EC2 ids per `CreateTags` in a sweep: at most, and by default, its descriptor's
    /// (`tagwarden_core::services::EC2`) `Batch::Shared`.
    pub ec2_batch: usize,
    /// Paces every EC2 `CreateTags` (the account's bucket is the cluster's too; `tagwarden_engine::rate_limit`).
    pub ec2_writes: Option<RateLimit>,
    /// The account the resources are in, when known: S3 tagging calls name it as the
    /// `ExpectedBucketOwner`, so a same-named bucket of another account is refused by S3.
    pub account: Option<String>,
    /// Whether this tagger's sweep lists what has no region (Route 53, IAM): in an organization,
    /// only one region's shard of each account does (`organization`); alone, always.
    pub global: bool,
    /// An organization shard's `<account>/<region>`: a failed listing is named with it, so each
    /// shard's status lies in its own part of the cluster's report
    /// (`tagwarden_core::status::aws_region_part`).
    pub scope: Option<String>,
}

impl Tagger {
    pub fn new(clients: Clients) -> Self {
        let ec2_batch = tagwarden_core::services::EC2.batch.max();
        Tagger {
            clients,
            not_found: Backoff::NOT_FOUND,
            ec2_batch,
            ec2_writes: None,
            account: None,
            global: true,
            scope: None,
        }
    }
}

/// The SDK crates, for callers (tests, tools) that build requests of their own.
pub mod sdk {
    pub use aws_config as config;
    pub use aws_sdk_ec2 as ec2;
    pub use aws_sdk_elasticloadbalancing as elb;
    pub use aws_sdk_elasticloadbalancingv2 as elbv2;
    pub use aws_sdk_iam as iam;
    pub use aws_sdk_kms as kms;
    pub use aws_sdk_resourcegroupstagging as tagging;
    pub use aws_sdk_route53 as route53;
    pub use aws_sdk_s3 as s3;
    pub use aws_sdk_sns as sns;
    pub use aws_sdk_sqs as sqs;
    pub use aws_sdk_ssm as ssm;
    pub use aws_sdk_sts as sts;
}

/// Every SDK client tagwarden uses, built once and shared by all invocations of a warm function.
#[derive(Clone, Debug)]
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub s3: aws_sdk_s3::Client,
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
    /// Classic load balancers.
    pub elb: aws_sdk_elasticloadbalancing::Client,
    pub route53: aws_sdk_route53::Client,
    pub iam: aws_sdk_iam::Client,
    pub kms: aws_sdk_kms::Client,
    pub sns: aws_sdk_sns::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub tagging: aws_sdk_resourcegroupstagging::Client,
    pub region: String,
    /// Every HTTP attempt of the clients above, by operation.
    pub calls: CallCounter,
}

/// Load the SDK configuration from the environment.
///
/// Retries: the SDK's standard mode (exponential backoff with jitter on throttling and transient
/// errors) with 5 attempts — enough to ride out EC2's 10/s tag-write refill without holding an
/// event for long; what still fails goes back to the queue. Timeouts are set so a hung call fails
/// well inside the function's own timeout.
pub async fn load_config() -> Result<SdkConfig, NetworkError> {
    Ok(config_loader()?.load().await)
}

/// The loader behind [`load_config`], for callers that set endpoint or credentials themselves.
///
/// The HTTP client goes through the proxy the environment names (`HTTPS_PROXY`, `HTTP_PROXY`,
/// `NO_PROXY`, read by the SDK's connector) and trusts `TAGWARDEN_CA_BUNDLE` beside the system
/// roots ([`tagwarden_engine::network`]): clusters often reach AWS only through a proxy that re-signs TLS.
/// Credentials come from the SDK's standard chain: environment, shared files (OpenShift's
/// cloud-credential operator mounts one, with static keys in mint mode or `role_arn` +
/// `web_identity_token_file` in STS mode), web identity (`AWS_ROLE_ARN` +
/// `AWS_WEB_IDENTITY_TOKEN_FILE`), container and instance metadata.
pub fn config_loader() -> Result<aws_config::ConfigLoader, NetworkError> {
    let mut trust = tls::TrustStore::default();
    if let Some(bundle) = tagwarden_engine::network::extra_ca_bundle()? {
        trust = trust.with_pem_certificate(bundle.pem);
    }
    let tls_context =
        tls::TlsContext::builder().with_trust_store(trust).build().map_err(|e| NetworkError::Tls(e.to_string()))?;
    // `build_https` offers no proxy setting, so the connector is built here the way it builds it,
    // with the proxy added (aws-smithy-http-client 1.5 `Connector::builder().proxy_config`).
    let http = aws_smithy_http_client::Builder::new().build_with_connector_fn(move |settings, components| {
        let mut builder = aws_smithy_http_client::Connector::builder()
            .proxy_config(aws_smithy_http_client::proxy::ProxyConfig::from_env());
        builder.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            builder.set_sleep_impl(components.sleep_impl());
        }
        builder
            .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
            .tls_context(tls_context.clone())
            .build()
    });
    Ok(aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .retry_config(RetryConfig::standard().with_max_attempts(5))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(10))
                .operation_timeout(Duration::from_secs(30))
                .build(),
        ))
}

/// What every AWS call needs, missing before the first one: said in one line that names the
/// setting and the fix (the SDK's own chain of attempts is in the debug log, `-v`).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("no AWS region: set AWS_REGION (or pass --region, or put `region` in the profile in ~/.aws/config)")]
    NoRegion,
    #[error("no AWS credentials ({0}): set AWS_PROFILE (after `aws sso login` or `aws configure`), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE; on AWS, the instance's or pod's role")]
    NoCredentials(String),
}

/// Check `config` for a region and credentials before the first call, as a person running the
/// CLI would want told. Credentials are resolved once here (the clients resolve them again).
pub async fn preflight(config: &SdkConfig) -> Result<(), SetupError> {
    use aws_credential_types::provider::ProvideCredentials;
    if config.region().is_none() {
        return Err(SetupError::NoRegion);
    }
    if let Some(provider) = config.credentials_provider() {
        if let Err(e) = provider.provide_credentials().await {
            tracing::debug!(error = ?e, "credential chain");
            let why = match &e {
                aws_credential_types::provider::error::CredentialsError::CredentialsNotLoaded(_) => {
                    "none of the usual sources has any".to_string()
                }
                other => tagwarden_core::error_chain(other),
            };
            return Err(SetupError::NoCredentials(why));
        }
    }
    Ok(())
}

impl Clients {
    pub fn new(config: &SdkConfig) -> Self {
        Self::counted(config, CallCounter::default())
    }

    /// [`Clients::new`], counting into `calls`: an organization's clients, one set per member
    /// account and region, count into one.
    pub fn counted(config: &SdkConfig, calls: CallCounter) -> Self {
        // The SDK's retry quota (standard mode: a token bucket of 500, a throttled retry costs 5,
        // any other 14; aws-smithy-runtime `token_bucket.rs`) is by default one per service and
        // region for the whole process (`RetryPartition::new`, a static map). AWS throttles per
        // account and region, so each `Clients` (one account's credentials) gets buckets of its
        // own (`RetryPartition::custom` owns its bucket): one account's throttling never spends
        // another's retries.
        let partition =
            |name: &str| aws_sdk_s3::config::retry::RetryPartition::custom(format!("tagwarden-{name}")).build();
        // A custom endpoint (an emulator, a VPC endpoint) cannot serve virtual-hosted bucket names.
        let s3_conf = aws_sdk_s3::config::Builder::from(config)
            .force_path_style(config.endpoint_url().is_some())
            .retry_partition(partition("s3"))
            .interceptor(crate::calls::CountCalls(calls.clone()))
            .build();
        // Each client with the call counter on its requests and its own retry quota.
        macro_rules! counted {
            ($sdk:ident) => {
                $sdk::Client::from_conf(
                    $sdk::config::Builder::from(config)
                        .retry_partition(partition(stringify!($sdk)))
                        .interceptor(crate::calls::CountCalls(calls.clone()))
                        .build(),
                )
            };
        }
        Clients {
            ec2: counted!(aws_sdk_ec2),
            s3: aws_sdk_s3::Client::from_conf(s3_conf),
            elbv2: counted!(aws_sdk_elasticloadbalancingv2),
            elb: counted!(aws_sdk_elasticloadbalancing),
            route53: counted!(aws_sdk_route53),
            iam: counted!(aws_sdk_iam),
            kms: counted!(aws_sdk_kms),
            sns: counted!(aws_sdk_sns),
            ssm: counted!(aws_sdk_ssm),
            tagging: counted!(aws_sdk_resourcegroupstagging),
            region: config.region().map(|r| r.to_string()).unwrap_or_default(),
            calls,
        }
    }

    pub async fn from_env() -> Result<Self, NetworkError> {
        Ok(Self::new(&load_config().await?))
    }
}
