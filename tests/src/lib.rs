//! Shared harness for the end-to-end tests: a recording handler whose waits are on real
//! conditions (events received), never on sleeps; plugin building and a plugin host in
//! [`plugins`]; the host's own log lines in [`host_log`]; the Python and JS toolchains, or a
//! printed skip without them, in [`toolchains`]; the e2e bench's regression guard in
//! [`bench_guard`].

pub mod admission;
pub mod bench_guard;
pub mod chart;
pub mod host_log;
pub mod http;
pub mod loopback_tls;
pub mod otlp;
pub mod plugins;
pub mod proc;
pub mod rbac;
pub mod receiver;
pub mod registry;
pub mod toolchains;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informant_runtime::informer::{Event, EventType, Handler};
use tokio::sync::watch;

/// Upper bound for any wait in a test: a failure guard, never a synchronization device.
pub const GUARD: Duration = Duration::from_secs(60);

/// One recorded event, reduced to what tests compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Event type.
    pub event_type: EventType,
    /// `namespace/name`.
    pub key: String,
    /// resourceVersion of the (new) object.
    pub resource_version: String,
    /// Part of an initial replay.
    pub initial: bool,
    /// Delete inferred from a relist.
    pub final_state_unknown: bool,
}

/// A handler that records every event and lets tests wait for a condition over them.
#[derive(Clone)]
pub struct Recorder {
    events: Arc<Mutex<Vec<Seen>>>,
    count: Arc<watch::Sender<usize>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            events: Arc::default(),
            count: Arc::new(watch::channel(0).0),
        }
    }
}

impl Recorder {
    /// A new, empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of everything seen so far.
    pub fn events(&self) -> Vec<Seen> {
        self.events.lock().unwrap().clone()
    }

    /// Waits until `pred` holds over the events seen, failing the test after [`GUARD`].
    pub async fn wait_until(&self, what: &str, pred: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
        let ok = wait_for_change(&self.count, || pred(&self.events.lock().unwrap())).await;
        let events = self.events();
        assert!(
            ok,
            "timed out waiting for {what}; saw {} events, last: {:?}",
            events.len(),
            events.last()
        );
        events
    }
}

/// Re-checks `pred` each time `count` changes until it holds; false after [`GUARD`].
///
/// `pred` runs without any of the caller's locks held by this function.
pub async fn wait_for_change(count: &watch::Sender<usize>, pred: impl Fn() -> bool) -> bool {
    let mut rx = count.subscribe();
    let waited = tokio::time::timeout(GUARD, async {
        while !pred() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    })
    .await;
    waited.is_ok() && pred()
}

impl Handler for Recorder {
    fn handle(&mut self, e: Event) -> impl Future<Output = ()> + Send {
        self.events.lock().unwrap().push(Seen {
            event_type: e.event_type,
            key: e.key().to_string(),
            resource_version: e.object.resource_version().to_string(),
            initial: e.initial,
            final_state_unknown: e.final_state_unknown,
        });
        self.count.send_modify(|c| *c += 1);
        std::future::ready(())
    }
}

/// The entry of plugin `name` in a `/plugins` answer (`null` when absent).
pub fn plugin_entry(plugins: &str, name: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(plugins).expect("/plugins JSON");
    v["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

/// Creates the namespaces a test writes into: the embedded API server, like a real one, refuses
/// objects in a namespace that does not exist. One that exists already is left as it is.
pub fn create_namespaces(server: &informant_devserver::DevServer, names: &[&str]) {
    for name in names {
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match server.create(ns) {
            Ok(_) | Err(informant_devserver::Error::AlreadyExists { .. }) => {}
            Err(e) => panic!("create namespace {name}: {e}"),
        }
    }
}

/// A ConfigMap manifest.
pub fn configmap(ns: &str, name: &str, value: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "demo"}},
        "data": {"value": value}})
}

/// Waits for a future with the [`GUARD`] timeout, naming what was awaited on failure.
pub async fn guarded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Routes `tracing` to the test's captured output (once per process); for debugging failures.
pub fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info".into()),
            )
            .with_test_writer()
            .try_init();
    });
}
