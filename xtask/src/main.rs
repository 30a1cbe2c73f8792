//! The workspace's own tooling, in Rust where Rust serves it better than a script (the cargo-xtask
//! pattern: `cargo xtask <command>`, an alias in `.cargo/config.toml`).
//!
//! - `house`: the file import cycles inside each crate and the direction between the layer crates;
//!   with `REV`s, the lines of non-test source at each.
//! - `sizes`: the Rust source files over 600 lines, each of which must be on a short allowlist.
//! - `manifest`: the manifest of a packaged artifact, `<zip>.json`, which infra/ checks at plan.

mod house;
mod manifest;
mod sizes;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "tagwarden's workspace tooling")]
struct Cli {
    /// The repository to read (default: the checkout this xtask was built from).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The house's shape: file import cycles inside each crate (imports are `crate::`/`super::`
    /// paths outside comments and test modules, resolved to files) and crates that depend on a
    /// crate of their own or a higher layer. With REVs, first the lines of non-test source at
    /// each (every .rs under src/, crates/*/src/ and functions/*/src/, non-blank, without
    /// `#[cfg(test)] mod` blocks); without REVs and without --check, at HEAD.
    House {
        /// Exit 1 on a cycle or a dependency against the layers' direction.
        #[arg(long)]
        check: bool,
        /// Git revisions to count the lines of non-test source at.
        revs: Vec<String>,
    },
    /// The .rs files under crates/, src/ and functions/ over 600 lines, longest first.
    Sizes {
        /// Exit 1 unless each such file is on the allowlist (xtask/src/sizes.rs), and each entry
        /// there is still over the limit.
        #[arg(long)]
        check: bool,
    },
    /// Write the manifest of a packaged artifact beside it, `<ZIP>.json`, and print its path.
    ///
    /// Fields: name, version, git_commit (HEAD, "-dirty" when the work tree has changes,
    /// "unknown" outside a git checkout), architecture, rust_target, rustc_version
    /// (`rustc --version`, or the argument), sha256 (hex of the file, as Terraform's filesha256
    /// prints it).
    Manifest {
        /// The artifact (a zip or a tarball).
        zip: String,
        /// The artifact's name, e.g. tagwarden-aws-lambda.
        name: String,
        /// Its version.
        version: String,
        /// arm64 or x86_64 (the Lambda and Azure names).
        arch: String,
        /// The Rust target it was built for; must be one of ARCH.
        rust_target: String,
        /// What `rustc --version` says; asked of rustc when left out.
        rustc_version: Option<String>,
    },
}

/// The repository's root: this crate's parent, fixed at build time, so the commands work from any
/// directory (the way the scripts they replace found the root from their own path).
fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask/ has a parent directory")
}

/// Errors as one line of causes, without a backtrace: these are a tool's answers, not crashes.
fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cargo xtask: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    let root = cli.root.as_deref().unwrap_or(repo_root());
    match cli.command {
        Command::House { check, revs } => {
            let revs = if revs.is_empty() && !check { vec!["HEAD".to_owned()] } else { revs };
            for rev in &revs {
                let lines =
                    house::lines_at(root, rev).with_context(|| format!("counting the source lines at {rev}"))?;
                println!("lines of non-test source at {rev}: {lines}");
            }
            let cycles = house::cycles(&house::working_tree(root)?);
            println!("file import cycles: {}", cycles.len());
            for cycle in &cycles {
                println!("  {}", cycle.join(" <-> "));
            }
            let wrong = house::layer_findings(&house::workspace_crates(root)?);
            println!("dependencies against the layers: {}", wrong.len());
            for finding in &wrong {
                println!("  {finding}");
            }
            Ok(exit(check && !(cycles.is_empty() && wrong.is_empty())))
        }
        Command::Sizes { check } => {
            let found = sizes::oversized(root)?;
            println!("files over {} lines (crates/, src/, functions/): {}", sizes::LIMIT, found.len());
            for (path, lines) in &found {
                let why = sizes::ALLOWED
                    .iter()
                    .find(|(allowed, _)| *allowed == path)
                    .map_or(String::new(), |(_, why)| format!("  (allowed: {why})"));
                println!("  {lines:>5}  {path}{why}");
            }
            let problems = sizes::check(&found, sizes::ALLOWED);
            if check {
                for problem in &problems {
                    eprintln!("sizes: {problem}");
                }
            }
            Ok(exit(check && !problems.is_empty()))
        }
        Command::Manifest { zip, name, version, arch, rust_target, rustc_version } => {
            let written = manifest::write(root, &zip, &name, &version, &arch, &rust_target, rustc_version)?;
            println!("{written}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn exit(failed: bool) -> ExitCode {
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
