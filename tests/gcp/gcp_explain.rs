//! `tagwarden explain` on Google Cloud's deliveries: a Pub/Sub push of an audit log (what the
//! function receives) and a bare LogEntry (what `gcloud logging read --format=json` prints), from
//! the real fixtures in tests/fixtures/events/gcp, each read as its `.expected.json` says.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/events/gcp").join(name)
}

fn explain(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tagwarden")).arg("explain").args(args).output().expect("run tagwarden");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_push_delivery_and_a_log_entry_are_explained_as_the_function_reads_them() {
    for name in ["push-compute-instance-insert-last", "compute-instance-insert-first", "storage-bucket-create"] {
        let input = fixture(&format!("{name}.json"));
        let (code, stdout) = explain(&["--json", input.to_str().expect("utf-8 path")]);
        assert_eq!(code, Some(0), "{name}: {stdout}");
        let got: Value = serde_json::from_str(&stdout).expect("JSON");
        let want: Value =
            serde_json::from_slice(&std::fs::read(fixture(&format!("{name}.expected.json"))).expect("read"))
                .expect("expected JSON");
        for (k, v) in want.as_object().expect("an object") {
            assert_eq!(&got[k], v, "{name}: {k}");
        }
    }
    let (code, human) = explain(&[fixture("push-compute-instance-insert-last.json").to_str().expect("utf-8")]);
    assert_eq!(code, Some(0));
    assert!(human.starts_with("gcp compute beta.compute.instances.insert → create"), "{human}");
    assert!(human.contains("//compute.googleapis.com/projects/events-atamel/zones/us-central1-a/instances/instance-1"));
}
