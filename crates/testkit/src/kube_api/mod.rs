//! A fake Kubernetes API server for the cluster side's tests (no real API server can run here: no
//! container runtime, and neither kube-apiserver nor etcd+apiserver is packaged on the registries
//! this project reaches). It speaks the API server's HTTP protocol for the resources tagwarden uses
//! — `infrastructures.config.openshift.io` (cluster-scoped), ConfigMaps, and `events.k8s.io/v1`
//! Events — with the shapes the Kubernetes documentation gives:
//!
//! - API concepts (<https://kubernetes.io/docs/reference/using-api/api-concepts/>): a list is
//!   `{"kind": "<Kind>List", "apiVersion", "metadata": {"resourceVersion"}, "items": [...]}`; a
//!   watch is the collection's GET with `?watch=true&resourceVersion=N[&allowWatchBookmarks=true]`,
//!   answered 200 with newline-delimited `{"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR",
//!   "object": …}` over a chunked response, starting after N; a BOOKMARK carries only
//!   `metadata.resourceVersion`; a resourceVersion older than the history the server keeps is an
//!   ERROR event whose object is a `Status` with `code: 410` (reason `Expired`), after which the
//!   client must list again.
//! - `fieldSelector=metadata.name=<name>` selects one object in a list or watch.
//! - Errors are `Status` objects (`{"kind": "Status", "status": "Failure", "reason", "code"}`):
//!   401 `Unauthorized` without a token the server knows; 403 `Forbidden` for a verb a test denied
//!   the service account ([`FakeApi::deny`]; the message the RBAC authoriser gives, e.g.
//!   `infrastructures.config.openshift.io "cluster" is forbidden: User
//!   "system:serviceaccount:tagwarden:tagwarden" cannot get resource "infrastructures" in API group
//!   "config.openshift.io" at the cluster scope`); 404 `NotFound`; 409 `AlreadyExists` on a create
//!   and `Conflict` on a replace whose `metadata.resourceVersion` is stale (optimistic
//!   concurrency, API conventions); 422 `Invalid` for a ConfigMap data key outside
//!   `[-._a-zA-Z0-9]+`, an events.k8s.io Event missing what its validation requires (eventTime,
//!   reportingController, reportingInstance, action, reason; type Normal|Warning; note ≤ 1 kB), or
//!   an Infrastructure that breaks its CRD.
//! - The Infrastructure object is a custom resource served as the API server serves one from its
//!   CRD — the real `infrastructures.config.openshift.io` CRD from openshift/api, vendored in
//!   `tests/fixtures/openshift/` — by [`crd`]: pruning of unknown fields, defaulting, OpenAPI and
//!   CEL validation. Its `/status` subresource (the CRD's `subresources.status: {}`; "Status
//!   subresource" in the CRD documentation,
//!   <https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#status-subresource>):
//!   a create drops `.status`; PUT or merge-PATCH of the main resource ignores changes to
//!   `.status` and bumps `metadata.generation` when anything else but metadata changes; PUT or
//!   merge-PATCH of `…/status` changes only `.status`. An update needs `metadata.resourceVersion`
//!   (custom resources allow no unconditional update). An update that changes nothing stores
//!   nothing: no new resourceVersion, no watch event. List items keep their apiVersion and kind
//!   (built-in types' list items do not).
//! - Tests make day-2 edits through the same code as HTTP requests ([`FakeApi::update_status`],
//!   [`FakeApi::edit_status`], [`FakeApi::replace_infrastructure`] …, or over HTTP with
//!   [`ADMIN_TOKEN`] via [`FakeApi::request`]); [`FakeApi::put_infrastructure`] seeds an object
//!   as a create followed by a `/status` update would, in one revision.
//!
//! One global resourceVersion counter, like etcd's revision. Faults a test can cause: hold events
//! back from open watches, compact the history (410 for older versions, as an ERROR event or, with
//! [`FakeApi::gone_as_http`], an HTTP 410 answer), close every watch, and cut the next event off
//! mid-chunk. Each connection serves one request (`Connection: close`), so a watch can be cut by
//! closing its socket. Every request is recorded for the tests' assertions.

pub mod crd;
pub mod objects;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use crd::{Crd, Refusal};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

/// The bearer token of tagwarden's service account (what the kubeconfig carries).
pub const TOKEN: &str = "fake-sa-token";
/// The user that token authenticates as.
pub const SERVICE_ACCOUNT: &str = "system:serviceaccount:tagwarden:tagwarden";
/// A cluster admin's token, for the tests' own day-2 edits over HTTP; never denied anything.
pub const ADMIN_TOKEN: &str = "fake-admin-token";
pub const ADMIN: &str = "system:admin";

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// Who made it: [`SERVICE_ACCOUNT`], [`ADMIN`], or `""` (no token the server knows).
    pub user: String,
}

impl Seen {
    pub fn is_watch(&self) -> bool {
        matches!(self.query.get("watch").map(String::as_str), Some("true" | "1"))
    }
}

/// Which collection a path names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Collection {
    resource: &'static str,
    namespace: String,
}

#[derive(Clone)]
struct WatchEvent {
    rv: u64,
    collection: Collection,
    name: String,
    kind: &'static str,
    object: Value,
}

#[derive(Clone)]
enum Notice {
    Event(WatchEvent),
    Bookmark(u64),
    CloseWatches,
}

#[derive(Default)]
struct Inner {
    rv: u64,
    objects: BTreeMap<(Collection, String), Value>,
    history: Vec<WatchEvent>,
    /// Watches from a resourceVersion below this get 410.
    compacted: u64,
    held: bool,
    cut_next: bool,
    gone_as_http: bool,
    /// Someone else writes the object between the next replace's read and its write.
    conflict_next_replace: bool,
    /// Serve no `infrastructures.config.openshift.io` at all, as a cluster that is not OpenShift.
    no_infrastructure_type: bool,
    /// (verb, resource[/subresource]) the service account may not use.
    denied: std::collections::BTreeSet<(String, String)>,
    requests: Vec<Seen>,
}

/// What the server answered a test's own HTTP request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    /// The `Warning` headers' texts, e.g. `unknown field "spec.platformSpec.aws.resourceTags"`.
    pub warnings: Vec<String>,
}

/// `299 - "unknown field \"x\""` → `unknown field "x"`.
fn unquote_warning(header: &str) -> String {
    let text = header.splitn(3, ' ').nth(2).unwrap_or(header).trim();
    let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
    text.replace("\\\"", "\"").replace("\\\\", "\\")
}

pub struct FakeApi {
    pub url: String,
    /// The CA that signed the server's certificate (PEM), when it serves TLS.
    pub ca_pem: Option<String>,
    inner: Arc<Mutex<Inner>>,
    notices: broadcast::Sender<Notice>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

struct Kind {
    api_version: &'static str,
    kind: &'static str,
    /// Custom resources keep apiVersion/kind on list items; built-in types do not.
    custom: bool,
}

fn kind_of(resource: &str) -> Kind {
    match resource {
        "configmaps" => Kind { api_version: "v1", kind: "ConfigMap", custom: false },
        "events" => Kind { api_version: "events.k8s.io/v1", kind: "Event", custom: false },
        _ => match Crd::by_plural(resource) {
            Some(crd) => Kind { api_version: &crd.api_version, kind: &crd.kind, custom: true },
            None => panic!("the fake API server serves no resource {resource:?}"),
        },
    }
}

/// `/apis/config.openshift.io/v1/infrastructures[/NAME[/status]]` (and so every served CRD's
/// path: `/apis/GROUP/VERSION/[namespaces/NS/]PLURAL[/NAME[/status]]`, a namespaced one's
/// collection also across all namespaces), `/api/v1/namespaces/NS/configmaps[/NAME]`,
/// `/apis/events.k8s.io/v1/namespaces/NS/events[/NAME]`.
fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (resource, namespace, rest): (&'static str, &str, &[&str]) = match parts.as_slice() {
        ["api", "v1", "namespaces", ns, "configmaps", rest @ ..] => ("configmaps", *ns, rest),
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events", rest @ ..] => ("events", *ns, rest),
        ["apis", group, version, "namespaces", ns, plural, rest @ ..] => {
            let crd = Crd::at(group, version, plural).filter(|c| c.namespaced)?;
            (&crd.plural, *ns, rest)
        }
        ["apis", group, version, plural, rest @ ..] => {
            let crd = Crd::at(group, version, plural)?;
            // A namespaced kind is listed (or watched) across namespaces here, never named.
            if crd.namespaced && !rest.is_empty() {
                return None;
            }
            (&crd.plural, "", rest)
        }
        _ => return None,
    };
    let has_status = Crd::by_plural(resource).is_some_and(|c| c.status_subresource);
    let (name, status) = match rest {
        [] => (None, false),
        [name] => (Some(name.to_string()), false),
        [name, "status"] if has_status => (Some(name.to_string()), true),
        _ => return None,
    };
    Some(Route { collection: Collection { resource, namespace: namespace.to_string() }, name, status })
}

struct Route {
    collection: Collection,
    name: Option<String>,
    /// The `/status` subresource.
    status: bool,
}

fn group_of(resource: &str) -> &'static str {
    kind_of(resource).api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// `infrastructures.config.openshift.io`, `configmaps`: how Status messages name a resource.
fn qualified(resource: &str) -> String {
    match group_of(resource) {
        "" => resource.to_string(),
        g => format!("{resource}.{g}"),
    }
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

impl FakeApi {
    /// Plain HTTP on loopback.
    pub async fn start() -> FakeApi {
        Self::start_with(None).await
    }

    /// HTTPS on loopback with a certificate for 127.0.0.1 from a CA made for this server, as an
    /// API server presents the cluster CA's certificate.
    pub async fn start_tls() -> FakeApi {
        let ca_key = rcgen::KeyPair::generate().expect("CA key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "fake-kube-apiserver-ca");
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let key = rcgen::KeyPair::generate().expect("server key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("server params");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let cert = params.signed_by(&key, &issuer).expect("server certificate");
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key.serialize_der().try_into().expect("key DER"))
        .expect("server TLS config");
        let mut api = Self::start_with(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))).await;
        api.ca_pem = Some(ca.pem());
        api
    }

    async fn start_with(tls: Option<tokio_rustls::TlsAcceptor>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().expect("addr"));
        let inner = Arc::new(Mutex::new(Inner::default()));
        let (notices, _) = broadcast::channel(256);
        let (i, n) = (inner.clone(), notices.clone());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (i, n) = (i.clone(), n.clone());
                match tls.clone() {
                    None => drop(tokio::spawn(serve(stream, i, n))),
                    Some(acceptor) => drop(tokio::spawn(async move {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            serve(stream, i, n).await;
                        }
                    })),
                }
            }
        });
        FakeApi { url, ca_pem: None, inner, notices, accept }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("fake API state")
    }

    /// A kubeconfig for this server with the bearer token it expects, and with `ca_file` as the
    /// cluster's CA when it serves TLS.
    pub fn kubeconfig(&self, namespace: &str, ca_file: Option<&std::path::Path>) -> String {
        let ca = ca_file.map(|p| format!("\n    certificate-authority: {}", p.display())).unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}{ca}\nusers:\n- name: sa\n  user:\n    token: {TOKEN}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: sa\n    namespace: {namespace}\ncurrent-context: fake\n",
            self.url
        )
    }

    /// Seed the Infrastructure object (ADDED): as if the installer created it (a create, which
    /// drops `.status`) and then wrote its status through `/status`, each pruned, defaulted and
    /// validated against the CRD as those two requests would be, stored as one revision so that
    /// a watch sees it appear once. Panics if it exists (day-2 edits go through
    /// [`FakeApi::update_status`] and the like) or if the CRD refuses it.
    pub fn put_infrastructure(&self, object: Value) -> u64 {
        let mut inner = self.lock();
        match write_custom(
            &mut inner,
            &self.notices,
            &infrastructures(),
            Op::Seed,
            None,
            object,
            FieldValidation::Ignore,
        ) {
            Ok(w) => w.rv,
            Err((code, status)) => panic!("seeding the Infrastructure object: {code} {status}"),
        }
    }

    /// `POST …/infrastructures` as an admin: the object's resourceVersion, or the error Status.
    pub fn create_infrastructure(&self, object: Value) -> Result<u64, Value> {
        self.write(Op::Create, None, object)
    }

    /// `PUT …/infrastructures/NAME` as an admin (metadata.name names it; metadata.resourceVersion
    /// is required, as for any custom resource). Changes to `.status` are ignored.
    pub fn replace_infrastructure(&self, object: Value) -> Result<u64, Value> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        self.write(Op::Update, Some(&name), object)
    }

    /// `PUT …/infrastructures/NAME/status` as an admin: only `.status` changes.
    pub fn update_status(&self, object: Value) -> Result<u64, Value> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        self.write(Op::UpdateStatus, Some(&name), object)
    }

    /// `PATCH …/infrastructures/cluster/status` with a JSON merge patch (RFC 7386), as an admin.
    pub fn patch_status(&self, patch: Value) -> Result<u64, Value> {
        let mut inner = self.lock();
        patch_custom(&mut inner, &self.notices, &infrastructures(), true, "cluster", &patch, FieldValidation::Ignore)
            .map(|w| w.rv)
            .map_err(|(_, s)| s)
    }

    /// Read `cluster`, change it with `edit`, write its status back (`oc edit
    /// --subresource=status`): the new resourceVersion (the old one if nothing changed).
    pub fn edit_status(&self, edit: impl FnOnce(&mut Value)) -> Result<u64, Value> {
        let mut object = self.infrastructure().expect("an Infrastructure object to edit");
        edit(&mut object);
        self.update_status(object)
    }

    /// Read `cluster`, change it with `edit`, write it back through the main resource (`oc edit`).
    pub fn edit_infrastructure(&self, edit: impl FnOnce(&mut Value)) -> Result<u64, Value> {
        let mut object = self.infrastructure().expect("an Infrastructure object to edit");
        edit(&mut object);
        self.replace_infrastructure(object)
    }

    /// The Infrastructure object `cluster` as stored.
    pub fn infrastructure(&self) -> Option<Value> {
        self.get("infrastructures", "", "cluster")
    }

    fn write(&self, op: Op, name: Option<&str>, object: Value) -> Result<u64, Value> {
        let mut inner = self.lock();
        write_custom(&mut inner, &self.notices, &infrastructures(), op, name, object, FieldValidation::Ignore)
            .map(|w| w.rv)
            .map_err(|(_, s)| s)
    }

    /// Seed a custom resource of `plural` (HyperShift's or Cluster API's) in `namespace` as an
    /// admin would create it and then write its `.status`, if it carries one: pruned, defaulted
    /// and validated against its CRD. Panics if the CRD refuses it.
    pub fn put_custom(&self, plural: &str, namespace: &str, object: Value) -> u64 {
        let c = custom(plural, namespace);
        let mut inner = self.lock();
        match write_custom(&mut inner, &self.notices, &c, Op::Seed, None, object, FieldValidation::Ignore) {
            Ok(w) => w.rv,
            Err((code, status)) => panic!("seeding {plural} in {namespace}: {code} {status}"),
        }
    }

    /// `POST` of a custom resource as an admin: its resourceVersion, or the error Status.
    pub fn create_custom(&self, plural: &str, namespace: &str, object: Value) -> Result<u64, Value> {
        let c = custom(plural, namespace);
        let mut inner = self.lock();
        write_custom(&mut inner, &self.notices, &c, Op::Create, None, object, FieldValidation::Ignore)
            .map(|w| w.rv)
            .map_err(|(_, s)| s)
    }

    /// Read a custom resource, change it with `edit`, write it back through the main resource
    /// (`kubectl edit`): the new resourceVersion, or the error Status.
    pub fn edit_custom(
        &self,
        plural: &str,
        namespace: &str,
        name: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<u64, Value> {
        let c = custom(plural, namespace);
        let mut inner = self.lock();
        let mut object = inner.objects.get(&(c.clone(), name.to_string())).cloned().expect("an object to edit");
        edit(&mut object);
        write_custom(&mut inner, &self.notices, &c, Op::Update, Some(name), object, FieldValidation::Ignore)
            .map(|w| w.rv)
            .map_err(|(_, s)| s)
    }

    /// Delete a custom resource (`kubectl delete`).
    pub fn delete_custom(&self, plural: &str, namespace: &str, name: &str) -> u64 {
        let c = custom(plural, namespace);
        let mut inner = self.lock();
        let key = (c, name.to_string());
        let mut object = inner.objects.remove(&key).expect("an object to delete");
        inner.rv += 1;
        let rv = inner.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let event = WatchEvent { rv, collection: key.0, name: key.1, kind: "DELETED", object };
        inner.deliver(&self.notices, event);
        rv
    }

    /// From now on the service account may not `verb` (get, list, watch, create, update, patch)
    /// `resource` (`infrastructures`, `infrastructures/status`, `configmaps`, `events`): 403.
    pub fn deny(&self, verb: &str, resource: &str) {
        self.lock().denied.insert((verb.to_string(), resource.to_string()));
    }

    /// Every watch event stored for `resource`, in order: (type, resourceVersion), compacted
    /// history included — what a watch from the beginning would have been sent.
    pub fn events(&self, resource: &str) -> Vec<(&'static str, u64)> {
        self.lock().history.iter().filter(|e| e.collection.resource == resource).map(|e| (e.kind, e.rv)).collect()
    }

    /// The current resourceVersion (the last revision stored).
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// One HTTP request with `token` (plain HTTP only): what the server answered. For the tests'
    /// own requests, e.g. a day-2 edit as an admin with [`ADMIN_TOKEN`].
    pub async fn request(
        &self,
        token: &str,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&Value>,
    ) -> Reply {
        let addr = self.url.strip_prefix("http://").expect("FakeApi::request speaks plain HTTP (start, not start_tls)");
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect to the fake API server");
        let text = body.map(Value::to_string).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            text.len()
        );
        stream.write_all(head.as_bytes()).await.expect("send the request");
        stream.write_all(text.as_bytes()).await.expect("send the body");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read the answer");
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP head");
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
        let warnings = head
            .split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.eq_ignore_ascii_case("warning"))
            .map(|(_, v)| unquote_warning(v.trim()))
            .collect();
        let body = serde_json::from_slice(&raw[end + 4..]).unwrap_or(Value::Null);
        Reply { code, body, warnings }
    }

    /// `PUT …/infrastructures/cluster/status` over HTTP as an admin.
    pub async fn put_status_as_admin(&self, object: &Value) -> Reply {
        let path = "/apis/config.openshift.io/v1/infrastructures/cluster/status";
        self.request(ADMIN_TOKEN, "PUT", path, "application/json", Some(object)).await
    }

    pub fn put_configmap(&self, namespace: &str, object: Value) -> u64 {
        self.put(Collection { resource: "configmaps", namespace: namespace.to_string() }, object)
    }

    fn put(&self, collection: Collection, object: Value) -> u64 {
        let mut inner = self.lock();
        let event = inner.store(collection, object, None);
        let rv = event.rv;
        inner.deliver(&self.notices, event);
        rv
    }

    pub fn delete_infrastructure(&self) -> u64 {
        let mut inner = self.lock();
        let key = (Collection { resource: "infrastructures", namespace: String::new() }, "cluster".to_string());
        let mut object = inner.objects.remove(&key).expect("an Infrastructure object to delete");
        inner.rv += 1;
        let rv = inner.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let event = WatchEvent { rv, collection: key.0, name: key.1, kind: "DELETED", object };
        inner.deliver(&self.notices, event);
        rv
    }

    /// A change to some other object: the revision moves on, nothing this test watches changes.
    pub fn unrelated_write(&self) -> u64 {
        self.put_configmap("elsewhere", json!({"metadata": {"name": "noise"}, "data": {"n": "1"}}))
    }

    pub fn get(&self, resource: &'static str, namespace: &str, name: &str) -> Option<Value> {
        let key = (Collection { resource, namespace: namespace.to_string() }, name.to_string());
        self.lock().objects.get(&key).cloned()
    }

    pub fn list(&self, resource: &'static str, namespace: &str) -> Vec<Value> {
        let c = Collection { resource, namespace: namespace.to_string() };
        self.lock().objects.iter().filter(|((col, _), _)| *col == c).map(|(_, v)| v.clone()).collect()
    }

    /// Send a BOOKMARK at the current resourceVersion to watches that allow them.
    pub fn bookmark(&self) -> u64 {
        let rv = self.lock().rv;
        let _ = self.notices.send(Notice::Bookmark(rv));
        rv
    }

    /// While held, changes are stored but not sent to open watches.
    pub fn hold_events(&self, held: bool) {
        self.lock().held = held;
    }

    /// Forget the history up to now: a watch from an older resourceVersion gets 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.compacted = inner.rv;
        let floor = inner.compacted;
        inner.history.retain(|e| e.rv > floor);
    }

    /// Another writer updates the object just before the next replace arrives, so that replace's
    /// resourceVersion is stale (409 Conflict).
    pub fn conflict_next_replace(&self) {
        self.lock().conflict_next_replace = true;
    }

    /// Behave as a cluster without OpenShift's config API.
    pub fn without_infrastructure_type(&self) {
        self.lock().no_infrastructure_type = true;
    }

    /// Answer a too-old watch with HTTP 410 instead of an ERROR event.
    pub fn gone_as_http(&self, yes: bool) {
        self.lock().gone_as_http = yes;
    }

    /// End every open watch (as an API server restart or a load balancer's idle timeout does).
    pub fn close_watches(&self) {
        let _ = self.notices.send(Notice::CloseWatches);
    }

    /// The next event sent on a watch is cut off halfway through its chunk, and the connection
    /// closed.
    pub fn cut_next_event(&self) {
        self.lock().cut_next = true;
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.lock().requests.clone()
    }

    pub fn open_watch_count(&self) -> usize {
        self.notices.receiver_count()
    }
}

impl Inner {
    /// Store `object` in `collection` (its name from metadata.name), stamping the metadata the API
    /// server owns; `created_from`: the object a replace replaces (its uid is kept).
    fn store(&mut self, collection: Collection, mut object: Value, created_from: Option<&Value>) -> WatchEvent {
        let name = object["metadata"]["name"].as_str().expect("metadata.name").to_string();
        let key = (collection.clone(), name.clone());
        let existing = self.objects.get(&key).cloned();
        self.rv += 1;
        let k = kind_of(collection.resource);
        object["apiVersion"] = json!(k.api_version);
        object["kind"] = json!(k.kind);
        let meta = &mut object["metadata"];
        meta["resourceVersion"] = json!(self.rv.to_string());
        let uid = existing.as_ref().or(created_from).and_then(|o| o["metadata"]["uid"].as_str().map(str::to_owned));
        meta["uid"] = json!(uid.unwrap_or_else(|| format!("uid-{}", self.rv)));
        meta["creationTimestamp"] = json!("2026-11-01T00:00:00Z");
        if !collection.namespace.is_empty() {
            meta["namespace"] = json!(collection.namespace);
        }
        self.objects.insert(key, object.clone());
        let kind = if existing.is_some() { "MODIFIED" } else { "ADDED" };
        WatchEvent { rv: self.rv, collection, name, kind, object }
    }

    fn deliver(&mut self, notices: &broadcast::Sender<Notice>, event: WatchEvent) {
        self.history.push(event.clone());
        if !self.held {
            let _ = notices.send(Notice::Event(event));
        }
    }
}

struct Request {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

async fn read_request(stream: &mut (impl AsyncRead + Unpin)) -> Option<Request> {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    Some(Request { method, path: path.to_string(), query, headers, body })
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn respond(stream: &mut (impl AsyncWrite + Unpin), code: u16, body: &Value) {
    respond_with(stream, code, body, &[]).await
}

/// An answer with a `Warning: 299 - "<text>"` header per warning (RFC 7234 §5.5, as the API server
/// sends them).
async fn respond_with(stream: &mut (impl AsyncWrite + Unpin), code: u16, body: &Value, warnings: &[String]) {
    let text = body.to_string();
    let reason = match code {
        200 => "OK",
        201 => "Created",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "Bad Request",
    };
    let warning_lines: String = warnings
        .iter()
        .map(|w| format!("Warning: 299 - \"{}\"\r\n", w.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{warning_lines}Connection: close\r\n\r\n",
        text.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The RBAC verb of a request
/// (<https://kubernetes.io/docs/reference/access-authn-authz/authorization/#determine-the-request-verb>).
fn verb_of(method: &str, has_name: bool, watch: bool) -> &'static str {
    match (method, has_name) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// The 403 the RBAC authoriser's denial becomes (`responsewriters.Forbidden` →
/// `apierrors.NewForbidden`): `<resource>.<group> "<name>" is forbidden: User "<user>" cannot <verb>
/// resource "<resource>[/<subresource>]" in API group "<group>" (at the cluster scope | in the
/// namespace "<ns>")`. A list or watch selecting one name by `metadata.name` carries that name.
fn forbidden(user: &str, verb: &str, route: &Route, name: &str) -> Value {
    let c = &route.collection;
    let group = group_of(c.resource);
    let resource = if route.status { format!("{}/status", c.resource) } else { c.resource.to_string() };
    let scope = if c.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", c.namespace)
    };
    let why = format!("User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}");
    let message = if name.is_empty() {
        format!("{} is forbidden: {why}", qualified(c.resource))
    } else {
        format!("{} \"{name}\" is forbidden: {why}", qualified(c.resource))
    };
    let mut s = status(403, "Forbidden", &message);
    s["details"] = json!({"group": group, "kind": c.resource});
    if !name.is_empty() {
        s["details"]["name"] = json!(name);
    }
    s
}

async fn serve(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    inner: Arc<Mutex<Inner>>,
    notices: broadcast::Sender<Notice>,
) {
    let Some(req) = read_request(&mut stream).await else { return };
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let user = match req.headers.get("authorization").and_then(|a| a.strip_prefix("Bearer ")) {
        Some(TOKEN) => SERVICE_ACCOUNT,
        Some(ADMIN_TOKEN) => ADMIN,
        _ => "",
    };
    {
        let mut i = inner.lock().expect("state");
        i.requests.push(Seen {
            method: req.method.clone(),
            path: req.path.clone(),
            query: req.query.clone(),
            user: user.to_string(),
        });
    }
    // Authentication, then authorisation, then the resource: the API server's filter order.
    if user.is_empty() {
        return respond(&mut stream, 401, &status(401, "Unauthorized", "Unauthorized")).await;
    }
    let watch = matches!(req.query.get("watch").map(String::as_str), Some("true" | "1"));
    let routed = route(&req.path);
    if let Some(r) = &routed {
        let verb = verb_of(&req.method, r.name.is_some(), watch);
        let resource =
            if r.status { format!("{}/status", r.collection.resource) } else { r.collection.resource.to_string() };
        let denied =
            user == SERVICE_ACCOUNT && inner.lock().expect("state").denied.contains(&(verb.to_string(), resource));
        if denied {
            let selected = name_selector(&req.query).ok().flatten();
            let name = r.name.clone().or(selected).unwrap_or_default();
            return respond(&mut stream, 403, &forbidden(user, verb, r, &name)).await;
        }
    }
    let no_type = inner.lock().expect("state").no_infrastructure_type;
    let Some(Route { collection, name, status: subresource }) =
        routed.filter(|r| !(no_type && r.collection.resource == "infrastructures"))
    else {
        return respond(&mut stream, 404, &status(404, "NotFound", "the server could not find the requested resource"))
            .await;
    };
    let field_validation = match req.query.get("fieldValidation").map(String::as_str) {
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        _ => FieldValidation::Warn,
    };
    let custom = Crd::by_plural(collection.resource).is_some();
    let answer = |result: Result<Written, (u16, Value)>, ok: u16| match result {
        Ok(w) => (ok, w.object, w.warnings),
        Err((code, s)) => (code, s, Vec::new()),
    };
    match (req.method.as_str(), name) {
        ("GET", None) if watch => watch_stream(stream, &inner, &notices, collection, &req.query).await,
        ("GET", None) => {
            let list = list(&inner.lock().expect("state"), &collection, &req.query);
            match list {
                Ok(list) => respond(&mut stream, 200, &list).await,
                Err(s) => respond(&mut stream, 400, &s).await,
            }
        }
        ("GET", Some(name)) => {
            let found = inner.lock().expect("state").objects.get(&(collection.clone(), name.clone())).cloned();
            match found {
                Some(o) => respond(&mut stream, 200, &o).await,
                None => respond(&mut stream, 404, &not_found(&collection, &name)).await,
            }
        }
        ("POST", None) if custom => {
            let result = write_custom(
                &mut inner.lock().expect("state"),
                &notices,
                &collection,
                Op::Create,
                None,
                body,
                field_validation,
            );
            let (code, body, warnings) = answer(result, 201);
            respond_with(&mut stream, code, &body, &warnings).await
        }
        ("POST", None) => {
            let result = create(&mut inner.lock().expect("state"), &notices, collection, body);
            match result {
                Ok(o) => respond(&mut stream, 201, &o).await,
                Err((code, s)) => respond(&mut stream, code, &s).await,
            }
        }
        ("PUT", Some(name)) if custom => {
            let op = if subresource { Op::UpdateStatus } else { Op::Update };
            let result = write_custom(
                &mut inner.lock().expect("state"),
                &notices,
                &collection,
                op,
                Some(&name),
                body,
                field_validation,
            );
            let (code, body, warnings) = answer(result, 200);
            respond_with(&mut stream, code, &body, &warnings).await
        }
        ("PUT", Some(name)) => {
            let result = replace(&mut inner.lock().expect("state"), &notices, collection, &name, body);
            match result {
                Ok(o) => respond(&mut stream, 200, &o).await,
                Err((code, s)) => respond(&mut stream, code, &s).await,
            }
        }
        ("PATCH", Some(name)) if custom => {
            let content_type = req.headers.get("content-type").map(String::as_str).unwrap_or("");
            if !content_type.starts_with("application/merge-patch+json") {
                // Custom resources take no strategic merge patch; JSON patch and apply are not
                // implemented by this fake.
                let s = status(
                    415,
                    "UnsupportedMediaType",
                    &format!("the fake API server takes only application/merge-patch+json for custom resources, not {content_type:?}"),
                );
                return respond(&mut stream, 415, &s).await;
            }
            let result = patch_custom(
                &mut inner.lock().expect("state"),
                &notices,
                &collection,
                subresource,
                &name,
                &body,
                field_validation,
            );
            let (code, body, warnings) = answer(result, 200);
            respond_with(&mut stream, code, &body, &warnings).await
        }
        ("PATCH", Some(name)) if collection.resource == "events" => {
            let result = {
                let mut i = inner.lock().expect("state");
                match i.objects.get(&(collection.clone(), name.clone())).cloned() {
                    None => Err((404, not_found(&collection, &name))),
                    Some(mut o) => {
                        merge_patch(&mut o, &body);
                        let event = i.store(collection, o, None);
                        let out = event.object.clone();
                        i.deliver(&notices, event);
                        Ok(out)
                    }
                }
            };
            match result {
                Ok(o) => respond(&mut stream, 200, &o).await,
                Err((code, s)) => respond(&mut stream, code, &s).await,
            }
        }
        _ => respond(&mut stream, 405, &status(405, "MethodNotAllowed", "the server does not allow this method")).await,
    }
}

/// Whether an object stored in `stored` is in the collection `asked` reads: the same one, or for a
/// namespaced kind asked across all namespaces (`namespace` empty), any of its namespaces.
fn in_collection(stored: &Collection, asked: &Collection) -> bool {
    stored.resource == asked.resource && (asked.namespace.is_empty() || stored.namespace == asked.namespace)
}

fn not_found(c: &Collection, name: &str) -> Value {
    let k = kind_of(c.resource);
    let group = k.api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let mut s = status(
        404,
        "NotFound",
        &format!(
            "{}{} \"{name}\" not found",
            c.resource,
            if group.is_empty() { String::new() } else { format!(".{group}") }
        ),
    );
    s["details"] = json!({"name": name, "group": group, "kind": c.resource});
    s
}

/// `fieldSelector=metadata.name=NAME`, the one selector tagwarden uses; anything else is refused
/// rather than ignored.
fn name_selector(query: &BTreeMap<String, String>) -> Result<Option<String>, Value> {
    match query.get("fieldSelector").map(String::as_str) {
        None | Some("") => Ok(None),
        Some(sel) => match sel.strip_prefix("metadata.name=") {
            Some(name) if !name.contains(',') => Ok(Some(name.to_string())),
            _ => Err(status(400, "BadRequest", &format!("field selector {sel:?} is not supported by this fake"))),
        },
    }
}

fn list(inner: &Inner, c: &Collection, query: &BTreeMap<String, String>) -> Result<Value, Value> {
    let only = name_selector(query)?;
    let k = kind_of(c.resource);
    let items: Vec<Value> = inner
        .objects
        .iter()
        .filter(|((col, name), _)| in_collection(col, c) && only.as_ref().is_none_or(|o| o == name))
        .map(|(_, o)| {
            let mut o = o.clone();
            if !k.custom {
                if let Some(m) = o.as_object_mut() {
                    m.remove("apiVersion");
                    m.remove("kind");
                }
            }
            o
        })
        .collect();
    Ok(json!({"kind": format!("{}List", k.kind), "apiVersion": k.api_version,
              "metadata": {"resourceVersion": inner.rv.to_string()}, "items": items}))
}

fn create(
    inner: &mut Inner,
    notices: &broadcast::Sender<Notice>,
    c: Collection,
    body: Value,
) -> Result<Value, (u16, Value)> {
    let Some(name) = body["metadata"]["name"].as_str().map(str::to_owned) else {
        return Err((422, status(422, "Invalid", "metadata.name: Required value")));
    };
    validate(&c, &body)?;
    if inner.objects.contains_key(&(c.clone(), name.clone())) {
        return Err((409, status(409, "AlreadyExists", &format!("{} \"{name}\" already exists", c.resource))));
    }
    let event = inner.store(c, body, None);
    let out = event.object.clone();
    inner.deliver(notices, event);
    Ok(out)
}

fn replace(
    inner: &mut Inner,
    notices: &broadcast::Sender<Notice>,
    c: Collection,
    name: &str,
    body: Value,
) -> Result<Value, (u16, Value)> {
    let Some(mut current) = inner.objects.get(&(c.clone(), name.to_string())).cloned() else {
        return Err((404, not_found(&c, name)));
    };
    if std::mem::take(&mut inner.conflict_next_replace) {
        let event = inner.store(c.clone(), current.clone(), Some(&current));
        current = event.object.clone();
        inner.deliver(notices, event);
    }
    // The storage layer refuses a stale version before the strategy validates anything.
    let want = body["metadata"]["resourceVersion"].as_str();
    if want.is_some_and(|w| Some(w) != current["metadata"]["resourceVersion"].as_str()) {
        return Err((409, conflict(&c, name)));
    }
    validate(&c, &body)?;
    if unchanged(&c, &body, &current) {
        return Ok(current);
    }
    let event = inner.store(c, body, Some(&current));
    let out = event.object.clone();
    inner.deliver(notices, event);
    Ok(out)
}

fn conflict(c: &Collection, name: &str) -> Value {
    let mut s = status(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            qualified(c.resource)
        ),
    );
    s["details"] = json!({"name": name, "group": group_of(c.resource), "kind": c.resource});
    s
}

/// Whether storing `new` over `current` would change nothing but what the server stamps: then
/// the real server writes nothing (the storage layer compares the bytes), so the resourceVersion
/// stays and no watch event is sent.
fn unchanged(c: &Collection, new: &Value, current: &Value) -> bool {
    let mut new = new.clone();
    let k = kind_of(c.resource);
    new["apiVersion"] = json!(k.api_version);
    new["kind"] = json!(k.kind);
    for field in ["resourceVersion", "uid", "creationTimestamp", "namespace"] {
        match current["metadata"].get(field) {
            Some(v) => new["metadata"][field] = v.clone(),
            None => drop(new["metadata"].as_object_mut().map(|m| m.remove(field))),
        }
    }
    new == *current
}

/// How an Infrastructure is written: which REST strategy of the custom resource applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `POST`: `.status` dropped (status subresource), generation 1.
    Create,
    /// A test's seed: a create, then its status written through `/status`, in one revision.
    Seed,
    /// `PUT` of the main resource: `.status` kept as stored.
    Update,
    /// `PUT …/status`: everything but `.status` kept as stored.
    UpdateStatus,
}

/// `fieldValidation` (API concepts, "Field validation"): what an unknown field costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

struct Written {
    object: Value,
    rv: u64,
    warnings: Vec<String>,
}

fn infrastructures() -> Collection {
    Collection { resource: "infrastructures", namespace: String::new() }
}

/// The collection of served custom resource `plural` in `namespace` (ignored if cluster-scoped).
fn custom(plural: &str, namespace: &str) -> Collection {
    let crd = Crd::by_plural(plural).unwrap_or_else(|| panic!("no served CRD for {plural}"));
    Collection { resource: &crd.plural, namespace: if crd.namespaced { namespace.to_string() } else { String::new() } }
}

/// The 422 (or, for a CEL rule the fake cannot evaluate, 500) for a refused custom resource.
fn refused(crd: &Crd, name: &str, refusal: Refusal) -> (u16, Value) {
    match refusal {
        Refusal::Invalid(errs) => (422, crd.invalid_status(name, &errs)),
        Refusal::Unimplemented(what) => (500, status(500, "InternalError", &what.to_string())),
    }
}

/// Decode a body as the API server does for a custom resource: prune unknown fields (a warning
/// each, or a 400 under `fieldValidation=Strict`), prune nulls, apply defaults.
fn decode_body(crd: &Crd, body: &mut Value, validation: FieldValidation) -> Result<Vec<String>, (u16, Value)> {
    if !body.is_object() {
        return Err((400, status(400, "BadRequest", "the body of the request is not a JSON object")));
    }
    let unknown: Vec<String> = crd.decode(body).into_iter().map(|f| format!("unknown field \"{f}\"")).collect();
    match validation {
        FieldValidation::Strict if !unknown.is_empty() => {
            let kind = &crd.kind;
            let message = format!(
                "{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: {}",
                crd.version,
                unknown.join(", ")
            );
            Err((400, status(400, "BadRequest", &message)))
        }
        FieldValidation::Ignore => Ok(Vec::new()),
        _ => Ok(unknown),
    }
}

/// Create, seed or update the custom resource in `c` named by the body (or `url_name`): the body
/// is decoded, prepared by the strategy of the main resource or of `/status`, validated against
/// its CRD (with the stored object as `oldSelf` on an update), and stored unless nothing changed.
fn write_custom(
    inner: &mut Inner,
    notices: &broadcast::Sender<Notice>,
    c: &Collection,
    op: Op,
    url_name: Option<&str>,
    mut body: Value,
    validation: FieldValidation,
) -> Result<Written, (u16, Value)> {
    let c = c.clone();
    let crd = Crd::by_plural(c.resource).expect("a served custom resource");
    let warnings = decode_body(crd, &mut body, validation)?;
    let body_name = body["metadata"]["name"].as_str().map(str::to_owned);
    let name = match (url_name, body_name) {
        (Some(url), Some(b)) if url != b => {
            let message = format!("the name of the object ({b}) does not match the name on the URL ({url})");
            return Err((400, status(400, "BadRequest", &message)));
        }
        (Some(url), _) => url.to_string(),
        (None, Some(b)) => b,
        (None, None) => {
            let message = format!(
                "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                crd.qualified_kind()
            );
            let mut s = status(422, "Invalid", &message);
            s["details"] = json!({"group": crd.group, "kind": crd.kind,
                                  "causes": [{"reason": "FieldValueRequired", "message": "Required value: name or generateName is required", "field": "metadata.name"}]});
            return Err((422, s));
        }
    };
    body["metadata"]["name"] = json!(name);
    let key = (c.clone(), name.clone());
    match op {
        Op::Create | Op::Seed => {
            if inner.objects.contains_key(&key) {
                let mut s =
                    status(409, "AlreadyExists", &format!("{} \"{name}\" already exists", qualified(c.resource)));
                s["details"] = json!({"name": name, "group": crd.group, "kind": c.resource});
                return Err((409, s));
            }
            let with_status = body.get("status").cloned();
            let mut created = body;
            if crd.status_subresource {
                if let Some(m) = created.as_object_mut() {
                    m.remove("status");
                }
            }
            if let Some(meta) = created["metadata"].as_object_mut() {
                for owned in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
                    meta.remove(owned);
                }
            }
            created["metadata"]["generation"] = json!(1);
            crd.validate(&created, None).map_err(|r| refused(crd, &name, r))?;
            let object = match (op, with_status) {
                (Op::Seed, Some(status)) => {
                    let mut next = created.clone();
                    next["status"] = status;
                    crd.validate(&next, Some(&created)).map_err(|r| refused(crd, &name, r))?;
                    next
                }
                _ => created,
            };
            let event = inner.store(c, object, None);
            let (out, rv) = (event.object.clone(), event.rv);
            inner.deliver(notices, event);
            Ok(Written { object: out, rv, warnings })
        }
        Op::Update | Op::UpdateStatus => {
            let Some(mut current) = inner.objects.get(&key).cloned() else {
                return Err((404, not_found(&c, &name)));
            };
            if std::mem::take(&mut inner.conflict_next_replace) {
                let event = inner.store(c.clone(), current.clone(), Some(&current));
                current = event.object.clone();
                inner.deliver(notices, event);
            }
            let current_rv = current["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
            match body["metadata"]["resourceVersion"].as_str() {
                None | Some("") => {
                    let e = crd::FieldError {
                        kind: crd::ErrorType::Invalid,
                        field: "metadata.resourceVersion".to_string(),
                        bad: Some("0x0".to_string()),
                        detail: "must be specified for an update".to_string(),
                    };
                    return Err((422, crd.invalid_status(&name, &[e])));
                }
                Some(rv) if rv != current_rv => return Err((409, conflict(&c, &name))),
                Some(_) => {}
            }
            let next = if op == Op::UpdateStatus {
                prepare_status(body, &current)
            } else {
                prepare_update(&c, body, &current)
            };
            crd.validate(&next, Some(&current)).map_err(|r| refused(crd, &name, r))?;
            if next == current {
                return Ok(Written { object: current, rv: current_rv.parse().unwrap_or_default(), warnings });
            }
            let event = inner.store(c, next, Some(&current));
            let (out, rv) = (event.object.clone(), event.rv);
            inner.deliver(notices, event);
            Ok(Written { object: out, rv, warnings })
        }
    }
}

/// The main resource's update strategy: `.status` as stored, the server's metadata as stored, and
/// `metadata.generation` bumped when anything but metadata and status changes.
fn prepare_update(c: &Collection, mut body: Value, current: &Value) -> Value {
    let k = kind_of(c.resource);
    body["apiVersion"] = json!(k.api_version);
    body["kind"] = json!(k.kind);
    match current.get("status") {
        Some(s) => body["status"] = s.clone(),
        None => drop(body.as_object_mut().map(|m| m.remove("status"))),
    }
    for owned in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
        match current["metadata"].get(owned) {
            Some(v) => body["metadata"][owned] = v.clone(),
            None => drop(body["metadata"].as_object_mut().map(|m| m.remove(owned))),
        }
    }
    // The field manager keeps the stored managedFields when a client sends none.
    if body["metadata"].get("managedFields").is_none() {
        if let Some(m) = current["metadata"].get("managedFields") {
            body["metadata"]["managedFields"] = m.clone();
        }
    }
    let content = |o: &Value| {
        let mut o = o.clone();
        if let Some(m) = o.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        o
    };
    if content(&body) != content(current) {
        body["metadata"]["generation"] = json!(current["metadata"]["generation"].as_i64().unwrap_or(0) + 1);
    }
    body
}

/// The status strategy: the stored object with the body's `.status` (none if it has none).
fn prepare_status(body: Value, current: &Value) -> Value {
    let mut next = current.clone();
    match body.get("status") {
        Some(s) => next["status"] = s.clone(),
        None => drop(next.as_object_mut().map(|m| m.remove("status"))),
    }
    next
}

/// A JSON merge patch on the stored object, then the update (of `/status` or the main resource)
/// the patched object is; the stored resourceVersion is the precondition unless the patch sets one.
fn patch_custom(
    inner: &mut Inner,
    notices: &broadcast::Sender<Notice>,
    c: &Collection,
    status_only: bool,
    name: &str,
    patch: &Value,
    validation: FieldValidation,
) -> Result<Written, (u16, Value)> {
    let Some(mut object) = inner.objects.get(&(c.clone(), name.to_string())).cloned() else {
        return Err((404, not_found(c, name)));
    };
    merge_patch(&mut object, patch);
    let op = if status_only { Op::UpdateStatus } else { Op::Update };
    write_custom(inner, notices, c, op, Some(name), object, validation)
}

/// The API server's validation of what tagwarden writes (k8s.io/kubernetes pkg/apis/core/validation:
/// ConfigMap keys and size; events.k8s.io/v1 Event on create).
fn validate(c: &Collection, body: &Value) -> Result<(), (u16, Value)> {
    let invalid = |m: String| Err((422, status(422, "Invalid", &m)));
    match c.resource {
        "configmaps" => {
            let data = body["data"].as_object().cloned().unwrap_or_default();
            let mut size = 0;
            for (k, v) in &data {
                let ok = !k.is_empty()
                    && k.len() <= 253
                    && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
                if !ok {
                    return invalid(format!("data[{k}]: Invalid value: a valid config key must consist of alphanumeric characters, '-', '_' or '.'"));
                }
                size += k.len() + v.as_str().map_or(0, str::len);
            }
            if size > 1024 * 1024 {
                return invalid(format!("data: Too long: must have at most 1048576 bytes, found {size}"));
            }
        }
        "events" => {
            for field in ["eventTime", "reportingController", "reportingInstance", "action", "reason"] {
                if body[field].as_str().is_none_or(str::is_empty) {
                    return invalid(format!("{field}: Required value"));
                }
            }
            if !matches!(body["type"].as_str(), Some("Normal" | "Warning")) {
                return invalid(format!("type: Unsupported value: {}", body["type"]));
            }
            if body["note"].as_str().is_some_and(|n| n.len() > 1024) {
                return invalid("note: Too long: may not be more than 1024 bytes".to_string());
            }
            if body["regarding"]["namespace"].as_str().is_some_and(|ns| ns != c.namespace) {
                return invalid("regarding.namespace: does not match event.namespace".to_string());
            }
        }
        _ => {}
    }
    Ok(())
}

/// JSON merge patch (RFC 7386).
fn merge_patch(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

async fn write_chunk(stream: &mut (impl AsyncWrite + Unpin), data: &[u8]) -> bool {
    let mut chunk = format!("{:x}\r\n", data.len()).into_bytes();
    chunk.extend_from_slice(data);
    chunk.extend_from_slice(b"\r\n");
    stream.write_all(&chunk).await.is_ok()
}

fn event_line(e: &WatchEvent) -> Vec<u8> {
    let mut line = json!({"type": e.kind, "object": e.object}).to_string().into_bytes();
    line.push(b'\n');
    line
}

async fn watch_stream(
    mut stream: impl AsyncWrite + Unpin,
    inner: &Arc<Mutex<Inner>>,
    notices: &broadcast::Sender<Notice>,
    c: Collection,
    query: &BTreeMap<String, String>,
) {
    let only = match name_selector(query) {
        Ok(o) => o,
        Err(s) => return respond(&mut stream, 400, &s).await,
    };
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let from: u64 = query.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let matches = |e: &WatchEvent| in_collection(&e.collection, &c) && only.as_ref().is_none_or(|o| *o == e.name);
    // Subscribe under the lock that reads the backlog, so no event falls in between.
    let (backlog, gone, gone_as_http, mut rx) = {
        let i = inner.lock().expect("state");
        let gone = from != 0 && from < i.compacted;
        let backlog: Vec<WatchEvent> = i.history.iter().filter(|e| e.rv > from && matches(e)).cloned().collect();
        (backlog, gone, i.gone_as_http, notices.subscribe())
    };
    let expired = status(
        410,
        "Expired",
        &format!("too old resource version: {from} ({})", inner.lock().expect("state").compacted),
    );
    if gone && gone_as_http {
        return respond(&mut stream, 410, &expired).await;
    }
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    if gone {
        let line = format!("{}\n", json!({"type": "ERROR", "object": expired}));
        write_chunk(&mut stream, line.as_bytes()).await;
        let _ = stream.write_all(b"0\r\n\r\n").await;
        return;
    }
    for e in &backlog {
        if !send_event(&mut stream, inner, e).await {
            return;
        }
    }
    loop {
        match rx.recv().await {
            Ok(Notice::Event(e)) if matches(&e) => {
                if !send_event(&mut stream, inner, &e).await {
                    return;
                }
            }
            Ok(Notice::Event(_)) => {}
            Ok(Notice::Bookmark(rv)) if bookmarks => {
                let k = kind_of(c.resource);
                let line = json!({"type": "BOOKMARK", "object": {"kind": k.kind, "apiVersion": k.api_version,
                                   "metadata": {"resourceVersion": rv.to_string()}}});
                if !write_chunk(&mut stream, format!("{line}\n").as_bytes()).await {
                    return;
                }
            }
            Ok(Notice::Bookmark(_)) => {}
            Ok(Notice::CloseWatches) | Err(_) => {
                let _ = stream.write_all(b"0\r\n\r\n").await;
                let _ = stream.shutdown().await;
                return;
            }
        }
    }
}

/// Send one event in its own chunk, unless the next event is to be cut: then the chunk's size
/// line promises the whole event, half of it is sent, and the connection is closed.
async fn send_event(stream: &mut (impl AsyncWrite + Unpin), inner: &Arc<Mutex<Inner>>, e: &WatchEvent) -> bool {
    let line = event_line(e);
    let cut = std::mem::take(&mut inner.lock().expect("state").cut_next);
    if cut {
        let mut partial = format!("{:x}\r\n", line.len()).into_bytes();
        partial.extend_from_slice(&line[..line.len() / 2]);
        let _ = stream.write_all(&partial).await;
        let _ = stream.flush().await;
        let _ = stream.shutdown().await;
        return false;
    }
    write_chunk(stream, &line).await
}
