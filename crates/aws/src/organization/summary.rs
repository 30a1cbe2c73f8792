//! The shards' outcomes and the organization summary read from them.

use super::*;

/// What a shard's sweep found, as written to `<prefix>_organization/<account>/<region>[-<group>].json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardReport {
    pub account: String,
    pub region: String,
    /// The account's cluster group, where it has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    /// How many groups the account's clusters were in: a group's outcome past them is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<usize>,
    pub clusters: Vec<String>,
    pub finished_at_ms: u64,
    pub seconds: f64,
    /// Owned resources swept.
    pub owned: usize,
    /// Owned resources in line with their policy when the sweep ended (unchanged or written).
    pub in_line: usize,
    pub written: usize,
    /// Owned resources with drift evaluated and not written (audit, or a dry run): what an
    /// enforced sweep would write. Absent in outcomes written before it was counted.
    #[serde(default)]
    pub would_write: usize,
    pub failed: usize,
    pub gone: usize,
    pub api_calls: u64,
    /// Why the member role could not be assumed, naming the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The first failures, `<resource>: <error>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

impl ShardReport {
    pub(super) fn of(shard: &Shard, clusters: Vec<String>, out: &Outcome, started: Instant, api_calls: u64) -> Self {
        let count = |s: Status| out.records.iter().filter(|r| r.status == s).count();
        let owned = out.records.iter().filter(|r| r.status != Status::NotOwned && r.infra_id.is_some()).count();
        ShardReport {
            account: shard.account.clone(),
            region: shard.region.clone(),
            group: shard.group,
            groups: None,
            clusters,
            finished_at_ms: tagwarden_core::report::epoch_ms(),
            seconds: started.elapsed().as_secs_f64(),
            owned,
            in_line: count(Status::Applied) + count(Status::Unchanged),
            written: count(Status::Applied),
            would_write: count(Status::WouldApply),
            failed: out.failed(),
            gone: count(Status::Gone),
            api_calls,
            refused: None,
            error: out.error.as_ref().map(ToString::to_string),
            failures: out
                .records
                .iter()
                .filter(|r| r.status == Status::Failed)
                .take(FAILURES_NAMED)
                .map(|r| format!("{}: {}", r.resource, r.error.as_deref().unwrap_or("failed")))
                .collect(),
        }
    }
}

/// The organization at a glance, from the shards' outcomes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub accounts: usize,
    pub clusters: usize,
    pub owned: usize,
    pub in_line: usize,
    /// What an enforced sweep would write (audit, dry runs).
    #[serde(default)]
    pub would_write: usize,
    pub failed: usize,
    /// Accounts whose member role was refused, with why.
    pub refused: BTreeMap<String, String>,
    /// Each account's last sweep: the oldest of its regions' (ms since the epoch).
    pub last_sweep_ms: BTreeMap<String, u64>,
    /// Accounts the last scheduled run did not reach before its deadline (taken first next run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreached: Vec<String>,
    pub shards: Vec<ShardReport>,
}

impl Summary {
    /// The summary of the shards' outcomes. Where an account-region was swept both whole and in
    /// groups (its clusters outgrew one session, or shrank back), only the newer way counts.
    pub fn of(mut shards: Vec<ShardReport>) -> Self {
        let mut newest: BTreeMap<(String, String, bool), u64> = BTreeMap::new();
        for r in &shards {
            let at = newest.entry((r.account.clone(), r.region.clone(), r.group.is_some())).or_default();
            *at = (*at).max(r.finished_at_ms);
        }
        shards.retain(|r| {
            let other = newest.get(&(r.account.clone(), r.region.clone(), r.group.is_none())).copied().unwrap_or(0);
            newest[&(r.account.clone(), r.region.clone(), r.group.is_some())] >= other
        });
        // A group past the newest count of its account-region's groups is gone (repacked smaller).
        let mut counts: BTreeMap<(String, String), (u64, usize)> = BTreeMap::new();
        for r in shards.iter().filter(|r| r.group.is_some()) {
            let c = counts.entry((r.account.clone(), r.region.clone())).or_insert((0, usize::MAX));
            if r.finished_at_ms >= c.0 {
                *c = (r.finished_at_ms, r.groups.unwrap_or(usize::MAX));
            }
        }
        shards.retain(|r| r.group.is_none_or(|g| g < counts[&(r.account.clone(), r.region.clone())].1));
        let mut s = Summary::default();
        let mut clusters = BTreeSet::new();
        for r in &shards {
            clusters.extend(r.clusters.iter().map(|c| (r.account.clone(), c.clone())));
            s.owned += r.owned;
            s.in_line += r.in_line;
            s.would_write += r.would_write;
            s.failed += r.failed;
            if let Some(why) = &r.refused {
                s.refused.insert(r.account.clone(), why.clone());
            }
            let last = s.last_sweep_ms.entry(r.account.clone()).or_insert(r.finished_at_ms);
            *last = (*last).min(r.finished_at_ms);
        }
        s.accounts = s.last_sweep_ms.len();
        s.clusters = clusters.len();
        s.shards = shards;
        s
    }
}

impl Organization {
    pub(super) fn report_key(&self, report: &ShardReport) -> String {
        let group = report.group.map(|g| format!("-{g}")).unwrap_or_default();
        format!("{}{SHARDS_FOLDER}{}/{}{group}.json", self.config.prefix, report.account, report.region)
    }

    pub(super) async fn write_report(&self, report: &ShardReport) -> Result<(), CloudError> {
        self.put_own(&self.report_key(report), report).await
    }

    /// Write `value` as JSON at `key` of the hub's bucket (its own folder: shard outcomes, its state).
    pub(super) async fn put_own(&self, key: &str, value: &impl serde::Serialize) -> Result<(), CloudError> {
        let body = serde_json::to_vec_pretty(value).unwrap_or_default();
        self.hub
            .s3
            .put_object()
            .bucket(&self.config.bucket)
            .key(key)
            .content_type("application/json")
            .body(body.into())
            .send()
            .await
            .map_err(|e| crate::error::from_sdk("s3:PutObject", key, e))?;
        Ok(())
    }

    /// The organization summary, from every shard outcome written so far: only what the hub
    /// enforces now (an account or region it left keeps no place in it), as the last scheduled
    /// run found it (accounts over the cap, not reached; a refused account's clusters).
    pub async fn summary(&self) -> Result<Summary, CloudError> {
        let shards = read_shards(&self.hub, &self.config.bucket, &self.config.prefix).await?;
        let last = self.read_state().await.unwrap_or_default();
        let accounts = self
            .config
            .clusters
            .iter()
            .map(|(a, named)| {
                let clusters = match named {
                    Some(named) => named.iter().cloned().collect(),
                    None => self.known_clusters(a).or_else(|| last.accounts.get(a).cloned()).unwrap_or_default(),
                };
                (a.clone(), clusters)
            })
            .collect();
        let state = HubState { regions: self.config.regions.clone(), accounts, ..last };
        Ok(state.summary(shards))
    }
}

/// The organization summary under `s3://bucket/prefix`: every shard outcome, read; where the hub
/// recorded its last scheduled run ([`HubState`]), only the accounts and regions it enforces, as
/// [`Organization::summary`] has them.
pub async fn read_summary(hub: &Clients, bucket: &str, prefix: &str) -> Result<Summary, CloudError> {
    let shards = read_shards(hub, bucket, prefix).await?;
    Ok(match schedule::read_state(hub, bucket, prefix).await {
        Some(state) => state.summary(shards),
        None => Summary::of(shards),
    })
}

/// Every shard outcome under `s3://bucket/prefix` (`_organization/<account>/<region>….json`).
pub(super) async fn read_shards(hub: &Clients, bucket: &str, prefix: &str) -> Result<Vec<ShardReport>, CloudError> {
    let folder = format!("{prefix}{SHARDS_FOLDER}");
    let mut keys = Vec::new();
    let mut pages = hub.s3.list_objects_v2().bucket(bucket).prefix(&folder).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| crate::error::from_sdk("s3:ListObjectsV2", &folder, e))?;
        // An account's outcomes only: the hub's own state beside them is not one, nor are the
        // contest states (`contests/<account>/…`).
        let outcome = |k: &String| {
            k.ends_with(".json")
                && k.strip_prefix(&folder).is_some_and(|r| r.contains('/') && !r.starts_with(CONTESTS_SUBFOLDER))
        };
        keys.extend(page.contents().iter().filter_map(|o| o.key().map(str::to_owned)).filter(outcome));
    }
    let mut shards = Vec::with_capacity(keys.len());
    for key in keys {
        let got = hub.s3.get_object().bucket(bucket).key(&key).send().await;
        let body = match got {
            Ok(o) => o.body.collect().await.map(|b| b.into_bytes()).unwrap_or_default(),
            Err(e) => return Err(crate::error::from_sdk("s3:GetObject", &key, e)),
        };
        match serde_json::from_slice::<ShardReport>(&body) {
            Ok(r) => shards.push(r),
            Err(e) => tracing::warn!(key, error = %e, "not a shard outcome tagwarden wrote; left out"),
        }
    }
    shards.sort_by(|a, b| (&a.account, &a.region).cmp(&(&b.account, &b.region)));
    Ok(shards)
}

/// Milliseconds since the epoch, for a shard outcome's age.
pub fn age_seconds(at_ms: u64) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default();
    now.saturating_sub(at_ms) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn the_summary_adds_up_the_shards() {
        let shard = |a: &str, r: &str, at: u64, owned: usize, failed: usize| ShardReport {
            account: a.into(),
            region: r.into(),
            clusters: vec!["c-1".into()],
            finished_at_ms: at,
            owned,
            in_line: owned - failed,
            failed,
            ..ShardReport::default()
        };
        let mut refused = shard("222222222222", "us-east-1", 5, 0, 0);
        refused.refused = Some("account 222222222222: …".into());
        let s = Summary::of(vec![
            shard("111111111111", "us-east-1", 10, 100, 1),
            shard("111111111111", "eu-west-1", 7, 50, 0),
            refused,
        ]);
        assert_eq!((s.accounts, s.clusters, s.owned, s.in_line, s.failed), (2, 2, 150, 149, 1));
        assert_eq!(s.last_sweep_ms["111111111111"], 7, "the oldest region's sweep");
        assert!(s.refused.contains_key("222222222222"));

        // An account-region swept in two groups after three: the third group's outcome is stale;
        // its earlier whole-account outcome too.
        let group = |g: usize, at: u64, groups: usize| ShardReport {
            group: Some(g),
            groups: Some(groups),
            ..shard("333333333333", "us-east-1", at, 10, 0)
        };
        let s = Summary::of(vec![
            shard("333333333333", "us-east-1", 1, 30, 0),
            group(2, 5, 3),
            group(0, 20, 2),
            group(1, 21, 2),
        ]);
        let kept: Vec<Option<usize>> = s.shards.iter().map(|r| r.group).collect();
        assert_eq!((kept, s.owned), (vec![Some(0), Some(1)], 20), "only the newest packing counts");
    }

    /// An audited (or previewed) drift is what an enforced sweep would write: counted apart from
    /// the writes, summed by the summary, and read as 0 from an outcome written before it was.
    #[test]
    fn would_be_writes_are_counted_and_summed() {
        use tagwarden_core::report::Record;
        let rec = |id: &str, status: Status| Record {
            resource: id.into(),
            infra_id: Some("c-1".into()),
            latency_ms: 1,
            ..Record::sample(tagwarden_core::cloud::Cloud::Aws, "ec2:instance", status)
        };
        let out = Outcome {
            records: vec![
                rec("i-1", Status::WouldApply),
                rec("i-2", Status::WouldApply),
                rec("i-3", Status::Applied),
                rec("i-4", Status::Unchanged),
            ],
            ..Outcome::default()
        };
        let shard = Shard { account: "111111111111".into(), region: "us-east-1".into(), clusters: None, group: None };
        let r = ShardReport::of(&shard, vec!["c-1".into()], &out, Instant::now(), 3);
        assert_eq!((r.owned, r.in_line, r.written, r.would_write), (4, 2, 1, 2));
        let other = ShardReport { region: "eu-west-1".into(), ..r.clone() };
        assert_eq!(Summary::of(vec![r, other]).would_write, 4);
        let old: ShardReport = serde_json::from_str(
            r#"{"account":"1","region":"r","clusters":[],"finished_at_ms":1,"seconds":0.0,"owned":1,"in_line":1,"written":0,"failed":0,"gone":0,"api_calls":1}"#,
        )
        .expect("an outcome of the previous release");
        assert_eq!(old.would_write, 0);
    }
}
