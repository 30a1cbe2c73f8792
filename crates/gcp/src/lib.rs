//! tagwarden on Google Cloud: the [`adapter::GcpTagger`] the engine enforces labels through, the
//! [`gcs::GcsSource`] policy store, and the clients they share.
//!
//! - [`target`]: a full resource name's API coordinates, and the types tagwarden writes;
//! - [`labels`]: read a resource's labels with their guard, write them under it;
//! - [`asset`]: the sweep's Cloud Asset Inventory search;
//! - [`gcs`]: the policy (and the status report) in Cloud Storage;
//! - [`metrics`]: the invocation's metrics as Cloud Monitoring custom metrics;
//! - [`function`] and [`config`]: the Cloud Run service that Pub/Sub pushes to;
//! - [`clients`]: the official Google Cloud clients, their endpoints and credentials;
//! - [`error`]: Google's answers as the engine's `CloudError`.

pub mod adapter;
pub mod asset;
pub mod clients;
pub mod config;
pub mod error;
pub mod function;
pub mod gcs;
pub mod labels;
pub mod metrics;
pub mod tags;
pub mod target;

pub use adapter::GcpTagger;
pub use clients::{install_crypto, Clients, Endpoints};
pub use gcs::{GcsLocation, GcsSource};
