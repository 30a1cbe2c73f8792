//! A real gcp-storage-emulator (PyPI `gcp-storage-emulator==2026.7.19`, installed into
//! `.tools/venv-gcs` by `scripts/install-tools gcp_storage_emulator`): a Cloud Storage JSON API
//! for the policy objects tagwarden reads, started once per test binary on a free loopback port
//! (`gcp-storage-emulator start --host 127.0.0.1 --port N --in-memory`) and killed when the test
//! process exits; plus helpers that create a bucket and upload and download an object over its
//! JSON API (`POST /storage/v1/b`, `POST /upload/storage/v1/b/{b}/o?uploadType=media&name=`,
//! `GET /storage/v1/b/{b}/o/{o}?alt=media`: the Storage JSON API's own calls).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::json;

use super::http::{encode, request, request_json};
use crate::sidecar::{self, Sidecar, Spec};

pub struct GcsEmulator {
    /// `http://127.0.0.1:<port>`: a Storage client's endpoint (`/storage/v1/…` follows).
    pub endpoint: String,
    _guard: Sidecar,
}

fn binary() -> PathBuf {
    let p = match std::env::var("TAGWARDEN_GCS_EMULATOR") {
        Ok(p) => PathBuf::from(p),
        Err(_) => crate::workspace::workspace_root().join(".tools/venv-gcs/bin/gcp-storage-emulator"),
    };
    assert!(
        p.exists(),
        "gcp-storage-emulator not found at {}: run scripts/install-tools gcp_storage_emulator (PyPI gcp-storage-emulator==2026.7.19 into .tools/venv-gcs), or set TAGWARDEN_GCS_EMULATOR",
        p.display()
    );
    p
}

/// The shared emulator, started on first use.
pub fn gcs_emulator() -> &'static GcsEmulator {
    static EMULATOR: OnceLock<GcsEmulator> = OnceLock::new();
    EMULATOR.get_or_init(start)
}

fn start() -> GcsEmulator {
    let port = crate::port::free_port();
    let dir = std::env::temp_dir().join(format!("tagwarden-gcs-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("gcs emulator work dir");
    let sidecar = sidecar::start(Spec {
        name: "gcp-storage-emulator",
        command: format!("'{}' start --host 127.0.0.1 --port {port} --in-memory", binary().display()),
        port,
        log: Some(dir.join("gcs.log")),
        dir: Some(dir),
        patience: Duration::from_secs(60),
        hint: " (run scripts/install-tools gcp_storage_emulator)",
        // A Python failure (a port taken, a missing module) ends in a traceback.
        exited: Some("Traceback (most recent call last)"),
    });
    GcsEmulator { endpoint: format!("http://127.0.0.1:{port}"), _guard: sidecar }
}

impl GcsEmulator {
    /// A fresh bucket with a name of its own; returns the name.
    pub async fn bucket(&self) -> String {
        let name = format!("policy-{:012x}", crate::random_u64() & 0xffff_ffff_ffff);
        self.create_bucket(&name).await;
        name
    }

    /// Create bucket `name` (`POST /storage/v1/b`, the JSON API's `buckets.insert`).
    pub async fn create_bucket(&self, name: &str) {
        let (status, body) = request_json(
            "POST",
            &format!("{}/storage/v1/b?project=tagwarden", self.endpoint),
            Some(&json!({"name": name})),
        )
        .await;
        assert_eq!(status, 200, "create bucket {name}: {body}");
    }

    /// Upload an object as the Storage clients upload small ones: a multipart upload
    /// (`uploadType=multipart`, `multipart/related`: the JSON metadata, then the bytes; the JSON
    /// API's "Perform a multipart upload"). A media upload of a JSON object would not do here:
    /// the emulator reads any `application/json` body as metadata.
    pub async fn put_object(&self, bucket: &str, name: &str, bytes: &[u8], content_type: &str) {
        let boundary = format!("tagwarden-{:016x}", crate::random_u64());
        let meta = json!({"name": name, "contentType": content_type});
        let mut body = format!(
            "--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\r\n"
        )
        .into_bytes();
        body.extend_from_slice(bytes);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let url = format!("{}/upload/storage/v1/b/{bucket}/o?uploadType=multipart", self.endpoint);
        let (status, answer) = request("POST", &url, &format!("multipart/related; boundary={boundary}"), body).await;
        assert_eq!(status, 200, "upload {bucket}/{name}: {}", String::from_utf8_lossy(&answer));
    }

    /// An object's bytes, `None` when it does not exist.
    pub async fn get_object(&self, bucket: &str, name: &str) -> Option<Vec<u8>> {
        let url = format!("{}/storage/v1/b/{bucket}/o/{}?alt=media", self.endpoint, encode(name));
        match request("GET", &url, "application/octet-stream", vec![]).await {
            (200, body) => Some(body),
            (404, _) => None,
            (s, body) => panic!("download {bucket}/{name}: HTTP {s}: {}", String::from_utf8_lossy(&body)),
        }
    }
}
