//! A cached object's extracted metadata in a compact binary form ("frozen"), stored beside its
//! JSON by a persisted cache, so a restore builds the object without parsing the JSON.
//!
//! The bytes come from disk and are read as hostile: [`Frozen::read`] checks every length, that
//! every field is UTF-8, that the four metadata fields are there and every label has its value,
//! in key order; anything else is `None` and the caller parses the JSON instead. What the bytes
//! cannot prove is that they describe the JSON beside them: they are trusted to, as they were
//! written with it, in the same commit.
//!
//! # Layout (version [`FROZEN_VERSION`])
//!
//! ```text
//! | version: u8 | flags: u8 | metadata length: u32 LE | metadata | owners: u32 LE | uids |
//! ```
//!
//! `metadata` is [`CachedObject::metadata_fields`] as it is ([`informant_header::Metadata`]);
//! each owner uid is one field of the same kind (a `u32 LE` length, then UTF-8), and they end
//! the bytes: a cut anywhere, or anything after them, is refused.

use informant_header::METADATA_FIXED_FIELDS;

use super::{CachedObject, ObjectKey};

/// The layout written; bytes with another version are not read (the JSON is parsed instead).
pub const FROZEN_VERSION: u8 = 1;

/// The JSON still carries `metadata.managedFields`.
pub(super) const MANAGED_FIELDS: u8 = 1;
/// The JSON has `apiVersion` and `kind`.
pub(super) const TYPED: u8 = 1 << 1;
const KNOWN_FLAGS: u8 = MANAGED_FIELDS | TYPED;

/// Bytes besides the metadata and the uids: version, flags, the metadata's length, the owners.
const FRAMING: usize = 2 + 4 + 4;

/// One stored version of an object as a persisted cache hands it back: its JSON and the frozen
/// metadata written with it ([`CachedObject::frozen`]; empty when there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    json: Box<str>,
    frozen: Box<[u8]>,
}

impl StoredObject {
    /// A stored version: its JSON and the frozen metadata stored beside it (may be empty).
    pub fn new(json: impl Into<Box<str>>, frozen: impl Into<Box<[u8]>>) -> Self {
        StoredObject {
            json: json.into(),
            frozen: frozen.into(),
        }
    }

    /// The JSON.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The frozen metadata (empty: none was stored).
    pub fn frozen(&self) -> &[u8] {
        &self.frozen
    }

    pub(crate) fn into_parts(self) -> (Box<str>, Box<[u8]>) {
        (self.json, self.frozen)
    }
}

/// JSON alone: the restore parses it.
impl From<Box<str>> for StoredObject {
    fn from(json: Box<str>) -> Self {
        StoredObject::new(json, Box::<[u8]>::default())
    }
}

/// JSON alone: the restore parses it.
impl From<String> for StoredObject {
    fn from(json: String) -> Self {
        json.into_boxed_str().into()
    }
}

/// JSON alone: the restore parses it.
impl From<&str> for StoredObject {
    fn from(json: &str) -> Self {
        Box::<str>::from(json).into()
    }
}

/// Frozen bytes that read as well formed, borrowed from them.
pub(crate) struct Frozen<'a> {
    flags: u8,
    fields: &'a [u8],
    label_count: u32,
    owners: &'a [u8],
    namespace: &'a str,
    name: &'a str,
}

impl<'a> Frozen<'a> {
    /// Checks `bytes` as frozen metadata; `None` when they are not exactly that.
    pub(crate) fn read(bytes: &'a [u8]) -> Option<Self> {
        let (&[version, flags], rest) = bytes.split_first_chunk::<2>()?;
        if version != FROZEN_VERSION || flags & !KNOWN_FLAGS != 0 {
            return None;
        }
        let (len, rest) = rest.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
        let fields = rest.get(..len)?;
        let (count, owners) = rest[len..].split_first_chunk::<4>()?;
        let mut texts = informant_header::fields(fields);
        let mut fixed = [""; METADATA_FIXED_FIELDS];
        for slot in &mut fixed {
            *slot = texts.next()?.ok()?;
        }
        let mut label_count = 0u32;
        let mut last_key: Option<&str> = None;
        while let Some(key) = texts.next() {
            let key = key.ok()?;
            texts.next()?.ok()?;
            // Keys are unique and sorted, as the header promises a plugin.
            if last_key.is_some_and(|last| last >= key) {
                return None;
            }
            last_key = Some(key);
            label_count = label_count.checked_add(1)?;
        }
        let mut found = 0u32;
        for uid in informant_header::fields(owners) {
            uid.ok()?;
            found = found.checked_add(1)?;
        }
        if found != u32::from_le_bytes(*count) {
            return None;
        }
        let [namespace, name, ..] = fixed;
        Some(Frozen {
            flags,
            fields,
            label_count,
            owners,
            namespace,
            name,
        })
    }

    /// `metadata.namespace`, if namespaced.
    pub(crate) fn namespace(&self) -> Option<&'a str> {
        Some(self.namespace).filter(|ns| !ns.is_empty())
    }

    /// `metadata.name`.
    pub(crate) fn name(&self) -> &'a str {
        self.name
    }

    /// Whether the JSON is in the form a store with `strip_managed_fields` caches (what
    /// [`CachedObject::from_stored`] would keep as it is), so it can be used without a look.
    pub(crate) fn cached_form(&self, strip_managed_fields: bool) -> bool {
        self.flags & TYPED != 0 && !(strip_managed_fields && self.flags & MANAGED_FIELDS != 0)
    }

    /// The cached object of `json`, which these bytes were frozen from.
    pub(crate) fn object(&self, json: Box<str>) -> CachedObject {
        let owner_uids = informant_header::fields(self.owners)
            .map(|o| Box::from(o.unwrap_or_default()))
            .collect();
        CachedObject {
            key: ObjectKey::new(self.namespace(), self.name),
            fields: self.fields.into(),
            label_count: self.label_count,
            owner_uids,
            flags: self.flags,
            json,
        }
    }
}

impl CachedObject {
    /// The metadata extracted from the JSON, frozen (see the layout in this module): stored
    /// beside the JSON, it lets [`CachedObject::from_frozen`] rebuild this object unparsed.
    pub fn frozen(&self) -> Vec<u8> {
        let owners: usize = self.owner_uids.iter().map(|o| 4 + o.len()).sum();
        let mut out = Vec::with_capacity(FRAMING + self.fields.len() + owners);
        out.push(FROZEN_VERSION);
        out.push(self.flags);
        // Lengths past u32 (never, for metadata) are written as u32::MAX: unreadable, so the
        // restore parses the JSON instead.
        let len = u32::try_from(self.fields.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.fields);
        let count = u32::try_from(self.owner_uids.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&count.to_le_bytes());
        for uid in &self.owner_uids {
            let len = u32::try_from(uid.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(uid.as_bytes());
        }
        out
    }

    /// The object `json` was when [`CachedObject::frozen`] gave `frozen`, without parsing the
    /// JSON; `None` when the bytes are not well-formed frozen metadata.
    pub fn from_frozen(frozen: &[u8], json: Box<str>) -> Option<CachedObject> {
        Some(Frozen::read(frozen)?.object(json))
    }
}

#[cfg(test)]
mod tests;
