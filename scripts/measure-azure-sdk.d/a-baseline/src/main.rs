// Baseline: what crates/azure/src/identity.rs + blob_store.rs do, over reqwest 0.12 (rustls, ring, webpki roots).
use std::time::Duration;
fn mono_ns() -> u128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}
#[tokio::main]
async fn main() {
    let blob_url = std::env::var("BLOB_URL").unwrap();
    let endpoint = std::env::var("IDENTITY_ENDPOINT").unwrap();
    let header = std::env::var("IDENTITY_HEADER").unwrap();
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(20))
        .pool_idle_timeout(Duration::from_secs(50))
        .user_agent("tagwarden/0.1.0");
    if let Ok(ca) = std::env::var("TEST_CA") {
        let pem = std::fs::read(ca).unwrap();
        b = b.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
    }
    let http = b.build().unwrap();
    println!("constructed {}", mono_ns());
    // managed identity, App Service protocol (2019-08-01)
    let r = http
        .get(&endpoint)
        .query(&[("resource", "https://storage.azure.com"), ("api-version", "2019-08-01")])
        .header("X-IDENTITY-HEADER", header)
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    let token = v["access_token"].as_str().unwrap().to_string();
    // conditional blob GET
    let r = http
        .get(&blob_url)
        .bearer_auth(&token)
        .header("x-ms-version", "2025-11-05")
        .header("If-None-Match", "\"0x0\"")
        .send()
        .await
        .unwrap();
    let etag = r.headers().get("etag").map(|v| v.to_str().unwrap().to_string());
    let body = r.bytes().await.unwrap();
    println!("done {} len={} etag={:?}", mono_ns(), body.len(), etag);
}
