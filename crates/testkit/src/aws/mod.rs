//! Test support on AWS: a real moto server on a free loopback port, one per test binary, behind
//! the strict layer ([`strict`]: what AWS documents and moto does not enforce), and a fresh AWS
//! account per test (STS AssumeRole into a random account id), so tests run in parallel without
//! seeing each other's resources; [`fleet`], real resources and the events that name them.

pub mod fleet;
pub mod strict;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use aws_sdk_sts::config::Credentials;
use tagwarden_aws::Clients;

pub use crate::fault_proxy;
pub use crate::port::free_port;
use crate::sidecar::{self, Sidecar, Spec};
pub use crate::workspace::{git_commit, workspace_root};

pub struct Moto {
    /// The strict layer in front of moto: what every client of the tests talks to.
    pub endpoint: String,
    /// moto itself, for what must bypass the strict layer (nothing in the tests does).
    pub direct: String,
    pub strict: strict::Strict,
    _guard: Sidecar,
}

fn moto_server_binary() -> PathBuf {
    if let Ok(p) = std::env::var("TAGWARDEN_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let venv = workspace_root().join(".tools/venv/bin/moto_server");
    if venv.exists() {
        return venv;
    }
    panic!("moto_server not found at {}: run scripts/install-tools (or set TAGWARDEN_MOTO_SERVER)", venv.display());
}

/// The shared moto server, started on first use. It runs under a shell that kills it when this
/// test process exits (the shell's stdin, our pipe, closes).
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let port = free_port();
        let sidecar = sidecar::start(Spec {
            name: "moto_server",
            command: format!("'{}' -H 127.0.0.1 -p {port}", moto_server_binary().display()),
            port,
            dir: None,
            log: None,
            patience: Duration::from_secs(30),
            hint: "",
            exited: None,
        });
        let endpoint = format!("http://127.0.0.1:{port}");
        let strict = strict::start(&endpoint);
        Moto { endpoint: strict.endpoint.clone(), direct: endpoint, strict, _guard: sidecar }
    })
}

/// SDK clients for a brand-new account of their own in moto.
pub async fn account() -> (Clients, String) {
    let (clients, account, _) = account_with_env().await;
    (clients, account)
}

/// The same, plus the environment a subprocess (the CLI, the Lambda) needs to act in that account.
pub async fn account_with_env() -> (Clients, String, Vec<(&'static str, String)>) {
    let region = "us-east-1";
    let account = new_account();
    let (base, c) = session_in(&account, region, TEST_ROLE, None).await;
    let env = vec![
        ("AWS_ENDPOINT_URL", moto().endpoint.clone()),
        ("AWS_REGION", region.to_string()),
        ("AWS_ACCESS_KEY_ID", c.access_key_id().to_string()),
        ("AWS_SECRET_ACCESS_KEY", c.secret_access_key().to_string()),
        ("AWS_SESSION_TOKEN", c.session_token().to_string()),
    ];
    (Clients::new(&with_session(base, &c)), account, env)
}

/// The SDK configuration of a session in `account` (any 12-digit id: moto makes the account on
/// `AssumeRole`) in `region`, through the strict layer.
pub async fn config_in(account: &str, region: &str) -> tagwarden_aws::sdk::config::SdkConfig {
    let (base, c) = session_in(account, region, TEST_ROLE, None).await;
    with_session(base, &c)
}

/// A session of `role` in `account`, narrowed by an STS session policy (`policy`), which the
/// strict layer enforces on the tag writes.
pub async fn config_with_policy(
    account: &str,
    region: &str,
    role: &str,
    policy: &str,
) -> tagwarden_aws::sdk::config::SdkConfig {
    let (base, c) = session_in(account, region, role, Some(policy)).await;
    with_session(base, &c)
}

/// The configuration of `region` through the strict layer, and a session's credentials in `account`.
async fn session_in(
    account: &str,
    region: &str,
    role: &str,
    policy: Option<&str>,
) -> (tagwarden_aws::sdk::config::SdkConfig, aws_sdk_sts::types::Credentials) {
    let base = tagwarden_aws::config_loader()
        .expect("network settings")
        .endpoint_url(&moto().endpoint)
        .region(aws_sdk_sts::config::Region::new(region.to_string()))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .load()
        .await;
    let assumed = aws_sdk_sts::Client::new(&base)
        .assume_role()
        .role_arn(format!("arn:aws:iam::{account}:role/{role}"))
        .role_session_name("test")
        .set_policy(policy.map(str::to_owned))
        .send()
        .await
        .expect("sts:AssumeRole in moto");
    (base, assumed.credentials().expect("credentials").clone())
}

fn with_session(
    base: tagwarden_aws::sdk::config::SdkConfig,
    c: &aws_sdk_sts::types::Credentials,
) -> tagwarden_aws::sdk::config::SdkConfig {
    let creds = Credentials::new(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_string()),
        None,
        "assumed",
    );
    base.to_builder().credentials_provider(aws_sdk_sts::config::SharedCredentialsProvider::new(creds)).build()
}

/// The role the tests' own sessions assume (moto hands it out without its existing).
const TEST_ROLE: &str = "tagwarden-test";

/// A fresh 12-digit account id.
pub fn new_account() -> String {
    format!("{:012}", crate::random_u64() % 1_000_000_000_000)
}
