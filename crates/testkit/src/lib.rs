//! What tagwarden's tests share, as one library the test targets depend on (never a dependency
//! of what ships): the fake Kubernetes API server ([`kube_api`], feature `kube`), and the loopback
//! port and workspace helpers every server and fixture path uses.
//!
//! Every item is for tests: they panic on what they cannot do, with a message that says what.

#[cfg(feature = "kube")]
pub mod kube_api;
pub mod port;
pub mod workspace;
