//! tagwarden keeps a Kubernetes/OpenShift cluster's user-defined tags on every cloud resource the
//! cluster owns, on AWS, Azure and Google Cloud.
//!
//! This crate is the `tagwarden` CLI and a facade over the layer crates, which the compiler keeps
//! in one direction (`crates/`):
//!
//! - `tagwarden-core`: the pure core — [`policy`], [`plan`], [`events`], [`services`],
//!   [`report`], [`status`]. No I/O, no async runtime, no SDK.
//! - `tagwarden-engine`: enforcement, the policy store, retries and pacing, generic over the
//!   cloud (feature `aws`, `azure` or `gcp`).
//! - `tagwarden-aws` ([`aws`]), `tagwarden-azure` ([`azure`]), `tagwarden-gcp` ([`gcp`]): each
//!   cloud's clients and adapter.
//! - `tagwarden-cluster` ([`cluster`], feature `kube`): the Kubernetes side.

pub use tagwarden_core::*;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp", feature = "kube"))]
pub use tagwarden_engine::*;

#[cfg(feature = "aws")]
pub use tagwarden_aws as aws;
#[cfg(feature = "azure")]
pub use tagwarden_azure as azure;
/// Google Cloud: the core's label rules and type table (`tagwarden_core::gcp`) and the cloud's
/// clients and adapter (`tagwarden-gcp`) under the one name the other clouds' crates have (the
/// core names no other cloud's module, so `aws` and `azure` are the crates alone).
#[cfg(feature = "gcp")]
pub mod gcp {
    pub use tagwarden_core::gcp::*;
    pub use tagwarden_gcp::*;
}
#[cfg(feature = "kube")]
pub use tagwarden_cluster as cluster;
