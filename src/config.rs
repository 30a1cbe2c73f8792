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
