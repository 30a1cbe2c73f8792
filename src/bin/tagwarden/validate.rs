//! `tagwarden validate`.

use std::path::PathBuf;

use serde_json::json;
use tagwarden::cloud::Cloud;
use tagwarden::policy::validate;

use crate::input::{print_json, read_policy, resolve_cloud};
use crate::Failure;

#[derive(serde::Serialize)]
struct ValidateOutput<'a> {
    valid: bool,
    violations: &'a [validate::Violation],
    cloud: Cloud,
    infra_id: Option<&'a str>,
    enforce: bool,
    version: &'a str,
    documents: Vec<Document<'a>>,
}

#[derive(serde::Serialize)]
struct Document<'a> {
    name: &'a str,
    kind: String,
}

#[derive(clap::Args)]
pub struct Args {
    /// The cloud whose rules apply (default: the one the policy names).
    #[arg(long)]
    cloud: Option<Cloud>,
    /// Print {"valid", "violations": [{"key", "rule", "message"}], …} on stdout.
    #[arg(long)]
    json: bool,
    /// Policy documents or directories, merged in name order.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let loaded = read_policy(&args.files).and_then(|(p, kinds)| Ok((resolve_cloud(args.cloud, &p)?, p, kinds)));
    let (cloud, policy, kinds) = match loaded {
        Ok(ok) => ok,
        Err(e) if args.json => {
            print_json(&json!({"valid": false, "violations": [], "error": format!("{e:#}")}))?;
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    let violations = validate::policy(&policy, cloud);
    let valid = violations.is_empty();
    if args.json {
        print_json(&ValidateOutput {
            valid,
            violations: &violations,
            cloud,
            infra_id: policy.infra_id.as_deref(),
            enforce: policy.enforce,
            version: &policy.version,
            documents: kinds.iter().map(|(name, kind)| Document { name, kind: format!("{kind:?}") }).collect(),
        })?;
    } else {
        let docs: Vec<String> = kinds.iter().map(|(n, k)| format!("{n} ({k:?})")).collect();
        println!("policy   {}", docs.join(", "));
        println!(
            "cloud    {cloud} · infraID {} · version {} · {} status and {} spec tags, {} override{}{}",
            policy.infra_id.as_deref().unwrap_or("(not named)"),
            policy.version,
            policy.status.len(),
            policy.spec.len(),
            policy.overrides.len(),
            if policy.overrides.len() == 1 { "" } else { "s" },
            if policy.enforce { "" } else { " · propagation disabled" },
        );
        if valid {
            println!("valid");
        } else {
            println!("invalid: {} violation{}", violations.len(), if violations.len() == 1 { "" } else { "s" });
            for v in &violations {
                println!("  [{}] {}", v.rule, v.message);
            }
        }
    }
    if valid {
        Ok(())
    } else {
        Err(Failure::Invalid(None))
    }
}
