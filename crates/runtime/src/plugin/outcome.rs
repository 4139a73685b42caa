//! How a call into a plugin ended: the types every layer passes on, from the host imports that
//! record an event's outcome up to the loader and the admin server that report it.

use std::time::Duration;

use crate::plugin::text::{escape_controls, truncated};

/// How a plugin finished an event it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Done with it.
    Done,
    /// Asked to see the object again later.
    Retry {
        /// Why, as the plugin said (bounded like an error).
        reason: String,
        /// The earliest redelivery the plugin accepts.
        after: Option<Duration>,
    },
}

/// Why a call into a plugin failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("missed its {0:?} deadline")]
    Deadline(Duration),
    /// The guest trapped (including running out of its memory cap).
    #[error("trapped: {0}")]
    Trap(String),
    /// The guest returned an error; the instance is healthy.
    #[error("returned an error: {0}")]
    Guest(String),
}

impl CallError {
    /// Whether the instance is unusable afterwards.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, CallError::Guest(_))
    }

    /// Plugin-made text (an error it returned, a trap's backtrace with its function names) cut
    /// to `max` bytes and kept on one line: it is logged and shown by `/plugins`.
    pub(crate) fn bounded(self, max: usize) -> Self {
        let bound = |m: String| escape_controls(&truncated(m, max)).into_owned();
        match self {
            CallError::Trap(m) => CallError::Trap(bound(m)),
            CallError::Guest(m) => CallError::Guest(bound(m)),
            deadline => deadline,
        }
    }
}
