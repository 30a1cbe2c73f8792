//! The function against what ARM refuses (`tagwarden_testkit::azure::arm_rules`): the per-type tag
//! limits agree with the planner, so nothing over a limit is even sent; tag names compare
//! case-insensitively, so a differently cased policy key updates the existing tag and never
//! flip-flops; and a refusal a retry cannot fix (a type that refuses the Tags API's PATCH, a tag
//! ARM rejects) is recorded and reported, while the Event Grid delivery, the queued sweep and the
//! timer all succeed instead of being retried for a day. Reads that lag behind a write (ARM's
//! documented stale reads) cost a repeated, harmless Merge, never a wrong value.

#![cfg(feature = "azure")]

use crate::support;
use serde_json::{json, Value};
use support::env::{blob_created, eg_event, infrastructure, queue_message, records, rid, timer, Env, OWNER, SOMEONE};
use support::fake::Fault;

fn statuses(body: &Value) -> Value {
    body["ReturnValue"]["by_status"].clone()
}

/// `n` unmanaged tags plus the ownership tag.
fn tags_with_owner(n: usize) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = (0..n).map(|i| (format!("user{i:02}"), "x".to_string())).collect();
    tags.push((OWNER.to_string(), "owned".to_string()));
    tags
}

fn refs(tags: &[(String, String)]) -> Vec<(&str, &str)> {
    tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[tokio::test]
async fn every_fifteen_tag_type_is_planned_over_its_limit_without_a_write() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform"), ("env", "prod")], &[]))]).await;
    // tag-resources.md, Limitations: "The following Azure resources only support 15 tags".
    let kinds = [
        ("Microsoft.Network/dnszones", "mycluster.example.com"),
        ("Microsoft.Network/privateDnsZones", "mycluster.internal"),
        ("Microsoft.Cdn/profiles", "images"),
        ("Microsoft.Automation/automationAccounts", "ops"),
        ("Microsoft.OperationalInsights/workspaces/logs/savedSearches", "drift"),
    ];
    for (kind, name) in kinds {
        let id = rid(kind, name);
        // 14 tags: room for one more, the policy adds two.
        env.fake.put_resource(&id, &refs(&tags_with_owner(13)));
        env.fake.clear_log();
        let (status, body) =
            env.invoke("drift", "eventGridEvent", eg_event(&id, &format!("{kind}/write"), SOMEONE)).await;
        assert_eq!(status, 200, "{kind}: {body:#}");
        assert_eq!(statuses(&body), json!({"limit-exceeded": 1}), "{kind}: {body:#}");
        assert_eq!(env.fake.arm_calls(), ["GET tags"], "{kind}: planned over the limit, nothing sent");
        assert_eq!(env.fake.tags(&id).expect("resource").len(), 14);
    }
}

#[tokio::test]
async fn a_differently_cased_key_updates_the_existing_tag_once() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("Team", "platform")], &[]))]).await;
    let vm = rid("Microsoft.Compute/virtualMachines", "master-0");
    env.fake.put_resource(&vm, &[(OWNER, "owned"), ("team", "ops")]);
    let event = || eg_event(&vm, "Microsoft.Compute/virtualMachines/write", SOMEONE);
    let body = env.drift(event()).await;
    assert_eq!(statuses(&body), json!({"applied": 1}), "{body:#}");
    assert_eq!(env.fake.patch_bodies(), [json!({"operation": "Merge", "properties": {"tags": {"Team": "platform"}}})]);
    // ARM updated the existing tag: still two tags, no `Team` beside `team`.
    let tags = env.fake.tags(&vm).expect("vm");
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert_eq!(tags.iter().find(|(k, _)| k.eq_ignore_ascii_case("team")).map(|(_, v)| v.as_str()), Some("platform"));
    // Whatever casing ARM kept, the next event finds no drift.
    env.fake.clear_log();
    let body = env.drift(event()).await;
    assert_eq!(statuses(&body), json!({"unchanged": 1}));
    assert_eq!(env.fake.arm_calls(), ["GET tags"]);
}

#[tokio::test]
async fn refusals_a_retry_cannot_fix_are_reported_not_retried() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    // tag-resources.md: "Azure IP Groups and Azure Firewall policies don't support PATCH
    // operations" — their tags are set with the resource's own update.
    let policy = rid("Microsoft.Network/firewallPolicies", "egress");
    let ip_group = rid("Microsoft.Network/ipGroups", "workers");
    let disk = rid("Microsoft.Compute/disks", "master-0_OSDisk");
    for id in [&policy, &ip_group, &disk] {
        env.fake.put_resource(id, &[(OWNER, "owned")]);
    }

    // The Event Grid delivery succeeds: a retry would meet the same refusal for 24 h.
    let (status, body) = env
        .invoke("drift", "eventGridEvent", eg_event(&policy, "Microsoft.Network/firewallPolicies/write", SOMEONE))
        .await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"unsupported": 1}), "{body:#}");
    let rec = &records(&body)[0];
    let error = rec["error"].as_str().unwrap_or_default();
    assert!(error.contains("MethodNotAllowed") && error.contains("own update"), "{error}");
    assert_eq!(env.fake.count("PATCH tags"), 1, "tried once, not again");
    let posted = env.fake.posted_metrics();
    assert!(posted.iter().any(|(_, b)| b.contains("\"Unsupported\"")), "Azure Monitor hears of it: {posted:?}");

    // A tag ARM rejects (here injected: a validated policy cannot produce one) fails permanently.
    env.fake.inject("PATCH", Fault::Status { status: 400, code: "InvalidTagNameCharacters" });
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(status, 200, "{body:#}");
    let rec = &records(&body)[0];
    assert_eq!((rec["status"].as_str(), rec["failure"].as_str()), (Some("failed"), Some("permanent")), "{rec:#}");
    assert!(rec["error"].as_str().unwrap_or_default().contains("change the policy"), "{rec:#}");
    // A missing role is ARM's `AuthorizationFailed`: permanent by its code, with the fix.
    env.fake.inject("PATCH", Fault::Status { status: 403, code: "AuthorizationFailed" });
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(records(&body)[0]["failure"], "permanent");
    assert!(records(&body)[0]["error"].as_str().unwrap_or_default().contains("tag writer"), "{body:#}");
    // Still retried: a token that expired in flight (a new one fixes it).
    env.fake.inject("PATCH", Fault::Status { status: 401, code: "ExpiredAuthenticationToken" });
    let (status, body) =
        env.invoke("drift", "eventGridEvent", eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE)).await;
    assert_eq!(status, 500, "{body:#}");
    assert_eq!(records(&body)[0]["failure"], "transient");

    // The queued sweep and the timer complete (no poison queue, no failed timer run), and the
    // status report lists both PATCH-less resources as unsupported.
    let (status, body) = env.invoke("sweep-queue", "message", queue_message(&blob_created("p.json"))).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(statuses(&body), json!({"unsupported": 2, "applied": 1}), "{body:#}");
    let (status, body) = env.invoke("sweep", "timer", timer()).await;
    assert_eq!(status, 200, "{body:#}");
    let report = env.report().await.expect("status report");
    let unsupported = report["unsupported"].to_string();
    assert!(unsupported.contains("egress") && unsupported.contains("workers"), "{report:#}");
    assert!(!env.fake.tags(&policy).expect("policy").contains_key("team"));
    assert_eq!(env.fake.tags(&disk).expect("disk")["team"], "platform");
}

#[tokio::test]
async fn stale_reads_after_a_write_cost_a_repeated_merge_never_a_wrong_value() {
    let env = Env::new("p.json", &[("p.json", &infrastructure(&[("team", "platform")], &[]))]).await;
    let disk = rid("Microsoft.Compute/disks", "master-0_OSDisk");
    env.fake.put_resource(&disk, &[(OWNER, "owned"), ("mine", "kept")]);
    // A managed disk: the write is accepted (202) and polled; the next read still sees the old tags.
    env.fake.stale_reads_after_write(1);
    env.fake.inject("PATCH", Fault::Accept { polls: 1 });
    let event = || eg_event(&disk, "Microsoft.Compute/disks/write", SOMEONE);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(statuses(&env.drift(event()).await));
    }
    assert_eq!(seen, [json!({"applied": 1}), json!({"applied": 1}), json!({"unchanged": 1})]);
    assert_eq!(env.fake.count("PATCH tags"), 2, "one repeated Merge for the one stale read");
    assert!(env.fake.patch_bodies().iter().all(|b| b["operation"] == "Merge"), "never a Replace from a stale base");
    let tags = env.fake.tags(&disk).expect("disk");
    assert_eq!((tags["team"].as_str(), tags["mine"].as_str(), tags.len()), ("platform", "kept", 3));
}
