//! tagwarden's pure core: what a cluster's tags are and what to do about a resource's, with no I/O,
//! no async runtime and no cloud SDK, so the compiler keeps every layer above out of it.
//!
//! [`policy`] (where desired tags come from and how layers merge), [`policy::validate`] (the exact
//! tag rules of each cloud), [`plan`] (current + desired tags → the one write to make), [`events`]
//! (cloud events → the resources they name), [`services`] (the catalogue of AWS services tagwarden
//! reads and writes), [`mode`] (audit or enforce: deployment, cluster and key), [`contest`] (when
//! to stop correcting a key another controller keeps changing), [`writer`] (who that other writer
//! is, and the documented way to end the fight), [`report`] and [`status`] (what is recorded and
//! reported), [`trigger`] (what a delivered payload asks for) and [`calls`] (the API-call ledger).

pub mod calls;
pub mod cloud;
pub mod cluster_kind;
pub mod contest;
pub mod events;
pub mod gcp;
pub mod mode;
pub mod plan;
pub mod policy;
pub mod publish;
pub mod reason;
pub mod report;
pub mod resource;
pub mod services;
pub mod session_policy;
pub mod status;
pub mod trigger;
pub mod writer;

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
