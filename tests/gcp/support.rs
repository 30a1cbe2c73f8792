//! What the CLI tests on Google Cloud share: a fleet in the fake, a policy in the emulator, and the
//! binary run with both as its endpoints.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use serde_json::Value;
use tagwarden_testkit::gcp::emulator::gcs_emulator;
use tagwarden_testkit::gcp::FakeGcp;

pub const INFRA: &str = "ocp-gcp-7x2k";
pub const OWNED: &str = "kubernetes-io-cluster-ocp-gcp-7x2k";
pub const POLICY: &str = "version: 1\ncloud: gcp\ninfraID: ocp-gcp-7x2k\ntags: {cost-center: cc-42, team: platform}\n";

/// The fake with two projects under one folder, and a fresh bucket in the emulator.
pub struct Env {
    pub fake: FakeGcp,
    pub bucket: String,
}

/// The fleet: owned resources with drift, one already in line, and another cluster's.
pub struct Fleet {
    pub drifted: Vec<String>,
    pub in_line: String,
    pub other: String,
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

impl Env {
    pub async fn new() -> Env {
        let fake = FakeGcp::start();
        fake.add_project("p-1", 101, &["folders/7", "organizations/9"]);
        fake.add_project("p-2", 102, &["folders/7", "organizations/9"]);
        let bucket = gcs_emulator().bucket().await;
        Env { fake, bucket }
    }

    /// `POLICY` at `gs://BUCKET/NAME`.
    pub async fn put_policy(&self, name: &str) -> String {
        gcs_emulator().put_object(&self.bucket, name, POLICY.as_bytes(), "application/yaml").await;
        format!("gs://{}/{name}", self.bucket)
    }

    pub async fn object(&self, name: &str) -> Option<Vec<u8>> {
        gcs_emulator().get_object(&self.bucket, name).await
    }

    pub fn fleet(&self) -> Fleet {
        let f = &self.fake;
        let drift = [(OWNED, "owned"), ("team", "wrong"), ("keep-me", "yes")];
        Fleet {
            drifted: vec![
                f.add_instance("p-1", "us-central1-a", "master-0", &drift),
                f.add_disk("p-1", "us-central1-a", "master-0-disk", &[(OWNED, "owned")]),
                f.add_bucket("p-2", "ocp-gcp-7x2k-image-registry", "US", &drift),
            ],
            in_line: f.add_instance(
                "p-2",
                "us-central1-b",
                "worker-0",
                &[(OWNED, "owned"), ("cost-center", "cc-42"), ("team", "platform")],
            ),
            other: f.add_instance(
                "p-1",
                "us-central1-b",
                "other-0",
                &[("kubernetes-io-cluster-other-1", "owned"), ("team", "x")],
            ),
        }
    }

    pub fn labels(&self, full: &str) -> BTreeMap<String, String> {
        self.fake.labels(full).unwrap_or_default().into_iter().collect()
    }

    /// `tagwarden ARGS` with the fake and the emulator as Google Cloud, nothing else from the
    /// environment that would change what it does.
    pub fn run(&self, args: &[&str]) -> Output {
        run_with(args, Some(&self.fake.endpoint))
    }
}

/// `tagwarden ARGS`; `endpoint`: every Google API there (else Google's, with ADC).
fn run_with(args: &[&str], endpoint: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tagwarden"));
    cmd.args(args)
        .env_remove("TAGWARDEN_MODE")
        .env_remove("TAGWARDEN_GCP_ENDPOINT")
        .env("STORAGE_EMULATOR_HOST", &gcs_emulator().endpoint);
    if let Some(e) = endpoint {
        cmd.env("TAGWARDEN_GCP_ENDPOINT", e);
    }
    cmd.output().expect("run tagwarden")
}

pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What an owned resource must carry after a sweep: what it had, with the policy's labels laid over.
pub fn corrected(had: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut want = had.clone();
    want.extend(labels(&[("cost-center", "cc-42"), ("team", "platform")]));
    want
}
