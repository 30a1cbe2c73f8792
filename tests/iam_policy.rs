//! The Lambda's IAM role grants exactly the AWS API operations the code can call, and the module
//! follows the service descriptors (`crates/core/src/services/catalogue.rs`):
//! - the set the code calls is derived from the code (every SDK operation called in
//!   crates/aws/src/), not from a hand list, and compared with the descriptors' actions plus the
//!   policy source's `policy_store_actions` in infra/aws/iam.tf;
//! - infra/aws/generated/services.json, from which infra/aws builds the EventBridge patterns and
//!   the role's statements, and the README's table of services are what the descriptors produce.
//!   A stale one fails here; `TAGWARDEN_BLESS=1 cargo test --all-features --test iam_policy`
//!   rewrites both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::{json, Value};
use tagwarden::services::{Batch, Guard, Service, SERVICES, TAGGING};

/// SDK crates whose IAM service prefix is not their own name.
const PREFIXES: &[(&str, &str)] =
    &[("elasticloadbalancingv2", "elasticloadbalancing"), ("resourcegroupstagging", "tag")];

/// SDK operations whose IAM action has another name.
const RENAMED: &[(&str, &str)] = &[("s3:ListObjectsV2", "s3:ListBucket")];

/// The command that rewrites the generated files.
const BLESS: &str = "TAGWARDEN_BLESS=1 cargo test --all-features --test iam_policy";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn descriptors() -> impl Iterator<Item = &'static Service> {
    SERVICES.iter().chain([&TAGGING])
}

fn pascal(snake: &str) -> String {
    let mut out = String::new();
    for word in snake.split('_') {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    // The SDK's snake_case splits "OpenID" into "open_id".
    out.replace("OpenId", "OpenID")
}

fn rust_sources(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("source dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).expect("source"));
        }
    }
}

/// The SDK clients of `tagwarden_aws::Clients` (`pub <field>: aws_sdk_<crate>::Client`), by field,
/// with the IAM service prefix of each.
fn clients() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root().join("crates/aws/src/lib.rs")).expect("crates/aws/src/lib.rs");
    let field = Regex::new(r"pub ([a-z0-9_]+): aws_sdk_([a-z0-9]+)::Client").expect("regex");
    field
        .captures_iter(&text)
        .map(|c| {
            let prefix = PREFIXES.iter().find(|(k, _)| *k == &c[2]).map(|(_, p)| p.to_string());
            (c[1].to_string(), prefix.unwrap_or_else(|| c[2].to_string()))
        })
        .collect()
}

fn actions_called_by_code() -> BTreeSet<String> {
    let mut sources = Vec::new();
    rust_sources(&root().join("crates/aws/src/"), &mut sources);
    let clients = clients();
    assert!(clients.len() >= 9, "the scan of Clients found {clients:?}");
    // `clients.ec2.describe_tags()`, `c.s3.get_object()`, `iam.list_roles()`, across line breaks.
    let names = clients.keys().cloned().collect::<Vec<_>>().join("|");
    let call = Regex::new(&format!(r"\b({names})\s*\.\s*([a-z][a-z0-9_]*)\s*\(\s*\)")).expect("regex");
    let mut found = BTreeSet::new();
    for text in &sources {
        for c in call.captures_iter(text) {
            let action = format!("{}:{}", clients[&c[1]], pascal(&c[2]));
            let action =
                RENAMED.iter().find(|(from, _)| *from == action).map(|(_, to)| to.to_string()).unwrap_or(action);
            found.insert(action);
        }
    }
    found
}

/// The actions the role grants for the policy source and status report (`policy_store_actions`
/// in iam.tf); the rest come from the descriptors.
fn policy_store_actions() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("infra/aws/iam.tf")).expect("infra/aws/iam.tf");
    let start = text.find("policy_store_actions = {").expect("a policy_store_actions local in iam.tf");
    // The block ends at the brace that balances its opening one.
    let mut depth = 0;
    let mut end = start;
    for (i, ch) in text[start..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = start + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let action = Regex::new(r#""([a-z0-9-]+:[A-Za-z0-9]+)""#).expect("regex");
    action.captures_iter(&text[start..end]).map(|c| c[1].to_string()).collect()
}

/// Every action a descriptor says its code calls.
fn descriptor_actions() -> BTreeSet<String> {
    descriptors()
        .flat_map(|s| [s.read, s.write].into_iter().chain(s.list.iter().copied()).chain(s.also.iter().copied()))
        .map(str::to_string)
        .collect()
}

#[test]
fn role_grants_exactly_what_the_code_calls() {
    let code = actions_called_by_code();
    let granted: BTreeSet<String> = descriptor_actions().union(&policy_store_actions()).cloned().collect();
    // A sanity floor, so a broken scan cannot pass by finding nothing.
    for must in
        ["ec2:CreateTags", "s3:PutBucketTagging", "elasticloadbalancing:AddTags", "iam:TagRole", "tag:GetResources"]
    {
        assert!(code.contains(must), "the scan of crates/aws/src/ missed {must}: {code:?}");
    }
    let extra: Vec<_> = granted.difference(&code).collect();
    let missing: Vec<_> = code.difference(&granted).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "the descriptors and iam.tf's policy_store_actions grant {extra:?} that the code never calls, and miss {missing:?} that it calls"
    );
    // Never a destructive tag call.
    assert!(granted.iter().all(|a| !a.contains("Untag") && !a.contains("DeleteTags") && !a.contains("RemoveTags")));
}

/// Each service descriptor names the actions that read, write and list it: each is one the code
/// really calls, so the descriptors cannot drift from the code or the role.
#[test]
fn the_service_descriptors_name_the_calls_the_code_makes() {
    let code = actions_called_by_code();
    for s in descriptors() {
        for action in [s.read, s.write].iter().chain(s.list).chain(s.also) {
            assert!(
                code.contains(*action),
                "the {} descriptor names {action}, which crates/aws/src/ never calls",
                s.kind
            );
        }
    }
}

/// What infra/aws reads from the descriptors (infra/aws/generated/services.json):
/// - `cloudtrail_event_names`: per service (`source` aws.<key>, `eventSource` <key>.amazonaws.com),
///   the CloudTrail events the parser handles;
/// - `services`: per IAM service prefix, in the descriptors' order, the reads granted on "*"
///   (`read_anywhere`), the reads granted on `resources` (`read`), the write granted under
///   `guard` (`owned`, `owned_via_tagging_api`, `listed`, `bucket`, `anywhere`: `Guard`), and the
///   resource ARN patterns.
fn generated() -> Value {
    let mut events: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in SERVICES {
        events.entry(s.service().to_string()).or_default().extend(s.events.iter().map(|(n, _, _)| n.to_string()));
    }
    let count: usize = events.values().map(BTreeSet::len).sum();
    assert!(count > 40, "the descriptors' events are suspiciously few: {events:?}");

    let prefix = |action: &str| action.split(':').next().unwrap_or(action).to_string();
    // One object per IAM service prefix, in the order the descriptors first name it.
    let mut groups: Vec<serde_json::Map<String, Value>> = Vec::new();
    fn group(groups: &mut Vec<serde_json::Map<String, Value>>, service: String) -> &mut serde_json::Map<String, Value> {
        let at = match groups.iter().position(|g| g["service"] == service.as_str()) {
            Some(at) => at,
            None => {
                let mut g = serde_json::Map::new();
                g.insert("service".into(), json!(service));
                for k in ["read_anywhere", "read", "write", "resources"] {
                    g.insert(k.into(), json!([]));
                }
                groups.push(g);
                groups.len() - 1
            }
        };
        &mut groups[at]
    }
    fn push(g: &mut serde_json::Map<String, Value>, key: &str, value: &str) {
        let list = g.get_mut(key).and_then(Value::as_array_mut).expect("a list");
        if !list.iter().any(|v| v == value) {
            list.push(json!(value));
        }
    }
    for s in descriptors() {
        let (action, guard) = match s.grant.guard {
            Guard::Owned => (s.write, "owned"),
            Guard::OwnedVia(action) => (action, "owned_via_tagging_api"),
            Guard::Listed => (s.write, "listed"),
            Guard::Bucket => (s.write, "bucket"),
            Guard::Anywhere => (s.write, "anywhere"),
        };
        let g = group(&mut groups, prefix(action));
        match g.insert("guard".into(), json!(guard)) {
            Some(other) if other != json!(guard) => panic!("{}: guard {guard}, but its service's is {other}", s.kind),
            _ => {}
        }
        push(g, "write", action);
        for r in s.grant.resources {
            push(g, "resources", r);
        }
        for read in [s.read].iter().chain(s.list).chain(s.also).filter(|a| **a != s.write) {
            let key = if s.grant.scoped.contains(read) { "read" } else { "read_anywhere" };
            push(group(&mut groups, prefix(read)), key, read);
        }
    }
    for g in &groups {
        assert!(g.contains_key("guard"), "{}: reads but no write, which the module cannot grant", g["service"]);
    }
    let services: Vec<Value> = groups.into_iter().map(Value::Object).collect();
    json!({
        "generated_by": format!("tests/iam_policy.rs from crates/core/src/services/catalogue.rs; do not edit: {BLESS}"),
        "cloudtrail_event_names": events,
        "services": services,
    })
}

/// `path`'s text is `want`, or with `TAGWARDEN_BLESS=1` becomes it.
fn check_or_bless(path: &Path, text: &str, want: &str, what: &str) {
    if text == want {
        return;
    }
    if std::env::var_os("TAGWARDEN_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(path, want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    panic!("{} is stale: {what}. Run `{BLESS}` and commit the result.", path.display());
}

/// infra/aws/generated/services.json is what the descriptors produce.
#[test]
fn the_module_reads_the_descriptors() {
    let path = root().join("infra/aws/generated/services.json");
    let want = serde_json::to_string_pretty(&generated()).expect("json") + "\n";
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    check_or_bless(&path, &text, &want, "the descriptors in crates/core/src/services/catalogue.rs changed");
    // The module reads it: the event patterns and the role's statements, no hand copy.
    for (file, local) in
        [("events.tf", "local.generated.cloudtrail_event_names"), ("iam.tf", "local.generated.services")]
    {
        let tf = std::fs::read_to_string(root().join("infra/aws").join(file)).expect("module file");
        assert!(tf.contains(local), "infra/aws/{file} does not use {local}");
    }
    let main = std::fs::read_to_string(root().join("infra/aws/main.tf")).expect("main.tf");
    assert!(
        main.contains(r#"jsondecode(file("${path.module}/generated/services.json"))"#),
        "main.tf does not read the file"
    );
}

/// The README's table of services, one row per descriptor.
fn markdown_table() -> String {
    let mut out = String::from(
        "| kinds | read | write | batch | listed by | CloudTrail events | why |\n|---|---|---|---|---|---|---|\n",
    );
    for s in descriptors() {
        let batch = match s.batch {
            Batch::Alone => "1".to_string(),
            Batch::Reread => "1, re-read first".to_string(),
            Batch::Shared(n) => n.to_string(),
        };
        let list = s.list.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ");
        let kind = if s.kind == "*" { "any other".to_string() } else { format!("`{}`", s.kind) };
        let events = s.events.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ");
        let events = if events.is_empty() { "`Tag Change on Resource`".to_string() } else { events };
        out.push_str(&format!("| {kind} | `{}` | `{}` | {batch} | {list} | {events} | {} |\n", s.read, s.write, s.why));
    }
    out
}

/// The README's table of services is the descriptors' own.
#[test]
fn the_readme_lists_the_services_as_described() {
    let path = root().join("README.md");
    let text = std::fs::read_to_string(&path).expect("README.md");
    let (begin, end) = ("<!-- services: begin -->\n", "<!-- services: end -->");
    let start = text.find(begin).expect("a services table in README.md") + begin.len();
    let stop = start + text[start..].find(end).expect("the table's end marker");
    let want = format!("{}{}{}", &text[..start], markdown_table(), &text[stop..]);
    check_or_bless(&path, &text, &want, "its table of services is not the descriptors'");
}

#[test]
fn snake_case_operations_map_to_iam_actions() {
    assert_eq!(pascal("list_open_id_connect_provider_tags"), "ListOpenIDConnectProviderTags");
    assert_eq!(pascal("get_bucket_tagging"), "GetBucketTagging");
}
