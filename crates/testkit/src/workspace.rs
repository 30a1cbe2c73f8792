//! Where the workspace is: the fixtures under `tests/fixtures`, the tools under `.tools`.

use std::path::PathBuf;
use std::process::Command;

/// The workspace root (where Cargo.lock is), whichever package's tests call it: this crate lives
/// inside the workspace, so the root is an ancestor of its manifest directory.
pub fn workspace_root() -> PathBuf {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    while !dir.join("Cargo.lock").exists() && dir.pop() {}
    dir
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
