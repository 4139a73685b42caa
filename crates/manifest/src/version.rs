//! `manifest-version`: the format version of a plugin manifest and of `informant.toml`.
//!
//! Both files carry it so that a later release can change their shape and still tell an old
//! file from a new one. This release reads version 1, which is also what a file without the
//! key means; any other value is refused, naming the field and the version this release reads.

use serde::Deserialize;

/// The format version this release reads.
pub const CURRENT: i64 = 1;

/// A file's `manifest-version`: the integer 1, or absent (which means 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FormatVersion;

impl<'de> Deserialize<'de> for FormatVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = FormatVersion;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "the integer {CURRENT}")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FormatVersion, E> {
                if v == CURRENT {
                    Ok(FormatVersion)
                } else {
                    Err(E::custom(format!(
                        "version {v} is not one this Informant reads: it reads \
                         `manifest-version = {CURRENT}` (a file for another release, or a typo)"
                    )))
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FormatVersion, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FormatVersion, E> {
                Err(E::custom(format!(
                    "must be the integer {CURRENT}, not the string {v:?}"
                )))
            }
        }
        d.deserialize_any(Visitor)
    }
}
