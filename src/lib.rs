//! tagwarden keeps a Kubernetes/OpenShift cluster's user-defined tags on every cloud resource the
//! cluster owns, on AWS and Azure.
//!
//! This crate is the `tagwarden` CLI and a facade over the layer crates, which the compiler keeps
//! in one direction (`crates/`):
//!
//! - `tagwarden-core`: the pure core — [`policy`], [`plan`], [`events`], [`services`],
//!   [`report`], [`status`]. No I/O, no async runtime, no SDK.
//! - `tagwarden-engine`: enforcement, the policy store, retries and pacing, generic over the
//!   cloud (feature `aws` or `azure`).
//! - `tagwarden-aws` ([`aws`]), `tagwarden-azure` ([`azure`]): each cloud's clients and adapter.
//! - `tagwarden-cluster` ([`cluster`], feature `kube`): the Kubernetes side.

pub use tagwarden_core::*;
#[cfg(any(feature = "aws", feature = "azure", feature = "kube"))]
pub use tagwarden_engine::*;

#[cfg(feature = "aws")]
pub use tagwarden_aws as aws;
#[cfg(feature = "azure")]
pub use tagwarden_azure as azure;
#[cfg(feature = "kube")]
pub use tagwarden_cluster as cluster;
