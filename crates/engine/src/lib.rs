//! tagwarden's engine, once for every cloud: enforcement ([`enforce`]) over a cloud's adapter, the
//! policy store over a cloud's storage ([`policy_store`]), and what every cloud call shares —
//! its error classes ([`cloud_error`]), the one retry table ([`retry`]), write pacing
//! ([`rate_limit`]), one reconcile per resource at a time ([`inflight`]), the proxy and CA bundle
//! ([`network`]) and configuration errors ([`config`]); with the `server` feature, the functions'
//! HTTP/1 server (`server`). Generic over the cloud: no SDK here.

pub mod cloud_error;
pub mod config;
pub mod enforce;
pub mod inflight;
pub mod network;
pub mod policy_store;
mod publishing;
pub mod rate_limit;
pub mod retry;
#[cfg(feature = "server")]
pub mod server;
pub mod status_store;
