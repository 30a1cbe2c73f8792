//! End-to-end tests on Azure, one test binary (each file a module): the fake ARM answering in
//! recorded shapes, Azurite, the fault proxy, and the publisher against the fake Kubernetes API
//! server. One binary links once instead of once per file. The log-capturing security test keeps a
//! process of its own (`tests/azure_security.rs`: it installs the process's one subscriber).

#![cfg(feature = "azure")]

use tagwarden_testkit::azure as support;
use tagwarden_testkit::azure::grid;
#[cfg(feature = "kube")]
use tagwarden_testkit::egress;
use tagwarden_testkit::fault_proxy;
#[cfg(feature = "kube")]
use tagwarden_testkit::kube_api;
use tagwarden_testkit::load;
#[cfg(feature = "kube")]
use tagwarden_testkit::publisher;

mod azure_arm_contract;
mod azure_arm_rules;
mod azure_audit;
mod azure_enforce;
mod azure_faults;
mod azure_load;
mod azure_policy_faults;
mod azure_resource_graph;
mod azure_sweep_cli;
mod publish_azure;
mod publish_workload_identity;
