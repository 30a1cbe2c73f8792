//! STS sessions into the member accounts: one per account (and cluster group), renewed before
//! it expires, a refusal remembered ([`Sessions`], [`Refused`]).

use super::*;

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
    pub(super) fn fix(&self) -> &'static str {
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
pub(super) enum Session {
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
pub(super) type SessionSlot = Arc<tokio::sync::Mutex<Option<Session>>>;

/// Member sessions, one per account, shared by that account's clients in every region.
pub struct Sessions {
    pub(super) sts: aws_sdk_sts::Client,
    pub partition: String,
    pub(super) role_name: String,
    pub(super) session_name: String,
    pub(super) sessions: Mutex<HashMap<(String, usize), SessionSlot>>,
    pub(super) assumed: AtomicU64,
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
pub(super) struct MemberCredentials {
    pub(super) sessions: Arc<Sessions>,
    pub(super) account: String,
    pub(super) group: usize,
    pub(super) role: String,
    pub(super) policy: Arc<str>,
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
