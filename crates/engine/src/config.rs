//! What both functions' configurations share: one error that names the variable, what is wrong
//! with its value, and the fix. Each cloud's `Config` (`aws::config`, `azure::config`) reads its
//! environment once at start-up into typed values; a bad value stops the function before it
//! serves anything.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{var} is not set: {fix}")]
    Missing { var: &'static str, fix: String },
    #[error("{var}={value:?} {problem}: {fix}")]
    Invalid { var: &'static str, value: String, problem: String, fix: String },
}

/// Seconds between policy re-checks on a warm function, when not set.
pub const DEFAULT_POLICY_TTL: u64 = 60;

/// `POLICY_TTL`, the same for both functions.
pub fn policy_ttl(value: Option<String>) -> Result<std::time::Duration, ConfigError> {
    let secs = match value {
        None => DEFAULT_POLICY_TTL,
        Some(s) => s.parse::<u64>().map_err(|_| ConfigError::Invalid {
            var: "POLICY_TTL",
            value: s.clone(),
            problem: "is not a number of seconds".into(),
            fix: format!("set it to e.g. {DEFAULT_POLICY_TTL}, or unset it for the default"),
        })?,
    };
    Ok(std::time::Duration::from_secs(secs))
}

/// `TAGWARDEN_YIELD_TO`, the same for both functions: the controllers whose changes may contest a
/// key (`tagwarden_core::contest::YieldTo`), as comma-separated principal patterns (`*`, `?`), or
/// `none`; `cloud`'s default when unset. Any other writer's change is drift, corrected every time.
pub fn yield_to(
    value: Option<String>,
    cloud: tagwarden_core::cloud::Cloud,
) -> Result<tagwarden_core::contest::YieldTo, ConfigError> {
    use tagwarden_core::contest::YieldTo;
    let Some(s) = value else { return Ok(YieldTo::default_for(cloud)) };
    YieldTo::parse(&s).map_err(|problem| ConfigError::Invalid {
        var: "TAGWARDEN_YIELD_TO",
        value: s.clone(),
        problem: problem.to_string(),
        fix: "set it to the principal patterns of the controllers tagwarden yields to, comma-separated (e.g. arn:aws:sts::*:assumed-role/*aws-load-balancer-controller*/*; on Azure the controller's client id), or none, or unset it for the default".into(),
    })
}

/// `TAGWARDEN_MODE`, the same for both functions (and an AWS organization's hub): `audit`
/// (evaluate and report everything, write no tag) or `enforce`; unset, `enforce`
/// (`tagwarden_core::mode`).
pub fn mode(value: Option<String>) -> Result<tagwarden_core::mode::Mode, ConfigError> {
    tagwarden_core::mode::Mode::from_var(value.as_deref()).map_err(|e| ConfigError::Invalid {
        var: tagwarden_core::mode::MODE_VAR,
        value: e.value,
        problem: "is not a mode".into(),
        fix: "set it to audit (evaluate and report, write no tag) or enforce (write), or unset it for enforce".into(),
    })
}

/// `TAGWARDEN_CONCURRENCY`, the same for both functions: resources reconciled, and calls in flight,
/// at once in an invocation, from 1 to 64; `default` (the cloud's) when unset.
pub fn concurrency(value: Option<String>, default: usize) -> Result<usize, ConfigError> {
    let Some(s) = value else { return Ok(default) };
    s.parse::<usize>().ok().filter(|n| (1..=64).contains(n)).ok_or_else(|| ConfigError::Invalid {
        var: "TAGWARDEN_CONCURRENCY",
        value: s.clone(),
        problem: "is not a number from 1 to 64 (resources reconciled at once)".into(),
        fix: format!("set it to e.g. {default}, or unset it for the default"),
    })
}

/// `TAGWARDEN_CLUSTERS`, the same for both functions: the infraIDs the deployment enforces,
/// comma-separated. A cluster set (`set`) needs it: a folder of a cluster not listed is never
/// loaded, so a publisher that writes one gains nothing. A single policy is checked against it
/// when it is set.
pub fn clusters(value: Option<String>, set: bool) -> Result<Option<Vec<String>>, ConfigError> {
    const VAR: &str = "TAGWARDEN_CLUSTERS";
    let Some(value) = value else {
        if set {
            return Err(ConfigError::Missing {
                var: VAR,
                fix: "a cluster set (TAGWARDEN_POLICY ending in */ or *) is enforced only for the clusters the deployment lists: set it to their infraIDs, comma-separated (the Terraform module sets it from infra_ids)".into(),
            });
        }
        return Ok(None);
    };
    let mut ids: Vec<String> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if let Some(problem) = ids.iter().find_map(|id| tagwarden_core::policy::clusters::valid_infra_id(id).err()) {
        return Err(ConfigError::Invalid {
            var: VAR,
            value,
            problem: problem.to_string(),
            fix: "list the clusters' infraIDs (status.infrastructureName), comma-separated, e.g. mycluster-7xk2p,other-4hq8s".into(),
        });
    }
    if ids.is_empty() {
        return Err(ConfigError::Invalid {
            var: VAR,
            value,
            problem: "names no infraID".into(),
            fix: "list the clusters' infraIDs, comma-separated, or unset it for a single policy".into(),
        });
    }
    ids.sort();
    ids.dedup();
    Ok(Some(ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_are_listed_for_a_set_and_checked() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(clusters(None, false), Ok(None));
        assert_eq!(clusters(some(" b-2, a-1 ,,a-1"), true), Ok(Some(vec!["a-1".into(), "b-2".into()])));
        let e = clusters(None, true).expect_err("a set lists its clusters").to_string();
        assert!(e.starts_with("TAGWARDEN_CLUSTERS is not set") && e.contains("infra_ids"), "{e}");
        for bad in ["a-1,../b", "a/b", " , "] {
            let e = clusters(some(bad), true).expect_err(bad).to_string();
            assert!(e.starts_with("TAGWARDEN_CLUSTERS=") && e.contains("comma-separated"), "{e}");
        }
    }
}
