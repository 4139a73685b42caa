//! The embedded API server against kube-rs: typed CRUD, optimistic concurrency, 410 after
//! compaction, kube-runtime's watcher surviving every injected fault in both list-watch and
//! streaming-list mode, and bad input answered with the right Status while others keep working.
//! Every wait is on a real condition; timeouts are failure guards only.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use informant_devserver::{DevServer, DevServerConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::timeout;

const GUARD: Duration = Duration::from_secs(30);

fn cm(name: &str, ns: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "demo"}},
        "data": {"k": "v"}
    }))
    .expect("valid ConfigMap")
}

fn api_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn server() -> DevServer {
    DevServer::start(DevServerConfig::default())
        .await
        .expect("devserver starts")
}

#[tokio::test]
async fn crud_and_optimistic_concurrency() {
    let srv = server().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("a", "default"))
        .await
        .unwrap();
    let rv1 = created.metadata.resource_version.clone().unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());

    let got = api.get("a").await.unwrap();
    assert_eq!(got.metadata.resource_version.as_deref(), Some(rv1.as_str()));

    let mut changed = got.clone();
    changed.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2 = replaced.metadata.resource_version.clone().unwrap();
    assert!(rv2.parse::<u64>().unwrap() > rv1.parse::<u64>().unwrap());

    // `changed` still carries rv1: a stale write is a 409 Conflict.
    let stale = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    assert_eq!(api_code(&stale), 409);

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.data.unwrap().get("extra").map(String::as_str),
        Some("1")
    );
    let ssa = api
        .patch(
            "a",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"ssa": "yes"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        ssa.data.unwrap().get("ssa").map(String::as_str),
        Some("yes")
    );

    let dup = api
        .create(&PostParams::default(), &cm("a", "default"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&dup), 409);

    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("page-{i}"), "default"))
            .await
            .unwrap();
    }
    // Paginated listing through kube's pager-style continue tokens.
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    loop {
        let page = api.list(&lp).await.unwrap();
        assert!(page.items.len() <= 3);
        names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names.len(), 8, "{names:?}");
    let selected = api
        .list(&ListParams::default().labels("app in (demo),!missing"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 8);
    let by_field = api
        .list(&ListParams::default().fields("metadata.name=page-3"))
        .await
        .unwrap();
    assert_eq!(by_field.items.len(), 1);

    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_code(&api.get("a").await.unwrap_err()), 404);
    srv.shutdown().await;
}

#[tokio::test]
async fn watch_from_compacted_version_is_expired() {
    let srv = server().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let first = api
        .create(&PostParams::default(), &cm("x", "default"))
        .await
        .unwrap();
    let old_rv = first.metadata.resource_version.unwrap();

    // Before compaction the history replays the later change.
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    let ev = timeout(GUARD, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Modified(_)), "{ev:?}");

    srv.faults().compact();
    let mut stream = api
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match timeout(GUARD, stream.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 Expired ERROR event, got {other:?}"),
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn watch_from_a_version_never_written_is_refused_not_left_waiting() {
    // A client resuming from another server's history (one that ran at this address before).
    let srv = server().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let made = api
        .create(&PostParams::default(), &cm("y", "default"))
        .await
        .unwrap();
    let current: u64 = made.metadata.resource_version.unwrap().parse().unwrap();
    let future = (current + 1_000).to_string();
    let mut stream = api
        .watch(&WatchParams::default(), &future)
        .await
        .unwrap()
        .boxed();
    match timeout(GUARD, stream.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (504, "Timeout"));
            assert!(
                status.message.contains("Too large resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 504 ERROR event, got {other:?}"),
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn a_verbatim_replace_is_watched_as_given_with_its_identity_kept() {
    let srv = server().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("v", "default"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    // A made-up uid and a managedFields entry nobody wrote: both kept as given but the uid.
    let given = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "v", "namespace": "default", "uid": "forged", "labels": {"round": "1"},
                     "managedFields": [{"manager": "bench", "operation": "Update", "apiVersion": "v1"}]},
        "data": {"k": "2"}
    });
    let stored = srv.replace_verbatim(given).unwrap();
    let ev = timeout(GUARD, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Modified(seen) = ev else {
        panic!("expected MODIFIED, got {ev:?}")
    };
    assert_eq!(seen.metadata.uid, created.metadata.uid, "identity kept");
    assert_eq!(
        seen.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );
    assert_ne!(seen.metadata.resource_version, Some(rv));
    assert_eq!(
        seen.metadata.resource_version.as_deref(),
        stored["metadata"]["resourceVersion"].as_str()
    );
    let managers: Vec<_> = seen
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["bench"], "no field management of its own");
    assert_eq!(seen.data.unwrap()["k"], "2");
    let missing = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nope", "namespace": "default"}});
    assert!(matches!(
        srv.replace_verbatim(missing),
        Err(informant_devserver::Error::NotFound { .. })
    ));
    srv.shutdown().await;
}

/// A kube-runtime watcher over ConfigMaps in `ns`, forwarding every event (errors as None).
fn spawn_watcher(
    srv: &DevServer,
    ns: &str,
    streaming: bool,
) -> mpsc::UnboundedReceiver<Option<Event<ConfigMap>>> {
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), ns);
    let mut cfg = watcher::Config::default().timeout(30);
    if streaming {
        cfg = cfg.streaming_lists();
    }
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            if tx.send(ev.ok()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits until the watcher delivers an event satisfying `want`; returns it.
async fn expect<F>(rx: &mut mpsc::UnboundedReceiver<Option<Event<ConfigMap>>>, what: &str, want: F)
where
    F: Fn(&Event<ConfigMap>) -> bool,
{
    let found = timeout(GUARD, async {
        while let Some(ev) = rx.recv().await {
            if ev.as_ref().is_some_and(&want) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "watcher never delivered: {what}");
}

fn applied(name: &str) -> impl Fn(&Event<ConfigMap>) -> bool + '_ {
    move |ev| matches!(ev, Event::Apply(c) | Event::InitApply(c) if c.metadata.name.as_deref() == Some(name))
}

async fn watcher_survives_faults(streaming: bool) {
    let srv = server().await;
    let ns = "w";
    srv.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .unwrap();
    srv.create(serde_json::to_value(cm("seed", ns)).unwrap())
        .unwrap();
    let mut rx = spawn_watcher(&srv, ns, streaming);
    expect(&mut rx, "initial seed", applied("seed")).await;
    expect(&mut rx, "InitDone", |e| matches!(e, Event::InitDone)).await;

    let faults = srv.faults();
    srv.create(serde_json::to_value(cm("live", ns)).unwrap())
        .unwrap();
    expect(
        &mut rx,
        "live event",
        |e| matches!(e, Event::Apply(c) if c.metadata.name.as_deref() == Some("live")),
    )
    .await;

    // A closed watch resumes from the last resourceVersion: no relist, no loss.
    faults.close_watches();
    srv.create(serde_json::to_value(cm("after-close", ns)).unwrap())
        .unwrap();
    expect(&mut rx, "event after close-watches", applied("after-close")).await;

    // Partitioned while a change lands elsewhere, then compacted: the resume is too old (410),
    // so the watcher must relist (Init again) and find the change made during the partition.
    faults.pause();
    srv.create(serde_json::to_value(cm("during-pause", ns)).unwrap())
        .unwrap();
    faults.compact();
    faults.close_watches();
    faults.resume();
    expect(&mut rx, "relist Init after compaction", |e| {
        matches!(e, Event::Init)
    })
    .await;
    expect(
        &mut rx,
        "object written during the partition",
        applied("during-pause"),
    )
    .await;
    expect(&mut rx, "relist InitDone", |e| matches!(e, Event::InitDone)).await;

    // A plain partition: held watch resumes and delivers.
    faults.pause();
    srv.create(serde_json::to_value(cm("paused", ns)).unwrap())
        .unwrap();
    faults.resume();
    expect(&mut rx, "event written while paused", applied("paused")).await;

    // Restart keeps the data; the watcher reconnects to the same address.
    faults.restart().await;
    srv.create(serde_json::to_value(cm("after-restart", ns)).unwrap())
        .unwrap();
    expect(&mut rx, "event after restart", applied("after-restart")).await;

    srv.delete("v1", "ConfigMap", Some(ns), "live").unwrap();
    expect(
        &mut rx,
        "delete",
        |e| matches!(e, Event::Delete(c) if c.metadata.name.as_deref() == Some("live")),
    )
    .await;
    srv.shutdown().await;
}

#[tokio::test]
async fn watcher_list_watch_survives_faults() {
    watcher_survives_faults(false).await;
}

#[tokio::test]
async fn watcher_streaming_list_survives_faults() {
    watcher_survives_faults(true).await;
}

#[tokio::test]
async fn fault_endpoints_over_http() {
    let srv = server().await;
    let addr = srv.addr();
    let (code, _) = raw(addr, "POST", "/_informant/faults/pause", None, b"").await;
    assert_eq!(code, 200);
    // While paused, the resume endpoint still answers; an ordinary request would hang.
    let (code, _) = raw(addr, "POST", "/_informant/faults/resume", None, b"").await;
    assert_eq!(code, 200);
    for fault in ["close-watches", "compact"] {
        assert_eq!(
            raw(
                addr,
                "POST",
                &format!("/_informant/faults/{fault}"),
                None,
                b""
            )
            .await
            .0,
            200
        );
    }
    assert_eq!(
        raw(addr, "POST", "/_informant/faults/restart", None, b"")
            .await
            .0,
        200
    );
    // The restarted listener serves the same data.
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    timeout(GUARD, async {
        loop {
            if api.list(&ListParams::default()).await.is_ok() {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("server answers after an HTTP-triggered restart");
    srv.shutdown().await;
}

/// One HTTP/1.1 request on a fresh connection; returns the status code and JSON body.
async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    raw_with_length(addr, method, path, content_type, body, body.len()).await
}

async fn raw_with_length(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
    length: usize,
) -> (u16, Value) {
    let (code, body) = raw_text(addr, method, path, content_type, body, length).await;
    // Fixed-length or chunked: the JSON is the part between the first '{' and the last '}'.
    let json = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) => serde_json::from_str(&body[a..=b]).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    (code, json)
}

/// One HTTP/1.1 request on a fresh connection; returns the status code and the body as text.
async fn raw_text(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
    length: usize,
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let ct = content_type
        .map(|c| format!("Content-Type: {c}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{ct}Content-Length: {length}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    timeout(GUARD, s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (code, body.to_string())
}

#[tokio::test]
async fn bad_input_gets_status_errors_while_others_keep_working() {
    let srv = DevServer::start(DevServerConfig {
        max_body_bytes: 64 * 1024,
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = srv.addr();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let mut rx = spawn_watcher(&srv, "default", false);
    expect(&mut rx, "InitDone", |e| matches!(e, Event::InitDone)).await;

    let cms = "/api/v1/namespaces/default/configmaps";
    let json_ct = Some("application/json");
    let cases: Vec<(&str, u16, &str, (u16, Value))> = vec![
        (
            "malformed JSON",
            400,
            "BadRequest",
            raw(addr, "POST", cms, json_ct, b"{\"kind\": ").await,
        ),
        (
            "kind mismatch",
            400,
            "BadRequest",
            raw(
                addr,
                "POST",
                cms,
                json_ct,
                br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}"#,
            )
            .await,
        ),
        (
            "apiVersion mismatch",
            400,
            "BadRequest",
            raw(
                addr,
                "POST",
                cms,
                json_ct,
                br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"s"}}"#,
            )
            .await,
        ),
        (
            "unknown resource",
            404,
            "NotFound",
            raw(addr, "GET", "/apis/nope.example.com/v1/things", None, b"").await,
        ),
        (
            "oversized body",
            413,
            "RequestEntityTooLarge",
            raw_with_length(addr, "POST", cms, json_ct, b"", 1 << 20).await,
        ),
        (
            "bad label selector",
            400,
            "BadRequest",
            raw(
                addr,
                "GET",
                &format!("{cms}?labelSelector=a%20in%20b"),
                None,
                b"",
            )
            .await,
        ),
        (
            "invalid name",
            422,
            "Invalid",
            raw(
                addr,
                "POST",
                cms,
                json_ct,
                br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#,
            )
            .await,
        ),
        (
            "method not allowed",
            405,
            "MethodNotAllowed",
            raw(addr, "PUT", cms, json_ct, b"{}").await,
        ),
        (
            "bad patch type",
            415,
            "UnsupportedMediaType",
            raw(
                addr,
                "PATCH",
                &format!("{cms}/x"),
                Some("text/plain"),
                b"{}",
            )
            .await,
        ),
    ];
    for (what, code, reason, (got_code, status)) in cases {
        assert_eq!(got_code, code, "{what}: {status}");
        assert_eq!(status["kind"], "Status", "{what}: {status}");
        assert_eq!(status["reason"], reason, "{what}: {status}");
        assert_eq!(status["code"], code, "{what}: {status}");
        // Everyone else is still served, watches included.
        let name = format!("ok-{code}-{}", what.replace(' ', "-").to_lowercase());
        api.create(&PostParams::default(), &cm(&name, "default"))
            .await
            .unwrap();
        expect(&mut rx, what, applied(&name)).await;
    }
    let err = api
        .list(&ListParams::default().labels("a in b"))
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), 400);
    srv.shutdown().await;
}

/// `depth` objects, each the only member `a` of the one around it.
fn nested(depth: usize) -> Value {
    let mut v = json!("leaf");
    for _ in 0..depth {
        v = Value::Object([("a".to_string(), v)].into_iter().collect());
    }
    v
}

/// The identity of a served object, read from its text: serde_json skips the other fields
/// without a depth limit, so this reads objects too deep to decode whole.
async fn identity(addr: SocketAddr, path: &str) -> (u16, Option<String>, Option<String>) {
    #[derive(serde::Deserialize, Default)]
    struct Served {
        #[serde(default)]
        metadata: Meta,
    }
    #[derive(serde::Deserialize, Default)]
    struct Meta {
        namespace: Option<String>,
        uid: Option<String>,
    }
    let (code, body) = raw_text(addr, "GET", path, None, b"", 0).await;
    let start = body.find('{').unwrap_or_default();
    let end = body.rfind('}').map_or(body.len(), |e| e + 1);
    let served: Served = serde_json::from_str(&body[start..end]).unwrap_or_default();
    (code, served.metadata.namespace, served.metadata.uid)
}

/// A write may nest the object deeper than this server (and kube-rs) can read back; such a
/// write is refused, and no write ever leaves an object without its namespace or uid: a later
/// patch used to start from a stored object that no longer parsed, as if from nothing.
#[tokio::test]
async fn no_nesting_depth_makes_an_object_lose_its_identity() {
    let srv = server().await;
    let addr = srv.addr();
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let created = api
        .create(&PostParams::default(), &cm("victim", "default"))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone();
    let path = "/api/v1/namespaces/default/configmaps/victim";
    let deep_pointer = format!("/data/deep{}", "/a".repeat(60));
    let writes: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "a JSON patch nesting data 162 levels deep",
            "application/json-patch+json",
            json!([
                {"op": "add", "path": "/data/deep", "value": nested(100)},
                {"op": "add", "path": deep_pointer, "value": nested(100)},
            ])
            .to_string()
            .into_bytes(),
        ),
        (
            "a merge patch 200 levels deep",
            "application/merge-patch+json",
            json!({"data": {"deep": nested(198)}})
                .to_string()
                .into_bytes(),
        ),
        (
            "a merge patch 112 levels deep",
            "application/merge-patch+json",
            json!({"data": {"deep": nested(110)}})
                .to_string()
                .into_bytes(),
        ),
        (
            "a strategic merge patch 112 levels deep",
            "application/strategic-merge-patch+json",
            json!({"data": {"deep": nested(110)}})
                .to_string()
                .into_bytes(),
        ),
    ];
    for (what, content_type, body) in &writes {
        let (code, status) = raw(addr, "PATCH", path, Some(content_type), body).await;
        // Whatever the answer, the stored object keeps its identity.
        let after = identity(addr, path).await;
        assert_eq!(
            after,
            (200, Some("default".to_string()), uid.clone()),
            "after {what} (answered {code})"
        );
        assert_eq!(code, 400, "{what} is refused: {status}");
        assert_eq!(status["reason"], "BadRequest", "{what}: {status}");
    }
    let (_, status) = raw(addr, "PATCH", path, Some(writes[2].1), &writes[2].2).await;
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("nested 112 levels deep") && m.contains("at most 100")),
        "the refusal says why: {status}"
    );
    // An ordinary merge patch afterwards works and keeps the identity.
    let patched = api
        .patch(
            "victim",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.uid, uid);
    assert_eq!(patched.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(patched.data.unwrap()["k"], "v2");

    // The Rust API is held to the same bound.
    let deep = |name: &str, depth: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"deep": nested(depth)}})
    };
    for (what, result) in [
        ("create", srv.create(deep("deep", 198))),
        ("update", srv.update(deep("victim", 198))),
        (
            "verbatim replace",
            srv.replace_verbatim(deep("victim", 198)),
        ),
    ] {
        assert!(
            matches!(&result, Err(informant_devserver::Error::BadRequest(m)) if m.contains("nested 200 levels deep")),
            "{what}: {result:?}"
        );
    }
    assert_eq!(
        identity(addr, path).await,
        (200, Some("default".to_string()), uid.clone())
    );
    // Up to the bound, objects are stored and read back whole.
    let kept = srv.create(deep("at-the-bound", 98)).unwrap();
    let (code, read) = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/configmaps/at-the-bound",
        None,
        b"",
    )
    .await;
    assert_eq!(
        (code, &read["metadata"]["uid"]),
        (200, &kept["metadata"]["uid"])
    );
    let (code, list) = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        None,
        b"",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
    srv.shutdown().await;
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
        // Over HTTP a create cannot set the status of a kind with a status subresource.
        "status": {"replicas": 5},
    }))
    .expect("valid Deployment")
}

/// `metadata.generation`, the status and scale subresources, and the no-controllers notice,
/// through kube-rs' own subresource calls.
#[tokio::test]
async fn generation_status_and_scale_subresources() {
    let srv = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let mut c = cms
        .create(&PostParams::default(), &cm("c", "default"))
        .await
        .unwrap();
    assert_eq!(c.metadata.generation, None);
    c.data = Some([("k".to_string(), "v2".to_string())].into());
    let c = cms.replace("c", &PostParams::default(), &c).await.unwrap();
    assert_eq!(c.metadata.generation, None, "ConfigMaps have no generation");

    let api: Api<Deployment> = Api::namespaced(srv.client(), "default");
    let d = api
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let status = d.status.unwrap();
    assert_eq!(
        (status.replicas, status.observed_generation),
        (None, Some(1))
    );
    let progressing = &status.conditions.unwrap()[0];
    assert_eq!(
        progressing.reason.as_deref(),
        Some("ProgressDeadlineExceeded")
    );

    // Scale: a merge patch, a stale resourceVersion, a negative count.
    let scale = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let d = api.get("web").await.unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.status.unwrap().observed_generation, Some(2));
    let stale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"replicas": 4}});
    let err = api
        .replace_scale(
            "web",
            &PostParams::default(),
            &serde_json::from_value(stale).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), 409);
    let err = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), 422);

    // Status writes change status only and start no generation.
    let patched = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 2}, "spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(3));
    assert_eq!(patched.status.unwrap().ready_replicas, Some(2));
    assert_eq!(patched.metadata.generation, Some(2));

    // A direct write plays the controller: its status is kept as given.
    let mut direct = serde_json::to_value(api.get("web").await.unwrap()).unwrap();
    direct["spec"]["replicas"] = 6.into();
    direct["status"] = json!({"observedGeneration": 3, "replicas": 6, "readyReplicas": 6});
    let updated = srv.update(direct.clone()).unwrap();
    assert_eq!(updated["metadata"]["generation"], 3);
    assert_eq!(updated["status"], direct["status"]);
    srv.shutdown().await;
}

#[tokio::test]
async fn eviction_token_and_log_subresources() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    let client = server.client();
    server
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap();
    server
        .create(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "hooks", "namespace": "default"}}))
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let logs = pods.logs("p", &Default::default()).await.unwrap_err();
    assert_eq!(api_code(&logs), 400, "{logs}");
    assert!(logs.to_string().contains("runs no kubelet"), "{logs}");
    pods.evict("p", &Default::default()).await.unwrap();
    assert!(pods.get_opt("p").await.unwrap().is_none(), "evicted: gone");
    let gone = pods.evict("p", &Default::default()).await.unwrap_err();
    assert_eq!(api_code(&gone), 404);

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let answer = sas
        .create_token_request("hooks", &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap();
    let status = answer.status.expect("a token");
    let claims = status.token.split('.').nth(1).expect("a JWT");
    use base64::Engine as _;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:default:hooks");
    let missing = sas
        .create_token_request("nobody", &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap_err();
    assert_eq!(api_code(&missing), 404);
}

#[tokio::test]
async fn a_deleted_namespace_is_terminating_before_it_goes() {
    use k8s_openapi::api::core::v1::Namespace;
    let server = DevServer::start(DevServerConfig::default()).await.unwrap();
    let nss: Api<Namespace> = Api::all(server.client());
    let created = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "doomed");
    cms.create(&PostParams::default(), &cm("c", "doomed"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let mut stream = nss
        .watch(&WatchParams::default().fields("metadata.name=doomed"), &rv)
        .await
        .unwrap()
        .boxed();
    let answer = nss
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let answered = answer.left().expect("the namespace, not a Status");
    assert_eq!(
        answered.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    assert!(answered.metadata.deletion_timestamp.is_some());
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match timeout(GUARD, stream.try_next()).await.unwrap().unwrap() {
            Some(WatchEvent::Modified(ns)) => {
                seen.push(format!("MODIFIED {:?}", ns.status.and_then(|s| s.phase)))
            }
            Some(WatchEvent::Deleted(_)) => seen.push("DELETED".into()),
            Some(WatchEvent::Bookmark(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, ["MODIFIED Some(\"Terminating\")", "DELETED"]);
    assert!(
        cms.get_opt("c").await.unwrap().is_none(),
        "its contents went too"
    );
    server.shutdown().await;
}

/// Every page of an exact list at `rv` with `labels`, one object a page.
async fn list_exact_paged(
    api: &Api<ConfigMap>,
    labels: &str,
    rv: &str,
) -> Result<Vec<ConfigMap>, kube::Error> {
    let mut lp = ListParams::default()
        .labels(labels)
        .limit(1)
        .at(rv)
        .matching(kube::api::VersionMatch::Exact);
    let mut out = Vec::new();
    loop {
        let page = api.list(&lp).await?;
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(rv),
            "every page is the snapshot at {rv}"
        );
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp.continue_token = Some(c),
            None => return Ok(out),
        }
    }
}

#[tokio::test]
async fn an_exact_list_at_an_older_version_is_the_collection_as_it_was() {
    let srv = server().await;
    let api: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let elsewhere: Api<ConfigMap> = Api::namespaced(srv.client(), "kube-system");
    let pp = PostParams::default();
    for name in ["a", "b", "c"] {
        api.create(&pp, &cm(name, "default")).await.unwrap();
    }
    let mut unlabelled = cm("u", "default");
    unlabelled.metadata.labels = None;
    api.create(&pp, &unlabelled).await.unwrap();
    elsewhere
        .create(&pp, &cm("x", "kube-system"))
        .await
        .unwrap();
    let then = api.list(&ListParams::default()).await.unwrap();
    let at = then.metadata.resource_version.unwrap();
    let then_rv = |name: &str| {
        then.items
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some(name))
            .and_then(|o| o.metadata.resource_version.clone())
    };

    // After `at`: a modified, b deleted, d created, u gains the label, c loses it.
    let merge = |v: Value| Patch::Merge(v);
    let ppm = PatchParams::default();
    api.patch("a", &ppm, &merge(json!({"data": {"k": "later"}})))
        .await
        .unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    api.create(&pp, &cm("d", "default")).await.unwrap();
    api.patch(
        "u",
        &ppm,
        &merge(json!({"metadata": {"labels": {"app": "demo"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "c",
        &ppm,
        &merge(json!({"metadata": {"labels": {"app": null}}})),
    )
    .await
    .unwrap();
    api.patch("a", &ppm, &merge(json!({"data": {"k": "latest"}})))
        .await
        .unwrap();

    let old = list_exact_paged(&api, "app=demo", &at).await.unwrap();
    let got: Vec<(String, Option<String>, Option<String>)> = old
        .iter()
        .map(|o| {
            (
                o.metadata.name.clone().unwrap(),
                o.metadata.resource_version.clone(),
                o.data.as_ref().and_then(|d| d.get("k").cloned()),
            )
        })
        .collect();
    let want: Vec<(String, Option<String>, Option<String>)> = ["a", "b", "c"]
        .iter()
        .map(|n| (n.to_string(), then_rv(n), Some("v".to_string())))
        .collect();
    assert_eq!(got, want);

    // The present is listed as before.
    let now = api
        .list(&ListParams::default().labels("app=demo"))
        .await
        .unwrap();
    let names: Vec<_> = now
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["a", "d", "u"]);

    // Once compacted past it, the snapshot is gone.
    srv.faults().compact();
    let err = list_exact_paged(&api, "app=demo", &at).await.unwrap_err();
    assert_eq!(api_code(&err), 410);
    srv.shutdown().await;
}
