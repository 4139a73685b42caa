//! Change filters on the host: a `[[watch]]`'s `jq-filter` and `ignore` decide which updates
//! wake its plugin, before they reach the plugin.
//!
//! An update passes when the object's projection — the object without the `ignore`d fields,
//! then through the jq program, if any — differs between the old and the new version.
//! Adds, deletes, replays and resyncs always pass (resync exists to re-deliver what did not
//! change). Projections are compared by sha256 and cached per object version, shared by every
//! plugin whose watch has the same filter: 50 plugins with one filter cost one evaluation per
//! object version, not 50.
//!
//! A projection that fails — a runtime error (`.spec.x | tonumber` on an object where it is not
//! a number), an output over the bounds of [`informant_manifest::jq`], or an evaluation over its
//! budget (steps or wall time, same module) — lets the update through: it is counted, logged
//! once per filter (an evaluation over budget once more, on its own line, since it says the
//! filter costs too much rather than that an object did not fit it), and remembered for that
//! object version, so a filter that always exceeds its budget pays it once per version, not on
//! every update and every watch. A filter that hides events by failing would be worse than one
//! that shows too many.
//!
//! Filters run where the informer hands an update to a watching plugin's own task (see
//! [`crate::informer::ChangeFilter`]), never while it distributes: a slow filter delays only
//! the watches using it. On a multi-threaded runtime an evaluation that misses the cache runs
//! in [`tokio::task::block_in_place`], so even one long step the budget cannot cut holds its
//! own thread, not a worker other plugins' tasks are queued on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::apimachinery::FieldPath;
use crate::informer::{CachedObject, ChangeFilter, Event};
use crate::manifest::Watch;
use crate::manifest::jq::{JqError, JqFilter, OVER_BUDGET};

/// Cached projections per filter before the cache is emptied (recomputing costs only time):
/// bounds what objects deleted since, which the filter never hears of, can hold.
const MAX_CACHED: usize = 1 << 17;

/// Errors kept and quoted in the log are cut here: they may quote a part of the object.
const MAX_LOGGED_ERROR: usize = 200;

/// The change filters in use, one per distinct (`jq-filter`, `ignore`), shared by every watch
/// that names it and dropped with the last.
#[derive(Default)]
pub(crate) struct ChangeFilters {
    live: Mutex<HashMap<Spec, Weak<Projection>>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Spec {
    jq: Option<String>,
    ignore: Vec<Vec<String>>,
}

impl ChangeFilters {
    /// The change filter of `watch`, if it names one; `Err` if its program does not compile
    /// (the manifest parser has already refused those).
    pub(crate) fn for_watch(&self, watch: &Watch) -> Result<Option<ChangeFilter>, String> {
        if !watch.filters_changes() {
            return Ok(None);
        }
        let spec = Spec {
            jq: watch.jq_filter.as_ref().map(|f| f.0.clone()),
            ignore: watch
                .ignore
                .iter()
                .map(|p| p.0.segments().to_vec())
                .collect(),
        };
        let mut live = self.live.lock();
        live.retain(|_, p| p.strong_count() > 0);
        let projection = match live.get(&spec).and_then(Weak::upgrade) {
            Some(p) => p,
            None => {
                let p = Arc::new(Projection {
                    jq: spec
                        .jq
                        .as_deref()
                        .map(JqFilter::compile)
                        .transpose()
                        .map_err(|e| e.to_string())?,
                    ignore: watch.ignore.iter().map(|p| p.0.clone()).collect(),
                    describe: describe(&spec),
                    seen: Mutex::new(HashMap::new()),
                    evaluations: AtomicU64::new(0),
                    errors: AtomicU64::new(0),
                    warned: AtomicBool::new(false),
                    warned_budget: AtomicBool::new(false),
                });
                live.insert(spec, Arc::downgrade(&p));
                p
            }
        };
        Ok(Some(ChangeFilter::new(move |e| projection.changed(e))))
    }

    /// (evaluations, runtime errors) of every live filter, by its description.
    pub(crate) fn stats(&self) -> Vec<(String, u64, u64)> {
        self.live
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .map(|p| {
                (
                    p.describe.clone(),
                    p.evaluations.load(Ordering::Relaxed),
                    p.errors.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}

fn describe(spec: &Spec) -> String {
    // Also a metric label: no quotes to escape.
    let ignore: Vec<String> = spec.ignore.iter().map(|p| p.join(".")).collect();
    let ignore = ignore.join(", ");
    match (&spec.jq, ignore.is_empty()) {
        (Some(jq), true) => format!("jq-filter `{jq}`"),
        (Some(jq), false) => format!("jq-filter `{jq}`, ignore {ignore}"),
        (None, _) => format!("ignore {ignore}"),
    }
}

/// An object version (resourceVersion) and the sha256 of its projection, or why there is none.
type Version = (String, Result<[u8; 32], Arc<str>>);

/// One distinct filter and its cache of projections per object version.
struct Projection {
    jq: Option<JqFilter>,
    ignore: Vec<FieldPath>,
    describe: String,
    /// uid -> the last two (resourceVersion, digest of the projection): an update's old and
    /// new version, whichever watch asks first.
    seen: Mutex<HashMap<String, [Version; 2]>>,
    evaluations: AtomicU64,
    errors: AtomicU64,
    warned: AtomicBool,
    warned_budget: AtomicBool,
}

impl Projection {
    fn changed(&self, e: &Event) -> bool {
        let Some(old) = &e.old_object else {
            return true;
        };
        match (self.digest(old), self.digest(&e.object)) {
            (Ok(a), Ok(b)) => a != b,
            (Err(why), _) | (_, Err(why)) => {
                let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
                let (filter, object) = (&self.describe, e.key().as_str());
                if !why.contains(OVER_BUDGET) {
                    if !self.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(%filter, %object, error = %why, errors = n, "change filter failed; passing the update (logged once per filter)");
                    }
                } else if !self.warned_budget.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%filter, %object, error = %why, errors = n, "change filter over its budget; passing the update (logged once per filter)");
                }
                true
            }
        }
    }

    /// The projection's digest for this object version, computed once (a failure too).
    fn digest(&self, o: &CachedObject) -> Result<[u8; 32], Arc<str>> {
        let rv = o.resource_version();
        if let Some(recent) = self.seen.lock().get(o.uid())
            && let Some((_, d)) = recent.iter().find(|(v, _)| v == rv)
        {
            return d.clone();
        }
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        let digest = self
            .project(o)
            .map(|p| Sha256::digest(p).into())
            // Cut before it is kept: a jq error may quote the whole object.
            .map_err(|e| {
                let why = e.to_string();
                Arc::from(&why[..why.floor_char_boundary(MAX_LOGGED_ERROR)])
            });
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_CACHED {
            seen.clear();
        }
        let entry = (rv.to_string(), digest.clone());
        match seen.get_mut(o.uid()) {
            Some(recent) => {
                recent[1] = std::mem::replace(&mut recent[0], entry);
            }
            None => {
                seen.insert(o.uid().to_string(), [entry.clone(), entry]);
            }
        }
        digest
    }

    fn project(&self, o: &CachedObject) -> Result<String, JqError> {
        let json = if self.ignore.is_empty() {
            std::borrow::Cow::Borrowed(o.json())
        } else {
            let mut v = o.to_value();
            for path in &self.ignore {
                remove(&mut v, path.segments());
            }
            std::borrow::Cow::Owned(v.to_string())
        };
        match &self.jq {
            Some(f) => off_the_worker(|| f.eval(&json)),
            None => Ok(json.into_owned()),
        }
    }
}

/// Runs `eval` so that, however long it takes, it holds no runtime worker other tasks wait on
/// (on a current-thread runtime there is no other thread to hand them to: it runs inline).
fn off_the_worker<T>(eval: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(eval)
        }
        _ => eval(),
    }
}

/// Removes the field at `path` (object keys only), if it is there.
fn remove(v: &mut serde_json::Value, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            if let Some(map) = v.as_object_mut() {
                map.remove(last);
            }
        }
        [first, rest @ ..] => {
            if let Some(inner) = v.get_mut(first.as_str()) {
                remove(inner, rest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::manifest::Manifest;

    fn watch(extra: &str) -> Watch {
        let m = Manifest::parse(
            &format!("[[watch]]\napi-version = \"v1\"\nkind = \"ConfigMap\"\n{extra}\n"),
            Path::new("p.toml"),
        )
        .unwrap();
        m.watch[0].clone()
    }

    fn object(rv: u64, labels: &str, data: &str) -> Arc<CachedObject> {
        let json = format!(
            r#"{{"metadata":{{"name":"c","namespace":"ns","uid":"u1","resourceVersion":"{rv}","labels":{{"l":"{labels}"}}}},"data":{{"d":"{data}"}},"status":{{"s":"{rv}"}}}}"#
        );
        let ar = kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "",
            "v1",
            "ConfigMap",
        ));
        Arc::new(CachedObject::from_json(&json, &ar, true).unwrap())
    }

    #[test]
    fn updates_pass_only_when_the_projection_changes_and_each_version_is_evaluated_once() {
        let filters = ChangeFilters::default();
        let w = watch("jq-filter = \".data\"");
        let shared: Vec<ChangeFilter> = (0..50)
            .map(|_| filters.for_watch(&w).unwrap().unwrap())
            .collect();
        let (v1, v2, v3) = (
            object(1, "a", "x"),
            object(2, "b", "x"),
            object(3, "b", "y"),
        );
        for f in &shared {
            assert!(
                !f.passes(&Event::updated(v1.clone(), v2.clone())),
                "label-only"
            );
        }
        for f in &shared {
            assert!(
                f.passes(&Event::updated(v2.clone(), v3.clone())),
                "data changed"
            );
        }
        let stats = filters.stats();
        assert_eq!(stats.len(), 1, "one filter for fifty watches");
        assert_eq!(stats[0].1, 3, "three versions, three evaluations");

        let ignore = filters
            .for_watch(&watch(
                "ignore = [\"status\", \"metadata.resourceVersion\", \"metadata.labels\"]",
            ))
            .unwrap()
            .unwrap();
        assert!(!ignore.passes(&Event::updated(v1.clone(), v2.clone())));
        assert!(ignore.passes(&Event::updated(v2.clone(), v3.clone())));
        assert_eq!(filters.stats().len(), 2);
    }

    /// A filter that passes every load-time check but explodes: each update passes, and each
    /// object version costs one evaluation over budget, however many updates and watches ask.
    #[test]
    fn a_filter_over_its_budget_passes_the_update_and_pays_once_per_version() {
        let filters = ChangeFilters::default();
        let program = vec!["(.,.,.,.)"; 24].join(" | ");
        let w = watch(&format!("jq-filter = \"[{program}] | length\""));
        let (a, b) = (
            filters.for_watch(&w).unwrap().unwrap(),
            filters.for_watch(&w).unwrap().unwrap(),
        );
        let (v1, v2) = (object(1, "a", "x"), object(2, "a", "x"));
        let started = std::time::Instant::now();
        for f in [&a, &b, &a] {
            assert!(f.passes(&Event::updated(v1.clone(), v2.clone())));
        }
        let took = started.elapsed();
        let (_, evaluations, errors) = filters.stats()[0].clone();
        assert_eq!(evaluations, 2, "one evaluation per version");
        assert_eq!(errors, 3, "every update passed over budget is counted");
        assert!(
            took < crate::manifest::jq::MAX_EVAL_TIME * 2 * 20,
            "two evaluations over budget took {took:?}"
        );
    }

    #[test]
    fn a_failing_filter_passes_the_update_and_counts_it() {
        let filters = ChangeFilters::default();
        let f = filters
            .for_watch(&watch("jq-filter = \".data.d | tonumber\""))
            .unwrap()
            .unwrap();
        assert!(f.passes(&Event::updated(object(1, "a", "x"), object(2, "b", "x"))));
        assert!(f.passes(&Event::updated(object(2, "a", "x"), object(3, "a", "x"))));
        assert_eq!(filters.stats()[0].2, 2);
        assert!(filters.for_watch(&watch("")).unwrap().is_none());
        drop(f);
        assert!(filters.stats().is_empty(), "dropped with its last watch");
    }
}
