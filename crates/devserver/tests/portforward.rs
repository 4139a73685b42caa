//! Pod port-forward as kube-rs' `Api::portforward` speaks it: bytes reach a listener on the
//! pod's `status.podIP` and come back; a port nothing listens on is an error on the port's
//! error channel and the end of the stream, never a hang; RBAC's `create` on `pods/portforward`
//! is required; a pod IP off loopback and odd path spellings are refused.

use std::time::Duration;

use informant_devserver::audit::AllowRule;
use informant_devserver::{DevServer, DevServerConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::timeout;

const GUARD: Duration = Duration::from_secs(20);

async fn server_with_pod(ip: &str) -> DevServer {
    let srv = DevServer::start(DevServerConfig::default()).await.unwrap();
    srv.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}))
        .unwrap();
    srv.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "demo"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "podIP": ip},
    }))
    .unwrap();
    srv
}

/// A loopback listener answering each connection's bytes upper-cased, until it closes.
async fn shouting_listener() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let loud = buf[..n].to_ascii_uppercase();
                    if conn.write_all(&loud).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// A loopback port nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn bytes_travel_both_ways_to_the_pods_ip() {
    let srv = server_with_pod("127.0.0.1").await;
    let port = shouting_listener().await;
    let pods: Api<Pod> = Api::namespaced(srv.client(), "demo");
    let mut pf = timeout(GUARD, pods.portforward("p", &[port]))
        .await
        .unwrap()
        .unwrap();
    let mut stream = pf.take_stream(port).unwrap();
    for word in ["hello", "again"] {
        stream.write_all(word.as_bytes()).await.unwrap();
        let mut got = vec![0u8; word.len()];
        timeout(GUARD, stream.read_exact(&mut got))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, word.to_ascii_uppercase().as_bytes());
    }
    drop(stream);
    timeout(GUARD, pf.join()).await.unwrap().unwrap();
}

#[tokio::test]
async fn a_port_nothing_listens_on_is_an_error_and_the_end_not_a_hang() {
    let srv = server_with_pod("127.0.0.1").await;
    let port = dead_port();
    let pods: Api<Pod> = Api::namespaced(srv.client(), "demo");
    let mut pf = timeout(GUARD, pods.portforward("p", &[port]))
        .await
        .unwrap()
        .unwrap();
    let error = pf.take_error(port).unwrap();
    let mut stream = pf.take_stream(port).unwrap();
    let message = timeout(GUARD, error).await.unwrap().expect("an error text");
    assert!(
        message.starts_with(&format!("error forwarding port {port} to pod demo/p, uid ")),
        "{message}"
    );
    assert!(
        message.contains(&format!("dial tcp 127.0.0.1:{port}")),
        "{message}"
    );
    let mut rest = Vec::new();
    timeout(GUARD, stream.read_to_end(&mut rest))
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn forwarding_needs_create_on_pods_portforward() {
    let srv = server_with_pod("127.0.0.1").await;
    let port = shouting_listener().await;
    let rule = |verbs: &[&str], resource: &str| AllowRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        resource: resource.into(),
        namespace: Some("demo".into()),
        ..Default::default()
    };
    // Reading pods, even `get` on the subresource, is not enough.
    srv.restrict(
        "alice",
        vec![
            rule(&["get", "list"], "pods"),
            rule(&["get"], "pods/portforward"),
        ],
    );
    let pods: Api<Pod> = Api::namespaced(srv.client_as("alice"), "demo");
    let err = match timeout(GUARD, pods.portforward("p", &[port]))
        .await
        .unwrap()
    {
        Ok(_) => panic!("forwarded without create on pods/portforward"),
        Err(e) => e,
    };
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "pods \"p\" is forbidden: User \"alice\" cannot create resource \"pods/portforward\" in API group \"\" in the namespace \"demo\""
    );
    // A RoleBinding in another namespace does not reach this one.
    srv.restrict(
        "alice",
        vec![AllowRule {
            namespace: Some("other".into()),
            ..rule(&["create"], "pods/portforward")
        }],
    );
    assert!(
        timeout(GUARD, pods.portforward("p", &[port]))
            .await
            .unwrap()
            .is_err()
    );
    srv.restrict("alice", vec![rule(&["create"], "pods/portforward")]);
    let mut pf = timeout(GUARD, pods.portforward("p", &[port]))
        .await
        .unwrap()
        .unwrap();
    let mut stream = pf.take_stream(port).unwrap();
    stream.write_all(b"ok").await.unwrap();
    let mut got = [0u8; 2];
    timeout(GUARD, stream.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"OK");
}

#[tokio::test]
async fn a_pod_ip_off_loopback_is_never_dialled() {
    let srv = server_with_pod("10.1.2.3").await;
    let pods: Api<Pod> = Api::namespaced(srv.client(), "demo");
    let err = match timeout(GUARD, pods.portforward("p", &[80])).await.unwrap() {
        Ok(_) => panic!("forwarded to 10.1.2.3"),
        Err(e) => e,
    };
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 400, "{status:?}");
    assert!(
        status.message.contains("not a loopback address"),
        "{status:?}"
    );
}

/// One raw HTTP/1.1 GET with websocket upgrade headers; the status line's code.
async fn raw_upgrade(srv: &DevServer, target: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(srv.addr()).await.unwrap();
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = timeout(GUARD, conn.read(&mut byte)).await.unwrap().unwrap();
        if n == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

#[tokio::test]
async fn odd_spellings_of_the_pod_name_reach_no_other_path() {
    let srv = server_with_pod("127.0.0.1").await;
    let port = shouting_listener().await;
    // The real spelling upgrades...
    let (code, head) = raw_upgrade(
        &srv,
        &format!("/api/v1/namespaces/demo/pods/p/portforward?ports={port}"),
    )
    .await;
    assert_eq!(code, 101, "{head}");
    // ...and none of these reach pod `p` or anything else.
    for target in [
        format!("/api/v1/namespaces/demo/pods/../p/portforward?ports={port}"),
        format!("/api/v1/namespaces/demo/pods/x/../p/portforward?ports={port}"),
        format!("/api/v1/namespaces/demo/pods/a%2Fp/portforward?ports={port}"),
        format!("/api/v1/namespaces/demo/pods/p%2Fportforward?ports={port}"),
        format!("/api/v1/namespaces/demo/pods/p/portforward/x?ports={port}"),
        format!("/api/v1/namespaces/demo/configmaps/p/portforward?ports={port}"),
    ] {
        let (code, head) = raw_upgrade(&srv, &target).await;
        assert_eq!(code, 404, "{target}: {head}");
    }
    // No ports, bad ports, a plain GET: 400 with the reason.
    for target in [
        "/api/v1/namespaces/demo/pods/p/portforward".to_string(),
        "/api/v1/namespaces/demo/pods/p/portforward?ports=0".to_string(),
        format!("/api/v1/namespaces/demo/pods/p/portforward?ports={port},{port}"),
    ] {
        let (code, head) = raw_upgrade(&srv, &target).await;
        assert_eq!(code, 400, "{target}: {head}");
    }
    let plain = plain_get(&srv, "/api/v1/namespaces/demo/pods/p/portforward?ports=80").await;
    assert!(plain.starts_with("HTTP/1.1 400"), "{plain}");
    assert!(plain.contains("Upgrade request required"), "{plain}");
}

/// A plain GET (no upgrade): the whole answer as text.
async fn plain_get(srv: &DevServer, target: &str) -> String {
    let mut conn = tokio::net::TcpStream::connect(srv.addr()).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    timeout(GUARD, conn.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}
