//! Per-instance state inside the wasmtime `Store`: each import's own state, composed, and the
//! views its module implements the import on.

use std::sync::Arc;

use tokio::sync::broadcast;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::plugin::bindings::{admitting, informant};
use crate::plugin::imports::cache::{CacheCtx, CacheState, CacheView};
use crate::plugin::imports::events::batch::Batch;
use crate::plugin::imports::events::{EventsCtx, EventsState};
use crate::plugin::imports::kube::{KubeCtx, KubeState};
use crate::plugin::imports::log::{LogRate, LogState, PluginLog, TextLimits};
use crate::plugin::imports::metrics::MetricsState;
use crate::plugin::imports::outbound::{Hooks, Outbound};
use crate::plugin::imports::write::PluginWrites;
use crate::plugin::logbook::LogRing;
use crate::plugin::metrics::PluginMetrics;

/// Per-instance state inside the wasmtime `Store`: WASI's and wasi:http's contexts, and each
/// WIT interface's own state, which its module reaches through a view of its own
/// ([`State::events_ctx`], [`State::cache_ctx`], [`State::kube_ctx`]) or directly.
pub struct State {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(crate) limits: StoreLimits,
    pub(super) http: WasiHttpCtx,
    pub(crate) hooks: Hooks,
    /// `events`: the events of the `handle-queued` call in progress.
    pub(crate) events: EventsState,
    /// `cache`: the plugin's view of the informers' stores.
    pub(super) cache: CacheState,
    /// `kube`: what the plugin may write.
    pub(super) kube: KubeState,
    /// `log`: where its lines go, and what they may cost.
    pub(super) log: LogState,
    /// `metrics`: its own series.
    pub(super) metrics: MetricsState,
}

impl State {
    /// Fresh state: a WASI context granting nothing, a memory cap, the plugin's cache view.
    pub fn new(
        plugin: Arc<str>,
        tenant: Arc<str>,
        memory_bytes: usize,
        cache: Arc<CacheView>,
        logs: broadcast::Sender<PluginLog>,
        (text, log_rate): (TextLimits, Arc<LogRate>),
    ) -> Self {
        State {
            // No preopened dirs, env, args or sockets; stdio discarded: `log` is the only voice.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(memory_bytes)
                .instances(32)
                .tables(64)
                .memories(32)
                .trap_on_grow_failure(true)
                .build(),
            http: WasiHttpCtx::new(),
            hooks: Hooks {
                outbound: Arc::new(Outbound::default()),
                plugin: plugin.clone(),
                tenant: tenant.clone(),
                span: Default::default(),
            },
            events: EventsState::new(
                plugin.clone(),
                tenant.clone(),
                Batch::new(std::time::Duration::from_secs(1), text.error_bytes),
            ),
            cache: CacheState::new(cache),
            kube: KubeState::default(),
            log: LogState::new(plugin, tenant, logs, text, log_rate),
            metrics: MetricsState::default(),
        }
    }

    /// Keeps the plugin's log lines in `log_ring` too.
    pub fn with_log_ring(mut self, log_ring: Option<Arc<LogRing>>) -> Self {
        self.log.log_ring = log_ring;
        self
    }

    /// Each event's deadline within a `handle-queued` call (1 s until given).
    pub fn with_deadline(mut self, per_event: std::time::Duration) -> Self {
        self.events.batch = Batch::new(per_event, self.log.text.error_bytes);
        self
    }

    /// What the plugin may write (nothing until given).
    pub fn with_writer(mut self, writer: Arc<PluginWrites>) -> Self {
        self.kube.writes = writer;
        self
    }

    /// The plugin's outbound HTTP policy (none until given).
    pub fn with_outbound(mut self, outbound: Arc<Outbound>) -> Self {
        self.hooks.outbound = outbound;
        self
    }

    /// The plugin version's metrics (a fresh, unshared set until given).
    pub fn with_metrics(mut self, metrics: Arc<PluginMetrics>) -> Self {
        self.metrics.metrics = metrics;
        self
    }

    /// Links the plugin world's imports, each interface by its own module on its own view of
    /// the store; WASI's are linked beside them by the engine. The world's `add_to_linker` is
    /// not used: it would want `State` itself to implement wasi:http's traits, which
    /// wasmtime-wasi-http implements on its view.
    pub(crate) fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
        use crate::plugin::imports::{cache, events, kube, log, metrics};
        informant::plugin::types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
        // Types only: what an admitting plugin's `admission-hook` export takes and answers.
        admitting::informant::plugin::admission::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
        events::add_to_linker(linker, State::events_ctx)?;
        cache::add_to_linker(linker, State::cache_ctx)?;
        kube::add_to_linker(linker, State::kube_ctx)?;
        log::add_to_linker(linker, |s| &mut s.log)?;
        metrics::add_to_linker(linker, |s| &mut s.metrics)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }

    /// The `events` import's view: its state, and the span outbound requests are children of.
    pub(crate) fn events_ctx(&mut self) -> EventsCtx<'_> {
        EventsCtx {
            state: &mut self.events,
            http_span: &mut self.hooks.span,
        }
    }

    /// The `cache` import's view: its state, and the span of the event in hand.
    pub(crate) fn cache_ctx(&mut self) -> CacheCtx<'_> {
        CacheCtx {
            state: &self.cache,
            span: self.events.batch.span(),
        }
    }

    /// The `kube` import's view: its state, and the span of the event in hand.
    pub(crate) fn kube_ctx(&mut self) -> KubeCtx<'_> {
        KubeCtx {
            state: &self.kube,
            span: self.events.batch.span(),
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl informant::plugin::types::Host for State {}

impl admitting::informant::plugin::admission::Host for State {}
