//! Admission hooks (`[[admit]]`): API requests the plugin validates or mutates, answered by its
//! `admission-hook` export from the host's webhook server.
//!
//! ```toml
//! [[admit]]
//! name = "images"                  # a DNS label, unique in the manifest: the webhook's path
//! api-version = "apps/v1"          # GROUP/VERSION, or VERSION for core
//! kind = "Deployment"
//! operations = ["create", "update"]  # create, update, delete, connect; this is the default
//! mode = "validate"                # or "mutate" (a JSON Patch in the answer)
//! failure-policy = "fail"          # or "ignore": what a trap, an error or a timeout does
//! timeout-ms = 1000                # the plugin's time per request
//! timeout-seconds = 10             # the webhook's timeoutSeconds (1..=30)
//! namespace-selector = "team"      # optional: only objects in matching namespaces
//! object-selector = "app=web"      # optional: only matching objects
//! ```
//!
//! `timeout-ms` must leave [`ROOM_MS`] inside `timeout-seconds`: the API server gives up on the
//! whole call at `timeout-seconds`, and the request's wait for an instance and its trip over
//! the network come out of the same time. Every value is checked while parsing, so a refusal
//! names the file and the field.

use serde::Deserialize;

use crate::{ApiVersion, ScheduleName, SelectorText};

/// The longest `timeoutSeconds` Kubernetes accepts for a webhook.
pub const MAX_TIMEOUT_SECONDS: u32 = 30;

/// What `timeout-ms` must leave inside `timeout-seconds`: the queue and the network's share.
pub const ROOM_MS: u32 = 500;

/// The default `timeout-ms`.
pub const DEFAULT_TIMEOUT_MS: u32 = 1000;

/// The default `timeout-seconds`, as Kubernetes defaults it.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 10;

/// One `[[admit]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Admit {
    /// The hook's name: a DNS label, unique in the manifest; part of its webhook path.
    pub name: ScheduleName,
    /// `GROUP/VERSION`, or `VERSION` for core.
    pub api_version: ApiVersion,
    /// The kind admitted.
    pub kind: String,
    /// The operations admitted; `create` and `update` when absent.
    #[serde(default = "default_operations", deserialize_with = "operations")]
    pub operations: Vec<Operation>,
    /// Validate only, or also mutate.
    #[serde(default)]
    pub mode: Mode,
    /// What a failed answer does.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// The plugin's time per request, in milliseconds.
    pub timeout_ms: Option<u32>,
    /// The webhook's `timeoutSeconds`.
    pub timeout_seconds: Option<u32>,
    /// Only objects in namespaces whose labels match.
    pub namespace_selector: Option<SelectorText>,
    /// Only objects whose labels match.
    pub object_selector: Option<SelectorText>,
}

/// An API operation an admission hook may be called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// A create.
    Create,
    /// An update, a patch or an apply.
    Update,
    /// A delete.
    Delete,
    /// A connect (exec, attach, port-forward).
    Connect,
}

impl Operation {
    /// The name Kubernetes gives it (`CREATE`).
    pub fn as_kubernetes(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    /// The name manifests and metrics use (`create`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
            Operation::Connect => "connect",
        }
    }
}

/// Whether a hook only judges or also changes what it admits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Allows or denies; a patch is an error.
    #[default]
    Validate,
    /// Allows with a JSON Patch, or denies.
    Mutate,
}

/// What the API server does when a hook fails to answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// The request is refused.
    #[default]
    Fail,
    /// The request goes on as if the hook had allowed it.
    Ignore,
}

impl FailurePolicy {
    /// The name Kubernetes gives it (`Fail`).
    pub fn as_kubernetes(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

fn default_operations() -> Vec<Operation> {
    vec![Operation::Create, Operation::Update]
}

fn operations<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Operation>, D::Error> {
    let list = Vec::<Operation>::deserialize(d)?;
    if list.is_empty() {
        return Err(serde::de::Error::custom(
            "must name at least one operation (create, update, delete, connect)",
        ));
    }
    for (i, op) in list.iter().enumerate() {
        if list[..i].contains(op) {
            return Err(serde::de::Error::custom(format!(
                "operation `{}` is listed twice",
                op.as_str()
            )));
        }
    }
    Ok(list)
}

impl Admit {
    /// The plugin's time per request.
    pub fn timeout_ms(&self) -> u32 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }

    /// The webhook's `timeoutSeconds`.
    pub fn timeout_seconds(&self) -> u32 {
        self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS)
    }

    /// Checks what serde cannot: the kind, and the timeouts against each other.
    pub fn check(&self) -> Result<(), AdmitTableError> {
        if self.api_version.is_wildcard() {
            return Err(AdmitTableError::WildcardApiVersion);
        }
        let kind_ok = self.kind.chars().next().is_some_and(char::is_alphabetic)
            && self.kind.chars().all(|c| c.is_ascii_alphanumeric());
        if !kind_ok {
            return Err(AdmitTableError::InvalidKind(self.kind.clone()));
        }
        let seconds = self.timeout_seconds();
        if seconds == 0 || seconds > MAX_TIMEOUT_SECONDS {
            return Err(AdmitTableError::TimeoutSeconds(seconds));
        }
        let ms = self.timeout_ms();
        if ms == 0 || u64::from(ms) + u64::from(ROOM_MS) > u64::from(seconds) * 1000 {
            return Err(AdmitTableError::NoRoom { ms, seconds });
        }
        Ok(())
    }
}

/// Checks a manifest's admission hooks: each table on its own, and no name twice. The error
/// carries the index of the table at fault.
pub fn check_all(hooks: &[Admit]) -> Result<(), (usize, AdmitTableError)> {
    for (i, hook) in hooks.iter().enumerate() {
        hook.check().map_err(|e| (i, e))?;
        if let Some(first) = hooks[..i].iter().position(|h| h.name == hook.name) {
            return Err((
                i,
                AdmitTableError::Duplicate {
                    name: hook.name.to_string(),
                    first,
                },
            ));
        }
    }
    Ok(())
}

/// What [`Admit::check`] refuses; [`AdmitTableError::field`] names the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmitTableError {
    /// `*` or `GROUP/*`.
    #[error("an admission hook names the api-version it admits; `*` is not allowed")]
    WildcardApiVersion,
    /// Not a kind.
    #[error("invalid kind `{0}` (expected a Kubernetes kind such as `Deployment`)")]
    InvalidKind(String),
    /// `timeout-seconds` out of range.
    #[error("{0} is not a webhook timeout: Kubernetes allows 1 to {MAX_TIMEOUT_SECONDS} seconds")]
    TimeoutSeconds(u32),
    /// `timeout-ms` leaves no room inside `timeout-seconds`.
    #[error(
        "{ms} ms leaves no room inside the webhook's {seconds} s: the plugin's time must be at \
         least 1 ms and leave {ROOM_MS} ms for the queue and the network (at most {} ms, or \
         raise `timeout-seconds`)",
        (u64::from(*seconds) * 1000).saturating_sub(u64::from(ROOM_MS))
    )]
    NoRoom {
        /// `timeout-ms`.
        ms: u32,
        /// `timeout-seconds`.
        seconds: u32,
    },
    /// A name used by an earlier table.
    #[error("hook `{name}` is already the name of admit[{first}]")]
    Duplicate {
        /// The name.
        name: String,
        /// The earlier table.
        first: usize,
    },
}

impl AdmitTableError {
    /// The field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            AdmitTableError::WildcardApiVersion => "api-version",
            AdmitTableError::InvalidKind(_) => "kind",
            AdmitTableError::TimeoutSeconds(_) => "timeout-seconds",
            AdmitTableError::NoRoom { .. } => "timeout-ms",
            AdmitTableError::Duplicate { .. } => "name",
        }
    }
}
