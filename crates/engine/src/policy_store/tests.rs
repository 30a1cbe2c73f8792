use super::fetch::limits;
use super::*;
use crate::enforce::memory::Documents;
use tagwarden_core::cloud::Cloud;
use tagwarden_core::policy::load::{MAX_CLUSTER_DOCUMENTS, MAX_DOCUMENT_BYTES, MAX_SET_BYTES, MAX_SET_DOCUMENTS};

fn doc(id: &str, tags: &str) -> String {
    format!("version: 1\ninfraID: {id}\ntags: {{{tags}}}\n")
}

fn set(docs: &[(&str, &str)], listed: &[&str]) -> PolicyStore<Documents> {
    let clusters = listed.iter().map(|c| c.to_string()).collect();
    PolicyStore::new(Documents::new(Layout::Set("c/".into()), docs), Duration::ZERO).with_clusters(Some(clusters))
}

fn team(p: &Policies, id: &str) -> Option<String> {
    p.get(id).map(|p| p.policy.base_tags(Cloud::Aws)).and_then(|t| t.get("team").cloned())
}

fn rejected(changes: &[(String, PolicyChange)], id: &str) -> String {
    changes
        .iter()
        .filter(|(c, _)| c == id)
        .filter_map(|(_, c)| match c {
            PolicyChange::Rejected { errors } => Some(errors.join("; ")),
            PolicyChange::Loaded { .. } => None,
        })
        .collect()
}

/// On a cold start, a layer in b-2's folder that names no infraID, or another one,
/// is refused alone; b-2's own layer is in force and the refusal says which layer and the fix.
#[tokio::test]
async fn a_layer_that_does_not_name_its_folders_cluster_is_refused_alone() {
    let own = doc("b-2", "team: b");
    for (layer, said) in [
        ("version: 1\ntags: {team: evil}\n".to_string(), "names no infraID"),
        (doc("c-3", "team: evil"), "names infraID \"c-3\", not b-2"),
        (doc("a-1", "team: evil"), "names infraID \"a-1\", not b-2"),
    ] {
        let store = set(
            &[("c/a-1/p.yaml", &doc("a-1", "team: a")), ("c/b-2/10.yaml", &own), ("c/b-2/20.yaml", &layer)],
            &["a-1", "b-2"],
        );
        let (policies, changes) = store.policies(true).await;
        let policies = policies.expect("both clusters");
        assert_eq!((team(&policies, "a-1").as_deref(), team(&policies, "b-2").as_deref()), (Some("a"), Some("b")));
        let why = rejected(&changes, "b-2");
        assert!(
            why.contains("layer \"20.yaml\"") && why.contains(said) && why.contains("other layers stay in force"),
            "{why}"
        );
        assert_eq!(
            store.standing("b-2").await.map(|s| s.state),
            Some(tagwarden_core::policy::cache::PolicyState::RejectedKeepingLastGood)
        );
    }
    // No layer of its own left: b-2 alone is not enforced (fail closed), a-1 is.
    let store =
        set(&[("c/a-1/p.yaml", &doc("a-1", "team: a")), ("c/b-2/20.yaml", &doc("c-3", "team: evil"))], &["a-1", "b-2"]);
    let (policies, changes) = store.policies(true).await;
    let policies = policies.expect("a-1");
    assert!(policies.get("b-2").is_none() && policies.get("a-1").is_some());
    assert!(rejected(&changes, "b-2").contains("no layer of memory:/c/b-2/ names cluster b-2"), "{changes:?}");
}

/// A folder of a cluster the deployment does not list is never downloaded nor
/// enforced, and reported once; a set with no list fails closed, naming the setting.
#[tokio::test]
async fn only_listed_clusters_are_loaded() {
    let store = set(&[("c/a-1/p.yaml", &doc("a-1", "team: a")), ("c/z-9/p.yaml", &doc("z-9", "team: z"))], &["a-1"]);
    let (policies, changes) = store.policies(true).await;
    assert!(policies.expect("a-1").get("z-9").is_none());
    assert_eq!(store.downloads(), 1, "z-9's folder is not downloaded");
    let why = rejected(&changes, "z-9");
    assert!(why.contains("memory:/c/z-9/") && why.contains("does not list") && why.contains("infra_ids"), "{why}");
    let (_, changes) = store.policies(true).await;
    assert!(rejected(&changes, "z-9").is_empty(), "reported once: {changes:?}");
    assert_eq!(store.clusters().await.expect("listed"), ["a-1"]);

    let unlisted = PolicyStore::new(
        Documents::new(Layout::Set("c/".into()), &[("c/a-1/p.yaml", &doc("a-1", "t: a"))]),
        Duration::ZERO,
    );
    let e = unlisted.policies(true).await.0.expect_err("fail closed").to_string();
    assert!(e.contains("TAGWARDEN_CLUSTERS") && e.contains("nothing is written"), "{e}");

    // A single policy must be a listed cluster's.
    let one = PolicyStore::new(
        Documents::new(Layout::One("p.yaml".into()), &[("p.yaml", &doc("z-9", "t: a"))]),
        Duration::ZERO,
    )
    .with_clusters(Some(vec!["a-1".into()]));
    let e = one.policies(true).await.0.expect_err("not listed").to_string();
    assert!(e.contains("cluster z-9, which this deployment does not list (TAGWARDEN_CLUSTERS=a-1)"), "{e}");
}

/// The limits refuse from the listing, before anything is downloaded, naming the
/// limit; another cluster is not affected.
#[tokio::test]
async fn a_cluster_over_a_limit_is_refused_before_it_is_read() {
    let many: Vec<(String, String)> =
        (0..=MAX_CLUSTER_DOCUMENTS).map(|i| (format!("c/b-2/{i:02}.yaml"), doc("b-2", "t: b"))).collect();
    let mut docs: Vec<(&str, &str)> = many.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let a = doc("a-1", "team: a");
    docs.push(("c/a-1/p.yaml", &a));
    let store = set(&docs, &["a-1", "b-2"]);
    let (policies, changes) = store.policies(true).await;
    assert!(policies.expect("a-1").get("b-2").is_none());
    assert_eq!(store.downloads(), 1, "b-2 is refused from its listing");
    let why = rejected(&changes, "b-2");
    assert!(why.contains("21 policy documents is over the limit of 20 (MAX_CLUSTER_DOCUMENTS)"), "{why}");
    let (_, changes) = store.policies(true).await;
    assert!(rejected(&changes, "b-2").is_empty(), "an unchanged listing is not reported again");

    let big = format!("{}t: {}\n", doc("b-2", "x: y"), "v".repeat(MAX_DOCUMENT_BYTES / 2));
    let store = set(&[("c/b-2/1.yaml", &big), ("c/b-2/2.yaml", &big), ("c/b-2/3.yaml", &big)], &["b-2"]);
    let why = rejected(&store.policies(true).await.1, "b-2");
    assert!(why.contains("over the limit of 1048576 (MAX_CLUSTER_BYTES)"), "{why}");
    assert_eq!(store.downloads(), 0);
}

/// The function writes a status report only in a listed cluster's own folder,
/// whatever name a publisher gave a folder or a document.
#[tokio::test]
async fn the_status_report_goes_only_to_a_listed_clusters_folder() {
    let store = set(&[("c/a-1/p.yaml", &doc("a-1", "t: a"))], &["a-1"]);
    let report = tagwarden_core::status::StatusReport::new(Cloud::Aws, &"l", Some("v".into()), vec![], vec![]);
    for hostile in ["../a-1", "a-1/../../x", "z-9", "", "a-1/", "a-1\n"] {
        crate::status_store::write(&store, Some(hostile), &report).await.expect("not written, no error");
    }
    crate::status_store::write(&store, Some("a-1"), &report).await.expect("written");
    let written: Vec<Option<String>> = store.source.statuses.lock().expect("lock").keys().cloned().collect();
    assert_eq!(written, [Some("a-1".to_string())]);
}

#[test]
fn a_sets_limits_are_spent_in_name_order() {
    let mut budget = Budget::set();
    assert_eq!(limits("l", 3, 10, &budget), None);
    budget.spend(MAX_SET_DOCUMENTS - 2, 0);
    let why = limits("s3://b/c/z-9/", 3, 10, &budget).expect("over the set's documents");
    assert!(
        why.starts_with("s3://b/c/z-9/: 1001 policy documents in the set") && why.contains("MAX_SET_DOCUMENTS"),
        "{why}"
    );
    let mut budget = Budget::set();
    budget.spend(0, MAX_SET_BYTES as u64 - 5);
    assert!(limits("l", 1, 6, &budget).is_some_and(|w| w.contains("MAX_SET_BYTES")));
    assert_eq!(limits("l", 1000, u64::MAX, &Budget::unbounded()), None, "the CLI reads what is there");
}

#[test]
fn policy_documents_under_a_prefix() {
    for yes in ["p/00-defaults.yaml", "p/10-cluster.json", "p/sub/20.yml", "x.yaml"] {
        assert!(is_policy_document(yes), "{yes}");
    }
    for no in ["p/tagwarden-status.json", "p/.hidden.yaml", "p/README.md", "p/"] {
        assert!(!is_policy_document(no), "{no}");
    }
}
