//! The state directory's files: the state file's name, and how a file of the directory is
//! opened. Below the directory and its lock, which both open files this way.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{Result, StateError};
use crate::private::{self, Access, Secret};

/// The file name of the state inside the state directory.
pub const FILE_NAME: &str = "state.redb";

/// Opens (creating it 0600 if missing) a file of the state directory, checked private.
pub(crate) fn create(path: &Path) -> Result<File> {
    private::open_file(path, Access::Create, Secret::Yes)
        .map_err(unsafe_at(path))?
        .ok_or_else(|| StateError::File {
            path: path.to_path_buf(),
            action: "create it",
            source: io::ErrorKind::NotFound.into(),
        })
}

/// Maps a private-file refusal of `path` to the state's error.
pub(crate) fn unsafe_at(path: &Path) -> impl FnOnce(private::PrivateError) -> StateError {
    let path = path.to_path_buf();
    move |source| StateError::Unsafe { path, source }
}
