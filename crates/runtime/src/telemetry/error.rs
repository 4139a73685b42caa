//! Why traces could not be turned on: one error for the configuration, the client and the
//! exporter, below all three.

/// Why traces could not be turned on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is not an absolute `http://` or `https://` URL.
    #[error("OTLP endpoint `{endpoint}`: {reason}")]
    Endpoint {
        /// The endpoint, credentials hidden.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A header to send with exports is malformed.
    #[error("OTLP header{} from {from}: {reason}", if .name.is_empty() { String::new() } else { format!(" `{}`", .name) })]
    Header {
        /// The flag or environment variable it came from.
        from: String,
        /// Its name, when it is a valid one (never its value).
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The CA certificates file cannot be used.
    #[error("OTLP CA certificates `{path}`: {source}")]
    Certificates {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: crate::files::CaError,
    },
    /// The sampler is not one the host has, or its ratio is not from 0 to 1.
    #[error("trace sampler from {from}: {reason}")]
    Sampler {
        /// The flag or environment variable.
        from: String,
        /// What is wrong.
        reason: String,
    },
    /// TLS could not be set up (e.g. no CA certificates at all for an `https://` endpoint).
    #[error("OTLP endpoint: setting up TLS")]
    Tls(#[source] rustls::Error),
    /// The HTTP client could not be built.
    #[error("OTLP endpoint: building the HTTP client")]
    Client(#[source] reqwest::Error),
    /// The OTLP exporter could not be built.
    #[error("OTLP endpoint `{endpoint}`: building the exporter")]
    Build {
        /// The endpoint, credentials hidden.
        endpoint: String,
        /// Why.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// The exporter thread could not be started.
    #[error("starting the trace exporter thread")]
    Thread(#[source] std::io::Error),
    /// This process already exports traces.
    #[error("traces are already being exported by this process")]
    AlreadyInstalled,
}
