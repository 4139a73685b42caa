//! The on-disk layout: one table per concept, keys as redb tuples so arbitrary strings
//! (with `/`, `%2F`, empty, unicode) are length-prefixed and never collide.

use redb::TableDefinition;

/// The format this version writes and reads; a file in another is refused. Format 1 stored
/// each version's JSON alone; 2 adds the caller's metadata of it ([`VERSION_META`]); 3 adds
/// to each cursor the resource version it had handled through.
pub(crate) const FORMAT: u32 = 3;

/// `"format"` -> the format number, `"cluster"` -> the cluster identity.
pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
/// informer id -> (resource version, seq).
pub(crate) const INFORMERS: TableDefinition<&str, (&str, u64)> = TableDefinition::new("informers");
/// (informer id, seq) -> (object key, object JSON or `None` for a tombstone).
///
/// In change order, not by key: a change appends at the end of its informer's range, and the
/// versions superseded first (the oldest) are deleted first, so a commit rewrites few pages.
pub(crate) type VersionRow<'a> = (&'a str, Option<&'a str>);
/// See [`VersionRow`].
pub(crate) const VERSIONS: TableDefinition<(&str, u64), VersionRow> =
    TableDefinition::new("changes");
/// (informer id, seq) -> the caller's metadata of that version's JSON (opaque here), for the
/// versions it gave some for. A table of its own, not a part of the JSON's row: redb packs
/// rows into 4 KiB pages, and objects of about 2 KB, two to a page alone, would each take a
/// page with their metadata (a state file twice the size).
pub(crate) const VERSION_META: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("change_meta");
/// (plugin id, informer id) -> (seq, resource version handled through, scope).
pub(crate) const CURSORS: TableDefinition<(&str, &str), (u64, Option<u64>, &str)> =
    TableDefinition::new("cursors");
/// (plugin id, id) -> (informer, key, resource version, event, error, attempts, at unix ms).
pub(crate) const DEAD_LETTERS: TableDefinition<(&str, u64), DeadLetterRow> =
    TableDefinition::new("dead_letters");

/// (informer, key, resource version, event, error, attempts, at unix ms).
pub(crate) type DeadLetterRow<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, u32, i64);
/// plugin id -> the next dead letter id, so ids stay monotonic after letters are taken.
pub(crate) const DEAD_LETTER_IDS: TableDefinition<&str, u64> =
    TableDefinition::new("dead_letter_ids");
