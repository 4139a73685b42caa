//! The one backoff every retry in the host uses: plugin loads waiting for a kind, events a plugin
//! asked to see again, instance restarts after a failure, `--watch` kinds not served yet and
//! leader-election retries.
//!
//! Exponential from `initial`, doubling per attempt, capped at `max`, and spread *down* by up
//! to a fifth: many replicas (or plugins) failing together do not retry in step, and no delay
//! exceeds the maximum an operator or a manifest set.

use std::time::Duration;

/// Attempts past this one wait as long as it does (`2^20` times `initial` is past any cap).
const MAX_DOUBLINGS: u32 = 20;

/// An exponential backoff with jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// The first delay, before jitter.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Backoff {
    /// Doubling from `initial` up to `max`.
    pub(crate) const fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max }
    }

    /// The delay before retry `attempt` (0 for the first): `initial` doubled `attempt` times,
    /// at most `max`, then [`jitter`]ed.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let base = self
            .initial
            .saturating_mul(1 << attempt.min(MAX_DOUBLINGS))
            .min(self.max);
        jitter(base)
    }
}

/// `d` spread down by up to 20 %: between `0.8 d` and `d`.
pub(crate) fn jitter(d: Duration) -> Duration {
    d.mul_f64(1.0 - rand::random::<f64>() * 0.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_never_past_it() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        for (attempt, base) in [
            (0, 1.0),
            (1, 2.0),
            (2, 4.0),
            (4, 16.0),
            (5, 30.0),
            (40, 30.0),
        ] {
            for _ in 0..50 {
                let d = b.delay(attempt).as_secs_f64();
                assert!(
                    (base * 0.8..=base).contains(&d),
                    "attempt {attempt}: {d} s, expected {base} s less up to 20 %"
                );
            }
        }
    }

    #[test]
    fn huge_settings_saturate_instead_of_overflowing() {
        let b = Backoff::new(Duration::MAX, Duration::MAX);
        assert!(b.delay(u32::MAX) >= Duration::MAX.mul_f64(0.8));
        let zero = Backoff::new(Duration::ZERO, Duration::from_secs(1));
        assert_eq!(zero.delay(7), Duration::ZERO);
    }
}
