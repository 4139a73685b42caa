//! The `log` import, and what a plugin's own text (log lines, errors) may cost the host.

use std::sync::Arc;

use tokio::sync::broadcast;
use wasmtime::component::{HasSelf, Linker};

use crate::plugin::bindings::{Level, informant};
use crate::plugin::logbook::LogRing;
use crate::plugin::text::{escape_controls, truncated};

/// One line a plugin logged, as broadcast to subscribers (tests, `replay`); its plugin's
/// [`LogRing`](crate::plugin::logbook::LogRing) keeps it too, for `informant logs`.
#[derive(Debug, Clone)]
pub struct PluginLog {
    /// The plugin's name.
    pub plugin: Arc<str>,
    /// Its tenant (empty for the operator's top-level plugins).
    pub tenant: Arc<str>,
    /// Severity.
    pub level: Level,
    /// The message.
    pub message: String,
}

/// What the `log` import of one instance holds: where its plugin's lines go, and what they may
/// cost.
pub(crate) struct LogState {
    plugin: Arc<str>,
    tenant: Arc<str>,
    logs: broadcast::Sender<PluginLog>,
    pub(super) text: TextLimits,
    log_rate: Arc<LogRate>,
    /// Where the plugin's lines are kept for `informant logs`, if anywhere.
    pub(super) log_ring: Option<Arc<LogRing>>,
}

impl LogState {
    /// Lines of `plugin` of `tenant` go to `logs` (and the host's log, at `log_rate`).
    pub(crate) fn new(
        plugin: Arc<str>,
        tenant: Arc<str>,
        logs: broadcast::Sender<PluginLog>,
        text: TextLimits,
        log_rate: Arc<LogRate>,
    ) -> Self {
        LogState {
            plugin,
            tenant,
            logs,
            text,
            log_rate,
            log_ring: None,
        }
    }
}

/// Adds the `log` import to `linker`, each store's state of it reached by `get`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut LogState,
) -> wasmtime::Result<()> {
    informant::plugin::log::add_to_linker::<T, HasSelf<LogState>>(linker, get)
}

impl informant::plugin::log::Host for LogState {
    async fn log(&mut self, level: Level, message: String) {
        let message = truncated(message, self.text.log_bytes);
        // The host's log is shared by every tenant: a flood is cut to the plugin's rate, and
        // what was cut is said once it may speak again. Subscribers still get every line.
        let dropped = self.log_rate.admit();
        if let Some(dropped) = dropped.filter(|n| *n > 0) {
            let rate = self.text.log_lines_per_second;
            tracing::warn!(
                dropped,
                "log lines dropped from the host's log: over {rate} per second (`limits.log-lines-per-second`)"
            );
        }
        if dropped.is_some() {
            // Escaped: a newline must not start a line that looks like the host's.
            let line = escape_controls(&message);
            match level {
                Level::Trace => tracing::trace!("{line}"),
                Level::Debug => tracing::debug!("{line}"),
                Level::Info => tracing::info!("{line}"),
                Level::Warn => tracing::warn!("{line}"),
                Level::Error => tracing::error!("{line}"),
            }
        }
        if let Some(log_ring) = &self.log_ring {
            log_ring.push(level, &message);
        }
        // Nobody listening is the normal case outside tests and replay.
        let _ = self.logs.send(PluginLog {
            plugin: self.plugin.clone(),
            tenant: self.tenant.clone(),
            level,
            message,
        });
    }
}

/// Default longest log message a plugin may write; the rest is cut.
pub(crate) const MAX_LOG_BYTES: usize = 64 << 10;

/// Default longest error text kept from a plugin: it is logged and shown by `/plugins`.
pub(crate) const MAX_ERROR_BYTES: usize = 4 << 10;

/// What a plugin's own text may cost the host (`[limits]` in informant.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLimits {
    /// Longest log message; the rest is cut and marked.
    pub log_bytes: usize,
    /// Longest error text (returned errors, traps); the rest is cut and marked.
    pub error_bytes: usize,
    /// Log lines per second one plugin may write into the host's log.
    pub log_lines_per_second: u32,
}

impl Default for TextLimits {
    fn default() -> Self {
        TextLimits {
            log_bytes: MAX_LOG_BYTES,
            error_bytes: MAX_ERROR_BYTES,
            log_lines_per_second: 1000,
        }
    }
}

/// One plugin version's log rate (shared by its instances, so a restart does not refill it)
/// and the lines it had dropped since it last spoke.
#[derive(Debug)]
pub struct LogRate {
    limiter: governor::DefaultDirectRateLimiter,
    dropped: std::sync::atomic::AtomicU64,
}

impl LogRate {
    /// `per_second` lines, with a burst of one second's worth.
    pub fn new(per_second: u32) -> Arc<Self> {
        let rate = std::num::NonZeroU32::new(per_second).unwrap_or(std::num::NonZeroU32::MIN);
        Arc::new(LogRate {
            limiter: governor::RateLimiter::direct(governor::Quota::per_second(rate)),
            dropped: Default::default(),
        })
    }

    /// `None` when this line is over the rate (and counted); else how many were dropped before it.
    fn admit(&self) -> Option<u64> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.limiter.check().is_err() {
            self.dropped.fetch_add(1, Relaxed);
            return None;
        }
        Some(self.dropped.swap(0, Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::imports::cache::CacheView;
    use crate::plugin::imports::state::State;
    use tokio::sync::broadcast;
    #[tokio::test]
    async fn a_plugin_cannot_write_a_host_log_line() {
        let captured = crate::testing::CapturedLogs::default();
        let _default = tracing::subscriber::set_default(captured.subscriber());
        let logs = broadcast::channel(8).0;
        let mut rx = logs.subscribe();
        let cache = Arc::new(CacheView::default());
        let text = TextLimits::default();
        let rate = (text, LogRate::new(2));
        let mut state = State::new("a".into(), "team-a".into(), 1 << 20, cache, logs, rate);
        let forged =
            "done\n2026-11-23T00:00:00Z  ERROR informant: plugin=\"b\" tenant=\"team-b\" forged";
        let huge = format!("{forged}{}", "x".repeat(MAX_LOG_BYTES));
        informant::plugin::log::Host::log(&mut state.log, Level::Info, huge).await;
        let text = captured.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("done\\n2026"), "{text}");
        assert!(text.len() < MAX_LOG_BYTES + 512, "{} bytes", text.len());
        // Subscribers (tests, replay) get the text as written, bounded.
        let sent = rx.recv().await.unwrap().message;
        assert!(sent.starts_with(forged) && sent.len() < MAX_LOG_BYTES + 64);
        // A flood: the host's log takes the burst (2 lines), subscribers take every line.
        for i in 0..5 {
            informant::plugin::log::Host::log(&mut state.log, Level::Info, format!("flood {i}"))
                .await;
        }
        let text = captured.text();
        assert_eq!(text.lines().count(), 2, "{text}");
        for i in 0..5 {
            assert_eq!(rx.recv().await.unwrap().message, format!("flood {i}"));
        }
        assert_eq!(
            state
                .log
                .log_rate
                .dropped
                .load(std::sync::atomic::Ordering::Relaxed),
            4,
            "counted, to be reported when the plugin may log again"
        );
    }
}
