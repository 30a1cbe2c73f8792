//! End-to-end tests on AWS, one test binary (each file a module): moto behind the strict layer
//! (`support`, one server for the binary, a fresh account per test), the fleet and fault proxy,
//! and the publisher against the fake Kubernetes API server. One binary links the SDK set once
//! instead of once per file. The log-capturing security test keeps a process of its own
//! (`tests/aws_security.rs`: it installs the process's one subscriber).

#![cfg(feature = "aws")]

use tagwarden_testkit::aws as support;
use tagwarden_testkit::aws::fleet;
#[cfg(feature = "kube")]
use tagwarden_testkit::egress;
#[cfg(feature = "kube")]
use tagwarden_testkit::kube_api;
use tagwarden_testkit::load;
#[cfg(feature = "kube")]
use tagwarden_testkit::publisher;

mod aws_audit;
mod aws_batch;
mod aws_cloud_true;
mod aws_clusters;
mod aws_contested;
mod aws_coverage;
mod aws_faults;
mod aws_load;
mod aws_moto;
mod aws_organization;
mod aws_organization_report;
mod aws_policy_faults;
mod aws_scale_up;
mod publish_aws;
mod publish_cluster;
mod publish_egress;
mod publish_kinds;
