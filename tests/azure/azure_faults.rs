//! Faults between the Azure function's code and the services it calls: ARM 429 with
//! `Retry-After`, 500/503, Blob `ServerBusy`, dropped connections and answers later than the
//! client's timeout, injected by the fault proxy (`tagwarden_testkit::fault_proxy`) in front of the
//! fake ARM and of Azurite; and 202 + `Location` writes from the fake itself. Event Grid is
//! simulated around the real handler (`tagwarden_testkit::azure::grid`): a failed delivery is retried
//! up to 5 times, then dead-lettered with its original payload. Invariants: every event ends
//! delivered or dead-lettered (none lost), and no resource ends with a wrong value. Figures are
//! printed (`--nocapture`).

#![cfg(feature = "azure")]

use crate::{fault_proxy, grid, support};
use std::time::{Duration, Instant};

use fault_proxy::{Fault, FaultProxy, Rule, When};
use grid::{EventGrid, Fleet, Rng};
use serde_json::{json, Value};
use support::azurite;
use support::fake::{self, FakeAzure};
use tagwarden::azure::reqwest;
use tagwarden::azure::server::Request;
use tagwarden::TagMap;

/// `TAGWARDEN_HTTP_TIMEOUT` in these tests; injected delays are longer.
const HTTP_TIMEOUT: Duration = Duration::from_secs(1);

fn chaos_rules() -> Vec<Rule> {
    let p = When::Probability;
    let on = |svc: &str, op: &str, fault: Fault, when: When| Rule::new(Some(svc), Some(op), fault, when);
    vec![
        // Enough in a row to exhaust the client's 4 attempts: the handler must hand events back.
        on("arm", "PATCH tags", Fault::Throttle, When::Always).budget(10),
        // A token that expired in flight: 401 is not retried by the client, so the event goes back
        // to Event Grid and succeeds on a later delivery. (No `AuthorizationFailed` here: ARM's
        // code makes it permanent, reported and never redelivered: tests/azure/azure_arm_contract.rs.)
        on("arm", "PATCH tags", Fault::Status(401), When::EveryNth(7)).budget(4),
        on("arm", "GET tags", Fault::Throttle, p(0.15)),
        on("arm", "PATCH tags", Fault::Throttle, p(0.2)),
        on("blob", "GET blob", Fault::Throttle, p(0.1)),
        on("blob", "GET blob", Fault::Status(500), p(0.05)),
        Rule::new(Some("arm"), None, Fault::Status(500), p(0.04)),
        Rule::new(Some("arm"), None, Fault::Status(503), p(0.04)),
        Rule::new(None, None, Fault::Reset, p(0.04)),
        Rule::new(None, None, Fault::Delay(HTTP_TIMEOUT + Duration::from_millis(500)), p(0.02)).budget(6),
    ]
}

struct Env {
    fake: FakeAzure,
    arm_proxy: FaultProxy,
    blob_proxy: FaultProxy,
    handler: tagwarden::azure::function::Handler,
    desired: TagMap,
}

impl Env {
    async fn new() -> Env {
        let fake = FakeAzure::start(Some(support::env::OWN_CLIENT));
        let arm_proxy = FaultProxy::start(&fake.arm).await;
        let azurite_origin =
            azurite::azurite().endpoint.trim_end_matches(&format!("/{}", azurite::ACCOUNT)).to_string();
        let blob_proxy = FaultProxy::start(&azurite_origin).await;
        let http = reqwest::Client::new();
        let container = azurite::container(&http).await;
        let desired = [("team", "platform"), ("cost-center", "42")];
        azurite::put_blob(&http, &container, "p.json", &grid::infrastructure(&desired)).await;
        // The policy is read through the proxy; POLICY_TTL 0 re-checks it on every event.
        let policy_url =
            format!("{}/p.json?{}", container.replace(&azurite_origin, &blob_proxy.endpoint), azurite::account_sas());
        let timeout = HTTP_TIMEOUT.as_secs().to_string();
        let handler = grid::handler(
            &fake,
            &arm_proxy.endpoint,
            &policy_url,
            &[("POLICY_TTL", "0"), ("TAGWARDEN_HTTP_TIMEOUT", timeout.as_str())],
        );
        let desired = desired.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Env { fake, arm_proxy, blob_proxy, handler, desired }
    }

    fn injected(&self) -> std::collections::BTreeMap<String, u64> {
        let mut all = self.arm_proxy.injected();
        for (k, n) in self.blob_proxy.injected() {
            *all.entry(k).or_default() += n;
        }
        all
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_under_faults_end_applied_or_dead_lettered() {
    let env = Env::new().await;
    let fleet = Fleet::create(&env.fake, 60, 12, &[("team", "platform"), ("cost-center", "42")]);

    // One event per resource, a third again as duplicates, shuffled; plus two that cannot
    // succeed: a resource that never exists, and a payload that is not an event.
    let mut rng = Rng(env.arm_proxy.seed | 1);
    let mut events: Vec<(String, Value)> =
        fleet.all().enumerate().map(|(i, id)| (format!("e{i}"), grid::write_event(id))).collect();
    let n = events.len();
    for d in 0..n / 3 {
        let (_, event) = events[rng.below(n)].clone();
        events.push((format!("dup{d}"), event));
    }
    let ghost = support::env::rid("Microsoft.Compute/virtualMachines", "never-created");
    events.push(("ghost".into(), grid::write_event(&ghost)));
    events.push(("garbage".into(), json!("not json at all {")));
    rng.shuffle(&mut events);
    let mut grid = EventGrid::new(5);
    for (id, event) in &events {
        grid.publish(id, event.clone());
    }
    // Three writes accepted asynchronously (202 + Location, polled through the proxy).
    for _ in 0..3 {
        env.fake.inject("PATCH", fake::Fault::Accept { polls: 1 });
    }

    env.arm_proxy.set_rules(chaos_rules());
    env.blob_proxy.set_rules(chaos_rules());
    let started = Instant::now();
    grid.drain(&env.handler, 8).await;
    let elapsed = started.elapsed();
    env.arm_proxy.clear_rules();
    env.blob_proxy.clear_rules();

    // Nothing lost: every event is delivered or dead-lettered, with its original payload.
    assert!(grid.lost().is_empty(), "lost events: {:?}", grid.lost());
    assert_eq!(grid.done.len() + grid.dead.len(), events.len());
    for (id, payload) in &grid.dead {
        assert_eq!(payload, &grid.sent[id], "the dead-letter keeps the original payload of {id}");
    }
    let dead: Vec<&str> = grid.dead.iter().map(|(id, _)| id.as_str()).collect();
    assert!(dead.contains(&"ghost") && dead.contains(&"garbage"), "{dead:?}");
    let handed_back = grid.done.values().filter(|attempts| **attempts > 1).count();
    assert!(handed_back >= 4, "the injected faults made the handler hand events back: {handed_back}");

    // No wrong value; every owned resource named by a delivered event carries the policy.
    let applied_ids: Vec<String> = grid
        .done
        .keys()
        .filter_map(|id| grid.sent[id].get("subject").and_then(Value::as_str).map(|s| s.to_ascii_lowercase()))
        .collect();
    let (wrong, applied) = fleet.check(&env.fake, &env.desired, &|id| applied_ids.contains(&id.to_ascii_lowercase()));
    assert!(wrong.is_empty(), "wrong final values: {wrong:#?}");
    assert!(env.fake.count("GET poll") >= 3, "the accepted writes were polled: {:?}", env.fake.arm_calls());

    let injected = env.injected();
    assert!(injected.get("throttle").copied().unwrap_or_default() > 10, "{injected:?}");
    assert!(injected.keys().len() >= 4, "several kinds of fault were injected: {injected:?}");
    println!(
        "AZURE FAULTS: seed={} events={} delivered={} dead_lettered={} lost={} wrong_values={} deliveries={} \
         redelivered={} delivered_after_retry={handed_back} faults_injected={} {injected:?} applied_resources={applied}/{} elapsed={:.1}s",
        env.arm_proxy.seed,
        events.len(),
        grid.done.len(),
        grid.dead.len(),
        grid.lost().len(),
        wrong.len(),
        grid.deliveries,
        grid.redelivered(),
        injected.values().sum::<u64>(),
        fleet.owned.len(),
        elapsed.as_secs_f64(),
    );
    println!(
        "AZURE FAULTS: by operation {:?} {:?}",
        env.arm_proxy.injected_by_operation(),
        env.blob_proxy.injected_by_operation()
    );
    println!("AZURE FAULTS: calls {:?}", env.handler.calls.snapshot());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sweep_under_faults_converges_and_never_writes_a_foreign_resource() {
    let env = Env::new().await;
    let fleet = Fleet::create(&env.fake, 40, 10, &[("team", "platform"), ("cost-center", "42")]);
    let mut rules = chaos_rules();
    rules.remove(0);
    env.arm_proxy.set_rules(rules.clone());
    env.blob_proxy.set_rules(rules);

    // The timer fires again until a sweep completes (hourly in production).
    let timer = Request {
        method: "POST".into(),
        path: "/sweep".into(),
        body: json!({"Data": {"timer": {"IsPastDue": false}}, "Metadata": {"sys": {"MethodName": "sweep"}}})
            .to_string()
            .into_bytes(),
        ..Request::default()
    };
    let mut sweeps = Vec::new();
    for _ in 0..6 {
        let resp = env.handler.handle(timer.clone()).await;
        let body: Value = serde_json::from_slice(&resp.body).expect("JSON");
        sweeps.push((resp.status, body["ReturnValue"]["by_status"].clone()));
        if resp.status == 200 {
            break;
        }
    }
    env.arm_proxy.clear_rules();
    env.blob_proxy.clear_rules();
    assert_eq!(sweeps.last().map(|s| s.0), Some(200), "a sweep completed despite the faults: {sweeps:?}");
    let (wrong, applied) = fleet.check(&env.fake, &env.desired, &|_| true);
    assert!(wrong.is_empty(), "wrong final values: {wrong:#?}");
    assert_eq!(applied, fleet.owned.len());
    let writes = env.handler.calls.writes();
    let drifted = fleet.drifted(&env.desired) as u64;
    assert!(writes >= drifted, "{writes} Merges for {drifted} drifted resources");
    println!(
        "AZURE SWEEP FAULTS: sweeps={} {sweeps:?} drifted={drifted} merges={writes} (retries included) injected={:?}",
        sweeps.len(),
        env.injected()
    );
}
