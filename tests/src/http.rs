//! Plain HTTP/1.1 GETs to the admin endpoints over loopback, as a probe or scraper sends them.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{GUARD, guarded};

/// `GET path` over a fresh connection: status, `Content-Type` and body.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    guarded(&format!("GET {path}"), async {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("send");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.expect("read");
        let text = String::from_utf8(raw).expect("utf-8 response");
        let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("a status code");
        let header = |name: &str| {
            head.lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
        };
        assert!(
            header("transfer-encoding").is_none(),
            "admin answers are sent whole"
        );
        let length: usize = header("content-length")
            .and_then(|l| l.parse().ok())
            .expect("a Content-Length");
        assert_eq!(body.len(), length, "body of {path} is complete");
        (
            status,
            header("content-type").unwrap_or_default(),
            body.to_string(),
        )
    })
    .await
}

/// GETs `path` until `pred(status, body)` holds. The endpoints offer no change signal to wait
/// on, so this polls (the condition is the point; the interval only spares the CPU), failing
/// after [`GUARD`]. Connection refusals count as "not yet": the server may not be up.
pub async fn get_until(
    addr: SocketAddr,
    path: &str,
    what: &str,
    pred: impl Fn(u16, &str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + GUARD;
    let mut last = String::new();
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            let (status, _, body) = get(addr, path).await;
            if pred(status, &body) {
                return body;
            }
            last = format!("{status} {body}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; last answer: {last}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback address nothing listens on (the OS picked the port for a moment ago).
pub fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    l.local_addr().expect("local addr")
}
