//! The member and group cache: each account's set, the clusters it enforces, their groups (one
//! session each) and the groups' engines in each region, built as they are needed.

use super::*;

/// One member account: its set's store, the clusters it enforces, and their groups.
pub(super) struct Member {
    pub(super) store: Arc<PolicyStore<AwsSource>>,
    pub(super) clusters: Vec<String>,
    pub(super) listed_at: Instant,
    pub(super) groups: Vec<Group>,
}

/// Clusters of one account that share a session ([`pack`]), and their engine in each region.
pub(super) struct Group {
    /// The member role its session assumes (the account's roles each write a share of its clusters).
    pub(super) role: String,
    pub(super) clusters: Vec<String>,
    /// Each of their ownership keys.
    pub(super) keys: Vec<String>,
    pub(super) policy: Arc<str>,
    pub(super) engines: Mutex<HashMap<String, Arc<Engine<Tagger>>>>,
}

impl Group {
    /// The same group, its engines kept, for a member checked again and found unchanged.
    pub(super) fn carried(&self) -> Group {
        Group {
            role: self.role.clone(),
            clusters: self.clusters.clone(),
            keys: self.keys.clone(),
            policy: self.policy.clone(),
            engines: Mutex::new(self.engines.lock().unwrap_or_else(|p| p.into_inner()).clone()),
        }
    }
}

/// Which member role writes each cluster, by account and cluster: Terraform writes it at the
/// bucket's root (`_tagwarden/member-roles.json`: outside every account's folder, and outside the
/// function's own, where only the function writes), from the same clusters it renders the roles
/// from. A wrong table costs refused writes, never a write: each role is bounded in IAM.
pub(super) type RoleTable = HashMap<String, HashMap<String, String>>;

/// The member roles' table, at the bucket's root.
pub const ROLES_TABLE: &str = "_tagwarden/member-roles.json";

/// Why the member roles' table could not be read ([`Organization::role_table`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum RoleTableError {
    /// S3 answered with an error.
    #[error("{0}")]
    Read(tagwarden_engine::cloud_error::CloudError),
    /// The object's body broke off (the stream's message).
    #[error("{location}: {error}")]
    Body { location: String, error: aws_sdk_s3::primitives::ByteStreamError },
    /// The object is not the JSON table Terraform writes.
    #[error("{location} is not the member roles' table Terraform writes: {error}")]
    NotATable { location: String, error: serde_json::Error },
}

/// One account's member: empty until first listed; one listing at a time fills it.
pub(super) type MemberSlot = Arc<tokio::sync::Mutex<Option<Arc<Member>>>>;

/// Why an account's member could not be had.
#[derive(Debug, Clone)]
pub enum MemberError {
    /// Its area holds more than the cap: refused until it is cleared (a record, not a retry).
    OverCap(OverCap),
    /// Not listed, or its area unreadable: the shard fails and is retried.
    Failed(String),
}

impl std::fmt::Display for MemberError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemberError::OverCap(o) => o.fmt(f),
            MemberError::Failed(why) => f.write_str(why),
        }
    }
}

impl Organization {
    /// The member roles' table, read again every policy TTL. None there (a hub deployed before
    /// the table, or a test's) is an empty table: every cluster's role is the configured one. One
    /// that cannot be read keeps the last one read, or fails the listing of the account.
    pub(super) async fn role_table(&self) -> Result<Arc<RoleTable>, RoleTableError> {
        let mut kept = self.roles.lock().await;
        if let Some((at, table)) = &*kept {
            if at.elapsed() < self.settings.policy_ttl {
                return Ok(table.clone());
            }
        }
        let key = ROLES_TABLE.to_string();
        let read = self.hub.s3.get_object().bucket(&self.config.bucket).key(&key).send().await;
        let table: RoleTable = match read {
            Ok(out) => {
                let location = || format!("s3://{}/{key}", self.config.bucket);
                let body =
                    out.body.collect().await.map_err(|error| RoleTableError::Body { location: location(), error })?;
                serde_json::from_slice(&body.into_bytes())
                    .map_err(|error| RoleTableError::NotATable { location: location(), error })?
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => RoleTable::new(),
            Err(e) => match &*kept {
                Some((_, table)) => {
                    tracing::warn!(error = %crate::error::from_sdk("s3:GetObject", &key, e), "the member roles' table could not be read again: the last one read stays");
                    return Ok(table.clone());
                }
                None => return Err(RoleTableError::Read(crate::error::from_sdk("s3:GetObject", &key, e))),
            },
        };
        let table = Arc::new(table);
        *kept = Some((Instant::now(), table.clone()));
        Ok(table)
    }

    /// Account `account`'s store and clusters: its named clusters, or (`<account>/*`) the ones its
    /// folder holds, listed again after the policy TTL.
    pub(super) async fn member(&self, account: &str) -> Result<Arc<Member>, MemberError> {
        self.member_checked(account, false).await
    }

    /// [`Organization::member`]; with `fresh`, listed and grouped again now, not after the TTL
    /// (a policy write names a cluster the cached list does not hold yet). Every policy TTL the
    /// account's clusters and their kinds are read again; where the groups come out the same,
    /// the member (its store's cache, its engines' contests) stays.
    pub(super) async fn member_checked(&self, account: &str, fresh: bool) -> Result<Arc<Member>, MemberError> {
        let Some(named) = self.config.clusters.get(account) else {
            return Err(MemberError::Failed(format!(
                "account {account} is not one the hub enforces (TAGWARDEN_CLUSTERS)"
            )));
        };
        let slot = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            members.entry(account.to_string()).or_default().clone()
        };
        let mut slot = slot.lock().await;
        if let Some(m) = &*slot {
            if !fresh && m.listed_at.elapsed() < self.settings.policy_ttl {
                return Ok(m.clone());
            }
        }
        let prefix = format!("{}{account}/", self.config.prefix);
        // The account's area counted first, its listing stopped past the cap: an account over it
        // costs a bounded number of calls and is refused before its store lists it whole.
        let census = self.census(account).await.map_err(|e| {
            MemberError::Failed(format!(
                "account {account}: its clusters could not be listed under s3://{}/{prefix}: {e}",
                self.config.bucket
            ))
        })?;
        if let Some(over) = census.over_cap(self, account) {
            tracing::error!(account, folders = census.folders.len(), objects = census.objects, "{over}");
            *slot = None;
            return Err(MemberError::OverCap(over));
        }
        let clusters: Vec<String> = match named {
            Some(named) => named.iter().cloned().collect(),
            None => census.folders.iter().filter(|c| valid_infra_id(c).is_ok()).cloned().collect(),
        };
        let store = match slot.as_ref().filter(|m| m.clusters == clusters) {
            Some(m) => m.store.clone(),
            None => {
                let location = PolicyLocation::S3Set { bucket: self.config.bucket.clone(), prefix };
                let mut store = crate::policy_store::policy_store(&self.hub, location, self.settings.policy_ttl)
                    .with_clusters(Some(clusters.clone()));
                // The account's contest states: in the hub's own folder, which no member writes.
                store.source.contests_folder = contests_folder(&self.config.prefix, account);
                Arc::new(store)
            }
        };
        // The clusters' kinds (their ownership keys) are in their policies; one not readable yet
        // is taken as OpenShift's (`kubernetes.io/cluster/<infraID>`) until the next check.
        let (loaded, _) = store.policies(false).await;
        let kinds: HashMap<String, ClusterKind> = match &loaded {
            Ok(p) => p.iter().map(|l| (l.infra_id.clone(), l.policy.kind)).collect(),
            Err(_) => HashMap::new(),
        };
        let owned: Vec<(String, Vec<String>)> = clusters
            .iter()
            .map(|c| {
                let kind = kinds.get(c).copied().unwrap_or_default();
                (c.clone(), tagwarden_core::cloud::Cloud::Aws.ownership_keys(kind, c))
            })
            .collect();
        // Each cluster's member role (the roles hold the ownership bound, a share of the account's
        // clusters each), then its sessions packed within its role's clusters.
        let table = self.role_table().await.map_err(|e| {
            MemberError::Failed(format!("account {account}: the member roles' table could not be read: {e}"))
        })?;
        let listed = table.get(account);
        let mut by_role: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
        for (cluster, keys) in owned {
            let named = listed.and_then(|t| t.get(&cluster)).map(String::as_str);
            if !listed.is_none_or(|t| t.is_empty()) && named.is_none() {
                tracing::warn!(account, cluster, "the cluster is in no member role's share (Terraform's account_clusters): its role is refused every write on what it owns until it is added and applied");
            }
            let role = self.sessions.role_for(named).to_string();
            by_role.entry(role).or_default().push((cluster, keys));
        }
        let mut groups: Vec<Group> = Vec::new();
        for (role, owned) in by_role {
            for at in pack(&self.sessions.partition, &owned) {
                let group: Vec<(String, Vec<String>)> = at.iter().map(|&i| owned[i].clone()).collect();
                groups.push(Group {
                    role: role.clone(),
                    clusters: group.iter().map(|(c, _)| c.clone()).collect(),
                    keys: group.iter().flat_map(|(_, k)| k.clone()).collect(),
                    policy: session_policy(&self.sessions.partition, &group).into(),
                    engines: Mutex::default(),
                });
            }
        }
        if let Some(m) = slot.as_ref() {
            let same = m.groups.len() == groups.len()
                && m.groups.iter().zip(&groups).all(|(a, b)| a.policy == b.policy && a.role == b.role);
            if same && Arc::ptr_eq(&m.store, &store) {
                let kept = Arc::new(Member {
                    store,
                    clusters,
                    listed_at: Instant::now(),
                    groups: m.groups.iter().map(Group::carried).collect(),
                });
                *slot = Some(kept.clone());
                return Ok(kept);
            }
        }
        let member = Arc::new(Member { store, clusters, listed_at: Instant::now(), groups });
        *slot = Some(member.clone());
        Ok(member)
    }

    /// The clusters account `account` was last found with (its member's, as listed), if any.
    pub(crate) fn known_clusters(&self, account: &str) -> Option<Vec<String>> {
        let slot = self.members.lock().unwrap_or_else(|p| p.into_inner()).get(account).cloned()?;
        let member = slot.try_lock().ok()?;
        member.as_ref().map(|m| m.clusters.clone())
    }

    /// The engine of `account`'s cluster group `group` in `region`: that group's session, the
    /// region's clients, the account's store; its status reports laid over the other regions' as
    /// its part.
    pub(super) fn engine(&self, account: &str, member: &Member, group: usize, region: &str) -> Arc<Engine<Tagger>> {
        let g = &member.groups[group];
        let mut engines = g.engines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = engines.get(region) {
            return e.clone();
        }
        let credentials = MemberCredentials {
            sessions: self.sessions.clone(),
            account: account.to_string(),
            group,
            role: g.role.clone(),
            policy: g.policy.clone(),
        };
        let config = self
            .base
            .to_builder()
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .region(aws_config::Region::new(region.to_string()))
            .build();
        // What has no region is listed by one region's shards (each group for its own clusters).
        let global = region == self.config.global_region();
        let tagger = Tagger {
            ec2_writes: Some(RateLimit::per_second(f64::from(self.settings.ec2_writes_per_second))),
            account: Some(account.to_string()),
            global,
            scope: Some(format!("{account}/{region}")),
            ..Tagger::new(Clients::counted(&config, self.calls.clone()))
        };
        let mut own = self.settings.own.clone();
        // Every member role of the account: each one's writes come back as events.
        let mut roles: Vec<&str> = member.groups.iter().map(|g| g.role.as_str()).collect();
        roles.dedup();
        own.extend(roles.into_iter().map(|r| self.sessions.role_arn(account, Some(r))));
        let part = tagwarden_core::status::aws_region_part(account, region, global);
        let mut engine = Engine::sharing(tagger, member.store.clone(), own, Some(part));
        engine.set_concurrency(self.settings.concurrency);
        engine.yield_to = self.yield_to.clone();
        engine.dry_run = self.settings.dry_run;
        engine.mode = self.settings.mode;
        let engine = Arc::new(engine);
        engines.insert(region.to_string(), engine.clone());
        engine
    }
}
