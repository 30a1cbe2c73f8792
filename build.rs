//! The commit a binary is built from, as `TAGWARDEN_COMMIT` for `env!`: `tagwarden --version`,
//! each function's start-up line and the status reports it writes name it beside the version.
//! From the environment's `TAGWARDEN_COMMIT` when set (a build from a source archive, or a
//! release naming its tag's commit), else `git rev-parse`, else "unknown". Shared by the root
//! package and both functions (`build = "../../build.rs"`).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok().filter(|o| o.status.success())?;
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=TAGWARDEN_COMMIT");
    let commit = std::env::var("TAGWARDEN_COMMIT").ok().filter(|c| !c.is_empty());
    let commit = commit.or_else(|| git(&["rev-parse", "--short=12", "HEAD"])).unwrap_or_else(|| "unknown".into());
    // Built again when HEAD moves: HEAD itself, the branch it names, and packed refs. Only files
    // that exist are named (a missing one would rebuild every time).
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watched.into_iter().flatten().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=TAGWARDEN_COMMIT={commit}");
}
