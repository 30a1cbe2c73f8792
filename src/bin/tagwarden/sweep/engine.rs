//! The engine as the CLI runs it: a progress bar, the audit refusals, and whose credentials
//! write.

use std::collections::BTreeMap;
use std::time::Instant;

use tagwarden::report::Outcome;

use super::Args;

/// What one cloud's sweep did, before it is summarized.
pub(super) struct Swept {
    pub(super) policy: String,
    pub(super) is_set: bool,
    pub(super) out: Outcome,
    /// Each cluster whose policy was in force, with its version.
    pub(super) in_force: Vec<(String, String)>,
    pub(super) api_calls: BTreeMap<String, u64>,
    pub(super) seconds: f64,
}

/// A progress bar on stderr when it is a terminal (never in pipes, CI logs or `--json` captures),
/// and the callback the sweep moves it with (phase, done, total).
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
fn progress() -> (Option<indicatif::ProgressBar>, Option<tagwarden::enforce::sweep::Progress>) {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return (None, None);
    }
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg:>9} [{bar:30}] {pos}/{len} ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    let moved = bar.clone();
    let callback: tagwarden::enforce::sweep::Progress =
        std::sync::Arc::new(move |phase: &str, done: u64, total: u64| {
            moved.set_message(phase.to_string());
            if total > 0 {
                moved.set_length(total);
            }
            moved.set_position(done);
        });
    (Some(bar), Some(callback))
}

/// Run `sweep`, clearing the progress bar when it ends; and how long it took.
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
async fn timed(
    bar: Option<indicatif::ProgressBar>,
    sweep: impl std::future::Future<Output = Outcome>,
) -> (Outcome, f64) {
    let started = Instant::now();
    let out = sweep.await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    (out, started.elapsed().as_secs_f64())
}

/// The engine over `adapter` and `store`, as the CLI runs it: `--concurrency`, `--dry-run`, a
/// progress bar. Without --dry-run, first says whose credentials write (`caller`) and refuses a
/// cluster in audit.
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
pub(super) async fn run_engine<A: tagwarden::enforce::Adapter>(
    args: &Args,
    adapter: A,
    store: tagwarden::policy_store::PolicyStore<A::Source>,
    caller: impl std::future::Future<Output = anyhow::Result<String>>,
    api_calls: impl Fn() -> BTreeMap<String, u64>,
) -> anyhow::Result<Swept> {
    use tagwarden::enforce::Engine;
    let mut engine = Engine::new(adapter, store, Vec::new());
    engine.set_concurrency(args.concurrency);
    engine.dry_run = args.dry_run;
    // A policy that cannot be read writes nothing (the sweep fails closed and says why): there
    // is no write to name the credentials of.
    let mut rejected_before = Vec::new();
    let write = if args.dry_run {
        false
    } else {
        let (write, rejected) = refuse_if_audited(&engine.store).await?;
        rejected_before = rejected;
        write
    };
    if write {
        let who = caller.await.map_err(|why| {
            anyhow::anyhow!(
                "a sweep without --dry-run writes with your credentials, and they could not be read ({why}): fix them, or preview with --dry-run"
            )
        })?;
        eprintln!(
            "writing as   {who}: these writes are made with YOUR credentials, not the function's role (whose grants, conditioned on the cluster's ownership tag, do not bound them); --dry-run writes nothing"
        );
    }
    let (bar, callback) = progress();
    engine.progress = callback;
    let (mut out, seconds) = timed(bar, engine.sweep(true, None, None)).await;
    for r in rejected_before {
        if !out.rejected.iter().any(|o| o.cluster == r.cluster) {
            out.metrics.policy_rejected += 1;
            out.rejected.push(r);
        }
    }
    Ok(Swept {
        policy: engine.store.location(),
        is_set: engine.store.is_set(),
        out,
        in_force: engine.store.in_force().await,
        api_calls: api_calls(),
        seconds,
    })
}

/// Refuses a write to any swept cluster that is audited: its policy says `enforce: false`, or
/// its status report (what the function last ran with) says its mode is `audit`. The policy is
/// read by the store's own loader, as the function reads it. Whether any policy is in force.
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
async fn refuse_if_audited<S: tagwarden::policy_store::PolicySource>(
    store: &tagwarden::policy_store::PolicyStore<S>,
) -> anyhow::Result<(bool, Vec<tagwarden::report::RejectedPolicy>)> {
    // The store reports a rejected version once, on the load that finds it: this load's are
    // handed to the sweep's outcome, which would not see them again.
    let loaded = store.load(true).await;
    for r in &loaded.rejected {
        tagwarden::status_store::report_rejection(store, r).await;
    }
    let rejected = loaded
        .rejected
        .iter()
        .map(|r| tagwarden::report::RejectedPolicy {
            cluster: r.cluster.clone(),
            in_force: r.in_force.clone(),
            errors: r.errors.clone(),
        })
        .collect();
    let Ok(policies) = loaded.policies else { return Ok((false, rejected)) }; // the sweep itself says why nothing is in force
    let mut audited = Vec::new();
    for p in policies.iter() {
        let cluster = policies.is_set().then_some(p.infra_id.as_str());
        if !p.policy.enforce {
            audited.push(format!(
                "cluster {} is audited by its policy (enforce: false at {}): set `enforce: true` in its policy and publish it",
                p.infra_id,
                store.location_for(&p.infra_id)
            ));
            continue;
        }
        let report = store.source.get_status(cluster).await.ok().flatten();
        let mode = report
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v.pointer("/audit/mode").and_then(|m| m.as_str()).map(str::to_owned));
        if mode.as_deref() == Some("audit") {
            audited.push(format!(
                "cluster {} is audited: its last status report says mode audit (the deployment's TAGWARDEN_MODE, or its policy): switch the deployment (or the cluster's policy) to enforce",
                p.infra_id
            ));
        }
    }
    if !audited.is_empty() {
        let why = format!("{}; or preview with --dry-run, which writes nothing", audited.join("; "));
        return Err(crate::input::InvalidInput(why).into());
    }
    Ok((true, rejected))
}
