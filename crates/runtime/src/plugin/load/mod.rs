//! Loading: from the plugins directory to a started supervisor.
//!
//! - [`acceptance`]: whether a manifest fits its tenant's grant and the limits it gets.
//! - [`check`]: the offline check behind `informant check`.
//! - [`loader`]: the [`PluginHost`](loader::PluginHost): the plugins directory, reconciled on
//!   start and on every change, in the order `scan` → `prepare` → register.
//! - `loaded`: one registered version: its supervisor, informer claims and handlers, and how it
//!   stops.
//! - [`host_config`]: the host-wide defaults and ceilings manifests are admitted against.
//! - `scan`: finds plugins on disk and reads their files, hardened (links, hard links, FIFOs, size).
//! - `handover`: a plugin taken over from another shard member starts where its cursors say.
//! - `plan`: what a reconcile does, decided from data alone (table-tested).
//! - `prepare`: one version from bytes to a started supervisor, not yet registered; its
//!   admission decided from data alone (unit-tested).
//! - `register`: a prepared version's handlers registered, and its tenant's room for it.
//! - `registry`: what runs, waits and was refused, per plugin, as readers see it.
//! - `reading`: the host's readers over its registry.
//! - [`status`]: what readers (`/plugins`, metrics) see, never waiting for a reconcile.
//! - [`redrive`]: a dead letter's object delivered again to its plugin, as the cache has it now.
//! - [`rediscover`]: re-expands running wildcard watches when CRDs change (and periodically).
//! - [`rediscovery`]: the re-expansion itself and the CRD watch behind it.
//! - [`reload`]: watches the directory ([`crate::fswatch`]) and reconciles once changes settle.
//! - [`retry_waiting`]: when waiting plugins are tried again (backoff, CRD changes).
//! - [`secrets`]: `${env:..}` / `${file:..}` config references, resolved at load.
//! - [`waiting`]: plugins refused for a reason that goes away by itself, and why they wait.
//! - [`wildcard`]: which concrete resources a `kind = "*"` watch covers now.
//! - [`permitted`]: which of those RBAC lets the host (and a tenant's identity) list and watch.

pub(crate) mod acceptance;
pub mod check;
mod handover;
pub mod host_config;
mod loaded;
pub mod loader;
pub(crate) mod permitted;
mod plan;
mod prepare;
mod reading;
pub mod rediscover;
pub mod rediscovery;
pub(crate) mod redrive;
mod register;
mod registry;
pub mod reload;
pub(crate) mod retry_waiting;
mod scan;
pub(crate) mod secrets;
pub mod status;
pub(crate) mod waiting;
pub(crate) mod wildcard;
