//! The Lambda's one handler: built once at start-up from the environment, as one account's
//! engine or an organization's hub, then handed every payload (`super::function`).
//!
//! Which one the environment asks for:
//! - `TAGWARDEN_ORGANIZATION` set: the hub (`super::organization::OrgConfig`: with
//!   `TAGWARDEN_MEMBER_ROLE`, `TAGWARDEN_MEMBER_REGIONS`, `TAGWARDEN_CLUSTERS`, optionally
//!   `TAGWARDEN_SHARD_QUEUE_URL` …), with `POLICY_TTL`, `TAGWARDEN_SELF_ROLE_ARN`,
//!   `TAGWARDEN_CONCURRENCY`, `TAGWARDEN_EC2_WRITES_PER_SECOND`, `TAGWARDEN_MODE` and
//!   `TAGWARDEN_YIELD_TO`;
//! - otherwise one account's engine (`super::config::Config`, from `TAGWARDEN_POLICY` on).
//!
//! A bad or missing value stops the function before it serves anything, with the variable and
//! the fix ([`StartError`]).
//!
//! Deliberately not here: the Runtime API (`functions/aws-lambda`), and what a payload does
//! (`super::function`).

use std::fmt;

use aws_config::SdkConfig;
use futures_util::future::BoxFuture;

use crate::config::Config;
use crate::deadline::Deadline;
use crate::function::{walk, Invocation, Target};
use crate::organization::{OrgConfig, Organization, Settings};
use crate::policy_store::policy_store;
use crate::{Clients, Tagger};
use tagwarden_core::contest::YieldTo;
use tagwarden_engine::config::ConfigError;
use tagwarden_engine::enforce::Engine;
use tagwarden_engine::network::NetworkError;
use tagwarden_engine::rate_limit::RateLimit;

/// Why the function cannot start: the variable at fault and the fix, in one line.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Neither deployment's variable is set.
    #[error(
        "TAGWARDEN_POLICY is not set (nor TAGWARDEN_ORGANIZATION): set TAGWARDEN_POLICY to s3://bucket/key, \
         s3://bucket/prefix/ or ssm:/parameter/name for one account's function, or TAGWARDEN_ORGANIZATION to \
         s3://BUCKET/PREFIX/ (with TAGWARDEN_MEMBER_ROLE, TAGWARDEN_MEMBER_REGIONS and TAGWARDEN_CLUSTERS) for an \
         organization's hub (the Terraform modules set them)"
    )]
    NotConfigured,
    /// A variable of the deployment asked for is missing or wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The network settings (`TAGWARDEN_CA_BUNDLE`).
    #[error(transparent)]
    Network(#[from] NetworkError),
}

/// The deployment the environment asks for, read and validated (no clients yet).
#[derive(Debug, Clone)]
pub enum Deployment {
    /// One account's engine.
    Account(Config),
    /// An organization's hub.
    Hub { org: OrgConfig, settings: Settings, yield_to: YieldTo },
}

impl Deployment {
    /// From any variable lookup (`std::env::var` in the function, a table in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, StartError> {
        let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let Some(org) = OrgConfig::from_lookup(&get)? else {
            if var("TAGWARDEN_POLICY").is_none() {
                return Err(StartError::NotConfigured);
            }
            return Ok(Deployment::Account(Config::from_lookup(&get)?));
        };
        let settings = Settings {
            policy_ttl: tagwarden_engine::config::policy_ttl(var("POLICY_TTL"))?,
            own: var("TAGWARDEN_SELF_ROLE_ARN").into_iter().collect(),
            concurrency: tagwarden_engine::config::concurrency(
                var("TAGWARDEN_CONCURRENCY"),
                crate::adapter::DEFAULT_CONCURRENCY,
            )?,
            ec2_writes_per_second: Config::ec2_writes_per_second(var("TAGWARDEN_EC2_WRITES_PER_SECOND"))?,
            dry_run: false,
            mode: tagwarden_engine::config::mode(var("TAGWARDEN_MODE"))?,
        };
        let yield_to = Config::yield_to(var("TAGWARDEN_YIELD_TO"))?;
        Ok(Deployment::Hub { org, settings, yield_to })
    }
}

/// The Lambda's handler: one account's engine, or an organization's hub; every payload goes
/// through the one walk of `super::function` either way.
pub enum Handler {
    /// One account (`TAGWARDEN_POLICY`): the function's own account and region.
    Account(Box<Engine<Tagger>>),
    /// An organization's hub (`TAGWARDEN_ORGANIZATION`): every member account's clusters
    /// through the role it assumes there (`super::organization`). Boxed, as the engine is: each
    /// is large, and built once.
    Hub(Box<Organization>),
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Handler::Account(_) => "Handler::Account",
            Handler::Hub(_) => "Handler::Hub",
        })
    }
}

impl Handler {
    /// From the function's environment: the deployment it asks for, then the standard AWS SDK
    /// environment (region, credentials, `AWS_ENDPOINT_URL`, `TAGWARDEN_CA_BUNDLE`).
    pub async fn from_env() -> Result<Self, StartError> {
        let deployment = Deployment::from_lookup(|k| std::env::var(k).ok())?;
        let sdk = crate::load_config().await?;
        Ok(Handler::new(deployment, &sdk))
    }

    /// From any variable lookup, over an SDK configuration already loaded (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>, sdk: &SdkConfig) -> Result<Self, StartError> {
        Ok(Handler::new(Deployment::from_lookup(get)?, sdk))
    }

    /// The clients and the engine (or the hub) of `deployment` (no network yet).
    pub fn new(deployment: Deployment, sdk: &SdkConfig) -> Self {
        match deployment {
            Deployment::Account(config) => Handler::Account(Box::new(engine(config, sdk))),
            Deployment::Hub { org, settings, yield_to } => {
                tracing::info!(accounts = org.clusters.len(), regions = org.regions.len(), "organization hub");
                let mut org = Organization::new(sdk, org, settings);
                org.yield_to = yield_to;
                Handler::Hub(Box::new(org))
            }
        }
    }

    /// Handle one payload (the invocation's JSON text) by `deadline`. Boxed: the SDK's nested
    /// futures are too deep to lay out inline.
    pub fn handle(&self, payload: String, deadline: Deadline) -> BoxFuture<'_, Invocation> {
        Box::pin(walk(self.target(), payload, deadline))
    }

    fn target(&self) -> Target<'_> {
        match self {
            Handler::Account(engine) => Target::Account(engine),
            Handler::Hub(org) => Target::Hub(org),
        }
    }
}

/// One account's engine.
fn engine(config: Config, sdk: &SdkConfig) -> Engine<Tagger> {
    if config.own.is_empty() {
        tracing::warn!("TAGWARDEN_SELF_ROLE_ARN is not set: own writes are recognised by idempotent planning only");
    }
    let clients = Clients::new(sdk);
    // The function's account, from its role's ARN (`arn:aws:iam::<account>:role/…`): S3 tagging
    // calls name it as the expected bucket owner.
    let account = config.own.iter().find_map(|arn| {
        arn.split(':').nth(4).filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit())).map(str::to_owned)
    });
    let tagger = Tagger {
        ec2_writes: Some(RateLimit::per_second(f64::from(config.ec2_writes_per_second))),
        account,
        ..Tagger::new(clients.clone())
    };
    let store = policy_store(&clients, config.policy, config.policy_ttl).with_clusters(config.clusters);
    let mut engine = Engine::new(tagger, store, config.own);
    engine.set_concurrency(config.concurrency);
    engine.yield_to = config.yield_to;
    engine.mode = config.mode;
    tracing::info!(mode = %config.mode, "deployment mode");
    engine
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    /// An SDK configuration with no network behind it: clients are built, never called.
    fn offline() -> SdkConfig {
        SdkConfig::builder()
            .region(aws_config::Region::new("us-east-1"))
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build()
    }

    const HUB: &[(&str, &str)] = &[
        ("TAGWARDEN_ORGANIZATION", "s3://hub-policies/accounts/"),
        ("TAGWARDEN_MEMBER_ROLE", "tagwarden-member"),
        ("TAGWARDEN_MEMBER_REGIONS", "us-east-1,eu-west-1"),
        ("TAGWARDEN_CLUSTERS", "111122223333/prod-7xk2p"),
        ("TAGWARDEN_SELF_ROLE_ARN", "arn:aws:iam::999988887777:role/tagwarden-hub"),
    ];

    #[test]
    fn the_organization_variables_choose_the_hub() {
        let h = Handler::from_lookup(lookup(HUB), &offline()).expect("hub");
        assert!(matches!(h, Handler::Hub(_)), "{h:?}");
        // TAGWARDEN_POLICY beside them changes nothing: the organization's variable decides.
        let mut both = HUB.to_vec();
        both.push(("TAGWARDEN_POLICY", "s3://b/k"));
        let Deployment::Hub { org, settings, .. } = Deployment::from_lookup(lookup(&both)).expect("hub") else {
            panic!("the hub");
        };
        assert_eq!((org.bucket.as_str(), org.role_name.as_str()), ("hub-policies", "tagwarden-member"));
        assert_eq!(settings.own, vec!["arn:aws:iam::999988887777:role/tagwarden-hub".to_string()]);
        assert_eq!(settings.concurrency, crate::adapter::DEFAULT_CONCURRENCY);
    }

    #[test]
    fn the_policy_alone_chooses_one_accounts_engine() {
        let vars = [("TAGWARDEN_POLICY", "s3://policies/infra.json"), ("TAGWARDEN_MODE", "audit")];
        let h = Handler::from_lookup(lookup(&vars), &offline()).expect("one account");
        let Handler::Account(engine) = &h else { panic!("one account's engine, not {h:?}") };
        assert_eq!(engine.mode, tagwarden_core::mode::Mode::Audit);
    }

    #[test]
    fn neither_complete_names_the_missing_variable_and_the_fix() {
        let e = Deployment::from_lookup(lookup(&[])).expect_err("nothing set");
        assert!(matches!(e, StartError::NotConfigured), "{e:?}");
        let e = e.to_string();
        assert!(e.starts_with("TAGWARDEN_POLICY is not set") && e.contains("TAGWARDEN_ORGANIZATION to s3://"), "{e}");
        // Blank is unset.
        let blank = [("TAGWARDEN_POLICY", "  "), ("TAGWARDEN_ORGANIZATION", "")];
        assert!(matches!(Deployment::from_lookup(lookup(&blank)), Err(StartError::NotConfigured)));
        // A hub without its member role: that variable, and its fix.
        let partial: Vec<_> = HUB.iter().filter(|(k, _)| *k != "TAGWARDEN_MEMBER_ROLE").copied().collect();
        let e = Deployment::from_lookup(lookup(&partial)).expect_err("no member role");
        assert!(matches!(&e, StartError::Config(ConfigError::Missing { var: "TAGWARDEN_MEMBER_ROLE", .. })), "{e:?}");
        assert!(e.to_string().contains("spoke role's name"), "{e}");
        // A hub's own settings are checked too.
        let mut bad = HUB.to_vec();
        bad.push(("TAGWARDEN_CONCURRENCY", "0"));
        let e = Deployment::from_lookup(lookup(&bad)).expect_err("concurrency");
        assert!(e.to_string().contains("TAGWARDEN_CONCURRENCY"), "{e}");
        // One account's policy that is not one: its variable.
        let e = Deployment::from_lookup(lookup(&[("TAGWARDEN_POLICY", "https://x/p.yaml")])).expect_err("not AWS");
        assert!(matches!(&e, StartError::Config(ConfigError::Invalid { var: "TAGWARDEN_POLICY", .. })), "{e:?}");
    }
}
