use std::{sync::Arc, time::Duration};
use azure_core::http::{ClientOptions, Transport, Url};
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions};
use azure_storage_blob::{models::BlobClientDownloadOptions, BlobClient, BlobClientOptions};
fn mono_ns() -> u128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}
#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let blob_url = Url::parse(&std::env::var("BLOB_URL").unwrap()).unwrap();
    let mut roots: Vec<reqwest::Certificate> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .map(|c| reqwest::Certificate::from_der(c.as_ref()).unwrap())
        .collect();
    if let Ok(ca) = std::env::var("TEST_CA") {
        roots.push(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap());
    }
    let http = reqwest::Client::builder()
        .tls_certs_only(roots)
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(20))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let transport = Transport::new(Arc::new(http));
    let client_options = ClientOptions { transport: Some(transport), ..Default::default() };
    let cred = ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
        client_options: client_options.clone(),
        ..Default::default()
    }))
    .unwrap();
    let blob = BlobClient::new(blob_url, Some(cred), Some(BlobClientOptions { client_options, ..Default::default() })).unwrap();
    println!("constructed {}", mono_ns());
    if std::env::var("ONLY_CONSTRUCT").is_ok() { return; }
    let opts = BlobClientDownloadOptions { if_none_match: Some("\"0x0\"".into()), ..Default::default() };
    let r = blob.download(Some(opts)).await.unwrap();
    let etag = r.properties.etag.clone();
    let body = r.body.collect().await.unwrap();
    println!("done {} len={} etag={:?}", mono_ns(), body.len(), etag);
}
