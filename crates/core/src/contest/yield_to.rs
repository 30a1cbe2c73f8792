//! Whose changes may count toward a contest: the controllers a deployment yields to, and the keys
//! it never yields.

use std::collections::BTreeSet;

use crate::cloud::Cloud;

/// The writers a deployment yields to (`TAGWARDEN_YIELD_TO`): principal patterns with `*` (any
/// run of characters, `/` too) and `?` (one character), matched without case against the writer an
/// event names (CloudTrail's `userIdentity.arn`; on Azure the caller's UPN, `appid` claim or
/// principal id). Only such a writer's changes are counted toward a contest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YieldTo {
    patterns: Vec<String>,
}

/// The AWS controllers tagwarden yields to unless told otherwise: the AWS Load Balancer Controller
/// and Cluster API's AWS provider (CAPA), by the role sessions they act through.
pub const AWS_DEFAULT_YIELD_TO: &[&str] = &[
    "arn:aws*:sts::*:assumed-role/*aws-load-balancer-controller*/*",
    "arn:aws*:sts::*:assumed-role/*controllers.cluster-api-provider-aws.sigs.k8s.io*/*",
    "arn:aws*:sts::*:assumed-role/*capa-controller*/*",
];

/// What `TAGWARDEN_YIELD_TO` is set to to yield to no controller at all.
pub const YIELD_TO_NONE: &str = "none";

impl YieldTo {
    /// Yield to no one: every change is drift.
    pub fn none() -> Self {
        YieldTo { patterns: Vec::new() }
    }

    /// The default for `cloud`: on AWS, [`AWS_DEFAULT_YIELD_TO`]; on Azure none, since an Azure
    /// event names a service principal by its application (client) id only, which differs in every
    /// tenant: a deployment names CAPZ's there.
    pub fn default_for(cloud: Cloud) -> Self {
        match cloud {
            Cloud::Aws => YieldTo { patterns: AWS_DEFAULT_YIELD_TO.iter().map(|p| p.to_string()).collect() },
            // Inferred as on Azure: an audit log names a caller by its service account's email,
            // which is the customer's own, so a deployment names CAPG's.
            Cloud::Azure | Cloud::Gcp => Self::none(),
        }
    }

    /// Comma-separated patterns ([`YIELD_TO_NONE`]: none). The error names the bad pattern and why.
    pub fn parse(list: &str) -> Result<Self, YieldToError> {
        if list.trim().eq_ignore_ascii_case(YIELD_TO_NONE) {
            return Ok(Self::none());
        }
        let mut patterns = Vec::new();
        for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if p.len() > 512 {
                return Err(YieldToError::TooLong(p.to_string()));
            }
            if let Some(c) = p.chars().find(|c| c.is_whitespace() || c.is_control()) {
                return Err(YieldToError::Space { pattern: p.to_string(), found: c });
            }
            if p.chars().all(|c| c == '*' || c == '?') {
                return Err(YieldToError::Everyone(p.to_string()));
            }
            patterns.push(p.to_string());
        }
        if patterns.is_empty() {
            return Err(YieldToError::Empty);
        }
        Ok(YieldTo { patterns })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether a change by `writer` may count toward a contest: an event that names no caller
    /// never does.
    pub fn accepts(&self, writer: Option<&str>) -> bool {
        writer.is_some_and(|w| self.patterns.iter().any(|p| wildcard(p, w)))
    }
}

/// Why a list of patterns is no `YieldTo` (`YieldTo::parse`): the bad pattern and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YieldToError {
    #[error("pattern {0:?} is longer than 512 characters")]
    TooLong(String),
    #[error("pattern {pattern:?} holds {found:?}; a principal has no spaces or control characters")]
    Space { pattern: String, found: char },
    #[error(
        "pattern {0:?} matches every writer, which would let anyone who can remove a tag stop its enforcement; name the controllers' roles (e.g. arn:aws:sts::*:assumed-role/*aws-load-balancer-controller*/*)"
    )]
    Everyone(String),
    #[error("names no pattern; to yield to no controller, set it to {YIELD_TO_NONE}")]
    Empty,
}

/// `*`/`?` wildcard match, ASCII case-insensitive.
fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let t: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether a correction of `key` may count toward a contest: its writer is one the deployment
/// yields to, and the policy does not mark the key `neverYield` (`fold`: keys compare without
/// case, as on Azure).
pub fn may_yield(yield_to: &YieldTo, never_yield: &BTreeSet<String>, key: &str, writer: Option<&str>) -> bool {
    yield_to.accepts(writer) && !never_yield.iter().any(|k| k.eq_ignore_ascii_case(key))
}
