//! Durable delivery state for `informant run --state-dir DIR`: the informer cache, each
//! plugin's delivery cursor and dead letters, in one redb file `DIR/state.redb`, so a restart
//! delivers exactly what changed while the host was down.
//!
//! - [`StateDir::open`] opens (or creates) the file in a directory that must be this user's
//!   alone ([`private`]: 0700, no links followed, no one else's files) and locked for this
//!   process (`state.lock`, whose holder a second process is told). A directory that fails
//!   those checks, or is in use, is an `Err` the caller must not run past: it was asked for
//!   durability. A file it cannot use — corrupt, truncated, written in another format or for
//!   another cluster — is renamed aside (the newest [`KEEP_SET_ASIDE`] kept) and a fresh one
//!   replaces it ([`SetAside`]). Every page's checksum is verified unless the file is exactly
//!   as [`StateDir::close`] sealed it.
//! - [`StateDir::load`] reads everything back at startup ([`Snapshot`]).
//! - [`StateDir::journal`] hands out the [`StateWriter`] the event path writes through: ops go to a
//!   writer thread that batches, compacts and commits them; callers never wait on the disk.
//! - Dead letters are bounded per plugin and per tenant, and dropped with their plugin
//!   ([`letters`]).
//!
//! The model: each informer numbers its store mutations with an increasing `seq`, and every
//! mutation is stored as a *version* of its key (the object JSON, or a tombstone). A *cursor*
//! says a plugin has handled everything an informer emitted up to a seq. A version is kept only
//! while some plugin's cursor still needs it: once every cursor of an informer has passed a
//! newer version of the same key, the older one is deleted, and a tombstone every cursor has
//! passed is deleted too. In steady state each live key has one stored version.

mod aside;
mod backend;
mod compact;
mod dir;
mod error;
mod file;
mod held;
mod journal;
pub mod letters;
mod lock;
pub mod private;
mod seal;
mod stored;
mod tables;

#[cfg(test)]
mod tests;

pub use aside::KEEP_SET_ASIDE;
pub use dir::{Cursor, InformerState, Snapshot, StateDir, Version};
pub use error::{Refusal, Result, SetAside, StateError};
pub use file::FILE_NAME;
pub use journal::{BATCH_WINDOW, CursorSource, JournalStats, StateWriter};
pub use letters::{
    DeadLetter, MAX_DEAD_LETTERS_PER_PLUGIN, MAX_DEAD_LETTERS_PER_TENANT, tenant_of,
};
pub use lock::{Holder, LOCK_FILE_NAME};
pub use stored::{Stored, StoredVersion, Text};
