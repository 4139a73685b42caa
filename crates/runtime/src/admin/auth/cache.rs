//! A small bounded map whose entries expire: what the admin server remembers of TokenReviews
//! and SubjectAccessReviews, so that a scrape every few seconds costs the API server nothing
//! between expiries.
//!
//! Contract: an entry is never returned after its expiry; the map never holds more than its
//! bound (when full, expired entries go first, then the ones closest to expiring). A flood of
//! distinct keys therefore evicts older answers and costs more reviews, never memory.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A bounded map of answers, each kept for its own time.
pub(crate) struct TtlCache<K, V> {
    max: usize,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache holding at most `max` entries (at least one).
    pub(crate) fn new(max: usize) -> Self {
        TtlCache {
            max: max.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The answer for `key`, unless it has none or it expired.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock();
        match entries.get(key) {
            Some((v, until)) if Instant::now() < *until => Some(v.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `key` during `ttl` (a zero `ttl` keeps nothing).
    pub(crate) fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock();
        if entries.len() >= self.max && !entries.contains_key(&key) {
            entries.retain(|_, (_, until)| now < *until);
            if entries.len() >= self.max {
                let soonest = entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    entries.remove(&k);
                }
            }
        }
        entries.insert(key, (value, now + ttl));
    }

    /// How many entries it holds (expired ones included until they are seen or evicted).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_bound_holds_under_a_flood() {
        let cache = TtlCache::new(3);
        let key = |s: &str| s.to_string();
        cache.insert(key("keep"), 1, Duration::from_secs(60));
        cache.insert(key("gone"), 2, Duration::from_nanos(1));
        // Time passing is the point here: the entry's expiry, not another task.
        let inserted = Instant::now();
        while inserted.elapsed() < Duration::from_micros(10) {
            std::hint::spin_loop();
        }
        assert_eq!(cache.get(&key("gone")), None, "expired");
        assert_eq!(cache.get(&key("keep")), Some(1));
        cache.insert(key("zero"), 3, Duration::ZERO);
        assert_eq!(cache.get(&key("zero")), None, "a zero ttl keeps nothing");
        for i in 0..1000u64 {
            cache.insert(format!("k{i}"), i, Duration::from_secs(i + 1));
            assert!(cache.len() <= 3);
        }
        // The flood evicted the entries closest to expiring; the newest stay.
        assert_eq!(cache.get(&key("k999")), Some(999));
        assert_eq!(cache.get(&key("k0")), None);
    }
}
