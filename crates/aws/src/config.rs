//! The Lambda's configuration, read from the environment once at start-up into typed values; a
//! bad value stops the function before it serves anything, with the variable and the fix.
//!
//! - `TAGWARDEN_POLICY`: `s3://bucket/key`, `s3://bucket/prefix/` or `ssm:/parameter/name`;
//! - `POLICY_TTL`: seconds between policy re-checks on a warm function (default 60);
//! - `TAGWARDEN_CLUSTERS`: the infraIDs the function enforces, comma-separated; required for a
//!   cluster set (`tagwarden_engine::config::clusters`);
//! - `TAGWARDEN_SELF_ROLE_ARN`: the function's role, whose own calls are not reconciled;
//! - `TAGWARDEN_CONCURRENCY`: resources reconciled, and calls in flight, at once in an invocation
//!   (an SQS batch or a sweep; default 10, 1–64);
//! - `TAGWARDEN_EC2_WRITES_PER_SECOND`: the function's own EC2 `CreateTags` calls a second (default
//!   2, 1–100), well under the account's refill of 10 a second that the cluster's controllers share;
//! - `TAGWARDEN_YIELD_TO`: the controllers whose changes may contest a key, as principal patterns
//!   (`tagwarden_engine::config::yield_to`; default: the AWS Load Balancer Controller's and CAPA's
//!   role sessions);
//! - `TAGWARDEN_MODE`: `audit` (evaluate and report everything, write no tag) or `enforce` (the
//!   default when unset; `tagwarden_core::mode`).
//!
//! Deliberately not here: the AWS SDK's own environment (region, credentials,
//! `AWS_ENDPOINT_URL`), which `aws_config` reads, and building clients.

use std::time::Duration;

use super::adapter::DEFAULT_CONCURRENCY;
use super::policy_store::PolicyLocation;
use tagwarden_engine::config::ConfigError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub policy: PolicyLocation,
    pub policy_ttl: Duration,
    /// The clusters enforced (`TAGWARDEN_CLUSTERS`): a set's others are never loaded.
    pub clusters: Option<Vec<String>>,
    /// The function's own role: events it caused are not reconciled.
    pub own: Vec<String>,
    pub concurrency: usize,
    /// EC2 `CreateTags` calls a second at most (`tagwarden_engine::rate_limit`).
    pub ec2_writes_per_second: u32,
    /// The controllers whose changes may contest a key (`TAGWARDEN_YIELD_TO`).
    pub yield_to: tagwarden_core::contest::YieldTo,
    /// The deployment's mode (`TAGWARDEN_MODE`): in audit, nothing is written anywhere.
    pub mode: tagwarden_core::mode::Mode,
}

/// The default pace of one function instance's EC2 writes, as the Terraform module deploys it:
/// with its two concurrent invocations, 4 a second, 40 % of the account's `CreateTags` refill (10 a
/// second, "Request throttling for the Amazon EC2 API"); the cluster keeps the rest. One call
/// carries up to 1000 resources, so a burst needs few.
pub const DEFAULT_EC2_WRITES_PER_SECOND: u32 = 2;

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// The same, from any variable lookup (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let policy = var("TAGWARDEN_POLICY").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_POLICY",
            fix: "set it to s3://bucket/key, s3://bucket/prefix/ or ssm:/parameter/name (the Terraform module does)"
                .into(),
        })?;
        let policy = policy.parse::<PolicyLocation>().map_err(|fix| ConfigError::Invalid {
            var: "TAGWARDEN_POLICY",
            value: policy.clone(),
            problem: "is not a policy location".into(),
            fix,
        })?;
        let policy_ttl = tagwarden_engine::config::policy_ttl(var("POLICY_TTL"))?;
        let set = matches!(policy, PolicyLocation::S3Set { .. } | PolicyLocation::SsmSet { .. });
        let clusters = tagwarden_engine::config::clusters(var("TAGWARDEN_CLUSTERS"), set)?;
        let own = var("TAGWARDEN_SELF_ROLE_ARN").into_iter().collect();
        let concurrency = tagwarden_engine::config::concurrency(var("TAGWARDEN_CONCURRENCY"), DEFAULT_CONCURRENCY)?;
        let ec2_writes_per_second = Self::ec2_writes_per_second(var("TAGWARDEN_EC2_WRITES_PER_SECOND"))?;
        let yield_to = Self::yield_to(var("TAGWARDEN_YIELD_TO"))?;
        let mode = tagwarden_engine::config::mode(var("TAGWARDEN_MODE"))?;
        Ok(Config { policy, policy_ttl, clusters, own, concurrency, ec2_writes_per_second, yield_to, mode })
    }

    /// `TAGWARDEN_YIELD_TO` on AWS (`tagwarden_engine::config::yield_to`): by default the AWS
    /// Load Balancer Controller's and CAPA's role sessions.
    pub fn yield_to(value: Option<String>) -> Result<tagwarden_core::contest::YieldTo, ConfigError> {
        tagwarden_engine::config::yield_to(value, tagwarden_core::cloud::Cloud::Aws)
    }

    /// `TAGWARDEN_EC2_WRITES_PER_SECOND`: 1–100, by default [`DEFAULT_EC2_WRITES_PER_SECOND`].
    pub fn ec2_writes_per_second(value: Option<String>) -> Result<u32, ConfigError> {
        match value {
            None => Ok(DEFAULT_EC2_WRITES_PER_SECOND),
            Some(s) => s.parse::<u32>().ok().filter(|n| (1..=100).contains(n)).ok_or_else(|| ConfigError::Invalid {
                var: "TAGWARDEN_EC2_WRITES_PER_SECOND",
                value: s.clone(),
                problem: "is not a number from 1 to 100 (EC2 CreateTags calls a second)".into(),
                fix: format!("set it to e.g. {DEFAULT_EC2_WRITES_PER_SECOND}, or unset it for the default"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn typed_values_and_errors_that_name_the_variable_and_the_fix() {
        let c = from(&[
            ("TAGWARDEN_POLICY", "ssm:/tagwarden/policy"),
            ("TAGWARDEN_SELF_ROLE_ARN", "arn:aws:iam::1:role/r"),
        ])
        .expect("valid");
        assert_eq!(c.policy, PolicyLocation::Ssm { name: "/tagwarden/policy".into() });
        assert_eq!((c.policy_ttl, c.concurrency, c.own.len()), (Duration::from_secs(60), DEFAULT_CONCURRENCY, 1));

        let e = from(&[]).expect_err("no policy").to_string();
        assert!(e.starts_with("TAGWARDEN_POLICY is not set") && e.contains("s3://"), "{e}");
        let e = from(&[("TAGWARDEN_POLICY", "https://x/p.yaml")]).expect_err("not AWS").to_string();
        assert!(e.contains("TAGWARDEN_POLICY=\"https://x/p.yaml\"") && e.contains("ssm:/PARAMETER"), "{e}");
        let e = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("POLICY_TTL", "1m")]).expect_err("ttl").to_string();
        assert!(e.contains("POLICY_TTL=\"1m\"") && e.contains("e.g. 60"), "{e}");
        assert_eq!(c.ec2_writes_per_second, DEFAULT_EC2_WRITES_PER_SECOND);
        let e = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_EC2_WRITES_PER_SECOND", "0")]).expect_err("rate");
        assert!(e.to_string().contains("TAGWARDEN_EC2_WRITES_PER_SECOND") && e.to_string().contains("e.g. 2"), "{e}");
        let e = from(&[("TAGWARDEN_POLICY", "s3://b/clusters/*/")]).expect_err("a set lists its clusters");
        assert!(e.to_string().starts_with("TAGWARDEN_CLUSTERS is not set"), "{e}");
        let c = from(&[("TAGWARDEN_POLICY", "ssm:/tw/*"), ("TAGWARDEN_CLUSTERS", "a-1,b-2")]).expect("set");
        assert_eq!(c.clusters, Some(vec!["a-1".to_string(), "b-2".to_string()]));
        for bad in ["0", "65", "ten"] {
            let e = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_CONCURRENCY", bad)]).expect_err(bad);
            assert!(e.to_string().contains("from 1 to 64"), "{e}");
        }
    }

    #[test]
    fn mode_is_enforce_unless_set_and_anything_else_names_the_variable_and_the_fix() {
        use tagwarden_core::mode::Mode;
        assert_eq!(from(&[("TAGWARDEN_POLICY", "s3://b/k")]).expect("valid").mode, Mode::Enforce);
        let c = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_MODE", "audit")]).expect("audit");
        assert_eq!(c.mode, Mode::Audit);
        let e = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_MODE", "dry-run")]).expect_err("not a mode");
        let e = e.to_string();
        assert!(e.starts_with("TAGWARDEN_MODE=\"dry-run\" is not a mode") && e.contains("set it to audit"), "{e}");
    }

    #[test]
    fn yield_to_defaults_to_the_controllers_and_a_bad_pattern_names_the_variable() {
        let lbc = "arn:aws:sts::1:assumed-role/aws-load-balancer-controller/s";
        let c = from(&[("TAGWARDEN_POLICY", "s3://b/k")]).expect("valid");
        assert!(c.yield_to.accepts(Some(lbc)) && !c.yield_to.accepts(Some("arn:aws:iam::1:user/alice")));
        let c = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_YIELD_TO", "none")]).expect("none");
        assert!(!c.yield_to.accepts(Some(lbc)));
        let c = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_YIELD_TO", "arn:aws:sts::1:assumed-role/ctl/*")])
            .expect("mine");
        assert!(c.yield_to.accepts(Some("arn:aws:sts::1:assumed-role/ctl/x")) && !c.yield_to.accepts(Some(lbc)));
        let e = from(&[("TAGWARDEN_POLICY", "s3://b/k"), ("TAGWARDEN_YIELD_TO", "*")]).expect_err("everyone");
        assert!(e.to_string().starts_with("TAGWARDEN_YIELD_TO=\"*\"") && e.to_string().contains("every writer"), "{e}");
    }
}
