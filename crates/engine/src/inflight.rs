//! One reconcile at a time per resource. Duplicate events for one resource arrive together (a
//! create and its tag-change, at-least-once redeliveries); reconciled side by side, both read the
//! same drift and both write. Serialized, the second reads the first's write and writes nothing.
//!
//! A lock exists only while someone holds or waits for it, so the map stays as small as the work
//! in flight, however many resources pass through a warm function.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

#[derive(Default)]
pub struct ResourceLocks {
    map: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

/// A held resource lock; released on drop.
pub struct Held<'a> {
    locks: &'a ResourceLocks,
    key: String,
    lock: Arc<AsyncMutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
    /// Whether another reconcile of the resource held the lock first: anything read before
    /// (tags an event carried) is stale now.
    pub waited: bool,
}

impl ResourceLocks {
    /// Wait for the resource's lock. `key` must already be normalized (Azure IDs compare
    /// case-insensitively: pass them lowercased).
    pub async fn acquire(&self, key: &str) -> Held<'_> {
        let lock = self.entries().entry(key.to_string()).or_default().clone();
        let (guard, waited) = match lock.clone().try_lock_owned() {
            Ok(guard) => (guard, false),
            Err(_) => (lock.clone().lock_owned().await, true),
        };
        Held { locks: self, key: key.to_string(), lock, guard: Some(guard), waited }
    }

    /// Resources with a lock held or awaited now.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<AsyncMutex<()>>>> {
        // Nothing panics while holding it; a poisoned map is still consistent.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.locks.entries();
        // Only the map's reference and ours left: nobody waits, forget the lock. New waiters
        // clone under the map's mutex, so this cannot race with one.
        if Arc::strong_count(&self.lock) <= 2 {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn second_holder_waits_and_the_map_empties() {
        let locks = Arc::new(ResourceLocks::default());
        let first = locks.acquire("r").await;
        assert!(!first.waited);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let l2 = locks.clone();
        let waiter = tokio::spawn(async move {
            let held = l2.acquire("r").await;
            tx.send(held.waited).ok();
        });
        tokio::task::yield_now().await;
        assert_eq!(locks.len(), 1);
        drop(first);
        assert_eq!(rx.await.ok(), Some(true), "the second acquirer waited for the first");
        waiter.await.ok();
        assert!(locks.is_empty(), "no lock outlives its holders");
        // Other resources do not wait for each other.
        let (a, b) = (locks.acquire("a").await, locks.acquire("b").await);
        assert!(!a.waited && !b.waited);
    }
}
