//! `tagwarden explain`.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::json;
use tagwarden::events::{self, Event};

use crate::input::print_json;
use crate::Failure;

#[derive(clap::Args)]
pub struct Args {
    /// Print the normalized event (an array for a batch of several) on stdout.
    #[arg(long)]
    json: bool,
    /// An EventBridge event, an Event Grid / CloudEvents event or array, or a Google Cloud Pub/Sub
    /// push delivery or Cloud Audit Logs LogEntry, as JSON.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let bytes = std::fs::read(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    let events = match events::parse(&bytes) {
        Ok(events) => events,
        Err(e) => {
            if args.json {
                print_json(&json!({"error": format!("{}: {e}", args.file.display())}))?;
            } else {
                eprintln!("error: {}: {e}", args.file.display());
            }
            return Err(Failure::Invalid(None));
        }
    };
    if args.json {
        match events.as_slice() {
            [one] => print_json(one)?,
            many => print_json(&many)?,
        }
    } else {
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print_human(e);
        }
    }
    Ok(())
}

fn print_human(e: &Event) {
    let kind = match e.reason {
        Some(r) => format!("ignored ({r}: {})", r.describe()),
        None => serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
    };
    println!("{} {} {} → {kind}", e.cloud, e.service, e.event_name);
    println!("account   {}", e.account.as_deref().unwrap_or("-"));
    if let Some(r) = &e.region {
        println!("region    {r}");
    }
    println!("actor     {}", e.actor.as_deref().unwrap_or("-"));
    if let Some(code) = &e.validation_code {
        println!("answer    {{\"validationResponse\": \"{code}\"}}");
    }
    println!("resources {}", e.resources.len());
    for r in &e.resources {
        println!("  {:<36} {}", r.kind, r.arn.as_deref().unwrap_or(&r.id));
    }
    if let Some(tags) = &e.tags {
        println!("tags now  {}", tags.len());
    }
}
