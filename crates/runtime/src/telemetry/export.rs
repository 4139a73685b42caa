//! The export pipeline: finished spans into a bounded queue, drained by one thread that sends
//! batches to the collector as OTLP/HTTP protobuf (`POST {endpoint}/v1/traces`).
//!
//! Contract:
//! - Ending a span never blocks: it is a `try_send` into the queue. A full queue (the collector
//!   is dead, slow, or the host makes spans faster than it takes them) drops the span and counts
//!   it in [`ExportStats::dropped`]; the first drop is logged, later ones only counted.
//! - The exporter thread sends a batch when it holds [`ExportConfig::max_batch`] spans or
//!   [`ExportConfig::delay`] after the last send, each request bounded by
//!   [`ExportConfig::timeout`]. A failed request loses its batch (counted in
//!   [`ExportStats::failed`]); the first failure of an outage is logged, and so is recovery.
//! - `http://` and `https://` endpoints ([`client`](super::client): rustls, the system's CAs
//!   and any given), with the configured headers; sampled at the configured ratio
//!   ([`config`](super::config)). The endpoint's credentials are never logged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use opentelemetry::Context;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor};

pub use super::config::{ExportConfig, Sampling};
use super::error::Error;

/// The service name spans are exported under.
pub(crate) const SERVICE_NAME: &str = "informant";

/// What the export pipeline did with finished spans.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Spans the collector accepted.
    pub exported: AtomicU64,
    /// Spans in requests that failed (no answer, an error status, past the timeout).
    pub failed: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped: AtomicU64,
}

/// Traces on for this process until dropped: the tracer every span is made with, and its
/// export pipeline. Dropping it turns traces off and sends what is queued, waiting at most
/// [`SHUTDOWN_BOUND`].
pub struct Traces {
    provider: SdkTracerProvider,
    stats: Arc<ExportStats>,
}

impl Traces {
    /// Starts exporting to `config.endpoint` and turns traces on.
    pub fn start(config: ExportConfig) -> Result<Traces, Error> {
        let target = config.target()?;
        // The blocking client keeps a runtime of its own; built (and later dropped) off any
        // async context.
        let timeout = config.timeout;
        let exporter = std::thread::scope(|s| {
            s.spawn(|| {
                let client = super::client::build(&target, config.ca_file.as_deref(), timeout)?;
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_http_client(client)
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(target.url.clone())
                    .with_timeout(timeout)
                    .build()
                    .map_err(|source| Error::Build {
                        endpoint: target.shown.clone(),
                        source,
                    })
            })
            .join()
            .expect("building the exporter does not panic")
        })?;
        let resource = Resource::builder().with_service_name(SERVICE_NAME).build();
        let stats = Arc::new(ExportStats::default());
        let queue = Queue::start(exporter, &resource, &config, &target, stats.clone())?;
        let provider = SdkTracerProvider::builder()
            .with_resource(resource)
            .with_sampler(config.sampling.sampler())
            .with_span_processor(queue)
            .build();
        use opentelemetry::trace::TracerProvider as _;
        super::install(provider.tracer("informant"), stats.clone())?;
        tracing::info!(
            endpoint = %target.shown,
            headers = ?target.headers.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            sample_ratio = config.sampling.ratio,
            "exporting traces over OTLP/HTTP"
        );
        Ok(Traces { provider, stats })
    }

    /// What the pipeline did so far.
    pub fn stats(&self) -> &ExportStats {
        &self.stats
    }

    /// Sends every span finished so far, waiting for the collector (up to the export timeout).
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }
}

/// The longest dropping [`Traces`] waits for the spans still queued to be sent.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(5);

impl Drop for Traces {
    fn drop(&mut self) {
        super::uninstall();
        // On a thread of its own: a collector that never answers keeps the exporter thread in
        // its request, and handing it the shutdown may wait for room in a full queue.
        let (provider, bound) = (self.provider.clone(), SHUTDOWN_BOUND);
        let (done, finished) = sync_channel(1);
        let shutdown = std::thread::Builder::new()
            .name("informant-traces-shutdown".into())
            .spawn(move || {
                let _ = provider.shutdown_with_timeout(bound);
                let _ = done.send(());
            });
        if shutdown.is_ok() {
            let _ = finished.recv_timeout(bound);
        }
    }
}

/// Messages to the exporter thread.
enum Message {
    Span(Box<SpanData>),
    Flush(SyncSender<()>),
    Shutdown(SyncSender<()>),
}

/// The span processor: a bounded queue into the exporter thread.
#[derive(Debug)]
struct Queue {
    tx: SyncSender<Message>,
    stats: Arc<ExportStats>,
    timeout: Duration,
}

impl Queue {
    fn start<E: SpanExporter + 'static>(
        mut exporter: E,
        resource: &Resource,
        config: &ExportConfig,
        target: &super::config::Target,
        stats: Arc<ExportStats>,
    ) -> Result<Queue, Error> {
        exporter.set_resource(resource);
        let (tx, rx) = sync_channel(config.max_queue.max(1));
        let worker = Worker {
            exporter,
            rx,
            stats: stats.clone(),
            endpoint: target.shown.clone(),
            max_batch: config.max_batch.max(1),
            delay: config.delay,
            failing: false,
        };
        std::thread::Builder::new()
            .name("informant-traces".into())
            .spawn(move || worker.run())
            .map_err(Error::Thread)?;
        Ok(Queue {
            tx,
            stats,
            timeout: config.timeout,
        })
    }

    /// Sends a control message and waits for the thread to answer it.
    fn ask(
        &self,
        message: impl FnOnce(SyncSender<()>) -> Message,
        wait: Duration,
    ) -> OTelSdkResult {
        let (done, answered) = sync_channel(1);
        self.tx
            .send(message(done))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        answered
            .recv_timeout(wait)
            .map_err(|_| OTelSdkError::Timeout(wait))
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        match self.tx.try_send(Message::Span(Box::new(span))) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                if self.stats.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        "trace export queue full: spans are dropped (counted; logged once) until the collector catches up"
                    );
                }
            }
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.ask(Message::Flush, self.timeout * 2)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.ask(Message::Shutdown, timeout)
    }
}

/// The exporter thread's state.
struct Worker<E> {
    exporter: E,
    rx: Receiver<Message>,
    stats: Arc<ExportStats>,
    /// The traces URL as logs show it.
    endpoint: String,
    max_batch: usize,
    delay: Duration,
    /// In an outage: its first failure was logged.
    failing: bool,
}

impl<E: SpanExporter> Worker<E> {
    fn run(mut self) {
        let mut batch = Vec::with_capacity(self.max_batch);
        let mut due = Instant::now() + self.delay;
        loop {
            let wait = due.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(Message::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= self.max_batch {
                        self.send(&mut batch);
                        due = Instant::now() + self.delay;
                    }
                }
                Ok(Message::Flush(done)) => {
                    self.drain(&mut batch);
                    let _ = done.send(());
                }
                Ok(Message::Shutdown(done)) => {
                    self.drain(&mut batch);
                    let _ = self.exporter.shutdown();
                    let _ = done.send(());
                    return;
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.send(&mut batch);
                    due = Instant::now() + self.delay;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.send(&mut batch);
                    return;
                }
            }
        }
    }

    /// Sends what is queued now, then the batch.
    fn drain(&mut self, batch: &mut Vec<SpanData>) {
        while let Ok(Message::Span(span)) = self.rx.try_recv() {
            batch.push(*span);
            if batch.len() >= self.max_batch {
                self.send(batch);
            }
        }
        self.send(batch);
    }

    fn send(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let spans = std::mem::replace(batch, Vec::with_capacity(self.max_batch));
        match futures::executor::block_on(self.exporter.export(spans)) {
            Ok(()) => {
                self.stats.exported.fetch_add(n, Ordering::Relaxed);
                if std::mem::replace(&mut self.failing, false) {
                    tracing::info!(endpoint = %self.endpoint, "trace export recovered");
                }
            }
            Err(error) => {
                self.stats.failed.fetch_add(n, Ordering::Relaxed);
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(endpoint = %self.endpoint, %error, "trace export failed: spans are lost until the collector answers (logged once per outage)");
                }
            }
        }
    }
}
