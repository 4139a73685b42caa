//! What the journal stores of an object version, and what reading it back gives.
//!
//! Beside the JSON the state keeps bytes it does not read: the metadata its caller extracted
//! from the JSON (an informer's frozen form), so a restart can rebuild the object without
//! parsing the JSON. Empty when the caller has none.

use std::sync::Arc;

/// An object version the journal stores: its JSON, and the caller's metadata of it.
///
/// The journal holds it until it is written, and asks for the metadata then, on its writer
/// thread: a caller that keeps the object anyway (a cache) hands it over without a copy.
pub trait Stored: Send + Sync {
    /// The object's JSON.
    fn json(&self) -> &str;
    /// The caller's metadata of the JSON, opaque to the state; empty for none.
    fn meta(&self) -> Vec<u8>;
}

/// An object version the journal may hold without copying it (one the caller keeps anyway).
pub type Text = Arc<dyn Stored>;

/// JSON alone, with no metadata.
impl Stored for Box<str> {
    fn json(&self) -> &str {
        self
    }
    fn meta(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// One stored object version as read back: its JSON and the metadata stored beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredVersion {
    /// The object's JSON.
    pub json: Box<str>,
    /// The caller's metadata of the JSON, as it was stored (empty: none).
    pub meta: Box<[u8]>,
}

/// JSON alone, with no metadata.
impl From<&str> for StoredVersion {
    fn from(json: &str) -> Self {
        StoredVersion {
            json: json.into(),
            meta: Box::default(),
        }
    }
}

/// JSON alone, with no metadata.
impl From<String> for StoredVersion {
    fn from(json: String) -> Self {
        StoredVersion {
            json: json.into(),
            meta: Box::default(),
        }
    }
}
