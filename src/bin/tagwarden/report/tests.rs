//! The exports of one status report, read as the function writes it.

use super::audit::{account_of, account_of_part};
use super::csv::CSV_HEADER;
use super::*;
use tagwarden::mode::ClusterMode;
use tagwarden::status::TypeCompliance;

fn report() -> Value {
    serde_json::json!({
        "generated_at": 1, "cloud": "aws",
        "policy": {"location": "s3://b/p", "state": "ok", "version": "v", "errors": []},
        "failures": [{"name": "i-2", "resource": "arn:aws:ec2:us-east-1:111122223333:instance/i-2", "type": "ec2:instance", "error": "ec2:CreateTags: UnauthorizedOperation"}],
        "audit": {"mode": "audit", "owned": 3, "in_line": 1, "drifted": 2, "written": 0, "would_write": 1,
                  "would_fail": {"tag_limit": 0, "unsupported": 0, "permission": 1, "other": 0, "contested": 0},
                  "unreadable": 0, "by_type": {"ec2:instance": {"in_line": 1, "drifted": 2}},
                  "writes": [{"resource": "arn:aws:ec2:us-east-1:111122223333:instance/i-1", "type": "ec2:instance",
                              "changes": [{"key": "team", "old": "legacy", "new": "platform"}, {"key": "=cmd", "old": null, "new": "a,\"b\""}]}],
                  "truncated": false}
    })
}

/// The page reads the function's own `AuditSummary` (no copy of its shape here): a report
/// holding one, as the function writes it, is read field for field; an older report missing
/// fields is read with them zero, not dropped.
#[test]
fn reads_the_functions_audit_summary() {
    use tagwarden::status as s;
    let mut counts =
        s::AuditCounts { owned: 5, in_line: 2, drifted: 3, would_write: 2, unreadable: 1, ..Default::default() };
    counts.would_fail.tag_limit = 1;
    counts.by_type.insert("ec2:instance".into(), s::TypeCompliance { in_line: 2, drifted: 3 });
    let real = s::AuditSummary {
        mode: Some(ClusterMode::Mixed),
        counts: counts.clone(),
        writes: vec![s::WouldWrite {
            resource: "arn:aws:ec2:us-east-1:111122223333:instance/i-1".into(),
            resource_type: "ec2:instance".into(),
            changes: vec![s::AuditedChange { key: "team".into(), old: None, new: "platform".into() }],
        }],
        truncated: true,
        parts: [("aws:111122223333/us-east-1".to_string(), counts)].into(),
    };
    let mut report = report();
    report["audit"] = serde_json::to_value(&real).expect("json");
    let c = ClusterAudit::of_report(Some("c-1"), &report);
    assert_eq!(c.audit, real);
    assert_eq!((c.mode.as_deref(), c.has_audit), (Some("mixed"), true));

    report["audit"] = serde_json::json!({"mode": "audit", "in_line": 4, "drifted": 1, "would_fail": {"tag_limit": 1}});
    let older = ClusterAudit::of_report(Some("c-1"), &report);
    assert_eq!((older.audit.counts.in_line, older.audit.counts.drifted, older.audit.counts.owned), (4, 1, 0));
    assert_eq!((older.audit.counts.would_fail.tag_limit, older.audit.writes.len()), (1, 0));
}

/// A contested key names its writer, classified, and the documented remedy, in the table, the
/// CSV, the JSON and the page.
#[test]
fn a_contested_key_names_its_writer_and_the_remedy_everywhere() {
    let mut report = report();
    let contest = |resource: &str, writer: Option<&str>| {
        serde_json::json!({"resource": resource, "key": "team", "policy": "p", "corrections": [1, 2, 3],
                           "writer": writer, "contested_since": 10, "hold_until": 3610, "holds": 1})
    };
    report["contests"] = serde_json::json!([
        contest(
            "arn:aws:elasticloadbalancing:us-east-1:111122223333:loadbalancer/app/web/1",
            Some("arn:aws:sts::111122223333:assumed-role/eks-aws-load-balancer-controller/1700000000")
        ),
        contest(
            "arn:aws:ec2:us-east-1:111122223333:instance/i-3",
            Some("arn:aws:sts::111122223333:assumed-role/terraform-ci/run-1")
        ),
        contest("arn:aws:ec2:us-east-1:111122223333:instance/i-4", None),
        // Not contested yet (counting corrections): no row.
        serde_json::json!({"resource": "arn:aws:ec2:us-east-1:111122223333:instance/i-5", "key": "team", "policy": "p", "corrections": [1]}),
    ]);
    let c = ClusterAudit::of_report(Some("c-1"), &report);
    let kinds: Vec<_> = c.failing.iter().filter_map(|f| f.writer.as_ref().map(|w| w.kind)).collect();
    use tagwarden::writer::WriterKind as K;
    assert_eq!(kinds, [K::AwsLoadBalancerController, K::Terraform, K::Unknown]);

    let t = table(std::slice::from_ref(&c));
    assert!(t.contains("writer aws-load-balancer-controller: arn:aws:sts::111122223333:assumed-role/eks-aws-load-balancer-controller/1700000000"), "{t}");
    assert!(t.contains("end the fight: Terraform: add the key to the AWS provider's ignore_tags"), "{t}");
    assert!(t.contains("end the fight: unknown writer: exclude team with auditKeys"), "{t}");

    let csv = csv(std::slice::from_ref(&c));
    let row = csv.lines().find(|l| l.contains("instance/i-3")).expect("a row for i-3");
    assert!(row.contains(",team,,,would-fail,contested: changed again and again by arn:aws:sts::111122223333:assumed-role/terraform-ci/run-1,terraform: arn:aws:sts::111122223333:assumed-role/terraform-ci/run-1,"), "{row}");
    assert!(row.contains("(source: Terraform AWS provider documentation: provider argument ignore_tags"), "{row}");

    let j = json(std::slice::from_ref(&c));
    let writers: Vec<&Value> =
        j["clusters"][0]["failing"].as_array().expect("failing").iter().filter_map(|f| f.get("writer")).collect();
    assert_eq!(writers.len(), 3);
    assert_eq!(writers[0]["kind"], "aws-load-balancer-controller");
    assert!(writers[0]["remedy"]["how"].as_str().expect("how").contains("alb.ingress.kubernetes.io/tags"));

    let page = html("t", "s3://b/p", std::slice::from_ref(&c));
    assert!(
        page.contains("<table id=\"contests\">")
            && page.contains("service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"),
        "{page}"
    );
    assert!(page.contains("<td>terraform</td>") && page.contains("<td>unknown</td>"));
}

#[test]
fn csv_html_and_table_of_one_report() {
    let c = ClusterAudit::of_report(Some("c-1"), &report());
    assert_eq!(c.compliance().map(|p| p.round()), Some(33.0));
    let csv = csv(std::slice::from_ref(&c));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], CSV_HEADER);
    assert_eq!(lines[1], "c-1,111122223333,ec2:instance,arn:aws:ec2:us-east-1:111122223333:instance/i-1,team,legacy,platform,would-write,,,");
    assert_eq!(lines[2], "c-1,111122223333,ec2:instance,arn:aws:ec2:us-east-1:111122223333:instance/i-1,'=cmd,,\"a,\"\"b\"\"\",would-write,,,");
    assert!(lines[3].ends_with("would-fail,permission: ec2:CreateTags: UnauthorizedOperation,,"), "{}", lines[3]);
    let page = html("t <x>", "s3://b/p", std::slice::from_ref(&c));
    assert!(page.contains("33.3%") && page.contains("t &lt;x&gt;") && !page.contains("<script"));
    assert!(!page.contains("href=") && !page.contains("src="));
    let t = table(std::slice::from_ref(&c));
    assert!(t.contains("team: legacy → platform") && t.contains("permission 1"), "{t}");
    let totals = totals(&[c]);
    assert_eq!(totals.by_account["111122223333"], TypeCompliance { in_line: 1, drifted: 2 });
    assert_eq!(account_of("/subscriptions/AbC/resourceGroups/rg/providers/x/y/z").as_deref(), Some("AbC"));
    assert_eq!(account_of_part("aws:444455556666/eu-west-1+global"), "444455556666");
}
