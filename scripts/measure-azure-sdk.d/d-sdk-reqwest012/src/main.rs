use std::{collections::HashMap, sync::Arc, time::Duration};
use azure_core::error::{Error, ErrorKind};
use azure_core::http::{
    headers::{HeaderName, HeaderValue, Headers}, AsyncRawResponse, Body, ClientOptions, HttpClient, Method, Request, Transport, Url,
};
use azure_identity::{ManagedIdentityCredential, ManagedIdentityCredentialOptions};
use azure_storage_blob::{models::BlobClientDownloadOptions, BlobClient, BlobClientOptions};
use futures_util::TryStreamExt;
fn mono_ns() -> u128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}
#[derive(Debug)]
struct Ours(reqwest::Client);
#[async_trait::async_trait]
impl HttpClient for Ours {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let m = match request.method() {
            Method::Delete => reqwest::Method::DELETE, Method::Get => reqwest::Method::GET,
            Method::Head => reqwest::Method::HEAD, Method::Patch => reqwest::Method::PATCH,
            Method::Post => reqwest::Method::POST, Method::Put => reqwest::Method::PUT,
            _ => return Err(Error::with_message(ErrorKind::Other, "method")),
        };
        let mut req = self.0.request(m, request.url().as_str());
        for (n, v) in request.headers().iter() { req = req.header(n.as_str(), v.as_str()); }
        req = match request.body() {
            Body::Bytes(b) => req.body(b.clone()),
            _ => return Err(Error::with_message(ErrorKind::Other, "streamed bodies not supported")),
        };
        let rsp = req.send().await.map_err(|e| Error::with_error(if e.is_connect() { ErrorKind::Connection } else { ErrorKind::Io }, e, "request failed"))?;
        let status = rsp.status().as_u16();
        let headers: HashMap<HeaderName, HeaderValue> = rsp.headers().iter()
            .filter_map(|(k, v)| v.to_str().ok().map(|v| (HeaderName::from(k.as_str().to_owned()), HeaderValue::from(v.to_owned()))))
            .collect();
        let body = Box::pin(rsp.bytes_stream().map_err(|e| Error::with_error(ErrorKind::Io, e, "body")));
        Ok(AsyncRawResponse::new(status.into(), Headers::from(headers), body))
    }
}
#[tokio::main]
async fn main() {
    let blob_url = Url::parse(&std::env::var("BLOB_URL").unwrap()).unwrap();
    let mut b = reqwest::Client::builder().use_rustls_tls().connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(20)).redirect(reqwest::redirect::Policy::none());
    if let Ok(ca) = std::env::var("TEST_CA") {
        b = b.add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap());
    }
    let transport = Transport::new(Arc::new(Ours(b.build().unwrap())));
    let client_options = ClientOptions { transport: Some(transport), ..Default::default() };
    let cred = ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions { client_options: client_options.clone(), ..Default::default() })).unwrap();
    let blob = BlobClient::new(blob_url, Some(cred), Some(BlobClientOptions { client_options, ..Default::default() })).unwrap();
    println!("constructed {}", mono_ns());
    if std::env::var("ONLY_CONSTRUCT").is_ok() { return; }
    let opts = BlobClientDownloadOptions { if_none_match: Some("\"0x0\"".into()), ..Default::default() };
    let r = blob.download(Some(opts)).await.unwrap();
    let etag = r.properties.etag.clone();
    let body = r.body.collect().await.unwrap();
    println!("done {} len={} etag={:?}", mono_ns(), body.len(), etag);
}
