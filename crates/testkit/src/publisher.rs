//! `tagwarden publish --from-cluster --watch` as the Deployment runs it, as a process the test
//! owns: its JSON lines (one per publish) on a channel, its log in a file the failures print, and
//! no cloud or proxy setting inherited from the test's environment — only what the test gives.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// Killed when the test ends, however it ends.
pub struct Publisher {
    child: std::process::Child,
    pub lines: mpsc::Receiver<Value>,
    log: PathBuf,
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `tagwarden` binary Cargo built for the root package's tests. Cargo gives its path to those
/// tests at compile time only (`env!("CARGO_BIN_EXE_tagwarden")`, which this library cannot
/// read), and may give it at run time too; otherwise it sits beside the `deps/` directory that
/// holds the test executable (`target/<profile>/deps/<test>-<hash>`).
fn tagwarden_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("CARGO_BIN_EXE_tagwarden") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let bin = exe.parent().and_then(|deps| deps.parent()).map(|dir| dir.join("tagwarden")).unwrap_or_default();
    assert!(
        bin.exists(),
        "no tagwarden binary at {} (beside {}): Cargo builds it for the root package's tests",
        bin.display(),
        exe.display()
    );
    bin
}

fn temp(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("tagwarden-publisher-{}-{n}-{name}", std::process::id()))
}

impl Publisher {
    /// Publish to `to`, reading the cluster through `kubeconfig` (its text), with `env` and the
    /// extra `args`; `POD_NAMESPACE` is `tagwarden`, as the Deployment's downward API sets it.
    pub fn spawn(kubeconfig: &str, to: &str, env: &[(&str, String)], args: &[&str]) -> Publisher {
        let kubeconfig_path = temp("kubeconfig");
        std::fs::write(&kubeconfig_path, kubeconfig).expect("kubeconfig");
        let log = temp("log");
        let mut command = Command::new(tagwarden_binary());
        for (k, _) in std::env::vars() {
            let inherited_setting = ["AWS_", "AZURE_", "TAGWARDEN_"].iter().any(|p| k.starts_with(p))
                || k.to_ascii_lowercase().ends_with("_proxy");
            if inherited_setting {
                command.env_remove(k);
            }
        }
        let mut child = command
            .args(["publish", "--from-cluster", "--watch", "--json", "--status-interval", "1", "--to", to])
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig_path)
            // Nothing of a developer's own AWS setup: only what `env` gives.
            .env("AWS_CONFIG_FILE", "/nonexistent/tagwarden-test-config")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("POD_NAMESPACE", "tagwarden")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("the publisher starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel::<Value>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Publisher { child, lines, log }
    }

    /// The next publish line within `patience`; the failure says `what` and shows the log.
    pub fn next(&self, what: &str, patience: Duration) -> Value {
        self.lines
            .recv_timeout(patience)
            .unwrap_or_else(|e| panic!("{what}: no publish line ({e}); log:\n{}", self.log()))
    }

    /// What the publisher logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Condition `type_` of the status ConfigMap `configmap` (as the fake API server stores it).
pub fn condition(configmap: Option<Value>, type_: &str) -> Option<Value> {
    let list: Vec<Value> = serde_json::from_str(configmap?["data"]["conditions"].as_str()?).ok()?;
    list.into_iter().find(|c| c["type"] == type_)
}
