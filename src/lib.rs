//! tagwarden keeps a Kubernetes/OpenShift cluster's user-defined tags on every cloud resource the
//! cluster owns, on AWS and Azure.
//!
//! The core of the crate is pure: [`policy`] (where desired tags come from and how layers merge),
//! [`policy::validate`] (the exact tag rules of each cloud), [`plan`] (current + desired tags → the one write
//! to make) and [`events`] (cloud events → the resources they name). None of it does I/O, so it is
//! fast to test and to benchmark. Cloud clients live behind the `aws` and `azure` features, the Kubernetes side
//! ([`cluster`]) behind `kube`.

#[cfg(any(feature = "aws", feature = "azure"))]
pub mod calls;
pub mod cloud;
#[cfg(any(feature = "aws", feature = "azure"))]
pub mod cloud_error;
#[cfg(feature = "kube")]
pub mod cluster;
#[cfg(any(feature = "aws", feature = "azure"))]
pub mod config;
#[cfg(any(feature = "aws", feature = "azure"))]
pub mod enforce;
pub mod events;
#[cfg(any(feature = "aws", feature = "azure"))]
pub mod inflight;
#[cfg(any(feature = "aws", feature = "azure"))]
pub mod network;
pub mod plan;
pub mod policy;
pub mod publish;
#[cfg(any(feature = "aws", feature = "azure"))]
pub mod rate_limit;
pub mod report;
pub mod resource;
#[cfg(any(feature = "aws", feature = "azure", feature = "kube"))]
pub mod retry;
pub mod services;
pub mod status;
pub mod trigger;

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "azure")]
pub mod azure;

/// A resource's tags, or a set of desired tags: key → value, ordered by key so that every output
/// and every hash derived from it is deterministic.
pub type TagMap = std::collections::BTreeMap<String, String>;

/// An error and its causes on one line, each cause once: the SDKs' own `Display` of a failed
/// connection is only "dispatch failure" or "client error (Connect)", and the reason (refused,
/// certificate not trusted, no region …) is further down. No `Debug` forms: those are for `-v`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    // Some causes span lines (the AWS SDK's list of credential sources tried): one line here.
    let one_line = |e: &dyn std::error::Error| e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = one_line(e);
    let mut next = e.source();
    while let Some(cause) = next {
        let text = one_line(cause);
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}
