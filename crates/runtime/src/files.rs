//! Bounded, non-blocking reads of files someone else may control: the plugins directory,
//! secret files, CA bundles.

use std::path::Path;

/// Reads `file` (whose metadata is `opened`) if it holds at most `max` bytes; otherwise its
/// length. The length is the file's claim (a sparse file claims anything): it is never allocated
/// by, and reading stops one byte past `max` in case the file grows meanwhile.
pub(crate) fn read_capped(
    file: &mut std::fs::File,
    opened: &std::fs::Metadata,
    max: u64,
) -> std::io::Result<Result<Vec<u8>, u64>> {
    if opened.len() > max {
        return Ok(Err(opened.len()));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, max + 1), &mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(Err(bytes.len() as u64));
    }
    Ok(Ok(bytes))
}

/// Default largest `.wasm` the loader reads: components are a few MiB; anything far larger is
/// a mistake or an attack on the host's memory.
pub(crate) const MAX_PLUGIN_FILE_BYTES: u64 = 128 << 20;

/// Opens for reading without blocking on a FIFO swapped in for a plugin file (a tenant must not
/// be able to hang every reconcile); for regular files the flag changes nothing.
pub(crate) fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    options.open(path)
}

#[cfg(unix)]
pub(crate) fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
pub(crate) fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

/// The uids owning `file` and `dir`; `None` where files have no owner (every file is then
/// treated as its directory's).
#[cfg(unix)]
pub(crate) fn owners(file: &std::fs::Metadata, dir: &std::fs::Metadata) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    Some((file.uid(), dir.uid()))
}

#[cfg(not(unix))]
pub(crate) fn owners(_: &std::fs::Metadata, _: &std::fs::Metadata) -> Option<(u32, u32)> {
    None
}

/// The uid owning a file; `None` where files have no owner.
#[cfg(unix)]
pub(crate) fn owner(m: &std::fs::Metadata) -> Option<u32> {
    Some(std::os::unix::fs::MetadataExt::uid(m))
}

#[cfg(not(unix))]
pub(crate) fn owner(_: &std::fs::Metadata) -> Option<u32> {
    None
}

#[cfg(unix)]
pub(crate) fn hard_links(m: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(m)
}

#[cfg(not(unix))]
pub(crate) fn hard_links(_: &std::fs::Metadata) -> u64 {
    1
}

/// Largest CA bundle read: bundles are a few hundred KiB.
pub(crate) const MAX_CA_BYTES: u64 = 4 << 20;

/// Why a CA bundle cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// It could not be opened or read.
    #[error(transparent)]
    Read(#[from] std::io::Error),
    /// It is larger than any CA bundle.
    #[error("{len} bytes, more than a CA bundle ({MAX_CA_BYTES} at most)")]
    TooLarge {
        /// Its size.
        len: u64,
    },
    /// It is not PEM.
    #[error("not PEM: {0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    /// It holds no certificate.
    #[error("no `BEGIN CERTIFICATE` block in it")]
    Empty,
    /// A certificate in it cannot be a trust anchor.
    #[error("a certificate in it cannot be trusted: {0}")]
    Unusable(#[source] rustls::Error),
}

/// The PEM certificates of the CA bundle at `path` (at least one, at most [`MAX_CA_BYTES`]).
pub(crate) fn ca_certificates(
    path: &Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, CaError> {
    use rustls::pki_types::pem::PemObject;
    let mut file = std::fs::File::open(path)?;
    let opened = file.metadata()?;
    let bytes =
        read_capped(&mut file, &opened, MAX_CA_BYTES)?.map_err(|len| CaError::TooLarge { len })?;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(CaError::Pem)?;
    if certs.is_empty() {
        return Err(CaError::Empty);
    }
    Ok(certs)
}
