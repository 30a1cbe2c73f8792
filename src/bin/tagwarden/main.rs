//! The `tagwarden` command line: a thin shell over the library.
//!
//! Exit codes, for scripts ([`EXIT_CODES`], also in `--help`): 0 all in line; 1 invalid input or
//! policy; 2 resources not in line (failed, or drifted where the command only checks); 3 could not
//! run (usage, I/O, settings, credentials, an unreachable endpoint).

#[cfg(feature = "aws")]
mod demo;
mod explain;
mod input;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod local;
#[cfg(feature = "aws")]
mod organization;
mod plan;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod publish;
// The book's generated option reference and its drift test: the committed page is the all-features CLI's.
#[cfg(all(test, feature = "aws", feature = "azure", feature = "gcp", feature = "kube"))]
mod reference;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod report;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod status;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod sweep;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod target;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// What each exit code means; `--help` shows it.
const EXIT_CODES: &str = "Exit codes:
  0  all in line
  1  invalid input or policy (every violation is listed)
  2  resources not in line: some failed (the records say which), or drifted under --dry-run
  3  could not run: usage, I/O, a missing setting or credential, an unreachable endpoint";

#[derive(Parser)]
#[command(
    name = "tagwarden",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TAGWARDEN_COMMIT"), ")"),
    about = "Keeps a cluster's user-defined tags on every cloud resource it owns",
    after_help = EXIT_CODES
)]
struct Cli {
    /// Log the SDKs' whole error chains and every call (RUST_LOG overrides).
    #[arg(short, long, global = true)]
    verbose: bool,
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
    #[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
    Publish(publish::Args),
    /// Show the status report the function writes beside the policy.
    #[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
    Status(status::Args),
    /// Plan (and unless --dry-run, write) every owned resource: the scheduled sweep, by hand.
    #[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
    Sweep(sweep::Args),
    /// Run the whole AWS path against a local emulator and show what it did (scripts/demo).
    #[cfg(feature = "aws")]
    Demo(demo::Args),
    /// An AWS Organization's hub by hand: sweep every member account and region, or show the summary.
    #[cfg(feature = "aws")]
    Organization(organization::Args),
}

/// How a command ended, beyond success.
pub enum Failure {
    /// The input or the policy is invalid: exit 1, with what to say on stderr when the output has
    /// not said it.
    Invalid(Option<anyhow::Error>),
    /// Resources are not in line (failed, or drifted where only checked): exit 2, with what to
    /// say on stderr when the output has not said it.
    NotInLine(Option<anyhow::Error>),
    /// Could not run (usage, I/O, settings, credentials, network): exit 3.
    Error(anyhow::Error),
}

/// An error from `?` is invalid input when a policy document or an argument's value was refused
/// (exit 1), and otherwise kept the command from running (exit 3).
impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        let e = e.into();
        let invalid =
            e.chain().any(|c| c.is::<input::InvalidInput>() || c.is::<tagwarden::policy::load::PolicyError>());
        if invalid {
            Failure::Invalid(Some(e))
        } else {
            Failure::Error(e)
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are answers, not errors.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(3);
        }
    };
    // The AWS SDK warns about every credential source it tries (IMDS among them); what failed is
    // said once, in the error, and the chain is there with -v.
    let quiet = "warn,aws_config=error,aws_smithy_runtime=error";
    let default = if cli.verbose { "debug,hyper=info,h2=info,rustls=info" } else { quiet };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into()))
        .init();
    let result = match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Plan(args) => plan::run(args),
        #[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
        Command::Publish(args) => publish::run(args),
        #[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
        Command::Status(args) => status::run(args),
        #[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
        Command::Sweep(args) => sweep::run(args),
        #[cfg(feature = "aws")]
        Command::Demo(args) => demo::run(args),
        #[cfg(feature = "aws")]
        Command::Organization(args) => organization::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid(why)) => {
            if let Some(e) = why {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(1)
        }
        Err(Failure::NotInLine(why)) => {
            if let Some(e) = why {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(2)
        }
        Err(Failure::Error(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
    }
}
