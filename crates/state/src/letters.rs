//! Dead letters: kept per plugin for an operator, bounded per plugin and per tenant, and
//! dropped with their plugin.
//!
//! A plugin id is `TENANT/NAME`, or `NAME` for the operator's own plugins (the top-level
//! tenant, `""`): the tenant is what comes before the first `/` ([`tenant_of`]). Past
//! [`MAX_DEAD_LETTERS_PER_PLUGIN`] a plugin's oldest letter is dropped; past
//! [`MAX_DEAD_LETTERS_PER_TENANT`] the tenant's oldest (the earliest given up on, among its
//! plugins' oldest ones), whichever plugin it is of, so one tenant's many plugins cannot hold
//! more than its share. [`crate::StateWriter::drop_dead_letters`] drops all of a plugin's, for a
//! plugin removed from the plugins directory. Every letter dropped is counted
//! ([`crate::JournalStats::dead_letters_dropped`]).
//!
//! Bounding a tenant reads no table: [`LetterCounts`] keeps how many letters each plugin holds,
//! read once when the state opens and kept by whoever writes the table. A writer takes the
//! counts' lock only while it holds redb's write transaction, so the counts change in the
//! order of the commits.

use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable};

use crate::tables::{DEAD_LETTERS, DeadLetterRow};

/// An event a plugin failed to handle for good, kept for an operator to retry or drop: one
/// shape from the plugin's handler that gives up on it to the admin server that shows it (as
/// JSON, `at` in RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeadLetter {
    /// Assigned by the journal's writer, increasing per plugin (ignored when sent).
    pub id: u64,
    /// The plugin id.
    pub plugin: String,
    /// The informer id the event came from.
    pub informer: String,
    /// The object key.
    pub key: String,
    /// The object's resource version.
    pub resource_version: String,
    /// `"added"`, `"updated"` or `"deleted"`.
    pub event: String,
    /// The plugin's last error.
    pub error: String,
    /// How many times delivery was tried.
    pub attempts: u32,
    /// When it was given up on, in milliseconds since the Unix epoch.
    #[serde(rename = "at", with = "rfc3339")]
    pub at_unix_ms: i64,
}

/// Milliseconds since the Unix epoch as an RFC 3339 time, in JSON.
mod rfc3339 {
    use serde::{Deserialize, Deserializer, Serializer, de};

    pub(super) fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        let at = jiff::Timestamp::from_millisecond(*ms).map_err(serde::ser::Error::custom)?;
        s.collect_str(&at)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        let text = String::deserialize(d)?;
        let at: jiff::Timestamp = text.parse().map_err(de::Error::custom)?;
        Ok(at.as_millisecond())
    }
}

/// A dead letter as its table row holds it.
pub(crate) fn letter(
    (plugin, id): (&str, u64),
    (informer, key, rv, event, error, attempts, at): DeadLetterRow<'_>,
) -> DeadLetter {
    DeadLetter {
        id,
        plugin: plugin.to_owned(),
        informer: informer.to_owned(),
        key: key.to_owned(),
        resource_version: rv.to_owned(),
        event: event.to_owned(),
        error: error.to_owned(),
        attempts,
        at_unix_ms: at,
    }
}

/// The most dead letters kept per plugin; its oldest are dropped (and counted) past it.
pub const MAX_DEAD_LETTERS_PER_PLUGIN: usize = 1000;

/// The most dead letters kept per tenant, all its plugins together; its oldest are dropped
/// (and counted) past it.
pub const MAX_DEAD_LETTERS_PER_TENANT: usize = 5000;

/// The tenant of plugin id `plugin`: what comes before the first `/`, or `""` (the operator's).
pub fn tenant_of(plugin: &str) -> &str {
    plugin.split_once('/').map_or("", |(tenant, _)| tenant)
}

/// How many dead letters each plugin holds, by tenant.
#[derive(Debug, Default)]
pub(crate) struct LetterCounts {
    by_tenant: BTreeMap<String, BTreeMap<String, usize>>,
}

impl LetterCounts {
    /// Counts the letters stored in `db` (keys only).
    pub(crate) fn read(db: &redb::Database) -> Result<Self, redb::Error> {
        let txn = db.begin_read()?;
        let mut counts = LetterCounts::default();
        for row in txn.open_table(DEAD_LETTERS)?.iter()? {
            let (k, _) = row?;
            counts.add(k.value().0, 1);
        }
        Ok(counts)
    }

    /// Every plugin's count, by plugin id.
    pub(crate) fn by_plugin(&self) -> BTreeMap<String, u64> {
        self.by_tenant
            .values()
            .flatten()
            .map(|(plugin, n)| (plugin.clone(), *n as u64))
            .collect()
    }

    fn tenant_total(&self, tenant: &str) -> usize {
        self.by_tenant.get(tenant).map_or(0, |p| p.values().sum())
    }

    fn plugin(&self, plugin: &str) -> usize {
        self.by_tenant
            .get(tenant_of(plugin))
            .and_then(|p| p.get(plugin))
            .copied()
            .unwrap_or(0)
    }

    fn add(&mut self, plugin: &str, n: usize) {
        let plugins = self
            .by_tenant
            .entry(tenant_of(plugin).to_owned())
            .or_default();
        match plugins.get_mut(plugin) {
            Some(count) => *count += n,
            None => {
                plugins.insert(plugin.to_owned(), n);
            }
        }
    }

    /// Takes `n` off `plugin`'s count (letters taken or dropped).
    pub(crate) fn remove(&mut self, plugin: &str, n: usize) {
        let tenant = tenant_of(plugin);
        let Some(plugins) = self.by_tenant.get_mut(tenant) else {
            return;
        };
        if let Some(count) = plugins.get_mut(plugin) {
            *count = count.saturating_sub(n);
            if *count == 0 {
                plugins.remove(plugin);
            }
        }
        if plugins.is_empty() {
            self.by_tenant.remove(tenant);
        }
    }
}

/// Stores `l` under its plugin's next id and drops the oldest past the bounds; returns how
/// many were dropped.
pub(crate) fn store(
    counts: &mut LetterCounts,
    l: &DeadLetter,
    letters: &mut redb::Table<(&str, u64), DeadLetterRow>,
    letter_ids: &mut redb::Table<&str, u64>,
) -> Result<u64, redb::Error> {
    let plugin = l.plugin.as_str();
    let id = letter_ids.get(plugin)?.map(|g| g.value()).unwrap_or(1);
    letter_ids.insert(plugin, id + 1)?;
    letters.insert(
        (plugin, id),
        (
            l.informer.as_str(),
            l.key.as_str(),
            l.resource_version.as_str(),
            l.event.as_str(),
            l.error.as_str(),
            l.attempts,
            l.at_unix_ms,
        ),
    )?;
    counts.add(plugin, 1);
    let mut dropped = 0;
    while counts.plugin(plugin) > MAX_DEAD_LETTERS_PER_PLUGIN {
        if !drop_oldest_of(counts, plugin, letters)? {
            break;
        }
        dropped += 1;
    }
    let tenant = tenant_of(plugin);
    while counts.tenant_total(tenant) > MAX_DEAD_LETTERS_PER_TENANT {
        let plugins: Vec<String> = counts
            .by_tenant
            .get(tenant)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        // The earliest given up on among each plugin's oldest (its lowest id).
        let mut oldest: Option<(i64, String)> = None;
        for p in plugins {
            let first = letters
                .range((p.as_str(), 0)..=(p.as_str(), u64::MAX))?
                .next();
            if let Some(row) = first {
                let at = row?.1.value().6;
                if oldest.as_ref().is_none_or(|(o, _)| at < *o) {
                    oldest = Some((at, p));
                }
            }
        }
        let Some((_, victim)) = oldest else { break };
        if !drop_oldest_of(counts, &victim, letters)? {
            break;
        }
        dropped += 1;
    }
    Ok(dropped)
}

/// Removes `plugin`'s oldest letter; `false` if it has none (its count was stale: corrected).
fn drop_oldest_of(
    counts: &mut LetterCounts,
    plugin: &str,
    letters: &mut redb::Table<(&str, u64), DeadLetterRow>,
) -> Result<bool, redb::Error> {
    let first = letters
        .range((plugin, 0)..=(plugin, u64::MAX))?
        .next()
        .transpose()?
        .map(|(k, _)| k.value().1);
    match first {
        Some(id) => {
            letters.remove((plugin, id))?;
            counts.remove(plugin, 1);
            Ok(true)
        }
        None => {
            counts.remove(plugin, usize::MAX);
            Ok(false)
        }
    }
}

/// Removes every letter of `plugin`, and its id counter; returns how many letters.
pub(crate) fn drop_all(
    counts: &mut LetterCounts,
    plugin: &str,
    letters: &mut redb::Table<(&str, u64), DeadLetterRow>,
    letter_ids: &mut redb::Table<&str, u64>,
) -> Result<u64, redb::Error> {
    let ids: Vec<u64> = letters
        .range((plugin, 0)..=(plugin, u64::MAX))?
        .map(|row| row.map(|(k, _)| k.value().1))
        .collect::<Result<_, _>>()?;
    for id in &ids {
        letters.remove((plugin, *id))?;
    }
    letter_ids.remove(plugin)?;
    counts.remove(plugin, usize::MAX);
    Ok(ids.len() as u64)
}
