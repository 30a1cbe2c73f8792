//! A fault-injecting HTTP/1 proxy for tests: it sits between the SDK clients (or the Azure
//! clients) and the emulator (moto, the fake ARM, Azurite), recognises each request's operation
//! and, by rule, answers in the service's own error shape instead of forwarding, drops the
//! connection, or forwards late.
//!
//! - Service: from the SigV4 credential scope in `Authorization` (`…/us-east-1/ec2/aws4_request`);
//!   `x-ms-version` means Azure Blob; another `Bearer` token means ARM.
//! - Operation: `X-Amz-Target` (JSON protocols), `Action=` in a query-protocol form body (EC2,
//!   ELBv2, IAM, STS), S3's method + path + query, ARM's method + path kind.
//! - Faults: throttling as each service really answers it (EC2 `RequestLimitExceeded` 503, S3
//!   `SlowDown` 503, ELBv2/IAM/STS `Throttling` 400 query-XML, JSON `ThrottlingException` 400, ARM
//!   429 with `Retry-After`, Blob `ServerBusy` 503), S3 `OperationAborted` 409, `AccessDenied`
//!   403, 500/503, a connection reset (the socket is dropped before any response) and a delay
//!   before forwarding.
//! - Rules fire by probability (a seeded generator: `TAGWARDEN_FAULT_SEED` reproduces a run) or on
//!   every Nth matching request, each within an optional budget. Every injection is counted.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The service's own throttling error.
    Throttle,
    /// 500 or 503 in the service's shape (`InternalError`, `ServiceUnavailable`, …).
    Status(u16),
    /// S3's 409 `OperationAborted` (a conflicting operation on the bucket).
    OperationAborted,
    /// 403 `AccessDenied` (S3, IAM, ELBv2), `UnauthorizedOperation` (EC2), `AuthorizationFailed` (ARM).
    AccessDenied,
    /// The connection is closed without an answer.
    Reset,
    /// The request is forwarded after this long (past the client's attempt timeout).
    Delay(Duration),
}

impl Fault {
    pub fn kind(&self) -> String {
        match self {
            Fault::Throttle => "throttle".into(),
            Fault::Status(s) => format!("http-{s}"),
            Fault::OperationAborted => "s3-operation-aborted".into(),
            Fault::AccessDenied => "access-denied".into(),
            Fault::Reset => "connection-reset".into(),
            Fault::Delay(_) => "delay".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    Always,
    Probability(f64),
    /// The Nth, 2Nth, … request that matches the rule.
    EveryNth(u64),
}

#[derive(Debug, Clone)]
pub struct Rule {
    /// `ec2`, `s3`, `iam`, `elasticloadbalancing`, `ssm`, `tagging`, `sts`, `arm`; `None`: any.
    pub service: Option<String>,
    /// The operation (`CreateTags`, `GetObject`, `PATCH tags`); `None`: any.
    pub operation: Option<String>,
    pub fault: Fault,
    pub when: When,
    /// At most this many injections; `None`: no limit.
    pub budget: Option<u64>,
}

impl Rule {
    pub fn new(service: Option<&str>, operation: Option<&str>, fault: Fault, when: When) -> Self {
        Rule { service: service.map(str::to_owned), operation: operation.map(str::to_owned), fault, when, budget: None }
    }

    pub fn budget(mut self, n: u64) -> Self {
        self.budget = Some(n);
        self
    }
}

struct RuleState {
    rule: Rule,
    matched: u64,
    fired: u64,
}

struct Inner {
    upstream: SocketAddr,
    rules: Mutex<Vec<RuleState>>,
    rng: Mutex<u64>,
    /// `kind` → injections; `service:operation kind` → injections.
    injected: Mutex<BTreeMap<String, u64>>,
    by_operation: Mutex<BTreeMap<String, u64>>,
    /// `service:operation` → requests seen.
    requests: Mutex<BTreeMap<String, u64>>,
    /// When each request arrived, by `service:operation` (rates over time).
    arrivals: Mutex<Vec<(std::time::Instant, String)>>,
    retry_after_secs: u64,
    /// `(operation, nth, seen, hook)`: run after the nth answer of that operation (see `after`).
    hooks: Mutex<Vec<(String, u64, u64, Hook)>>,
}

/// Something done while a client waits for an answer: a concurrent writer.
pub type Hook = Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

pub struct FaultProxy {
    pub endpoint: String,
    pub seed: u64,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// A proxy in front of `upstream` (`http://127.0.0.1:PORT`), on a free loopback port.
    pub async fn start(upstream: &str) -> Self {
        let addr: SocketAddr = upstream.trim_start_matches("http://").trim_end_matches('/').parse().expect("upstream");
        let seed = std::env::var("TAGWARDEN_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
        eprintln!("fault proxy: seed {seed} (TAGWARDEN_FAULT_SEED={seed} reproduces the fault sequence)");
        let inner = Arc::new(Inner {
            upstream: addr,
            rules: Mutex::new(Vec::new()),
            rng: Mutex::new(seed | 1),
            injected: Mutex::default(),
            by_operation: Mutex::default(),
            requests: Mutex::default(),
            arrivals: Mutex::default(),
            retry_after_secs: 1,
            hooks: Mutex::default(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fault proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let serving = inner.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let inner = serving.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(inner.clone(), req));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        FaultProxy { endpoint, seed, inner, task }
    }

    /// Replace the rules (counters of the old ones are dropped; injection totals are kept).
    pub fn set_rules(&self, rules: Vec<Rule>) {
        *self.inner.rules.lock().unwrap() =
            rules.into_iter().map(|rule| RuleState { rule, matched: 0, fired: 0 }).collect();
    }

    pub fn clear_rules(&self) {
        self.set_rules(Vec::new());
    }

    /// Injections by kind (`throttle`, `http-503`, `connection-reset`, …).
    pub fn injected(&self) -> BTreeMap<String, u64> {
        self.inner.injected.lock().unwrap().clone()
    }

    /// Injections by `service:operation kind`.
    pub fn injected_by_operation(&self) -> BTreeMap<String, u64> {
        self.inner.by_operation.lock().unwrap().clone()
    }

    pub fn injected_total(&self) -> u64 {
        self.injected().values().sum()
    }

    /// Requests seen by `service:operation`, faulted or not.
    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// When each request of `service:operation` arrived.
    pub fn arrivals(&self, op: &str) -> Vec<std::time::Instant> {
        self.inner.arrivals.lock().unwrap().iter().filter(|(_, o)| o == op).map(|(t, _)| *t).collect()
    }

    /// Run `hook` once the `nth` request of `operation` (`GetBucketTagging`, …) has been answered
    /// upstream, before that answer is returned: whatever it writes lands between the client's
    /// request and the next one.
    pub fn after(&self, operation: &str, nth: u64, hook: Hook) {
        self.inner.hooks.lock().unwrap().push((operation.to_string(), nth, 0, hook));
    }

    /// Forget the requests seen so far.
    pub fn reset_requests(&self) {
        self.inner.requests.lock().unwrap().clear();
        self.inner.arrivals.lock().unwrap().clear();
    }
}

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, BoxError> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let service = service_of(&parts.headers);
    let operation = operation_of(&service, &parts.method, &parts.uri, &parts.headers, &body);
    *inner.requests.lock().unwrap().entry(format!("{service}:{operation}")).or_default() += 1;
    inner.arrivals.lock().unwrap().push((std::time::Instant::now(), format!("{service}:{operation}")));

    let fault = choose(&inner, &service, &operation);
    if let Some(fault) = &fault {
        *inner.injected.lock().unwrap().entry(fault.kind()).or_default() += 1;
        *inner.by_operation.lock().unwrap().entry(format!("{service}:{operation} {}", fault.kind())).or_default() += 1;
    }
    match fault {
        None => {}
        Some(Fault::Reset) => return Err("fault proxy: connection reset".into()),
        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
        Some(fault) => return Ok(error_response(&service, &fault, inner.retry_after_secs)),
    }
    let answer = forward(inner.upstream, parts, body).await;
    let due: Vec<Hook> = inner
        .hooks
        .lock()
        .unwrap()
        .iter_mut()
        .filter(|(op, ..)| *op == operation)
        .filter_map(|(_, nth, seen, hook)| {
            *seen += 1;
            (*seen == *nth).then(|| hook.clone())
        })
        .collect();
    for hook in due {
        hook().await;
    }
    answer
}

fn choose(inner: &Inner, service: &str, operation: &str) -> Option<Fault> {
    let mut rules = inner.rules.lock().unwrap();
    for st in rules.iter_mut() {
        let r = &st.rule;
        if r.service.as_deref().is_some_and(|s| s != service) || r.operation.as_deref().is_some_and(|o| o != operation)
        {
            continue;
        }
        if r.budget.is_some_and(|b| st.fired >= b) {
            continue;
        }
        st.matched += 1;
        let fire = match r.when {
            When::Always => true,
            When::EveryNth(n) => n > 0 && st.matched % n == 0,
            When::Probability(p) => {
                let mut x = inner.rng.lock().unwrap();
                // xorshift64*
                *x ^= *x >> 12;
                *x ^= *x << 25;
                *x ^= *x >> 27;
                let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
                ((v >> 11) as f64 / (1u64 << 53) as f64) < p
            }
        };
        if fire {
            st.fired += 1;
            return Some(r.fault.clone());
        }
    }
    None
}

/// Send the request to `upstream` as it came.
pub async fn forward(
    upstream: SocketAddr,
    parts: hyper::http::request::Parts,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let (parts, body) = forward_bytes(upstream, parts, body).await?;
    Ok(Response::from_parts(parts, Full::new(body)))
}

/// [`forward`], with the answer's body collected for a caller that reads or rewrites it.
pub async fn forward_bytes(
    upstream: SocketAddr,
    parts: hyper::http::request::Parts,
    body: Bytes,
) -> Result<(hyper::http::response::Parts, Bytes), BoxError> {
    let stream = TcpStream::connect(upstream).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::from_parts(parts, Full::new(body));
    let resp = sender.send_request(req).await?;
    let (mut parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    parts.headers.remove(hyper::header::TRANSFER_ENCODING);
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    parts.headers.remove(hyper::header::CONNECTION);
    Ok((parts, body))
}

/// `ec2`, `s3`, … from the SigV4 scope; `blob` for Azure Storage (`x-ms-version`, SAS or
/// token); `arm` for another bearer token; `unknown` otherwise.
pub fn service_of(headers: &hyper::HeaderMap) -> String {
    if headers.contains_key("x-ms-version") {
        return "blob".into();
    }
    let auth = headers.get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if auth.starts_with("Bearer ") {
        return "arm".into();
    }
    auth.split("Credential=")
        .nth(1)
        .and_then(|c| c.split(',').next())
        .and_then(|scope| scope.split('/').nth(3))
        .unwrap_or("unknown")
        .to_string()
}

pub fn operation_of(
    service: &str,
    method: &hyper::Method,
    uri: &hyper::Uri,
    headers: &hyper::HeaderMap,
    body: &[u8],
) -> String {
    if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    let form = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    if form {
        let text = String::from_utf8_lossy(body);
        if let Some(action) = text.split('&').find_map(|p| p.strip_prefix("Action=")) {
            return action.to_string();
        }
    }
    let query = uri.query().unwrap_or_default();
    let has = |name: &str| query.split('&').any(|p| p == name || p.starts_with(&format!("{name}=")));
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    if service == "s3" {
        let m = method.as_str();
        return match (segments.len(), m) {
            (0, _) => "ListBuckets",
            (1, "GET") if has("tagging") => "GetBucketTagging",
            (1, "PUT") if has("tagging") => "PutBucketTagging",
            (1, "DELETE") if has("tagging") => "DeleteBucketTagging",
            (1, "GET") if has("list-type") => "ListObjectsV2",
            (1, "GET") => "ListObjects",
            (1, "PUT") => "CreateBucket",
            (1, "HEAD") => "HeadBucket",
            (1, _) => "DeleteBucket",
            (_, "GET") => "GetObject",
            (_, "PUT") => "PutObject",
            (_, "HEAD") => "HeadObject",
            (_, _) => "DeleteObject",
        }
        .to_string();
    }
    if service == "blob" {
        return if has("comp") { format!("{method} list") } else { format!("{method} blob") };
    }
    if service == "arm" {
        let path = uri.path().to_ascii_lowercase();
        let kind = if path.ends_with("/providers/microsoft.resources/tags/default") {
            "tags"
        } else if path.ends_with("/resources") {
            "resources"
        } else {
            "resource"
        };
        return format!("{method} {kind}");
    }
    format!("{method} {}", uri.path())
}

fn xml(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/xml")
        .header("x-amzn-requestid", "fault-proxy")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

/// The error each service really answers.
pub fn error_response(service: &str, fault: &Fault, retry_after_secs: u64) -> Response<Full<Bytes>> {
    let (status, code, message) = match (service, fault) {
        ("ec2", Fault::Throttle) => (503, "RequestLimitExceeded", "Request limit exceeded."),
        ("s3", Fault::Throttle) => (503, "SlowDown", "Please reduce your request rate."),
        ("arm", Fault::Throttle) => (429, "SubscriptionRequestsThrottled", "Number of 'write' requests for subscription exceeded. Please try again after '1' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling for additional information."),
        ("blob", Fault::Throttle | Fault::Status(503)) => {
            (503, "ServerBusy", "The server is currently unable to receive requests. Please retry your request.")
        }
        ("blob", Fault::AccessDenied) => {
            (403, "AuthorizationFailure", "This request is not authorized to perform this operation.")
        }
        ("blob", Fault::Status(s)) => (*s, "InternalError", "The server encountered an internal error."),
        ("ssm" | "tagging", Fault::Throttle) => (400, "ThrottlingException", "Rate exceeded"),
        (_, Fault::Throttle) => (400, "Throttling", "Rate exceeded"),
        (_, Fault::OperationAborted) => (
            409,
            "OperationAborted",
            "A conflicting conditional operation is currently in progress against this resource. Please try again.",
        ),
        ("ec2", Fault::AccessDenied) => {
            (403, "UnauthorizedOperation", "You are not authorized to perform this operation.")
        }
        ("arm", Fault::AccessDenied) => (403, "AuthorizationFailed", "The client does not have authorization."),
        (_, Fault::AccessDenied) => (403, "AccessDenied", "Access Denied"),
        ("ec2", Fault::Status(503)) => (503, "Unavailable", "The server is overloaded."),
        ("ec2", Fault::Status(s)) => (*s, "InternalError", "An internal error has occurred."),
        // ARM refuses a token that expired in flight with 401 and this code.
        ("arm", Fault::Status(401)) => {
            (401, "ExpiredAuthenticationToken", "The access token expiry UTC time is earlier than current UTC time.")
        }
        ("arm", Fault::Status(s)) => (*s, "InternalServerError", "Internal server error."),
        (_, Fault::Status(503)) => (503, "ServiceUnavailable", "Service is unavailable."),
        (_, Fault::Status(s)) if service == "s3" => (*s, "InternalError", "We encountered an internal error."),
        (_, Fault::Status(s)) => (*s, "InternalFailure", "Internal failure."),
        (_, Fault::Reset | Fault::Delay(_)) => unreachable!("not an answer"),
    };
    match service {
        "ec2" => xml(
            status,
            format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>"),
        ),
        "s3" => xml(
            status,
            format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message><RequestId>fault-proxy</RequestId><HostId>fault-proxy</HostId></Error>"),
        ),
        "ssm" | "tagging" => Response::builder()
            .status(status)
            .header("content-type", "application/x-amz-json-1.1")
            .header("x-amzn-errortype", code)
            .body(Full::new(Bytes::from(format!("{{\"__type\":\"{code}\",\"message\":\"{message}\"}}"))))
            .expect("response"),
        "blob" => Response::builder()
            .status(status)
            .header("content-type", "application/xml")
            .header("x-ms-error-code", code)
            .body(Full::new(Bytes::from(format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            ))))
            .expect("response"),
        "arm" => {
            let mut b = Response::builder().status(status).header("content-type", "application/json");
            if status == 429 {
                b = b.header("retry-after", retry_after_secs.to_string());
            }
            b.body(Full::new(Bytes::from(format!("{{\"error\":{{\"code\":\"{code}\",\"message\":\"{message}\"}}}}"))))
                .expect("response")
        }
        // The query protocol (ELBv2, IAM, STS).
        _ => xml(
            status,
            format!("<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error><Type>{}</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>", if status >= 500 { "Receiver" } else { "Sender" }),
        ),
    }
}
