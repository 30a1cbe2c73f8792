//! Event routing: each event to its own account and region's engine.

use super::*;

impl Organization {
    /// Reconcile `events`, each in its own account and region's engine; an event of an account
    /// the hub does not enforce is ignored, one whose account's role is refused fails naming it.
    pub async fn handle_events(&self, events: &[Event], stop_at: Option<Instant>) -> Vec<Outcome> {
        let mut outs: Vec<Outcome> = events.iter().map(|_| Outcome::default()).collect();
        let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            match (e.account.as_deref(), e.region.as_deref()) {
                (Some(a), Some(r)) if self.config.clusters.contains_key(a) => {
                    groups.entry((a.to_string(), r.to_string())).or_default().push(i)
                }
                _ => {
                    outs[i].metrics.events_received = 1;
                    outs[i].metrics.events_ignored = 1;
                    tracing::info!(
                        id = e.id,
                        account = e.account,
                        "event of an account the hub does not enforce: ignored"
                    );
                }
            }
        }
        let handled = stream::iter(groups)
            .map(|((account, region), at)| async move {
                let batch: Vec<Event> = at.iter().map(|&i| events[i].clone()).collect();
                let outs = match self.member(&account).await {
                    Ok(member) => self.handle_in_account(&account, &region, &member, &batch, stop_at).await,
                    Err(why) => {
                        let why: Stop = StopKind::Member(why.to_string()).into();
                        batch.iter().map(|_| Outcome { error: Some(why.clone()), ..Outcome::default() }).collect()
                    }
                };
                (at, outs)
            })
            .buffer_unordered(SHARDS_AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        for (at, group) in handled {
            for (i, out) in at.into_iter().zip(group) {
                outs[i] = out;
            }
        }
        outs
    }

    /// Events of one account and region: to its one group's engine; where it has several, each
    /// resource is read once (every session may read) to find the group of the cluster that owns
    /// it, and each group's engine gets the events narrowed to its resources.
    pub(super) async fn handle_in_account(
        &self,
        account: &str,
        region: &str,
        member: &Member,
        batch: &[Event],
        stop_at: Option<Instant>,
    ) -> Vec<Outcome> {
        if member.groups.len() <= 1 {
            if member.groups.is_empty() {
                return batch.iter().map(|_| Outcome::default()).collect();
            }
            return self.engine(account, member, 0, region).handle_events(batch, stop_at).await;
        }
        let first = self.engine(account, member, 0, region);
        let owner_group = |tags: &TagMap| {
            member.groups.iter().position(|g| g.keys.iter().any(|k| tags.get(k).is_some_and(|v| v == "owned")))
        };
        // Every resource of the batch read at once, in shared calls (EC2's DescribeTags).
        let all: Vec<&ResourceRef> = batch.iter().flat_map(|e| e.resources.iter()).collect();
        let mut read = Adapter::read_all(&first.adapter, &all, self.settings.concurrency).await.into_iter();
        let mut per_group: Vec<Vec<(usize, Event)>> = member.groups.iter().map(|_| Vec::new()).collect();
        let mut unroutable: Vec<Option<String>> = vec![None; batch.len()];
        for (i, event) in batch.iter().enumerate() {
            let mut narrowed: BTreeMap<usize, Vec<ResourceRef>> = BTreeMap::new();
            for r in &event.resources {
                // Owned by none of the groups, or gone: the first group's engine reports it. Not
                // readable: the event is retried rather than written through a session that may
                // not be its cluster's.
                let g = match read.next() {
                    Some(Ok(found)) => owner_group(&found.tags).unwrap_or(0),
                    Some(Err(e)) if e.class != tagwarden_engine::cloud_error::ErrorClass::NotFound => {
                        unroutable[i] = Some(format!("{r}: not read, so its cluster group is unknown: {e}"));
                        continue;
                    }
                    _ => 0,
                };
                narrowed.entry(g).or_default().push(r.clone());
            }
            if narrowed.is_empty() && unroutable[i].is_none() {
                narrowed.insert(0, Vec::new());
            }
            for (g, resources) in narrowed {
                per_group[g].push((i, Event { resources, ..event.clone() }));
            }
        }
        let mut outs: Vec<Outcome> = batch.iter().map(|_| Outcome::default()).collect();
        for (g, events) in per_group.into_iter().enumerate().filter(|(_, e)| !e.is_empty()) {
            let (at, events): (Vec<usize>, Vec<Event>) = events.into_iter().unzip();
            let handled = self.engine(account, member, g, region).handle_events(&events, stop_at).await;
            for (i, out) in at.into_iter().zip(handled) {
                outs[i].absorb(out);
            }
        }
        for (out, why) in outs.iter_mut().zip(unroutable) {
            if let Some(why) = why {
                let why: Stop = StopKind::Member(why.clone()).into();
                out.error = Some(out.error.take().map_or(why.clone(), |e| e.and(why)));
            }
        }
        outs
    }
}
