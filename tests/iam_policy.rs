//! The Lambda's IAM role grants exactly the AWS API operations the code can call: the set is
//! derived from the code (every SDK operation called in crates/aws/src/), not from a hand list, and
//! compared with the `code_actions` of infra/aws/iam.tf, from which every statement is built.

use std::collections::BTreeSet;
use std::path::Path;

use regex::Regex;

/// `client field` → IAM service prefix.
const SERVICES: &[(&str, &str)] = &[
    ("ec2", "ec2"),
    ("s3", "s3"),
    ("elbv2", "elasticloadbalancing"),
    ("elb", "elasticloadbalancing"),
    ("route53", "route53"),
    ("iam", "iam"),
    ("kms", "kms"),
    ("ssm", "ssm"),
    ("tagging", "tag"),
];

/// SDK operations whose IAM action has another name.
const RENAMED: &[(&str, &str)] = &[("s3:ListObjectsV2", "s3:ListBucket")];

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

fn actions_called_by_code() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = Vec::new();
    rust_sources(&root.join("crates/aws/src/"), &mut sources);
    // `clients.ec2.describe_tags()`, `c.s3.get_object()`, `iam.list_roles()`, across line breaks.
    let call = Regex::new(r"\b(ec2|s3|elbv2|elb|route53|iam|kms|ssm|tagging)\s*\.\s*([a-z][a-z0-9_]*)\s*\(\s*\)")
        .expect("regex");
    let mut found = BTreeSet::new();
    for text in &sources {
        for c in call.captures_iter(text) {
            let prefix = SERVICES.iter().find(|(f, _)| *f == &c[1]).map(|(_, p)| *p).expect("known client");
            let action = format!("{prefix}:{}", pascal(&c[2]));
            let action =
                RENAMED.iter().find(|(from, _)| *from == action).map(|(_, to)| to.to_string()).unwrap_or(action);
            found.insert(action);
        }
    }
    found
}

fn actions_granted_by_terraform() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("infra/aws/iam.tf");
    let text = std::fs::read_to_string(&path).expect("infra/aws/iam.tf");
    let start = text.find("code_actions = {").expect("a code_actions local in iam.tf");
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

#[test]
fn role_grants_exactly_what_the_code_calls() {
    let code = actions_called_by_code();
    let granted = actions_granted_by_terraform();
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
        "infra/aws/iam.tf code_actions grants {extra:?} that the code never calls, and misses {missing:?} that it calls"
    );
    // Never a destructive tag call.
    assert!(granted.iter().all(|a| !a.contains("Untag") && !a.contains("DeleteTags") && !a.contains("RemoveTags")));
}

/// Each service descriptor (`crates/core/src/services.rs`) names the actions that read, write and list it:
/// each is one the code really calls, so the descriptors cannot drift from the code or the role.
#[test]
fn the_service_descriptors_name_the_calls_the_code_makes() {
    let code = actions_called_by_code();
    for s in tagwarden::services::SERVICES.iter().chain([&tagwarden::services::TAGGING]) {
        for action in [s.read, s.write].iter().chain(s.list) {
            assert!(
                code.contains(*action),
                "the {} descriptor names {action}, which crates/aws/src/ never calls",
                s.kind
            );
        }
    }
}

/// The event names the parser handles, per CloudTrail `eventSource`, from the descriptors.
fn handled_events() -> BTreeSet<(String, String)> {
    let services = tagwarden::services::SERVICES.iter();
    services
        .flat_map(|s| s.events.iter().map(|(name, _, _)| (format!("{}.amazonaws.com", s.service()), name.to_string())))
        .collect()
}

/// The README's table of services, one row per descriptor.
fn markdown_table() -> String {
    use tagwarden::services::Batch;
    let mut out = String::from(
        "| kinds | read | write | batch | listed by | CloudTrail events | why |\n|---|---|---|---|---|---|---|\n",
    );
    for s in tagwarden::services::SERVICES.iter().chain([&tagwarden::services::TAGGING]) {
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
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(&path).expect("README.md");
    let (begin, end) = ("<!-- services: begin -->\n", "<!-- services: end -->");
    let start = text.find(begin).expect("a services table in README.md") + begin.len();
    let stop = start + text[start..].find(end).expect("the table's end marker");
    let want = markdown_table();
    assert!(text[start..stop] == want, "README.md's services table is stale; put this between the markers:\n{want}");
}

#[test]
fn snake_case_operations_map_to_iam_actions() {
    assert_eq!(pascal("list_open_id_connect_provider_tags"), "ListOpenIDConnectProviderTags");
    assert_eq!(pascal("get_bucket_tagging"), "GetBucketTagging");
}

/// The EventBridge rules ask for exactly the CloudTrail events the parser handles: a name the
/// code handles but the rule omits is an event that never arrives.
#[test]
fn event_patterns_list_exactly_the_handled_events() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("infra/aws/events.tf");
    let text = std::fs::read_to_string(&path).expect("infra/aws/events.tf");
    let start = text.find("cloudtrail_event_names = {").expect("a cloudtrail_event_names local");
    let end = start + text[start..].find("\n  }\n").expect("the local's end");
    let block = &text[start..end];
    let entry = Regex::new(r"(?s)\b([a-z0-9]+)\s*=\s*\[(.*?)\]").expect("regex");
    let name = Regex::new(r#""([A-Za-z0-9]+)""#).expect("regex");
    let mut in_terraform: BTreeSet<(String, String)> = BTreeSet::new();
    for e in entry.captures_iter(block) {
        for n in name.captures_iter(&e[2]) {
            in_terraform.insert((format!("{}.amazonaws.com", &e[1]), n[1].to_string()));
        }
    }
    let in_code = handled_events();
    assert!(in_code.len() > 40, "the code's list is suspiciously short: {in_code:?}");
    let missing: Vec<_> = in_code.difference(&in_terraform).collect();
    let extra: Vec<_> = in_terraform.difference(&in_code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "events.tf misses {missing:?} and has {extra:?} the code does not handle"
    );
}
