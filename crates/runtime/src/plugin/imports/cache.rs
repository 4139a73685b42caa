//! The `cache` import: queries answered from the informer stores the plugin's manifest names,
//! through its tenant's grant, and nothing else.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use opentelemetry::KeyValue;
use wasmtime::component::{HasData, Linker};

use crate::apimachinery::{FieldPath, LabelSelector, names};
use crate::informer::{CachedObject, FieldIndex, IndexId, Store, Visibility};
use crate::manifest::BUILTIN_INDEXES;
use crate::telemetry::{EventSpan, SLOW_QUERY};
use crate::tenancy::Grant;

use crate::plugin::bindings::{Gvk, QueryError, WitResource, informant};

/// The informer stores one plugin may query, by resource, seen through its tenant's grant.
///
/// A query naming a namespace (or, with none, a cluster-scoped object) outside the grant is
/// `forbidden` whether or not anything is there; broad lists and index lookups return only
/// objects inside the grant and never touch the others, so nothing about the rest — not even
/// how many, not even through how long the answer takes — shows.
///
/// The field indexes a plugin's manifest declares are its own: their names mean something only
/// in this view (a plugin cannot see, squat or collide with another plugin's), while identical
/// paths share one index in the store behind the scenes.
///
/// Stores come and go while the plugin runs (a wildcard watch's kinds follow the cluster's
/// CRDs), so the map sits behind a lock held only to clone one kind's scope list out.
pub struct CacheView {
    stores: RwLock<HashMap<Gvk, Arc<Vec<Scope>>>>,
    grant: Arc<Grant>,
}

impl Clone for CacheView {
    fn clone(&self) -> Self {
        CacheView {
            stores: RwLock::new(self.stores.read().clone()),
            grant: self.grant.clone(),
        }
    }
}

/// One store of a view and the field indexes the plugin declared on it, by the plugin's names.
#[derive(Clone)]
struct Scope {
    store: Arc<Store>,
    indexes: BTreeMap<String, Arc<FieldIndex>>,
}

impl Default for CacheView {
    /// An empty view with the operator's (full) grant.
    fn default() -> Self {
        CacheView::new(Arc::new(Grant::full()))
    }
}

impl CacheView {
    /// An empty view limited to `grant`.
    pub fn new(grant: Arc<Grant>) -> Self {
        CacheView {
            stores: RwLock::new(HashMap::new()),
            grant,
        }
    }

    /// Adds a store (a plugin may watch one resource in several scopes).
    pub fn add(&self, store: Arc<Store>) {
        self.add_with_indexes(store, std::iter::empty());
    }

    /// Adds a store with the field indexes (name, path) the plugin declared on it.
    pub fn add_with_indexes<'a>(
        &self,
        store: Arc<Store>,
        indexes: impl IntoIterator<Item = (&'a str, &'a FieldPath)>,
    ) {
        let ar = store.api_resource();
        let gvk = (ar.group.clone(), ar.version.clone(), ar.kind.clone());
        let mut stores = self.stores.write();
        let scopes = Arc::make_mut(stores.entry(gvk).or_default());
        let at = match scopes.iter().position(|s| Arc::ptr_eq(&s.store, &store)) {
            Some(at) => at,
            None => {
                scopes.push(Scope {
                    store: store.clone(),
                    indexes: BTreeMap::new(),
                });
                scopes.len() - 1
            }
        };
        for (name, path) in indexes {
            scopes[at]
                .indexes
                .entry(name.to_string())
                .or_insert_with(|| Arc::new(store.add_field_index(path.clone())));
        }
    }

    /// Removes a store: its resource is no longer watched in that scope.
    pub fn remove(&self, store: &Arc<Store>) {
        let ar = store.api_resource();
        let gvk = (ar.group.clone(), ar.version.clone(), ar.kind.clone());
        let mut stores = self.stores.write();
        if let Some(scopes) = stores.get_mut(&gvk) {
            Arc::make_mut(scopes).retain(|s| !Arc::ptr_eq(&s.store, store));
            if scopes.is_empty() {
                stores.remove(&gvk);
            }
        }
    }

    /// How many distinct field indexes this view holds.
    pub fn field_indexes(&self) -> usize {
        self.stores
            .read()
            .values()
            .flat_map(|v| v.iter())
            .map(|s| s.indexes.len())
            .sum()
    }

    fn scopes(&self, r: &WitResource) -> Result<Arc<Vec<Scope>>, QueryError> {
        let gvk = (r.group.clone(), r.version.clone(), r.kind.clone());
        self.stores.read().get(&gvk).cloned().ok_or_else(|| {
            let api_version = if r.group.is_empty() {
                r.version.clone()
            } else {
                format!("{}/{}", r.group, r.version)
            };
            QueryError::NotWatched(format!(
                "`{api_version}` `{}` is not watched by this plugin: add it to the manifest's [[watch]]",
                r.kind
            ))
        })
    }

    /// Refuses a namespace that is not a namespace name or lies outside the grant.
    fn check_namespace(&self, namespace: Option<&str>) -> Result<(), QueryError> {
        if let Some(ns) = namespace {
            names::check_namespace(ns).map_err(|e| QueryError::Forbidden(e.to_string()))?;
        }
        self.grant
            .check_namespace(namespace)
            .map_err(|outside| QueryError::Forbidden(outside.to_string()))
    }

    /// What a broad query may touch: the grant's namespaces only.
    fn visibility<'g>(&self, allows: &'g (dyn Fn(Option<&str>) -> bool + 'g)) -> Visibility<'g> {
        if self.grant.is_full() {
            Visibility::All
        } else {
            Visibility::Only(allows)
        }
    }

    /// One object, from whichever scope holds it.
    pub fn get(
        &self,
        r: &WitResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<CachedObject>>, QueryError> {
        let scopes = self.scopes(r)?;
        self.check_namespace(namespace)?;
        names::check_name(name).map_err(|e| QueryError::Forbidden(e.to_string()))?;
        Ok(scopes.iter().find_map(|s| s.store.get(namespace, name)))
    }

    /// Objects matching namespace and selector, once each across scopes.
    pub fn list(
        &self,
        r: &WitResource,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<Arc<CachedObject>>, QueryError> {
        let scopes = self.scopes(r)?;
        if namespace.is_some() {
            self.check_namespace(namespace)?;
        }
        let selector = match selector {
            Some(s) => {
                LabelSelector::parse(s).map_err(|e| QueryError::BadSelector(e.to_string()))?
            }
            None => LabelSelector::default(),
        };
        if let (None, Some(namespaces)) = (namespace, self.grant.exact_namespaces()) {
            // Ask the namespace index for each granted namespace rather than filter them all.
            let selector = &selector;
            return Ok(self.visible(
                scopes.len(),
                namespaces.into_iter().flat_map(|ns| {
                    scopes
                        .iter()
                        .flat_map(move |s| s.store.list(Some(ns), selector))
                }),
            ));
        }
        let allows = |ns: Option<&str>| self.grant.allows_namespace(ns);
        let visibility = self.visibility(&allows);
        Ok(self.visible(
            scopes.len(),
            scopes
                .iter()
                .flat_map(|s| s.store.list_in(namespace, &selector, visibility)),
        ))
    }

    /// Objects under an index value, once each across scopes: a built-in index, or one this
    /// plugin declared.
    pub fn by_index(
        &self,
        r: &WitResource,
        index: &str,
        value: &str,
    ) -> Result<Vec<Arc<CachedObject>>, QueryError> {
        let scopes = self.scopes(r)?;
        // A declared index lives in the scopes whose [[watch]] declared it; built-ins in all.
        let ids: Vec<(&Scope, IndexId)> = scopes
            .iter()
            .filter_map(|s| {
                let id =
                    Store::builtin_index(index).or_else(|| s.indexes.get(index).map(|h| h.id()));
                id.map(|id| (s, id))
            })
            .collect();
        if ids.is_empty() {
            let mut declared: Vec<&str> = scopes
                .iter()
                .flat_map(|s| s.indexes.keys())
                .map(String::as_str)
                .collect();
            declared.sort_unstable();
            declared.dedup();
            let declared: Vec<&str> = BUILTIN_INDEXES.iter().copied().chain(declared).collect();
            return Err(QueryError::UnknownIndex(format!(
                "unknown index `{}` (this plugin's indexes on `{}`: {})",
                names::shown(index),
                names::shown(&r.kind),
                declared.join(", ")
            )));
        }
        let allows = |ns: Option<&str>| self.grant.allows_namespace(ns);
        let visibility = self.visibility(&allows);
        let mut all = Vec::new();
        for (s, id) in ids {
            all.extend(s.store.lookup(id, value, visibility));
        }
        Ok(self.visible(scopes.len(), all.into_iter()))
    }

    /// The objects inside the grant, once each (a plugin may watch a resource in two scopes).
    ///
    /// One scope holds each key once: only answers gathered from several (a resource watched
    /// by more than one `[[watch]]`) are deduplicated, by key, which costs a copy of each.
    fn visible(
        &self,
        scopes: usize,
        objs: impl Iterator<Item = Arc<CachedObject>>,
    ) -> Vec<Arc<CachedObject>> {
        let full = self.grant.is_full();
        let allowed = |o: &Arc<CachedObject>| full || self.grant.allows(o);
        if scopes <= 1 {
            return objs.filter(allowed).collect();
        }
        let mut seen = std::collections::HashSet::new();
        objs.filter(|o| allowed(o) && seen.insert(o.key().clone()))
            .collect()
    }
}

/// What the `cache` import of one instance holds.
pub(crate) struct CacheState {
    view: Arc<CacheView>,
}

impl CacheState {
    /// Queries go to `view`.
    pub(crate) fn new(view: Arc<CacheView>) -> Self {
        CacheState { view }
    }
}

/// The `cache` import's view of an instance's store.
pub(crate) struct CacheCtx<'a> {
    pub(super) state: &'a CacheState,
    /// The event in hand's span, which a slow query's span is a child of.
    pub(super) span: &'a EventSpan,
}

struct CacheData;

impl HasData for CacheData {
    type Data<'a> = CacheCtx<'a>;
}

/// Adds the `cache` import to `linker`, each store's view of it made by `view`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    view: fn(&mut T) -> CacheCtx<'_>,
) -> wasmtime::Result<()> {
    informant::plugin::cache::add_to_linker::<T, CacheData>(linker, view)
}

impl informant::plugin::cache::Host for CacheCtx<'_> {
    async fn get(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, QueryError> {
        let started = self.span.is_on().then(Instant::now);
        let answer = self
            .state
            .view
            .get(&r, namespace.as_deref(), &name)?
            .map(|o| o.json().to_string());
        self.slow_query(started, "cache.get", &r, || {
            vec![KeyValue::new("found", answer.is_some())]
        });
        Ok(answer)
    }

    async fn list(
        &mut self,
        r: WitResource,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, QueryError> {
        let started = self.span.is_on().then(Instant::now);
        let objs = self
            .state
            .view
            .list(&r, namespace.as_deref(), label_selector.as_deref())?;
        let answer: Vec<String> = objs.iter().map(|o| o.json().to_string()).collect();
        self.slow_query(started, "cache.list", &r, || {
            vec![KeyValue::new("results", answer.len() as i64)]
        });
        Ok(answer)
    }

    async fn by_index(
        &mut self,
        r: WitResource,
        index: String,
        value: String,
    ) -> Result<Vec<String>, QueryError> {
        let started = self.span.is_on().then(Instant::now);
        let objs = self.state.view.by_index(&r, &index, &value)?;
        let answer: Vec<String> = objs.iter().map(|o| o.json().to_string()).collect();
        self.slow_query(started, "cache.by-index", &r, || {
            vec![
                KeyValue::new("index", index.clone()),
                KeyValue::new("results", answer.len() as i64),
            ]
        });
        Ok(answer)
    }

    async fn count_by_index(
        &mut self,
        r: WitResource,
        index: String,
        value: String,
        label_selector: Option<String>,
    ) -> Result<u32, QueryError> {
        let started = self.span.is_on().then(Instant::now);
        let selector = match &label_selector {
            Some(s) => {
                LabelSelector::parse(s).map_err(|e| QueryError::BadSelector(e.to_string()))?
            }
            None => LabelSelector::default(),
        };
        let objs = self.state.view.by_index(&r, &index, &value)?;
        let n = objs
            .iter()
            .filter(|o| selector.matches(|k| o.label(k)))
            .count();
        self.slow_query(started, "cache.count-by-index", &r, || {
            vec![
                KeyValue::new("index", index.clone()),
                KeyValue::new("results", n as i64),
            ]
        });
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    async fn by_index_headers(
        &mut self,
        r: WitResource,
        index: String,
        value: String,
    ) -> Result<Vec<u8>, QueryError> {
        let started = self.span.is_on().then(Instant::now);
        let objs = self.state.view.by_index(&r, &index, &value)?;
        let answer = concatenated_headers(&r, &objs);
        self.slow_query(started, "cache.by-index-headers", &r, || {
            vec![
                KeyValue::new("index", index.clone()),
                KeyValue::new("results", objs.len() as i64),
            ]
        });
        Ok(answer)
    }
}

/// Each object's header (`r`'s kind, then its metadata as it is kept) after its length as a
/// little-endian u32, in one buffer.
fn concatenated_headers(r: &WitResource, objs: &[Arc<CachedObject>]) -> Vec<u8> {
    let kind = [r.group.as_str(), r.version.as_str(), r.kind.as_str()];
    let kind_bytes: usize = kind.iter().map(|f| 4 + f.len()).sum();
    let total: usize = objs
        .iter()
        .map(|o| 4 + kind_bytes + o.metadata_fields().len())
        .sum();
    let mut out = Vec::with_capacity(total);
    for o in objs {
        // What `informant_header::encode` writes, straight into the one buffer.
        let fields = o.metadata_fields();
        out.extend_from_slice(&((kind_bytes + fields.len()) as u32).to_le_bytes());
        for f in kind {
            informant_header::put_field(&mut out, f);
        }
        out.extend_from_slice(fields);
    }
    out
}

impl CacheCtx<'_> {
    /// A span for a query (of `r`) that `started` (with traces on) and took over
    /// [`SLOW_QUERY`], a child of the event's.
    fn slow_query(
        &self,
        started: Option<Instant>,
        name: &'static str,
        r: &WitResource,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) {
        let Some(started) = started.filter(|s| s.elapsed() > SLOW_QUERY) else {
            return;
        };
        self.span.child_since(name, started, || {
            let mut all = vec![KeyValue::new(
                "kind",
                format!("{}/{}/{}", r.group, r.version, r.kind),
            )];
            all.extend(attributes());
            all
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::{RawObject, StoreOptions};
    use crate::tenancy::{NamespacePattern, ResourceRule};
    use kube::core::{ApiResource, GroupVersionKind};

    fn store() -> Arc<Store> {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let store = Arc::new(Store::new(ar, StoreOptions::default()));
        for (ns, name, team) in [("a", "1", "x"), ("a-dev", "2", "x"), ("b", "3", "x")] {
            let raw: RawObject = serde_json::from_str(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"1","labels":{{"team":"{team}"}}}}}}"#
            ))
            .unwrap();
            store.apply(raw, &mut |_| {});
        }
        store
    }

    /// The headers `by-index-headers` answers are each what `informant_header::encode` makes for
    /// the object, after its length.
    #[test]
    fn headers_by_index_are_each_objects_header_after_its_length() {
        let store = store();
        let objs = store.lookup(
            Store::builtin_index("namespace").unwrap(),
            "a",
            Visibility::All,
        );
        assert_eq!(objs.len(), 1);
        let r = WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let all = store.lookup(
            Store::builtin_index("label").unwrap(),
            "team=x",
            Visibility::All,
        );
        assert_eq!(all.len(), 3);
        let bytes = concatenated_headers(&r, &all);
        let mut rest = bytes.as_slice();
        for o in &all {
            let (len, tail) = rest.split_first_chunk::<4>().expect("a length");
            let (header, tail) = tail.split_at(u32::from_le_bytes(*len) as usize);
            assert_eq!(
                header,
                informant_header::encode(["", "v1", "ConfigMap"], o.metadata_fields())
            );
            rest = tail;
        }
        assert!(rest.is_empty());
    }

    fn view(patterns: &[&str]) -> CacheView {
        let namespaces = patterns
            .iter()
            .map(|p| NamespacePattern::try_from(p.to_string()).unwrap())
            .collect();
        let all = vec![ResourceRule::try_from("*".to_string()).unwrap()];
        let v = CacheView::new(Arc::new(Grant::new("t", namespaces, all, false)));
        v.add(store());
        v
    }

    fn names(objs: Vec<Arc<CachedObject>>) -> Vec<String> {
        let mut n: Vec<String> = objs.iter().map(|o| o.key().to_string()).collect();
        n.sort();
        n
    }

    #[test]
    fn an_index_declared_on_one_scope_answers_from_that_scope() {
        let r = WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let team: FieldPath = "metadata.labels.team".parse().unwrap();
        let v = CacheView::default();
        v.add_with_indexes(store(), [("by-team", &team)]);
        v.add(store());
        assert_eq!(
            names(v.by_index(&r, "by-team", "x").unwrap()),
            ["a-dev/2", "a/1", "b/3"]
        );
        let Err(QueryError::UnknownIndex(e)) = v.by_index(&r, "nope", "x") else {
            panic!("an undeclared index is unknown")
        };
        assert!(e.ends_with("namespace, label, owner, by-team)"), "{e}");
    }

    #[test]
    fn broad_lists_answer_the_same_through_exact_names_and_globs() {
        let r = WitResource {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let want = vec!["a-dev/2".to_string(), "a/1".to_string()];
        for v in [view(&["a", "a-dev"]), view(&["a", "a-*"])] {
            assert_eq!(names(v.list(&r, None, None).unwrap()), want);
            assert_eq!(names(v.list(&r, None, Some("team=x")).unwrap()), want);
            assert_eq!(names(v.by_index(&r, "label", "team=x").unwrap()), want);
            assert!(matches!(
                v.list(&r, Some("b"), None),
                Err(QueryError::Forbidden(_))
            ));
        }
    }

    mod queries {
        //! Whatever a plugin passes to `cache`: no panic, nothing outside the grant, and every
        //! refusal names what it refused.
        use super::*;
        use proptest::prelude::*;

        /// Strings near the edges: other tenants' names, separators, traversal, odd characters.
        fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                Just(String::new()),
                prop::sample::select(vec![
                    "a",
                    "a-dev",
                    "b",
                    "b/3",
                    "a/1",
                    "3",
                    "1",
                    "..",
                    ".",
                    "a/../b",
                    "a-x/../b",
                    "team=x",
                    "team",
                    "label",
                    "namespace",
                    "owner",
                    "color",
                    "%2F",
                    "a\n",
                    "*",
                ])
                .prop_map(str::to_string),
                "[a-z0-9./%=!,()*-]{0,12}",
                any::<String>(),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn any_query_stays_inside_the_grant(
                glob in any::<bool>(),
                ns in prop::option::of(text()),
                name in text(),
                selector in prop::option::of(text()),
                index in text(),
                value in text(),
            ) {
                let v = if glob { view(&["a", "a-*"]) } else { view(&["a", "a-dev"]) };
                let r = WitResource { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
                let inside = |objs: &[Arc<CachedObject>]| {
                    objs.iter().all(|o| matches!(o.namespace(), Some("a" | "a-dev")))
                };
                let named = |e: &QueryError, what: &str| {
                    let m = match e {
                        QueryError::Forbidden(m) | QueryError::NotWatched(m)
                        | QueryError::BadSelector(m) | QueryError::UnknownIndex(m) => m,
                    };
                    // The refused input is shown, escaped and cut if it is long.
                    let raw: String = what.chars().take(20).collect();
                    m.contains(&raw) || m.contains(&names::shown(&raw)) || what.is_empty() || matches!(e, QueryError::Forbidden(_) if m.contains("tenant `t`"))
                };
                match v.get(&r, ns.as_deref(), &name) {
                    Ok(found) => prop_assert!(inside(&found.into_iter().collect::<Vec<_>>())),
                    Err(e) => prop_assert!(named(&e, ns.as_deref().unwrap_or(&name)) || named(&e, &name), "{e:?}"),
                }
                match v.list(&r, ns.as_deref(), selector.as_deref()) {
                    Ok(found) => prop_assert!(inside(&found)),
                    Err(e) => prop_assert!(
                        named(&e, ns.as_deref().unwrap_or_default()) || named(&e, selector.as_deref().unwrap_or_default()),
                        "{e:?}"
                    ),
                }
                match v.by_index(&r, &index, &value) {
                    Ok(found) => prop_assert!(inside(&found)),
                    Err(e) => prop_assert!(named(&e, &index), "{e:?}"),
                }
            }
        }
    }
}
