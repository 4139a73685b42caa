//! Unit-test plugins natively with `cargo test`: no cluster, no wasm runtime.
//!
//! A [`Harness`] owns a plugin instance, an in-memory [`MemCache`] and the captured log. While it
//! runs the plugin (init, [`Harness::send`]), the plugin's [`crate::cache`] and [`crate::log`](mod@crate::log) calls
//! go to that cache and log, through thread-local state; each test runs on its own thread, so tests
//! do not see each other. Outside a harness call they go to a per-thread default cache and log.
//!
//! Like the host, [`Harness::send`] first applies the event to the cache (added, updated and resync
//! store the object, deleted removes it), so queries see the object the event is about; turn that
//! off with [`Harness::apply_to_cache`] to stage the cache by hand. [`Harness::tick`] ticks a
//! schedule as the host's timer would. [`Harness::admit`] answers an admission request built
//! with [`admission_request`], against the same cache, refusing writes as the host does.
//!
//! ```
//! use informant_sdk::testing::{EventBuilder, Harness};
//! use informant_sdk::{Event, HandlerError, Plugin, log::Level};
//!
//! struct Echo;
//! impl Plugin for Echo {
//!     fn init(_: serde_json::Value) -> Result<Self, HandlerError> { Ok(Echo) }
//!     fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
//!         informant_sdk::info!("added {}", ev.meta().key());
//!         Ok(())
//!     }
//! }
//!
//! let mut h = Harness::<Echo>::new("{}").unwrap();
//! let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"namespace": "default", "name": "cfg"}});
//! h.send(EventBuilder::added(&cm)).unwrap();
//! assert_eq!(h.logs(), [(Level::Info, "added default/cfg".to_string())]);
//! ```

mod admission;
pub(crate) mod cache;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

pub use self::admission::{AdmissionRequestBuilder, admission_request};
pub use self::cache::MemCache;
use crate::event::{Head, Object};
/// The level of a captured log record.
pub use crate::log::Level;
use crate::{Event, EventType, HandlerError, Plugin, QueryError, Resource, Retry};
use informant_manifest::{Manifest, ManifestError};

/// Why the harness could not do what a test asked (the plugin's own errors in
/// [`Harness::send`] are [`HandlerError`]s).
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The manifest does not parse or validate (by the host's own parser).
    #[error("manifest")]
    Manifest(#[source] ManifestError),
    /// The plugin's `init` failed (the config not being JSON included), with its message.
    #[error("{0}")]
    Init(HandlerError),
    /// An event of the replay [`Harness::restart`] makes failed.
    #[error("replaying {key}: {error}")]
    Replay {
        /// The object's `namespace/name`.
        key: String,
        /// The plugin's error.
        error: HandlerError,
    },
    /// An object a test handed over cannot be stored or make an event.
    #[error("{0}")]
    Object(String),
    /// An index cannot be declared.
    #[error("index `{name}`: {why}")]
    Index {
        /// The index's name.
        name: String,
        /// Why not.
        why: String,
    },
}

#[derive(Default)]
struct State {
    cache: MemCache,
    logs: Vec<(Level, String)>,
    writes: Vec<Written>,
    metrics: Vec<MetricCall>,
    /// The manifest's `[[write]]` tables, when the harness was built from one.
    declared: Option<Vec<informant_manifest::Write>>,
    /// The manifest's `[[schedule]]` names, when the harness was built from one.
    schedules: Option<Vec<String>>,
    /// The manifest's `[[admit]]` tables, when the harness was built from one.
    admits: Option<Vec<informant_manifest::Admit>>,
    /// An admission request is being answered: writes are refused, as the host does.
    admitting: bool,
}

/// One write a plugin made, as the harness recorded it instead of sending it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `create`, `apply`, `apply-forced`, `patch-merge`, `patch-json`, `patch-strategic`,
    /// `delete`, `update-status` or `record-event`.
    pub verb: &'static str,
    /// The kind written (`events.k8s.io/v1` `Event` for `record-event`).
    pub resource: Resource,
    /// The namespace named.
    pub namespace: Option<String>,
    /// The object's name, for calls on an existing object.
    pub name: Option<String>,
    /// The object, patch, preconditions or Event (type, reason, action, note, regarding) as
    /// JSON.
    pub body: String,
}

/// Records a write, refusing it as the host would when the manifest does not declare it.
/// Answers with the body, standing in for the object as stored.
pub(crate) fn record_write(w: Written) -> Result<String, crate::kube::WriteError> {
    use informant_manifest::Verb;
    CURRENT.with(|s| {
        let mut s = s.borrow_mut();
        if s.admitting {
            return Err(crate::kube::WriteError::Denied(
                admission::WRITE_REFUSED.to_string(),
            ));
        }
        if let Some(declared) = &s.declared {
            let verb = match w.verb {
                "create" | "record-event" => Verb::Create,
                "apply" | "apply-forced" => Verb::Apply,
                "delete" => Verb::Delete,
                "update-status" => Verb::UpdateStatus,
                _ => Verb::Patch,
            };
            let r = &w.resource;
            let gvk = (r.group.as_str(), r.version.as_str(), r.kind.as_str());
            if !declared
                .iter()
                .any(|d| d.allows(verb, gvk, w.namespace.as_deref()))
            {
                return Err(crate::kube::WriteError::Denied(format!(
                    "`{verb}` of `{}/{}`{} is not declared in the manifest's [[write]] tables",
                    r.api_version(),
                    r.kind,
                    w.namespace
                        .as_deref()
                        .map_or(String::new(), |ns| format!(" in namespace `{ns}`"))
                )));
            }
        }
        let body = w.body.clone();
        s.writes.push(w);
        Ok(body)
    })
}

/// One `metrics` call a plugin made, as the harness recorded it (and accepted: the host's
/// naming rules and ceilings are not checked here).
#[derive(Debug, Clone, PartialEq)]
pub struct MetricCall {
    /// `counter-add`, `gauge-set`, `histogram-observe`, `delete` or `delete-group`.
    pub call: &'static str,
    /// The metric's name (empty for `delete-group`).
    pub name: String,
    /// Its help text (empty for deletes).
    pub help: String,
    /// Its labels, sorted by name.
    pub labels: Vec<(String, String)>,
    /// The group written or deleted.
    pub group: Option<String>,
    /// The value added, set or observed (0 for deletes).
    pub value: f64,
}

pub(crate) fn record_metric(call: MetricCall) {
    CURRENT.with(|s| s.borrow_mut().metrics.push(call));
}

/// A series as the recorded calls name it: metric, labels, and the group of its latest write.
type LiveSeries<'a> = (&'a str, &'a [(String, String)], Option<&'a str>);

/// The series written and not deleted since, by the recorded calls.
fn live_series(calls: &[MetricCall]) -> Vec<LiveSeries<'_>> {
    let mut live: Vec<LiveSeries<'_>> = Vec::new();
    for c in calls {
        match c.call {
            "delete" => live.retain(|(n, l, _)| (*n, *l) != (c.name.as_str(), &c.labels[..])),
            "delete-group" => live.retain(|(_, _, g)| *g != c.group.as_deref()),
            _ => {
                live.retain(|(n, l, _)| (*n, *l) != (c.name.as_str(), &c.labels[..]));
                live.push((&c.name, &c.labels, c.group.as_deref()));
            }
        }
    }
    live
}

pub(crate) fn delete_metric(name: &str, labels: Vec<(String, String)>) -> bool {
    CURRENT.with(|s| {
        let mut s = s.borrow_mut();
        let existed = live_series(&s.metrics)
            .iter()
            .any(|(n, l, _)| *n == name && *l == &labels[..]);
        s.metrics.push(MetricCall {
            call: "delete",
            name: name.to_string(),
            help: String::new(),
            labels,
            group: None,
            value: 0.0,
        });
        existed
    })
}

pub(crate) fn delete_metric_group(group: &str) -> u32 {
    CURRENT.with(|s| {
        let mut s = s.borrow_mut();
        let n = live_series(&s.metrics)
            .iter()
            .filter(|(_, _, g)| *g == Some(group))
            .count();
        s.metrics.push(MetricCall {
            call: "delete-group",
            name: String::new(),
            help: String::new(),
            labels: Vec::new(),
            group: Some(group.to_string()),
            value: 0.0,
        });
        n as u32
    })
}

thread_local! {
    static CURRENT: RefCell<State> = RefCell::new(State::default());
}

pub(crate) fn with_cache<T>(
    f: impl FnOnce(&MemCache) -> Result<T, QueryError>,
) -> Result<T, QueryError> {
    CURRENT.with(|s| f(&s.borrow().cache))
}

pub(crate) fn capture_log(level: Level, message: &str) {
    CURRENT.with(|s| s.borrow_mut().logs.push((level, message.to_string())));
}

/// Drives one plugin instance the way the host does, against an in-memory cache.
pub struct Harness<P: Plugin> {
    plugin: P,
    config: String,
    state: State,
    apply_to_cache: bool,
    retry: Option<Retry>,
}

impl<P: Plugin> Harness<P> {
    /// Builds the plugin from config JSON (the manifest's `[config]` table as the host hands it).
    pub fn new(config_json: &str) -> Result<Self, HarnessError> {
        Self::with_cache(config_json, MemCache::new(), None)
    }

    /// Builds the plugin from a config value.
    pub fn with_config(config: Value) -> Result<Self, HarnessError> {
        Self::new(&config.to_string())
    }

    /// Builds the plugin from a manifest (`NAME.toml` text): its `[config]`, and its `[[watch]]`
    /// kinds and `[watch.indexes]` declared on the cache, so queries outside them are refused;
    /// [`Harness::tick`] and [`Harness::admit`] refuse what its `[[schedule]]` and `[[admit]]`
    /// tables do not declare.
    ///
    /// The manifest is parsed and validated by the host's own parser (`informant-manifest`), so
    /// a manifest these tests accept is one the host loads.
    pub fn from_manifest(manifest_toml: &str) -> Result<Self, HarnessError> {
        let manifest = Manifest::parse(manifest_toml, Path::new("manifest"))
            .map_err(HarnessError::Manifest)?;
        let mut cache = MemCache::new();
        // A wildcard watch (`kind = "*"`) may cover any kind: a cache with no kind declared
        // refuses none. Its field indexes are declared on the kinds a test stores.
        let wildcard = manifest.watch.iter().any(|w| w.is_wildcard());
        for w in manifest.watch.iter().filter(|_| !wildcard) {
            let r = Resource::from_api_version(w.api_version.as_str(), w.kind.as_str());
            cache.watch(r.clone());
            for (name, path) in w.field_indexes() {
                cache.add_field_index(&r, name, path.clone())?;
            }
        }
        let schedules = manifest
            .schedule
            .iter()
            .map(|s| s.name.as_str().to_string())
            .collect();
        let admits = manifest.admit.clone();
        let mut h = Self::with_cache(&manifest.config_json(), cache, Some(manifest.write))?;
        h.state.schedules = Some(schedules);
        h.state.admits = Some(admits);
        Ok(h)
    }

    fn with_cache(
        config_json: &str,
        cache: MemCache,
        declared: Option<Vec<informant_manifest::Write>>,
    ) -> Result<Self, HarnessError> {
        let mut state = State {
            cache,
            declared,
            ..State::default()
        };
        let plugin = run_in(&mut state, || crate::__private::init::<P>(config_json))
            .map_err(HarnessError::Init)?;
        Ok(Harness {
            plugin,
            config: config_json.to_string(),
            state,
            apply_to_cache: true,
            retry: None,
        })
    }

    /// Whether [`Harness::send`] applies each event to the cache first (default `true`).
    pub fn apply_to_cache(&mut self, apply: bool) -> &mut Self {
        self.apply_to_cache = apply;
        self
    }

    /// Hands one event to the plugin; returns the plugin's result (a retry is an `Err` too: see
    /// [`HandlerError::as_retry`], or [`Harness::retry`]).
    pub fn send(&mut self, event: impl Into<Event>) -> Result<(), HandlerError> {
        let event = event.into();
        if self.apply_to_cache {
            apply(&mut self.state.cache, &event)?;
        }
        let plugin = &mut self.plugin;
        let result = run_in(&mut self.state, || {
            crate::__private::dispatch(plugin, &event)
        });
        self.retry = result
            .as_ref()
            .err()
            .and_then(HandlerError::as_retry)
            .cloned();
        result
    }

    /// Ticks the schedule `name` as the host's timer does: [`Plugin::on_schedule`], with the
    /// harness's cache and log. A harness built from a manifest refuses a name its
    /// `[[schedule]]` tables do not declare (the host never ticks one).
    pub fn tick(&mut self, name: &str) -> Result<(), HandlerError> {
        if let Some(declared) = &self.state.schedules
            && !declared.iter().any(|d| d == name)
        {
            return Err(format!(
                "schedule `{name}` is not declared in the manifest's [[schedule]] tables"
            )
            .into());
        }
        let plugin = &mut self.plugin;
        run_in(&mut self.state, || plugin.on_schedule(name))
    }

    /// The retry the last [`Harness::send`] answered with, if its error was made by
    /// [`HandlerError::retry`] or [`HandlerError::retry_after`].
    pub fn retry(&self) -> Option<&Retry> {
        self.retry.as_ref()
    }

    /// Recreates the instance as the host does after a trap or reload: `init` with the same config,
    /// then every cached object replayed as `added` with `initial` set.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        let config = self.config.clone();
        self.plugin = run_in(&mut self.state, || crate::__private::init::<P>(&config))
            .map_err(HarnessError::Init)?;
        let replay: Vec<String> = self
            .state
            .cache
            .kinds()
            .iter()
            .flat_map(|r| self.state.cache.objects(r))
            .collect();
        for json in replay {
            let event = EventBuilder::added(json.as_str()).initial().try_build()?;
            let plugin = &mut self.plugin;
            run_in(&mut self.state, || {
                crate::__private::dispatch(plugin, &event)
            })
            .map_err(|error| HarnessError::Replay {
                key: event.meta().key(),
                error,
            })?;
        }
        Ok(())
    }

    /// The cache the plugin queries.
    pub fn cache(&self) -> &MemCache {
        &self.state.cache
    }

    /// The cache the plugin queries, to stage objects.
    pub fn cache_mut(&mut self) -> &mut MemCache {
        &mut self.state.cache
    }

    /// Every record logged so far, oldest first.
    pub fn logs(&self) -> Vec<(Level, String)> {
        self.state.logs.clone()
    }

    /// Returns and forgets the records logged so far.
    pub fn take_logs(&mut self) -> Vec<(Level, String)> {
        std::mem::take(&mut self.state.logs)
    }

    /// Every write the plugin made so far, oldest first (harnesses built from a manifest refuse
    /// undeclared writes as the host does, and do not record them).
    pub fn writes(&self) -> &[Written] {
        &self.state.writes
    }

    /// Returns and forgets the writes made so far.
    pub fn take_writes(&mut self) -> Vec<Written> {
        std::mem::take(&mut self.state.writes)
    }

    /// Every `metrics` call the plugin made so far, oldest first.
    pub fn metrics(&self) -> &[MetricCall] {
        &self.state.metrics
    }

    /// Returns and forgets the `metrics` calls made so far.
    pub fn take_metrics(&mut self) -> Vec<MetricCall> {
        std::mem::take(&mut self.state.metrics)
    }

    /// A counter's total or a gauge's last value over the recorded calls since the series was
    /// last deleted; `None` if it has none.
    pub fn metric_value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.sort();
        let (mut value, mut group) = (None, None);
        for c in &self.state.metrics {
            let this = c.name == name && c.labels == labels;
            match c.call {
                "counter-add" if this => value = Some(value.unwrap_or(0.0) + c.value),
                "gauge-set" if this => value = Some(c.value),
                "delete" if this => value = None,
                "delete-group" if group.is_some() && group == c.group.as_deref() => value = None,
                _ => continue,
            }
            if this && c.call != "delete" {
                group = c.group.as_deref();
            }
        }
        value
    }

    /// The plugin instance.
    pub fn plugin(&self) -> &P {
        &self.plugin
    }

    /// The plugin instance, mutably.
    pub fn plugin_mut(&mut self) -> &mut P {
        &mut self.plugin
    }
}

/// Runs `f` with `state` as the thread's current cache and log.
fn run_in<T>(state: &mut State, f: impl FnOnce() -> T) -> T {
    /// Swaps the state back even if the plugin panics, so the harness stays usable.
    struct Swap<'a>(&'a mut State);
    impl Drop for Swap<'_> {
        fn drop(&mut self) {
            CURRENT.with(|c| std::mem::swap(&mut *c.borrow_mut(), self.0));
        }
    }
    CURRENT.with(|c| std::mem::swap(&mut *c.borrow_mut(), state));
    let _swap = Swap(state);
    f()
}

fn apply(cache: &mut MemCache, event: &Event) -> Result<(), HarnessError> {
    match event.event_type {
        EventType::Deleted => {
            cache.remove(
                event.resource(),
                event.meta().namespace(),
                event.meta().name(),
            );
        }
        _ => {
            cache.insert(event.json())?;
        }
    }
    Ok(())
}

/// Builds [`Event`]s from objects, filling the kind and metadata from the JSON as the host does.
///
/// Objects may be JSON text, a `serde_json::Value` or a `k8s-openapi` object; `managedFields` is
/// removed. Converting into an [`Event`] (as [`Harness::send`] does) panics on an object without
/// `apiVersion`, `kind` or `metadata.name`: that is a broken test, not plugin behaviour.
#[derive(Debug, Clone)]
pub struct EventBuilder {
    event_type: EventType,
    // Kept as messages, so the builder stays `Clone`; `try_build` makes them `HarnessError`s.
    object: Result<Value, String>,
    old_object: Option<Result<Value, String>>,
    initial: bool,
    final_state_unknown: bool,
}

impl EventBuilder {
    fn new<T: Serialize + ?Sized>(event_type: EventType, object: &T) -> Self {
        EventBuilder {
            event_type,
            object: cache::to_object(object),
            old_object: None,
            initial: false,
            final_state_unknown: false,
        }
    }

    /// An `added` event.
    pub fn added<T: Serialize + ?Sized>(object: &T) -> Self {
        Self::new(EventType::Added, object)
    }

    /// An `updated` event from the previous and the new version.
    pub fn updated<T: Serialize + ?Sized, U: Serialize + ?Sized>(old: &T, new: &U) -> Self {
        let mut b = Self::new(EventType::Updated, new);
        b.old_object = Some(cache::to_object(old));
        b
    }

    /// A `deleted` event carrying the object's final state.
    pub fn deleted<T: Serialize + ?Sized>(object: &T) -> Self {
        Self::new(EventType::Deleted, object)
    }

    /// A `resync` event.
    pub fn resync<T: Serialize + ?Sized>(object: &T) -> Self {
        Self::new(EventType::Resync, object)
    }

    /// Marks the event as part of an initial replay.
    pub fn initial(mut self) -> Self {
        self.initial = true;
        self
    }

    /// Marks a deletion as inferred from a relist.
    pub fn final_state_unknown(mut self) -> Self {
        self.final_state_unknown = true;
        self
    }

    /// The event, or why the object cannot make one.
    pub fn try_build(self) -> Result<Event, HarnessError> {
        let object = self.object.map_err(HarnessError::Object)?;
        let (resource, _) = cache::identity(&object).map_err(HarnessError::Object)?;
        // Both versions are of one kind: the old one need not repeat apiVersion and kind.
        let given = |o: &Value| Object::given(head_of(o, &resource), o.to_string());
        Ok(Event {
            event_type: self.event_type,
            object: given(&object),
            old_object: self
                .old_object
                .transpose()
                .map_err(HarnessError::Object)?
                .as_ref()
                .map(given),
            initial: self.initial,
            final_state_unknown: self.final_state_unknown,
        })
    }

    /// The event; panics on an object that cannot make one.
    pub fn build(self) -> Event {
        match self.try_build() {
            Ok(e) => e,
            Err(e) => panic!("EventBuilder: {e}"),
        }
    }
}

/// The kind and metadata the host would parse from `object`.
fn head_of(object: &Value, resource: &Resource) -> Head {
    Head::decode(header_of(object, resource))
}

/// The header the host would write for `object`, of kind `resource`.
pub(crate) fn header_of(object: &Value, resource: &Resource) -> Vec<u8> {
    let text = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let labels: BTreeMap<String, String> = cache::labels_of(object);
    Head::encode_bytes(
        resource,
        cache::namespace_of(object),
        [
            text("/metadata/name"),
            text("/metadata/uid"),
            text("/metadata/resourceVersion"),
        ],
        labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
}

/// Panics on an object that cannot make an event (see [`EventBuilder`]).
impl From<EventBuilder> for Event {
    fn from(b: EventBuilder) -> Event {
        b.build()
    }
}

#[cfg(test)]
mod tests;
