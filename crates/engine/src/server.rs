//! A minimal HTTP/1.1 server (hyper) for the functions: it turns each request into a [`Request`]
//! held in memory, calls a function, and writes its [`Response`]. The Azure Functions host talks
//! HTTP/1.1 over loopback, and Cloud Run's front end HTTP/1.1 to the container, one small JSON
//! body at a time, so nothing here streams.
//!
//! Deliberately not here: routing and each cloud's delivery protocol (`tagwarden_azure::function`,
//! `tagwarden_gcp::function`), TLS (terminated before the request reaches the process), HTTP/2.
//! The test fakes reuse this server.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Bodies larger than this are refused with 413 (an Event Grid event is at most 1 MiB, a Cloud
/// Logging entry 256 KB, pushed base64-encoded; the envelopes add little).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A request, read completely.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Response {
            status,
            headers: vec![("content-type".into(), "application/json; charset=utf-8".into())],
            body: body.to_string().into_bytes(),
        }
    }

    pub fn text(status: u16, body: &str) -> Self {
        Response {
            status,
            headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// Serve `listener` until the process ends, calling `handle` for every request.
pub async fn serve<F, Fut>(listener: TcpListener, handle: F) -> std::io::Result<()>
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handle = Arc::new(handle);
    loop {
        let (stream, _) = listener.accept().await?;
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<Incoming>| {
                let handle = handle.clone();
                async move { Ok::<_, Infallible>(respond(handle.as_ref(), req).await) }
            });
            if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
}

async fn respond<F, Fut>(handle: &F, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>>
where
    F: Fn(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let (parts, body) = req.into_parts();
    let response = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => {
            let request = Request {
                method: parts.method.as_str().to_string(),
                path: parts.uri.path().to_string(),
                query: parts.uri.query().unwrap_or_default().to_string(),
                headers: parts
                    .headers
                    .iter()
                    .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_ascii_lowercase(), v.to_string())))
                    .collect(),
                body: collected.to_bytes().to_vec(),
            };
            handle(request).await
        }
        Err(e) => Response::text(413, &format!("request body refused: {e} (limit {MAX_BODY_BYTES} bytes)")),
    };
    let mut builder = hyper::Response::builder().status(response.status);
    for (k, v) in &response.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    builder.body(Full::new(Bytes::from(response.body))).unwrap_or_else(|e| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(format!("bad response: {e}"))));
        *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}
