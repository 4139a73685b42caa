//! Shared informers for any Kubernetes resource: client-go's `tools/cache`, in Rust.
//!
//! Data flows one way:
//!
//! ```text
//! reflector (kube-runtime watcher) -> store (objects + indexes) -> processor -> listener per handler
//!                                        ^ queries (get, list, by-index)
//! ```
//!
//! - [`reflector`]: list + watch with bookmarks, relist on 410 Gone, backoff with jitter,
//!   streaming lists when the server has them; emits [`Delta`]s.
//! - [`store`]: the thread-safe cache; a relist is a Replace that diffs against it.
//! - [`index`]: by-index lookups in O(matches); label selector queries use [`crate::selector`].
//! - [`listener`]: one bounded, coalescing, per-key-ordered queue per handler.
//! - [`processor`]: fans events out to listeners; one task per handler.
//! - [`shared_informer`]: ties them together; late handlers get a gap-free replay.
//! - [`factory`]: one informer per (resource, namespace, selector), resolved by discovery.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use informant::informer::{Event, FactoryOptions, FnHandler, HandlerOptions, InformerFactory, WatchScope};
//! let factory = InformerFactory::new(client, FactoryOptions::default());
//! let pods = factory.informer("v1", "Pod", WatchScope::default()).await?;
//! pods.add_handler("printer", FnHandler(|e: Event| println!("{:?} {}", e.event_type, e.key())), HandlerOptions::default());
//! factory.start();
//! factory.wait_for_sync(std::time::Duration::from_secs(30)).await?;
//! let web = pods.store().list(Some("default"), &"app=web".parse::<informant::informer::LabelSelector>()?);
//! # Ok(()) }
//! ```

pub mod event;
pub mod factory;
pub mod index;
pub mod listener;
pub mod object;
pub mod processor;
pub mod reflector;
pub mod shared_informer;
pub mod store;

pub use crate::selector::{LabelSelector, SelectorError};
pub use event::{Event, EventType};
pub use factory::{FactoryOptions, InformerFactory, ResolvedResource, WatchScope};
pub use index::{FieldPath, IndexError, IndexSpec};
pub use object::{CachedObject, ObjectKey, RawObject};
pub use processor::{EventFilter, FnHandler, Handler, ListenerHandle, SharedProcessor};
pub use reflector::{Delta, InitialList, ReflectorConfig, ReflectorStats};
pub use shared_informer::{HandlerOptions, SharedInformer};
pub use store::{QueryError, Store, StoreOptions};

use std::time::Duration;

/// Errors from setting up informers; each names the resource, selector or index at fault.
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
    /// Informers did not sync in time.
    #[error("informers not synced after {timeout:?}: {pending}")]
    SyncTimeout {
        /// How long we waited.
        timeout: Duration,
        /// The informers still waiting.
        pending: String,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
