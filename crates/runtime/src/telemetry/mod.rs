//! Traces: OpenTelemetry spans of plugin work, exported over OTLP/HTTP (protobuf bodies).
//!
//! Off unless a process installs [`Traces`] (the CLI does when `--otlp-endpoint` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set); `http://` or `https://`, with headers and a sampling
//! ratio ([`config`]). While off, every span constructor here returns an
//! inert value after one relaxed atomic load: the event path pays nothing else.
//!
//! What is traced, once on:
//! - a root span `event` per event a plugin takes ([`EventSpan`]), from the informer receiving
//!   it (or, for an initial event, the plugin taking it) to the plugin's outcome, with the
//!   attributes `plugin`, `tenant`, `kind`, `key`, `event.type` and `outcome`; each event is a
//!   trace of its own;
//! - a child span per host call made for that event ([`HostSpan`]): each `kube` write, each
//!   outbound HTTP request (which carries a W3C `traceparent` naming that span, replacing any
//!   the plugin set), and each cache query that took longer than [`SLOW_QUERY`];
//! - a root span `admission` per admission request a hook answers ([`AdmissionSpan`]), with
//!   `plugin`, `tenant`, `hook`, `operation`, `kind`, `uid`, `decision` and, when the plugin
//!   gave no usable answer, `failure`.
//!
//! Export never waits on the event path: finished spans go into a bounded queue drained by an
//! exporter thread of its own; when the queue is full (a dead or slow collector) spans are
//! dropped and counted, and the first drop and the first failed export of an outage are logged,
//! not every one (see [`export`]).

mod client;
pub(crate) mod config;
mod error;
pub mod export;
mod span;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry_sdk::trace::SdkTracer;
use parking_lot::RwLock;

pub use error::Error;
pub use export::{ExportConfig, ExportStats, Sampling, Traces};
pub use span::{AdmissionSpan, EventSpan, HostSpan, SLOW_QUERY};

/// Whether traces are on; read first by every span constructor so the off case is one load.
static ON: AtomicBool = AtomicBool::new(false);
/// The tracer spans are made with while [`ON`].
static TRACER: RwLock<Option<SdkTracer>> = RwLock::new(None);
/// What the installed export pipeline did, for `/metrics`.
static STATS: RwLock<Option<Arc<ExportStats>>> = RwLock::new(None);

/// Whether this process exports traces.
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The installed tracer, when traces are on.
#[inline]
fn tracer() -> Option<SdkTracer> {
    if !enabled() {
        return None;
    }
    TRACER.read().clone()
}

/// What this process's trace export did so far, while traces are on (`/metrics` shows it).
pub(crate) fn export_stats() -> Option<Arc<ExportStats>> {
    STATS.read().clone()
}

/// Makes `tracer` the process's, its pipeline counting in `stats`; an error if one is
/// installed already.
fn install(tracer: SdkTracer, stats: Arc<ExportStats>) -> Result<(), Error> {
    let mut slot = TRACER.write();
    if slot.is_some() {
        return Err(Error::AlreadyInstalled);
    }
    *slot = Some(tracer);
    *STATS.write() = Some(stats);
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Turns traces off: spans started from now on are inert.
fn uninstall() {
    ON.store(false, Ordering::Release);
    TRACER.write().take();
    STATS.write().take();
}
