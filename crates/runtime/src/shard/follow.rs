//! Following one kind of the group's objects (its Leases, its members' Pods): a complete list,
//! then a watch from where the list ended, saying explicitly whether the view is current.
//!
//! The view is current from the moment a watch is open (the API server answered it) after a
//! complete list, until the first error: a refused or failed list or watch, a watch the server
//! broke off, a resourceVersion it no longer has. kube-runtime's watcher recovers from those by
//! itself and says nothing when a retried watch finally opens, so a caller cannot tell a
//! refused watch it keeps retrying from one that works; this follower sends
//! [`Update::Unsure`] on each failure and [`Update::Current`] each time a watch opens, and
//! retries with the host's backoff. It logs nothing: its caller logs once per change of state.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

use crate::backoff::Backoff;

/// How long the API server keeps one watch open before this follower opens the next.
const WATCH_SECONDS: u32 = 290;

/// A watch that delivered nothing, not even a bookmark, for this long is given up and opened
/// again (an unreachable server then fails the new one).
const IDLE: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 10);

/// Objects per page of the list.
const PAGE: u32 = 500;

/// Retries: from 200 ms, doubling, at most 5 s apart (a member stays unsure meanwhile).
const RETRY: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));

/// What the follower saw.
#[derive(Debug)]
pub(super) enum Update<K> {
    /// A complete list: the view is exactly these objects now (not current until the watch
    /// opens).
    Listed(Vec<K>),
    /// An object created or changed.
    Applied(K),
    /// An object deleted.
    Deleted(K),
    /// A watch is open: every change from the last list or event on arrives.
    Current,
    /// Changes may be missed from here on, until the next [`Update::Current`].
    Unsure(FollowError),
}

/// Why a view may be missing changes.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The list was refused or failed.
    #[error("listing {what}: {}", brief(source))]
    List {
        /// What was listed (kind, selector, namespace).
        what: String,
        /// What the API server or the connection answered.
        #[source]
        source: kube::Error,
    },
    /// Opening the watch was refused or failed, or the open watch broke.
    #[error("watching {what}: {}", brief(source))]
    Watch {
        /// What was watched.
        what: String,
        /// What the API server or the connection answered.
        #[source]
        source: kube::Error,
    },
    /// The API server ended the watch with an error status (410: its resourceVersion is gone,
    /// a new list follows).
    #[error("watching {what}: the API server ended the watch: {message} ({code})")]
    Ended {
        /// What was watched.
        what: String,
        /// The status code.
        code: u16,
        /// The status message.
        message: String,
    },
}

/// Lists and watches `api` with `selector`, sending what it sees to `tx` until `tx` closes.
/// `what` names the objects in errors.
pub(super) async fn follow<K>(
    api: Api<K>,
    selector: String,
    what: String,
    tx: mpsc::Sender<Update<K>>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut failures = 0u32;
    // Sends, or ends the follower once nobody listens.
    macro_rules! send {
        ($u:expr) => {
            if tx.send($u).await.is_err() {
                return;
            }
        };
    }
    macro_rules! fail {
        ($e:expr) => {{
            send!(Update::Unsure($e));
            tokio::time::sleep(RETRY.delay(failures)).await;
            failures = failures.saturating_add(1);
        }};
    }
    'list: loop {
        let (items, mut rv) = match list(&api, &selector).await {
            Ok(listed) => listed,
            Err(source) => {
                fail!(FollowError::List {
                    what: what.clone(),
                    source
                });
                continue 'list;
            }
        };
        send!(Update::Listed(items));
        loop {
            let params = WatchParams::default()
                .labels(&selector)
                .timeout(WATCH_SECONDS);
            let mut stream = match api.watch(&params, &rv).await {
                Ok(stream) => stream.boxed(),
                Err(kube::Error::Api(s)) if s.code == 410 => {
                    send!(Update::Unsure(FollowError::Ended {
                        what: what.clone(),
                        code: 410,
                        message: s.message.clone(),
                    }));
                    continue 'list;
                }
                Err(source) => {
                    fail!(FollowError::Watch {
                        what: what.clone(),
                        source
                    });
                    continue;
                }
            };
            failures = 0;
            send!(Update::Current);
            loop {
                match tokio::time::timeout(IDLE, stream.next()).await {
                    // Ended by the server's timeout, or idle too long: open the next one.
                    Err(_) | Ok(None) => break,
                    Ok(Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => {
                        rv = o.resource_version().unwrap_or(rv);
                        send!(Update::Applied(o));
                    }
                    Ok(Some(Ok(WatchEvent::Deleted(o)))) => {
                        rv = o.resource_version().unwrap_or(rv);
                        send!(Update::Deleted(o));
                    }
                    Ok(Some(Ok(WatchEvent::Bookmark(b)))) => rv = b.metadata.resource_version,
                    Ok(Some(Ok(WatchEvent::Error(e)))) => {
                        let gone = e.code == 410;
                        let ended = FollowError::Ended {
                            what: what.clone(),
                            code: e.code,
                            message: e.message,
                        };
                        if gone {
                            send!(Update::Unsure(ended));
                            continue 'list;
                        }
                        fail!(ended);
                        break;
                    }
                    Ok(Some(Err(source))) => {
                        fail!(FollowError::Watch {
                            what: what.clone(),
                            source
                        });
                        break;
                    }
                }
            }
        }
    }
}

/// One line for an API server's answer: its message and code, without kube's debug dump of
/// the whole status.
pub(super) fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        e => e.to_string(),
    }
}

/// Every object matching `selector`, page by page from one snapshot, and its resourceVersion.
async fn list<K>(api: &Api<K>, selector: &str) -> Result<(Vec<K>, String), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut items = Vec::new();
    let mut params = ListParams::default().labels(selector).limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => {
                let rv = page.metadata.resource_version.unwrap_or_default();
                return Ok((items, rv));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use informant_devserver::audit::AllowRule;
    use informant_devserver::{DevServer, DevServerConfig};
    use k8s_openapi::api::coordination::v1::Lease;

    fn rule(verbs: &[&str]) -> AllowRule {
        AllowRule {
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            resource: "leases.coordination.k8s.io".into(),
            namespace: Some("default".into()),
            ..Default::default()
        }
    }

    async fn next(rx: &mut mpsc::Receiver<Update<Lease>>) -> Update<Lease> {
        tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an update within 30 s")
            .expect("the follower runs")
    }

    fn lease(name: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "default", "labels": {"g": "x"}}})
    }

    #[tokio::test]
    async fn a_refused_watch_is_never_current_and_a_granted_one_is_at_once() {
        let server = DevServer::start(DevServerConfig::default()).await.unwrap();
        server.create(lease("one")).unwrap();
        // The chart's old sharding Role: everything but watch.
        server.restrict(
            "member",
            vec![rule(&["create", "get", "list", "update", "delete"])],
        );
        let api: Api<Lease> = Api::namespaced(server.client_as("member"), "default");
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(follow(api, "g=x".into(), "leases".into(), tx));
        match next(&mut rx).await {
            Update::Listed(items) => assert_eq!(items.len(), 1),
            u => panic!("expected the list first, got {u:?}"),
        }
        // Every retry is refused again, and none is taken for a working watch.
        for _ in 0..3 {
            match next(&mut rx).await {
                Update::Unsure(e) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("watching leases") && text.contains("403"),
                        "{text}"
                    );
                }
                u => panic!("a refused watch must stay unsure, got {u:?}"),
            }
        }
        server.restrict(
            "member",
            vec![rule(&[
                "create", "get", "list", "update", "delete", "watch",
            ])],
        );
        loop {
            match next(&mut rx).await {
                Update::Unsure(_) => continue,
                Update::Current => break,
                u => panic!("expected the watch to open, got {u:?}"),
            }
        }
        server.create(lease("two")).unwrap();
        match next(&mut rx).await {
            Update::Applied(l) => assert_eq!(l.metadata.name.as_deref(), Some("two")),
            u => panic!("expected the new Lease, got {u:?}"),
        }
        task.abort();
    }

    #[tokio::test]
    async fn a_refused_list_is_unsure_and_pages_make_one_list() {
        let server = DevServer::start(DevServerConfig::default()).await.unwrap();
        for i in 0..(PAGE + 20) {
            server.create(lease(&format!("l{i}"))).unwrap();
        }
        server.restrict("member", vec![rule(&["watch"])]);
        let api: Api<Lease> = Api::namespaced(server.client_as("member"), "default");
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(follow(api, "g=x".into(), "leases".into(), tx));
        match next(&mut rx).await {
            Update::Unsure(e) => assert!(e.to_string().starts_with("listing leases"), "{e}"),
            u => panic!("expected a refused list, got {u:?}"),
        }
        server.restrict("member", vec![rule(&["list", "watch"])]);
        loop {
            match next(&mut rx).await {
                Update::Unsure(_) => continue,
                Update::Listed(items) => {
                    assert_eq!(items.len(), PAGE as usize + 20);
                    break;
                }
                u => panic!("expected the list, got {u:?}"),
            }
        }
        assert!(matches!(next(&mut rx).await, Update::Current));
        task.abort();
    }
}
