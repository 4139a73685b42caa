//! Why a webhook call failed, or its answer did not count: below the call and the review,
//! which both return them.

/// Why a webhook could not be called, or answered with something that is no admission
/// decision; worded as kube-apiserver words the reason after `failed calling webhook "NAME": `.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The webhook names a Service, which this server cannot resolve.
    #[error(
        "failed to call webhook: clientConfig.service {namespace}/{name}: the embedded API server cannot resolve services; give the webhook a clientConfig.url"
    )]
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
    },
    /// `clientConfig` names neither a URL nor a Service.
    #[error("failed to call webhook: clientConfig names neither a url nor a service")]
    NoClient,
    /// The URL is not an `https://` URL with a host.
    #[error("failed to call webhook: clientConfig.url {url:?}: {why}")]
    Url {
        /// The URL as configured.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// No `caBundle`: nothing to trust.
    #[error(
        "failed to call webhook: clientConfig.caBundle is empty: the embedded API server trusts only a webhook's caBundle, never the system's roots"
    )]
    NoCaBundle,
    /// The `caBundle` holds no usable PEM certificate.
    #[error("failed to call webhook: clientConfig.caBundle: {why}")]
    CaBundle {
        /// What is wrong with it.
        why: String,
    },
    /// The POST itself failed (connect, TLS, HTTP, timeout).
    #[error("failed to call webhook: Post \"{url}\": {source}")]
    Post {
        /// The URL called, with its `timeout` parameter.
        url: String,
        /// What failed.
        #[source]
        source: PostError,
    },
    /// The webhook answered with a status other than 200.
    #[error("failed to call webhook: the server responded with the status code {code}: {body:?}")]
    Status {
        /// The HTTP status.
        code: u16,
        /// The start of the body.
        body: String,
    },
    /// The response body is not an AdmissionReview.
    #[error("failed to call webhook: the response is not an AdmissionReview: {source}")]
    Decode {
        /// Why it does not decode.
        #[source]
        source: serde_json::Error,
    },
    /// The AdmissionReview's response breaks the protocol (wrong uid, a patch from a
    /// validating webhook, ...).
    #[error("received invalid webhook response: {0}")]
    Invalid(#[from] InvalidResponse),
    /// A mutating webhook's `patchType` is not `JSONPatch`.
    #[error("unsupported patch type {0:?}")]
    PatchType(String),
    /// The webhook accepts no AdmissionReview version this server sends (v1).
    #[error(
        "could not create admission objects: webhook does not accept known AdmissionReview versions"
    )]
    Versions,
    /// The request could not be encoded.
    #[error("could not create admission objects: {source}")]
    Encode {
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// What failed while posting to the webhook.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// No TCP connection.
    #[error("dial tcp {addr}: connect: {}", go_words(source))]
    Dial {
        /// `host:port`.
        addr: String,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed (certificate not trusted, wrong name, ...).
    #[error("tls: {source}")]
    Tls {
        /// The handshake's error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("{source}")]
    Http {
        /// hyper's error.
        #[source]
        source: hyper::Error,
    },
    /// The response body could not be read whole (too large, or cut off).
    #[error("reading the response: {source}")]
    Body {
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The connection closed before a response arrived.
    #[error("EOF")]
    Closed,
    /// `timeoutSeconds` passed.
    #[error("context deadline exceeded")]
    Timeout,
}

/// An io error as Go's net package words the common ones.
fn go_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::ConnectionReset => "connection reset by peer".into(),
        _ => e.to_string(),
    }
}

/// How an AdmissionReview response breaks the protocol, in kube-apiserver's words.
#[derive(Debug, thiserror::Error)]
pub enum InvalidResponse {
    /// No `response` in the review.
    #[error("webhook response was absent")]
    Absent,
    /// The response answers another request.
    #[error("expected response.uid={expected:?}, got {got:?}")]
    Uid {
        /// The request's uid.
        expected: String,
        /// The response's.
        got: String,
    },
    /// Not an `admission.k8s.io/v1` `AdmissionReview`.
    #[error("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}")]
    Type {
        /// `apiVersion, Kind=kind` as received.
        got: String,
    },
    /// A patch without its type.
    #[error("webhook returned response.patch but not response.patchType")]
    PatchWithoutType,
    /// A patch type without a patch.
    #[error("webhook returned response.patchType but not response.patch")]
    TypeWithoutPatch,
    /// A validating webhook tried to change the object.
    #[error("validating webhook may not return response.patch")]
    ValidatingPatch,
    /// A validating webhook named a patch type.
    #[error("validating webhook may not return response.patchType")]
    ValidatingPatchType,
    /// `patch` is text that is not base64.
    #[error("response.patch is not base64: {source}")]
    Base64 {
        /// The decoder's error.
        #[source]
        source: base64::DecodeError,
    },
}
