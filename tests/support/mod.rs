//! Test support: a real moto server on a free loopback port, one per test binary, behind the
//! strict layer (`strict.rs`: what AWS documents and moto does not enforce), and a fresh AWS
//! account per test (STS AssumeRole into a random account id), so tests run in parallel without
//! seeing each other's resources.

#![allow(dead_code)]

pub mod fault_proxy;
pub mod strict;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aws_sdk_sts::config::Credentials;
use tagwarden::aws::Clients;

pub struct Moto {
    /// The strict layer in front of moto: what every client of the tests talks to.
    pub endpoint: String,
    /// moto itself, for what must bypass the strict layer (nothing in the tests does).
    pub direct: String,
    pub strict: strict::Strict,
    _guard: Child,
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

/// The commit the binaries under test name (`build.rs`): `TAGWARDEN_COMMIT` when set, else git's.
pub fn git_commit() -> String {
    if let Some(c) = std::env::var("TAGWARDEN_COMMIT").ok().filter(|c| !c.is_empty()) {
        return c;
    }
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(workspace_root()).output();
    out.ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The workspace root (where Cargo.lock is), whichever package's tests include this module.
pub fn workspace_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("Cargo.lock").exists() && dir.pop() {}
    dir
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// The shared moto server, started on first use. It runs under a shell that kills it when this
/// test process exits (the shell's stdin, our pipe, closes).
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| {
        let port = free_port();
        let bin = moto_server_binary();
        let script = format!(
            "'{}' -H 127.0.0.1 -p {port} >/dev/null 2>&1 & pid=$!; echo started; read _; kill $pid",
            bin.display()
        );
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start moto_server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("moto wrapper");
        let endpoint = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen on {endpoint} within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        let strict = strict::start(&endpoint);
        Moto { endpoint: strict.endpoint.clone(), direct: endpoint, strict, _guard: child }
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
pub async fn config_in(account: &str, region: &str) -> tagwarden::aws::sdk::config::SdkConfig {
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
) -> tagwarden::aws::sdk::config::SdkConfig {
    let (base, c) = session_in(account, region, role, Some(policy)).await;
    with_session(base, &c)
}

/// The configuration of `region` through the strict layer, and a session's credentials in `account`.
async fn session_in(
    account: &str,
    region: &str,
    role: &str,
    policy: Option<&str>,
) -> (tagwarden::aws::sdk::config::SdkConfig, aws_sdk_sts::types::Credentials) {
    let base = tagwarden::aws::config_loader()
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
    base: tagwarden::aws::sdk::config::SdkConfig,
    c: &aws_sdk_sts::types::Credentials,
) -> tagwarden::aws::sdk::config::SdkConfig {
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
    format!("{:012}", rand_u64() % 1_000_000_000_000)
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos() ^ std::process::id() as u128);
    h.finish()
}
