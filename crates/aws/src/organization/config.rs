//! The hub's organization settings, from the environment ([`OrgConfig`]).

use super::*;

/// The hub's organization settings, from the environment.
///
/// - `TAGWARDEN_ORGANIZATION`: `s3://bucket/prefix/`, the folder of the member accounts' sets;
/// - `TAGWARDEN_MEMBER_ROLE`: the spoke role's name in every member account;
/// - `TAGWARDEN_MEMBER_REGIONS`: the regions the spokes cover, comma-separated;
/// - `TAGWARDEN_CLUSTERS`: `<account>/<infraID>` or `<account>/*`, comma-separated;
/// - `TAGWARDEN_SHARD_QUEUE_URL`: the SQS queue a sweep's shards are sent to (unset: the function
///   sweeps them itself, in turn);
/// - `TAGWARDEN_MEMBER_FOLDERS_MAX`: the most folders an account's area may hold ([`FOLDERS_MAX`]
///   by default; its objects at most [`OBJECTS_PER_FOLDER`] times that): an account over it is
///   refused, its listing stopped there;
/// - `TAGWARDEN_SWEEP_SCHEDULE_SECONDS`: the schedule's period ([`SWEEP_SCHEDULE_SECONDS`] by
///   default): the scheduled runs' rotation, and an account whose last sweep is older than twice
///   it is stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgConfig {
    pub bucket: String,
    pub prefix: String,
    pub role_name: String,
    pub regions: Vec<String>,
    /// Each member account's clusters: their infraIDs, or `None` for every one it publishes.
    pub clusters: BTreeMap<String, Option<BTreeSet<String>>>,
    pub shard_queue: Option<String>,
    /// The most folders one account's area may hold; its objects at most [`OBJECTS_PER_FOLDER`] times.
    pub folders_max: usize,
    /// The scheduled sweep's period, in seconds.
    pub schedule_seconds: u64,
}

impl OrgConfig {
    /// `None` when `TAGWARDEN_ORGANIZATION` is unset (one account's deployment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let Some(location) = var("TAGWARDEN_ORGANIZATION") else { return Ok(None) };
        let (bucket, prefix) =
            match location.parse::<PolicyLocation>() {
                Ok(PolicyLocation::S3Prefix { bucket, prefix }) => (bucket, prefix),
                _ => return Err(ConfigError::Invalid {
                    var: "TAGWARDEN_ORGANIZATION",
                    value: location,
                    problem: "is not an S3 folder".into(),
                    fix: "set it to s3://BUCKET/PREFIX/, the folder holding <account>/<infraID>/ (the hub module does)"
                        .into(),
                }),
            };
        let role_name = var("TAGWARDEN_MEMBER_ROLE").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_MEMBER_ROLE",
            fix: "set it to the spoke role's name in the member accounts (the hub module does)".into(),
        })?;
        if !role_name.bytes().all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b)) || role_name.len() > 64 {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_MEMBER_ROLE",
                value: role_name,
                problem: "is not an IAM role name (1-64 of A-Z a-z 0-9 +=,.@_-)".into(),
                fix: "give the role's name, not its ARN, e.g. tagwarden-member".into(),
            });
        }
        let regions_value = var("TAGWARDEN_MEMBER_REGIONS").unwrap_or_default();
        let mut regions: Vec<String> =
            regions_value.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned).collect();
        regions.sort();
        regions.dedup();
        let region_like = |r: &str| {
            r.split('-').count() >= 3 && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if regions.is_empty() || !regions.iter().all(|r| region_like(r)) {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_MEMBER_REGIONS",
                value: regions_value,
                problem: "names no region, or something that is not one".into(),
                fix: "list the regions the spokes cover, comma-separated, e.g. us-east-1,eu-west-1".into(),
            });
        }
        let listed = var("TAGWARDEN_CLUSTERS").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_CLUSTERS",
            fix: "an organization is enforced only for the clusters its hub lists: <account>/<infraID> or <account>/* (every cluster the account publishes), comma-separated".into(),
        })?;
        let mut clusters: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        for entry in listed.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |problem: String| ConfigError::Invalid {
                var: "TAGWARDEN_CLUSTERS",
                value: listed.clone(),
                problem,
                fix: "write each as <12-digit account>/<infraID> or <account>/*, e.g. 111122223333/prod-7xk2p".into(),
            };
            let (account, cluster) = entry.split_once('/').ok_or_else(|| bad(format!("{entry:?} names no account")))?;
            if !is_account(account) {
                return Err(bad(format!("{account:?} is not a 12-digit account id")));
            }
            let named = clusters.entry(account.to_string()).or_insert_with(|| Some(BTreeSet::new()));
            if cluster == "*" {
                *named = None;
            } else {
                valid_infra_id(cluster).map_err(|why| bad(format!("{entry:?}: {why}")))?;
                if let Some(set) = named {
                    set.insert(cluster.to_string());
                }
            }
        }
        if clusters.is_empty() {
            return Err(ConfigError::Invalid {
                var: "TAGWARDEN_CLUSTERS",
                value: listed,
                problem: "names no cluster".into(),
                fix: "list <account>/<infraID> or <account>/*, comma-separated".into(),
            });
        }
        let shard_queue = var("TAGWARDEN_SHARD_QUEUE_URL");
        let number = |name: &'static str, default: u64, fix: &str| match var(name) {
            None => Ok(default),
            Some(v) => {
                v.parse::<u64>().ok().filter(|n| (1..=10_000_000).contains(n)).ok_or_else(|| ConfigError::Invalid {
                    var: name,
                    value: v,
                    problem: "is not a whole number from 1 to 10,000,000".into(),
                    fix: fix.into(),
                })
            }
        };
        let folders_max = number(
            "TAGWARDEN_MEMBER_FOLDERS_MAX",
            FOLDERS_MAX as u64,
            "the most folders one member account's area may hold, e.g. 2000 (the default)",
        )? as usize;
        let schedule_seconds = number(
            "TAGWARDEN_SWEEP_SCHEDULE_SECONDS",
            SWEEP_SCHEDULE_SECONDS,
            "the sweep schedule's period in seconds, e.g. 3600 for rate(1 hour) (the default)",
        )?;
        Ok(Some(OrgConfig { bucket, prefix, role_name, regions, clusters, shard_queue, folders_max, schedule_seconds }))
    }

    /// The region whose shard of each account sweeps what has no region: us-east-1, where IAM's
    /// and Route 53's events come from, when the spokes cover it; else the first.
    pub fn global_region(&self) -> &str {
        self.regions.iter().find(|r| *r == "us-east-1").or(self.regions.first()).map_or("us-east-1", |r| r)
    }

    /// Every shard of a whole sweep: each listed account × each region.
    pub fn shards(&self) -> Vec<Shard> {
        let mut shards = Vec::with_capacity(self.clusters.len() * self.regions.len());
        for account in self.clusters.keys() {
            for region in &self.regions {
                shards.push(Shard { account: account.clone(), region: region.clone(), clusters: None, group: None });
            }
        }
        shards
    }

    /// The shards a policy written at `keys` (object keys in the bucket) asks to sweep: each
    /// listed account's regions, for the clusters written; keys outside the accounts' folders, or
    /// of a cluster the hub does not enforce, ask for none.
    pub fn shards_for(&self, keys: &[String]) -> Vec<Shard> {
        let mut written: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for key in keys {
            // A policy document only: never a status report or a shard outcome the hub wrote.
            let Some(rest) = key.strip_prefix(&self.prefix).filter(|_| is_policy_document(key)) else { continue };
            let mut parts = rest.splitn(3, '/');
            let (Some(account), Some(cluster), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
            let enforced =
                self.clusters.get(account).is_some_and(|named| named.as_ref().is_none_or(|n| n.contains(cluster)));
            if enforced && valid_infra_id(cluster).is_ok() {
                written
                    .entry(self.clusters.get_key_value(account).map_or(account, |(a, _)| a.as_str()))
                    .or_default()
                    .insert(cluster.to_string());
            }
        }
        let mut shards = Vec::new();
        for (account, clusters) in written {
            for region in &self.regions {
                let clusters = Some(clusters.iter().cloned().collect());
                shards.push(Shard { account: account.to_string(), region: region.clone(), clusters, group: None });
            }
        }
        shards
    }
}

pub fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn from(vars: &[(&str, &str)]) -> Result<Option<OrgConfig>, ConfigError> {
        OrgConfig::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    const BASE: [(&str, &str); 3] = [
        ("TAGWARDEN_ORGANIZATION", "s3://hub/accounts/"),
        ("TAGWARDEN_MEMBER_ROLE", "tagwarden-member"),
        ("TAGWARDEN_MEMBER_REGIONS", "eu-west-1, us-east-1"),
    ];

    pub(super) fn with(clusters: &str) -> Result<Option<OrgConfig>, ConfigError> {
        let mut vars = BASE.to_vec();
        vars.push(("TAGWARDEN_CLUSTERS", clusters));
        from(&vars)
    }

    #[test]
    pub(super) fn accounts_clusters_and_shards_from_the_environment() {
        assert_eq!(from(&[]).expect("unset"), None, "one account's deployment");
        let c = with("111122223333/a-1, 111122223333/b-2,444455556666/*").expect("valid").expect("org");
        assert_eq!((c.bucket.as_str(), c.prefix.as_str(), c.global_region()), ("hub", "accounts/", "us-east-1"));
        assert_eq!(c.clusters["444455556666"], None, "every cluster the account publishes");
        assert_eq!(c.shards().len(), 4, "2 accounts x 2 regions");

        let keys = [
            "accounts/111122223333/a-1/policy.yaml".to_string(),
            "accounts/111122223333/c-3/policy.yaml".to_string(),
            "accounts/444455556666/x-9/policy.yaml".to_string(),
            "accounts/999999999999/a-1/policy.yaml".to_string(),
            "accounts/_organization/111122223333/us-east-1.json".to_string(),
            "accounts/111122223333/b-2/tagwarden-status.json".to_string(),
        ];
        let shards = c.shards_for(&keys);
        let of = |a: &str| shards.iter().filter(|s| s.account == a).map(|s| s.clusters.clone()).collect::<Vec<_>>();
        assert_eq!(of("111122223333"), vec![Some(vec!["a-1".to_string()]); 2], "c-3 is not enforced");
        assert_eq!(of("444455556666"), vec![Some(vec!["x-9".to_string()]); 2]);
        assert!(of("999999999999").is_empty(), "an account the hub does not list asks for nothing");
    }

    #[test]
    pub(super) fn errors_name_the_variable_and_the_fix() {
        for (clusters, says) in
            [("a-1", "names no account"), ("1234/a-1", "12-digit"), ("111122223333/-bad", "111122223333/-bad")]
        {
            let e = with(clusters).expect_err(clusters).to_string();
            assert!(e.contains("TAGWARDEN_CLUSTERS") && e.contains(says) && e.contains("e.g."), "{e}");
        }
        let mut vars = BASE.to_vec();
        vars[2] = ("TAGWARDEN_MEMBER_REGIONS", "");
        vars.push(("TAGWARDEN_CLUSTERS", "111122223333/a-1"));
        assert!(from(&vars).expect_err("no region").to_string().contains("TAGWARDEN_MEMBER_REGIONS"));
        vars[1] = ("TAGWARDEN_MEMBER_ROLE", "arn:aws:iam::1:role/x");
        assert!(from(&vars).expect_err("an ARN").to_string().contains("not its ARN"));
        vars[0] = ("TAGWARDEN_ORGANIZATION", "s3://hub/accounts/*/");
        assert!(from(&vars).expect_err("a set").to_string().contains("s3://BUCKET/PREFIX/"));
    }
}
