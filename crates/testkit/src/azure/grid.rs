//! An Azure fleet in the fake ARM, and Event Grid's delivery contract around the real custom
//! handler, for the fault and load tests: each event is delivered on its own (the Functions
//! trigger's batch of one) as the host's `{Data, Metadata}` invocation; a non-2xx answer is
//! retried, up to the subscription's `max_delivery_attempts`, then the event is dead-lettered
//! with its original payload (infra/azure/events.tf).

use std::collections::{BTreeMap, HashMap, VecDeque};

use futures_util::stream::{self, StreamExt};
use serde_json::Value;
use tagwarden_azure::function::Handler;
use tagwarden_azure::server::Request;
use tagwarden_core::TagMap;

use super::env::{self, rid, OWNER};
use super::fake::FakeAzure;
pub use crate::Rng;

const KINDS: [&str; 5] = [
    "Microsoft.Compute/virtualMachines",
    "Microsoft.Compute/disks",
    "Microsoft.Network/networkInterfaces",
    "Microsoft.Network/publicIPAddresses",
    "Microsoft.Storage/storageAccounts",
];

/// A `ResourceWriteSuccess` event (Event Grid schema) for a write to `resource` by someone else.
pub fn write_event(resource: &str) -> Value {
    let kind = resource.split("/providers/").nth(1).and_then(|p| p.rsplit_once('/')).map(|(k, _)| k);
    env::eg_event(resource, &format!("{}/write", kind.unwrap_or("Microsoft.Compute/virtualMachines")), env::SOMEONE)
}

/// The policy every test here enforces, as an Azure Infrastructure object.
pub fn infrastructure(tags: &[(&str, &str)]) -> String {
    env::infrastructure(tags, &[])
}

/// The handler as the Function builds it, against the fakes; `policy_url` carries its SAS.
pub fn handler(fake: &FakeAzure, arm_endpoint: &str, policy_url: &str, extra: &[(&str, &str)]) -> Handler {
    let mut vars = env::vars_for(fake, arm_endpoint, policy_url);
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env::build_handler(&vars, None)
}

/// What the fleet looked like before the test, and which resources are owned.
pub struct Fleet {
    pub owned: Vec<String>,
    pub foreign: Vec<String>,
    pub initial: HashMap<String, TagMap>,
}

impl Fleet {
    /// `owned` resources of the cluster in several states of drift (nothing, a missing key, a
    /// wrong value under another casing, unmanaged tags) and `foreign` ones (no ownership tag,
    /// `shared`, another cluster's).
    pub fn create(fake: &FakeAzure, owned: usize, foreign: usize, desired: &[(&str, &str)]) -> Fleet {
        let mut fleet = Fleet { owned: Vec::new(), foreign: Vec::new(), initial: HashMap::new() };
        for i in 0..owned + foreign {
            let id = rid(KINDS[i % KINDS.len()], &format!("r{i:05}"));
            let mut tags: Vec<(String, String)> = Vec::new();
            if i < owned {
                tags.push((OWNER.into(), "owned".into()));
                match i % 4 {
                    // In line already.
                    0 => tags.extend(desired.iter().map(|(k, v)| (k.to_string(), v.to_string()))),
                    // A wrong value, under another casing of the key (ARM keys are case-insensitive).
                    1 => tags.push((desired[0].0.to_ascii_uppercase(), "old".into())),
                    // Unmanaged tags that must survive.
                    2 => tags.push(("keep-me".into(), format!("v{i}"))),
                    _ => {}
                }
                fleet.owned.push(id.clone());
            } else {
                match i % 3 {
                    0 => {}
                    1 => tags.push((OWNER.into(), "shared".into())),
                    _ => tags.push(("kubernetes.io_cluster.other-9zz9z".into(), "owned".into())),
                }
                tags.push(("team".into(), "theirs".into()));
                fleet.foreign.push(id.clone());
            }
            let pairs: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            fake.put_resource(&id, &pairs);
            fleet.initial.insert(id, tags.into_iter().collect());
        }
        fleet
    }

    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.owned.iter().chain(&self.foreign)
    }

    /// Owned resources whose tags differ from `desired` (ARM keys compare case-insensitively).
    pub fn drifted(&self, desired: &TagMap) -> usize {
        self.owned.iter().filter(|id| desired.iter().any(|(k, v)| get(&self.initial[*id], k) != Some(v))).count()
    }

    /// Every wrong value now, and how many owned resources carry the whole policy. An owned
    /// resource for which `must_be_applied` is false may still hold its initial values.
    pub fn check(
        &self,
        fake: &FakeAzure,
        desired: &TagMap,
        must_be_applied: &dyn Fn(&str) -> bool,
    ) -> (Vec<String>, usize) {
        let mut wrong = Vec::new();
        let mut applied = 0;
        for id in &self.owned {
            let now = fake.tags(id).expect("the resource exists");
            let initial = &self.initial[id];
            if desired.iter().all(|(k, v)| get(&now, k) == Some(v)) {
                applied += 1;
            }
            for (k, v) in desired {
                let ok = get(&now, k) == Some(v) || (!must_be_applied(id) && get(&now, k) == get(initial, k));
                if !ok {
                    wrong.push(format!("{id}: {k}={:?}, want {v:?} (initially {:?})", get(&now, k), get(initial, k)));
                }
            }
            for (k, v) in initial.iter().filter(|(k, _)| get(desired, k).is_none()) {
                if now.get(k) != Some(v) {
                    wrong.push(format!("{id}: unmanaged {k}={:?}, was {v:?}", now.get(k)));
                }
            }
        }
        for id in &self.foreign {
            let now = fake.tags(id).expect("the resource exists");
            if now != self.initial[id] {
                wrong.push(format!("{id} is not owned, yet its tags changed: {now:?}"));
            }
        }
        (wrong, applied)
    }
}

/// A tag's value by key, compared case-insensitively as ARM does.
pub fn get<'a>(tags: &'a TagMap, key: &str) -> Option<&'a String> {
    tags.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v)
}

/// Event Grid, as far as delivery goes: at least once, retried on failure, dead-lettered last.
pub struct EventGrid {
    pub max_attempts: u32,
    pending: VecDeque<(String, Value, u32)>,
    /// Every event sent, by id, as sent.
    pub sent: BTreeMap<String, Value>,
    /// Delivered successfully: id → attempts it took.
    pub done: BTreeMap<String, u32>,
    /// Dead-lettered: (id, the payload as it was sent).
    pub dead: Vec<(String, Value)>,
    /// Events published (`sent` may be cleared by a load test to keep its own memory flat).
    pub published: u64,
    pub deliveries: u64,
}

impl EventGrid {
    pub fn new(max_attempts: u32) -> Self {
        EventGrid {
            max_attempts,
            pending: VecDeque::new(),
            sent: BTreeMap::new(),
            done: BTreeMap::new(),
            dead: Vec::new(),
            published: 0,
            deliveries: 0,
        }
    }

    /// Queue one event under a delivery id (a duplicate of an event gets its own id).
    pub fn publish(&mut self, id: &str, event: Value) {
        self.sent.insert(id.to_string(), event.clone());
        self.published += 1;
        self.pending.push_back((id.to_string(), event, 0));
    }

    /// Deliver until every event is delivered or dead-lettered, `concurrency` invocations at a
    /// time. Each round delivers what is pending; failures go to the next round (Event Grid's
    /// backoff, without its minutes of waiting).
    pub async fn drain(&mut self, handler: &Handler, concurrency: usize) {
        while !self.pending.is_empty() {
            let round: Vec<_> = self.pending.drain(..).collect();
            let results: Vec<_> = stream::iter(round)
                .map(|(id, event, attempts)| async move {
                    let status = handler.handle(invocation(&event)).await.status;
                    (id, event, attempts + 1, (200..300).contains(&status))
                })
                .buffer_unordered(concurrency.max(1))
                .collect()
                .await;
            for (id, event, attempts, ok) in results {
                self.deliveries += 1;
                if ok {
                    self.done.insert(id, attempts);
                } else if attempts >= self.max_attempts {
                    self.dead.push((id, event));
                } else {
                    self.pending.push_back((id, event, attempts));
                }
            }
        }
    }

    /// Deliveries beyond the first of each event.
    pub fn redelivered(&self) -> u64 {
        self.deliveries - self.published
    }

    /// Ids neither delivered nor dead-lettered (must be none once drained).
    pub fn lost(&self) -> Vec<&String> {
        self.sent.keys().filter(|id| !self.done.contains_key(*id) && !self.dead.iter().any(|(d, _)| d == *id)).collect()
    }
}

/// The Functions host's invocation of the `drift` function with one Event Grid event.
pub fn invocation(event: &Value) -> Request {
    Request {
        method: "POST".into(),
        path: "/drift".into(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: env::envelope("drift", "eventGridEvent", event.clone()).into_bytes(),
        ..Request::default()
    }
}
