//! A real Azurite blob service (npm `azurite@3.35.0`, installed into `.tools/node` by
//! `scripts/install-tools azurite`), started once per test binary on a free loopback port and
//! killed when the test process exits; plus account-SAS URLs signed with the well-known
//! `devstoreaccount1` key (HMAC-SHA256, Azure's documentation) and small blob helpers.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tagwarden_azure::reqwest;

use crate::sidecar::{self, Sidecar, Spec};

pub const ACCOUNT: &str = "devstoreaccount1";
pub const KEY: &str = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const SAS_VERSION: &str = "2020-08-04";

pub struct Azurite {
    /// `http://127.0.0.1:<port>/devstoreaccount1`
    pub endpoint: String,
    _guard: Sidecar,
}

fn azurite_blob_binary() -> PathBuf {
    let p = match std::env::var("TAGWARDEN_AZURITE_BLOB") {
        Ok(p) => PathBuf::from(p),
        Err(_) => super::workspace_root().join(".tools/node/node_modules/.bin/azurite-blob"),
    };
    assert!(
        p.exists(),
        "azurite-blob not found at {}: run scripts/install-tools azurite (npm azurite@3.35.0 into .tools/node; needs node and npm), or set TAGWARDEN_AZURITE_BLOB",
        p.display()
    );
    p
}

/// The shared Azurite, started on first use under a shell that kills it when this test process
/// exits (the shell's stdin, our pipe, closes).
pub fn azurite() -> &'static Azurite {
    static AZURITE: OnceLock<Azurite> = OnceLock::new();
    AZURITE.get_or_init(|| start("", "http"))
}

/// An Azurite of its own that takes bearer tokens (`--oauth basic`, which Azurite serves only
/// over HTTPS): `cert` and `key` are PEM files, the endpoint is `https://127.0.0.1:<port>/…`.
pub fn azurite_oauth(cert: &std::path::Path, key: &std::path::Path) -> Azurite {
    start(&format!("--oauth basic --cert '{}' --key '{}'", cert.display(), key.display()), "https")
}

fn start(extra: &str, scheme: &str) -> Azurite {
    let port = super::free_port();
    let bin = azurite_blob_binary();
    let dir = std::env::temp_dir().join(format!("tagwarden-azurite-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("azurite work dir");
    let sidecar = sidecar::start(Spec {
        name: "azurite-blob",
        command: format!(
            "'{}' --blobHost 127.0.0.1 --blobPort {port} --inMemoryPersistence --skipApiVersionCheck --loose --disableTelemetry {extra}",
            bin.display()
        ),
        port,
        log: Some(dir.join("azurite.log")),
        dir: Some(dir),
        patience: Duration::from_secs(60),
        hint: " (is node on PATH? run scripts/install-tools azurite)",
        // What Azurite logs when it gives up (a port taken, a bad certificate).
        exited: Some("Exit due to"),
    });
    Azurite { endpoint: format!("{scheme}://127.0.0.1:{port}/{ACCOUNT}"), _guard: sidecar }
}

pub fn account_sas() -> String {
    account_sas_with("rwdlac", "2099-01-01T00:00:00Z")
}

/// An account SAS with these permissions (`sp`) and expiry (`se`), correctly signed.
pub fn account_sas_with(sp: &str, se: &str) -> String {
    let (ss, srt) = ("b", "sco");
    // Account SAS string-to-sign for versions before 2020-12-06:
    // account, permissions, services, resource types, start, expiry, IP, protocol, version.
    let to_sign = format!("{ACCOUNT}\n{sp}\n{ss}\n{srt}\n\n{se}\n\n\n{SAS_VERSION}\n");
    let key = base64_decode(KEY);
    let sig = base64_encode(&hmac_sha256(&key, to_sign.as_bytes()));
    format!("sv={SAS_VERSION}&ss={ss}&srt={srt}&sp={sp}&se={}&sig={}", percent_encode(se), percent_encode(&sig))
}

/// A query-string value, percent-encoded (unreserved characters kept).
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A fresh container; returns its URL (no SAS).
pub async fn container(http: &reqwest::Client) -> String {
    container_at(http, &azurite().endpoint).await
}

/// A fresh container at the Azurite whose account endpoint is `endpoint`.
pub async fn container_at(http: &reqwest::Client, endpoint: &str) -> String {
    let name = format!("policy-{}", super::suffix());
    let url = format!("{endpoint}/{name}");
    let resp = http
        .put(format!("{url}?restype=container&{}", account_sas()))
        .header("x-ms-version", "2021-08-06")
        .send()
        .await
        .expect("create container");
    assert_eq!(resp.status().as_u16(), 201, "create container: {}", resp.text().await.unwrap_or_default());
    url
}

/// Upload a block blob.
pub async fn put_blob(http: &reqwest::Client, container_url: &str, name: &str, text: &str) {
    let resp = http
        .put(format!("{container_url}/{name}?{}", account_sas()))
        .header("x-ms-version", "2021-08-06")
        .header("x-ms-blob-type", "BlockBlob")
        .body(text.to_string())
        .send()
        .await
        .expect("put blob");
    assert_eq!(resp.status().as_u16(), 201, "put blob {name}: {}", resp.text().await.unwrap_or_default());
}

/// Read a blob's text, `None` when it does not exist.
pub async fn get_blob(http: &reqwest::Client, container_url: &str, name: &str) -> Option<String> {
    let resp = http
        .get(format!("{container_url}/{name}?{}", account_sas()))
        .header("x-ms-version", "2021-08-06")
        .send()
        .await
        .expect("get blob");
    match resp.status().as_u16() {
        200 => Some(resp.text().await.expect("blob text")),
        404 => None,
        s => panic!("get blob {name}: HTTP {s}"),
    }
}

fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| block.iter().map(|k| k ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(msg).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Vec<u8> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = B64.iter().position(|b| *b == c).expect("base64") as u32;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    out
}

#[cfg(test)]
#[test]
fn hmac_and_base64_known_answers() {
    // RFC 4231 test case 2.
    let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    assert_eq!(base64_encode(b"any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw==");
    assert_eq!(base64_decode(&base64_encode(b"tagwarden!")), b"tagwarden!");
    assert_eq!(base64_decode(KEY).len(), 64);
}
