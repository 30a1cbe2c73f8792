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
use tagwarden_core::reason::{Deferred, Stop, StopKind};
use tagwarden_core::report::{Outcome, Status};
use tagwarden_core::resource::ResourceRef;

use tagwarden_core::TagMap;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::config::ConfigError;
use tagwarden_engine::enforce::{Adapter, Engine};
use tagwarden_engine::policy_store::{is_policy_document, PolicyStore};
use tagwarden_engine::rate_limit::RateLimit;

mod config;
mod members;
mod routing;
mod schedule;
mod sessions;
mod shards;
mod summary;

pub use config::*;
pub use members::*;
pub use schedule::{
    member_metric_lines, read_state, Census, HubState, OverCap, Scheduled, FOLDERS_MAX, HUB_STATE, OBJECTS_PER_FOLDER,
    SWEEP_SCHEDULE_SECONDS,
};
pub use sessions::*;
pub use shards::*;
pub use summary::*;
/// The pure session-policy packer ([`session_policy`], [`pack`], [`SESSION_POLICY_MAX`]) lives in
/// the core: it does no I/O.
pub use tagwarden_core::session_policy::{pack, session_policy, SESSION_POLICY_MAX};

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
/// Tries of the shard entries `SendMessageBatch` refused alone.
const ENQUEUE_ATTEMPTS: usize = 3;
/// Failures a shard's outcome names (the rest are counted, and in each cluster's status report).
const FAILURES_NAMED: usize = 20;

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
}
