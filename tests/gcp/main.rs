//! End-to-end tests of the `tagwarden` CLI on Google Cloud, one test binary (each file a module):
//! the built binary against the fake Google Cloud APIs (`tagwarden_testkit::gcp::FakeGcp`, reached
//! through `TAGWARDEN_GCP_ENDPOINT`) and the real gcp-storage-emulator holding the policy and the
//! status report (`STORAGE_EMULATOR_HOST`).

#![cfg(feature = "gcp")]

mod gcp_explain;
#[cfg(feature = "kube")]
mod gcp_publish_kinds;
mod gcp_sweep_cli;
mod support;
