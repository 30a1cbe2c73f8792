//! One tagwarden Azure function under test, in-process: a [`Handler`] built from a real
//! configuration, against a fresh [`FakeAzure`] (ARM, identity, metrics) and a fresh Azurite
//! container holding the policy (reached with an account SAS). Shared by the policy-fault and
//! security tests (and usable from `functions/azure-function/tests/`, which include this module):
//! events in the Event Grid / CloudEvents shapes, the Functions host's `{Data, Metadata}`
//! envelope, SAS variants (tampered, other permissions), and a capture of every log line.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use tagwarden_azure::arm::Retry;
use tagwarden_azure::function::Handler;
use tagwarden_azure::reqwest;
use tagwarden_azure::server::Request;
use tagwarden_azure::Config;
use tagwarden_engine::retry::Backoff;

use super::azurite;
use super::fake::{FakeAzure, IDENTITY_HEADER};

pub const SUB: &str = "11112222-3333-4444-5555-666677778888";
pub const OTHER_SUB: &str = "99990000-aaaa-4bbb-8ccc-ddddeeeeffff";
pub const INFRA: &str = "mycluster-7xk2p";
pub const OWNER: &str = "kubernetes.io_cluster.mycluster-7xk2p";
/// The function's own identity (the user-assigned identity's client and principal ids).
pub const OWN_CLIENT: &str = "7d3e2b1a-0000-4000-8000-00000000c11e";
pub const OWN_PRINCIPAL: &str = "9f8e7d6c-5b4a-4000-8000-0000000000a1";
pub const SOMEONE: &str = "0a0a0a0a-1111-4222-8333-444455556666";
pub const APP_ID: &str = "/subscriptions/11112222-3333-4444-5555-666677778888/resourceGroups/tagwarden-rg/providers/Microsoft.Web/sites/tagwarden-fn";

/// A resource in the cluster's resource group.
pub fn rid(kind: &str, name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{INFRA}-rg/providers/{kind}/{name}")
}

/// An Azure Infrastructure object (JSON) with status and spec tags.
pub fn infrastructure(status: &[(&str, &str)], spec: &[(&str, &str)]) -> String {
    let list = |t: &[(&str, &str)]| t.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>();
    json!({
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": {"platformSpec": {"type": "Azure", "azure": {"resourceTags": list(spec)}}},
        "status": {"infrastructureName": INFRA, "platformStatus": {"type": "Azure", "azure": {"resourceGroupName": format!("{INFRA}-rg"), "resourceTags": list(status)}}},
    })
    .to_string()
}

/// A `ResourceWriteSuccess` event in the Event Grid schema, made by `caller` (appid and oid),
/// from the subscription system topic of [`SUB`].
pub fn eg_event(resource: &str, operation: &str, caller: &str) -> Value {
    let uri = if operation == "Microsoft.Resources/tags/write" {
        format!("{resource}/providers/Microsoft.Resources/tags/default")
    } else {
        resource.to_string()
    };
    json!({
        "topic": format!("/subscriptions/{SUB}"),
        "subject": uri,
        "eventType": "Microsoft.Resources.ResourceWriteSuccess",
        "eventTime": "2026-11-21T10:12:00.1234567Z",
        "id": super::suffix(),
        "data": {
            "authorization": {"scope": uri, "action": operation, "evidence": {"role": "Tag Contributor", "principalId": caller.replace('-', ""), "principalType": "ServicePrincipal"}},
            "claims": {"appid": caller, "http://schemas.microsoft.com/identity/claims/objectidentifier": caller},
            "correlationId": super::suffix(),
            "resourceProvider": operation.split('/').next(),
            "resourceUri": uri,
            "operationName": operation,
            "status": "Succeeded",
            "subscriptionId": SUB,
            "tenantId": "aaaabbbb-0000-cccc-1111-dddd2222eeee"
        },
        "dataVersion": "2",
        "metadataVersion": "1"
    })
}

/// The same event as a CloudEvent 1.0.
pub fn cloud_event(eg: &Value) -> Value {
    json!({
        "id": eg["id"], "source": eg["topic"], "specversion": "1.0", "type": eg["eventType"],
        "subject": eg["subject"], "time": eg["eventTime"], "data": eg["data"],
    })
}

/// The Functions host's invocation of `function` with one binding value, as HTTP body text.
pub fn envelope(function: &str, binding: &str, value: Value) -> String {
    json!({
        "Data": {binding: value},
        "Metadata": {"sys": {"MethodName": function, "UtcNow": "2026-11-21T10:12:01Z", "RandGuid": super::suffix()}},
    })
    .to_string()
}

/// Event Grid's `Microsoft.Storage.BlobCreated` for blob `name` of the policy container, written
/// now.
pub fn blob_created(name: &str) -> Value {
    let now = tagwarden_core::events::format_rfc3339_ms(tagwarden_core::report::epoch_ms());
    json!({
        "topic": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/policy",
        "subject": format!("/blobServices/default/containers/policy/blobs/{name}"),
        "eventType": "Microsoft.Storage.BlobCreated", "id": super::suffix(), "eventTime": now,
        "data": {"api": "PutBlob", "url": format!("https://policy.blob.core.windows.net/policy/{name}")},
        "dataVersion": "", "metadataVersion": "1"
    })
}

/// A storage-queue message holding `event`, as the `sweep-queue` trigger's binding value: the
/// event's JSON, base64-encoded (host.json sets `messageEncoding: none`, so the host passes the
/// text as it sits in the queue).
pub fn queue_message(event: &Value) -> Value {
    Value::String(super::azurite::base64_encode(event.to_string().as_bytes()))
}

/// The timer trigger's binding value.
pub fn timer() -> Value {
    json!({"Schedule": {"AdjustForDST": true}, "IsPastDue": false})
}

/// The reconcile records in a host response's `Logs`.
pub fn records(body: &Value) -> Vec<Value> {
    body["Logs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| serde_json::from_str::<Value>(l.as_str()?).ok())
        .filter(|v| v["record"] == "reconcile")
        .collect()
}

pub struct Env {
    pub fake: FakeAzure,
    pub http: reqwest::Client,
    /// The container's URL (no SAS).
    pub container: String,
    /// The blob name or prefix `TAGWARDEN_POLICY` names.
    pub policy: String,
    pub handler: Handler,
    vars: HashMap<String, String>,
}

impl Env {
    /// `policy`: the blob name, or a prefix ending in `/`; `docs`: blobs to publish first.
    pub async fn new(policy: &str, docs: &[(&str, &str)]) -> Self {
        Self::with(policy, docs, &[]).await
    }

    /// The same, with `extra` variables set (or overridden).
    pub async fn with(policy: &str, docs: &[(&str, &str)], extra: &[(&str, &str)]) -> Self {
        let fake = FakeAzure::start(Some(OWN_CLIENT));
        let http = reqwest::Client::new();
        let container = azurite::container(&http).await;
        for (name, text) in docs {
            azurite::put_blob(&http, &container, name, text).await;
        }
        let url = format!("{container}/{policy}?{}", azurite::account_sas());
        let mut vars = vars_for(&fake, &fake.arm, &url);
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let handler = build_handler(&vars, None);
        Env { fake, http, container, policy: policy.to_string(), handler, vars }
    }

    /// The policy's URL with `sas` as its query string (the account SAS by default).
    pub fn policy_url(&self, sas: Option<&str>) -> String {
        format!("{}/{}?{}", self.container, self.policy, sas.map_or_else(azurite::account_sas, str::to_owned))
    }

    /// The policy's URL on a loopback port nothing listens on, with the valid SAS.
    pub fn unreachable_policy_url(&self) -> String {
        let port = super::free_port();
        let path = self.container.split_once("/devstoreaccount1/").map(|(_, c)| c).expect("an Azurite container URL");
        format!("http://127.0.0.1:{port}/devstoreaccount1/{path}/{}?{}", self.policy, azurite::account_sas())
    }

    /// Every variable the handler was configured with (for spawning the built binary).
    pub fn vars(&self) -> &HashMap<String, String> {
        &self.vars
    }

    /// A fresh (cold) handler on the same fakes and container, reading the policy from
    /// `policy_url` (the configured one when `None`).
    pub fn cold(&self, policy_url: Option<&str>) -> Handler {
        build_handler(&self.vars, policy_url)
    }

    /// Point the warm handler's policy store at another URL (a different SAS, an unreachable
    /// host), keeping what it has cached; `None` puts the configured one back.
    pub fn repoint(&mut self, policy_url: Option<&str>) {
        let url = policy_url.map_or_else(|| self.vars["TAGWARDEN_POLICY"].clone(), str::to_owned);
        let store = std::sync::Arc::get_mut(&mut self.handler.engine.store).expect("no part engine holds the store");
        store.source.location = url.parse().expect("a policy URL");
    }

    pub async fn publish(&self, name: &str, text: &str) {
        azurite::put_blob(&self.http, &self.container, name, text).await;
    }

    /// Delete a blob (202), or assert why not.
    pub async fn delete(&self, name: &str) {
        let resp = self
            .http
            .delete(format!("{}/{name}?{}", self.container, azurite::account_sas()))
            .header("x-ms-version", "2021-08-06")
            .send()
            .await
            .expect("delete blob");
        assert_eq!(resp.status().as_u16(), 202, "delete {name}: {}", resp.text().await.unwrap_or_default());
    }

    /// The status report beside the policy, parsed; `None` when none was written.
    pub async fn report(&self) -> Option<Value> {
        let name = match self.policy.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/tagwarden-status.json"),
            None => "tagwarden-status.json".to_string(),
        };
        let text = azurite::get_blob(&self.http, &self.container, &name).await?;
        Some(serde_json::from_str(&text).expect("the status report is JSON"))
    }

    /// Event Grid delivering `body` directly (webhook); (status, body).
    pub async fn deliver(&self, body: &Value) -> (u16, Value) {
        self.deliver_with(body, &[]).await
    }

    /// The same with these request headers (`aeg-event-type`, …).
    pub async fn deliver_with(&self, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let req = Request {
            method: "POST".into(),
            path: "/api/events".into(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: body.to_string().into_bytes(),
            ..Request::default()
        };
        let resp = self.handler.handle(req).await;
        (resp.status, serde_json::from_slice(&resp.body).expect("the handler answers JSON"))
    }

    /// The Functions host invoking `function` on the warm handler.
    pub async fn invoke(&self, function: &str, binding: &str, value: Value) -> (u16, Value) {
        invoke(&self.handler, function, binding, value).await
    }

    /// One Event Grid event through the `drift` trigger; asserts success.
    pub async fn drift(&self, event: Value) -> Value {
        let (status, body) = self.invoke("drift", "eventGridEvent", event).await;
        assert_eq!(status, 200, "{body:#}");
        body
    }

    /// The bearer tokens the function presented to ARM and Azure Monitor (each was issued by the
    /// fake identity endpoint), and how many tokens the identity endpoint issued.
    pub fn tokens_in_flight(&self) -> (Vec<String>, usize) {
        let log = self.fake.log();
        let mut tokens: Vec<String> = log
            .iter()
            .filter(|l| l.api != "identity")
            .flat_map(|l| l.headers.iter())
            .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .filter_map(|(_, v)| v.strip_prefix("Bearer ").map(str::to_owned))
            .collect();
        tokens.sort();
        tokens.dedup();
        let issued = log.iter().filter(|l| l.api == "identity" && l.status == 200).count();
        (tokens, issued)
    }
}

/// The configuration of a function on `fake`, calling ARM at `arm_endpoint` (the fake, or a
/// proxy in front of it) and reading the policy at `policy_url` (with its SAS).
pub fn vars_for(fake: &FakeAzure, arm_endpoint: &str, policy_url: &str) -> HashMap<String, String> {
    [
        ("TAGWARDEN_POLICY", policy_url.to_string()),
        ("TAGWARDEN_ARM_ENDPOINT", arm_endpoint.to_string()),
        ("POLICY_TTL", "0".to_string()),
        ("IDENTITY_ENDPOINT", fake.identity.clone()),
        ("IDENTITY_HEADER", IDENTITY_HEADER.to_string()),
        ("TAGWARDEN_SELF_CLIENT_ID", OWN_CLIENT.to_string()),
        ("TAGWARDEN_SELF_PRINCIPAL_ID", OWN_PRINCIPAL.to_string()),
        ("TAGWARDEN_METRICS_RESOURCE_ID", APP_ID.to_string()),
        ("TAGWARDEN_METRICS_ENDPOINT", fake.metrics.clone()),
        ("TAGWARDEN_SWEEP_SCOPES", format!("/subscriptions/{SUB}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The handler the Function builds from `vars` (the policy at `policy_url` instead, if given),
/// with retries short enough for a test's faults to play out in seconds.
pub fn build_handler(vars: &HashMap<String, String>, policy_url: Option<&str>) -> Handler {
    let config = Config::from_lookup(|k| match (k, policy_url) {
        ("TAGWARDEN_POLICY", Some(url)) => Some(url.to_string()),
        _ => vars.get(k).cloned(),
    })
    .expect("valid configuration");
    let mut handler = Handler::new(&config).expect("handler");
    // Every policy change a test delivers is swept at once, never held for a coalescing window.
    handler.engine.policy_window = Duration::ZERO;
    let (first, max) = (Duration::from_millis(10), Duration::from_millis(100));
    handler.engine.adapter.arm.retry = Retry {
        busy: Backoff { attempts: 4, first, max },
        not_found: Backoff { attempts: 2, first, max },
        poll_timeout: Duration::from_secs(5),
    };
    handler
}

/// The Functions host invoking `function` with one binding value on `handler`.
pub async fn invoke(handler: &Handler, function: &str, binding: &str, value: Value) -> (u16, Value) {
    let req = Request {
        method: "POST".into(),
        path: format!("/{function}"),
        headers: vec![("x-azure-functions-invocationid".into(), super::suffix())],
        body: envelope(function, binding, value).into_bytes(),
        ..Request::default()
    };
    let resp = handler.handle(req).await;
    (resp.status, serde_json::from_slice(&resp.body).expect("the handler answers JSON"))
}

/// The timer's sweep as the Functions host runs it: the timer's answer; and where it sent the
/// sweep on in parts (`ReturnValue.parts`, one message each in `Outputs.parts`), every part's
/// message through `sweep-queue`, all at once (the host runs them on as many instances as
/// `maximum_instance_count` allows), added up into one answer: `by_status`, `failed` and
/// `resources` summed, `listing_fallbacks` and `Logs` joined, `parts` the timer's. The status is
/// the first that is not 200, else 200.
pub async fn timer_sweep(handler: &Handler) -> (u16, Value) {
    let (status, timer_body) = invoke(handler, "sweep", "timer", timer()).await;
    let Some(parts) = timer_body["ReturnValue"]["parts"].as_array().cloned() else { return (status, timer_body) };
    assert_eq!(status, 200, "the timer that sends parts on answers 200: {timer_body:#}");
    let messages = timer_body["Outputs"]["parts"].as_array().cloned().expect("one message per part in Outputs.parts");
    assert_eq!(messages.len(), parts.len(), "{timer_body:#}");
    let answers = futures_util::future::join_all(
        messages.into_iter().map(|m| async move { invoke(handler, "sweep-queue", "message", m).await }),
    )
    .await;
    let mut by_status = serde_json::Map::new();
    let (mut failed, mut resources, mut fallbacks, mut logs) = (0, 0, Vec::new(), Vec::new());
    let mut status = 200;
    for (s, body) in answers {
        if status == 200 {
            status = s;
        }
        let r = &body["ReturnValue"];
        for (k, n) in r["by_status"].as_object().cloned().unwrap_or_default() {
            let sum = by_status.get(&k).and_then(Value::as_u64).unwrap_or_default() + n.as_u64().unwrap_or_default();
            by_status.insert(k, json!(sum));
        }
        failed += r["failed"].as_u64().unwrap_or_default();
        resources += r["resources"].as_u64().unwrap_or_default();
        fallbacks.extend(r["listing_fallbacks"].as_array().cloned().unwrap_or_default());
        logs.extend(body["Logs"].as_array().cloned().unwrap_or_default());
    }
    let body = json!({
        "Logs": logs,
        "ReturnValue": {"by_status": by_status, "failed": failed, "resources": resources,
                        "listing_fallbacks": fallbacks, "parts": parts},
    });
    (status, body)
}

/// The account SAS with its signature replaced (what an expired or rotated key looks like to
/// the service: Azurite answers 403 `AuthorizationFailure`).
pub fn tampered_sas() -> String {
    let sas = azurite::account_sas();
    let (head, _) = sas.split_once("sig=").expect("a signed SAS");
    format!("{head}sig={}", azurite::percent_encode(&azurite::base64_encode(&[7u8; 32])))
}

/// The `sig` value of a SAS, as sent (percent-encoded) and decoded.
pub fn sas_signatures(sas: &str) -> [String; 2] {
    let sig = sas.split('&').find_map(|p| p.strip_prefix("sig=")).expect("sig").to_string();
    let decoded = sig.replace("%2B", "+").replace("%2F", "/").replace("%3D", "=");
    [sig, decoded]
}

/// A shared, growable log sink.
#[derive(Clone, Default)]
pub struct Buffer(pub Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

/// Everything logged in this test process from the first call on, at `debug` for every target
/// (tagwarden, hyper, reqwest through `log`, rustls…), as the function's JSON lines.
pub fn captured() -> &'static Buffer {
    static LOGS: OnceLock<Buffer> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Buffer::default();
        let writer = buf.clone();
        tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .without_time()
            .try_init()
            .expect("the only subscriber (and log bridge) of this test process");
        buf
    })
}
