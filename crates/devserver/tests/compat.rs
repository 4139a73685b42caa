//! The compatibility suite: recorded request/answer pairs in `tests/compat/*.json`, replayed
//! over loopback HTTP against a fresh embedded server per file.
//!
//! Each file is one scenario: `steps` run in order, each a `request` (method, path, optional
//! JSON `body` and `contentType`) and the `expect`ed answer (`code`, and the whole JSON `body`,
//! or for a watch the list of `events`). Every step names the `source` of its expected answer:
//! there is no real kube-apiserver on the machine that wrote these, so the source is the
//! Kubernetes file or document the answer follows. Answers are compared whole after one
//! normalisation: values a real server makes up (uid, resourceVersion, timestamps, allocated
//! cluster IPs) are written `"*"` in the file, and a `*` inside an expected string matches any
//! text. `ignore` lists JSON pointers left out of the comparison, each with its reason in
//! `why`. `at` (a JSON pointer) compares only that part of the answer, and with `where` picks
//! the element of that array whose fields equal it (discovery lists are not in a fixed order).
//! `select` chains several such steps. `accept` sets the request's Accept header, and an
//! expected `contentType` is checked against the answer's.
//! `userAgent` sets the request's User-Agent (none is sent otherwise).
//! `save` keeps a value of the answer (by JSON pointer) as `${name}` for later steps.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use informant_devserver::{DevServer, DevServerConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

const GUARD: Duration = Duration::from_secs(30);

/// One HTTP/1.1 request on a fresh connection; the status code and the de-chunked body.
async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    accept: &str,
    user_agent: Option<&str>,
    body: &[u8],
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let agent = user_agent
        .map(|ua| format!("User-Agent: {ua}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nAccept: {accept}\r\n{agent}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("send head");
    s.write_all(body).await.expect("send body");
    let mut out = Vec::new();
    timeout(GUARD, s.read_to_end(&mut out))
        .await
        .expect("answer within the guard")
        .expect("read");
    let text = String::from_utf8(out).expect("utf-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let answered_as = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (code, body, answered_as)
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

/// Replaces `${name}` with saved values.
fn substitute(s: &str, vars: &BTreeMap<String, String>) -> String {
    vars.iter().fold(s.to_string(), |acc, (k, v)| {
        acc.replace(&format!("${{{k}}}"), v)
    })
}

fn substitute_value(v: &Value, vars: &BTreeMap<String, String>) -> Value {
    match v {
        Value::String(s) => Value::String(substitute(s, vars)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute_value(x, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), substitute_value(x, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether `actual` matches the `*` pattern `want`.
fn glob(want: &str, actual: &str) -> bool {
    let parts: Vec<&str> = want.split('*').collect();
    if parts.len() == 1 {
        return want == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Differences between expected and actual, as JSON pointers with both sides.
fn diff(want: &Value, got: &Value, at: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::String(w), Value::String(g)) if glob(w, g) => {}
        (Value::String(w), _) if w == "*" && !got.is_null() => {}
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => diff(wv, gv, &format!("{at}/{k}"), out),
                    None => out.push(format!("{at}/{k}: missing, want {wv}")),
                }
            }
            for (k, gv) in g {
                if !w.contains_key(k) {
                    out.push(format!("{at}/{k}: unexpected {gv}"));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(wv, gv, &format!("{at}/{i}"), out);
            }
        }
        _ if want == got => {}
        _ => out.push(format!("{at}: want {want}, got {got}")),
    }
}

fn remove_pointer(v: &mut Value, pointer: &str) {
    let (parent, last) = pointer.rsplit_once('/').expect("a JSON pointer");
    if let Some(Value::Object(m)) = v.pointer_mut(parent) {
        m.remove(last);
    }
}

/// Runs one scenario file; returns how many pairs it checked, or the mismatches.
async fn replay(file: &Path) -> Result<usize, Vec<String>> {
    let text = std::fs::read_to_string(file).expect("read scenario");
    let scenario: Value = serde_json::from_str(&text).expect("scenario is JSON");
    let srv = DevServer::start(DevServerConfig::default())
        .await
        .expect("devserver starts");
    let mut vars = BTreeMap::new();
    let mut failures = Vec::new();
    let steps = scenario["steps"].as_array().expect("steps");
    for (i, step) in steps.iter().enumerate() {
        let what = format!("{} step {i}", file.display());
        assert!(
            step["source"].as_str().is_some_and(|s| !s.is_empty()),
            "{what}: every pair names the source of its expected answer"
        );
        let req = &step["request"];
        let method = req["method"].as_str().expect("method");
        let path = substitute(req["path"].as_str().expect("path"), &vars);
        let content_type = req["contentType"].as_str().unwrap_or("application/json");
        let accept = req["accept"].as_str().unwrap_or("application/json");
        let user_agent = req["userAgent"].as_str();
        let body = match &req["body"] {
            Value::Null => Vec::new(),
            Value::String(s) => substitute(s, &vars).into_bytes(),
            v => serde_json::to_vec(&substitute_value(v, &vars)).expect("body"),
        };
        let (code, text, answered_as) = send(
            srv.addr(),
            method,
            &path,
            content_type,
            accept,
            user_agent,
            &body,
        )
        .await;
        if let Some(want) = step["expect"]["contentType"].as_str()
            && want != answered_as
        {
            failures.push(format!("{what}: Content-Type {answered_as}, want {want}"));
        }
        let expect = &step["expect"];
        if expect["code"].as_u64() != Some(u64::from(code)) {
            failures.push(format!(
                "{what}: {method} {path}: code {code}, want {}: {text}",
                expect["code"]
            ));
            continue;
        }
        let mut got: Value = if expect.get("events").is_some() {
            Value::Array(
                text.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| serde_json::from_str(l).expect("watch event is JSON"))
                    .collect(),
            )
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        for (name, pointer) in step["save"].as_object().into_iter().flatten() {
            let pointer = pointer.as_str().expect("save pointer");
            let v = got
                .pointer(pointer)
                .unwrap_or_else(|| panic!("{what}: nothing at {pointer}"));
            vars.insert(
                name.clone(),
                v.as_str().map_or_else(|| v.to_string(), String::from),
            );
        }
        for ignored in step["ignore"].as_array().into_iter().flatten() {
            assert!(
                step["why"].is_string(),
                "{what}: ignored pointers need a `why`"
            );
            remove_pointer(&mut got, ignored.as_str().expect("ignore pointer"));
        }
        // `at`/`where` once, or `select`: a list of such steps, each into the previous result.
        let single = [json!({"at": step["at"], "where": step["where"]})];
        let steps_in: &[Value] = match step["select"].as_array() {
            Some(list) => list,
            None if step["at"].is_string() => &single,
            None => &[],
        };
        for sel in steps_in {
            let at = sel["at"].as_str().expect("`at` is a JSON pointer");
            got = got.pointer(at).cloned().unwrap_or(Value::Null);
            if let Some(filter) = sel["where"].as_object() {
                got = got
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|e| filter.iter().all(|(k, v)| &e[k] == v))
                    .cloned()
                    .unwrap_or(Value::Null);
            }
        }
        let want = expect.get("events").or(expect.get("body"));
        if let Some(want) = want {
            let mut out = Vec::new();
            diff(&substitute_value(want, &vars), &got, "", &mut out);
            failures.extend(
                out.into_iter()
                    .map(|d| format!("{what}: {method} {path}: {d}")),
            );
        }
    }
    srv.shutdown().await;
    if failures.is_empty() {
        Ok(steps.len())
    } else {
        Err(failures)
    }
}

#[tokio::test]
async fn recorded_pairs_match() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/compat exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenarios in {}", dir.display());
    let mut pairs = 0;
    let mut failures = Vec::new();
    for file in &files {
        match replay(file).await {
            Ok(n) => pairs += n,
            Err(f) => failures.extend(f),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "compat: {pairs} recorded pairs in {} scenarios match",
        files.len()
    );
}

#[test]
fn glob_and_diff_catch_differences() {
    assert!(glob("a*c", "abbbc") && glob("*", "") && !glob("a*c", "abd"));
    let mut out = Vec::new();
    diff(
        &serde_json::json!({"a": "*", "b": 1}),
        &serde_json::json!({"a": "x", "c": 2}),
        "",
        &mut out,
    );
    assert_eq!(out.len(), 2, "{out:?}");
}
