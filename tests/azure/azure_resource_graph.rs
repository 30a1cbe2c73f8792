//! Sweeps through Azure Resource Graph, through the Azure function's handler and
//! its real HTTP clients against the fake ARM, whose Resource Graph endpoint answers in recorded
//! shapes (`tagwarden_testkit::azure::fake`, `graph_api`). What is proven here: 5,000 owned resources across
//! five subscriptions are listed with their tags in five queries, only the drifted ones are read
//! (once, right before their one Merge), and a second sweep writes nothing; Resource Graph's lag
//! can defer a correction but never cause a write to a resource no longer owned; a refused Resource
//! Graph falls back to ARM's listing and says why; its quota and 429s are waited out within the
//! budget, and a quota spent beyond it fails the listing retryably instead of spending the
//! subscription's ARM budget. The calls of the ARM path and the Resource Graph path for the same
//! fleet are printed (`RESOURCE GRAPH:` lines), not asserted as timings.

#![cfg(feature = "azure")]

use crate::support;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::env::{infrastructure, Env, INFRA, OWNER};
use support::fake::{FakeAzure, ARM_AUDIENCE, IDENTITY_HEADER};
use tagwarden::azure::reqwest;

const POLICY: &str = "cluster/infrastructure.json";
const DESIRED: [(&str, &str); 2] = [("team", "platform"), ("env", "prod")];
const KINDS: [&str; 4] = [
    "Microsoft.Compute/virtualMachines",
    "Microsoft.Compute/disks",
    "Microsoft.Network/networkInterfaces",
    "Microsoft.Storage/storageAccounts",
];

fn subscription(n: usize) -> String {
    format!("5ab0c0de-0000-4000-8000-{n:012}")
}

fn statuses(body: &Value) -> Value {
    body["ReturnValue"]["by_status"].clone()
}

/// A fleet over `subs` subscriptions: in each, the cluster's resource group (owned, in line) and
/// `per_sub - 1` owned resources, one in ten drifted (a wrong value under another casing of the
/// key, or a missing key), the rest in line; beside them, per subscription, `foreign` resources of
/// no cluster, `shared` ones and another cluster's. Returns (owned, drifted, not owned).
struct Fleet {
    owned: Vec<String>,
    drifted: Vec<String>,
    others: Vec<String>,
}

fn fleet(fake: &FakeAzure, subs: usize, per_sub: usize, foreign: usize) -> Fleet {
    let mut f = Fleet { owned: Vec::new(), drifted: Vec::new(), others: Vec::new() };
    fn in_line(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut t = vec![(OWNER, "owned"), DESIRED[0], DESIRED[1]];
        t.extend_from_slice(extra);
        t
    }
    for s in 0..subs {
        let rg = format!("/subscriptions/{}/resourceGroups/{INFRA}-rg", subscription(s));
        fake.put_resource(&rg, &in_line(&[]));
        f.owned.push(rg.clone());
        for i in 0..per_sub - 1 {
            let id = format!("{rg}/providers/{}/r{s}-{i:05}", KINDS[i % KINDS.len()]);
            let n = s * per_sub + i;
            if n % 20 == 3 {
                // ARM keys are case-insensitive: `TEAM=old` is `team` with a wrong value.
                fake.put_resource(&id, &[(OWNER, "owned"), ("TEAM", "old"), DESIRED[1]]);
                f.drifted.push(id.clone());
            } else if n % 20 == 13 {
                fake.put_resource(&id, &[(OWNER, "owned"), DESIRED[0], ("keep-me", "yes")]);
                f.drifted.push(id.clone());
            } else {
                fake.put_resource(&id, &in_line(&[("keep-me", "yes")]));
            }
            f.owned.push(id);
        }
        for i in 0..foreign {
            let id = format!("{rg}/providers/Microsoft.Compute/disks/foreign-{s}-{i}");
            match i % 3 {
                0 => fake.put_resource(&id, &[("team", "theirs")]),
                1 => fake.put_resource(&id, &[(OWNER, "shared"), ("team", "theirs")]),
                _ => fake.put_resource(&id, &[("kubernetes.io_cluster.other-9zz9z", "owned"), ("team", "theirs")]),
            }
            f.others.push(id);
        }
    }
    f
}

async fn env_over(subs: usize) -> Env {
    let scopes: Vec<String> = (0..subs).map(|s| format!("/subscriptions/{}", subscription(s))).collect();
    Env::with(POLICY, &[(POLICY, &infrastructure(&DESIRED, &[]))], &[("TAGWARDEN_SWEEP_SCOPES", &scopes.join(","))])
        .await
}

/// The timer's sweep as the host runs it (in parts where it spans several subscriptions:
/// `support::env::timer_sweep`), its status and body, and the handler's calls during it.
async fn sweep(env: &Env) -> (u16, Value, HashMap<String, u64>) {
    env.handler.calls.reset();
    let (status, body) = support::env::timer_sweep(&env.handler).await;
    (status, body, env.handler.calls.snapshot().into_iter().collect())
}

fn calls_of(calls: &HashMap<String, u64>, op: &str) -> u64 {
    calls.get(op).copied().unwrap_or_default()
}

/// The resource-specific calls of a sweep (the listing, reads, writes), beside the policy's.
fn resource_calls(calls: &HashMap<String, u64>) -> u64 {
    calls.iter().filter(|(op, _)| op.starts_with("arm:") || op.starts_with("resourcegraph:")).map(|(_, n)| n).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sweep_of_5000_owned_resources_lists_them_in_5_queries_and_reads_only_the_drifted() {
    let (subs, per_sub) = (5, 1000);
    let env = env_over(subs).await;
    let f = fleet(&env.fake, subs, per_sub, 60);
    let (owned, drifted) = (f.owned.len() as u64, f.drifted.len() as u64);
    assert_eq!((owned, drifted), (5000, 500));

    let started = Instant::now();
    let (status, body, calls) = sweep(&env).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"applied": drifted, "unchanged": owned - drifted}), "{body:#}");
    assert_eq!(body["ReturnValue"]["listing_fallbacks"], json!([]), "{body:#}");
    // Listed and read: ceil(5000 / 1000) queries, no ARM listing, no read of a resource in line.
    assert_eq!(env.fake.count("POST graph"), 5, "{calls:?}");
    assert_eq!(env.fake.count("GET list"), 0);
    // Each drifted resource: one re-read through the Tags API, then one Merge.
    assert_eq!((env.fake.count("GET tags"), env.fake.count("PATCH tags")), (500, 500), "{calls:?}");
    let log = env.fake.log();
    let mut read_at: HashMap<String, usize> = HashMap::new();
    for (at, l) in log.iter().enumerate().filter(|(_, l)| l.api == "arm") {
        let path = l.path.to_ascii_lowercase();
        match l.method.as_str() {
            "GET" if path.ends_with("/tags/default") => {
                read_at.insert(path, at);
            }
            "PATCH" => assert!(read_at.get(&path).is_some_and(|r| *r < at), "{path} was written without a re-read"),
            _ => {}
        }
    }
    for id in &f.drifted {
        let tags = env.fake.tags(id).expect("resource");
        let get = |k: &str| tags.iter().find(|(t, _)| t.eq_ignore_ascii_case(k)).map(|(_, v)| v.as_str());
        assert_eq!((get("team"), get("env")), (Some("platform"), Some("prod")), "{id}: {tags:?}");
        assert!(get("keep-me").is_some() || tags.contains_key("TEAM"), "{id}: nothing removed: {tags:?}");
    }
    for id in &f.others {
        assert_eq!(env.fake.tags(id).expect("foreign")["team"], "theirs", "{id} was never written");
    }
    let after = resource_calls(&calls);

    // In line now: the second sweep lists again and reads and writes nothing.
    env.fake.clear_log();
    let (status, body, again) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"unchanged": owned}));
    assert_eq!(
        (env.fake.count("POST graph"), env.fake.count("GET tags"), env.fake.count("PATCH tags")),
        (5, 0, 0),
        "{again:?}"
    );

    // The same fleet swept the way it was before Resource Graph: ARM's listing (1,000 a page,
    // assumed), then a read of every owned resource.
    let before_env = env_over(subs).await;
    fleet(&before_env.fake, subs, per_sub, 60);
    before_env.fake.list_page(1000);
    let mut handler = before_env.cold(None);
    handler.engine.adapter.resource_graph = false;
    handler.calls.reset();
    let started = Instant::now();
    let (status, body) = support::env::timer_sweep(&handler).await;
    let took_before = started.elapsed();
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"applied": drifted, "unchanged": owned - drifted}));
    let before_calls: HashMap<String, u64> = handler.calls.snapshot().into_iter().collect();
    let before = resource_calls(&before_calls);
    let listing_before = calls_of(&before_calls, "arm:ListResources") + calls_of(&before_calls, "arm:GetTags");
    let listing_after = calls_of(&calls, "resourcegraph:Resources");
    println!(
        "RESOURCE GRAPH: owned={owned} drifted={drifted} subscriptions={subs} | before (ARM listing): calls={before} \
         ({:.4}/owned) list+read={listing_before} ({:.4}/owned) merges={} took={:.1}s | after (Resource Graph): \
         calls={after} ({:.4}/owned) queries={listing_after} ({:.4}/owned) re-reads={} merges={} took={:.1}s | \
         second sweep: calls={} merges={}",
        before as f64 / owned as f64,
        listing_before as f64 / owned as f64,
        calls_of(&before_calls, "arm:MergeTags"),
        took_before.as_secs_f64(),
        after as f64 / owned as f64,
        listing_after as f64 / owned as f64,
        calls_of(&calls, "arm:GetTags"),
        calls_of(&calls, "arm:MergeTags"),
        took.as_secs_f64(),
        resource_calls(&again),
        calls_of(&again, "arm:MergeTags"),
    );
    println!("RESOURCE GRAPH: before {before_calls:?}");
    println!("RESOURCE GRAPH: after {calls:?}");
    println!("RESOURCE GRAPH: second {again:?}");
    assert!(listing_after <= 5 && listing_before >= owned, "{listing_before} → {listing_after}");
}

#[tokio::test]
async fn a_resource_disowned_after_the_snapshot_is_not_written_and_a_stale_in_line_view_defers() {
    let env = env_over(1).await;
    let f = fleet(&env.fake, 1, 20, 0);
    // Resource Graph indexed the fleet; then ARM changed: one drifted resource lost its ownership
    // tag (someone handed it over), one resource in line drifted.
    env.fake.freeze_graph();
    let disowned = &f.drifted[0];
    env.fake.put_resource(disowned, &[("TEAM", "old"), ("env", "prod")]);
    let later = f.owned.iter().find(|id| !f.drifted.contains(id) && id.contains("/providers/")).expect("in line");
    env.fake.edit_tags(later, &[("team", "changed-since")]);

    let (status, body, _) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    // Both drifted in the snapshot are re-read; only the one still owned is written.
    assert_eq!((env.fake.count("GET tags"), env.fake.count("PATCH tags")), (2, 1), "{:?}", env.fake.arm_calls());
    assert_eq!(statuses(&body), json!({"applied": 1, "not-owned": 1, "unchanged": 18}), "{body:#}");
    let tags = env.fake.tags(disowned).expect("disowned");
    assert_eq!((tags.get("TEAM").map(String::as_str), tags.len()), (Some("old"), 2), "never written: {tags:?}");
    // The drift Resource Graph has not seen yet waits for its event or the next sweep (a Merge
    // never removes a tag, so the stale view wrote nothing wrong).
    assert_eq!(env.fake.tags(later).expect("later")["team"], "changed-since");

    env.fake.thaw_graph();
    env.fake.clear_log();
    let (status, body, _) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(env.fake.tags(later).expect("later")["team"], "platform", "corrected once Resource Graph saw it");
    assert_eq!((env.fake.count("GET tags"), env.fake.count("PATCH tags")), (1, 1));
    assert!(!env.fake.tags(disowned).expect("disowned").contains_key("team"));
}

#[tokio::test]
async fn a_refused_resource_graph_falls_back_to_the_arm_listing_and_says_why() {
    // Azure Stack Hub has no Resource Graph: 404 for the provider's resource type.
    let env = env_over(2).await;
    let f = fleet(&env.fake, 2, 10, 3);
    env.fake.refuse_graph(404, "InvalidResourceType");
    let (status, body, calls) = sweep(&env).await;
    assert_eq!(status, 200, "everything was listed, so the sweep succeeded: {body:#}");
    let drifted = f.drifted.len() as u64;
    assert_eq!(statuses(&body), json!({"applied": drifted, "unchanged": f.owned.len() as u64 - drifted}));
    for id in &f.drifted {
        assert_eq!(env.fake.tags(id).expect("resource")["env"], "prod", "{id}");
    }
    // Each of the two parts (subscriptions): one refused query, then ARM's listing and a read of
    // every owned resource; each part says why.
    assert_eq!(env.fake.count("POST graph"), 2, "{calls:?}");
    assert!(env.fake.count("GET list") >= 2, "{:?}", env.fake.arm_calls());
    assert_eq!(env.fake.count("GET tags"), f.owned.len());
    let why = body["ReturnValue"]["listing_fallbacks"].as_array().cloned().unwrap_or_default();
    assert_eq!(why.len(), 2, "{body:#}");
    let why = why[0].as_str().unwrap_or_default();
    assert!(why.contains("InvalidResourceType") && why.contains("Resources - List") && why.contains(INFRA), "{why}");
    assert!(body["Logs"].to_string().contains("listing fell back"), "{body:#}");
    // Counted, as a metric beside the listing failures.
    let posted: String = env.fake.posted_metrics().into_iter().map(|(_, b)| b).collect();
    assert!(posted.contains("\"ListingFallbacks\""), "{posted}");
}

#[tokio::test]
async fn the_cli_sweep_falls_back_and_says_why() {
    let fake = FakeAzure::start(None);
    let f = fleet(&fake, 1, 5, 1);
    // A query the cloud does not take (a sovereign cloud's older Resource Graph).
    fake.refuse_graph(400, "BadRequest");
    let http = reqwest::Client::new();
    let container = support::azurite::container(&http).await;
    support::azurite::put_blob(&http, &container, POLICY, &infrastructure(&DESIRED, &[])).await;
    let policy = format!("{container}/{POLICY}?{}", support::azurite::account_sas());
    let url = format!("{}?resource={ARM_AUDIENCE}&api-version=2019-08-01", fake.identity);
    let resp = http.get(url).header("X-IDENTITY-HEADER", IDENTITY_HEADER).send().await.expect("token");
    let token: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
    let scope = format!("/subscriptions/{}", subscription(0));
    let run = |json: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"));
        cmd.args(["sweep", "--policy", &policy, "--scope", &scope, "--arm-endpoint", &fake.arm, "--dry-run"]);
        if json {
            cmd.arg("--json");
        }
        cmd.env("TAGWARDEN_ARM_TOKEN", token["access_token"].as_str().expect("token"));
        cmd.output().expect("run tagwarden")
    };
    let out = run(true);
    let s: Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(s["drifted"].as_u64(), Some(f.drifted.len() as u64), "{s:#}");
    let why = s["listing_fallbacks"][0].as_str().unwrap_or_default();
    assert!(why.contains("BadRequest") && why.contains("Resources - List"), "{s:#}");
    let text = String::from_utf8_lossy(&run(false).stdout).into_owned();
    assert!(text.contains("fell back     Resource Graph refused"), "{text}");
}

#[tokio::test]
async fn throttling_is_waited_out_within_the_budget_and_a_spent_quota_beyond_it_fails_retryably() {
    // 2,500 owned resources: three pages; the quota allows two queries every two seconds, and the
    // first query is throttled outright.
    let env = env_over(1).await;
    let f = fleet(&env.fake, 1, 2500, 0);
    env.fake.graph_quota(2, Duration::from_secs(2));
    env.fake.throttle_graph(1);
    let started = Instant::now();
    let (status, body, calls) = sweep(&env).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body)["applied"].as_u64(), Some(f.drifted.len() as u64), "{body:#}");
    let answers: Vec<u16> =
        env.fake.log().iter().filter(|l| l.path.contains("ResourceGraph")).map(|l| l.status).collect();
    // The 429, then three pages; none sent into a spent quota.
    assert_eq!(answers, [429, 200, 200, 200], "{calls:?}");
    assert!(took >= Duration::from_secs(2), "the quota's reset was waited for: {took:?}");
    println!("RESOURCE GRAPH THROTTLED: answers={answers:?} took={:.1}s calls={calls:?}", took.as_secs_f64());

    // A quota that resets only after the wait budget: the listing fails, retryably, and nothing is
    // listed through ARM instead (its read budget is the subscription owner's).
    env.fake.graph_quota(1, Duration::from_secs(120));
    env.fake.clear_log();
    let (status, body, _) = sweep(&env).await;
    assert_eq!(status, 500, "retried by the next run: {body:#}");
    assert_eq!(env.fake.count("POST graph"), 1);
    assert_eq!((env.fake.count("GET list"), env.fake.count("GET tags"), env.fake.count("PATCH tags")), (0, 0, 0));
    let logs = body["Logs"].to_string();
    assert!(logs.contains("QuotaExhausted") && logs.contains("resourcegraph:Resources"), "{logs}");
}

/// The fake refuses what Resource Graph refuses, in its shapes, with the quota on every answer.
#[tokio::test]
async fn the_fake_resource_graph_keeps_the_contract() {
    let fake = FakeAzure::start(None);
    fleet(&fake, 1, 3, 0);
    let http = reqwest::Client::new();
    let url = format!("{}?resource={ARM_AUDIENCE}&api-version=2019-08-01", fake.identity);
    let resp = http.get(url).header("X-IDENTITY-HEADER", IDENTITY_HEADER).send().await.expect("token");
    let token: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
    let token = token["access_token"].as_str().expect("token").to_string();
    let scopes = tagwarden::azure::resource_graph::Scopes::parse(&[format!("/subscriptions/{}", subscription(0))])
        .expect("scope");
    let query = tagwarden::azure::resource_graph::owned_query(&scopes, &[OWNER.to_string()]);
    let post = |version: Option<&str>, body: Value| {
        let mut url = format!("{}/providers/Microsoft.ResourceGraph/resources", fake.arm);
        if let Some(v) = version {
            url.push_str(&format!("?api-version={v}"));
        }
        http.post(url).bearer_auth(&token).header("content-type", "application/json").body(body.to_string()).send()
    };
    let body = |top: u64, q: &str| json!({"subscriptions": [subscription(0)], "query": q, "options": {"$top": top, "resultFormat": "objectArray"}});

    let ok = post(Some("2022-10-01"), body(2, &query)).await.expect("query");
    assert_eq!(ok.status().as_u16(), 200);
    assert!(
        ok.headers().contains_key("x-ms-user-quota-remaining")
            && ok.headers().contains_key("x-ms-user-quota-resets-after")
    );
    let page: Value = serde_json::from_str(&ok.text().await.expect("body")).expect("JSON");
    assert_eq!((page["totalRecords"].as_u64(), page["count"].as_u64()), (Some(3), Some(2)), "{page:#}");
    assert_eq!((page["resultTruncated"].as_str(), page["facets"].clone()), (Some("false"), json!([])));
    let token_ = page["$skipToken"].as_str().expect("a next page").to_string();
    let mut next = body(1000, &query);
    next["options"]["$skipToken"] = json!(token_);
    let last = post(Some("2022-10-01"), next).await.expect("next").text().await.expect("body");
    let last: Value = serde_json::from_str(&last).expect("JSON");
    assert_eq!((last["count"].as_u64(), last.get("$skipToken")), (Some(1), None), "{last:#}");

    // A management group's request: the query lists all of the group's scope; one scope kind a request.
    fake.management_group("Fleet-MG", &[subscription(0)]);
    let mg = tagwarden::azure::resource_graph::Scopes::parse(&[
        "/providers/Microsoft.Management/managementGroups/Fleet-MG".to_string(),
    ])
    .expect("scope");
    let mg_query = tagwarden::azure::resource_graph::owned_query(&mg, &[OWNER.to_string()]);
    let in_group = json!({"managementGroups": ["fleet-mg"], "query": mg_query, "options": {"$top": 1000}});
    let page = post(Some("2022-10-01"), in_group).await.expect("mg query").text().await.expect("body");
    let page: Value = serde_json::from_str(&page).expect("JSON");
    assert_eq!(page["count"].as_u64(), Some(3), "{page:#}");
    let both = json!({"subscriptions": [subscription(0)], "managementGroups": ["fleet-mg"], "query": mg_query});
    let unknown = json!({"managementGroups": ["nope"], "query": mg_query});

    for (version, b, status, code) in [
        (Some("2022-10-01"), both, 400, "BadRequest"),
        (Some("2022-10-01"), unknown, 400, "BadRequest"),
        (Some("2022-10-01"), body(1001, &query), 400, "BadRequest"),
        (None, body(10, &query), 400, "MissingApiVersionParameter"),
        (Some("2022-10-01"), body(10, "Resources | project id, name"), 400, "BadRequest"),
    ] {
        let resp = post(version, b).await.expect("refused");
        assert_eq!(resp.status().as_u16(), status);
        assert!(resp.headers().contains_key("x-ms-user-quota-remaining"), "the quota on an error too");
        let e: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
        assert_eq!(e["error"]["code"], code, "{e:#}");
    }
}

const MG: &str = "/providers/Microsoft.Management/managementGroups/fleet-mg";
const SET: [&str; 2] = ["mgc-a-1x2y3", "mgc-b-4z5w6"];

/// The fleet: `subs` subscriptions under one management group, in each a resource group per
/// cluster of [`SET`] holding `per_cluster` owned resources (the group included), one in ten
/// drifted; beside them, per subscription, one resource of no cluster.
fn set_fleet(fake: &FakeAzure, subs: usize, per_cluster: usize) -> Fleet {
    let mut f = Fleet { owned: Vec::new(), drifted: Vec::new(), others: Vec::new() };
    fake.management_group("Fleet-MG", &(0..subs).map(subscription).collect::<Vec<_>>());
    for s in 0..subs {
        for (c, infra) in SET.iter().enumerate() {
            let owner = format!("kubernetes.io_cluster.{infra}");
            let rg = format!("/subscriptions/{}/resourceGroups/{infra}-rg", subscription(s));
            fake.put_resource(&rg, &[(owner.as_str(), "owned"), DESIRED[0], DESIRED[1]]);
            f.owned.push(rg.clone());
            for i in 0..per_cluster - 1 {
                let id = format!("{rg}/providers/{}/r{s}-{c}-{i:05}", KINDS[i % KINDS.len()]);
                if i % 10 == 3 {
                    fake.put_resource(&id, &[(owner.as_str(), "owned"), ("team", "old")]);
                    f.drifted.push(id.clone());
                } else {
                    fake.put_resource(&id, &[(owner.as_str(), "owned"), DESIRED[0], DESIRED[1]]);
                }
                f.owned.push(id);
            }
        }
        let foreign =
            format!("/subscriptions/{}/resourceGroups/other/providers/Microsoft.Compute/disks/d", subscription(s));
        fake.put_resource(&foreign, &[("team", "theirs")]);
        f.others.push(foreign);
    }
    f
}

fn set_docs() -> Vec<(String, String)> {
    SET.iter()
        .map(|id| {
            let doc = format!("version: 1\ncloud: azure\ninfraID: {id}\ntags: {{team: platform, env: prod}}\n");
            (format!("clusters/{id}/10-cluster.yaml"), doc)
        })
        .collect()
}

/// Resource Graph queries the fake answered 200: the listing's cost. A query refused with 429
/// (the fake keeps Resource Graph's documented quota, 15 in 5 s, which back-to-back sweeps spend)
/// is retried after the reset it names, and is not a page.
fn answered_queries(fake: &FakeAzure) -> usize {
    fake.log()
        .iter()
        .filter(|l| l.path.to_ascii_lowercase().ends_with("/microsoft.resourcegraph/resources") && l.status == 200)
        .count()
}

/// The most Merges any subscription received in one second (the fake's answer times).
fn peak_writes_per_second(fake: &FakeAzure) -> usize {
    let mut by_sub: HashMap<String, Vec<Instant>> = HashMap::new();
    for l in fake.log().iter().filter(|l| l.api == "arm" && l.method == "PATCH") {
        let sub = l.path.split('/').nth(2).unwrap_or_default().to_ascii_lowercase();
        by_sub.entry(sub).or_default().push(l.at);
    }
    let mut peak = 0;
    for at in by_sub.values_mut() {
        at.sort();
        for (i, t) in at.iter().enumerate() {
            peak = peak.max(at[i..].iter().take_while(|u| u.duration_since(*t) < Duration::from_secs(1)).count());
        }
    }
    peak
}

/// The done-when: a management group of 5 subscriptions, a cluster set of 2 clusters with
/// 500 owned resources each in every subscription (5,000), 10 % drifted. The function's timer
/// sends the sweep on in 5 parts, one queue message per subscription (item 3); the parts, swept
/// at once, list and read in 5 Resource Graph queries (one per subscription for the whole set),
/// write exactly the drifted ones, once each, at most half of each subscription's ARM write bucket
/// in any second, and each cluster's status report holds every part's failures and when each part
/// was swept; the second sweep writes nothing; the policy-change queue's sweep (whole, through the
/// management group) lists the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_management_group_sweep_of_a_cluster_set_lists_5000_in_5_queries_and_writes_only_the_drifted() {
    let (subs, per_cluster) = (5, 500);
    let docs = set_docs();
    let docs: Vec<(&str, &str)> = docs.iter().map(|(n, d)| (n.as_str(), d.as_str())).collect();
    let env =
        Env::with("clusters/*/", &docs, &[("TAGWARDEN_CLUSTERS", &SET.join(",")), ("TAGWARDEN_SWEEP_SCOPES", MG)])
            .await;
    let f = set_fleet(&env.fake, subs, per_cluster);
    let (owned, drifted) = (f.owned.len() as u64, f.drifted.len() as u64);
    assert_eq!((owned, drifted), (5000, 500));
    // A ReadOnly lock on one drifted resource in the first subscription and one in the fourth:
    // each part's sweep fails its own, and the cluster's report must keep both.
    let locked: Vec<&String> = [0, 3]
        .iter()
        .map(|s| f.drifted.iter().find(|id| id.contains(&subscription(*s)) && id.contains(SET[0])).expect("drifted"))
        .collect();
    for id in &locked {
        env.fake.lock(id);
    }

    let started = Instant::now();
    let (status, body, calls) = sweep(&env).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{body:#}");
    let parts: Vec<String> =
        (0..subs).map(|s| format!("/subscriptions/{}", subscription(s).to_ascii_lowercase())).collect();
    let mut sent: Vec<String> = body["ReturnValue"]["parts"]
        .as_array()
        .expect("parts")
        .iter()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    sent.sort();
    let mut expected_parts = parts.clone();
    expected_parts.sort();
    assert_eq!(sent, expected_parts, "one part per subscription under the group");
    let n_parts = sent.len();
    assert_eq!(statuses(&body), json!({"applied": drifted - 2, "failed": 2, "unchanged": owned - drifted}), "{body:#}");
    assert_eq!(body["ReturnValue"]["listing_fallbacks"], json!([]), "{body:#}");
    assert_eq!(answered_queries(&env.fake), 5, "one query per subscription for both clusters: {calls:?}");
    let mut graph_scopes: Vec<Value> = env
        .fake
        .log()
        .iter()
        .filter(|l| l.path.to_ascii_lowercase().ends_with("/microsoft.resourcegraph/resources"))
        .map(|l| serde_json::from_str::<Value>(&l.body).map(|b| b["subscriptions"].clone()).unwrap_or_default())
        .collect();
    graph_scopes.sort_by_key(|v| v.to_string());
    let one_each: Vec<Value> =
        expected_parts.iter().map(|p| json!([p.trim_start_matches("/subscriptions/")])).collect();
    assert_eq!(graph_scopes, one_each, "each part's query names its subscription alone");
    // The timer's Get Descendants, then each part's check that its subscription is under the group.
    assert_eq!((env.fake.count("GET list"), env.fake.count("GET descendants")), (0, 1 + subs));
    assert_eq!((env.fake.count("GET tags"), env.fake.count("PATCH tags")), (500, 500), "{calls:?}");
    // Each cluster's report: every part named, and both parts' failures kept, whatever the order
    // the parts finished in (each laid its report over the others' with If-Match).
    for infra in SET {
        let text =
            support::azurite::get_blob(&env.http, &env.container, &format!("clusters/{infra}/tagwarden-status.json"))
                .await
                .expect("a status report");
        let report: Value = serde_json::from_str(&text).expect("JSON");
        let mut named: Vec<String> = report["parts"].as_object().expect("parts").keys().cloned().collect();
        named.sort();
        assert_eq!(named, expected_parts, "{report:#}");
        let failed: Vec<&str> =
            report["failures"].as_array().expect("failures").iter().filter_map(|f| f["resource"].as_str()).collect();
        let want: Vec<&str> = if infra == SET[0] { locked.iter().map(|s| s.as_str()).collect() } else { Vec::new() };
        let mut failed_sorted = failed.clone();
        failed_sorted.sort();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(failed_sorted, want_sorted, "{infra}: {report:#}");
    }
    let peak = peak_writes_per_second(&env.fake);
    // Half of ARM's subscription write bucket (200, refilled at 10/s): at most 100 + 5 in a second.
    assert!(peak <= 105, "{peak} Merges in one second in one subscription");
    for id in f.drifted.iter().filter(|id| !locked.contains(id)) {
        assert_eq!(env.fake.tags(id).expect("resource").get("team").map(String::as_str), Some("platform"), "{id}");
    }
    for id in &f.others {
        assert_eq!(env.fake.tags(id).expect("foreign")["team"], "theirs", "{id} was never written");
    }

    // The locks lifted: the next sweep's parts write exactly those two, and the report is clean.
    env.fake.unlock_all();
    env.fake.clear_log();
    let (status, body, again) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"applied": 2, "unchanged": owned - 2}));
    assert_eq!((answered_queries(&env.fake), env.fake.count("PATCH tags")), (5, 2), "{again:?}");
    let text =
        support::azurite::get_blob(&env.http, &env.container, &format!("clusters/{}/tagwarden-status.json", SET[0]))
            .await
            .expect("a status report");
    let report: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(report["failures"], json!([]), "{report:#}");
    env.fake.clear_log();
    let (status, body, again) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"unchanged": owned}));
    assert_eq!((answered_queries(&env.fake), env.fake.count("PATCH tags")), (5, 0), "{again:?}");

    // A policy change: the queue's sweep of the changed cluster lists the same way (its 2,500 in 3
    // queries) and writes exactly what drifted meanwhile. (A new version whose desired tags are
    // unchanged, so that what it writes is the drift alone.)
    for id in f.drifted.iter().filter(|id| id.contains(SET[0])) {
        env.fake.put_resource(id, &[(format!("kubernetes.io_cluster.{}", SET[0]).as_str(), "owned"), ("team", "old")]);
    }
    env.fake.clear_log();
    let changed = format!("# a new version\n{}", docs[0].1);
    env.publish(docs[0].0, &changed).await;
    let (status, body) =
        env.invoke("sweep-queue", "message", support::env::queue_message(&support::env::blob_created(docs[0].0))).await;
    assert_eq!(status, 200, "{body:#}");
    // Three pages answered. The sweeps above spent the fake's Resource Graph quota (15 queries in
    // 5 s, as Resource Graph documents), so a first query may be answered 429 and retried after
    // the reset it names: a refusal, not a listing.
    assert_eq!(answered_queries(&env.fake), 3, "{body:#}");
    assert_eq!(env.fake.count("PATCH tags") as u64, drifted / 2, "cluster {}'s drifted resources, once", SET[0]);
    let peak_change = peak_writes_per_second(&env.fake);
    assert!(peak_change <= 105, "{peak_change}");
    println!(
        "MANAGEMENT GROUP: subscriptions={subs} parts={n_parts} (swept side by side, one queue message each) clusters={} owned={owned} drifted={drifted} | first sweep: queries={} \
         ({:.4}/owned) re-reads={} merges={} calls={} peak merges/s/subscription={peak} took={:.1}s | second sweep: \
         queries={} merges={} | policy change of one cluster ({} owned): queries={} merges={} peak merges/s/subscription={peak_change}",
        SET.len(),
        calls_of(&calls, "resourcegraph:Resources"),
        calls_of(&calls, "resourcegraph:Resources") as f64 / owned as f64,
        calls_of(&calls, "arm:GetTags"),
        calls_of(&calls, "arm:MergeTags"),
        resource_calls(&calls),
        took.as_secs_f64(),
        calls_of(&again, "resourcegraph:Resources"),
        calls_of(&again, "arm:MergeTags"),
        owned / 2,
        answered_queries(&env.fake),
        env.fake.count("PATCH tags"),
    );
}

/// A part is never wider than the deployment's scopes: a subscription named by its resource groups
/// alone is swept in those groups alone, and a part message naming a subscription outside the
/// scopes is refused (the host parks it in the poison queue) before any listing or write.
#[tokio::test]
async fn a_part_stays_within_the_scopes_and_a_part_outside_them_is_refused() {
    let (s0, s1) = (subscription(0), subscription(1));
    let in_scope = format!("/subscriptions/{s0}/resourceGroups/rg-a");
    let scopes = format!("{in_scope},/subscriptions/{s1}");
    let env =
        Env::with(POLICY, &[(POLICY, &infrastructure(&DESIRED, &[]))], &[("TAGWARDEN_SWEEP_SCOPES", &scopes)]).await;
    let drifted = [(OWNER, "owned"), ("team", "old")];
    let a = format!("{in_scope}/providers/Microsoft.Compute/disks/a");
    let outside = format!("/subscriptions/{s0}/resourceGroups/rg-b/providers/Microsoft.Compute/disks/b");
    let other_sub = format!("/subscriptions/{s1}/resourceGroups/rg-c/providers/Microsoft.Compute/disks/c");
    for id in [&a, &outside, &other_sub] {
        env.fake.put_resource(id, &drifted);
    }

    let (status, body, _) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["ReturnValue"]["parts"].as_array().map(Vec::len), Some(2), "{body:#}");
    assert_eq!(statuses(&body), json!({"applied": 2}), "{body:#}");
    let team = |id: &str| env.fake.tags(id).expect("resource")["team"].clone();
    assert_eq!((team(&a), team(&other_sub)), ("platform".to_string(), "platform".to_string()));
    assert_eq!(team(&outside), "old", "rg-b is not a scope: never written");

    env.fake.clear_log();
    let foreign = json!({"tagwarden": "sweep", "part": format!("/subscriptions/{}", subscription(9))});
    let (status, body) = env.invoke("sweep-queue", "message", Value::String(foreign.to_string())).await;
    assert_eq!(status, 500, "{body:#}");
    assert!(body.to_string().contains("not within the deployment's sweep scopes"), "{body:#}");
    assert!(env.fake.log().iter().all(|l| l.api != "arm"), "no listing, no write");
}

/// The CLI sweeps a management group's cluster set the same way; where Resource Graph is refused,
/// ARM walks the group's subscriptions (`descendants`) and lists each, and says so.
#[tokio::test]
async fn the_cli_sweeps_a_management_group_and_falls_back_through_its_subscriptions() {
    let fake = FakeAzure::start(None);
    let f = set_fleet(&fake, 3, 20);
    let http = reqwest::Client::new();
    let container = support::azurite::container(&http).await;
    for (name, doc) in set_docs() {
        support::azurite::put_blob(&http, &container, &name, &doc).await;
    }
    let policy = format!("{container}/clusters/*/?{}", support::azurite::account_sas());
    let url = format!("{}?resource={ARM_AUDIENCE}&api-version=2019-08-01", fake.identity);
    let resp = http.get(url).header("X-IDENTITY-HEADER", IDENTITY_HEADER).send().await.expect("token");
    let token: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
    let run = |dry: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tagwarden"));
        cmd.args(["sweep", "--policy", &policy, "--scope", MG, "--arm-endpoint", &fake.arm, "--json"]);
        cmd.args(SET.iter().flat_map(|c| ["--cluster", c]));
        if dry {
            cmd.arg("--dry-run");
        }
        cmd.env("TAGWARDEN_ARM_TOKEN", token["access_token"].as_str().expect("token"));
        cmd.output().expect("run tagwarden")
    };
    let out = run(true);
    let s: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(s["drifted"].as_u64(), Some(f.drifted.len() as u64), "{s:#}");
    assert_eq!((fake.count("POST graph"), fake.count("GET list")), (1, 0), "one query: 120 owned");

    fake.clear_log();
    fake.refuse_graph(400, "BadRequest");
    let out = run(false);
    let s: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let why = s["listing_fallbacks"].to_string();
    assert!(why.contains("Resource Graph refused") && why.contains("Resources - List"), "{s:#}");
    // Each cluster: the group's subscriptions, then each subscription's resources and groups.
    assert_eq!(fake.count("GET descendants"), SET.len(), "{s:#}");
    assert_eq!(fake.count("PATCH tags"), f.drifted.len(), "{s:#}");
    for id in &f.drifted {
        assert_eq!(fake.tags(id).expect("resource").get("team").map(String::as_str), Some("platform"), "{id}");
    }
    assert_eq!(fake.tags(&f.others[0]).expect("foreign")["team"], "theirs");
}

/// A Cluster API (CAPZ) workload cluster owns by CAPZ's key on what CAPZ creates and by
/// the cloud provider's `kubernetes.io_cluster_<name>` on what the workload cluster creates; the
/// sweep lists both in one Resource Graph query (and, refused, both through ARM), and writes
/// neither OpenShift's spelling of the key (`kubernetes.io_cluster.<name>`, another kind's) nor
/// another CAPZ cluster's resources.
#[tokio::test]
async fn a_cluster_api_cluster_is_swept_by_both_its_keys() {
    let doc = "version: 1\ncloud: azure\nclusterKind: ClusterAPI\ninfraID: z-1\ntags:\n  team: platform\n";
    let scope = format!("/subscriptions/{}", subscription(0));
    for refused in [false, true] {
        let env = Env::with(POLICY, &[(POLICY, doc)], &[("TAGWARDEN_SWEEP_SCOPES", &scope)]).await;
        let rg = format!("{scope}/resourceGroups/z-1-rg/providers");
        let id = |name: &str| format!("{rg}/Microsoft.Compute/disks/{name}");
        env.fake.put_resource(
            &id("by-capz"),
            &[("sigs.k8s.io_cluster-api-provider-azure_cluster_z-1", "owned"), ("team", "x")],
        );
        env.fake.put_resource(&id("by-ccm"), &[("kubernetes.io_cluster_z-1", "owned"), ("team", "x")]);
        env.fake.put_resource(
            &id("both"),
            &[
                ("sigs.k8s.io_cluster-api-provider-azure_cluster_z-1", "owned"),
                ("kubernetes.io_cluster_z-1", "owned"),
                ("team", "x"),
            ],
        );
        env.fake.put_resource(&id("openshift-spelling"), &[("kubernetes.io_cluster.z-1", "owned"), ("team", "x")]);
        env.fake.put_resource(
            &id("other"),
            &[("sigs.k8s.io_cluster-api-provider-azure_cluster_z-2", "owned"), ("team", "x")],
        );
        if refused {
            env.fake.refuse_graph(404, "InvalidResourceType");
        }
        let (status, body, _) = sweep(&env).await;
        assert_eq!(status, 200, "{body:#}");
        assert_eq!(statuses(&body), json!({"applied": 3}), "refused graph: {refused}: {body:#}");
        for name in ["by-capz", "by-ccm", "both"] {
            assert_eq!(env.fake.tags(&id(name)).expect("resource")["team"], "platform", "{name}");
        }
        for name in ["openshift-spelling", "other"] {
            assert_eq!(env.fake.tags(&id(name)).expect("resource")["team"], "x", "{name} is not z-1's");
        }
        assert_eq!(env.fake.count("PATCH tags"), 3, "one Merge each, the resource with both keys once");
        if !refused {
            assert_eq!(env.fake.count("POST graph"), 1, "both keys in one query");
        }
    }
}

/// Audit mode over a management group (`TAGWARDEN_MODE=audit`): the timer's sweep goes out in one
/// part per subscription as when enforcing, lists the same way, and sends no write of any kind —
/// counted in the fake ARM's own request log, not by the function's counters — while each
/// cluster's status report lists every drifted resource of its own as a would-be write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_audited_management_group_sweep_writes_nothing_in_any_part_and_reports_every_drift() {
    let (subs, per_cluster) = (3, 20);
    let docs = set_docs();
    let docs: Vec<(&str, &str)> = docs.iter().map(|(n, d)| (n.as_str(), d.as_str())).collect();
    let env = Env::with(
        "clusters/*/",
        &docs,
        &[("TAGWARDEN_CLUSTERS", &SET.join(",")), ("TAGWARDEN_SWEEP_SCOPES", MG), ("TAGWARDEN_MODE", "audit")],
    )
    .await;
    let f = set_fleet(&env.fake, subs, per_cluster);
    let (owned, drifted) = (f.owned.len() as u64, f.drifted.len() as u64);
    assert!(drifted > 0);
    env.fake.clear_log();

    let (status, body, _) = sweep(&env).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(body["ReturnValue"]["parts"].as_array().map(Vec::len), Some(subs), "{body:#}");
    assert_eq!(statuses(&body), json!({"would-apply": drifted, "unchanged": owned - drifted}), "{body:#}");
    let writes: Vec<String> = env
        .fake
        .log()
        .iter()
        .filter(|l| l.api == "arm" && matches!(l.method.as_str(), "PATCH" | "PUT" | "DELETE"))
        .map(|l| format!("{} {}", l.method, l.path))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "an audited management group wrote");
    for id in &f.drifted {
        assert_ne!(env.fake.tags(id).expect("resource").get("team").map(String::as_str), Some("platform"), "{id}");
    }
    for infra in SET {
        let text =
            support::azurite::get_blob(&env.http, &env.container, &format!("clusters/{infra}/tagwarden-status.json"))
                .await
                .expect("a status report");
        let report: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(report["audit"]["mode"], "audit", "{report:#}");
        let mut listed: Vec<String> = report["audit"]["writes"]
            .as_array()
            .expect("writes")
            .iter()
            .filter_map(|w| w["resource"].as_str().map(str::to_ascii_lowercase))
            .collect();
        listed.sort();
        let mut want: Vec<String> =
            f.drifted.iter().filter(|id| id.contains(infra)).map(|id| id.to_ascii_lowercase()).collect();
        want.sort();
        assert_eq!(listed, want, "{infra}: every drifted resource of its own, once");
    }
}
