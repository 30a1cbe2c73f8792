use azure_core::http::Url;
use azure_identity::ManagedIdentityCredential;
use azure_storage_blob::{models::BlobClientDownloadOptions, BlobClient};
fn mono_ns() -> u128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}
#[tokio::main]
async fn main() {
    let blob_url = Url::parse(&std::env::var("BLOB_URL").unwrap()).unwrap();
    // IDENTITY_ENDPOINT + IDENTITY_HEADER: the App Service / Functions protocol.
    let cred = ManagedIdentityCredential::new(None).unwrap();
    let blob = BlobClient::new(blob_url, Some(cred), None).unwrap();
    println!("constructed {}", mono_ns());
    if std::env::var("ONLY_CONSTRUCT").is_ok() { return; }
    let opts = BlobClientDownloadOptions { if_none_match: Some("\"0x0\"".into()), ..Default::default() };
    let r = blob.download(Some(opts)).await.unwrap();
    let etag = r.properties.etag.clone();
    let body = r.body.collect().await.unwrap();
    println!("done {} len={} etag={:?}", mono_ns(), body.len(), etag);
}
