//! Test support for the Azure side: fakes of ARM's Tags API (refusing what ARM refuses,
//! [`arm_rules`]), the managed-identity endpoint and Azure Monitor's custom-metrics endpoint
//! ([`fake`]), and a real Azurite blob service with
//! account-SAS URLs ([`azurite`]). Included with `#[path]` by `tests/azure/main.rs`, `tests/azure_security.rs` and by
//! `functions/azure-function/tests/` (it needs no AWS crate).

#![allow(dead_code)]

pub mod arm_rules;
pub mod azurite;
pub mod env;
pub mod fake;

use std::net::TcpListener;
use std::path::PathBuf;

/// The workspace root (where Cargo.lock is), whichever package's tests include this module.
pub fn workspace_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("Cargo.lock").exists() && dir.pop() {}
    dir
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// A short random lowercase suffix (container names, ids).
pub fn suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::Instant::now().elapsed().as_nanos() ^ u128::from(std::process::id()));
    format!("{:012x}", h.finish() & 0xffff_ffff_ffff)
}
