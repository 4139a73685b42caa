//! The bearer token the client shows an admin server, which checks it with a TokenReview.
//!
//! It is `--token` (or `INFORMANT_TOKEN`) when given, else whatever the kubeconfig's current
//! user authenticates to the API server with, applied by kube's own auth layer
//! ([`ConfigExt::auth_layer`]): a static token, a token file (re-read as it rotates, the
//! in-cluster ServiceAccount token too), an exec credential plugin (`aws eks get-token`,
//! `gke-gcloud-auth-plugin`, `kubelogin`, run when a token is needed and cached until it
//! expires) or an auth provider. A user that authenticates with a client certificate or a
//! password has no bearer token to show; nothing is sent then, and a 401 says why.
//!
//! The token is never printed: not in errors, not in `Debug`, not in logs (the header is
//! marked sensitive, and nothing here logs a request).

use std::sync::Arc;

use http::{HeaderValue, Request, header};
use kube::client::ConfigExt;
use kube::client::middleware::AuthLayer;
use tower::{Layer, ServiceExt};

/// Errors getting a token.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// `--token` is empty or holds characters a header cannot.
    #[error("--token: {reason}")]
    BadToken {
        /// Why (never the token itself).
        reason: &'static str,
    },
    /// The kubeconfig's user could not be turned into credentials (a token file that cannot
    /// be read, an exec plugin's configuration).
    #[error("the kubeconfig's user: {0}")]
    Kubeconfig(#[source] kube::Error),
    /// Getting the token failed when it was needed (an exec plugin that failed, a token file
    /// gone).
    #[error("getting the kubeconfig user's token: {0}")]
    Refresh(#[source] tower::BoxError),
}

/// What a request is authorized with.
#[derive(Clone)]
pub struct Credentials {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// Nothing; why, for the message of a 401.
    None(String),
    /// `Authorization: Bearer ...`, marked sensitive.
    Token(HeaderValue, &'static str),
    /// kube's auth layer for the kubeconfig's user.
    Kubeconfig(Arc<AuthLayer>),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({})", self.describe())
    }
}

impl Credentials {
    /// No token, for `reason` (said when a server asks for one).
    pub fn none(reason: impl Into<String>) -> Credentials {
        Credentials {
            kind: Kind::None(reason.into()),
        }
    }

    /// `token` as given; `source` names where it came from (`--token`, `INFORMANT_TOKEN`).
    pub fn token(token: &str, source: &'static str) -> Result<Credentials, CredentialsError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(CredentialsError::BadToken { reason: "empty" });
        }
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            CredentialsError::BadToken {
                reason: "holds characters an HTTP header cannot (a line break?)",
            }
        })?;
        value.set_sensitive(true);
        Ok(Credentials {
            kind: Kind::Token(value, source),
        })
    }

    /// The bearer token of the kubeconfig's current user, if it has one.
    pub fn from_kubeconfig(config: &kube::Config) -> Result<Credentials, CredentialsError> {
        let user = &config.auth_info;
        let bearer = user.token.is_some()
            || user.token_file.is_some()
            || user.exec.is_some()
            || user.auth_provider.is_some();
        if !bearer {
            let how = if user.client_certificate.is_some() || user.client_certificate_data.is_some()
            {
                "authenticates with a client certificate, which an admin server cannot check"
            } else if user.username.is_some() {
                "authenticates with a password, not a token"
            } else {
                "has no token"
            };
            return Ok(Credentials::none(format!("the kubeconfig's user {how}")));
        }
        match config.auth_layer().map_err(CredentialsError::Kubeconfig)? {
            Some(layer) => Ok(Credentials {
                kind: Kind::Kubeconfig(Arc::new(layer)),
            }),
            None => Ok(Credentials::none("the kubeconfig's user has no token")),
        }
    }

    /// Whether a token is sent.
    pub fn sends_token(&self) -> bool {
        !matches!(self.kind, Kind::None(_))
    }

    /// Where the token comes from, or why there is none: for messages, never the token.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::None(why) => format!("no token ({why})"),
            Kind::Token(_, source) => format!("the token from {source}"),
            Kind::Kubeconfig(_) => "the kubeconfig user's token".to_string(),
        }
    }

    /// `request` with its `Authorization` header, if there is a token.
    pub(crate) async fn authorize<B>(
        &self,
        mut request: Request<B>,
    ) -> Result<Request<B>, CredentialsError>
    where
        B: http_body::Body + Send + 'static,
    {
        match &self.kind {
            Kind::None(_) => Ok(request),
            Kind::Token(value, _) => {
                request
                    .headers_mut()
                    .insert(header::AUTHORIZATION, value.clone());
                Ok(request)
            }
            Kind::Kubeconfig(layer) => {
                // kube's layer decorates the request (refreshing the token if it must) and
                // hands it to this service, which gives it back, to be sent on our own
                // connection; wrapped as a response's body because the layer's services answer
                // `http::Response`s.
                let hand_back = tower::service_fn(|r: Request<B>| async move {
                    // kube's two layers must agree on the error type: its filter's `BoxError`.
                    Ok::<_, tower::BoxError>(http::Response::new(r))
                });
                layer
                    .layer(hand_back)
                    .oneshot(request)
                    .await
                    .map(http::Response::into_body)
                    .map_err(CredentialsError::Refresh)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t-t0ken-value";

    fn config(user: &str) -> kube::Config {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n\
             users:\n- name: u\n  user: {user}\n"
        );
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(kube::Config::from_custom_kubeconfig(
            kc,
            &Default::default(),
        ))
        .unwrap()
    }

    async fn header_of(c: &Credentials) -> Option<HeaderValue> {
        let req = Request::new(http_body_util::Empty::<bytes::Bytes>::new());
        c.authorize(req)
            .await
            .unwrap()
            .headers()
            .get(header::AUTHORIZATION)
            .cloned()
    }

    #[tokio::test]
    async fn a_flag_token_is_sent_as_bearer_and_never_shown() {
        let c = Credentials::token(SECRET, "--token").unwrap();
        let h = header_of(&c).await.unwrap();
        assert_eq!(h, format!("Bearer {SECRET}").as_str());
        assert!(h.is_sensitive());
        assert!(!format!("{c:?} {}", c.describe()).contains(SECRET));
        for bad in ["", "  ", "a\nb"] {
            let e = Credentials::token(bad, "--token").unwrap_err();
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }

    #[tokio::test]
    async fn the_kubeconfig_users_token_and_token_file_are_sent() {
        let c = tokio::task::spawn_blocking(|| {
            Credentials::from_kubeconfig(&config(&format!("{{token: {SECRET}}}"))).unwrap()
        })
        .await
        .unwrap();
        assert!(c.sends_token());
        assert_eq!(
            header_of(&c).await.unwrap(),
            format!("Bearer {SECRET}").as_str()
        );
        assert!(!format!("{c:?}").contains(SECRET));

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, format!("{SECRET}-file")).unwrap();
        let user = format!("{{tokenFile: {}}}", file.display());
        let c = tokio::task::spawn_blocking(move || {
            Credentials::from_kubeconfig(&config(&user)).unwrap()
        })
        .await
        .unwrap();
        assert_eq!(
            header_of(&c).await.unwrap(),
            format!("Bearer {SECRET}-file").as_str()
        );
    }

    #[tokio::test]
    async fn a_certificate_or_password_user_sends_nothing_and_says_why() {
        let c = tokio::task::spawn_blocking(|| {
            Credentials::from_kubeconfig(&config("{username: admin, password: pw}")).unwrap()
        })
        .await
        .unwrap();
        assert!(!c.sends_token());
        assert!(header_of(&c).await.is_none());
        assert!(c.describe().contains("password"), "{}", c.describe());
        let c =
            tokio::task::spawn_blocking(|| Credentials::from_kubeconfig(&config("{}")).unwrap())
                .await
                .unwrap();
        assert!(c.describe().contains("has no token"), "{}", c.describe());
    }
}
