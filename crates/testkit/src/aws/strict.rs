//! The strict layer: a proxy in front of moto that holds every AWS integration test to what AWS
//! documents, where moto is more lenient. Every request of the tests' SDK clients, the CLI and
//! the Lambda goes through it (`aws::moto().endpoint` is this proxy, not moto).
//!
//! It refuses, in the service's own error shape, what AWS refuses and moto accepts; and it models
//! what moto does not have at all:
//! - S3 system tags (`aws:cloudformation:…`): moto refuses any `aws:` key, so the layer keeps them
//!   itself, shows them in `GetBucketTagging` / `GetResources`, and requires every
//!   `PutBucketTagging` to carry them back unchanged, as S3 does;
//! - IAM's case-insensitive tag keys on roles and users;
//! - the Tagging API's index, which lags the services' own tags;
//! - STS session policies on the tag writes (`session_allows`): moto hands out a session's
//!   credentials but enforces no IAM, so the layer holds EC2 `CreateTags` and S3
//!   `PutBucketTagging` of a session assumed with a `Policy` to that policy.
//!
//! Each rule names its source. Deliberately not here: faults (throttling, resets) — that is
//! [`crate::fault_proxy`], which tests put in front of this layer.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::fault_proxy::{forward, forward_bytes, BoxError};
type Answer = Response<Full<Bytes>>;

/// Tag writes per call and per resource, as documented.
const EC2_CREATE_TAGS_MAX_IDS: usize = 1000;
const TAG_RESOURCES_MAX_ARNS: usize = 20;
const ROUTE53_CHANGE_TAGS_MAX: usize = 10;
const USER_TAGS_PER_RESOURCE: usize = 50;

pub struct Strict {
    pub endpoint: String,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    upstream: OnceLock<SocketAddr>,
    /// Bucket → its `aws:` system tags.
    s3_system: Mutex<BTreeMap<String, Vec<(String, String)>>>,
    /// Access key → how far the Tagging API's index lags for that caller.
    lag: Mutex<HashMap<String, Duration>>,
    /// (access key, request body) → the `GetResources` answer the index holds, and since when.
    index: Mutex<HashMap<(String, Bytes), (Instant, Bytes)>>,
    /// Rule → how often it refused or rewrote a request.
    fired: Mutex<BTreeMap<&'static str, u64>>,
    /// Accounts whose roles `AssumeRole` must find (`Strict::require_roles_in`).
    roles_checked: Mutex<std::collections::HashSet<String>>,
    /// Access key of a session assumed with a session policy → the role's account and that policy.
    session_policies: Mutex<HashMap<String, (String, Value)>>,
    /// By account: tag writes checked against a session policy (allowed or refused).
    session_checked: Mutex<HashMap<String, u64>>,
    /// Every role ARN an `AssumeRole` asked for, in order.
    assumed: Mutex<Vec<String>>,
    /// Access key of every session `AssumeRole` handed out → its account.
    accounts: Mutex<HashMap<String, String>>,
    /// Every request, in order: who sent it, what it was, and its size and its answer's.
    log: Mutex<Vec<Call>>,
}

/// One request the layer saw (`Strict::calls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The account of the session that sent it (empty: not a session the layer saw handed out).
    pub account: String,
    pub service: String,
    pub operation: String,
    pub request_bytes: usize,
    pub response_bytes: usize,
    pub status: u16,
}

/// Every AWS operation that writes a tag (or a tag set), on every service tagwarden writes.
pub const TAG_WRITES: &[&str] = &[
    "CreateTags",
    "AddTags",
    "AddTagsToResource",
    "TagResource",
    "TagResources",
    "PutBucketTagging",
    "TagRole",
    "TagUser",
    "TagPolicy",
    "TagInstanceProfile",
    "TagOpenIDConnectProvider",
    "TagServerCertificate",
    "ChangeTagsForResource",
    "AddTagsToStream",
    "TagQueue",
    "TagLogGroup",
    "AddTagsToCertificate",
    "TagMFADevice",
    "TagSAMLProvider",
];

/// The process-wide layer in front of `upstream` (moto), on its own runtime so that it outlives
/// each test's runtime.
pub fn start(upstream: &str) -> Strict {
    let addr: SocketAddr = upstream.trim_start_matches("http://").trim_end_matches('/').parse().expect("upstream");
    let state = Arc::new(State::default());
    state.upstream.set(addr).expect("set once");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the strict layer");
    listener.set_nonblocking(true).expect("nonblocking");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let serving = state.clone();
    std::thread::Builder::new()
        .name("strict-aws".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("strict layer runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("listener");
                loop {
                    let Ok((stream, _)) = listener.accept().await else { continue };
                    let state = serving.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| handle(state.clone(), req));
                        let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                    });
                }
            });
        })
        .expect("strict layer thread");
    Strict { endpoint, state }
}

impl Strict {
    /// Give `bucket` system tags, as CloudFormation, CDK or Service Catalog would.
    pub fn add_s3_system_tags(&self, bucket: &str, tags: &[(&str, &str)]) {
        let tags = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.state.s3_system.lock().unwrap().insert(bucket.to_string(), tags);
    }

    /// Make the Tagging API answer the caller with access key `akid` from an index refreshed only
    /// every `lag`: a `GetResources` request is answered as it was first answered, until that
    /// answer is `lag` old.
    pub fn set_tagging_lag(&self, akid: &str, lag: Duration) {
        self.state.lag.lock().unwrap().insert(akid.to_string(), lag);
    }

    /// Hold `AssumeRole` into `account` to AWS's rule: a role that does not exist there is
    /// refused. moto hands out a session for any role ARN (its other tests assume roles nobody
    /// created), so the rule covers only the accounts a test models as real.
    pub fn require_roles_in(&self, account: &str) {
        self.state.roles_checked.lock().unwrap().insert(account.to_string());
    }

    /// In `account` (tests run side by side, each in accounts of its own): the sessions assumed
    /// with a session policy, and the tag writes checked against one.
    pub fn session_checks(&self, account: &str) -> (usize, u64) {
        let policies = self.state.session_policies.lock().unwrap().values().filter(|(a, _)| a == account).count();
        (policies, self.state.session_checked.lock().unwrap().get(account).copied().unwrap_or(0))
    }

    /// The roles of `account` an `AssumeRole` asked for (granted or refused), each once.
    pub fn assumed_roles(&self, account: &str) -> std::collections::BTreeSet<String> {
        let assumed = self.state.assumed.lock().unwrap();
        assumed.iter().filter(|r| r.split(':').nth(4) == Some(account)).cloned().collect()
    }

    /// Every request sessions of `account` sent through the layer, in order.
    pub fn calls(&self, account: &str) -> Vec<Call> {
        self.state.log.lock().unwrap().iter().filter(|c| c.account == account).cloned().collect()
    }

    /// The tag writes ([`TAG_WRITES`]) sessions of `account` sent, by operation: counted here,
    /// by what reached the emulator's door, not by tagwarden's own counters.
    pub fn tag_writes(&self, account: &str) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for c in self.calls(account).into_iter().filter(|c| TAG_WRITES.contains(&c.operation.as_str())) {
            *out.entry(format!("{}:{}", c.service, c.operation)).or_default() += 1;
        }
        out
    }

    /// How often each rule refused or rewrote a request.
    pub fn fired(&self) -> BTreeMap<&'static str, u64> {
        self.state.fired.lock().unwrap().clone()
    }
}

impl State {
    fn fire(&self, rule: &'static str) {
        *self.fired.lock().unwrap().entry(rule).or_default() += 1;
    }
}

/// [`handle_checked`], with every request logged under its session's account.
async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Answer, BoxError> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let service = crate::fault_proxy::service_of(&parts.headers);
    let operation = crate::fault_proxy::operation_of(&service, &parts.method, &parts.uri, &parts.headers, &body);
    let akid = access_key(&parts.headers);
    let role = (operation == "AssumeRole").then(|| {
        let p = form(&body);
        p.iter().find(|(k, _)| k == "RoleArn").map(|(_, v)| v.clone()).unwrap_or_default()
    });
    let request_bytes = body.len();
    let answer = handle_checked(state.clone(), parts, body).await?;
    let (parts, answer) = answer.into_parts();
    let answer = answer.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    if let Some(role) = role {
        let text = String::from_utf8_lossy(&answer);
        if let (Some(key), Some(account)) = (between(&text, "<AccessKeyId>", "</AccessKeyId>"), role.split(':').nth(4))
        {
            state.accounts.lock().unwrap().insert(key.to_string(), account.to_string());
        }
    }
    let account = state.accounts.lock().unwrap().get(&akid).cloned().unwrap_or_default();
    state.log.lock().unwrap().push(Call {
        account,
        service,
        operation,
        request_bytes,
        response_bytes: answer.len(),
        status: parts.status.as_u16(),
    });
    Ok(Response::from_parts(parts, Full::new(answer)))
}

async fn handle_checked(
    state: Arc<State>,
    mut parts: hyper::http::request::Parts,
    mut body: Bytes,
) -> Result<Answer, BoxError> {
    let service = crate::fault_proxy::service_of(&parts.headers);
    let op = crate::fault_proxy::operation_of(&service, &parts.method, &parts.uri, &parts.headers, &body);
    let upstream = *state.upstream.get().expect("upstream");
    let akid = access_key(&parts.headers);

    match (service.as_str(), op.as_str()) {
        ("sts", "AssumeRole") => {
            let p = form(&body);
            let role = p.iter().find(|(k, _)| k == "RoleArn").map(|(_, v)| v.clone()).unwrap_or_default();
            let account = role.split(':').nth(4).unwrap_or_default().to_string();
            let name = role.rsplit('/').next().unwrap_or_default().to_string();
            state.assumed.lock().unwrap().push(role.clone());
            if state.roles_checked.lock().unwrap().contains(&account) && !role_exists(upstream, &account, &name).await?
            {
                // STS API reference, AssumeRole: a role the caller may not assume (missing, or its
                // trust policy does not name the caller) is refused with 403 AccessDenied, "User:
                // <caller> is not authorized to perform: sts:AssumeRole on resource: <role>".
                state.fire("sts-assume-missing-role");
                return Ok(query_error(
                    403,
                    "AccessDenied",
                    &format!("User: {akid} is not authorized to perform: sts:AssumeRole on resource: {role}"),
                ));
            }
            // A Policy that is not JSON stands as one that allows nothing (STS would refuse it:
            // MalformedPolicyDocument), so a test can never pass on an unchecked session.
            let policy = p.iter().find(|(k, _)| k == "Policy").map(|(_, v)| {
                serde_json::from_str::<Value>(v).unwrap_or_else(|_| serde_json::json!({"Statement": []}))
            });
            if let Some(policy) = policy {
                // IAM User Guide, "Session policies": "The resulting session's permissions are the
                // intersection of the entity's identity-based policy and the session policies."
                let (parts, body) = forward_bytes(upstream, parts, body).await?;
                let text = String::from_utf8_lossy(&body);
                if let Some(key) = between(&text, "<AccessKeyId>", "</AccessKeyId>") {
                    state.session_policies.lock().unwrap().insert(key.to_string(), (account, policy));
                }
                return Ok(Response::from_parts(parts, Full::new(body)));
            }
        }
        ("ec2", "CreateTags") => {
            let p = form(&body);
            // EC2 API reference, CreateTags: "Resources … Constraints: Up to 1000 resource IDs."
            if count_prefixed(&p, "ResourceId.") > EC2_CREATE_TAGS_MAX_IDS {
                state.fire("ec2-create-tags-1000-ids");
                return Ok(ec2_error(400, "InvalidParameterValue", "The request may name up to 1000 resource IDs."));
            }
            let session = state.session_policies.lock().unwrap().get(&akid).cloned();
            if let Some((account, policy)) = session {
                *state.session_checked.lock().unwrap().entry(account).or_default() += 1;
                let ids = values_prefixed(&p, "ResourceId.");
                let filter: String =
                    ids.iter().enumerate().map(|(i, id)| format!("&Filter.1.Value.{}={}", i + 1, enc(id))).collect();
                let described = upstream_call(
                    upstream,
                    &parts,
                    &format!("Action=DescribeTags&Version=2016-11-15&Filter.1.Name=resource-id{filter}"),
                )
                .await?;
                let tags = ec2_described_tags(&described);
                // The account is left out: the layer does not know it, and a session policy's
                // resources here are `*` (the role scopes the account).
                let region = region_of(&parts.headers);
                // A request naming several resources is authorized for each: one not allowed
                // refuses the call (EC2 API reference, "Error codes": UnauthorizedOperation, "You
                // are not authorized to perform this operation").
                let refused = ids.iter().find(|id| {
                    let arn = format!("arn:aws:ec2:{region}::{}/{id}", ec2_type_of(id));
                    let none = Vec::new();
                    !session_allows(&policy, "ec2:CreateTags", &arn, Some(tags.get(*id).unwrap_or(&none)))
                });
                if let Some(id) = refused {
                    state.fire("sts-session-policy");
                    return Ok(ec2_error(
                        403,
                        "UnauthorizedOperation",
                        &format!("You are not authorized to perform this operation. (session policy: ec2:CreateTags on {id})"),
                    ));
                }
            }
            if let Some(r) = reserved_key(&state, &tag_pairs(&p, "Tag."), || {
                ec2_error(400, "InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
            }) {
                return Ok(r);
            }
        }
        ("elasticloadbalancing", "AddTags") => {
            let p = form(&body);
            // The API reference types ResourceArns as a list, but the service takes exactly one:
            // "ValidationError: Only one resource can be tagged at a time" (aws/aws-sdk-go-v2#2715,
            // fog/fog-aws#539).
            let arns = values_prefixed(&p, "ResourceArns.member.");
            if arns.len() > 1 {
                state.fire("elbv2-add-tags-one-arn");
                return Ok(query_error(400, "ValidationError", "Only one resource can be tagged at a time"));
            }
            let new = tag_pairs(&p, "Tags.member.");
            if let Some(r) = reserved_key(&state, &new, || {
                query_error(400, "ValidationError", "Tag keys starting with 'aws:' are reserved for internal use")
            }) {
                return Ok(r);
            }
            // ELB user guides ("Tag an Application Load Balancer", "Tag a target group"): up to 50
            // tags per resource; past it AddTags fails with TooManyTags (moto has no limit).
            if let Some(arn) = arns.first() {
                let have = upstream_keys(
                    upstream,
                    &parts,
                    &format!("Action=DescribeTags&Version=2015-12-01&ResourceArns.member.1={}", enc(arn)),
                )
                .await?;
                if over_limit(&have, &new, false) {
                    state.fire("elbv2-50-tags");
                    return Ok(query_error(
                        400,
                        "TooManyTags",
                        "You've reached the limit on the number of tags for this resource.",
                    ));
                }
            }
        }
        ("iam", op @ ("TagRole" | "TagUser")) => {
            let p = form(&body);
            let new = tag_pairs(&p, "Tags.member.");
            // IAM user guide, "Tagging IAM resources": tag keys are case-insensitive. Two keys that
            // differ only in case in one request are refused ("InvalidInput: Duplicate tag keys
            // found. Please note that Tag keys are case insensitive.", reported in
            // terraform-aws-modules/terraform-aws-rds-aurora#189, kubernetes/kops#11727).
            let mut seen = std::collections::HashSet::new();
            if new.iter().any(|(k, _)| !seen.insert(k.to_lowercase())) {
                state.fire("iam-duplicate-keys-any-case");
                return Ok(query_error(
                    400,
                    "InvalidInput",
                    "Duplicate tag keys found. Please note that Tag keys are case insensitive.",
                ));
            }
            if let Some(r) = reserved_key(&state, &new, || {
                query_error(400, "InvalidInput", "User-defined tag keys can't start with 'aws:'")
            }) {
                return Ok(r);
            }
            let (list, untag, name_param) = if op == "TagRole" {
                ("ListRoleTags", "UntagRole", "RoleName")
            } else {
                ("ListUserTags", "UntagUser", "UserName")
            };
            let name = p.iter().find(|(k, _)| k == name_param).map(|(_, v)| v.clone()).unwrap_or_default();
            let have = upstream_keys(
                upstream,
                &parts,
                &format!("Action={list}&Version=2010-05-08&{name_param}={}&MaxItems=1000", enc(&name)),
            )
            .await?;
            // TagRole/TagUser API reference, Errors: LimitExceeded (409) past 50 tags per entity.
            if over_limit(&have, &new, true) {
                state.fire("iam-50-tags");
                return Ok(query_error(
                    409,
                    "LimitExceeded",
                    "The number of tags has reached the maximum limit of 50 for this entity.",
                ));
            }
            // Adding `team` where `Team` exists replaces it: IAM keeps one key, in the new case
            // (aws/aws-cdk#26253 shows ListRoleTags answering only the later `test` after `Test`).
            // moto would keep both, so the layer removes the old spelling first.
            let clashes: Vec<&String> =
                have.iter().filter(|old| new.iter().any(|(k, _)| k != *old && k.eq_ignore_ascii_case(old))).collect();
            if !clashes.is_empty() {
                state.fire("iam-keys-case-insensitive");
                let keys: String =
                    clashes.iter().enumerate().map(|(i, k)| format!("&TagKeys.member.{}={}", i + 1, enc(k))).collect();
                upstream_call(
                    upstream,
                    &parts,
                    &format!("Action={untag}&Version=2010-05-08&{name_param}={}{keys}", enc(&name)),
                )
                .await?;
            }
        }
        ("s3", "PutBucketTagging") => {
            let bucket = bucket_of(&parts.uri);
            let session = state.session_policies.lock().unwrap().get(&akid).cloned();
            if let Some((account, _)) = &session {
                *state.session_checked.lock().unwrap().entry(account.clone()).or_default() += 1;
            }
            let policy = session.map(|(_, p)| p);
            // S3 evaluates no aws:ResourceTag for PutBucketTagging on a general purpose bucket
            // (infra/aws/iam.tf, WriteBucketTags): only a statement on the bucket's ARN allows it.
            if policy
                .is_some_and(|p| !session_allows(&p, "s3:PutBucketTagging", &format!("arn:aws:s3:::{bucket}"), None))
            {
                state.fire("sts-session-policy");
                return Ok(s3_error(403, "AccessDenied", "Access Denied"));
            }
            let tags = xml_tags(&body);
            let system: Vec<(String, String)> =
                state.s3_system.lock().unwrap().get(&bucket).cloned().unwrap_or_default();
            let sent: Vec<(String, String)> = tags.iter().filter(|(k, _)| is_system(k)).cloned().collect();
            // S3 requires a PUT to carry the bucket's system tags back unchanged ("InvalidTag: System
            // Tags cannot be removed by requester", cloud-custodian#2834 and #2861,
            // terraform-provider-aws#7323) and refuses any other `aws:` key ("Your TagKey cannot be
            // prefixed with aws:", cloud-custodian#370).
            if sent.iter().any(|t| !system.contains(t)) {
                state.fire("s3-no-new-system-tags");
                return Ok(s3_error(400, "InvalidTag", "Your TagKey cannot be prefixed with aws:"));
            }
            if system.iter().any(|t| !sent.contains(t)) {
                state.fire("s3-system-tags-kept");
                return Ok(s3_error(400, "InvalidTag", "System Tags cannot be removed by requester"));
            }
            // S3 user guide, "Using cost allocation S3 bucket tags": up to 50 tags per bucket
            // (moto accepts 51; objects answer "BadRequest: Object tags cannot be greater than 10").
            if tags.len() - sent.len() > USER_TAGS_PER_RESOURCE {
                state.fire("s3-50-tags");
                return Ok(s3_error(400, "BadRequest", "Bucket tag count cannot be greater than 50"));
            }
            if !sent.is_empty() {
                // moto refuses `aws:` keys outright: hand it the user tags only; the layer keeps
                // the system ones.
                let user: Vec<(String, String)> = tags.into_iter().filter(|(k, _)| !is_system(k)).collect();
                body = Bytes::from(tagging_xml(&user));
                for h in [
                    "content-md5",
                    "x-amz-checksum-crc32",
                    "x-amz-checksum-crc32c",
                    "x-amz-checksum-sha1",
                    "x-amz-checksum-sha256",
                    "x-amz-sdk-checksum-algorithm",
                    "content-length",
                ] {
                    parts.headers.remove(h);
                }
            }
        }
        ("tagging", "TagResources") => {
            // Resource Groups Tagging API reference, TagResources: ResourceARNList 1–20 items.
            let v: Value = serde_json::from_slice(&body).unwrap_or_default();
            if v["ResourceARNList"].as_array().is_some_and(|a| a.len() > TAG_RESOURCES_MAX_ARNS) {
                state.fire("tagging-20-arns");
                return Ok(json_error(
                    400,
                    "InvalidParameterException",
                    "ResourceARNList must contain between 1 and 20 ARNs",
                ));
            }
        }
        // Route 53 API reference, ChangeTagsForResource: AddTags "Maximum number of 10 items".
        ("route53", op)
            if op.starts_with("POST /2013-04-01/tags/") && xml_tags(&body).len() > ROUTE53_CHANGE_TAGS_MAX =>
        {
            state.fire("route53-10-tags");
            return Ok(s3_error(400, "InvalidInput", "AddTags may hold at most 10 tags"));
        }
        ("tagging", "GetResources") => {
            // The Tagging API answers from an index that lags the services' own tags ("it can
            // take time for the tag changes to be reflected", Resource Groups Tagging API
            // reference, GetResources). Modelled per caller: with a lag set, an answer is kept and
            // given again until it is `lag` old.
            let lag = state.lag.lock().unwrap().get(&akid).copied();
            let key = (akid.clone(), body.clone());
            if let Some(lag) = lag {
                let stale = state.index.lock().unwrap().get(&key).cloned();
                if let Some((_, stale)) = stale.filter(|(at, _)| at.elapsed() < lag) {
                    state.fire("tagging-index-lag");
                    return Ok(Response::builder()
                        .status(200)
                        .header("content-type", "application/x-amz-json-1.1")
                        .body(Full::new(stale))
                        .expect("response"));
                }
            }
            let (parts, body) = forward_bytes(upstream, parts, body).await?;
            let body = with_system_tags_json(&state, body);
            if lag.is_some() {
                state.index.lock().unwrap().insert(key, (Instant::now(), body.clone()));
            }
            return Ok(Response::from_parts(parts, Full::new(body)));
        }
        ("s3", "GetBucketTagging") => {
            let bucket = bucket_of(&parts.uri);
            let system = state.s3_system.lock().unwrap().get(&bucket).cloned().unwrap_or_default();
            let (mut parts, body) = forward_bytes(upstream, parts, body).await?;
            if system.is_empty() {
                return Ok(Response::from_parts(parts, Full::new(body)));
            }
            let mut tags = if parts.status.is_success() { xml_tags(&body) } else { Vec::new() };
            let no_tag_set = String::from_utf8_lossy(&body).contains("NoSuchTagSet");
            if !parts.status.is_success() && !no_tag_set {
                return Ok(Response::from_parts(parts, Full::new(body)));
            }
            tags.extend(system);
            parts.status = hyper::StatusCode::OK;
            return Ok(Response::from_parts(parts, Full::new(Bytes::from(tagging_xml(&tags)))));
        }
        _ => {}
    }
    forward(upstream, parts, body).await
}

/// Whether a session policy allows `action` on `resource` carrying `tags` (`None`: the service
/// puts no `aws:ResourceTag` in the request context). The subset of IAM's evaluation our session
/// policies use (IAM User Guide, "Policy evaluation logic" and the JSON element reference): an
/// explicit Deny wins, else some Allow must match its `Action` or `NotAction`, its `Resource`
/// (`*` and `?` wildcards), and every condition, of which only `StringEquals` on
/// `aws:ResourceTag/<key>` is known here; any other condition matches nothing (fail closed).
fn session_allows(policy: &Value, action: &str, resource: &str, tags: Option<&Vec<(String, String)>>) -> bool {
    let statements = match &policy["Statement"] {
        Value::Array(s) => s.clone(),
        s @ Value::Object(_) => vec![s.clone()],
        _ => Vec::new(),
    };
    let listed = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        }
    };
    let matches = |st: &Value| {
        let action_ok = if st.get("NotAction").is_some() {
            !listed(&st["NotAction"]).iter().any(|a| glob(&a.to_ascii_lowercase(), &action.to_ascii_lowercase()))
        } else {
            listed(&st["Action"]).iter().any(|a| glob(&a.to_ascii_lowercase(), &action.to_ascii_lowercase()))
        };
        let resource_ok = listed(&st["Resource"]).iter().any(|r| glob(r, resource));
        let conditions_ok = match st.get("Condition").and_then(Value::as_object) {
            None => true,
            Some(c) => c.iter().all(|(op, keys)| {
                op == "StringEquals"
                    && keys.as_object().is_some_and(|keys| {
                        keys.iter().all(|(key, want)| {
                            // "Condition key names are not case-sensitive" (IAM User Guide, "IAM JSON
                            // policy elements: Condition"): the tag key in it neither.
                            let Some(tag) = key.strip_prefix("aws:ResourceTag/") else { return false };
                            let have = tags
                                .and_then(|t| t.iter().find(|(k, _)| k.eq_ignore_ascii_case(tag)))
                                .map(|(_, v)| v.as_str());
                            have.is_some_and(|v| listed(want).iter().any(|w| w == v))
                        })
                    })
            }),
        };
        action_ok && resource_ok && conditions_ok
    };
    let effect = |st: &Value, e: &str| st["Effect"].as_str() == Some(e);
    !statements.iter().any(|st| effect(st, "Deny") && matches(st))
        && statements.iter().any(|st| effect(st, "Allow") && matches(st))
}

/// IAM's wildcard match: `*` any run of characters, `?` one.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// EC2 `DescribeTags` items: resource id → its tags.
fn ec2_described_tags(body: &[u8]) -> HashMap<String, Vec<(String, String)>> {
    let text = String::from_utf8_lossy(body);
    let mut out: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for item in text.split("<item>").skip(1) {
        let (Some(id), Some(key)) = (between(item, "<resourceId>", "</resourceId>"), between(item, "<key>", "</key>"))
        else {
            continue;
        };
        let value = between(item, "<value>", "</value>").map(xml_unescape).unwrap_or_default();
        out.entry(id.to_string()).or_default().push((xml_unescape(key), value));
    }
    out
}

/// The resource type of an EC2 id in its ARN (`i-` instance, `vol-` volume, ...).
fn ec2_type_of(id: &str) -> &'static str {
    match id.split('-').next().unwrap_or_default() {
        "i" => "instance",
        "vol" => "volume",
        "eni" => "network-interface",
        "sg" => "security-group",
        "vpc" => "vpc",
        "subnet" => "subnet",
        "snap" => "snapshot",
        "ami" => "image",
        _ => "resource",
    }
}

/// The region of a SigV4 credential scope (`Credential=AKID/date/region/service/aws4_request`).
fn region_of(headers: &hyper::HeaderMap) -> String {
    let auth = headers.get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    auth.split("Credential=").nth(1).and_then(|c| c.split('/').nth(2)).unwrap_or_default().to_string()
}

/// Refuse a user `aws:` key (every service: "The aws: prefix is reserved for AWS use", Tagging
/// best practices whitepaper; moto accepts it on EC2, ELBv2 and IAM).
fn reserved_key(state: &State, tags: &[(String, String)], refuse: impl FnOnce() -> Answer) -> Option<Answer> {
    tags.iter().any(|(k, _)| is_system(k)).then(|| {
        state.fire("aws-prefix-reserved");
        refuse()
    })
}

fn is_system(key: &str) -> bool {
    key.len() >= 4 && key[..4].eq_ignore_ascii_case("aws:")
}

/// Would writing `new` onto a resource carrying `have` pass 50 user tags? `aws:` tags do not
/// count; `ignore_case` for IAM, where `team` replaces `Team`.
fn over_limit(have: &[String], new: &[(String, String)], ignore_case: bool) -> bool {
    let same = |a: &str, b: &str| if ignore_case { a.eq_ignore_ascii_case(b) } else { a == b };
    let user = have.iter().filter(|k| !is_system(k)).count();
    let added = new.iter().filter(|(k, _)| !is_system(k) && !have.iter().any(|h| same(h, k))).count();
    user + added > USER_TAGS_PER_RESOURCE
}

/// `Credential=AKID/…` of a SigV4 `Authorization` header.
fn access_key(headers: &hyper::HeaderMap) -> String {
    let auth = headers.get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    auth.split("Credential=").nth(1).and_then(|c| c.split('/').next()).unwrap_or_default().to_string()
}

fn bucket_of(uri: &hyper::Uri) -> String {
    uri.path().trim_start_matches('/').split('/').next().unwrap_or_default().to_string()
}

/// The `<Key>`/`<Value>` pairs of an S3 or Route 53 tag set.
fn xml_tags(body: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(body);
    let mut out = Vec::new();
    for tag in text.split("<Tag>").skip(1) {
        let key = between(tag, "<Key>", "</Key>").map(xml_unescape).unwrap_or_default();
        let value = between(tag, "<Value>", "</Value>").map(xml_unescape).unwrap_or_default();
        out.push((key, value));
    }
    out
}

/// Every `<Key>` of a query-protocol answer (ELBv2 `DescribeTags`, IAM `List*Tags`).
fn xml_keys(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.split("<Key>").skip(1).filter_map(|s| s.split("</Key>").next()).map(xml_unescape).collect()
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let end = s[start..].find(close)? + start;
    Some(&s[start..end])
}

fn xml_unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn tagging_xml(tags: &[(String, String)]) -> String {
    let body: String = tags
        .iter()
        .map(|(k, v)| format!("<Tag><Key>{}</Key><Value>{}</Value></Tag>", xml_escape(k), xml_escape(v)))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet>{body}</TagSet></Tagging>"
    )
}

/// `GetResources` shows S3 system tags too.
fn with_system_tags_json(state: &State, body: Bytes) -> Bytes {
    let system = state.s3_system.lock().unwrap().clone();
    if system.is_empty() {
        return body;
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(&body) else { return body };
    let mut changed = false;
    for m in v["ResourceTagMappingList"].as_array_mut().into_iter().flatten() {
        let bucket = m["ResourceARN"].as_str().and_then(|a| a.strip_prefix("arn:aws:s3:::")).map(str::to_owned);
        if let (Some(tags), Some(extra)) = (m["Tags"].as_array_mut(), bucket.and_then(|b| system.get(&b))) {
            tags.extend(extra.iter().map(|(k, v)| serde_json::json!({"Key": k, "Value": v})));
            changed = true;
        }
    }
    if changed {
        Bytes::from(v.to_string())
    } else {
        body
    }
}

/// A query-protocol form body, decoded.
fn form(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (dec(k), dec(v))
        })
        .collect()
}

fn count_prefixed(p: &[(String, String)], prefix: &str) -> usize {
    values_prefixed(p, prefix).len()
}

fn values_prefixed(p: &[(String, String)], prefix: &str) -> Vec<String> {
    p.iter()
        .filter(|(k, _)| k.strip_prefix(prefix).is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .map(|(_, v)| v.clone())
        .collect()
}

/// `Tag.N.Key` / `Tag.N.Value` (EC2) or `Tags.member.N.Key` (ELBv2, IAM) pairs.
fn tag_pairs(p: &[(String, String)], prefix: &str) -> Vec<(String, String)> {
    let mut by_n: BTreeMap<u32, (String, String)> = BTreeMap::new();
    for (k, v) in p {
        let Some(rest) = k.strip_prefix(prefix) else { continue };
        let Some((n, field)) = rest.split_once('.') else { continue };
        let Ok(n) = n.parse() else { continue };
        let e = by_n.entry(n).or_default();
        match field {
            "Key" => e.0 = v.clone(),
            "Value" => e.1 = v.clone(),
            _ => {}
        }
    }
    by_n.into_values().collect()
}

fn dec(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Ask moto something on the caller's behalf (same credentials: moto picks the account from the
/// access key and does not check signatures).
async fn upstream_call(
    upstream: SocketAddr,
    original: &hyper::http::request::Parts,
    form_body: &str,
) -> Result<Bytes, BoxError> {
    let mut builder = Request::builder().method("POST").uri(original.uri.path());
    for h in [hyper::header::AUTHORIZATION.as_str(), "x-amz-date", "x-amz-security-token", "host"] {
        if let Some(v) = original.headers.get(h) {
            builder = builder.header(h, v);
        }
    }
    let req = builder
        .header("content-type", "application/x-www-form-urlencoded; charset=utf-8")
        .body(Full::new(Bytes::from(form_body.to_string())))?;
    let (parts, body) = req.into_parts();
    let resp = forward(upstream, parts, body.collect().await?.to_bytes()).await?;
    Ok(resp.into_body().collect().await?.to_bytes())
}

/// Whether role `name` exists in `account`: moto's IAM asked in that account (`x-moto-account-id`;
/// moto routes on the signature's service and does not check it).
async fn role_exists(upstream: SocketAddr, account: &str, name: &str) -> Result<bool, BoxError> {
    let req = Request::builder()
        .method("POST")
        .uri("/")
        .header("host", "iam.amazonaws.com")
        .header("x-moto-account-id", account)
        .header(
            hyper::header::AUTHORIZATION,
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
        )
        .header("content-type", "application/x-www-form-urlencoded; charset=utf-8")
        .body(Full::new(Bytes::from(format!("Action=GetRole&Version=2010-05-08&RoleName={}", enc(name)))))?;
    let (parts, body) = req.into_parts();
    let resp = forward(upstream, parts, body.collect().await?.to_bytes()).await?;
    Ok(resp.status().is_success())
}

async fn upstream_keys(
    upstream: SocketAddr,
    original: &hyper::http::request::Parts,
    form_body: &str,
) -> Result<Vec<String>, BoxError> {
    Ok(xml_keys(&upstream_call(upstream, original, form_body).await?))
}

fn xml(status: u16, body: String) -> Answer {
    Response::builder()
        .status(status)
        .header("content-type", "text/xml")
        .header("x-amzn-requestid", "strict-layer")
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

fn ec2_error(status: u16, code: &str, message: &str) -> Answer {
    xml(status, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>strict-layer</RequestID></Response>"))
}

fn s3_error(status: u16, code: &str, message: &str) -> Answer {
    xml(status, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message><RequestId>strict-layer</RequestId></Error>"))
}

fn query_error(status: u16, code: &str, message: &str) -> Answer {
    xml(status, format!("<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>strict-layer</RequestId></ErrorResponse>"))
}

fn json_error(status: u16, code: &str, message: &str) -> Answer {
    Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amzn-errortype", code)
        .body(Full::new(Bytes::from(format!("{{\"__type\":\"{code}\",\"message\":\"{message}\"}}"))))
        .expect("response")
}
