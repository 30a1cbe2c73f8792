//! `tagwarden plan`.

use std::path::PathBuf;

use anyhow::bail;
use serde_json::json;
use tagwarden::plan::{self, Decision};
use tagwarden::policy::validate;
use tagwarden::resource::ResourceRef;

use crate::input::{print_json, read_policy, read_tags};
use crate::Failure;

#[derive(serde::Serialize)]
struct PlanOutput<'a> {
    #[serde(flatten)]
    plan: &'a plan::Plan,
    infra_id: &'a str,
    policy_version: &'a str,
}

#[derive(clap::Args)]
pub struct Args {
    /// Policy documents or directories, merged in name order.
    #[arg(long, required = true, value_name = "FILE")]
    policy: Vec<PathBuf>,
    /// The resource: an ARN, an ARM resource ID, or an EC2 id.
    #[arg(long, value_name = "ARN_OR_ID")]
    resource: String,
    /// The resource's current tags as a JSON map (or a list of {"Key", "Value"}).
    #[arg(long, value_name = "FILE")]
    current: PathBuf,
    /// The cluster's infraID, when the policy does not name it (an install-config, a tag map).
    #[arg(long)]
    infra_id: Option<String>,
    /// Print {"resource", "owned", "outcome", "set", "superseded", …} on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let (policy, _) = read_policy(&args.policy)?;
    let resource =
        ResourceRef::parse(&args.resource).map_err(|e| crate::input::InvalidInput(format!("--resource: {e}")))?;
    let current = read_tags(&args.current)?;
    let cloud = resource.cloud();
    if let Some(p) = policy.cloud.filter(|p| *p != cloud) {
        return Err(anyhow::anyhow!("the resource {resource} is on {cloud}, but the policy is for {p}").into());
    }
    let infra_id = match (&args.infra_id, &policy.infra_id) {
        (Some(flag), Some(p)) if flag != p => {
            return Err(anyhow::anyhow!("--infra-id {flag} contradicts the policy's infraID {p}").into());
        }
        (Some(id), _) | (None, Some(id)) => id.clone(),
        (None, None) => {
            eprintln!("error: the policy does not name the cluster's infraID, which decides which resources it owns: pass --infra-id");
            return Err(Failure::Invalid(None));
        }
    };
    let violations = validate::policy(&policy, cloud);
    if !violations.is_empty() {
        // Fail closed: an invalid policy plans nothing.
        if args.json {
            print_json(&json!({"error": "invalid policy", "violations": violations}))?;
        }
        eprintln!(
            "error: the policy is invalid ({} violations); run `tagwarden validate` for the list",
            violations.len()
        );
        return Err(Failure::Invalid(None));
    }
    let plan = shown(&policy, plan::plan(&policy, cloud, &infra_id, &resource, &current));
    if args.json {
        print_json(&PlanOutput { plan: &plan, infra_id: &infra_id, policy_version: &policy.version })?;
    } else {
        print_human(&plan, &cloud.ownership_keys(policy.kind, &infra_id))?;
    }
    Ok(())
}

/// The plan as it may be printed: values of keys the policy marks sensitive are hashes, as the
/// function logs them.
fn shown(policy: &tagwarden::policy::Policy, mut p: plan::Plan) -> plan::Plan {
    let hide = |k: &str, v: &str| policy.loggable(k, v).into_owned();
    p.set = p.set.iter().map(|(k, v)| (k.clone(), hide(k, v))).collect();
    for c in p.changes.iter_mut().chain(p.audited.iter_mut()) {
        c.old = c.old.as_deref().map(|v| hide(&c.key, v));
        c.new = hide(&c.key, &c.new);
    }
    for s in &mut p.superseded {
        s.value = hide(&s.key, &s.value);
    }
    p
}

fn print_human(p: &plan::Plan, owner_keys: &[String]) -> anyhow::Result<()> {
    println!("resource  {} ({})", p.resource, p.resource_type);
    // A Cluster API cluster's resources are owned by either of its two keys.
    let owner = owner_keys.join(" or ");
    let owned = if p.owned {
        format!("yes ({owner}=owned)")
    } else {
        format!("no: {owner} is not \"owned\" ({:?})", p.ownership).to_lowercase()
    };
    println!("owned     {owned}");
    let summary = match p.outcome {
        Decision::Apply => format!("apply: {} tag{} to write", p.set.len(), if p.set.len() == 1 { "" } else { "s" }),
        Decision::Unchanged => "unchanged: no drift, no write".to_string(),
        Decision::NotOwned => "not-owned: tagwarden never writes this resource".to_string(),
        Decision::Audited => format!(
            "audited: {} tag{} would be written; the cluster or the keys are audited, nothing is written",
            p.audited.len(),
            if p.audited.len() == 1 { "" } else { "s" }
        ),
        Decision::Contested => format!("contested: {} held back, another writer keeps changing it", p.held.join(", ")),
        Decision::LimitExceeded => format!(
            "limit-exceeded: the write would leave {} tags, over the limit of {}; nothing is written",
            p.tags_after, p.tag_limit
        ),
    };
    println!("outcome   {summary}");
    for c in &p.changes {
        match &c.old {
            None => println!("  + {} = {}", c.key, c.new),
            Some(old) => println!("  ~ {} = {} (was {old})", c.key, c.new),
        }
    }
    for c in &p.audited {
        match &c.old {
            None => println!("  + {} = {} (audited: not written)", c.key, c.new),
            Some(old) => println!("  ~ {} = {} (was {old}; audited: not written)", c.key, c.new),
        }
    }
    for s in &p.superseded {
        println!("  note: {} = {:?} from {} is superseded by {}", s.key, s.value, s.from, s.by);
    }
    if p.outcome == Decision::LimitExceeded && p.changes.is_empty() {
        bail!("internal: limit exceeded without changes");
    }
    Ok(())
}
