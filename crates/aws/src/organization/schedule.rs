//! The scheduled run of an organization's hub, so that no member account can slow another:
//!
//! - **A cap per account.** Each account's area (`<prefix><account>/`) is counted before its
//!   clusters are listed and grouped ([`Census`]): one `ListObjectsV2` page per 1,000 objects,
//!   stopped one past the cap ([`OrgConfig::folders_max`] folders, [`OBJECTS_PER_FOLDER`] times
//!   as many objects). An account over it is refused ([`OverCap`]: the account, the count, the
//!   fix) and its shards are not computed; the others are enforced.
//! - **Each account on its own.** A lock per account (its member's slot), [`SHARDS_AT_ONCE`]
//!   accounts at once, each account's shards sent as soon as they are computed, none started past
//!   the invocation's `stop_at`: an account cut by it is *not reached*, reported, and taken first
//!   by the next run.
//! - **An order that rotates.** The accounts in name order, started at an offset that moves by
//!   one each schedule period, after the ones the last run did not reach: no account is always last.
//! - **What it found is kept** in `<prefix>_organization/hub.json` ([`HubState`]): the accounts and
//!   regions the hub enforces (the summary drops what they no longer list), each account's
//!   clusters (so a refused account's still count), the accounts over the cap, those not reached.
//! - **Metrics** ([`member_metric_lines`]), EMF in namespace `TagWarden`: `MemberRefused`,
//!   `MemberOverCap`, `MemberNotReached`, `MemberSweepStale` with dimension `Cloud`, and per
//!   account (`Cloud`, `Account`) the same with `MemberSweepAge`.

use super::*;

/// The most folders one member account's area may hold by default (`TAGWARDEN_MEMBER_FOLDERS_MAX`):
/// twice the clusters one account has been measured with (1,000), and three `ListObjectsV2` pages.
pub const FOLDERS_MAX: usize = 2_000;
/// Objects an account's area may hold per folder of the cap: a cluster's policy documents and its
/// status report.
pub const OBJECTS_PER_FOLDER: usize = 4;
/// The schedule's period by default (`TAGWARDEN_SWEEP_SCHEDULE_SECONDS`): `rate(1 hour)`.
pub const SWEEP_SCHEDULE_SECONDS: u64 = 3600;
/// The hub's own record of its last scheduled run, in [`SHARDS_FOLDER`] (not an account's folder,
/// so never read as a shard outcome).
pub const HUB_STATE: &str = "hub.json";
/// `ListObjectsV2` returns at most 1,000 keys a page (S3 API reference, `MaxKeys`).
const LIST_PAGE: usize = 1000;

/// What an account's area holds, counted up to one past the cap.
#[derive(Debug, Clone, Default)]
pub struct Census {
    /// The folders directly under the account's area (cluster folders, and any other).
    pub folders: BTreeSet<String>,
    /// Objects listed.
    pub objects: usize,
    /// Stopped at the cap: there may be more.
    pub over: bool,
    /// `ListObjectsV2` calls made.
    pub calls: usize,
}

impl Census {
    pub(super) fn over_cap(&self, org: &Organization, account: &str) -> Option<OverCap> {
        self.over.then(|| OverCap {
            account: account.to_string(),
            location: format!("s3://{}/{}{account}/", org.config.bucket, org.config.prefix),
            folders: self.folders.len(),
            objects: self.objects,
            folders_max: org.config.folders_max,
            objects_max: org.config.folders_max.saturating_mul(OBJECTS_PER_FOLDER),
        })
    }
}

/// An account whose area holds more than the hub lists: refused, naming the count and the fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error(
    "account {account}: {location} holds at least {folders} folder(s) in {objects} object(s), over the cap of {folders_max} folders and {objects_max} objects an account's area may hold; the account is not enforced until it holds fewer: remove the folders that are not a cluster's (each member publishes only <infraID>/ folders), or raise TAGWARDEN_MEMBER_FOLDERS_MAX; the other accounts are enforced"
)]
pub struct OverCap {
    pub account: String,
    pub location: String,
    /// Counted until the listing stopped (one past a cap).
    pub folders: usize,
    pub objects: usize,
    pub folders_max: usize,
    pub objects_max: usize,
}

/// The hub's record of its last scheduled run (`<prefix>_organization/hub.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HubState {
    pub updated_at_ms: u64,
    /// The regions the hub enforces.
    pub regions: Vec<String>,
    /// Each account the hub enforces, with its clusters: the ones listed, or for `<account>/*`
    /// the ones last found published.
    pub accounts: BTreeMap<String, Vec<String>>,
    /// When each account was first listed (an account never swept is stale only after twice the
    /// schedule).
    #[serde(default)]
    pub first_seen_ms: BTreeMap<String, u64>,
    /// Accounts the run did not reach before its deadline: the next run takes them first.
    #[serde(default)]
    pub unreached: Vec<String>,
    /// Accounts over the cap, with why.
    #[serde(default)]
    pub over_cap: BTreeMap<String, String>,
}

impl HubState {
    /// The summary of `shards` as this state has the organization: only the accounts and regions
    /// it lists; an account over the cap refused; a refused account's clusters counted.
    pub fn summary(&self, shards: Vec<ShardReport>) -> Summary {
        let current = |r: &ShardReport| self.accounts.contains_key(&r.account) && self.regions.contains(&r.region);
        let mut s = Summary::of(shards.into_iter().filter(current).collect());
        for (account, why) in self.over_cap.iter().filter(|(a, _)| self.accounts.contains_key(*a)) {
            s.refused.insert(account.clone(), why.clone());
        }
        let mut clusters: BTreeSet<(String, String)> =
            s.shards.iter().flat_map(|r| r.clusters.iter().map(|c| (r.account.clone(), c.clone()))).collect();
        for account in s.refused.keys() {
            for c in self.accounts.get(account).into_iter().flatten() {
                clusters.insert((account.clone(), c.clone()));
            }
        }
        let accounts: BTreeSet<&String> = s.last_sweep_ms.keys().chain(s.refused.keys()).collect();
        s.accounts = accounts.len();
        s.clusters = clusters.len();
        s.unreached = self.unreached.iter().filter(|a| self.accounts.contains_key(*a)).cloned().collect();
        s
    }
}

/// What a scheduled run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Scheduled {
    /// The accounts in the order the run took them.
    pub order: Vec<String>,
    /// Accounts whose shards were computed (and sent, with a shard queue).
    pub reached: Vec<String>,
    /// Every shard computed, in the order taken.
    pub shards: Vec<Shard>,
    /// Shards sent to the shard queue.
    pub sent: usize,
    /// Accounts over the cap, with why.
    pub over_cap: BTreeMap<String, String>,
    /// Accounts not reached before the deadline.
    pub unreached: Vec<String>,
    /// Why some shards were not sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Seconds since each account's last shard outcome (the oldest of its regions'), where known.
    pub ages: BTreeMap<String, u64>,
    /// Accounts whose last sweep is older than twice the schedule (or never swept, listed for longer).
    pub stale: Vec<String>,
}

/// One account's part of a run.
enum Taken {
    Reached(Vec<Shard>, Result<usize, EnqueueError>),
    OverCap(OverCap),
    NotReached,
}

/// `accounts` (in name order) rotated to start at `period % n`, after `first` (those of them
/// still listed, in their order).
pub(super) fn rotation(accounts: &[String], period: u64, first: &[String]) -> Vec<String> {
    let n = accounts.len().max(1);
    let start = (period % n as u64) as usize;
    let mut order: Vec<String> = first.iter().filter(|a| accounts.contains(a)).cloned().collect();
    let mut seen: BTreeSet<String> = order.iter().cloned().collect();
    for a in accounts.iter().skip(start).chain(accounts.iter().take(start)) {
        if seen.insert(a.clone()) {
            order.push(a.clone());
        }
    }
    order
}

impl Organization {
    /// Count account `account`'s area, stopping one past the cap ([`Census`]).
    pub(super) async fn census(&self, account: &str) -> Result<Census, CloudError> {
        let prefix = format!("{}{account}/", self.config.prefix);
        let folders_max = self.config.folders_max;
        let objects_max = folders_max.saturating_mul(OBJECTS_PER_FOLDER);
        let mut census = Census::default();
        let mut token: Option<String> = None;
        loop {
            // No more than one past either cap: each object adds one folder at most.
            let want = (objects_max + 1 - census.objects)
                .min(folders_max + 1 - census.folders.len().min(folders_max))
                .clamp(1, LIST_PAGE);
            let page = self
                .hub
                .s3
                .list_objects_v2()
                .bucket(&self.config.bucket)
                .prefix(&prefix)
                .max_keys(want as i32)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| crate::error::from_sdk("s3:ListObjectsV2", &prefix, e))?;
            census.calls += 1;
            for o in page.contents() {
                census.objects += 1;
                let folder = o.key().and_then(|k| k.strip_prefix(&prefix)).and_then(|rest| rest.split_once('/'));
                if let Some((folder, _)) = folder {
                    census.folders.insert(folder.to_string());
                }
            }
            if census.folders.len() > folders_max || census.objects > objects_max {
                census.over = true;
                break;
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(census)
    }

    fn state_key(&self) -> String {
        format!("{}{SHARDS_FOLDER}{HUB_STATE}", self.config.prefix)
    }

    /// The last run's [`HubState`], if one was written.
    pub async fn read_state(&self) -> Option<HubState> {
        read_state(&self.hub, &self.config.bucket, &self.config.prefix).await
    }

    /// The scheduled run: every listed account's shards, computed and (with a shard queue) sent
    /// account by account, [`SHARDS_AT_ONCE`] accounts at once, in a rotating order (the last
    /// run's unreached accounts first), none started after `stop_at`. Its [`HubState`] is written
    /// when `record` (and not a dry run).
    pub async fn schedule(&self, stop_at: Option<Instant>, record: bool) -> Scheduled {
        let previous = self.read_state().await.unwrap_or_default();
        let accounts: Vec<String> = self.config.clusters.keys().cloned().collect();
        let now_ms = tagwarden_core::report::epoch_ms();
        let period = now_ms / 1000 / self.config.schedule_seconds.max(1);
        let order = rotation(&accounts, period, &previous.unreached);
        let past = move || stop_at.is_some_and(|t| Instant::now() >= t);
        let queue = self.config.shard_queue.is_some();
        let taken: Vec<(usize, String, Taken)> = stream::iter(order.iter().cloned().enumerate())
            .map(|(i, account)| async move {
                if past() {
                    return (i, account, Taken::NotReached);
                }
                let shards = match stop_at {
                    Some(t) => match tokio::time::timeout_at(t.into(), self.account_shards(&account)).await {
                        Ok(s) => s,
                        Err(_) => return (i, account, Taken::NotReached),
                    },
                    None => self.account_shards(&account).await,
                };
                match shards {
                    Err(over) => (i, account, Taken::OverCap(over)),
                    Ok(shards) => {
                        let sent = if queue { self.enqueue(&shards).await } else { Ok(0) };
                        (i, account, Taken::Reached(shards, sent))
                    }
                }
            })
            .buffer_unordered(SHARDS_AT_ONCE)
            .collect()
            .await;
        let mut taken = taken;
        taken.sort_by_key(|(i, _, _)| *i);
        let mut run = Scheduled { order, ..Scheduled::default() };
        for (_, account, t) in taken {
            match t {
                Taken::Reached(shards, sent) => {
                    match sent {
                        Ok(n) => run.sent += n,
                        Err(e) => {
                            let e = format!("account {account}: {e}");
                            run.error = Some(run.error.take().map_or(e.clone(), |all| format!("{all}; {e}")));
                        }
                    }
                    run.shards.extend(shards);
                    run.reached.push(account);
                }
                Taken::OverCap(over) => {
                    run.over_cap.insert(account, over.to_string());
                }
                Taken::NotReached => {
                    tracing::error!(account, "not reached before the invocation's deadline: taken first next run");
                    run.unreached.push(account);
                }
            }
        }
        let ages = self.sweep_ages().await;
        let stale_after = self.config.schedule_seconds.saturating_mul(2);
        let mut first_seen = previous.first_seen_ms.clone();
        first_seen.retain(|a, _| self.config.clusters.contains_key(a));
        for a in &accounts {
            first_seen.entry(a.clone()).or_insert(now_ms);
            match ages.get(a) {
                Some(age) => {
                    run.ages.insert(a.clone(), *age);
                    if *age > stale_after {
                        run.stale.push(a.clone());
                    }
                }
                None if now_ms.saturating_sub(first_seen[a]) / 1000 > stale_after => run.stale.push(a.clone()),
                None => {}
            }
        }
        if record && !self.settings.dry_run {
            let state = HubState {
                updated_at_ms: now_ms,
                regions: self.config.regions.clone(),
                accounts: accounts
                    .iter()
                    .map(|a| {
                        let clusters = match &self.config.clusters[a] {
                            Some(named) => named.iter().cloned().collect(),
                            None => {
                                self.known_clusters(a).or_else(|| previous.accounts.get(a).cloned()).unwrap_or_default()
                            }
                        };
                        (a.clone(), clusters)
                    })
                    .collect(),
                first_seen_ms: first_seen,
                unreached: run.unreached.clone(),
                over_cap: run.over_cap.clone(),
            };
            if let Err(e) = self.write_state(&state).await {
                tracing::warn!(error = %e, "the hub's state not written");
            }
        }
        run
    }

    async fn write_state(&self, state: &HubState) -> Result<(), CloudError> {
        self.put_own(&self.state_key(), state).await
    }

    /// Seconds since each listed account's last shard outcome: per region its newest, per
    /// account its oldest region's (an account with a region never swept has none). Read from
    /// the listing of the hub's own folder (its objects' times), not their bodies.
    async fn sweep_ages(&self) -> BTreeMap<String, u64> {
        let folder = format!("{}{SHARDS_FOLDER}", self.config.prefix);
        let mut newest: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut pages =
            self.hub.s3.list_objects_v2().bucket(&self.config.bucket).prefix(&folder).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %crate::error::from_sdk("s3:ListObjectsV2", &folder, e), "sweep ages not read");
                    return BTreeMap::new();
                }
            };
            for o in page.contents() {
                let Some((account, file)) =
                    o.key().and_then(|k| k.strip_prefix(&folder)).and_then(|r| r.split_once('/'))
                else {
                    continue;
                };
                let Some(name) = file.strip_suffix(".json") else { continue };
                let region =
                    self.config.regions.iter().find(|r| {
                        name == r.as_str() || name.strip_prefix(r.as_str()).is_some_and(|g| g.starts_with('-'))
                    });
                let (Some(region), Some(at)) = (region, o.last_modified()) else { continue };
                let at = u64::try_from(at.to_millis().unwrap_or_default()).unwrap_or_default();
                let e = newest.entry((account.to_string(), region.clone())).or_default();
                *e = (*e).max(at);
            }
        }
        let now = tagwarden_core::report::epoch_ms();
        let mut ages = BTreeMap::new();
        for account in self.config.clusters.keys() {
            let times: Vec<u64> =
                self.config.regions.iter().filter_map(|r| newest.get(&(account.clone(), r.clone())).copied()).collect();
            if times.len() == self.config.regions.len() {
                let oldest = times.into_iter().min().unwrap_or_default();
                ages.insert(account.clone(), now.saturating_sub(oldest) / 1000);
            }
        }
        ages
    }
}

/// The hub's [`HubState`] under `s3://bucket/prefix`, if one was written (and readable).
pub async fn read_state(hub: &Clients, bucket: &str, prefix: &str) -> Option<HubState> {
    let key = format!("{prefix}{SHARDS_FOLDER}{HUB_STATE}");
    match hub.s3.get_object().bucket(bucket).key(&key).send().await {
        Ok(o) => {
            let body = o.body.collect().await.map(|b| b.into_bytes()).unwrap_or_default();
            match serde_json::from_slice(&body) {
                Ok(state) => Some(state),
                Err(e) => {
                    tracing::warn!(key, error = %e, "the hub's state is not one tagwarden wrote; ignored");
                    None
                }
            }
        }
        Err(e) => {
            let e = crate::error::from_sdk("s3:GetObject", &key, e);
            if e.code != "NoSuchKey" {
                tracing::warn!(error = %e, "the hub's state not read");
            }
            None
        }
    }
}

/// The organization's member metrics, EMF lines in namespace `TagWarden`:
///
/// - dimension `Cloud` (`aws`), one document: `MemberRefused` (shards whose member role was
///   refused or missing, or whose account was over the cap when swept), and with a scheduled
///   `run` also `MemberOverCap`, `MemberNotReached`, `MemberSweepStale` (accounts; zeros
///   included, so an alarm has data every run);
/// - dimensions `Cloud`, `Account`, one document per account concerned: the same counts where
///   not zero, and `MemberSweepAge` (seconds since its last sweep, the oldest region's).
pub fn member_metric_lines(refused: &BTreeMap<String, u64>, run: Option<&Scheduled>, timestamp_ms: u64) -> Vec<String> {
    let cloud = tagwarden_core::cloud::Cloud::Aws.as_str();
    let doc = |dimensions: &[&str], metrics: &[(&str, &str, u64)], account: Option<&str>| {
        let names: Vec<Value> =
            metrics.iter().map(|(n, unit, _)| serde_json::json!({"Name": n, "Unit": unit})).collect();
        let mut doc = serde_json::Map::new();
        doc.insert(
            "_aws".into(),
            serde_json::json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": tagwarden_core::report::NAMESPACE,
                    "Dimensions": [dimensions],
                    "Metrics": names,
                }],
            }),
        );
        doc.insert("Cloud".into(), cloud.into());
        if let Some(a) = account {
            doc.insert("Account".into(), a.into());
        }
        for (n, _, v) in metrics {
            doc.insert((*n).into(), (*v).into());
        }
        Value::Object(doc).to_string()
    };
    let mut lines = Vec::new();
    let refused_total: u64 = refused.values().sum();
    let mut totals = vec![("MemberRefused", "Count", refused_total)];
    if let Some(run) = run {
        totals.push(("MemberOverCap", "Count", run.over_cap.len() as u64));
        totals.push(("MemberNotReached", "Count", run.unreached.len() as u64));
        totals.push(("MemberSweepStale", "Count", run.stale.len() as u64));
    }
    if run.is_some() || refused_total > 0 {
        lines.push(doc(&["Cloud"], &totals, None));
    }
    let mut accounts: BTreeSet<&String> = refused.keys().collect();
    if let Some(run) = run {
        accounts.extend(run.over_cap.keys());
        accounts.extend(run.unreached.iter());
        accounts.extend(run.ages.keys());
    }
    for account in accounts {
        let mut metrics = Vec::new();
        if let Some(n) = refused.get(account).filter(|n| **n > 0) {
            metrics.push(("MemberRefused", "Count", *n));
        }
        if let Some(run) = run {
            if run.over_cap.contains_key(account) {
                metrics.push(("MemberOverCap", "Count", 1));
            }
            if run.unreached.contains(account) {
                metrics.push(("MemberNotReached", "Count", 1));
            }
            if let Some(age) = run.ages.get(account) {
                metrics.push(("MemberSweepAge", "Seconds", *age));
            }
        }
        if !metrics.is_empty() {
            lines.push(doc(&["Cloud", "Account"], &metrics, Some(account)));
        }
    }
    lines
}

use serde_json::Value;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_rotates_and_the_unreached_come_first() {
        let accounts: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let firsts: BTreeSet<String> = (0..4).map(|p| rotation(&accounts, p, &[])[0].clone()).collect();
        assert_eq!(firsts.len(), 4, "each account leads one period in four");
        assert_eq!(rotation(&accounts, 1, &[]), ["b", "c", "d", "a"]);
        let first = ["d".to_string(), "gone".to_string()];
        assert_eq!(rotation(&accounts, 1, &first), ["d", "b", "c", "a"], "unreached first, an unlisted one dropped");
    }

    #[test]
    fn metrics_name_the_account_and_total_the_organization() {
        let run = Scheduled {
            over_cap: BTreeMap::from([("111111111111".to_string(), "over".to_string())]),
            unreached: vec!["222222222222".to_string()],
            ages: BTreeMap::from([("333333333333".to_string(), 7200)]),
            stale: vec!["333333333333".to_string()],
            ..Scheduled::default()
        };
        let refused = BTreeMap::from([("444444444444".to_string(), 2)]);
        let lines: Vec<Value> = member_metric_lines(&refused, Some(&run), 1)
            .iter()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 5, "{lines:?}");
        let total = &lines[0];
        assert_eq!(total["_aws"]["CloudWatchMetrics"][0]["Dimensions"], serde_json::json!([["Cloud"]]));
        assert_eq!(
            (&total["MemberRefused"], &total["MemberOverCap"], &total["MemberNotReached"], &total["MemberSweepStale"]),
            (&serde_json::json!(2), &serde_json::json!(1), &serde_json::json!(1), &serde_json::json!(1))
        );
        let of = |a: &str| lines.iter().find(|l| l["Account"] == a).expect(a);
        assert_eq!(of("111111111111")["MemberOverCap"], 1);
        assert_eq!(of("222222222222")["MemberNotReached"], 1);
        assert_eq!(of("333333333333")["MemberSweepAge"], 7200);
        assert_eq!(of("444444444444")["MemberRefused"], 2);
        assert!(member_metric_lines(&BTreeMap::new(), None, 1).is_empty(), "nothing to say, nothing said");
    }

    #[test]
    fn the_state_drops_what_is_no_longer_listed_and_counts_a_refused_accounts_clusters() {
        let report = |a: &str, refused: bool| ShardReport {
            account: a.into(),
            region: "us-east-1".into(),
            clusters: if refused { Vec::new() } else { vec!["c-1".into()] },
            finished_at_ms: 1,
            refused: refused.then(|| format!("account {a}: refused")),
            ..ShardReport::default()
        };
        let state = HubState {
            regions: vec!["us-east-1".into()],
            accounts: BTreeMap::from([
                ("111111111111".into(), vec!["c-1".into()]),
                ("222222222222".into(), vec!["r-1".into(), "r-2".into()]),
                ("444444444444".into(), vec!["o-1".into()]),
            ]),
            over_cap: BTreeMap::from([("444444444444".into(), "over the cap".into())]),
            ..HubState::default()
        };
        let s = state.summary(vec![
            report("111111111111", false),
            report("222222222222", true),
            report("333333333333", true),
        ]);
        assert!(!s.refused.contains_key("333333333333"), "no longer listed: dropped");
        assert!(s.refused.contains_key("222222222222") && s.refused.contains_key("444444444444"));
        assert_eq!((s.accounts, s.clusters), (3, 4), "a refused account's clusters are counted");
    }
}
