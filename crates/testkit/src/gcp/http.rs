//! The fake's HTTP plumbing: an HTTP/1 server on a loopback listener that hands each request,
//! read whole, to a synchronous handler; Google's JSON error body; query-string decoding; and a
//! small HTTP/1 client the tests and the emulator helpers use for the APIs no client crate covers
//! (the Cloud Storage JSON API).

use std::collections::BTreeMap;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

/// One request, read whole.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    /// Percent-decoded path (`/compute/v1/projects/p1/zones/z/instances/vm-1`).
    pub path: String,
    /// The raw query string, as sent.
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Req {
    /// The first value of query parameter `name`, decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        self.params(name).into_iter().next()
    }

    /// Every value of a repeated query parameter (`assetTypes=a&assetTypes=b`), decoded.
    pub fn params(&self, name: &str) -> Vec<String> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .filter(|(k, _)| decode(k) == name)
            .map(|(_, v)| decode(v))
            .collect()
    }

    /// The body as JSON (`Null` when empty or not JSON: handlers answer 400 for what they need).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// One answer: a status and a JSON body.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
}

impl Resp {
    pub fn ok(body: Value) -> Self {
        Resp { status: 200, body }
    }

    /// Google's JSON error shape shared by the discovery-based APIs (Compute, Storage, DNS):
    /// `{"error": {"code", "message", "errors": [{"message", "domain", "reason"}]}}` (Compute's
    /// and Storage's REST references, "Standard error responses"). `extra` adds fields to the
    /// one `errors` item (`locationType`, `location`).
    pub fn error(status: u16, reason: &str, message: &str, extra: &[(&str, &str)]) -> Self {
        let mut item = json!({"message": message, "domain": "global", "reason": reason});
        for (k, v) in extra {
            item[*k] = json!(v);
        }
        Resp { status, body: json!({"error": {"code": status, "message": message, "errors": [item]}}) }
    }

    /// The gRPC-transcoded error the newer APIs (Asset Inventory, Resource Manager v3) answer:
    /// `{"error": {"code", "message", "status"}}` (google.rpc.Status over HTTP, AIP-193).
    pub fn rpc_error(status: u16, code: &str, message: &str) -> Self {
        Resp { status, body: json!({"error": {"code": status, "message": message, "status": code}}) }
    }

    pub fn not_found(what: &str) -> Self {
        Resp::error(404, "notFound", &format!("The resource '{what}' was not found"), &[])
    }
}

/// Serve `listener` until the process ends, each request answered by `handler`.
pub async fn serve(listener: tokio::net::TcpListener, handler: Arc<dyn Fn(Req) -> Resp + Send + Sync>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let handler = handler.clone();
        tokio::spawn(async move {
            let service = service_fn(move |r: hyper::Request<Incoming>| {
                let handler = handler.clone();
                async move {
                    let (parts, body) = r.into_parts();
                    let body = body.collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
                    let req = Req {
                        method: parts.method.to_string(),
                        path: decode_path(parts.uri.path()),
                        query: parts.uri.query().unwrap_or_default().to_string(),
                        headers: parts
                            .headers
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
                            .collect(),
                        body,
                    };
                    let resp = handler(req);
                    let text = serde_json::to_vec(&resp.body).unwrap_or_default();
                    hyper::Response::builder()
                        .status(resp.status)
                        .header("content-type", "application/json; charset=UTF-8")
                        .body(Full::new(Bytes::from(text)))
                }
            });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// A path percent-decoded, except `%2F`, which stays (a tag binding's name carries its parent
/// URL-encoded inside one segment); `+` is itself in a path.
fn decode_path(p: &str) -> String {
    percent_decode(p, false, true)
}

/// Percent-decoding of a query component (`+` is a space).
pub fn decode(s: &str) -> String {
    percent_decode(s, true, false)
}

fn percent_decode(s: &str, plus_is_space: bool, keep_slash: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                if keep_slash && v == b'/' {
                    out.extend_from_slice(b"%2F");
                } else {
                    out.push(v);
                }
                i += 3;
                continue;
            }
        }
        out.push(if plus_is_space && b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encoding of a query value or path segment (unreserved characters kept).
pub fn encode(s: &str) -> String {
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

/// A label map from a JSON object, `None` when `v` is not an object of strings.
pub fn labels_of(v: &Value) -> Option<BTreeMap<String, String>> {
    v.as_object()?.iter().map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()
}

/// Send one HTTP/1 request to a loopback server (`url`: `http://127.0.0.1:PORT/path?query`) and
/// return its status and body. For tests: it panics when the server cannot be reached.
pub async fn request(method: &str, url: &str, content_type: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let uri: hyper::Uri = url.parse().unwrap_or_else(|e| panic!("{url}: {e}"));
    let authority = uri.authority().map(|a| a.to_string()).unwrap_or_else(|| panic!("{url}: no host"));
    let stream = tokio::net::TcpStream::connect(&authority).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    tokio::spawn(conn);
    let path = uri.path_and_query().map(|p| p.to_string()).unwrap_or_else(|| "/".into());
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", &authority)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let resp = sender.send_request(req).await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    (status, body)
}

/// [`request`] with a JSON body (or none), answering JSON (`Null` when the body is not JSON).
pub async fn request_json(method: &str, url: &str, body: Option<&Value>) -> (u16, Value) {
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap_or_default()).unwrap_or_default();
    let (status, body) = request(method, url, "application/json", bytes).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}
