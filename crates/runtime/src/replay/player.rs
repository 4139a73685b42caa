//! Offline replay: one plugin, its own never-started informers, and a recording applied to them
//! through [`SharedInformer::apply`] — the entry point the reflector uses — so events reach the
//! plugin through the same store, processor, listener, [`PluginHandler`] and [`Supervisor`] as
//! live dispatch.
//!
//! Order of play:
//! 1. The cache's starting content (the `--objects` file plus the recording's first-list lines)
//!    is applied as each informer's first list; the plugin is then registered and gets it as its
//!    initial replay, as a plugin loaded into a running host does (in cache order).
//! 2. Every later line is applied in file order, in lock step: the next line waits until the
//!    plugin has handled every event the previous one caused, so nothing coalesces and a run is
//!    deterministic. Lines of resources the plugin does not watch, or outside its watch's
//!    namespace or label selector, are skipped (an object leaving a selector is a delete, as the
//!    API server reports it). A `finalStateUnknown` delete is replayed as a relist without the
//!    object, the way it arose.
//!
//! A wildcard watch (`kind = "*"`) covers the recorded kinds it matches.
//!
//! Resync events are timer-driven and not replayed.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::core::{ApiResource, GroupVersionKind};
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use super::ReplayError;
use super::format::{Record, RecordType};
use super::objects::YamlObject;
use crate::informer::{
    Delta, Event, Handler, HandlerOptions, LabelSelector, ListenerHandle, RawObject,
    ReflectorConfig, SharedInformer, StoreOptions,
};
use crate::manifest::Manifest;
use crate::plugin::PluginError;
use crate::plugin::bindings::WitResource;
use crate::plugin::exec::admit::Admitter;
use crate::plugin::exec::engine::PluginEngine;
use crate::plugin::exec::instance::{InstanceSpec, RetryPolicy};
use crate::plugin::exec::supervisor::{PluginHandler, Supervisor};
use crate::plugin::imports::cache::CacheView;
use crate::plugin::imports::log::{LogRate, PluginLog};
use crate::plugin::load::acceptance::{Accepted, Facts, WatchFacts, accept, describe};
use crate::plugin::load::check::manifest_beside;
use crate::plugin::load::host_config::HostConfig;
use crate::tenancy::{Grant, TenantPolicy};

/// What to replay.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The plugin component.
    pub wasm: PathBuf,
    /// Its manifest (default: the `.toml` beside the `.wasm`).
    pub manifest: Option<PathBuf>,
    /// Limits and restart policy, as the host applies them.
    pub host: HostConfig,
    /// AdmissionReview requests (as the API server sends them) the plugin's `[[admit]]` hooks
    /// answer once the events are played, each through the first table that takes it.
    pub reviews: Vec<serde_json::Value>,
}

/// What a replay did.
#[derive(Debug, Default)]
pub struct ReplayOutcome {
    /// Every line the plugin logged, in order.
    pub logs: Vec<PluginLog>,
    /// Events delivered to the plugin.
    pub delivered: u64,
    /// Events the plugin handled successfully.
    pub handled: u64,
    /// Events that failed (trap, deadline or returned error).
    pub failed: u64,
    /// Recording lines and objects skipped: not watched by the plugin.
    pub skipped: usize,
    /// Per review, in order: `{uid, hook, decision, response}` (`hook` null and `decision`
    /// `skip` when no `[[admit]]` table takes it).
    pub admissions: Vec<serde_json::Value>,
}

/// One `[[watch]]` of the manifest: its informer and the scope it filters by.
struct Scoped {
    informer: Arc<SharedInformer>,
    api_version: String,
    kind: String,
    namespace: Option<String>,
    selector: LabelSelector,
    resource: WitResource,
}

impl Scoped {
    fn watches(&self, api_version: &str, kind: &str) -> bool {
        self.api_version == api_version && self.kind == kind
    }

    fn contains(&self, o: &RawObject) -> bool {
        let labels = o.metadata.labels.as_ref();
        self.namespace
            .as_deref()
            .is_none_or(|ns| o.metadata.namespace.as_deref() == Some(ns))
            && self
                .selector
                .matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
    }
}

/// Counts handled events so the player can wait for each step to finish.
struct Counted {
    inner: PluginHandler,
    handled: Arc<watch::Sender<u64>>,
}

impl Handler for Counted {
    async fn handle(&mut self, event: Event) {
        self.handle_batch(vec![event]).await;
    }

    async fn handle_batch(&mut self, events: Vec<Event>) {
        let n = events.len() as u64;
        self.inner.handle_batch(events).await;
        self.handled.send_modify(|handled| *handled += n);
    }
}

/// Runs the plugin against `objects` then `records`; `on_log` sees each plugin log line as it is
/// logged (the outcome has them all too).
pub async fn replay(
    engine: Arc<PluginEngine>,
    config: &ReplayConfig,
    objects: Vec<YamlObject>,
    records: Vec<Record>,
    mut on_log: impl FnMut(&PluginLog) + Send + 'static,
) -> Result<ReplayOutcome, ReplayError> {
    let name = config
        .wasm
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plugin".into());
    let manifest_path = config
        .manifest
        .clone()
        .unwrap_or_else(|| manifest_beside(&config.wasm));
    let manifest = Manifest::load(&manifest_path).map_err(|source| PluginError::Manifest {
        plugin: name.clone(),
        source,
    })?;
    let (eng, n, wasm) = (engine.clone(), name.clone(), config.wasm.clone());
    let component = tokio::task::spawn_blocking(move || eng.load(&n, &wasm))
        .await
        .map_err(|e| PluginError::Engine {
            what: "compiling the component",
            source: e.into(),
        })??;

    let recorded: BTreeSet<(String, String)> = objects
        .iter()
        .filter_map(|o| {
            let text = |f: &str| o.object[f].as_str().map(String::from);
            Some((text("apiVersion")?, text("kind")?))
        })
        .chain(
            records
                .iter()
                .map(|r| (r.api_version.clone(), r.kind.clone())),
        )
        .collect();
    let (scopes, cache) = scopes(&name, &manifest, &recorded)?;

    // Log lines, in order; a marker line from us ends the collection after the last event.
    let (logs_tx, mut logs_rx) = broadcast::channel::<PluginLog>(config.host.log_buffer.max(1024));
    let collected = Arc::new(Mutex::new(Vec::new()));
    let end: Arc<str> = Arc::from("\0end-of-replay");
    let collector = {
        let (collected, end) = (collected.clone(), end.clone());
        tokio::spawn(async move {
            loop {
                match logs_rx.recv().await {
                    Ok(line) if line.plugin == end => break Ok(()),
                    Ok(line) => {
                        on_log(&line);
                        collected.lock().push(line);
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => break Err(n),
                    Err(broadcast::error::RecvError::Closed) => break Ok(()),
                }
            }
        })
    };

    let host = &config.host;
    // The limits the loader would give it (refused above the ceilings, as live).
    let facts = Facts {
        watch: (manifest.watch.iter())
            .map(|w| WatchFacts::as_written(&w.api_version, &w.kind, None))
            .collect(),
        write: (manifest.write.iter())
            .map(|w| WatchFacts::as_written(&w.api_version, &w.kind, None))
            .collect(),
        admit: (manifest.admit.iter())
            .map(|a| WatchFacts::as_written(&a.api_version, &a.kind, None))
            .collect(),
    };
    let Accepted {
        memory_mib,
        deadline_ms,
    } = accept(&manifest, "", &TenantPolicy::operator(), host, &facts).map_err(|refusals| {
        PluginError::Refused {
            plugin: name.clone(),
            path: manifest_path.clone(),
            reason: describe(&refusals),
        }
    })?;
    // Replay runs as the operator, so its config references resolve as an operator plugin's.
    let config_json =
        crate::plugin::load::secrets::resolve_config(&manifest, "").map_err(|unresolved| {
            PluginError::Refused {
                plugin: name.clone(),
                path: manifest_path.clone(),
                reason: unresolved.to_string(),
            }
        })?;
    let spec = InstanceSpec {
        name: name.as_str().into(),
        tenant: "".into(),
        component,
        config_json,
        memory_bytes: (memory_mib as usize) << 20,
        deadline: Duration::from_millis(deadline_ms as u64),
        cache: Arc::new(cache),
        logs: logs_tx.clone(),
        text: host.text,
        log_rate: LogRate::new(host.text.log_lines_per_second),
        log_ring: None,
        retry: RetryPolicy::from_manifest(&manifest.retry),
        // A replay re-runs recorded events: it sends no HTTP (requests fail as denied).
        outbound: Default::default(),
        // Nor writes: there is no cluster (writes fail as denied, saying so).
        writer: Default::default(),
        // Metrics are kept, for nobody: a replay has no `/metrics`.
        metrics: Default::default(),
    };
    let policy = host.restart.clone();
    let plugin = name.clone();
    let supervisor = Supervisor::start(spec, policy)
        .await
        .map_err(|source| PluginError::Init { plugin, source })?;
    // A step waits for at most one backoff plus one deadline per event it caused, and slack.
    let step_guard = host.restart.max_backoff
        + Duration::from_millis(deadline_ms as u64) * 4
        + Duration::from_secs(30);

    let mut player = Player {
        scopes,
        handled: Arc::new(watch::channel(0).0),
        expected: 0,
        skipped: 0,
        step_guard,
    };

    // 1. The starting content as each informer's first list, then the plugin's initial replay.
    let (first, rest) = split_initial(records);
    player.initial(objects, &first)?;
    let handles: Vec<ListenerHandle> = player
        .scopes
        .iter()
        .map(|s| {
            player.expected += s.informer.store().len() as u64;
            s.informer.add_handler(
                &name,
                Counted {
                    inner: supervisor.handler(
                        s.resource.clone(),
                        s.informer.store().clone(),
                        None,
                        Default::default(),
                    ),
                    handled: player.handled.clone(),
                },
                HandlerOptions::default(),
            )
        })
        .collect();
    player.settle().await?;

    // 2. Everything else, one line at a time.
    for r in &rest {
        player.play(r)?;
        player.settle().await?;
    }

    let admissions = admit_reviews(&supervisor, &manifest, &config.reviews).await?;

    for h in handles {
        h.shutdown().await;
    }
    let _ = logs_tx.send(PluginLog {
        plugin: end,
        tenant: "".into(),
        level: crate::plugin::bindings::Level::Info,
        message: String::new(),
    });
    match collector.await {
        Ok(Ok(())) => {}
        Ok(Err(n)) => {
            return Err(ReplayError::Run(format!(
                "the log collector fell behind and lost {n} plugin log lines"
            )));
        }
        Err(e) => return Err(ReplayError::Run(e.to_string())),
    }
    let logs = std::mem::take(&mut *collected.lock());
    Ok(ReplayOutcome {
        logs,
        delivered: player.expected,
        handled: supervisor.handled(),
        failed: supervisor.failed(),
        skipped: player.skipped,
        admissions,
    })
}

/// `reviews` answered by the plugin's hooks, with the cache as the events left it.
async fn admit_reviews(
    supervisor: &Arc<Supervisor>,
    manifest: &Manifest,
    reviews: &[serde_json::Value],
) -> Result<Vec<serde_json::Value>, ReplayError> {
    use crate::admission::{answer, review};
    if reviews.is_empty() {
        return Ok(Vec::new());
    }
    // Offline there is no discovery: the kind's plural as Kubernetes usually makes it.
    let hooks = manifest
        .admit
        .iter()
        .map(|a| {
            let (group, version) = a.api_version.split();
            let gvk = kube::core::GroupVersionKind::gvk(group, version, &a.kind);
            let resolved = crate::informer::ResolvedResource {
                api_resource: kube::core::ApiResource::from_gvk(&gvk),
                namespaced: true,
            };
            (a.clone(), resolved)
        })
        .collect();
    let admitter =
        Admitter::new(supervisor, hooks, Arc::new(Grant::full()), 1).ok_or_else(|| {
            ReplayError::Run(
                "the component has no admission-hook export to answer the reviews with".into(),
            )
        })?;
    let mut answers = Vec::with_capacity(reviews.len());
    for (i, r) in reviews.iter().enumerate() {
        let bytes = serde_json::to_vec(r).unwrap_or_default();
        let req = review::decode(&bytes)
            .map_err(|e| ReplayError::Run(format!("review {}: {e}", i + 1)))?;
        let Some(hook) = admitter.hooks().iter().find(|h| answer::is_for(h, &req)) else {
            answers.push(serde_json::json!({
                "uid": req.uid, "hook": null, "decision": "skip",
                "response": kube::core::admission::AdmissionResponse::from(&req),
            }));
            continue;
        };
        let answered = answer::answer(&admitter, hook, &req).await;
        answers.push(serde_json::json!({
            "uid": req.uid,
            "hook": hook.table.name.as_str(),
            "decision": answered.decision.as_str(),
            "response": answered.response,
        }));
    }
    Ok(answers)
}

/// Splits off each resource's first-list lines: `initial` adds before any other line of it.
fn split_initial(records: Vec<Record>) -> (Vec<Record>, Vec<Record>) {
    let mut live_seen: Vec<(String, String)> = Vec::new();
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for r in records {
        let res = (r.api_version.clone(), r.kind.clone());
        if r.initial && r.event_type == RecordType::Added && !live_seen.contains(&res) {
            first.push(r);
        } else {
            if !live_seen.contains(&res) {
                live_seen.push(res);
            }
            rest.push(r);
        }
    }
    (first, rest)
}

/// One informer per distinct `[[watch]]` (resource, namespace, selector), never started: no
/// request is ever made through its client; and the plugin's view of their stores. A wildcard
/// watch stands for the kinds of `recorded` it covers: a recording holds the kinds it was made
/// of, and each counts as its group's preferred version.
fn scopes(
    plugin: &str,
    manifest: &Manifest,
    recorded: &BTreeSet<(String, String)>,
) -> Result<(Vec<Scoped>, CacheView), ReplayError> {
    let config = kube::Config::new(http::Uri::from_static("http://127.0.0.1:9"));
    let client = kube::Client::try_from(config).map_err(|e| ReplayError::Run(e.to_string()))?;
    let mut scopes: Vec<Scoped> = Vec::new();
    let cache = CacheView::default();
    for (index, w) in manifest.watch.iter().enumerate() {
        let watch_err = |source| PluginError::Watch {
            plugin: plugin.to_string(),
            index,
            source,
        };
        let kinds: Vec<(String, String)> = if w.is_wildcard() {
            recorded
                .iter()
                .filter(|(api_version, kind)| {
                    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
                    w.covers(group, version, kind, true)
                })
                .cloned()
                .collect()
        } else {
            vec![(w.api_version.as_str().to_string(), w.kind.clone())]
        };
        let selector_text = w.label_selector.as_ref().map(|s| s.0.clone());
        let selector = match &selector_text {
            Some(s) => LabelSelector::parse(s).map_err(|e| watch_err(e.into()))?,
            None => LabelSelector::default(),
        };
        for (api_version, kind) in &kinds {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
            for namespace in w.scopes() {
                let existing = scopes.iter().position(|s| {
                    s.watches(api_version, kind)
                        && s.namespace.as_deref() == namespace
                        && s.selector.to_string() == selector.to_string()
                });
                let informer = match existing {
                    Some(i) => scopes[i].informer.clone(),
                    None => {
                        let informer = SharedInformer::new(
                            Api::all_with(client.clone(), &ar),
                            ar.clone(),
                            format!("{} {} (replay)", ar.api_version, ar.plural),
                            ReflectorConfig::default(),
                            StoreOptions::default(),
                        );
                        scopes.push(Scoped {
                            informer: informer.clone(),
                            api_version: api_version.clone(),
                            kind: kind.clone(),
                            namespace: namespace.map(str::to_string),
                            selector: selector.clone(),
                            resource: WitResource::from(&ar),
                        });
                        informer
                    }
                };
                cache.add_with_indexes(informer.store().clone(), w.field_indexes());
            }
        }
    }
    Ok((scopes, cache))
}

struct Player {
    scopes: Vec<Scoped>,
    handled: Arc<watch::Sender<u64>>,
    expected: u64,
    skipped: usize,
    step_guard: Duration,
}

impl Player {
    fn initial(&mut self, objects: Vec<YamlObject>, first: &[Record]) -> Result<(), ReplayError> {
        let mut lists: Vec<Vec<RawObject>> = vec![Vec::new(); self.scopes.len()];
        let mut place = |api_version: &str, kind: &str, raw: RawObject| {
            let mut placed = false;
            for (i, s) in self.scopes.iter().enumerate() {
                if s.watches(api_version, kind) && s.contains(&raw) {
                    lists[i].push(raw.clone());
                    placed = true;
                }
            }
            placed
        };
        let mut skipped = 0;
        for o in objects {
            let raw: RawObject = serde_json::from_str(&o.object.to_string())
                .map_err(|e| ReplayError::Run(format!("objects document {}: {e}", o.document)))?;
            let (api_version, kind) = (raw.api_version.clone(), raw.kind.clone());
            if !place(
                api_version.as_deref().unwrap_or_default(),
                kind.as_deref().unwrap_or_default(),
                raw,
            ) {
                skipped += 1;
            }
        }
        for r in first {
            if !place(&r.api_version, &r.kind, parse(r)?) {
                skipped += 1;
            }
        }
        self.skipped += skipped;
        for (s, list) in self.scopes.iter().zip(lists) {
            if !s.informer.store().has_synced() {
                s.informer.apply(Delta::Replace(list));
            }
        }
        Ok(())
    }

    /// Applies one line to every informer it concerns, counting the events that will cause.
    fn play(&mut self, r: &Record) -> Result<(), ReplayError> {
        let raw = parse(r)?;
        let key = raw.key();
        let mut concerned = false;
        for s in &self.scopes {
            if !s.watches(&r.api_version, &r.kind) {
                continue;
            }
            concerned = true;
            let store = s.informer.store();
            let current = store.get_key(&key);
            match r.event_type {
                RecordType::Added | RecordType::Updated if s.contains(&raw) => {
                    let rv = raw.metadata.resource_version.as_deref().unwrap_or_default();
                    if current.is_none_or(|c| c.resource_version() != rv) {
                        self.expected += 1;
                    }
                    s.informer.apply(Delta::Apply(raw.clone()));
                }
                // Left the watch's selector: the API server reports that as a delete.
                RecordType::Added | RecordType::Updated => {
                    if current.is_some() {
                        self.expected += 1;
                        s.informer.apply(Delta::Delete(raw.clone()));
                    }
                }
                RecordType::Deleted if current.is_none() => {}
                RecordType::Deleted if r.final_state_unknown => {
                    // A relist without the object, as the live informer saw it.
                    let all = store.list(None, &LabelSelector::default());
                    let mut keep = Vec::with_capacity(all.len());
                    for o in all.iter().filter(|o| o.key() != &key) {
                        keep.push(serde_json::from_str::<RawObject>(o.json()).map_err(|e| {
                            ReplayError::Run(format!("re-reading {}: {e}", o.key()))
                        })?);
                    }
                    self.expected += 1;
                    s.informer.apply(Delta::Replace(keep));
                }
                RecordType::Deleted => {
                    self.expected += 1;
                    s.informer.apply(Delta::Delete(raw.clone()));
                }
            }
        }
        if !concerned {
            self.skipped += 1;
        }
        Ok(())
    }

    /// Waits until the plugin has handled every event caused so far.
    async fn settle(&self) -> Result<(), ReplayError> {
        let expected = self.expected;
        let mut rx = self.handled.subscribe();
        tokio::time::timeout(self.step_guard, rx.wait_for(|n| *n >= expected))
            .await
            .map_err(|_| {
                ReplayError::Run(format!(
                    "the plugin handled {} of {expected} events within {:?}",
                    *self.handled.borrow(),
                    self.step_guard
                ))
            })?
            .map_err(|e| ReplayError::Run(e.to_string()))?;
        Ok(())
    }
}

fn parse(r: &Record) -> Result<RawObject, ReplayError> {
    serde_json::from_str(r.object.get()).map_err(|e| ReplayError::Record {
        line: r.line,
        reason: format!("field `object`: {e}"),
    })
}
