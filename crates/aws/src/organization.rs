//! One deployment for a whole AWS Organization: the hub's function enforces every member
//! account's clusters through a role it assumes there (the spoke's), and sweeps in shards of one
//! account and region each.
//!
//! - **Which cluster lives where.** Each member account publishes its clusters as a cluster set
//!   of its own in the hub's bucket, `s3://<bucket>/<prefix><account>/<infraID>/…`; the bucket
//!   policy lets a principal write only under its own account's folder (`infra/aws`:
//!   `${aws:PrincipalAccount}` in the resource, `aws:PrincipalOrgID` in the condition). A policy
//!   is enforced only in the account whose folder holds it: the engines of account A load A's set
//!   alone, so a resource of A tagged for a cluster of B is owned by no cluster they enforce.
//!   The deployment names the clusters it enforces (`TAGWARDEN_CLUSTERS=<account>/<infraID>`), or
//!   every cluster an account publishes (`<account>/*`: the account is then the trust boundary).
//! - **Credentials per account.** [`Sessions`]: STS `AssumeRole` into
//!   `arn:<partition>:iam::<account>:role/<member role>` through the SDK's regional STS endpoint,
//!   one session per account shared by its regions, renewed [`RENEW_BEFORE`] before it expires
//!   (a role assumed from the function's own role session is a chained session: at most one hour,
//!   IAM user guide "Role chaining"); a refusal is remembered for [`RETRY_REFUSED`], so an account
//!   whose spoke is missing costs one `AssumeRole` per that time, and its records name the account
//!   and the fix while the other accounts go on.
//! - **Least privilege at any number of clusters.** The spoke role grants the tag reads and the
//!   tag writes (the reserved keys denied) on any resource of its account; every session the hub
//!   starts passes a session policy ([`session_policy`]) that allows each write only on what one of
//!   that session's clusters owns (`aws:ResourceTag/<ownership key>`, S3 buckets by the cluster's
//!   name pattern). The effective permissions are the role's and the session policy's intersection
//!   (IAM user guide, "Session policies"). A session policy holds at most 2,048 characters (STS
//!   `AssumeRole`, `Policy`), about ten clusters; an account with more has its clusters packed into
//!   groups ([`pack`]), a session and a sweep shard each, so the role's own size never grows with
//!   the clusters (1 or 1,000). STS also limits the packed session (policy and tags, a size it
//!   does not publish): a session over it is refused and reported like any refusal; not modelled here.
//! - **Loop safety.** The spoke role's own writes name it as the session issuer
//!   (`arn:<partition>:iam::<account>:role/<member role>`): each account's engine ignores them
//!   beside the function's own role.
//! - **Shards.** A sweep is one [`Shard`] per account × region, each within its own
//!   account-region's API budget (`GetResources` and the EC2 buckets are per account and region):
//!   sent as one SQS message each (`SendMessageBatch`, 10 a call, SQS developer guide "Amazon SQS
//!   message quotas"), consumed by the function one at a time, redelivered on failure and finally
//!   dead-lettered by the queue's redrive policy. What has no region (IAM, Route 53; their events
//!   come from us-east-1) is swept by one region's shard per account ([`OrgConfig::global_region`]).
//!   Each shard writes its outcome to `<prefix>_organization/<account>/<region>[-<group>].json`; the
//!   organization summary ([`Summary`], `tagwarden status --organization`) is read from them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_config::SdkConfig;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sdk_sts::error::ProvideErrorMetadata;
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};

use crate::policy_store::{AwsSource, PolicyLocation};
use crate::{Clients, Tagger};
use tagwarden_core::calls::CallCounter;
use tagwarden_core::cloud::ClusterKind;
use tagwarden_core::events::Event;
use tagwarden_core::policy::clusters::valid_infra_id;
use tagwarden_core::report::{Outcome, Status};
use tagwarden_core::resource::ResourceRef;
use tagwarden_core::services::{Guard, S3, SERVICES};
use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::config::ConfigError;
use tagwarden_engine::enforce::{Adapter, Engine};
use tagwarden_engine::policy_store::{is_policy_document, PolicyStore};
use tagwarden_engine::rate_limit::RateLimit;

mod schedule;
pub use schedule::{
    member_metric_lines, read_state, Census, HubState, OverCap, Scheduled, FOLDERS_MAX, HUB_STATE, OBJECTS_PER_FOLDER,
    SWEEP_SCHEDULE_SECONDS,
};

/// How long before a member session expires it is renewed.
pub const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);
/// How long a refused `AssumeRole` is remembered before the account is tried again.
pub const RETRY_REFUSED: Duration = Duration::from_secs(5 * 60);
/// The longest session a chained role may have (IAM user guide, "Role chaining": one hour).
const SESSION_SECONDS: i32 = 3600;
/// The folder, beside the accounts' folders, where the shards' outcomes are written (not an
/// account id, so never an account's set; writable by the hub alone).
pub const SHARDS_FOLDER: &str = "_organization/";
/// Where the hub keeps a member account's clusters' contest states: `<prefix>_organization/contests/<account>/`,
/// in the hub's own folder, which no member may write (`tagwarden_core::contest`).
pub fn contests_folder(prefix: &str, account: &str) -> String {
    format!("{prefix}{SHARDS_FOLDER}{CONTESTS_SUBFOLDER}{account}/")
}
/// The contest states' folder within [`SHARDS_FOLDER`].
const CONTESTS_SUBFOLDER: &str = "contests/";
/// `SendMessageBatch` takes at most 10 messages (SQS developer guide, "Amazon SQS message quotas").
const SQS_BATCH: usize = 10;
/// Account-regions swept at once when the function or the CLI sweeps the shards itself (and
/// accounts whose events are handled at once): each is its own budget, so they do not share one.
const SHARDS_AT_ONCE: usize = 4;
/// "The plaintext that you use for both inline and managed session policies can't exceed 2,048
/// characters" (STS API reference, `AssumeRole`, `Policy`).
pub const SESSION_POLICY_MAX: usize = 2048;
/// Tries of the shard entries `SendMessageBatch` refused alone.
const ENQUEUE_ATTEMPTS: usize = 3;
/// Failures a shard's outcome names (the rest are counted, and in each cluster's status report).
const FAILURES_NAMED: usize = 20;

/// The hub's organization settings, from the environment.
///
/// - `TAGWARDEN_ORGANIZATION`: `s3://bucket/prefix/`, the folder of the member accounts' sets;
/// - `TAGWARDEN_MEMBER_ROLE`: the spoke role's name in every member account;
/// - `TAGWARDEN_MEMBER_REGIONS`: the regions the spokes cover, comma-separated;
/// - `TAGWARDEN_CLUSTERS`: `<account>/<infraID>` or `<account>/*`, comma-separated;
/// - `TAGWARDEN_SHARD_QUEUE_URL`: the SQS queue a sweep's shards are sent to (unset: the function
///   sweeps them itself, in turn);
/// - `TAGWARDEN_MEMBER_FOLDERS_MAX`: the most folders an account's area may hold ([`FOLDERS_MAX`]
///   by default; its objects at most [`OBJECTS_PER_FOLDER`] times that): an account over it is
///   refused, its listing stopped there;
/// - `TAGWARDEN_SWEEP_SCHEDULE_SECONDS`: the schedule's period ([`SWEEP_SCHEDULE_SECONDS`] by
///   default): the scheduled runs' rotation, and an account whose last sweep is older than twice
///   it is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgConfig {
    pub bucket: String,
    pub prefix: String,
    pub role_name: String,
    pub regions: Vec<String>,
    /// Each member account's clusters: their infraIDs, or `None` for every one it publishes.
    pub clusters: BTreeMap<String, Option<BTreeSet<String>>>,
    pub shard_queue: Option<String>,
    /// The most folders one account's area may hold; its objects at most [`OBJECTS_PER_FOLDER`] times.
    pub folders_max: usize,
    /// The scheduled sweep's period, in seconds.
    pub schedule_seconds: u64,
}

impl OrgConfig {
    /// `None` when `TAGWARDEN_ORGANIZATION` is unset (one account's deployment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let Some(location) = var("TAGWARDEN_ORGANIZATION") else { return Ok(None) };
        let (bucket, prefix) =
            match location.parse::<PolicyLocation>() {
                Ok(PolicyLocation::S3Prefix { bucket, prefix }) => (bucket, prefix),
                _ => return Err(ConfigError::Invalid {
                    var: "TAGWARDEN_ORGANIZATION",
                    value: location,
                    problem: "is not an S3 folder".into(),
                    fix: "set it to s3://BUCKET/PREFIX/, the folder holding <account>/<infraID>/ (the hub module does)"
                        .into(),
                }),
            };
        let role_name = var("TAGWARDEN_MEMBER_ROLE").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_MEMBER_ROLE",
            fix: "set it to the spoke role's name in the member accounts (the hub module does)".into(),
        })?;
        if !role_name.bytes().all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b)) || role_name.len() > 64 {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_MEMBER_ROLE",
                value: role_name,
                problem: "is not an IAM role name (1-64 of A-Z a-z 0-9 +=,.@_-)".into(),
                fix: "give the role's name, not its ARN, e.g. tagwarden-member".into(),
            });
        }
        let regions_value = var("TAGWARDEN_MEMBER_REGIONS").unwrap_or_default();
        let mut regions: Vec<String> =
            regions_value.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned).collect();
        regions.sort();
        regions.dedup();
        let region_like = |r: &str| {
            r.split('-').count() >= 3 && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if regions.is_empty() || !regions.iter().all(|r| region_like(r)) {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_MEMBER_REGIONS",
                value: regions_value,
                problem: "names no region, or something that is not one".into(),
                fix: "list the regions the spokes cover, comma-separated, e.g. us-east-1,eu-west-1".into(),
            });
        }
        let listed = var("TAGWARDEN_CLUSTERS").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_CLUSTERS",
            fix: "an organization is enforced only for the clusters its hub lists: <account>/<infraID> or <account>/* (every cluster the account publishes), comma-separated".into(),
        })?;
        let mut clusters: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        for entry in listed.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |problem: String| ConfigError::Invalid {
                var: "TAGWARDEN_CLUSTERS",
                value: listed.clone(),
                problem,
                fix: "write each as <12-digit account>/<infraID> or <account>/*, e.g. 111122223333/prod-7xk2p".into(),
            };
            let (account, cluster) = entry.split_once('/').ok_or_else(|| bad(format!("{entry:?} names no account")))?;
            if !is_account(account) {
                return Err(bad(format!("{account:?} is not a 12-digit account id")));
            }
            let named = clusters.entry(account.to_string()).or_insert_with(|| Some(BTreeSet::new()));
            if cluster == "*" {
                *named = None;
            } else {
                valid_infra_id(cluster).map_err(|why| bad(format!("{entry:?}: {why}")))?;
                if let Some(set) = named {
                    set.insert(cluster.to_string());
                }
            }
        }
        if clusters.is_empty() {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_CLUSTERS",
                value: listed,
                problem: "names no cluster".into(),
                fix: "list <account>/<infraID> or <account>/*, comma-separated".into(),
            });
        }
        let shard_queue = var("TAGWARDEN_SHARD_QUEUE_URL");
        let number = |name: &'static str, default: u64, fix: &str| match var(name) {
            None => Ok(default),
            Some(v) => {
                v.parse::<u64>().ok().filter(|n| (1..=10_000_000).contains(n)).ok_or_else(|| ConfigError::Invalid {
                    var: name,
                    value: v,
                    problem: "is not a whole number from 1 to 10,000,000".into(),
                    fix: fix.into(),
                })
            }
        };
        let folders_max = number(
            "TAGWARDEN_MEMBER_FOLDERS_MAX",
            FOLDERS_MAX as u64,
            "the most folders one member account's area may hold, e.g. 2000 (the default)",
        )? as usize;
        let schedule_seconds = number(
            "TAGWARDEN_SWEEP_SCHEDULE_SECONDS",
            SWEEP_SCHEDULE_SECONDS,
            "the sweep schedule's period in seconds, e.g. 3600 for rate(1 hour) (the default)",
        )?;
        Ok(Some(OrgConfig { bucket, prefix, role_name, regions, clusters, shard_queue, folders_max, schedule_seconds }))
    }

    /// The region whose shard of each account sweeps what has no region: us-east-1, where IAM's
    /// and Route 53's events come from, when the spokes cover it; else the first.
    pub fn global_region(&self) -> &str {
        self.regions.iter().find(|r| *r == "us-east-1").or(self.regions.first()).map_or("us-east-1", |r| r)
    }

    /// Every shard of a whole sweep: each listed account × each region.
    pub fn shards(&self) -> Vec<Shard> {
        let mut shards = Vec::with_capacity(self.clusters.len() * self.regions.len());
        for account in self.clusters.keys() {
            for region in &self.regions {
                shards.push(Shard { account: account.clone(), region: region.clone(), clusters: None, group: None });
            }
        }
        shards
    }

    /// The shards a policy written at `keys` (object keys in the bucket) asks to sweep: each
    /// listed account's regions, for the clusters written; keys outside the accounts' folders, or
    /// of a cluster the hub does not enforce, ask for none.
    pub fn shards_for(&self, keys: &[String]) -> Vec<Shard> {
        let mut written: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for key in keys {
            // A policy document only: never a status report or a shard outcome the hub wrote.
            let Some(rest) = key.strip_prefix(&self.prefix).filter(|_| is_policy_document(key)) else { continue };
            let mut parts = rest.splitn(3, '/');
            let (Some(account), Some(cluster), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let enforced =
                self.clusters.get(account).is_some_and(|named| named.as_ref().is_none_or(|n| n.contains(cluster)));
            if enforced && valid_infra_id(cluster).is_ok() {
                written
                    .entry(self.clusters.get_key_value(account).map_or(account, |(a, _)| a.as_str()))
                    .or_default()
                    .insert(cluster.to_string());
            }
        }
        let mut shards = Vec::new();
        for (account, clusters) in written {
            for region in &self.regions {
                let clusters = Some(clusters.iter().cloned().collect());
                shards.push(Shard { account: account.to_string(), region: region.clone(), clusters, group: None });
            }
        }
        shards
    }
}

pub fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// One account and region of a sweep, as its SQS message carries it:
/// `{"tagwarden": "sweep", "account": …, "region": …, "clusters": […]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub account: String,
    pub region: String,
    /// Only these clusters (a policy change); `None`: every cluster of the account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    /// The account's cluster group ([`pack`]) when it has several; `None`: every group, in turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
}

/// A shard's message: the sweep request with its account and region.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "tagwarden")]
pub enum ShardMessage {
    #[serde(rename = "sweep")]
    Sweep(Shard),
}

impl Shard {
    /// The API budget the shard spends: its account-region's (`GetResources` and EC2's request
    /// buckets are per account and region), shared by the shards of its cluster groups.
    pub fn budget(&self) -> String {
        format!("{}/{}", self.account, self.region)
    }
}

/// A FIFO message's deduplication id, distinct for every send (up to 128 characters).
fn dedup_id(body: &str, attempt: usize, entry: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(body.as_bytes());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{now:x}-{attempt}-{entry}-{:016x}", h.finish())
}

impl ShardMessage {
    /// A shard's message, and nothing else: a body without both `account` and `region` is not one.
    pub fn parse(body: &str) -> Option<Shard> {
        match serde_json::from_str::<ShardMessage>(body) {
            Ok(ShardMessage::Sweep(shard)) if is_account(&shard.account) && !shard.region.is_empty() => Some(shard),
            _ => None,
        }
    }
}

/// Why a member account's role could not be assumed: the account, the role, STS's answer and the fix.
#[derive(Debug, Clone, thiserror::Error)]
#[error("account {account}: sts:AssumeRole into {role} was refused ({code}: {message}); {fix}; the other accounts are enforced", fix = self.fix())]
pub struct Refused {
    pub account: String,
    pub role: String,
    pub code: String,
    pub message: String,
    /// Throttled or unanswered: tried again at the next call, not remembered.
    pub transient: bool,
}

impl Refused {
    /// What to do, by STS's answer (STS API reference, AssumeRole, Errors).
    fn fix(&self) -> &'static str {
        match self.code.as_str() {
            "RegionDisabledException" => "activate STS in the hub's region (IAM console, Account settings, STS endpoints)",
            "PackedPolicyTooLarge" | "MalformedPolicyDocument" => {
                "the session policy of this account's cluster group was refused: report it with the account's clusters (tagwarden packs at most 2,048 characters a session)"
            }
            "ExpiredToken" | "InvalidClientTokenId" => "the hub function's own credentials were refused: check its role",
            c if c == "AccessDenied" || c.ends_with("AccessDenied") => "deploy the spoke in that account (the StackSet's OUs, or infra/aws/modules/member) with its role trusting the hub function's role, check no SCP denies sts:AssumeRole, or remove the account from TAGWARDEN_CLUSTERS",
            _ if self.transient => "STS did not answer in time: the shard is retried",
            _ => "check the member role in that account (infra/aws/modules/member) and the hub function's sts:AssumeRole grant",
        }
    }
}

#[derive(Clone)]
enum Session {
    /// Narrowed by `policy`: a group repacked (a cluster added, its kind known) asks again.
    Granted {
        credentials: Credentials,
        renew_at: SystemTime,
        policy: Arc<str>,
    },
    Refused {
        why: Refused,
        retry_at: SystemTime,
    },
}

/// One session's slot: empty until first asked for; one `AssumeRole` at a time fills it.
type SessionSlot = Arc<tokio::sync::Mutex<Option<Session>>>;

/// Member sessions, one per account, shared by that account's clients in every region.
pub struct Sessions {
    sts: aws_sdk_sts::Client,
    pub partition: String,
    role_name: String,
    session_name: String,
    sessions: Mutex<HashMap<(String, usize), SessionSlot>>,
    assumed: AtomicU64,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("role_name", &self.role_name).finish_non_exhaustive()
    }
}

impl Sessions {
    /// `AssumeRole` calls through `hub`'s configuration (its region's STS endpoint: the SDK
    /// calls the regional endpoint, never the global one), counted in `calls`.
    pub fn new(hub: &SdkConfig, partition: &str, role_name: &str, calls: CallCounter) -> Self {
        let sts = aws_sdk_sts::Client::from_conf(
            aws_sdk_sts::config::Builder::from(hub).interceptor(crate::calls::CountCalls(calls)).build(),
        );
        Sessions {
            sts,
            partition: partition.to_string(),
            role_name: role_name.to_string(),
            session_name: "tagwarden".to_string(),
            sessions: Mutex::new(HashMap::new()),
            assumed: AtomicU64::new(0),
        }
    }

    /// `AssumeRole` calls made so far.
    pub fn assumed(&self) -> u64 {
        self.assumed.load(Ordering::Relaxed)
    }

    /// The member role `role` of `account`; `None`: the configured one (`TAGWARDEN_MEMBER_ROLE`).
    pub fn role_arn(&self, account: &str, role: Option<&str>) -> String {
        format!("arn:{}:iam::{account}:role/{}", self.partition, role.unwrap_or(&self.role_name))
    }

    /// The role that writes a cluster, given the member roles' table's answer for it: the table's
    /// role when it is one of the configured role's (`<role>` or `<role>-<n>`, as Terraform names
    /// an account's roles past one role's clusters); the configured role otherwise (a table that
    /// names none, or a person's preview through `<role>-auditor`, which reads for every cluster).
    pub fn role_for<'a>(&'a self, listed: Option<&'a str>) -> &'a str {
        match listed {
            Some(r) if r == self.role_name => r,
            Some(r)
                if r.strip_prefix(self.role_name.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
            {
                r
            }
            _ => &self.role_name,
        }
    }

    /// The credentials of the session of `account`'s cluster group `group`, narrowed by `policy`
    /// ([`session_policy`]): cached until [`RENEW_BEFORE`] their expiry; one `AssumeRole` at a time
    /// per session (callers at once wait for it and share its answer).
    pub async fn credentials(
        &self,
        account: &str,
        group: usize,
        role: &str,
        policy: &str,
    ) -> Result<Credentials, Refused> {
        let slot = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.entry((account.to_string(), group)).or_default().clone()
        };
        let mut slot = slot.lock().await;
        let now = SystemTime::now();
        match &*slot {
            Some(Session::Granted { credentials, renew_at, policy: granted })
                if now < *renew_at && **granted == *policy =>
            {
                return Ok(credentials.clone())
            }
            Some(Session::Refused { why, retry_at }) if now < *retry_at => return Err(why.clone()),
            _ => {}
        }
        self.assumed.fetch_add(1, Ordering::Relaxed);
        let role = self.role_arn(account, Some(role));
        let answer = self
            .sts
            .assume_role()
            .role_arn(&role)
            .role_session_name(&self.session_name)
            .duration_seconds(SESSION_SECONDS)
            .policy(policy)
            .send()
            .await;
        let refused = |code: &str, message: String, transient: bool| Refused {
            account: account.to_string(),
            role: role.clone(),
            code: code.to_string(),
            message,
            transient,
        };
        let why = match answer {
            Ok(out) => match out.credentials() {
                Some(c) => {
                    let expires = SystemTime::try_from(*c.expiration()).unwrap_or(now + Duration::from_secs(900));
                    let credentials = Credentials::new(
                        c.access_key_id(),
                        c.secret_access_key(),
                        Some(c.session_token().to_string()),
                        Some(expires),
                        "tagwarden-member",
                    );
                    let renew_at = expires.checked_sub(RENEW_BEFORE).filter(|t| *t > now).unwrap_or(now);
                    *slot =
                        Some(Session::Granted { credentials: credentials.clone(), renew_at, policy: policy.into() });
                    tracing::info!(account, group, role, "member session started");
                    return Ok(credentials);
                }
                None => refused("NoCredentials", "STS answered without credentials".into(), true),
            },
            Err(e) => {
                let code = e.code().unwrap_or("NoAnswer").to_string();
                let message = e.message().map(str::to_owned).unwrap_or_else(|| tagwarden_core::error_chain(&e));
                let transient = e.as_service_error().is_none()
                    || matches!(crate::error::classify(&code), ErrorClass::Throttled | ErrorClass::Transient);
                refused(&code, message, transient)
            }
        };
        tracing::error!(error = %why, "member role not assumed");
        if !why.transient {
            *slot = Some(Session::Refused { why: why.clone(), retry_at: now + RETRY_REFUSED });
        }
        Err(why)
    }
}

/// The SDK's credentials for one member account: the [`Sessions`]' (the SDK's identity cache
/// asks again only near their expiry).
#[derive(Debug, Clone)]
struct MemberCredentials {
    sessions: Arc<Sessions>,
    account: String,
    group: usize,
    role: String,
    policy: Arc<str>,
}

impl ProvideCredentials for MemberCredentials {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            self.sessions
                .credentials(&self.account, self.group, &self.role, &self.policy)
                .await
                .map_err(CredentialsError::provider_error)
        })
    }
}

/// How the hub's engines are set up, the same for every member.
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy_ttl: Duration,
    /// The function's own role ARN (its own writes are ignored).
    pub own: Vec<String>,
    pub concurrency: usize,
    pub ec2_writes_per_second: u32,
    pub dry_run: bool,
    /// The deployment's mode (`TAGWARDEN_MODE`): in audit every member's engine evaluates and
    /// reports, and writes no tag.
    pub mode: tagwarden_core::mode::Mode,
}

/// One member account: its set's store, the clusters it enforces, and their groups.
struct Member {
    store: Arc<PolicyStore<AwsSource>>,
    clusters: Vec<String>,
    listed_at: Instant,
    groups: Vec<Group>,
}

/// Clusters of one account that share a session ([`pack`]), and their engine in each region.
struct Group {
    /// The member role its session assumes (the account's roles each write a share of its clusters).
    role: String,
    clusters: Vec<String>,
    /// Each of their ownership keys.
    keys: Vec<String>,
    policy: Arc<str>,
    engines: Mutex<HashMap<String, Arc<Engine<Tagger>>>>,
}

impl Group {
    /// The same group, its engines kept, for a member checked again and found unchanged.
    fn carried(&self) -> Group {
        Group {
            role: self.role.clone(),
            clusters: self.clusters.clone(),
            keys: self.keys.clone(),
            policy: self.policy.clone(),
            engines: Mutex::new(self.engines.lock().unwrap_or_else(|p| p.into_inner()).clone()),
        }
    }
}

/// The hub: every member account's engines, built as they are needed.
pub struct Organization {
    pub config: OrgConfig,
    pub settings: Settings,
    /// The function's own clients (the hub's account): the policy bucket, the shard queue.
    pub hub: Clients,
    sqs: aws_sdk_sqs::Client,
    base: SdkConfig,
    pub sessions: Arc<Sessions>,
    /// Every call of every member's clients, STS's and SQS's too.
    pub calls: CallCounter,
    /// Each account's member, behind a lock of its own: one account's listing holds no other.
    members: Mutex<HashMap<String, MemberSlot>>,
    /// The controllers whose changes may contest a key in every member account
    /// (`TAGWARDEN_YIELD_TO`; by default AWS's, `tagwarden_core::contest::YieldTo::default_for`).
    pub yield_to: tagwarden_core::contest::YieldTo,
    /// The member roles' table as last read, and when.
    roles: tokio::sync::Mutex<Option<(Instant, Arc<RoleTable>)>>,
}

/// Which member role writes each cluster, by account and cluster: Terraform writes it at the
/// bucket's root (`_tagwarden/member-roles.json`: outside every account's folder, and outside the
/// function's own, where only the function writes), from the same clusters it renders the roles
/// from. A wrong table costs refused writes, never a write: each role is bounded in IAM.
type RoleTable = HashMap<String, HashMap<String, String>>;

/// The member roles' table, at the bucket's root.
pub const ROLES_TABLE: &str = "_tagwarden/member-roles.json";

/// One account's member: empty until first listed; one listing at a time fills it.
type MemberSlot = Arc<tokio::sync::Mutex<Option<Arc<Member>>>>;

/// Why an account's member could not be had.
#[derive(Debug, Clone)]
pub enum MemberError {
    /// Its area holds more than the cap: refused until it is cleared (a record, not a retry).
    OverCap(OverCap),
    /// Not listed, or its area unreadable: the shard fails and is retried.
    Failed(String),
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::OverCap(o) => o.fmt(f),
            MemberError::Failed(why) => f.write_str(why),
        }
    }
}

/// What a shard's sweep found, as written to `<prefix>_organization/<account>/<region>[-<group>].json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardReport {
    pub account: String,
    pub region: String,
    /// The account's cluster group, where it has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    /// How many groups the account's clusters were in: a group's outcome past them is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    pub clusters: Vec<String>,
    pub finished_at_ms: u64,
    pub seconds: f64,
    /// Owned resources swept.
    pub owned: usize,
    /// Owned resources in line with their policy when the sweep ended (unchanged or written).
    pub in_line: usize,
    pub written: usize,
    pub failed: usize,
    pub gone: usize,
    pub api_calls: u64,
    /// Why the member role could not be assumed, naming the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The first failures, `<resource>: <error>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

impl ShardReport {
    fn of(shard: &Shard, clusters: Vec<String>, out: &Outcome, started: Instant, api_calls: u64) -> Self {
        let count = |s: Status| out.records.iter().filter(|r| r.status == s).count();
        let owned = out.records.iter().filter(|r| r.status != Status::NotOwned && r.infra_id.is_some()).count();
        ShardReport {
            account: shard.account.clone(),
            region: shard.region.clone(),
            group: shard.group,
            groups: None,
            clusters,
            finished_at_ms: tagwarden_core::report::epoch_ms(),
            seconds: started.elapsed().as_secs_f64(),
            owned,
            in_line: count(Status::Applied) + count(Status::Unchanged),
            written: count(Status::Applied),
            failed: out.failed(),
            gone: count(Status::Gone),
            api_calls,
            refused: None,
            error: out.error.clone(),
            failures: out
                .records
                .iter()
                .filter(|r| r.status == Status::Failed)
                .take(FAILURES_NAMED)
                .map(|r| format!("{}: {}", r.resource, r.error.as_deref().unwrap_or("failed")))
                .collect(),
        }
    }
}

/// The organization at a glance, from the shards' outcomes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub accounts: usize,
    pub clusters: usize,
    pub owned: usize,
    pub in_line: usize,
    pub failed: usize,
    /// Accounts whose member role was refused, with why.
    pub refused: BTreeMap<String, String>,
    /// Each account's last sweep: the oldest of its regions' (ms since the epoch).
    pub last_sweep_ms: BTreeMap<String, u64>,
    /// Accounts the last scheduled run did not reach before its deadline (taken first next run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreached: Vec<String>,
    pub shards: Vec<ShardReport>,
}

impl Summary {
    /// The summary of the shards' outcomes. Where an account-region was swept both whole and in
    /// groups (its clusters outgrew one session, or shrank back), only the newer way counts.
    pub fn of(mut shards: Vec<ShardReport>) -> Self {
        let mut newest: BTreeMap<(String, String, bool), u64> = BTreeMap::new();
        for r in &shards {
            let at = newest.entry((r.account.clone(), r.region.clone(), r.group.is_some())).or_default();
            *at = (*at).max(r.finished_at_ms);
        }
        shards.retain(|r| {
            let other = newest.get(&(r.account.clone(), r.region.clone(), r.group.is_none())).copied().unwrap_or(0);
            newest[&(r.account.clone(), r.region.clone(), r.group.is_some())] >= other
        });
        // A group past the newest count of its account-region's groups is gone (repacked smaller).
        let mut counts: BTreeMap<(String, String), (u64, usize)> = BTreeMap::new();
        for r in shards.iter().filter(|r| r.group.is_some()) {
            let c = counts.entry((r.account.clone(), r.region.clone())).or_insert((0, usize::MAX));
            if r.finished_at_ms >= c.0 {
                *c = (r.finished_at_ms, r.groups.unwrap_or(usize::MAX));
            }
        }
        shards.retain(|r| r.group.is_none_or(|g| g < counts[&(r.account.clone(), r.region.clone())].1));
        let mut s = Summary::default();
        let mut clusters = BTreeSet::new();
        for r in &shards {
            clusters.extend(r.clusters.iter().map(|c| (r.account.clone(), c.clone())));
            s.owned += r.owned;
            s.in_line += r.in_line;
            s.failed += r.failed;
            if let Some(why) = &r.refused {
                s.refused.insert(r.account.clone(), why.clone());
            }
            let last = s.last_sweep_ms.entry(r.account.clone()).or_insert(r.finished_at_ms);
            *last = (*last).min(r.finished_at_ms);
        }
        s.accounts = s.last_sweep_ms.len();
        s.clusters = clusters.len();
        s.shards = shards;
        s
    }
}

impl Organization {
    /// The hub over `hub` (the function's own configuration: its account and region).
    pub fn new(hub: &SdkConfig, config: OrgConfig, settings: Settings) -> Self {
        let calls = CallCounter::default();
        // The partition of the function's role, else of the hub's region (the CLI names no role).
        let region = hub.region().map(|r| r.to_string()).unwrap_or_default();
        let partition = settings
            .own
            .iter()
            .find_map(|arn| arn.split(':').nth(1).filter(|p| !p.is_empty()).map(str::to_owned))
            .unwrap_or_else(|| tagwarden_core::resource::partition(&region).to_string());
        let sessions = Arc::new(Sessions::new(hub, &partition, &config.role_name, calls.clone()));
        let sqs = aws_sdk_sqs::Client::from_conf(
            aws_sdk_sqs::config::Builder::from(hub).interceptor(crate::calls::CountCalls(calls.clone())).build(),
        );
        Organization {
            hub: Clients::counted(hub, calls.clone()),
            sqs,
            base: hub.clone(),
            sessions,
            calls,
            config,
            settings,
            members: Mutex::new(HashMap::new()),
            yield_to: tagwarden_core::contest::YieldTo::default_for(tagwarden_core::cloud::Cloud::Aws),
            roles: tokio::sync::Mutex::new(None),
        }
    }

    /// The member roles' table, read again every policy TTL. None there (a hub deployed before
    /// the table, or a test's) is an empty table: every cluster's role is the configured one. One
    /// that cannot be read keeps the last one read, or fails the listing of the account.
    async fn role_table(&self) -> Result<Arc<RoleTable>, String> {
        let mut kept = self.roles.lock().await;
        if let Some((at, table)) = &*kept {
            if at.elapsed() < self.settings.policy_ttl {
                return Ok(table.clone());
            }
        }
        let key = ROLES_TABLE.to_string();
        let read = self.hub.s3.get_object().bucket(&self.config.bucket).key(&key).send().await;
        let table: RoleTable = match read {
            Ok(out) => {
                let body = out.body.collect().await.map_err(|e| format!("s3://{}/{key}: {e}", self.config.bucket))?;
                serde_json::from_slice(&body.into_bytes()).map_err(|e| {
                    format!("s3://{}/{key} is not the member roles' table Terraform writes: {e}", self.config.bucket)
                })?
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => RoleTable::new(),
            Err(e) => match &*kept {
                Some((_, table)) => {
                    tracing::warn!(error = %crate::error::from_sdk("s3:GetObject", &key, e), "the member roles' table could not be read again: the last one read stays");
                    return Ok(table.clone());
                }
                None => return Err(crate::error::from_sdk("s3:GetObject", &key, e).to_string()),
            },
        };
        let table = Arc::new(table);
        *kept = Some((Instant::now(), table.clone()));
        Ok(table)
    }

    /// Account `account`'s store and clusters: its named clusters, or (`<account>/*`) the ones its
    /// folder holds, listed again after the policy TTL.
    async fn member(&self, account: &str) -> Result<Arc<Member>, MemberError> {
        self.member_checked(account, false).await
    }

    /// [`Organization::member`]; with `fresh`, listed and grouped again now, not after the TTL
    /// (a policy write names a cluster the cached list does not hold yet). Every policy TTL the
    /// account's clusters and their kinds are read again; where the groups come out the same,
    /// the member (its store's cache, its engines' contests) stays.
    async fn member_checked(&self, account: &str, fresh: bool) -> Result<Arc<Member>, MemberError> {
        let Some(named) = self.config.clusters.get(account) else {
            return Err(MemberError::Failed(format!(
                "account {account} is not one the hub enforces (TAGWARDEN_CLUSTERS)"
            )));
        };
        let slot = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            members.entry(account.to_string()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some(m) = &*slot {
            if !fresh && m.listed_at.elapsed() < self.settings.policy_ttl {
                return Ok(m.clone());
            }
        }
        let prefix = format!("{}{account}/", self.config.prefix);
        // The account's area counted first, its listing stopped past the cap: an account over it
        // costs a bounded number of calls and is refused before its store lists it whole.
        let census = self.census(account).await.map_err(|e| {
            MemberError::Failed(format!(
                "account {account}: its clusters could not be listed under s3://{}/{prefix}: {e}",
                self.config.bucket
            ))
        })?;
        if let Some(over) = census.over_cap(self, account) {
            tracing::error!(account, folders = census.folders.len(), objects = census.objects, "{over}");
            *slot = None;
            return Err(MemberError::OverCap(over));
        }
        let clusters: Vec<String> = match named {
            Some(named) => named.iter().cloned().collect(),
            None => census.folders.iter().filter(|c| valid_infra_id(c).is_ok()).cloned().collect(),
        };
        let store = match slot.as_ref().filter(|m| m.clusters == clusters) {
            Some(m) => m.store.clone(),
            None => {
                let location = PolicyLocation::S3Set { bucket: self.config.bucket.clone(), prefix };
                let mut store = crate::policy_store::policy_store(&self.hub, location, self.settings.policy_ttl)
                    .with_clusters(Some(clusters.clone()));
                // The account's contest states: in the hub's own folder, which no member writes.
                store.source.contests_folder = contests_folder(&self.config.prefix, account);
                Arc::new(store)
            }
        };
        // The clusters' kinds (their ownership keys) are in their policies; one not readable yet
        // is taken as OpenShift's (`kubernetes.io/cluster/<infraID>`) until the next check.
        let (loaded, _) = store.policies(false).await;
        let kinds: HashMap<String, ClusterKind> = match &loaded {
            Ok(p) => p.iter().map(|l| (l.infra_id.clone(), l.policy.kind)).collect(),
            Err(_) => HashMap::new(),
        };
        let owned: Vec<(String, Vec<String>)> = clusters
            .iter()
            .map(|c| {
                let kind = kinds.get(c).copied().unwrap_or_default();
                (c.clone(), tagwarden_core::cloud::Cloud::Aws.ownership_keys(kind, c))
            })
            .collect();
        // Each cluster's member role (the roles hold the ownership bound, a share of the account's
        // clusters each), then its sessions packed within its role's clusters.
        let table = self.role_table().await.map_err(|e| {
            MemberError::Failed(format!("account {account}: the member roles' table could not be read: {e}"))
        })?;
        let listed = table.get(account);
        let mut by_role: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
        for (cluster, keys) in owned {
            let named = listed.and_then(|t| t.get(&cluster)).map(String::as_str);
            if !listed.is_none_or(|t| t.is_empty()) && named.is_none() {
                tracing::warn!(account, cluster, "the cluster is in no member role's share (Terraform's account_clusters): its role is refused every write on what it owns until it is added and applied");
            }
            let role = self.sessions.role_for(named).to_string();
            by_role.entry(role).or_default().push((cluster, keys));
        }
        let mut groups: Vec<Group> = Vec::new();
        for (role, owned) in by_role {
            for at in pack(&self.sessions.partition, &owned) {
                let group: Vec<(String, Vec<String>)> = at.iter().map(|&i| owned[i].clone()).collect();
                groups.push(Group {
                    role: role.clone(),
                    clusters: group.iter().map(|(c, _)| c.clone()).collect(),
                    keys: group.iter().flat_map(|(_, k)| k.clone()).collect(),
                    policy: session_policy(&self.sessions.partition, &group).into(),
                    engines: Mutex::default(),
                });
            }
        }
        if let Some(m) = slot.as_ref() {
            let same = m.groups.len() == groups.len()
                && m.groups.iter().zip(&groups).all(|(a, b)| a.policy == b.policy && a.role == b.role);
            if same && Arc::ptr_eq(&m.store, &store) {
                let kept = Arc::new(Member {
                    store,
                    clusters,
                    listed_at: Instant::now(),
                    groups: m.groups.iter().map(Group::carried).collect(),
                });
                *slot = Some(kept.clone());
                return Ok(kept);
            }
        }
        let member = Arc::new(Member { store, clusters, listed_at: Instant::now(), groups });
        *slot = Some(member.clone());
        Ok(member)
    }

    /// The clusters account `account` was last found with (its member's, as listed), if any.
    pub(crate) fn known_clusters(&self, account: &str) -> Option<Vec<String>> {
        let slot = self.members.lock().unwrap_or_else(|p| p.into_inner()).get(account).cloned()?;
        let member = slot.try_lock().ok()?;
        member.as_ref().map(|m| m.clusters.clone())
    }

    /// The engine of `account`'s cluster group `group` in `region`: that group's session, the
    /// region's clients, the account's store; its status reports laid over the other regions' as
    /// its part.
    fn engine(&self, account: &str, member: &Member, group: usize, region: &str) -> Arc<Engine<Tagger>> {
        let g = &member.groups[group];
        let mut engines = g.engines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = engines.get(region) {
            return e.clone();
        }
        let credentials = MemberCredentials {
            sessions: self.sessions.clone(),
            account: account.to_string(),
            group,
            role: g.role.clone(),
            policy: g.policy.clone(),
        };
        let config = self
            .base
            .to_builder()
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .region(aws_config::Region::new(region.to_string()))
            .build();
        // What has no region is listed by one region's shards (each group for its own clusters).
        let global = region == self.config.global_region();
        let tagger = Tagger {
            ec2_writes: Some(RateLimit::per_second(f64::from(self.settings.ec2_writes_per_second))),
            account: Some(account.to_string()),
            global,
            scope: Some(format!("{account}/{region}")),
            ..Tagger::new(Clients::counted(&config, self.calls.clone()))
        };
        let mut own = self.settings.own.clone();
        // Every member role of the account: each one's writes come back as events.
        let mut roles: Vec<&str> = member.groups.iter().map(|g| g.role.as_str()).collect();
        roles.dedup();
        own.extend(roles.into_iter().map(|r| self.sessions.role_arn(account, Some(r))));
        let part = tagwarden_core::status::aws_region_part(account, region, global);
        let mut engine = Engine::sharing(tagger, member.store.clone(), own, Some(part));
        engine.set_concurrency(self.settings.concurrency);
        engine.yield_to = self.yield_to.clone();
        engine.dry_run = self.settings.dry_run;
        engine.mode = self.settings.mode;
        let engine = Arc::new(engine);
        engines.insert(region.to_string(), engine.clone());
        engine
    }

    /// Every shard of a whole sweep: each listed account × region, × cluster group where the
    /// account's clusters need more than one session. An account whose clusters cannot be told
    /// (its folder unreadable) is one shard per region, which fails naming why.
    /// An account over the cap ([`OrgConfig::folders_max`]) has none (see [`Organization::schedule`],
    /// which says so).
    pub async fn shards(&self) -> Vec<Shard> {
        let mut shards = Vec::new();
        for account in self.config.clusters.keys() {
            if let Ok(more) = self.account_shards(account).await {
                shards.extend(more);
            }
        }
        shards
    }

    /// Account `account`'s shards: one per region, × cluster group where it has several; one per
    /// region when its clusters cannot be told (it fails naming why); none when it is over the cap.
    pub async fn account_shards(&self, account: &str) -> Result<Vec<Shard>, OverCap> {
        let groups = match self.member(account).await {
            Ok(m) if m.groups.len() > 1 => m.groups.iter().map(|g| g.clusters.clone()).collect(),
            Err(MemberError::OverCap(over)) => return Err(over),
            _ => Vec::new(),
        };
        let mut shards = Vec::new();
        for region in &self.config.regions {
            let shard = Shard { account: account.to_string(), region: region.clone(), clusters: None, group: None };
            if groups.is_empty() {
                shards.push(shard);
                continue;
            }
            // A group's shard names its clusters: the instance that takes it may have packed them
            // otherwise (the index only names its outcome).
            for (g, clusters) in groups.iter().enumerate() {
                shards.push(Shard { clusters: Some(clusters.clone()), group: Some(g), ..shard.clone() });
            }
        }
        Ok(shards)
    }

    /// Sweep one shard, starting no write after `stop_at`, and (unless a dry run) write its
    /// outcome beside the accounts' folders, whatever became of it. A policy change's shard (some
    /// clusters of a whole account-region) writes none: it would stand for the account-region.
    pub async fn sweep_shard(&self, shard: &Shard, stop_at: Option<Instant>) -> (Outcome, ShardReport) {
        let started = Instant::now();
        let calls_before = self.calls.total();
        let (out, swept, refused, groups) = self.sweep_groups(shard, stop_at).await;
        let mut report = ShardReport::of(shard, swept, &out, started, self.calls.total() - calls_before);
        report.refused = refused;
        report.groups = groups;
        let partial = shard.clusters.is_some() && shard.group.is_none();
        if !self.settings.dry_run && !partial {
            if let Err(e) = self.write_report(&report).await {
                tracing::warn!(error = %e, account = shard.account, region = shard.region, "shard outcome not written");
            }
        }
        (out, report)
    }

    /// What sweeping `shard` found: the outcome, the clusters swept, why the member role was
    /// refused, and how many groups the account's clusters are in.
    async fn sweep_groups(
        &self,
        shard: &Shard,
        stop_at: Option<Instant>,
    ) -> (Outcome, Vec<String>, Option<String>, Option<usize>) {
        let mut member = self.member(&shard.account).await;
        // A cluster named by a policy write that the cached list does not hold yet: list again.
        let unknown = |m: &Member| shard.clusters.as_ref().is_some_and(|c| c.iter().any(|c| !m.clusters.contains(c)));
        if matches!(&member, Ok(m) if unknown(m)) {
            member = self.member_checked(&shard.account, true).await;
        }
        let member = match member {
            Ok(m) => m,
            // Over the cap: refused, as a refused role is (a record, not a shard handed back).
            Err(MemberError::OverCap(over)) => {
                return (Outcome::default(), shard.clusters.clone().unwrap_or_default(), Some(over.to_string()), None)
            }
            Err(why) => {
                return (Outcome { error: Some(why.to_string()), ..Outcome::default() }, Vec::new(), None, None)
            }
        };
        let (mut out, mut swept, mut refused) = (Outcome::default(), Vec::new(), None);
        for (g, group) in member.groups.iter().enumerate() {
            let clusters: Vec<String> = match &shard.clusters {
                Some(only) => group.clusters.iter().filter(|c| only.contains(c)).cloned().collect(),
                None => group.clusters.clone(),
            };
            if clusters.is_empty() {
                continue;
            }
            if stop_at.is_some_and(|t| Instant::now() >= t) {
                out.error =
                    Some(format!("deferred: the invocation's deadline was near before {}", clusters.join(", ")));
                break;
            }
            // The session first: a refused account is one record naming the fix (the shard's
            // outcome, the summary), not a failure per listing, and not a shard handed back: on the
            // FIFO queue it would hold its account-region's group for every redelivery while the
            // hourly sweeps pile up behind it, and the next sweep asks again anyway. A throttled
            // STS fails the shard at once, so SQS retries it whole.
            match self.sessions.credentials(&shard.account, g, &group.role, &group.policy).await {
                Err(why) if why.transient => {
                    out.error = Some(why.to_string());
                    break;
                }
                Err(why) => {
                    refused = Some(why.to_string());
                    // Its clusters still count as the account's (the summary's cluster count),
                    // each group's that the shard covers.
                    for group in &member.groups[g..] {
                        swept.extend(
                            group
                                .clusters
                                .iter()
                                .filter(|c| shard.clusters.as_ref().is_none_or(|only| only.contains(c)))
                                .cloned(),
                        );
                    }
                    break;
                }
                Ok(_) => {
                    let engine = self.engine(&shard.account, &member, g, &shard.region);
                    out.absorb(Box::pin(engine.sweep(false, Some(&clusters), stop_at)).await);
                }
            }
            swept.extend(clusters);
        }
        (out, swept, refused, Some(member.groups.len()))
    }

    /// Every shard of `shards`: [`SHARDS_AT_ONCE`] account-regions at once, the shards of one
    /// account-region (its cluster groups) one after another, as the FIFO shard queue delivers
    /// them, since they share its budget; `done` told of each as it finishes.
    pub async fn sweep_shards(
        &self,
        shards: &[Shard],
        stop_at: Option<Instant>,
        done: &(dyn Fn(&ShardReport) + Sync),
    ) -> Vec<(Outcome, ShardReport)> {
        // Owned, not borrowed: a stream of futures over borrowed shards is not general enough
        // for the Lambda's boxed handler future.
        let mut by_budget: BTreeMap<String, Vec<Shard>> = BTreeMap::new();
        for s in shards {
            by_budget.entry(s.budget()).or_default().push(s.clone());
        }
        let finished = stream::iter(by_budget.into_values())
            .map(|same| self.sweep_in_turn(same, stop_at, done))
            .buffer_unordered(SHARDS_AT_ONCE);
        finished.concat().await
    }

    /// `shards` one after another, `done` told of each.
    async fn sweep_in_turn(
        &self,
        shards: Vec<Shard>,
        stop_at: Option<Instant>,
        done: &(dyn Fn(&ShardReport) + Sync),
    ) -> Vec<(Outcome, ShardReport)> {
        let mut all = Vec::with_capacity(shards.len());
        for shard in &shards {
            let (out, report) = self.sweep_shard(shard, stop_at).await;
            done(&report);
            all.push((out, report));
        }
        all
    }

    /// Send `shards` to the shard queue, 10 a call; the number sent, or why not all were.
    pub async fn enqueue(&self, shards: &[Shard]) -> Result<usize, String> {
        let Some(queue) = &self.config.shard_queue else { return Err("no TAGWARDEN_SHARD_QUEUE_URL".into()) };
        // SQS Developer Guide, "Amazon SQS FIFO queues": "The name of a FIFO queue must end with
        // the .fifo suffix".
        let fifo = queue.ends_with(".fifo");
        let mut sent = 0;
        for chunk in shards.chunks(SQS_BATCH) {
            // The entries a call refused alone are sent again (a sweep shard twice costs calls, never a
            // write: the second finds nothing to do); a refused call fails the invocation.
            let mut pending: Vec<(usize, &Shard)> = chunk.iter().enumerate().collect();
            for attempt in 1..=ENQUEUE_ATTEMPTS {
                let entries = pending
                    .iter()
                    .map(|(i, s)| {
                        let body = serde_json::to_string(&ShardMessage::Sweep((*s).clone())).unwrap_or_default();
                        let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder().id(i.to_string());
                        // A FIFO queue (the organization module's) delivers one message of a group
                        // at a time, and Lambda invokes at most one per group ("concurrent
                        // invocations are capped at the number of message group IDs", Lambda
                        // Developer Guide, "Configuring scaling behavior for SQS event source
                        // mappings"): the group is the account-region, whose API budget the shards
                        // of its cluster groups share. It needs a deduplication id; each send is
                        // its own (a sweep shard twice costs calls, never a write).
                        let entry = if fifo {
                            entry.message_group_id(s.budget()).message_deduplication_id(dedup_id(&body, attempt, *i))
                        } else {
                            entry
                        };
                        entry.message_body(body).build()
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                let out =
                    self.sqs.send_message_batch().queue_url(queue).set_entries(Some(entries)).send().await.map_err(
                        |e| {
                            format!(
                                "{} ({sent} shard(s) sent before)",
                                crate::error::from_sdk("sqs:SendMessageBatch", queue, e)
                            )
                        },
                    )?;
                sent += out.successful().len();
                let failed: Vec<&str> = out.failed().iter().map(|f| f.id()).collect();
                if failed.is_empty() {
                    break;
                }
                if attempt == ENQUEUE_ATTEMPTS {
                    let f = &out.failed()[0];
                    return Err(format!(
                        "sqs:SendMessageBatch refused {} shard(s) {ENQUEUE_ATTEMPTS} times ({sent} sent): {}: {}",
                        failed.len(),
                        f.code(),
                        f.message().unwrap_or_default()
                    ));
                }
                pending.retain(|(i, _)| failed.contains(&i.to_string().as_str()));
            }
        }
        Ok(sent)
    }

    /// Reconcile `events`, each in its own account and region's engine; an event of an account
    /// the hub does not enforce is ignored, one whose account's role is refused fails naming it.
    pub async fn handle_events(&self, events: &[Event], stop_at: Option<Instant>) -> Vec<Outcome> {
        let mut outs: Vec<Outcome> = events.iter().map(|_| Outcome::default()).collect();
        let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            match (e.account.as_deref(), e.region.as_deref()) {
                (Some(a), Some(r)) if self.config.clusters.contains_key(a) => {
                    groups.entry((a.to_string(), r.to_string())).or_default().push(i)
                }
                _ => {
                    outs[i].metrics.events_received = 1;
                    outs[i].metrics.events_ignored = 1;
                    tracing::info!(
                        id = e.id,
                        account = e.account,
                        "event of an account the hub does not enforce: ignored"
                    );
                }
            }
        }
        let handled = stream::iter(groups)
            .map(|((account, region), at)| async move {
                let batch: Vec<Event> = at.iter().map(|&i| events[i].clone()).collect();
                let outs = match self.member(&account).await {
                    Ok(member) => self.handle_in_account(&account, &region, &member, &batch, stop_at).await,
                    Err(why) => {
                        let why = why.to_string();
                        batch.iter().map(|_| Outcome { error: Some(why.clone()), ..Outcome::default() }).collect()
                    }
                };
                (at, outs)
            })
            .buffer_unordered(SHARDS_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        for (at, group) in handled {
            for (i, out) in at.into_iter().zip(group) {
                outs[i] = out;
            }
        }
        outs
    }

    /// Events of one account and region: to its one group's engine; where it has several, each
    /// resource is read once (every session may read) to find the group of the cluster that owns
    /// it, and each group's engine gets the events narrowed to its resources.
    async fn handle_in_account(
        &self,
        account: &str,
        region: &str,
        member: &Member,
        batch: &[Event],
        stop_at: Option<Instant>,
    ) -> Vec<Outcome> {
        if member.groups.len() <= 1 {
            if member.groups.is_empty() {
                return batch.iter().map(|_| Outcome::default()).collect();
            }
            return self.engine(account, member, 0, region).handle_events(batch, stop_at).await;
        }
        let first = self.engine(account, member, 0, region);
        let owner_group = |tags: &TagMap| {
            member.groups.iter().position(|g| g.keys.iter().any(|k| tags.get(k).is_some_and(|v| v == "owned")))
        };
        // Every resource of the batch read at once, in shared calls (EC2's DescribeTags).
        let all: Vec<&ResourceRef> = batch.iter().flat_map(|e| e.resources.iter()).collect();
        let mut read = Adapter::read_all(&first.adapter, &all, self.settings.concurrency).await.into_iter();
        let mut per_group: Vec<Vec<(usize, Event)>> = member.groups.iter().map(|_| Vec::new()).collect();
        let mut unroutable: Vec<Option<String>> = vec![None; batch.len()];
        for (i, event) in batch.iter().enumerate() {
            let mut narrowed: BTreeMap<usize, Vec<ResourceRef>> = BTreeMap::new();
            for r in &event.resources {
                // Owned by none of the groups, or gone: the first group's engine reports it. Not
                // readable: the event is retried rather than written through a session that may
                // not be its cluster's.
                let g = match read.next() {
                    Some(Ok(found)) => owner_group(&found.tags).unwrap_or(0),
                    Some(Err(e)) if e.class != tagwarden_engine::cloud_error::ErrorClass::NotFound => {
                        unroutable[i] = Some(format!("{r}: not read, so its cluster group is unknown: {e}"));
                        continue;
                    }
                    _ => 0,
                };
                narrowed.entry(g).or_default().push(r.clone());
            }
            if narrowed.is_empty() && unroutable[i].is_none() {
                narrowed.insert(0, Vec::new());
            }
            for (g, resources) in narrowed {
                per_group[g].push((i, Event { resources, ..event.clone() }));
            }
        }
        let mut outs: Vec<Outcome> = batch.iter().map(|_| Outcome::default()).collect();
        for (g, events) in per_group.into_iter().enumerate().filter(|(_, e)| !e.is_empty()) {
            let (at, events): (Vec<usize>, Vec<Event>) = events.into_iter().unzip();
            let handled = self.engine(account, member, g, region).handle_events(&events, stop_at).await;
            for (i, out) in at.into_iter().zip(handled) {
                outs[i].absorb(out);
            }
        }
        for (out, why) in outs.iter_mut().zip(unroutable) {
            if let Some(why) = why {
                out.error = Some(out.error.take().map_or(why.clone(), |e| format!("{e}; {why}")));
            }
        }
        outs
    }

    fn report_key(&self, report: &ShardReport) -> String {
        let group = report.group.map(|g| format!("-{g}")).unwrap_or_default();
        format!("{}{SHARDS_FOLDER}{}/{}{group}.json", self.config.prefix, report.account, report.region)
    }

    async fn write_report(&self, report: &ShardReport) -> Result<(), CloudError> {
        self.put_own(&self.report_key(report), report).await
    }

    /// Write `value` as JSON at `key` of the hub's bucket (its own folder: shard outcomes, its state).
    async fn put_own(&self, key: &str, value: &impl serde::Serialize) -> Result<(), CloudError> {
        let body = serde_json::to_vec_pretty(value).unwrap_or_default();
        self.hub
            .s3
            .put_object()
            .bucket(&self.config.bucket)
            .key(key)
            .content_type("application/json")
            .body(body.into())
            .send()
            .await
            .map_err(|e| crate::error::from_sdk("s3:PutObject", key, e))?;
        Ok(())
    }

    /// The organization summary, from every shard outcome written so far: only what the hub
    /// enforces now (an account or region it left keeps no place in it), as the last scheduled
    /// run found it (accounts over the cap, not reached; a refused account's clusters).
    pub async fn summary(&self) -> Result<Summary, CloudError> {
        let shards = read_shards(&self.hub, &self.config.bucket, &self.config.prefix).await?;
        let last = self.read_state().await.unwrap_or_default();
        let accounts = self
            .config
            .clusters
            .iter()
            .map(|(a, named)| {
                let clusters = match named {
                    Some(named) => named.iter().cloned().collect(),
                    None => self.known_clusters(a).or_else(|| last.accounts.get(a).cloned()).unwrap_or_default(),
                };
                (a.clone(), clusters)
            })
            .collect();
        let state = HubState { regions: self.config.regions.clone(), accounts, ..last };
        Ok(state.summary(shards))
    }
}

/// The organization summary under `s3://bucket/prefix`: every shard outcome, read; where the hub
/// recorded its last scheduled run ([`HubState`]), only the accounts and regions it enforces, as
/// [`Organization::summary`] has them.
pub async fn read_summary(hub: &Clients, bucket: &str, prefix: &str) -> Result<Summary, CloudError> {
    let shards = read_shards(hub, bucket, prefix).await?;
    Ok(match schedule::read_state(hub, bucket, prefix).await {
        Some(state) => state.summary(shards),
        None => Summary::of(shards),
    })
}

/// Every shard outcome under `s3://bucket/prefix` (`_organization/<account>/<region>….json`).
async fn read_shards(hub: &Clients, bucket: &str, prefix: &str) -> Result<Vec<ShardReport>, CloudError> {
    let folder = format!("{prefix}{SHARDS_FOLDER}");
    let mut keys = Vec::new();
    let mut pages = hub.s3.list_objects_v2().bucket(bucket).prefix(&folder).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| crate::error::from_sdk("s3:ListObjectsV2", &folder, e))?;
        // An account's outcomes only: the hub's own state beside them is not one, nor are the
        // contest states (`contests/<account>/…`).
        let outcome = |k: &String| {
            k.ends_with(".json")
                && k.strip_prefix(&folder).is_some_and(|r| r.contains('/') && !r.starts_with(CONTESTS_SUBFOLDER))
        };
        keys.extend(page.contents().iter().filter_map(|o| o.key().map(str::to_owned)).filter(outcome));
    }
    let mut shards = Vec::with_capacity(keys.len());
    for key in keys {
        let got = hub.s3.get_object().bucket(bucket).key(&key).send().await;
        let body = match got {
            Ok(o) => o.body.collect().await.map(|b| b.into_bytes()).unwrap_or_default(),
            Err(e) => return Err(crate::error::from_sdk("s3:GetObject", &key, e)),
        };
        match serde_json::from_slice::<ShardReport>(&body) {
            Ok(r) => shards.push(r),
            Err(e) => tracing::warn!(key, error = %e, "not a shard outcome tagwarden wrote; left out"),
        }
    }
    shards.sort_by(|a, b| (&a.account, &a.region).cmp(&(&b.account, &b.region)));
    Ok(shards)
}

/// Milliseconds since the epoch, for a shard outcome's age.
pub fn age_seconds(at_ms: u64) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
    now.saturating_sub(at_ms) / 1000
}

/// The writes a session may make only on what its clusters own: every descriptor's write whose
/// service evaluates `aws:ResourceTag` (`Guard::Owned`) and the service actions `tag:TagResources`
/// needs (`Guard::OwnedVia`), from `tagwarden_core::services`.
fn owned_writes() -> Vec<&'static str> {
    let mut writes: Vec<&'static str> = SERVICES
        .iter()
        .filter_map(|s| match s.grant.guard {
            Guard::Owned => Some(s.write),
            Guard::OwnedVia(action) => Some(action),
            _ => None,
        })
        .collect();
    writes.sort_unstable();
    writes.dedup();
    writes
}

/// The session policy of a group of clusters, each with its ownership keys: everything but the
/// tag writes as the role grants it; the owned-resource writes only where one of the keys is
/// `owned`; S3's `PutBucketTagging` (no tag condition key) only on the clusters' bucket name
/// patterns (`<infraID>-*`, the hub module's default). Compact JSON: the limit counts characters.
pub fn session_policy(partition: &str, clusters: &[(String, Vec<String>)]) -> String {
    let mut not_action = owned_writes();
    not_action.push(S3.write);
    let mut statements = vec![serde_json::json!({"Effect": "Allow", "NotAction": not_action, "Resource": "*"})];
    for key in clusters.iter().flat_map(|(_, keys)| keys) {
        // Every action, on what the key marks owned: the role grants only the tag reads and
        // writes, so this adds the writes on owned resources and nothing else.
        statements.push(serde_json::json!({
            "Effect": "Allow",
            "Action": "*",
            "Resource": "*",
            "Condition": {"StringEquals": {format!("aws:ResourceTag/{key}"): "owned"}},
        }));
    }
    let buckets: Vec<String> = clusters.iter().map(|(c, _)| format!("arn:{partition}:s3:::{c}-*")).collect();
    if !buckets.is_empty() {
        statements.push(serde_json::json!({"Effect": "Allow", "Action": S3.write, "Resource": buckets}));
    }
    serde_json::json!({"Version": "2012-10-17", "Statement": statements}).to_string()
}

/// The clusters (each with its ownership keys) in groups whose session policies each fit
/// [`SESSION_POLICY_MAX`], in order; positions into `clusters`.
pub fn pack(partition: &str, clusters: &[(String, Vec<String>)]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in 0..clusters.len() {
        current.push(i);
        let members: Vec<(String, Vec<String>)> = current.iter().map(|&j| clusters[j].clone()).collect();
        if current.len() > 1 && session_policy(partition, &members).len() > SESSION_POLICY_MAX {
            current.pop();
            groups.push(std::mem::take(&mut current));
            current.push(i);
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<Option<OrgConfig>, ConfigError> {
        OrgConfig::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    const BASE: [(&str, &str); 3] = [
        ("TAGWARDEN_ORGANIZATION", "s3://hub/accounts/"),
        ("TAGWARDEN_MEMBER_ROLE", "tagwarden-member"),
        ("TAGWARDEN_MEMBER_REGIONS", "eu-west-1, us-east-1"),
    ];

    fn with(clusters: &str) -> Result<Option<OrgConfig>, ConfigError> {
        let mut vars = BASE.to_vec();
        vars.push(("TAGWARDEN_CLUSTERS", clusters));
        from(&vars)
    }

    #[test]
    fn accounts_clusters_and_shards_from_the_environment() {
        assert_eq!(from(&[]).expect("unset"), None, "one account's deployment");
        let c = with("111122223333/a-1, 111122223333/b-2,444455556666/*").expect("valid").expect("org");
        assert_eq!((c.bucket.as_str(), c.prefix.as_str(), c.global_region()), ("hub", "accounts/", "us-east-1"));
        assert_eq!(c.clusters["444455556666"], None, "every cluster the account publishes");
        assert_eq!(c.shards().len(), 4, "2 accounts x 2 regions");

        let keys = [
            "accounts/111122223333/a-1/policy.yaml".to_string(),
            "accounts/111122223333/c-3/policy.yaml".to_string(),
            "accounts/444455556666/x-9/policy.yaml".to_string(),
            "accounts/999999999999/a-1/policy.yaml".to_string(),
            "accounts/_organization/111122223333/us-east-1.json".to_string(),
            "accounts/111122223333/b-2/tagwarden-status.json".to_string(),
        ];
        let shards = c.shards_for(&keys);
        let of = |a: &str| shards.iter().filter(|s| s.account == a).map(|s| s.clusters.clone()).collect::<Vec<_>>();
        assert_eq!(of("111122223333"), vec![Some(vec!["a-1".to_string()]); 2], "c-3 is not enforced");
        assert_eq!(of("444455556666"), vec![Some(vec!["x-9".to_string()]); 2]);
        assert!(of("999999999999").is_empty(), "an account the hub does not list asks for nothing");
    }

    #[test]
    fn errors_name_the_variable_and_the_fix() {
        for (clusters, says) in
            [("a-1", "names no account"), ("1234/a-1", "12-digit"), ("111122223333/-bad", "111122223333/-bad")]
        {
            let e = with(clusters).expect_err(clusters).to_string();
            assert!(e.contains("TAGWARDEN_CLUSTERS") && e.contains(says) && e.contains("e.g."), "{e}");
        }
        let mut vars = BASE.to_vec();
        vars[2] = ("TAGWARDEN_MEMBER_REGIONS", "");
        vars.push(("TAGWARDEN_CLUSTERS", "111122223333/a-1"));
        assert!(from(&vars).expect_err("no region").to_string().contains("TAGWARDEN_MEMBER_REGIONS"));
        vars[1] = ("TAGWARDEN_MEMBER_ROLE", "arn:aws:iam::1:role/x");
        assert!(from(&vars).expect_err("an ARN").to_string().contains("not its ARN"));
        vars[0] = ("TAGWARDEN_ORGANIZATION", "s3://hub/accounts/*/");
        assert!(from(&vars).expect_err("a set").to_string().contains("s3://BUCKET/PREFIX/"));
    }

    #[test]
    fn a_shard_message_round_trips_and_nothing_else_is_one() {
        let shard = Shard { account: "111122223333".into(), region: "us-east-1".into(), clusters: None, group: None };
        let body = serde_json::to_string(&ShardMessage::Sweep(shard.clone())).expect("json");
        assert_eq!(body, r#"{"tagwarden":"sweep","account":"111122223333","region":"us-east-1"}"#);
        assert_eq!(ShardMessage::parse(&body), Some(shard));
        for not in [r#"{"tagwarden":"sweep"}"#, r#"{"tagwarden":"sweep","account":"1","region":"r"}"#, "{}"] {
            assert_eq!(ShardMessage::parse(not), None, "{not}");
        }
    }

    /// Issue 31 item 5: the session policies at 1, 20, 100 and 1,000 clusters in one account,
    /// each within STS's 2,048 characters, every cluster in exactly one group, in order.
    #[test]
    fn session_policies_fit_sts_and_cover_every_cluster_once() {
        let cluster = |i: usize| {
            let id = format!("cluster-{i:04}-7xk2p");
            let keys = if i % 10 == 9 { ClusterKind::ClusterApi } else { ClusterKind::OpenShift };
            (id.clone(), tagwarden_core::cloud::Cloud::Aws.ownership_keys(keys, &id))
        };
        for n in [1usize, 20, 100, 1000] {
            let clusters: Vec<(String, Vec<String>)> = (0..n).map(cluster).collect();
            let groups = pack("aws", &clusters);
            let flat: Vec<usize> = groups.iter().flatten().copied().collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>(), "{n}: every cluster once, in order");
            let sizes: Vec<usize> = groups
                .iter()
                .map(|g| session_policy("aws", &g.iter().map(|&i| clusters[i].clone()).collect::<Vec<_>>()).len())
                .collect();
            assert!(sizes.iter().all(|&s| s <= SESSION_POLICY_MAX), "{n}: {sizes:?}");
            println!(
                "{n} clusters: {} session(s), largest policy {} characters, {} clusters in the largest group",
                groups.len(),
                sizes.iter().max().unwrap_or(&0),
                groups.iter().map(Vec::len).max().unwrap_or(0)
            );
        }
        let one = session_policy("aws", &[cluster(0)]);
        println!("one cluster's session policy: {one}");
        let doc: serde_json::Value = serde_json::from_str(&one).expect("json");
        let statements = doc["Statement"].as_array().expect("statements");
        assert_eq!(statements.len(), 3, "reads, the owned writes, the buckets: {one}");
        let not = statements[0]["NotAction"].as_array().expect("NotAction");
        for write in ["ec2:CreateTags", "iam:TagRole", "s3:PutBucketTagging", "elasticfilesystem:TagResource"] {
            assert!(not.iter().any(|a| a == write), "{write} is never granted unconditionally: {one}");
        }
        let condition =
            &statements[1]["Condition"]["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/cluster-0000-7xk2p"];
        assert_eq!(condition, "owned", "{one}");
        assert_eq!(statements[2]["Resource"], serde_json::json!(["arn:aws:s3:::cluster-0000-7xk2p-*"]));
    }

    #[test]
    fn the_summary_adds_up_the_shards() {
        let shard = |a: &str, r: &str, at: u64, owned: usize, failed: usize| ShardReport {
            account: a.into(),
            region: r.into(),
            clusters: vec!["c-1".into()],
            finished_at_ms: at,
            owned,
            in_line: owned - failed,
            failed,
            ..ShardReport::default()
        };
        let mut refused = shard("222222222222", "us-east-1", 5, 0, 0);
        refused.refused = Some("account 222222222222: …".into());
        let s = Summary::of(vec![
            shard("111111111111", "us-east-1", 10, 100, 1),
            shard("111111111111", "eu-west-1", 7, 50, 0),
            refused,
        ]);
        assert_eq!((s.accounts, s.clusters, s.owned, s.in_line, s.failed), (2, 2, 150, 149, 1));
        assert_eq!(s.last_sweep_ms["111111111111"], 7, "the oldest region's sweep");
        assert!(s.refused.contains_key("222222222222"));

        // An account-region swept in two groups after three: the third group's outcome is stale;
        // its earlier whole-account outcome too.
        let group = |g: usize, at: u64, groups: usize| ShardReport {
            group: Some(g),
            groups: Some(groups),
            ..shard("333333333333", "us-east-1", at, 10, 0)
        };
        let s = Summary::of(vec![
            shard("333333333333", "us-east-1", 1, 30, 0),
            group(2, 5, 3),
            group(0, 20, 2),
            group(1, 21, 2),
        ]);
        let kept: Vec<Option<usize>> = s.shards.iter().map(|r| r.group).collect();
        assert_eq!((kept, s.owned), (vec![Some(0), Some(1)], 20), "only the newest packing counts");
    }
}
