//! The manifest's error types: [`ManifestError`] for a manifest that cannot be loaded, and the
//! errors of the validated text fields.

use std::path::PathBuf;

use crate::{admit, config_ref, jq, schedule, toml_error, wildcard, write};

/// A manifest that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("manifest `{path}`: {source}")]
    Io {
        /// The manifest file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed or a field's value is invalid; the message names field, line and
    /// column.
    #[error("manifest `{path}`: {source}")]
    Toml {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, where.
        #[source]
        source: toml_error::TomlError,
    },
    /// A wildcard watch's `kind`, `api-version` and `exclude` do not make sense together.
    #[error("manifest `{path}`: {source}")]
    Wildcard {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, in which field (boxed, as are the other rare variants' sources, so
        /// every manifest error stays small).
        #[source]
        source: Box<wildcard::WildcardError>,
    },
    /// A `[[write]]` table is invalid.
    #[error("manifest `{path}`: field `write[{index}].{}`: {source}", source.field())]
    Write {
        /// The manifest file.
        path: PathBuf,
        /// The table's position.
        index: usize,
        /// What is wrong.
        #[source]
        source: Box<write::WriteTableError>,
    },
    /// A `[[schedule]]` table is invalid (its values are checked while deserializing: those
    /// errors are [`ManifestError::Toml`]).
    #[error("manifest `{path}`: field `schedule[{index}].{}`: {source}", source.field())]
    Schedule {
        /// The manifest file.
        path: PathBuf,
        /// The table's position.
        index: usize,
        /// What is wrong.
        #[source]
        source: Box<schedule::ScheduleTableError>,
    },
    /// An `[[admit]]` table is invalid (its values are checked while deserializing: those
    /// errors are [`ManifestError::Toml`]).
    #[error("manifest `{path}`: field `admit[{index}].{}`: {source}", source.field())]
    Admit {
        /// The manifest file.
        path: PathBuf,
        /// The table's position.
        index: usize,
        /// What is wrong.
        #[source]
        source: Box<admit::AdmitTableError>,
    },
    /// A `[config]` string is neither a literal nor a reference.
    #[error("manifest `{path}`: field `{field}`: {source}")]
    ConfigRef {
        /// The manifest file.
        path: PathBuf,
        /// The string's field (`config.slack.url`).
        field: String,
        /// What is wrong.
        #[source]
        source: Box<config_ref::ConfigRefError>,
    },
    /// A field is invalid; the message names the field.
    #[error("manifest `{path}`: {message}")]
    Invalid {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, where.
        message: String,
    },
}

/// Text that is not an `apiVersion`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid api-version `{0}` (expected GROUP/VERSION, or VERSION for core; for a wildcard watch `*` or GROUP/*)"
)]
pub struct ApiVersionError(pub String);

/// Text that is not a field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid field path `{text}`: {source}")]
pub struct FieldPathTextError {
    /// The path as written.
    pub text: String,
    /// Why it is not one.
    #[source]
    pub source: informant_apimachinery::FieldPathError,
}

/// A change filter refused at load.
#[derive(Debug, thiserror::Error)]
#[error("invalid jq filter: {0}")]
pub struct JqFilterTextError(#[source] pub jq::JqError);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every caller's error that wraps a manifest error pays for its size.
    #[test]
    fn a_manifest_error_stays_small() {
        assert!(std::mem::size_of::<ManifestError>() <= 64);
    }
}
