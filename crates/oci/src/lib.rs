//! Plugins as OCI artifacts, in the CNCF TAG-Runtime wasm layout: a config of media type
//! `application/vnd.wasm.config.v0+json` and one `application/wasm` layer, the plugin's manifest
//! (`NAME.toml`) carried in the image manifest's annotations.
//!
//! - [`layout`]: the media types, the config, the annotations and what a pulled artifact must
//!   hold (one wasm layer; the legacy `application/vnd.wasm.content.layer.v1+wasm` that
//!   Kubewarden and Spin push is read too).
//! - [`cache`]: pulled layers kept by digest, checked whenever they are read.
//! - [`credentials`]: registry logins from a `dockerconfigjson` (a Docker `config.json`, or the
//!   data of a `kubernetes.io/dockerconfigjson` Secret).
//! - [`files`]: a pulled plugin written whole into a plugins directory.
//! - [`registry`]: pushing and pulling over the distribution protocol (`oci-client`), pinned by
//!   digest, with size limits, timeouts, custom CAs and plain HTTP only where allowed.
//! - [`mirror`]: where a registry's artifacts are read from first (air gaps, proxies).
//! - [`signature`]: cosign signatures, made and verified under a trust policy of public keys.

pub mod cache;
pub mod credentials;
mod digest;
pub mod files;
pub mod layout;
pub mod mirror;
pub mod registry;
pub mod signature;

pub use oci_client::{ParseError, Reference};
pub use registry::{Artifact, Error, Options, Pushed, Registry};
