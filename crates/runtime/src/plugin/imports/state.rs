//! Per-instance state inside the wasmtime `Store`: what every import of one instance shares.

use std::sync::Arc;

use tokio::sync::broadcast;
use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::plugin::imports::events::batch::Batch;
use crate::plugin::imports::outbound::{Hooks, Outbound};
use crate::plugin::imports::write::PluginWrites;
use crate::plugin::metrics::PluginMetrics;

use crate::plugin::imports::bindings::informant;
use crate::plugin::imports::cache::CacheView;
use crate::plugin::imports::log::{LogRate, PluginLog, TextLimits};
use crate::plugin::logbook::LogRing;

/// Per-instance state inside the wasmtime `Store`.
pub struct State {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(crate) limits: StoreLimits,
    pub(super) plugin: Arc<str>,
    pub(super) tenant: Arc<str>,
    pub(super) cache: Arc<CacheView>,
    pub(super) logs: broadcast::Sender<PluginLog>,
    pub(super) text: TextLimits,
    pub(super) log_rate: Arc<LogRate>,
    /// Where the plugin's lines are kept for `informant logs`, if anywhere.
    pub(super) log_ring: Option<Arc<LogRing>>,
    pub(super) http: WasiHttpCtx,
    pub(crate) hooks: Hooks,
    pub(super) writer: Arc<PluginWrites>,
    pub(super) metrics: Arc<PluginMetrics>,
    /// The events of the `handle-queued` call in progress.
    pub(crate) batch: Batch,
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
        let (plugin_name, tenant_name) = (plugin.clone(), tenant.clone());
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
            plugin,
            tenant,
            cache,
            logs,
            http: WasiHttpCtx::new(),
            hooks: Hooks {
                outbound: Arc::new(Outbound::default()),
                plugin: plugin_name,
                tenant: tenant_name,
                span: Default::default(),
            },
            batch: Batch::new(std::time::Duration::from_secs(1), text.error_bytes),
            text,
            log_rate,
            log_ring: None,
            writer: Arc::new(PluginWrites::default()),
            metrics: Arc::default(),
        }
    }

    /// Keeps the plugin's log lines in `log_ring` too.
    pub fn with_log_ring(mut self, log_ring: Option<Arc<LogRing>>) -> Self {
        self.log_ring = log_ring;
        self
    }

    /// Each event's deadline within a `handle-queued` call (1 s until given).
    pub fn with_deadline(mut self, per_event: std::time::Duration) -> Self {
        self.batch = Batch::new(per_event, self.text.error_bytes);
        self
    }

    /// What the plugin may write (nothing until given).
    pub fn with_writer(mut self, writer: Arc<PluginWrites>) -> Self {
        self.writer = writer;
        self
    }

    /// The plugin's outbound HTTP policy (none until given).
    pub fn with_outbound(mut self, outbound: Arc<Outbound>) -> Self {
        self.hooks.outbound = outbound;
        self
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
