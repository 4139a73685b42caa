//! Asking the host to redeliver an event's object later.

use std::cell::RefCell;
use std::time::Duration;

/// A plugin's request to see an object again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Why, for the host's log and `/plugins`.
    pub reason: String,
    /// Not before this long (the host's backoff may wait longer).
    pub after: Option<Duration>,
}

thread_local! {
    static ASKED: RefCell<Option<Retry>> = const { RefCell::new(None) };
}

/// Asks the host to redeliver the object's latest state after a backoff (the manifest's
/// `[retry]`); return what it gives as the handler's error:
///
/// ```
/// # fn post() -> Result<(), String> { Ok(()) }
/// # fn on_added() -> Result<(), String> {
/// if let Err(e) = post() {
///     return Err(informant_sdk::retry(format!("webhook: {e}")));
/// }
/// # Ok(()) }
/// ```
///
/// A newer event for the object replaces the retry; past `max-attempts` the event counts as
/// failed with this reason.
pub fn retry(reason: impl Into<String>) -> String {
    ask(reason.into(), None)
}

/// Like [`retry`], not before `after` (e.g. a `Retry-After` the remote side sent).
pub fn retry_after(reason: impl Into<String>, after: Duration) -> String {
    ask(reason.into(), Some(after))
}

fn ask(reason: String, after: Option<Duration>) -> String {
    ASKED.with(|a| {
        *a.borrow_mut() = Some(Retry {
            reason: reason.clone(),
            after,
        })
    });
    reason
}

/// The retry asked for since the last call, if any (clearing it).
pub(crate) fn take() -> Option<Retry> {
    ASKED.with(|a| a.borrow_mut().take())
}
