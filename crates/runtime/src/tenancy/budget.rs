//! A tenant's event-rate budget: a token bucket all of the tenant's plugins draw from before
//! each call.
//!
//! Nothing is dropped: a handler over budget waits, and meanwhile its listener coalesces what
//! piles up per key, so a flooding tenant ends up seeing fewer, newer events instead of
//! holding a core. Other tenants' listeners are separate tasks and never wait on this bucket.

use std::num::NonZeroU32;
use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::informer::{Event, Handler};

/// Events per second shared by one tenant's plugins, with a burst of one second's worth.
pub struct Budget {
    limiter: DefaultDirectRateLimiter,
    per_second: NonZeroU32,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Budget({}/s)", self.per_second)
    }
}

impl Budget {
    /// A budget of `per_second` events per second.
    pub fn per_second(per_second: NonZeroU32) -> Arc<Self> {
        Arc::new(Budget {
            limiter: RateLimiter::direct(Quota::per_second(per_second)),
            per_second,
        })
    }

    /// The rate.
    pub fn rate(&self) -> NonZeroU32 {
        self.per_second
    }

    /// Waits until the budget allows one more event.
    pub async fn acquire(&self) {
        self.limiter.until_ready().await;
    }

    /// Takes one event's token if the budget allows it now.
    pub fn try_acquire(&self) -> bool {
        self.limiter.check().is_ok()
    }
}

/// A handler that draws one token from its tenant's budget before each event.
pub struct Budgeted<H> {
    budget: Arc<Budget>,
    inner: H,
}

impl<H> Budgeted<H> {
    /// Wraps `inner`.
    pub fn new(budget: Arc<Budget>, inner: H) -> Self {
        Budgeted { budget, inner }
    }
}

impl<H: Handler> Handler for Budgeted<H> {
    async fn handle(&mut self, event: Event) {
        self.budget.acquire().await;
        self.inner.handle(event).await;
    }

    /// Passes on as much of the batch as the budget allows now (at least one event, waited
    /// for), then the rest as tokens come.
    async fn handle_batch(&mut self, mut events: Vec<Event>) {
        while !events.is_empty() {
            self.budget.acquire().await;
            let mut allowed = 1;
            while allowed < events.len() && self.budget.try_acquire() {
                allowed += 1;
            }
            let rest = events.split_off(allowed);
            self.inner.handle_batch(events).await;
            events = rest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_burst_is_one_seconds_worth_then_it_paces() {
        let budget = Budget::per_second(NonZeroU32::new(5).unwrap());
        // The first five are immediate: the bucket starts full.
        for _ in 0..5 {
            assert!(budget.limiter.check().is_ok());
        }
        assert!(budget.limiter.check().is_err(), "a sixth exceeds the burst");
    }

    /// Records the size of each batch it is handed.
    struct Sizes(std::sync::Arc<parking_lot::Mutex<Vec<usize>>>);

    impl Handler for Sizes {
        async fn handle(&mut self, event: Event) {
            self.handle_batch(vec![event]).await;
        }
        async fn handle_batch(&mut self, events: Vec<Event>) {
            self.0.lock().push(events.len());
        }
    }

    #[tokio::test]
    async fn a_batch_goes_on_as_far_as_the_budget_allows_then_as_tokens_come() {
        use kube::core::{ApiResource, GroupVersionKind};
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let events: Vec<Event> = (0..8)
            .map(|i| {
                let mut raw = serde_json::from_value(serde_json::json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("c{i}"), "namespace": "a"},
                }))
                .unwrap();
                let o = crate::informer::CachedObject::from_raw(&mut raw, &ar, true);
                Event::added(std::sync::Arc::new(o), false)
            })
            .collect();
        let sizes = std::sync::Arc::default();
        let budget = Budget::per_second(NonZeroU32::new(5).unwrap());
        let mut handler = Budgeted::new(budget, Sizes(std::sync::Arc::clone(&sizes)));
        handler.handle_batch(events).await;
        // The burst's five at once, then one per token: nothing dropped, order kept.
        assert_eq!(*sizes.lock(), [5, 1, 1, 1]);
    }
}
