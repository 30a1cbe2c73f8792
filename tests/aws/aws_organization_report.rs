//! `tagwarden status --organization s3://BUCKET/PREFIX/ --format json|csv|html` on moto: the
//! organization per account — in line vs drifted from each cluster's status report (its audit
//! parts in the account), owned, failed, refused and last sweep from the hub's shard outcomes —
//! with every cluster's audit beside; the three formats agree, and the page is self-contained
//! (opened in headless Chromium when it is installed, as `tests/audit_report.rs` does).

use std::process::Command;

use serde_json::{json, Value};

use crate::support;

const A: &str = "111122223333";
const B: &str = "444455556666";
const C: &str = "777788889999";

fn shard(account: &str, region: &str, cluster: &str, owned: u64, in_line: u64, failed: u64) -> Value {
    json!({"account": account, "region": region, "clusters": [cluster], "finished_at_ms": 1_795_531_200_000u64,
           "seconds": 1.5, "owned": owned, "in_line": in_line, "written": 0, "failed": failed, "gone": 0, "api_calls": 9})
}

fn part(owned: u64, in_line: u64, drifted: u64) -> Value {
    json!({"owned": owned, "in_line": in_line, "drifted": drifted, "written": 0, "would_write": drifted,
           "would_fail": {"tag_limit": 0, "unsupported": 0, "permission": 0, "other": 0, "contested": 0},
           "unreadable": 0, "by_type": {"ec2:instance": {"in_line": in_line, "drifted": drifted}}})
}

fn report(mode: &str, parts: &[(String, Value)], writes: Value) -> Value {
    let mut audit = json!({"mode": mode, "writes": writes, "truncated": false, "parts": {}});
    let (mut owned, mut in_line, mut drifted) = (0, 0, 0);
    for (name, p) in parts {
        owned += p["owned"].as_u64().unwrap_or(0);
        in_line += p["in_line"].as_u64().unwrap_or(0);
        drifted += p["drifted"].as_u64().unwrap_or(0);
        audit["parts"][name] = p.clone();
    }
    let top = part(owned, in_line, drifted);
    for (k, v) in top.as_object().expect("counts") {
        audit[k] = v.clone();
    }
    json!({"generated_at": 1_795_531_200u64, "cloud": "aws",
           "policy": {"location": "s3://x", "state": "ok", "version": "v1", "errors": []},
           "failures": [], "audit": audit})
}

fn run(vars: &[(&'static str, String)], args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tagwarden"))
        .args(args)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("tagwarden runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text a person sees in the page: tags dropped, spaces collapsed.
fn text_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&").split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn the_organization_status_per_account_as_json_csv_and_a_page() {
    let (clients, hub, vars) = support::account_with_env().await;
    let bucket = format!("org-report-{hub}");
    clients.s3.create_bucket().bucket(&bucket).send().await.expect("bucket");
    let put = |key: String, body: Value| {
        let s3 = clients.s3.clone();
        let bucket = bucket.clone();
        async move {
            s3.put_object()
                .bucket(bucket)
                .key(key)
                .body(body.to_string().into_bytes().into())
                .send()
                .await
                .expect("put");
        }
    };
    // The hub's shard outcomes: two regions of A, one of B (a failure), C refused.
    put(format!("accounts/_organization/{A}/us-east-1.json"), shard(A, "us-east-1", "prod-7xk2p", 6, 4, 0)).await;
    put(format!("accounts/_organization/{A}/eu-west-1.json"), shard(A, "eu-west-1", "prod-7xk2p", 4, 3, 0)).await;
    let mut b = shard(B, "us-east-1", "stage-4ab9c", 5, 4, 1);
    b["failures"] = json!([format!("arn:aws:ec2:us-east-1:{B}:instance/i-0b: ec2:CreateTags: UnauthorizedOperation")]);
    put(format!("accounts/_organization/{B}/us-east-1.json"), b).await;
    let mut c = shard(C, "us-east-1", "dev-1abcd", 0, 0, 0);
    c["refused"] =
        json!("sts:AssumeRole on arn:aws:iam::777788889999:role/tagwarden-member: AccessDenied (deploy the spoke)");
    put(format!("accounts/_organization/{C}/us-east-1.json"), c).await;
    // The clusters' status reports, each region a part of its audit; C's cluster has none.
    let instance = format!("arn:aws:ec2:us-east-1:{A}:instance/i-0aaaaaaaaaaaaaaa1");
    let writes = json!([{"resource": instance, "type": "ec2:instance",
                         "changes": [{"key": "team", "old": "legacy", "new": "platform"}]}]);
    let prod = report(
        "audit",
        &[(format!("aws:{A}/us-east-1+global"), part(6, 4, 2)), (format!("aws:{A}/eu-west-1"), part(4, 3, 1))],
        writes,
    );
    put(format!("accounts/{A}/prod-7xk2p/tagwarden-status.json"), prod).await;
    let stage = report("mixed", &[(format!("aws:{B}/us-east-1+global"), part(5, 4, 1))], json!([]));
    put(format!("accounts/{B}/stage-4ab9c/tagwarden-status.json"), stage).await;
    let folder = format!("s3://{bucket}/accounts/");

    // JSON: each account's figures, the totals and each cluster's audit.
    let (code, out, err) = run(&vars, &["status", "--organization", &folder, "--format", "json"]);
    assert_eq!(code, 2, "a failure and a refused account exit 2, as the table does: {err}");
    let j: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let accounts = j["accounts"].as_array().expect("accounts");
    let row = |a: &str| accounts.iter().find(|r| r["account"] == a).cloned().unwrap_or_else(|| panic!("{a}: {j:#}"));
    let figures = |a: &str| {
        let r = row(a);
        (
            r["clusters"].as_u64(),
            r["owned"].as_u64(),
            r["in_line"].as_u64(),
            r["drifted"].as_u64(),
            r["failed"].as_u64(),
        )
    };
    assert_eq!(figures(A), (Some(1), Some(10), Some(7), Some(3), Some(0)), "{j:#}");
    assert_eq!(figures(B), (Some(1), Some(5), Some(4), Some(1), Some(1)));
    assert_eq!((row(A)["compliance"].as_f64(), row(B)["compliance"].as_f64()), (Some(70.0), Some(80.0)));
    assert!(row(C)["refused"].as_str().is_some_and(|w| w.contains("AccessDenied")) && row(C)["drifted"].is_null());
    let clusters: Vec<&str> =
        j["clusters"].as_array().expect("clusters").iter().filter_map(|c| c["cluster"].as_str()).collect();
    assert_eq!(clusters, [format!("{A}/prod-7xk2p"), format!("{B}/stage-4ab9c")]);
    assert_eq!((j["totals"]["in_line"].as_u64(), j["totals"]["drifted"].as_u64()), (Some(11), Some(4)));

    // CSV: one row per account, the same figures.
    let (code, csv, err) = run(&vars, &["status", "--organization", &folder, "--format", "csv"]);
    assert_eq!(code, 2, "{err}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "account,clusters,owned,in_line,drifted,compliance,failed,last_sweep_ms,refused,unreached");
    assert_eq!(lines[1], format!("{A},1,10,7,3,70.0,0,1795531200000,,false"));
    assert_eq!(lines[2], format!("{B},1,5,4,1,80.0,1,1795531200000,,false"));
    assert!(lines[3].starts_with(&format!("{C},1,0,0,,,0,1795531200000,sts:AssumeRole")), "{}", lines[3]);
    assert_eq!(lines.len(), 4);

    // The page: the accounts first, then the clusters' audit; nothing outside it.
    let dir = std::env::temp_dir().join(format!("tagwarden-org-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let page = dir.join("organization.html");
    let (code, _, err) =
        run(&vars, &["status", "--organization", &folder, "--format", "html", "--out", page.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    let html = std::fs::read_to_string(&page).expect("page");
    for outside in ["http://", "https://", "src=", "href=", "<script", "url(", "<link"] {
        assert!(!html.contains(outside), "the page holds {outside:?}");
    }
    let text = text_of(&html);
    for figure in [
        format!("{A} 7 in line · 3 drifted · 70.0%"),
        format!("{B} 4 in line · 1 drifted · 80.0%"),
        format!("{A} 1 10 7 3 70.0% 0"),
        format!("{C} 1 0 0 n/a n/a 0"),
        "refused: sts:AssumeRole".to_string(),
        format!("{A}/prod-7xk2p audit 10 7 3 3"),
        "team legacy → platform".to_string(),
        "73.3% compliance".to_string(),
    ] {
        assert!(text.contains(&figure), "the page lacks {figure:?}:\n{text}");
    }
    assert!(html.contains("<table id=\"accounts\">"));

    // Rendered by a real browser, when one is installed (scripts/test requires it).
    let browser = std::env::var_os("TAGWARDEN_CHROMIUM").map(std::path::PathBuf::from).or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
            .find(|p| p.is_file())
    });
    let Some(browser) = browser else {
        assert!(std::env::var_os("TAGWARDEN_REQUIRE_BROWSER").is_none(), "Chromium is not installed");
        eprintln!("SKIPPED: Chromium is not installed: the organization page was not rendered");
        return;
    };
    let out = Command::new(browser)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--proxy-server=127.0.0.1:9", "--dump-dom"])
        .args(["--host-resolver-rules=MAP * ~NOTFOUND", "--no-first-run", "--disable-background-networking"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rendered = text_of(&String::from_utf8_lossy(&out.stdout));
    assert!(
        rendered.contains(&format!("{A} 7 in line · 3 drifted · 70.0%")) && rendered.contains("73.3% compliance"),
        "{rendered}"
    );
}
