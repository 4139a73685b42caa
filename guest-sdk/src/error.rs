//! What a handler answers when it did not handle an event: a failure, or a retry.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// The error a [`Plugin`](crate::Plugin) handler returns: the event failed, or the plugin asks
/// to see the object again later.
///
/// Any error converts into a failure, so `?` works on the SDK's own errors
/// ([`QueryError`](crate::QueryError), [`WriteError`](crate::kube::WriteError),
/// [`HttpError`](crate::http::HttpError), [`DecodeError`](crate::DecodeError)), on
/// `serde_json`'s, std's, `anyhow`'s or a plugin's own, and on `String` and `&str` messages. A
/// retry is only ever made on purpose, with [`HandlerError::retry`] or
/// [`HandlerError::retry_after`]:
///
/// ```
/// use informant_sdk::{Event, HandlerError};
/// # fn post(_: &str) -> Result<u16, std::io::Error> { Ok(200) }
///
/// fn on_added(ev: &Event) -> Result<(), HandlerError> {
///     // A failure: logged by the host and counted against the plugin.
///     let replicas: u32 = ev.meta().label("replicas").unwrap_or("1").parse()?;
///     // A retry: the host redelivers the object's latest state after a backoff.
///     match post(&format!("{} wants {replicas}", ev.meta().key())) {
///         Ok(200) => Ok(()),
///         Ok(status) => Err(HandlerError::retry(format!("webhook answered {status}"))),
///         Err(e) => Err(HandlerError::retry(format!("webhook unreachable: {e}"))),
///     }
/// }
/// ```
///
/// What the host sees is decided by the error the handler returns, nothing else: a retry made
/// and then dropped (a helper's, say) changes nothing.
///
/// Like `anyhow::Error`, it does not implement [`std::error::Error`] itself (that is what lets
/// every error convert into it); it shows its message and the error's sources with
/// [`Display`](fmt::Display).
pub struct HandlerError(Kind);

enum Kind {
    Failed(Box<dyn StdError + Send + Sync + 'static>),
    Retry(Retry),
}

/// A plugin's request to see an object again, as a [`HandlerError`] carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Why, for the host's log and `/plugins`.
    pub reason: String,
    /// Not before this long (the host's backoff may wait longer).
    pub after: Option<Duration>,
}

impl HandlerError {
    /// Asks the host to redeliver the object's latest state after a backoff (the manifest's
    /// `[retry]`).
    ///
    /// A newer event for the object replaces the retry; past `max-attempts` the event counts as
    /// failed with this reason.
    pub fn retry(reason: impl fmt::Display) -> Self {
        HandlerError(Kind::Retry(Retry {
            reason: reason.to_string(),
            after: None,
        }))
    }

    /// Like [`HandlerError::retry`], not before `after` (e.g. a `Retry-After` the remote side
    /// sent).
    pub fn retry_after(reason: impl fmt::Display, after: Duration) -> Self {
        HandlerError(Kind::Retry(Retry {
            reason: reason.to_string(),
            after: Some(after),
        }))
    }

    /// A failure with this message and no source.
    pub fn msg(message: impl fmt::Display) -> Self {
        HandlerError::from(message.to_string())
    }

    /// The retry asked for, if this is one.
    pub fn as_retry(&self) -> Option<&Retry> {
        match &self.0 {
            Kind::Retry(r) => Some(r),
            Kind::Failed(_) => None,
        }
    }

    /// Whether this asks for a retry rather than failing the event.
    pub fn is_retry(&self) -> bool {
        self.as_retry().is_some()
    }

    /// The error a failure was made from (to downcast it); `None` for a retry.
    pub fn as_error(&self) -> Option<&(dyn StdError + Send + Sync + 'static)> {
        match &self.0 {
            Kind::Failed(e) => Some(&**e),
            Kind::Retry(_) => None,
        }
    }
}

/// Any error, or a `String` or `&str` message, is a failure (not a retry).
///
/// Going through `Box<dyn Error>` is what admits messages too: `From<String>` next to a blanket
/// `From<E: Error>` would not be coherent (std may one day implement `Error` for `String`).
impl<E> From<E> for HandlerError
where
    E: Into<Box<dyn StdError + Send + Sync + 'static>>,
{
    fn from(e: E) -> Self {
        HandlerError(Kind::Failed(e.into()))
    }
}

/// A failure shows its error and each of its sources, `: `-separated; a retry shows its reason.
impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Failed(e) => {
                write!(f, "{e}")?;
                let mut source = e.source();
                while let Some(s) = source {
                    write!(f, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
            Kind::Retry(r) => f.write_str(&r.reason),
        }
    }
}

/// `Failed("message: source")` or `Retry { reason, after }`, so `unwrap` panics say which.
impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Failed(_) => f.debug_tuple("Failed").field(&self.to_string()).finish(),
            Kind::Retry(r) => f
                .debug_struct("Retry")
                .field("reason", &r.reason)
                .field("after", &r.after)
                .finish(),
        }
    }
}

/// The old spelling of [`HandlerError::retry`]; it now makes the retry itself, and is only one
/// if it is the error the handler returns.
#[deprecated(note = "use `HandlerError::retry`")]
pub fn retry(reason: impl Into<String>) -> HandlerError {
    HandlerError::retry(reason.into())
}

/// The old spelling of [`HandlerError::retry_after`].
#[deprecated(note = "use `HandlerError::retry_after`")]
pub fn retry_after(reason: impl Into<String>, after: Duration) -> HandlerError {
    HandlerError::retry_after(reason.into(), after)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a source, as `thiserror` makes them.
    #[derive(Debug)]
    struct Lookup(std::num::ParseIntError);

    impl fmt::Display for Lookup {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("looking up the replicas")
        }
    }

    impl StdError for Lookup {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    fn parse(text: &str) -> Result<u32, HandlerError> {
        Ok(text.parse()?)
    }

    fn lookup(text: &str) -> Result<u32, HandlerError> {
        text.parse().map_err(Lookup).map_err(HandlerError::from)
    }

    #[test]
    fn question_mark_makes_failures_with_their_sources() {
        let e = parse("x").unwrap_err();
        assert!(!e.is_retry());
        assert_eq!(e.to_string(), "invalid digit found in string");
        assert!(
            e.as_error()
                .unwrap()
                .downcast_ref::<std::num::ParseIntError>()
                .is_some()
        );
        let e = lookup("x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "looking up the replicas: invalid digit found in string"
        );
        assert_eq!(
            format!("{e:?}"),
            r#"Failed("looking up the replicas: invalid digit found in string")"#
        );
        let from_str = || -> Result<(), HandlerError> { Err("plain")? };
        let from_string = || -> Result<(), HandlerError> { None.ok_or(format!("{}", 1))? };
        assert_eq!(
            (
                from_str().unwrap_err().to_string(),
                from_string().unwrap_err().to_string()
            ),
            ("plain".into(), "1".into())
        );
        assert_eq!(HandlerError::msg(7).to_string(), "7");
    }

    #[test]
    fn only_a_retry_made_as_one_is_a_retry() {
        let e = HandlerError::retry_after("webhook down", Duration::from_secs(2));
        assert_eq!(
            e.as_retry(),
            Some(&Retry {
                reason: "webhook down".into(),
                after: Some(Duration::from_secs(2))
            })
        );
        assert!(e.as_error().is_none());
        assert_eq!(e.to_string(), "webhook down");
        assert_eq!(
            format!("{e:?}"),
            r#"Retry { reason: "webhook down", after: Some(2s) }"#
        );
        #[allow(deprecated)]
        let old = retry("old spelling");
        assert_eq!(
            old.as_retry().map(|r| (&*r.reason, r.after)),
            Some(("old spelling", None))
        );
    }
}
