//! What tagwarden's tests share, as one library the test targets depend on (never a dependency
//! of what ships):
//!
//! - [`kube_api`] (feature `kube`): a fake Kubernetes API server serving the Infrastructure object
//!   from its real CRD, ConfigMaps and Events;
//! - [`aws`] (feature `aws`): moto behind the strict layer, a fresh account per test, and
//!   [`aws::fleet`], real resources in moto with the events that name them;
//! - [`azure`] (feature `azure`): the fake ARM, managed identity and Azure Monitor, Azurite, the
//!   in-process function, and [`azure::grid`], a fleet behind simulated Event Grid delivery;
//! - [`fault_proxy`] (faults injected in front of either cloud), [`egress`] (a CONNECT proxy, TLS
//!   fronts, a fake Entra token endpoint), [`publisher`] (`tagwarden publish` as the Deployment
//!   runs it), [`load`] (the load tests' sizes and memory);
//! - [`sidecar`], the one way an emulator process is started beside the tests, and [`port`] and
//!   [`workspace`], the loopback-port and workspace-root helpers everything above uses.
//!
//! A feature per cloud keeps one cloud's tests from building the other cloud's SDK. Every item is
//! for tests: it panics on what it cannot do, with a message that says what.

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "azure")]
pub mod azure;
pub mod egress;
pub mod fault_proxy;
#[cfg(feature = "gcp")]
pub mod gcp;
#[cfg(feature = "kube")]
pub mod kube_api;
pub mod load;
pub mod port;
pub mod publisher;
pub mod sidecar;
pub mod workspace;

/// A pseudo-random number, different per call and per process (account ids, names): enough for
/// tests that must not see each other's resources, nothing secret.
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::Instant::now().elapsed().as_nanos() ^ u128::from(std::process::id()));
    h.finish()
}

/// A seeded xorshift64* generator for shuffling and picking duplicates: the same seed gives the
/// same duplicates and order, so a failing run can be replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}
