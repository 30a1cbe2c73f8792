//! The `tagwarden` command line: a thin shell over the library.
//!
//! Exit codes: 0 ok; 1 the input is invalid (or drift was found where the command checks for it);
//! 2 usage, I/O or parse error.

#[cfg(feature = "aws")]
mod demo;
mod explain;
mod input;
mod plan;
#[cfg(any(feature = "aws", feature = "azure"))]
mod publish;
#[cfg(any(feature = "aws", feature = "azure"))]
mod status;
#[cfg(any(feature = "aws", feature = "azure"))]
mod sweep;
#[cfg(any(feature = "aws", feature = "azure"))]
mod target;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tagwarden", version, about = "Keeps a cluster's user-defined tags on every cloud resource it owns")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a policy against the cloud's tag rules; every violation is listed.
    Validate(validate::Args),
    /// Say what an event means: cloud, kind, resources, actor.
    Explain(explain::Args),
    /// Show the write tagwarden would make on one resource.
    Plan(plan::Args),
    /// Validate the cluster's policy and put it where the function reads it (conditional writes).
    #[cfg(any(feature = "aws", feature = "azure"))]
    Publish(publish::Args),
    /// Show the status report the function writes beside the policy.
    #[cfg(any(feature = "aws", feature = "azure"))]
    Status(status::Args),
    /// Plan (and unless --dry-run, write) every owned resource: the scheduled sweep, by hand.
    #[cfg(any(feature = "aws", feature = "azure"))]
    Sweep(sweep::Args),
    /// Run the whole AWS path against a local emulator and show what it did (scripts/demo).
    #[cfg(feature = "aws")]
    Demo(demo::Args),
}

/// How a command ended, beyond success.
pub enum Failure {
    /// The input is invalid: exit 1.
    Invalid,
    /// Usage, I/O or parse error: exit 2.
    Error(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Error(e.into())
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Plan(args) => plan::run(args),
        #[cfg(any(feature = "aws", feature = "azure"))]
        Command::Publish(args) => publish::run(args),
        #[cfg(any(feature = "aws", feature = "azure"))]
        Command::Status(args) => status::run(args),
        #[cfg(any(feature = "aws", feature = "azure"))]
        Command::Sweep(args) => sweep::run(args),
        #[cfg(feature = "aws")]
        Command::Demo(args) => demo::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid) => ExitCode::from(1),
        Err(Failure::Error(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
