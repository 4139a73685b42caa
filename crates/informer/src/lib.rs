//! Shared informers for any Kubernetes resource: client-go's `tools/cache`, for kube-rs.
//!
//! A kube-rs [`kube::Client`] in, and for each (resource, namespace, label selector) one informer
//! that lists and watches once and feeds any number of handlers, each through its own queue:
//!
//! ```text
//! reflector (kube-runtime watcher) -> store (objects + indexes) -> processor -> listener per handler
//!                                        ^ queries (get, list, by-index)
//! ```
//!
//! What it adds over `kube::runtime::reflector`:
//! - **Compact cache**: each object version is kept once as compact JSON (managedFields
//!   stripped) plus the few fields indexes need, shared by the store and every handler — about
//!   a tenth of a `DynamicObject` store's memory per object.
//! - **Indexes**: `namespace`, `label` (`key=value`), `owner` (owner uid) built in, more as JSON
//!   field paths; [`Store::by_index`] costs O(matches), never a scan.
//! - **Per-handler queues**: a slow handler delays nobody; its queue coalesces per key, so it is
//!   bounded by the number of keys, and per key events stay in order.
//! - **Late handlers** get every cached object as `Added (initial)`, then live events, with no
//!   gap and no duplicate; relists after 410 Gone are diffed into Added/Updated/Deleted (with
//!   `final_state_unknown`), like client-go's Replace.
//!
//! Modules, one per concept:
//! - [`reflector`]: list + watch with bookmarks, relist on 410 Gone, backoff with jitter,
//!   streaming lists when the server has them; emits [`Delta`]s.
//! - [`store`]: the thread-safe cache; a relist is a Replace that diffs against it.
//! - [`scope`]: an object on the wrong side of its resource's scope (a namespaced kind's
//!   without a namespace) is refused before the store holds it.
//! - [`index`]: by-index lookups in O(matches); label selector queries use [`LabelSelector`].
//! - [`listener`]: one bounded, coalescing, per-key-ordered queue per handler.
//! - [`processor`]: fans events out to listeners; one task per handler.
//! - [`shared_informer`]: ties them together; late handlers get a gap-free replay.
//! - [`factory`]: one informer per (resource, namespace, selector), resolved by discovery.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use informant_informer::{Event, FactoryOptions, FnHandler, HandlerOptions, InformerFactory, WatchScope};
//! let factory = InformerFactory::new(client, FactoryOptions::default());
//! let pods = factory.informer("v1", "Pod", WatchScope::default()).await?;
//! pods.add_handler("printer", FnHandler(|e: Event| println!("{:?} {}", e.event_type, e.key())), HandlerOptions::default());
//! factory.start();
//! factory.wait_for_sync(std::time::Duration::from_secs(30)).await?;
//! let web = pods.store().list(Some("default"), &"app=web".parse::<informant_informer::LabelSelector>()?);
//! let owned = pods.store().by_index("owner", "some-replicaset-uid")?;
//! # Ok(()) }
//! ```

pub mod cursor;
pub mod event;
pub mod factory;
pub mod index;
pub mod listener;
pub mod object;
pub mod processor;
pub mod reflector;
pub mod review;
pub mod scope;
pub mod shared_informer;
pub mod store;

pub use cursor::{Hold, Holds};
pub use event::{Event, EventType};
pub use factory::{
    DiscoveredResource, FactoryOptions, InformerClaim, InformerFactory, InformerKey, OnCreated,
    ResolvedResource, WatchScope, wait_all_settled, wait_all_synced,
};
pub use index::{IndexError, IndexSpec};
pub use informant_apimachinery::{FieldPath, LabelSelector, SelectorError};
pub use object::{CachedObject, ObjectKey, RawObject, StoredObject};
pub use processor::{
    ChangeFilter, EventFilter, FnHandler, Handler, Injector, ListenerGauges, ListenerHandle,
    SharedProcessor,
};
pub use reflector::{Access, Delta, InitialList, ReflectorConfig, ReflectorStats};
pub use shared_informer::{ChangeLog, CursorOptions, HandlerOptions, SharedInformer};
pub use store::{
    FieldIndex, IndexId, QueryError, Relist, RestoreReport, Restored, Store, StoreOptions,
    Visibility,
};

use std::time::Duration;

/// Errors from setting up informers and reading through them; each names the resource,
/// selector or index at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The apiVersion/kind is not well formed.
    #[error("invalid resource `{api_version}` `{kind}`: {reason}")]
    InvalidResource {
        /// As given.
        api_version: String,
        /// As given.
        kind: String,
        /// What is wrong.
        reason: String,
    },
    /// The server does not serve this kind (discovery found no such group, version or kind).
    #[error("unknown resource `{api_version}` `{kind}`: {reason}")]
    UnknownResource {
        /// As given.
        api_version: String,
        /// As given.
        kind: String,
        /// What discovery said.
        reason: String,
    },
    /// Discovery itself failed (connection, auth, server error).
    #[error("discovery of `{api_version}` `{kind}` failed: {source}")]
    Discovery {
        /// As given.
        api_version: String,
        /// As given.
        kind: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A namespace was given for a cluster-scoped kind.
    #[error("`{kind}` is cluster-scoped; it cannot be watched in namespace `{namespace}`")]
    ClusterScoped {
        /// The kind.
        kind: String,
        /// The namespace asked for.
        namespace: String,
    },
    /// A label selector did not parse.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// An index declaration was refused.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// Listing an informer's resource at a resourceVersion failed (other than with 410).
    #[error("listing {resource} at resourceVersion {resource_version} failed: {source}")]
    ListAt {
        /// What the informer watches.
        resource: String,
        /// The resourceVersion asked for.
        resource_version: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Informers did not sync in time.
    #[error("informers not synced after {timeout:?}: {pending}")]
    SyncTimeout {
        /// How long we waited.
        timeout: Duration,
        /// The informers still waiting.
        pending: String,
    },
}

impl Error {
    /// Whether the same request may succeed later without any change on our side: the kind is
    /// not served yet (a CRD not installed yet) or discovery itself failed (API server
    /// unreachable, overloaded, or refusing us for now). Everything else is a mistake in what
    /// was asked — including a kind the core group (`v1`) lacks, since no CRD can add one there.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::UnknownResource { api_version, .. } => api_version.contains('/'),
            Error::Discovery { .. } | Error::ListAt { .. } => true,
            _ => false,
        }
    }
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
