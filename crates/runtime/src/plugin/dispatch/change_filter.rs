//! Change filters on the host: a `[[watch]]`'s `jq-filter` and `ignore` decide which updates
//! wake its plugin, before they reach the plugin's queue.
//!
//! An update passes when the object's projection — the object without the `ignore`d fields,
//! then through the jq program, if any — differs between the old and the new version.
//! Adds, deletes, replays and resyncs always pass (resync exists to re-deliver what did not
//! change). Projections are compared by sha256 and cached per object version, shared by every
//! plugin whose watch has the same filter: 50 plugins with one filter cost one evaluation per
//! object version, not 50. A projection that fails at run time (`.spec.x | tonumber` on an
//! object where it is not a number, or an output over the bounds of
//! [`informant_selector::jq`]) lets the update through: it is counted and logged once per
//! filter, since a filter that hides events by failing would be worse than one that shows
//! too many.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::informer::{CachedObject, ChangeFilter, Event};
use crate::manifest::Watch;
use crate::selector::FieldPath;
use crate::selector::jq::JqFilter;

/// Cached projections per filter before the cache is emptied (recomputing costs only time):
/// bounds what objects deleted since, which the filter never hears of, can hold.
const MAX_CACHED: usize = 1 << 17;

/// Errors quoted in the log are cut here: they may quote a part of the object.
const MAX_LOGGED_ERROR: usize = 200;

/// The change filters in use, one per distinct (`jq-filter`, `ignore`), shared by every watch
/// that names it and dropped with the last.
#[derive(Default)]
pub struct ChangeFilters {
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
    pub fn for_watch(&self, watch: &Watch) -> Result<Option<ChangeFilter>, String> {
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
                    jq: spec.jq.as_deref().map(JqFilter::compile).transpose()?,
                    ignore: watch.ignore.iter().map(|p| p.0.clone()).collect(),
                    describe: describe(&spec),
                    seen: Mutex::new(HashMap::new()),
                    evaluations: AtomicU64::new(0),
                    errors: AtomicU64::new(0),
                    warned: AtomicBool::new(false),
                });
                live.insert(spec, Arc::downgrade(&p));
                p
            }
        };
        Ok(Some(ChangeFilter::new(move |e| projection.changed(e))))
    }

    /// (evaluations, runtime errors) of every live filter, by its description.
    pub fn stats(&self) -> Vec<(String, u64, u64)> {
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

/// An object version (resourceVersion) and the sha256 of its projection.
type Version = (String, [u8; 32]);

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
                if !self.warned.swap(true, Ordering::Relaxed) {
                    let cut = why.floor_char_boundary(MAX_LOGGED_ERROR);
                    tracing::warn!(filter = %self.describe, object = %e.key().as_str(), error = %&why[..cut], errors = n, "change filter failed; passing the update (logged once per filter)");
                }
                true
            }
        }
    }

    /// The projection's digest for this object version, computed once.
    fn digest(&self, o: &CachedObject) -> Result<[u8; 32], String> {
        let rv = o.resource_version();
        if let Some(recent) = self.seen.lock().get(o.uid())
            && let Some((_, d)) = recent.iter().find(|(v, _)| v == rv)
        {
            return Ok(*d);
        }
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        let digest: [u8; 32] = Sha256::digest(self.project(o)?).into();
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_CACHED {
            seen.clear();
        }
        let entry = (rv.to_string(), digest);
        match seen.get_mut(o.uid()) {
            Some(recent) => {
                recent[1] = std::mem::replace(&mut recent[0], entry);
            }
            None => {
                seen.insert(o.uid().to_string(), [entry.clone(), entry]);
            }
        }
        Ok(digest)
    }

    fn project(&self, o: &CachedObject) -> Result<String, String> {
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
            Some(f) => f.eval(&json),
            None => Ok(json.into_owned()),
        }
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
