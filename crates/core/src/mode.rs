//! Audit or enforce: whether tagwarden writes what it plans.
//!
//! Three settings choose it, and the strictest wins:
//!
//! - the deployment's [`Mode`] (`TAGWARDEN_MODE`, read by each function's configuration): in
//!   `audit`, every cluster it serves is audited;
//! - the cluster's policy (`enforce: false`): every key of that cluster is audited;
//! - the policy's `auditKeys`: those keys are audited, the others enforced.
//!
//! Audited means evaluated exactly as in enforce — the same reads, the same plan, the same
//! records — and never written: the change is reported as what would be written
//! ([`crate::plan::Plan::audit`]). A person's dry run is an audit of everything.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::policy::Policy;

/// The environment variable both functions read the deployment's mode from.
pub const MODE_VAR: &str = "TAGWARDEN_MODE";

/// The deployment's mode. Unset means [`Mode::Enforce`] (the Terraform modules set it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Evaluate and report everything; write no tag.
    Audit,
    /// Write what the policies ask for, except what a cluster or a key audits.
    #[default]
    Enforce,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Audit => "audit",
            Mode::Enforce => "enforce",
        }
    }

    /// `TAGWARDEN_MODE`'s value (`None`: unset, [`Mode::Enforce`]).
    pub fn from_var(value: Option<&str>) -> Result<Mode, ModeError> {
        match value.map(str::trim).filter(|v| !v.is_empty()) {
            None => Ok(Mode::Enforce),
            Some(v) => v.parse(),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deployment mode that is neither `audit` nor `enforce`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MODE_VAR}={value:?} is not a mode: set it to audit (evaluate and report, write nothing) or enforce (write), or unset it for enforce")]
pub struct ModeError {
    pub value: String,
}

impl FromStr for Mode {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "audit" => Ok(Mode::Audit),
            "enforce" => Ok(Mode::Enforce),
            other => Err(ModeError { value: other.to_string() }),
        }
    }
}

/// How a cluster stands, all three settings taken: every key audited, every key enforced, or
/// some keys audited beside enforced ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterMode {
    Audit,
    Enforce,
    Mixed,
}

impl ClusterMode {
    /// The strictest of the deployment's `mode` and `policy`'s `enforce` and `auditKeys`.
    pub fn of(mode: Mode, policy: &Policy) -> ClusterMode {
        if mode == Mode::Audit || !policy.enforce {
            ClusterMode::Audit
        } else if policy.audit_keys.is_empty() {
            ClusterMode::Enforce
        } else {
            ClusterMode::Mixed
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClusterMode::Audit => "audit",
            ClusterMode::Enforce => "enforce",
            ClusterMode::Mixed => "mixed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_enforce_and_anything_else_names_the_variable_and_the_fix() {
        assert_eq!(Mode::from_var(None), Ok(Mode::Enforce));
        assert_eq!(Mode::from_var(Some(" ")), Ok(Mode::Enforce));
        assert_eq!(Mode::from_var(Some("audit")), Ok(Mode::Audit));
        assert_eq!(Mode::from_var(Some(" enforce ")), Ok(Mode::Enforce));
        for bad in ["Audit", "dry-run", "true", "report"] {
            let e = Mode::from_var(Some(bad)).expect_err(bad).to_string();
            assert!(
                e.starts_with(&format!("TAGWARDEN_MODE={bad:?}")) && e.contains("audit") && e.contains("unset"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_strictest_setting_wins() {
        let load = |t: &str| crate::policy::load::load_one("p.yaml", t).expect("policy");
        let plain = load("version: 1\ntags: {team: a, env: b}\n");
        let keys = load("version: 1\ntags: {team: a, env: b}\nauditKeys: [env]\n");
        let off = load("version: 1\nenforce: false\ntags: {team: a, env: b}\nauditKeys: [env]\n");
        assert_eq!(ClusterMode::of(Mode::Enforce, &plain), ClusterMode::Enforce);
        assert_eq!(ClusterMode::of(Mode::Enforce, &keys), ClusterMode::Mixed);
        assert_eq!(ClusterMode::of(Mode::Enforce, &off), ClusterMode::Audit);
        for p in [&plain, &keys, &off] {
            assert_eq!(ClusterMode::of(Mode::Audit, p), ClusterMode::Audit);
        }
    }
}
