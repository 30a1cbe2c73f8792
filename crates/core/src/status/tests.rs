use super::*;
use crate::mode::ClusterMode;
use crate::report::ChangeRecord;

#[test]
fn names_and_states() {
    let f = |r: &str| ResourceFailure::new(r, "t", "e").name;
    assert_eq!(f("arn:aws:ec2:us-east-1:111122223333:instance/i-0abc"), "i-0abc");
    assert_eq!(f("arn:aws:s3:::my-bucket"), "my-bucket");
    assert_eq!(f("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d1/"), "d1");
    let r = |v: Option<&str>, e: &[&str]| {
        StatusReport::new(
            Cloud::Aws,
            &"ssm:/p",
            v.map(str::to_owned),
            e.iter().map(|s| s.to_string()).collect(),
            vec![],
        )
        .policy
        .state
    };
    assert_eq!(
        (r(Some("v"), &[]), r(Some("v"), &["bad"]), r(None, &[])),
        (PolicyState::Ok, PolicyState::RejectedKeepingLastGood, PolicyState::Unavailable)
    );
    let sweep = StatusReport::of_sweep(
        Cloud::Azure,
        &"x",
        "v",
        Standing { state: PolicyState::UnreadableKeepingLastGood, errors: vec!["gone".into()] },
        &[],
    );
    assert_eq!((sweep.policy.state, sweep.policy.errors.len()), (PolicyState::UnreadableKeepingLastGood, 1));
}

#[test]
fn failed_and_over_limit_records_are_failures() {
    let r = crate::resource::ResourceRef::ec2("i-0abc", "us-east-1", "111122223333");
    let failed = Record::failed(Cloud::Aws, &r, "v", "Throttling".into());
    let mut over = failed.clone();
    (over.status, over.error) = (Status::LimitExceeded, None);
    let mut fine = failed.clone();
    (fine.status, fine.error) = (Status::Applied, None);
    let sweep = StatusReport::of_sweep(
        Cloud::Aws,
        &"s3://b/p",
        "v",
        Standing { state: PolicyState::Ok, errors: vec![] },
        &[failed, over, fine],
    );
    let errors: Vec<&str> = sweep.failures.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0] == "Throttling" && errors[1].contains("tag limit"), "{errors:?}");
    assert_eq!(sweep.failures[0].name, "i-0abc");
}

#[test]
fn a_part_is_an_id_prefix_without_case() {
    let sub = "/subscriptions/AAAA";
    assert!(in_part("/subscriptions/aaaa/resourceGroups/rg/providers/Microsoft.Compute/disks/d", sub));
    assert!(in_part("/subscriptions/aaaa", "/subscriptions/AAAA/"));
    assert!(!in_part("/subscriptions/aaaab/resourceGroups/rg", sub), "a longer id is another subscription");
    assert!(!in_part("/subscriptions/bbbb/resourceGroups/rg", sub));
    assert!(!in_part("/subscriptions/aa", sub));

    let east = aws_region_part("111122223333", "us-east-1", true);
    let west = aws_region_part("111122223333", "us-west-2", false);
    let vpc = "arn:aws:ec2:us-east-1:111122223333:vpc/vpc-1";
    assert!(in_part(vpc, &east) && !in_part(vpc, &west));
    assert!(!in_part("arn:aws:ec2:us-east-1:444455556666:vpc/vpc-1", &east), "another account");
    for global in ["arn:aws:iam::111122223333:role/r", "arn:aws:route53:::hostedzone/Z1"] {
        assert!(in_part(global, &east) && !in_part(global, &west), "{global}");
    }
    let listing = "kubernetes.io/cluster/a-1 in 111122223333/us-west-2";
    assert!(in_part(listing, &west) && !in_part(listing, &east));
}

/// A bucket's ARN names no region, so the shard that listed it (its own region's)
/// stamps it; the global region's shard neither erases nor keeps it for that region.
#[test]
fn a_bucket_failure_belongs_to_the_region_that_listed_it() {
    let bucket = |error: &str| ResourceFailure::new("arn:aws:s3:::prod-7xk2p-registry", "s3:bucket", error);
    let of = |failures: Vec<ResourceFailure>| StatusReport::new(Cloud::Aws, &"x", Some("v".into()), vec![], failures);
    let east = aws_region_part("111122223333", "us-east-1", true);
    let west = aws_region_part("111122223333", "eu-west-1", false);

    let first = of(vec![bucket("AccessDenied")]).merged_into(None, &west);
    assert_eq!(first.failures[0].region.as_deref(), Some("eu-west-1"));
    let json = serde_json::to_string(&first).expect("json");
    let first: StatusReport = serde_json::from_str(&json).expect("read back");
    assert!(first.failures[0].in_part(&west) && !first.failures[0].in_part(&east));

    let after_east = of(vec![]).merged_into(Some(first), &east);
    assert_eq!(after_east.failures.len(), 1, "the global region's sweep keeps eu-west-1's bucket failure");
    let after_west = of(vec![]).merged_into(Some(after_east), &west);
    assert!(after_west.failures.is_empty(), "eu-west-1's next sweep replaces it: {:?}", after_west.failures);

    // A report written before buckets had a region: the bucket falls in the global part.
    assert!(bucket("x").in_part(&east) && !bucket("x").in_part(&west));
    assert!(!is_bucket_arn("arn:aws:iam::111122223333:role/r") && !is_bucket_arn("arn:aws:s3:::b/key"));
    assert!(is_bucket_arn("arn:aws-cn:s3:::b"));
}

#[test]
fn parts_swept_apart_add_up_and_replace_only_their_own_failures() {
    let fail = |id: &str| ResourceFailure::new(id, "microsoft.compute/disks", "refused");
    let of = |failures: Vec<ResourceFailure>| StatusReport::new(Cloud::Azure, &"x", Some("v".into()), vec![], failures);
    let a = "/subscriptions/a";
    let b = "/subscriptions/b";
    let first = of(vec![fail("/subscriptions/a/d/1")]).merged_into(None, a);
    let second = of(vec![fail("/subscriptions/b/d/2")]).merged_into(Some(first), b);
    let names = |r: &StatusReport| {
        let mut n: Vec<String> = r.failures.iter().map(|f| f.resource.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&second), ["/subscriptions/a/d/1", "/subscriptions/b/d/2"]);
    assert_eq!(second.parts.keys().collect::<Vec<_>>(), [a, b]);
    // Part a again, in line now: its failure goes, b's stays; part keys compare without case.
    let again = of(vec![]).merged_into(Some(second), "/subscriptions/A/");
    assert_eq!(names(&again), ["/subscriptions/b/d/2"]);
    assert_eq!(again.parts.len(), 2, "{:?}", again.parts);
    let json = serde_json::to_string(&again).expect("json");
    let back: StatusReport = serde_json::from_str(&json).expect("read back");
    assert_eq!(back.parts, again.parts);
    let whole = of(vec![]);
    assert!(!serde_json::to_string(&whole).expect("json").contains("parts"), "a whole sweep names no part");
}

/// Within an SSM parameter, counts not yet at the contest go before the sweep's failures, and
/// a contested key goes last.
#[test]
fn counts_give_way_to_failures_and_contests_stay() {
    let entry = |i: usize, contested: bool| Contest {
        resource: format!("arn:aws:ec2:us-east-1:111122223333:instance/i-{i:017}"),
        key: "team".into(),
        policy: "p.yaml@etag".into(),
        corrections: vec![1_700_000_000],
        writer: Some("arn:aws:iam::111122223333:user/bob".into()),
        contested_since: contested.then_some(1_700_000_100),
        hold_until: contested.then_some(1_700_003_700),
        holds: u32::from(contested),
    };
    let failures = vec![ResourceFailure::new("arn:aws:ec2:us-east-1:111122223333:instance/i-1", "ec2:instance", "x")];
    let mut r = StatusReport::new(Cloud::Aws, &"ssm:/p", Some("v".into()), vec![], failures);
    r.contests = (0..30).map(|i| entry(i, i == 0)).collect();
    let json = r.to_json_within(4096);
    let back: StatusReport = serde_json::from_str(&json).expect("a report");
    assert!(json.len() <= 4096);
    assert_eq!((back.failures.len(), back.contests.len()), (1, 1), "{json}");
    assert!(back.contests[0].is_contested());
}

/// The audit section from a sweep's records: each outcome in its count, the audited changes
/// listed before → after, the list capped and said so, parts adding up.
#[test]
fn an_audit_summary_counts_every_outcome_and_lists_the_would_be_writes() {
    let r = |i: usize| crate::resource::ResourceRef::ec2(&format!("i-{i:04}"), "us-east-1", "111122223333");
    let change = |k: &str| ChangeRecord { key: k.into(), old: Some("old".into()), new: "new".into() };
    let with = |i: usize, status: Status| {
        let mut rec = Record::failed(Cloud::Aws, &r(i), "v", String::new());
        (rec.status, rec.error, rec.failure) = (status, None, None);
        rec
    };
    let mut records = vec![with(0, Status::Unchanged), with(1, Status::Applied)];
    let mut would = with(2, Status::WouldApply);
    would.audited = vec![change("team")];
    records.push(would);
    let mut mixed = with(3, Status::Applied);
    (mixed.changes, mixed.audited) = (vec![change("env")], vec![change("team")]);
    records.push(mixed);
    records.push(with(4, Status::LimitExceeded));
    records.push(with(5, Status::Unsupported));
    let mut contested = with(6, Status::Contested);
    contested.contested = vec!["team".into()];
    records.push(contested);
    let mut denied = with(7, Status::Failed);
    (denied.changes, denied.error) = (vec![change("team")], Some("AccessDenied: not allowed".into()));
    records.push(denied);
    let mut unreadable = with(8, Status::Failed);
    unreadable.error = Some("Throttling".into());
    records.push(unreadable);
    records.push(Record::listing_failed(
        Cloud::Aws,
        "iam".into(),
        "ListRoles".into(),
        "v",
        crate::report::Failure::Permanent,
        "denied".into(),
    ));
    records.push(with(9, Status::NotOwned));

    let a = AuditSummary::of(ClusterMode::Mixed, &records);
    let c = &a.counts;
    assert_eq!((c.in_line, c.drifted, c.owned, c.written, c.would_write), (2, 5, 8, 2, 2), "{c:?}");
    assert_eq!(
        (
            c.would_fail.tag_limit,
            c.would_fail.unsupported,
            c.would_fail.permission,
            c.would_fail.other,
            c.would_fail.contested
        ),
        (1, 1, 1, 0, 1)
    );
    assert_eq!(c.unreadable, 2, "a failed listing and a failed read");
    assert_eq!(c.by_type["ec2:instance"], TypeCompliance { in_line: 2, drifted: 5 });
    assert_eq!(a.writes.len(), 2);
    assert_eq!(a.writes[0].changes, [AuditedChange { key: "team".into(), old: Some("old".into()), new: "new".into() }]);
    let json = serde_json::to_value(&a).expect("json");
    assert_eq!(json["mode"], "mixed");
    assert_eq!(json["would_fail"]["tag_limit"], 1);
    assert_eq!(json["by_type"]["ec2:instance"]["drifted"], 5);
    assert_eq!(json["writes"][0]["type"], "ec2:instance");
    assert_eq!(json["truncated"], false);

    // Capped, and said so.
    let many: Vec<Record> = (0..AUDIT_WRITES_MAX + 5)
        .map(|i| {
            let mut rec = with(i, Status::WouldApply);
            rec.audited = vec![change("team")];
            rec
        })
        .collect();
    let big = AuditSummary::of(ClusterMode::Audit, &many);
    assert_eq!(
        (big.writes.len(), big.truncated, big.counts.would_write),
        (AUDIT_WRITES_MAX, true, AUDIT_WRITES_MAX as u64 + 5)
    );

    // Parts add up: each part's counts replace its own.
    let east = aws_region_part("111122223333", "us-east-1", true);
    let west = aws_region_part("111122223333", "us-west-2", false);
    let report = |audit: AuditSummary| StatusReport {
        audit: Some(audit),
        ..StatusReport::new(Cloud::Aws, &"x", Some("v".into()), vec![], vec![])
    };
    let first = report(AuditSummary::of(ClusterMode::Audit, &records)).merged_into(None, &east);
    let second = report(AuditSummary::of(ClusterMode::Audit, &records[..1])).merged_into(Some(first), &west);
    let audit = second.audit.as_ref().expect("audit");
    assert_eq!((audit.counts.in_line, audit.parts.len()), (3, 2));
    let again = report(AuditSummary::of(ClusterMode::Audit, &records[..1])).merged_into(Some(second), &east);
    let audit = again.audit.expect("audit");
    assert_eq!((audit.counts.in_line, audit.counts.would_write, audit.writes.len()), (2, 0, 0));

    // Within an SSM parameter, the list goes first and says so.
    let fit = report(big).to_json_within(4096);
    let back: StatusReport = serde_json::from_str(&fit).expect("report");
    let audit = back.audit.expect("audit");
    assert!(fit.len() <= 4096 && audit.truncated && audit.counts.would_write == AUDIT_WRITES_MAX as u64 + 5);
}

#[test]
fn fits_an_ssm_parameter() {
    let failures =
        (0..500).map(|i| ResourceFailure::new(&format!("i-{i:017}"), "ec2:instance", "AccessDenied")).collect();
    let r = StatusReport::new(Cloud::Aws, &"ssm:/p", Some("v".into()), vec![], failures);
    assert!(r.to_json_within(4096).len() <= 4096);
}
