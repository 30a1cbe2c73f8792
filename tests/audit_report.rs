//! The audit report a person reads: `tagwarden status --format table|json|csv|html` of a known
//! cluster set (`tests/fixtures/audit/clusters/*/`, two clusters' status reports with their audit
//! sections), checked for agreement between the CSV, the JSON and the page, and the page opened
//! in a real headless browser (Debian's Chromium, `scripts/install-tools chromium`) with no
//! network: its rendered text shows the figures, a screenshot is saved (its path printed), and
//! the browser's network log shows no request the page made.
//!
//! Without Chromium the browser part is skipped with a message, unless
//! `TAGWARDEN_REQUIRE_BROWSER=1` (scripts/test sets it), which fails instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn set() -> String {
    format!("{}/tests/fixtures/audit/clusters/*/", env!("CARGO_MANIFEST_DIR"))
}

fn tagwarden(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tagwarden")).args(args).output().expect("tagwarden runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tagwarden-audit-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The text a person sees: tags dropped, entities of the page decoded, spaces collapsed.
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
    let out = out.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_csv_the_json_and_the_page_agree() {
    let dir = temp_dir();
    let (html_path, csv_path) = (dir.join("audit.html"), dir.join("audit.csv"));
    let (code, _, err) =
        tagwarden(&["status", "--policy", &set(), "--format", "html", "--out", html_path.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "a failure in the reports exits 2 as the table does: {err}");
    let (code, _, err) =
        tagwarden(&["status", "--policy", &set(), "--format", "csv", "--out", csv_path.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    let (_, raw, err) = tagwarden(&["status", "--policy", &set(), "--json"]);
    let raw: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("--json: {e}: {err}"));
    let (_, figures, _) = tagwarden(&["status", "--policy", &set(), "--format", "json"]);
    let figures: Value = serde_json::from_str(&figures).expect("--format json");
    let (code, table, _) = tagwarden(&["status", "--policy", &set()]);
    assert_eq!(code, 2);

    let html = std::fs::read_to_string(&html_path).expect("page");
    let csv = std::fs::read_to_string(&csv_path).expect("csv");
    let page = text_of(&html);

    // Self-contained: nothing it could fetch, follow or run.
    for outside in ["http://", "https://", "src=", "href=", "<script", "url(", "@import", "<link", "<iframe", "<object"]
    {
        assert!(!html.contains(outside), "the page holds {outside:?}");
    }

    // --json is the reports as written: its audit sections are the source of every figure.
    let clusters = raw["clusters"].as_array().expect("a set's clusters");
    assert_eq!(clusters.len(), 2);
    let (mut in_line, mut drifted, mut writes) = (0, 0, 0);
    let mut by_type: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for c in clusters {
        let id = c["infraID"].as_str().expect("infraID");
        let a = &c["report"]["audit"];
        let (i, d) = (a["in_line"].as_u64().expect("in_line"), a["drifted"].as_u64().expect("drifted"));
        (in_line, drifted) = (in_line + i, drifted + d);
        let rows: u64 = a["writes"]
            .as_array()
            .expect("writes")
            .iter()
            .map(|w| w["changes"].as_array().map_or(0, Vec::len) as u64)
            .sum();
        writes += rows;
        // The page's row for the cluster, and the table's, carry its counts.
        let owned = a["owned"].as_u64().expect("owned");
        let want = format!("{id} {} {owned} {i} {d} {}", a["mode"].as_str().expect("mode"), a["would_write"]);
        assert!(page.contains(&want), "the page lacks {want:?}: {page}");
        let pct = format!("{:.1}%", i as f64 * 100.0 / (i + d) as f64);
        assert!(page.contains(&pct) && table.contains(&pct), "{pct}");
        assert_eq!(
            csv.lines().filter(|l| l.starts_with(&format!("{id},")) && l.contains(",would-write,")).count() as u64,
            rows,
            "{csv}"
        );
        for (ty, k) in a["by_type"].as_object().expect("by_type") {
            let e = by_type.entry(ty.clone()).or_insert((0, 0));
            (e.0, e.1) = (e.0 + k["in_line"].as_u64().unwrap_or(0), e.1 + k["drifted"].as_u64().unwrap_or(0));
        }
    }
    // Per resource type, every cluster's together.
    for (ty, (i, d)) in &by_type {
        let bar = format!("{ty} {i} in line · {d} drifted");
        assert!(page.contains(&bar), "the page lacks the bar {bar:?}");
    }
    let total = format!("{:.1}%", in_line as f64 * 100.0 / (in_line + drifted) as f64);
    assert_eq!((in_line, drifted, total.as_str()), (12, 5, "70.6%"));
    assert!(page.contains(&format!("{total} compliance")), "the headline compliance: {page}");
    assert_eq!(figures["totals"]["compliance"].as_f64(), Some(70.6));
    assert_eq!(
        (figures["totals"]["in_line"].as_u64(), figures["totals"]["drifted"].as_u64()),
        (Some(in_line), Some(drifted))
    );
    assert_eq!(figures["totals"]["write_rows"].as_u64(), Some(writes));
    assert_eq!(csv.lines().filter(|l| l.contains(",would-write,")).count() as u64, writes);
    let tile = format!("{} would write", figures["totals"]["would_write"]);
    assert!(page.contains(&tile), "{tile}");
    // Per account: each cluster's resources name one account.
    assert!(page.contains("111122223333 8 in line · 3 drifted · 72.7%"), "{page}");
    assert!(page.contains("444455556666 4 in line · 2 drifted · 66.7%"), "{page}");
    // The would-be writes, key by key, and the failures with their reason.
    assert!(page.contains("team legacy → platform") && page.contains("cost-center (none) → 4242"), "{page}");
    assert!(csv.contains("prod-7xk2p,111122223333,ec2:instance,arn:aws:ec2:eu-west-1:111122223333:instance/i-0aaaaaaaaaaaaaaa1,team,legacy,platform,would-write,"), "{csv}");
    assert!(csv.contains(",would-fail,permission: elasticloadbalancing:AddTags: AccessDenied"), "{csv}");
    assert!(
        table.contains("team: legacy → platform") && table.contains("would fail: tag limit 1, unsupported 1"),
        "{table}"
    );
}

/// Debian's Chromium, if installed: `TAGWARDEN_CHROMIUM`, else `chromium` or `chromium-browser`.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TAGWARDEN_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n))).find(|p| p.is_file())
}

/// Run headless Chromium on `page` with no network (every name unresolvable, a proxy that
/// refuses), recording its network log; what it printed, and the URLs the log names.
fn browse(browser: &Path, page: &Path, dir: &Path, name: &str, extra: &[&str]) -> (String, BTreeSet<String>) {
    let netlog = dir.join(format!("{name}.netlog.json"));
    let profile = dir.join(format!("{name}.profile"));
    let out = Command::new(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let log = std::fs::read_to_string(&netlog).unwrap_or_default();
    let urls = regex::Regex::new(r#""url":"([^"]*)""#).expect("regex");
    let hosts = urls
        .captures_iter(&log)
        .map(|c| {
            let url = &c[1];
            url.split("://").nth(1).and_then(|r| r.split(['/', ':', '?']).next()).unwrap_or(url).to_string()
        })
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), hosts)
}

#[test]
fn the_page_in_headless_chromium_without_network() {
    let Some(browser) = chromium() else {
        let why = "Chromium is not installed (scripts/install-tools chromium, or apt-get install chromium): the browser check did not run";
        assert!(std::env::var_os("TAGWARDEN_REQUIRE_BROWSER").is_none(), "{why}");
        eprintln!("SKIPPED: {why}");
        return;
    };
    let dir = temp_dir();
    let page = dir.join("report.html");
    let (code, _, err) =
        tagwarden(&["status", "--policy", &set(), "--format", "html", "--out", page.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");

    // What the browser asks for on its own (an empty page), and proof the log sees a page's
    // requests (a page that asks for an image elsewhere).
    let blank = dir.join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><title>blank</title>").expect("blank");
    let canary = dir.join("canary.html");
    std::fs::write(&canary, "<!DOCTYPE html><img src=\"http://tagwarden-canary.invalid/x.png\">").expect("canary");
    let (_, baseline) = browse(&browser, &blank, &dir, "blank", &["--dump-dom"]);
    let (_, seen) = browse(&browser, &canary, &dir, "canary", &["--dump-dom"]);
    assert!(seen.contains("tagwarden-canary.invalid"), "the network log shows a page's request: {seen:?}");

    let (dom, hosts) = browse(&browser, &page, &dir, "report", &["--dump-dom"]);
    let page_requests: Vec<&String> = hosts.difference(&baseline).collect();
    assert!(page_requests.is_empty(), "the page made requests: {page_requests:?} (the browser alone: {baseline:?})");
    let text = text_of(&dom);
    for figure in [
        "70.6% compliance",
        "prod-7xk2p audit 12 8 3 2 1 1 0 0 0 1 72.7%",
        "stage-4ab9c mixed 6 4 2 1 0 0 1 0 0 0 66.7%",
        "ec2:instance 6 in line · 3 drifted · 66.7%",
        "s3:bucket 1 in line · 1 drifted · 50.0%",
        "111122223333 8 in line · 3 drifted · 72.7%",
        "team legacy → platform",
        "env dev → staging",
        "cost-center 1111 → 4242",
        "permission",
    ] {
        assert!(text.contains(figure), "the rendered page lacks {figure:?}:\n{text}");
    }

    let shot = std::env::var_os("TAGWARDEN_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("tagwarden-audit-report.png"));
    let _ = std::fs::remove_file(&shot);
    let (_, hosts) = browse(
        &browser,
        &page,
        &dir,
        "screenshot",
        &[&format!("--screenshot={}", shot.display()), "--window-size=1280,1600", "--hide-scrollbars"],
    );
    assert!(hosts.difference(&baseline).next().is_none(), "{hosts:?}");
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000, "{} bytes", png.len());
    // The PNG's size, from its header: the window asked for.
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().expect("w")),
        u32::from_be_bytes(png[20..24].try_into().expect("h")),
    );
    assert_eq!((w, h), (1280, 1600));
    println!("SCREENSHOT {}", shot.display());
    eprintln!("SCREENSHOT {}", shot.display());
}

/// A contested key, as an auditor reads it: the other writer (the principal the contest state
/// recorded from the event), its kind, and the documented way to end that fight, in the table,
/// `--json`, `--format json`, the CSV and the page.
#[test]
fn a_contested_key_names_the_other_writer_and_how_to_end_the_fight() {
    let dir = temp_dir().join("contested");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("policy.yaml"),
        "version: 1\ncloud: aws\ninfraID: prod-7xk2p\ntags:\n  team: platform\n  env: prod\n",
    )
    .expect("policy");
    let lb = "arn:aws:elasticloadbalancing:eu-west-1:111122223333:loadbalancer/app/web/50dc6c495c0c9188";
    let vol = "arn:aws:ec2:eu-west-1:111122223333:volume/vol-0aaaaaaaaaaaaaaa1";
    let lbc = "arn:aws:sts::111122223333:assumed-role/prod-aws-load-balancer-controller/1795531100123456789";
    let capa = "arn:aws:sts::111122223333:assumed-role/controllers.cluster-api-provider-aws.sigs.k8s.io/1795531100";
    let contest = |resource: &str, key: &str, writer: &str| {
        serde_json::json!({"resource": resource, "key": key, "policy": "policy.yaml@1", "corrections": [1795531000, 1795531050, 1795531100],
                           "writer": writer, "contested_since": 1795531150, "hold_until": 1795534750, "holds": 1})
    };
    let report = serde_json::json!({
        "generated_at": 1795531200, "cloud": "aws",
        "policy": {"location": dir.display().to_string(), "state": "ok", "version": "v1", "errors": []},
        "failures": [],
        "contests": [contest(lb, "team", lbc), contest(vol, "env", capa)],
        "audit": {"mode": "enforce", "owned": 4, "in_line": 2, "drifted": 2, "written": 0, "would_write": 0,
                  "would_fail": {"tag_limit": 0, "unsupported": 0, "permission": 0, "other": 0, "contested": 2},
                  "unreadable": 0, "by_type": {"elasticloadbalancing:loadbalancer": {"in_line": 0, "drifted": 1}, "ec2:volume": {"in_line": 2, "drifted": 1}},
                  "writes": [], "truncated": false}
    });
    std::fs::write(dir.join("tagwarden-status.json"), report.to_string()).expect("report");
    let policy = dir.join("policy.yaml").display().to_string();

    let (code, table, err) = tagwarden(&["status", "--policy", &policy]);
    assert_eq!(code, 2, "a contested key is not in line: {err}");
    for line in [
        format!("writer: aws-load-balancer-controller ({lbc})"),
        "end the fight: AWS Load Balancer Controller: give team the policy's value in the controller's --default-tags flag (Helm value defaultTags)".to_string(),
        format!("writer: capa ({capa})"),
        "end the fight: CAPA: put env with the policy's value in AWSCluster.spec.additionalTags".to_string(),
        "source: Cluster API Provider AWS: AWSCluster CRD field spec.additionalTags".to_string(),
    ] {
        assert!(table.contains(&line), "the table lacks {line:?}:\n{table}");
    }

    let (_, raw, _) = tagwarden(&["status", "--policy", &policy, "--json"]);
    let raw: Value = serde_json::from_str(&raw).expect("--json");
    assert_eq!(raw["contests"][0]["writer"], lbc, "the writer as recorded");
    assert_eq!(raw["contests"][0]["writer_kind"], "aws-load-balancer-controller");
    assert!(raw["contests"][1]["remedy"]["how"].as_str().expect("how").contains("AWSCluster.spec.additionalTags"));

    let (_, figures, _) = tagwarden(&["status", "--policy", &policy, "--format", "json"]);
    let figures: Value = serde_json::from_str(&figures).expect("--format json");
    let writers: Vec<&Value> = figures["clusters"][0]["failing"]
        .as_array()
        .expect("failing")
        .iter()
        .filter(|f| f["reason"] == "contested")
        .map(|f| &f["writer"])
        .collect();
    assert_eq!(
        writers.iter().map(|w| w["kind"].as_str()).collect::<Vec<_>>(),
        [Some("aws-load-balancer-controller"), Some("capa")]
    );
    assert_eq!(writers[1]["principal"], capa);

    let (_, csv, _) = tagwarden(&["status", "--policy", &policy, "--format", "csv"]);
    let header = csv.lines().next().expect("header");
    assert_eq!(header, "cluster,account,type,resource,key,before,after,status,reason,writer,remedy");
    let row = csv.lines().find(|l| l.contains(vol)).expect("the volume's row");
    assert!(
        row.contains(&format!(
            ",env,,,would-fail,contested: changed again and again by {capa},capa: {capa},CAPA: put env"
        )),
        "{row}"
    );

    let page_path = dir.join("contested.html");
    let (code, _, err) =
        tagwarden(&["status", "--policy", &policy, "--format", "html", "--out", page_path.to_str().expect("utf-8")]);
    assert_eq!(code, 2, "{err}");
    let page = text_of(&std::fs::read_to_string(&page_path).expect("page"));
    assert!(page.contains("Contested keys: the other writer and how to end the fight (2)"), "{page}");
    assert!(
        page.contains(&format!("team {lbc} aws-load-balancer-controller AWS Load Balancer Controller: give team")),
        "{page}"
    );
    assert!(
        page.contains("alb.ingress.kubernetes.io/tags")
            && page.contains("service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags")
    );
}
