//! SHA-256 digests as the distribution protocol writes them.

use sha2::{Digest, Sha256};

/// `bytes`' SHA-256 in lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `bytes`' digest as a descriptor names it: `sha256:<HEX>`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}
