//! `/dead-letters`: the events plugins failed for good, kept in the state directory (see
//! [`crate::plugin::exec::dead_letter`]), listed, re-driven or dropped by an operator.
//!
//! | route | answer |
//! |---|---|
//! | `GET /dead-letters[?plugin=P]` | `{"dead_letters": [Letter, ...]}`, oldest first per plugin |
//! | `POST /dead-letters/retry` | body `{"plugin": P, "ids": [..]}` or `{"plugin": P, "all": true}`: each letter's object delivered again as the cache has it now; `{"plugin", "retried", "kept": [{"id", "reason"}], "missing"}` |
//! | `POST /dead-letters/drop` | the same body: the letters removed; `{"plugin", "dropped", "missing"}` |
//!
//! Contract:
//! - `P` is a plugin id exactly as `/plugins` and `/metrics` show it (`tenant/name`, or `name`
//!   for a top-level plugin): nothing in it is decoded or resolved, so no spelling of a path
//!   reaches another plugin's letters. A plugin neither loaded, waiting nor holding letters is
//!   `404`.
//! - Without `--state-dir` every route is `409`: nothing is kept.
//! - A malformed body (not JSON, ids that are not numbers, both or neither of `ids` and `all`,
//!   more than [`MAX_IDS`] ids) is `400` saying what was wrong; ids that name no letter are
//!   reported as `missing`, not refused.
//! - Retrying needs the plugin running (`409` otherwise). A letter whose object cannot be
//!   delivered again (see [`NotRedriven`](crate::plugin::load::redrive::NotRedriven)) stays,
//!   listed under `kept` with the reason. A re-driven letter is removed once its event is
//!   queued: if the plugin fails it again, it comes back as a new letter.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};

use super::AdminState;
use crate::durable::Durable;
use crate::plugin::PluginHost;
use crate::plugin::imports::log::escape_controls;
use informant_state::DeadLetter;

/// Most ids one request may name.
pub const MAX_IDS: usize = 10_000;

/// One dead letter as the routes show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Letter {
    /// Its id, increasing per plugin.
    pub id: u64,
    /// The plugin (`tenant/name`, or `name`).
    pub plugin: String,
    /// The informer the event came from.
    pub informer: String,
    /// The object's key (`namespace/name`, or `name`).
    pub key: String,
    /// The object's resource version in the failed event.
    pub resource_version: String,
    /// `added`, `updated`, `deleted` or `resync`.
    pub event: String,
    /// The plugin's last error.
    pub error: String,
    /// Deliveries tried.
    pub attempts: u32,
    /// When it was given up on (RFC 3339).
    pub at: String,
}

impl From<DeadLetter> for Letter {
    fn from(l: DeadLetter) -> Self {
        Letter {
            at: jiff::Timestamp::from_millisecond(l.at_unix_ms)
                .map(|t| t.to_string())
                .unwrap_or_default(),
            id: l.id,
            plugin: l.plugin,
            informer: l.informer,
            key: l.key,
            resource_version: l.resource_version,
            event: l.event,
            error: l.error,
            attempts: l.attempts,
        }
    }
}

/// What `retry` and `drop` are asked to act on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// The plugin.
    pub plugin: String,
    /// The letters, by id (not with `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<u64>>,
    /// Every letter of the plugin (not with `ids`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

/// A letter left in place by `retry`, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    /// The letter.
    pub id: u64,
    /// Why it was not delivered again.
    pub reason: String,
}

/// What `retry` or `drop` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// The plugin.
    pub plugin: String,
    /// Letters whose object was queued again (and that were removed).
    #[serde(default)]
    pub retried: Vec<u64>,
    /// Letters removed without delivering them.
    #[serde(default)]
    pub dropped: Vec<u64>,
    /// Letters `retry` could not deliver again; they stay.
    #[serde(default)]
    pub kept: Vec<Kept>,
    /// Ids asked for that name no letter of the plugin.
    #[serde(default)]
    pub missing: Vec<u64>,
}

/// A refusal: its status and one line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused(StatusCode, String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (self.0, format!("{}\n", self.1)).into_response()
    }
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Refused {
    Refused(status, why.into())
}

/// The query of `GET /dead-letters`.
#[derive(Debug, serde::Deserialize)]
pub(super) struct ListQuery {
    plugin: Option<String>,
}

pub(super) async fn list(
    State(state): State<Arc<AdminState>>,
    Query(q): Query<ListQuery>,
) -> Response {
    let host = state.host().map(Arc::as_ref);
    match list_letters(durable_of(host), host, q.plugin.as_deref()) {
        Ok(letters) => Json(serde_json::json!({ "dead_letters": letters })).into_response(),
        Err(r) => r.into_response(),
    }
}

pub(super) async fn retry(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    let host = state.host().map(Arc::as_ref);
    respond(act(durable_of(host), host, &body, Action::Retry))
}

pub(super) async fn drop_letters(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    let host = state.host().map(Arc::as_ref);
    respond(act(durable_of(host), host, &body, Action::Drop))
}

fn respond(r: Result<Outcome, Refused>) -> Response {
    match r {
        Ok(outcome) => Json(outcome).into_response(),
        Err(r) => r.into_response(),
    }
}

fn durable_of(host: Option<&PluginHost>) -> Option<&Arc<Durable>> {
    host.and_then(PluginHost::durable)
}

fn need_state(durable: Option<&Arc<Durable>>) -> Result<&Arc<Durable>, Refused> {
    durable.ok_or_else(|| {
        refuse(
            StatusCode::CONFLICT,
            "dead letters need --state-dir: this host keeps none",
        )
    })
}

fn stored(e: informant_state::StateError) -> Refused {
    refuse(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("reading the state directory failed: {e}"),
    )
}

/// `404` unless `plugin` is loaded, waiting, or holds letters.
fn known(
    durable: &Durable,
    host: Option<&PluginHost>,
    plugin: &str,
) -> Result<Vec<DeadLetter>, Refused> {
    let letters = durable.dead_letters(Some(plugin)).map_err(stored)?;
    let loaded = host.is_some_and(|h| h.find_plugin(plugin).is_some());
    if letters.is_empty() && !loaded {
        return Err(refuse(
            StatusCode::NOT_FOUND,
            format!(
                "no plugin `{}` is loaded, waiting or holding dead letters (see /plugins)",
                escape_controls(plugin)
            ),
        ));
    }
    Ok(letters)
}

/// The letters of `plugin`, or of every plugin.
pub(super) fn list_letters(
    durable: Option<&Arc<Durable>>,
    host: Option<&PluginHost>,
    plugin: Option<&str>,
) -> Result<Vec<Letter>, Refused> {
    let durable = need_state(durable)?;
    let letters = match plugin {
        Some(p) => known(durable, host, p)?,
        None => durable.dead_letters(None).map_err(stored)?,
    };
    Ok(letters.into_iter().map(Letter::from).collect())
}

/// Which route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Retry,
    Drop,
}

/// Reads a `retry` or `drop` body.
pub(super) fn selection(body: &[u8]) -> Result<Selection, Refused> {
    let bad = |why: String| refuse(StatusCode::BAD_REQUEST, why);
    let s: Selection = serde_json::from_slice(body).map_err(|e| {
        bad(format!(
            "expected {{\"plugin\": \"tenant/name\", \"ids\": [1, 2]}} or {{\"plugin\": \"tenant/name\", \"all\": true}}: {}",
            escape_controls(&e.to_string())
        ))
    })?;
    match (&s.ids, s.all) {
        (Some(_), true) => Err(bad("give `ids` or `all`, not both".into())),
        (None, false) => Err(bad("give `ids` (a list of numbers) or `all: true`".into())),
        (Some(ids), false) if ids.is_empty() => Err(bad("`ids` is empty".into())),
        (Some(ids), false) if ids.len() > MAX_IDS => {
            Err(bad(format!("at most {MAX_IDS} ids at once")))
        }
        _ => Ok(s),
    }
}

/// Retries or drops the letters `body` selects.
pub(super) fn act(
    durable: Option<&Arc<Durable>>,
    host: Option<&PluginHost>,
    body: &[u8],
    action: Action,
) -> Result<Outcome, Refused> {
    let durable = need_state(durable)?;
    let s = selection(body)?;
    let letters = known(durable, host, &s.plugin)?;
    let mut outcome = Outcome {
        plugin: s.plugin.clone(),
        ..Outcome::default()
    };
    let chosen: Vec<DeadLetter> = match &s.ids {
        None => letters,
        Some(ids) => {
            let mut ids = ids.clone();
            ids.sort_unstable();
            ids.dedup();
            let (found, missing): (Vec<u64>, Vec<u64>) = ids
                .into_iter()
                .partition(|id| letters.iter().any(|l| l.id == *id));
            outcome.missing = missing;
            letters
                .into_iter()
                .filter(|l| found.binary_search(&l.id).is_ok())
                .collect()
        }
    };
    let take: Vec<u64> = match action {
        Action::Drop => chosen.iter().map(|l| l.id).collect(),
        Action::Retry => {
            let id = host.and_then(|h| h.find_plugin(&s.plugin));
            let (Some(host), Some(id)) = (host, id) else {
                return Err(refuse(
                    StatusCode::CONFLICT,
                    format!(
                        "plugin `{}` is not running: its dead letters can be listed and dropped, not retried",
                        escape_controls(&s.plugin)
                    ),
                ));
            };
            let mut take = Vec::new();
            for l in &chosen {
                match host.redrive(&id, &l.informer, &l.key, &l.event) {
                    Ok(()) => take.push(l.id),
                    Err(reason) => outcome.kept.push(Kept {
                        id: l.id,
                        reason: reason.to_string(),
                    }),
                }
            }
            take
        }
    };
    let taken: Vec<u64> = durable
        .take_dead_letters(&s.plugin, &take)
        .map_err(stored)?
        .into_iter()
        .map(|l| l.id)
        .collect();
    match action {
        Action::Retry => outcome.retried = taken,
        Action::Drop => outcome.dropped = taken,
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(plugin: &str, key: &str) -> DeadLetter {
        DeadLetter {
            id: 0,
            plugin: plugin.into(),
            informer: "v1/configmaps".into(),
            key: key.into(),
            resource_version: "7".into(),
            event: "added".into(),
            error: "returned an error: boom".into(),
            attempts: 1,
            at_unix_ms: 1_700_000_000_000,
        }
    }

    /// A state directory holding two letters of `team-a/p` and one of `top`.
    async fn with_letters() -> (tempfile::TempDir, Arc<Durable>) {
        let dir = tempfile::tempdir().unwrap();
        let durable = Durable::open(dir.path(), "test").unwrap();
        durable.dead_letter(letter("team-a/p", "ns/a"));
        durable.dead_letter(letter("team-a/p", "ns/b"));
        durable.dead_letter(letter("top", "ns/c"));
        durable.flush().await;
        (dir, durable)
    }

    fn status<T>(r: Result<T, Refused>) -> StatusCode {
        match r {
            Ok(_) => StatusCode::OK,
            Err(Refused(s, _)) => s,
        }
    }

    #[tokio::test]
    async fn without_a_state_directory_every_route_is_a_conflict() {
        assert_eq!(status(list_letters(None, None, None)), StatusCode::CONFLICT);
        let body = br#"{"plugin": "p", "all": true}"#;
        for action in [Action::Retry, Action::Drop] {
            let Err(Refused(s, why)) = act(None, None, body, action) else {
                panic!("accepted");
            };
            assert_eq!(s, StatusCode::CONFLICT);
            assert!(why.contains("--state-dir"), "{why}");
        }
    }

    #[tokio::test]
    async fn hostile_plugin_names_are_unknown_plugins_never_another_plugins_letters() {
        let (_dir, d) = with_letters().await;
        for name in [
            "team-a/../top",
            "team-a%2Fp",
            "team-a/p?plugin=top",
            "team-a/p ",
            " team-a/p",
            "team-a/",
            "/p",
            "",
            "..",
            "team-a/p\u{0}",
            "TEAM-A/P",
        ] {
            let Err(Refused(s, why)) = list_letters(Some(&d), None, Some(name)) else {
                panic!("`{name}` listed letters");
            };
            assert_eq!(s, StatusCode::NOT_FOUND, "{name}");
            assert_eq!(why.lines().count(), 1, "one line: {why:?}");
            let body = serde_json::json!({"plugin": name, "all": true}).to_string();
            assert_eq!(
                status(act(Some(&d), None, body.as_bytes(), Action::Drop)),
                StatusCode::NOT_FOUND,
                "{name}"
            );
        }
        // Nothing was dropped by any of them.
        assert_eq!(d.dead_letters(None).unwrap().len(), 3);
        let listed = list_letters(Some(&d), None, Some("team-a/p")).unwrap();
        assert_eq!(
            listed.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(),
            ["ns/a", "ns/b"]
        );
        assert_eq!(listed[0].at, "2023-11-14T22:13:20Z");
    }

    #[tokio::test]
    async fn malformed_bodies_are_bad_requests_saying_what_was_wrong() {
        let (_dir, d) = with_letters().await;
        for (body, says) in [
            (&b"not json"[..], "expected"),
            (br#"{"plugin": "top", "ids": ["1"]}"#, "expected"),
            (br#"{"plugin": "top", "ids": [-1]}"#, "expected"),
            (br#"{"plugin": "top", "ids": [1.5]}"#, "expected"),
            (
                br#"{"plugin": "top", "ids": [18446744073709551616]}"#,
                "expected",
            ),
            (br#"{"plugin": "top", "ids": "1,2"}"#, "expected"),
            (br#"{"plugin": "top"}"#, "`ids`"),
            (br#"{"plugin": "top", "ids": []}"#, "empty"),
            (br#"{"plugin": "top", "ids": [1], "all": true}"#, "not both"),
            (br#"{"plugin": 7, "all": true}"#, "expected"),
            (br#"{"ids": [1]}"#, "expected"),
            (br#"{"plugin": "top", "all": true, "extra": 1}"#, "expected"),
            (b"\xff\xfe", "expected"),
        ] {
            for action in [Action::Retry, Action::Drop] {
                let Err(Refused(s, why)) = act(Some(&d), None, body, action) else {
                    panic!("accepted {}", String::from_utf8_lossy(body));
                };
                assert_eq!(s, StatusCode::BAD_REQUEST, "{why}");
                assert!(why.contains(says), "{why}");
                assert_eq!(why.lines().count(), 1, "one line: {why:?}");
            }
        }
        let many = serde_json::json!({"plugin": "top", "ids": vec![1; MAX_IDS + 1]}).to_string();
        assert_eq!(
            status(act(Some(&d), None, many.as_bytes(), Action::Drop)),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(d.dead_letters(None).unwrap().len(), 3, "nothing dropped");
    }

    #[tokio::test]
    async fn drop_removes_the_named_letters_and_reports_ids_that_name_none() {
        let (_dir, d) = with_letters().await;
        let body = br#"{"plugin": "team-a/p", "ids": [2, 2, 3, 99]}"#;
        let out = act(Some(&d), None, body, Action::Drop).unwrap();
        assert_eq!(out.dropped, [2]);
        // Id 3 is `top`'s letter (ids count per plugin): not reachable through another plugin.
        assert_eq!(out.missing, [3, 99]);
        let left: Vec<u64> = d.dead_letters(None).unwrap().iter().map(|l| l.id).collect();
        assert_eq!(left, [1, 1], "team-a/p's 1 and top's 1");
        let all = act(
            Some(&d),
            None,
            br#"{"plugin": "top", "all": true}"#,
            Action::Drop,
        )
        .unwrap();
        assert_eq!(all.dropped, [1]);
        // A plugin whose last letter is gone and that is not loaded is unknown again.
        assert_eq!(
            status(list_letters(Some(&d), None, Some("top"))),
            StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn retry_needs_the_plugin_running() {
        let (_dir, d) = with_letters().await;
        let Err(Refused(s, why)) = act(
            Some(&d),
            None,
            br#"{"plugin": "team-a/p", "all": true}"#,
            Action::Retry,
        ) else {
            panic!("retried without a plugin");
        };
        assert_eq!(s, StatusCode::CONFLICT);
        assert!(why.contains("not running"), "{why}");
        assert_eq!(d.dead_letters(None).unwrap().len(), 3, "nothing taken");
    }
}
