//! Test support for the Azure side: fakes of ARM's Tags API (refusing what ARM refuses,
//! [`arm_rules`]), the managed-identity endpoint and Azure Monitor's custom-metrics endpoint
//! ([`fake`]), a real Azurite blob service with account-SAS URLs ([`azurite`]), one function
//! in-process against them ([`env`]), and a fleet behind Event Grid's delivery ([`grid`]). It
//! needs no AWS crate.

pub mod arm_rules;
pub mod azurite;
pub mod env;
pub mod fake;
pub mod grid;

pub use crate::port::free_port;
pub use crate::workspace::workspace_root;

/// A short random lowercase suffix (container names, ids).
pub fn suffix() -> String {
    format!("{:012x}", crate::random_u64() & 0xffff_ffff_ffff)
}
