//! End-to-end tests on AWS, one test binary (each file a module): moto behind the strict layer
//! (`support`, one server for the binary, a fresh account per test), the fleet and fault proxy,
//! and the publisher against the fake Kubernetes API server. One binary links the SDK set once
//! instead of once per file. The log-capturing security test keeps a process of its own
//! (`tests/aws_security.rs`: it installs the process's one subscriber).

#![cfg(feature = "aws")]

#[cfg(feature = "kube")]
#[path = "../support/egress.rs"]
#[allow(dead_code)]
mod egress;
#[path = "../support/fleet.rs"]
mod fleet;
#[path = "../support/load.rs"]
mod load;
#[cfg(feature = "kube")]
#[path = "../support/publisher.rs"]
mod publisher;
#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "kube")]
use tagwarden_testkit::kube_api;

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
