use super::*;

#[test]
fn pod_names_that_would_bend_the_path_are_refused() {
    for ok in ["informant-7d9f8-x2x", "a", "a.b", "web-0", "0abc"] {
        assert!(check_pod("demo", ok).is_ok(), "{ok}");
    }
    for bad in [
        "", "../x", "..", ".", "a/b", "a%2Fb", "a?b", "a#b", "A", "a b", "a\n", "-a", "a-", "a..b",
        "a.-b", "é",
    ] {
        assert!(check_pod("demo", bad).is_err(), "{bad:?}");
    }
    assert!(check_pod("demo", &"a".repeat(254)).is_err());

    for bad in ["", "a.b", "../x", "kube_system", &"a".repeat(64)] {
        assert!(check_pod(bad, "web-0").is_err(), "{bad:?}");
    }
}

#[test]
fn addresses_are_host_and_port() {
    for ok in [
        "127.0.0.1:9090",
        "http://localhost:9090/",
        "[::1]:9090",
        "https://127.0.0.1:9443",
        "HTTPS://localhost:9443",
    ] {
        assert!(AdminClient::new(ok).is_ok(), "{ok}");
    }
    for bad in [
        "localhost",
        "user@host:1",
        "http://h:1/path",
        "",
        "ftp://h:1",
        "https://h",
    ] {
        assert!(AdminClient::new(bad).is_err(), "{bad}");
    }
    let plain = AdminClient::from_url("127.0.0.1:1", &Trust::InsecureSkipVerify, None);
    assert!(matches!(plain, Err(ClientError::TlsFlagsWithoutTls { .. })));
    assert!(matches!(
        Trust::from_flags(Some(std::path::Path::new("ca.pem")), true),
        Err(tls::TlsError::Conflict)
    ));
}

#[tokio::test]
async fn a_token_never_goes_in_the_clear_to_another_host() {
    // TEST-NET-1: refused before any connection is tried.
    let client = AdminClient::new("http://192.0.2.1:9090")
        .unwrap()
        .with_credentials(Credentials::token(SECRET, "--token").unwrap());
    let err = client.status().await.unwrap_err();
    assert!(matches!(err, ClientError::Cleartext { .. }), "{err}");
    assert!(!err.to_string().contains(SECRET), "{err}");
}

const SECRET: &str = "tls-test-secret-token";

type Seen = std::sync::Arc<parking_lot::Mutex<Vec<Option<String>>>>;

/// A TLS admin stand-in on loopback, its certificate (for `localhost` and 127.0.0.1) made
/// here: answers `/plugins` with no plugin and keeps each request's `Authorization`.
async fn tls_admin() -> (std::net::SocketAddr, tempfile::TempDir, Seen) {
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), made.cert.pem()).unwrap();
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from(made.cert.der().to_vec())],
        key.into(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, kept) = (acceptor.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let auth = req
                        .headers()
                        .get(http::header::AUTHORIZATION)
                        .map(|v| v.to_str().unwrap_or_default().to_string());
                    kept.lock().push(auth);
                    async {
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(
                                br#"{"plugins":[]}"#,
                            )),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, dir, seen)
}

#[tokio::test]
async fn https_travels_inside_a_pods_port_forward() {
    use informant_devserver::{DevServer, DevServerConfig};
    let (addr, dir, seen) = tls_admin().await;
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    server
        .create(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "informant-0", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1"},
        }))
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let ca = Trust::Ca(dir.path().join("ca.pem"));
    let tls = Tls::new(&ca, "localhost").unwrap();
    let client = AdminClient::pod(
        pods.clone(),
        "default",
        "informant-0",
        addr.port(),
        Some(tls),
    )
    .unwrap()
    .with_credentials(Credentials::token(SECRET, "--token").unwrap());
    assert!(client.status().await.unwrap().is_empty());
    assert_eq!(
        seen.lock().pop().flatten(),
        Some(format!("Bearer {SECRET}"))
    );
    // The certificate is checked inside the tunnel too.
    let tls = Tls::new(&Trust::Platform, "localhost").unwrap();
    let client = AdminClient::pod(pods, "default", "informant-0", addr.port(), Some(tls))
        .unwrap()
        .with_credentials(Credentials::token(SECRET, "--token").unwrap());
    let err = client.status().await.unwrap_err();
    assert!(matches!(err, ClientError::Tls { .. }), "{err}");
    assert!(seen.lock().is_empty());
}

#[tokio::test]
async fn https_is_verified_as_asked_and_the_token_sent_only_inside_it() {
    let (addr, dir, seen) = tls_admin().await;
    let url = format!("https://{addr}");
    let ca = Trust::Ca(dir.path().join("ca.pem"));
    let token = || Credentials::token(SECRET, "--token").unwrap();
    for (trust, name) in [
        (&ca, None),
        (&ca, Some("localhost")),
        (&Trust::InsecureSkipVerify, None),
    ] {
        let client = AdminClient::from_url(&url, trust, name)
            .unwrap()
            .with_credentials(token());
        assert!(client.status().await.unwrap().is_empty());
        assert_eq!(
            seen.lock().pop().flatten(),
            Some(format!("Bearer {SECRET}")),
            "{trust:?} {name:?}"
        );
    }
    // Not trusted, or not the name the certificate carries: refused at the handshake,
    // before any request (and its token) is sent.
    for (trust, name) in [(&Trust::Platform, None), (&ca, Some("elsewhere.example"))] {
        let client = AdminClient::from_url(&url, trust, name)
            .unwrap()
            .with_credentials(token());
        let err = client.status().await.unwrap_err();
        assert!(matches!(err, ClientError::Tls { .. }), "{err}");
        assert!(
            err.to_string().contains("--insecure-skip-tls-verify"),
            "{err}"
        );
    }
    assert!(seen.lock().is_empty());

    // A plain HTTP server behind an https:// address sees a handshake, never the token.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain_addr = plain.local_addr().unwrap();
    let received = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut conn, _) = plain.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = conn.read(&mut buf).await.unwrap();
        let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        buf.truncate(n);
        buf
    });
    let client = AdminClient::from_url(&format!("https://{plain_addr}"), &ca, None)
        .unwrap()
        .with_credentials(token());
    let err = client.status().await.unwrap_err();
    assert!(matches!(err, ClientError::Tls { .. }), "{err}");
    let got = received.await.unwrap();
    assert!(!got.is_empty());
    assert!(!String::from_utf8_lossy(&got).contains(SECRET));
}

#[test]
fn log_lines_show_on_one_line() {
    let l: LogLine = serde_json::from_str(
        r#"{"seq":3,"time":"2026-11-27T09:00:00Z","level":"info","message":"a\nb\u001b[2J"}"#,
    )
    .unwrap();
    assert_eq!(l.display(), "2026-11-27T09:00:00Z info  a\\nb\\u{1b}[2J");
    let d: LogLine = serde_json::from_str(r#"{"dropped":7}"#).unwrap();
    assert_eq!(d, LogLine::Dropped { dropped: 7 });
}
