//! Loading: from the plugins directory to a started supervisor.
//!
//! - [`admission`]: whether a manifest fits its tenant's grant and the limits it gets.
//! - [`check`]: the offline check behind `informant check`.
//! - [`loader`]: the plugins directory, reconciled on start and on every change.
//! - [`rediscover`]: re-expands wildcard watches when CRDs change (and periodically).
//! - [`reload`]: watches the directory ([`crate::fswatch`]) and reconciles once changes settle.
//! - [`retry`]: when waiting plugins are tried again (backoff, CRD changes).
//! - [`secrets`]: `${env:..}` / `${file:..}` config references, resolved at load.
//! - [`waiting`]: plugins refused for a reason that goes away by itself, and why they wait.
//! - [`wildcard`]: which concrete resources a `kind = "*"` watch covers now.

pub mod admission;
pub mod check;
pub mod loader;
pub mod rediscover;
pub mod reload;
pub mod retry;
pub mod secrets;
pub mod waiting;
pub mod wildcard;
