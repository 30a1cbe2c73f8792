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
