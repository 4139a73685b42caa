//! Read-only queries against the host's informer cache.
//!
//! Answers reflect the cache at the moment of the call, which may be ahead of the event being
//! handled (the object may already be updated or gone). A plugin may query only resources its
//! manifest watches, within its tenant's grants; everything else is [`QueryError::NotWatched`] or
//! [`QueryError::Forbidden`]. Objects come back as JSON, managedFields removed.
//!
//! On native targets these calls go to the in-memory cache of the running
//! [`testing::Harness`](crate::testing::Harness).

use std::fmt;

use serde::de::DeserializeOwned;

use crate::Resource;
use crate::event::{Head, Meta};

/// Why a cache query was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// Outside what this plugin's tenant was granted.
    Forbidden(String),
    /// The host does not watch this resource for this plugin (the manifest must name it).
    NotWatched(String),
    /// The label selector does not parse; the message says where.
    BadSelector(String),
    /// No index of that name is declared for this resource.
    UnknownIndex(String),
    /// Not from the host: a typed query's JSON did not decode into the requested type.
    Decode(String),
}

/// Names the reason and carries the host's message.
impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Forbidden(m) => write!(f, "forbidden: {m}"),
            QueryError::NotWatched(m) => write!(f, "not watched: {m}"),
            QueryError::BadSelector(m) => write!(f, "bad label selector: {m}"),
            QueryError::UnknownIndex(m) => write!(f, "unknown index: {m}"),
            QueryError::Decode(m) => write!(f, "cannot decode: {m}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// One object by namespace (`None` for cluster-scoped) and name, as JSON.
pub fn get(
    r: &Resource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<String>, QueryError> {
    backend::get(r, namespace, name)
}

/// Objects in a namespace (all when `None`) matching a label selector (all when `None`), as JSON.
pub fn list(
    r: &Resource,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<String>, QueryError> {
    backend::list(r, namespace, selector)
}

/// Objects whose index `index` has value `value`, as JSON.
///
/// Built-in indexes: `namespace`, `label` (values `key=value`), `owner` (owner uid); others come
/// from the manifest's `[watch.indexes]`.
pub fn by_index(r: &Resource, index: &str, value: &str) -> Result<Vec<String>, QueryError> {
    backend::by_index(r, index, value)
}

/// The kind and metadata of an object a query found, without its JSON (see [`by_index_meta`]).
pub struct Found(Head);

impl Found {
    /// Its kind and metadata, as an event's [`Meta`].
    pub fn meta(&self) -> Meta<'_> {
        Meta(&self.0)
    }
}

impl fmt::Debug for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// [`by_index`]'s objects as kind and metadata only (namespace, name, uid, resourceVersion,
/// labels): the host copies them all at once and no JSON is made or parsed, so a policy looking
/// at thousands of objects' names and labels reads them in microseconds each.
pub fn by_index_meta(r: &Resource, index: &str, value: &str) -> Result<Vec<Found>, QueryError> {
    let bytes = backend::by_index_headers(r, index, value)?;
    let mut found = Vec::new();
    let mut rest = bytes.as_slice();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let (header, tail) = tail.split_at_checked(len).unwrap_or_else(|| {
            panic!(
                "the host's header list is cut short: {len} bytes announced, {} left",
                tail.len()
            )
        });
        found.push(Found(Head::decode(header.to_vec())));
        rest = tail;
    }
    Ok(found)
}

/// How many of [`by_index`]'s objects match `selector` (all when `None`), counted in the host's
/// cache: nothing is copied into the plugin, so a policy that only needs how many (the
/// LoadBalancer Services of a namespace, the Pods of a team) pays microseconds for thousands.
pub fn count_by_index(
    r: &Resource,
    index: &str,
    value: &str,
    selector: Option<&str>,
) -> Result<u32, QueryError> {
    backend::count_by_index(r, index, value, selector)
}

/// [`get`] decoded into a `k8s-openapi` type (or any type with a [`k8s_openapi::Resource`] impl).
pub fn get_as<K>(namespace: Option<&str>, name: &str) -> Result<Option<K>, QueryError>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    get(&Resource::of::<K>(), namespace, name)?
        .map(|j| decode::<K>(&j))
        .transpose()
}

/// [`list`] decoded into a `k8s-openapi` type.
pub fn list_as<K>(namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<K>, QueryError>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    list(&Resource::of::<K>(), namespace, selector)?
        .iter()
        .map(|j| decode::<K>(j))
        .collect()
}

/// [`by_index`] decoded into a `k8s-openapi` type.
pub fn by_index_as<K>(index: &str, value: &str) -> Result<Vec<K>, QueryError>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    by_index(&Resource::of::<K>(), index, value)?
        .iter()
        .map(|j| decode::<K>(j))
        .collect()
}

fn decode<K: k8s_openapi::Resource + DeserializeOwned>(json: &str) -> Result<K, QueryError> {
    serde_json::from_str(json)
        .map_err(|e| QueryError::Decode(format!("{}: {e}", Resource::of::<K>())))
}

#[cfg(target_arch = "wasm32")]
mod backend {
    use super::QueryError;
    use crate::Resource;
    use crate::wit::informant::plugin::cache as imports;
    use crate::wit::informant::plugin::types::QueryError as WitError;

    fn err(e: WitError) -> QueryError {
        match e {
            WitError::Forbidden(m) => QueryError::Forbidden(m),
            WitError::NotWatched(m) => QueryError::NotWatched(m),
            WitError::BadSelector(m) => QueryError::BadSelector(m),
            WitError::UnknownIndex(m) => QueryError::UnknownIndex(m),
        }
    }

    pub(super) fn get(
        r: &Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, QueryError> {
        imports::get(&r.to_wit(), ns, name).map_err(err)
    }

    pub(super) fn list(
        r: &Resource,
        ns: Option<&str>,
        sel: Option<&str>,
    ) -> Result<Vec<String>, QueryError> {
        imports::list(&r.to_wit(), ns, sel).map_err(err)
    }

    pub(super) fn by_index(
        r: &Resource,
        index: &str,
        value: &str,
    ) -> Result<Vec<String>, QueryError> {
        imports::by_index(&r.to_wit(), index, value).map_err(err)
    }

    pub(super) fn by_index_headers(
        r: &Resource,
        index: &str,
        value: &str,
    ) -> Result<Vec<u8>, QueryError> {
        imports::by_index_headers(&r.to_wit(), index, value).map_err(err)
    }

    pub(super) fn count_by_index(
        r: &Resource,
        index: &str,
        value: &str,
        selector: Option<&str>,
    ) -> Result<u32, QueryError> {
        imports::count_by_index(&r.to_wit(), index, value, selector).map_err(err)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod backend {
    use super::QueryError;
    use crate::Resource;
    use crate::testing::with_cache;

    pub(super) fn get(
        r: &Resource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, QueryError> {
        with_cache(|c| c.get(r, ns, name))
    }

    pub(super) fn list(
        r: &Resource,
        ns: Option<&str>,
        sel: Option<&str>,
    ) -> Result<Vec<String>, QueryError> {
        with_cache(|c| c.list(r, ns, sel))
    }

    pub(super) fn by_index(
        r: &Resource,
        index: &str,
        value: &str,
    ) -> Result<Vec<String>, QueryError> {
        with_cache(|c| c.by_index(r, index, value))
    }

    /// As the host counts: the selector checked against each object's labels.
    pub(super) fn count_by_index(
        r: &Resource,
        index: &str,
        value: &str,
        selector: Option<&str>,
    ) -> Result<u32, QueryError> {
        let selector = match selector {
            Some(s) => informant_manifest::LabelSelector::parse(s)
                .map_err(|e| QueryError::BadSelector(e.to_string()))?,
            None => informant_manifest::LabelSelector::default(),
        };
        let mut n = 0u32;
        for json in with_cache(|c| c.by_index(r, index, value))? {
            let object: serde_json::Value =
                serde_json::from_str(&json).map_err(|e| QueryError::Decode(format!("{r}: {e}")))?;
            let labels = crate::testing::cache::labels_of(&object);
            if selector.matches(|k| labels.get(k).map(String::as_str)) {
                n += 1;
            }
        }
        Ok(n)
    }

    /// As the host concatenates them: each header after its length.
    pub(super) fn by_index_headers(
        r: &Resource,
        index: &str,
        value: &str,
    ) -> Result<Vec<u8>, QueryError> {
        let mut out = Vec::new();
        for json in with_cache(|c| c.by_index(r, index, value))? {
            let object: serde_json::Value =
                serde_json::from_str(&json).map_err(|e| QueryError::Decode(format!("{r}: {e}")))?;
            let header = crate::testing::header_of(&object, r);
            out.extend_from_slice(&(header.len() as u32).to_le_bytes());
            out.extend_from_slice(&header);
        }
        Ok(out)
    }
}
