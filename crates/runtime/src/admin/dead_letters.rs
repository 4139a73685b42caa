//! `/dead-letters`: the events plugins failed for good, kept in the state directory (see
//! [`crate::plugin::exec::dead_letter`]), listed, re-driven or dropped by an operator.
//!
//! | route | answer |
//! |---|---|
//! | `GET /dead-letters[?plugin=P][&limit=N][&continue=TOKEN]` | `{"dead_letters": [DeadLetter, ...], "continue": TOKEN}`: one page, in order of plugin then id; `continue` (absent on the last page) asks for the next |
//! | `POST /dead-letters/retry` | body `{"plugin": P, "ids": [..]}` or `{"plugin": P, "all": true}`: each letter's object delivered again as the cache has it now; `{"plugin", "retried", "kept": [{"id", "reason"}], "missing"}` |
//! | `POST /dead-letters/drop` | the same body: the letters removed; `{"plugin", "dropped", "missing"}` |
//!
//! Contract:
//! - `P` is a plugin id exactly as `/plugins` and `/metrics` show it (`tenant/name`, or `name`
//!   for a top-level plugin): nothing in it is decoded or resolved, so no spelling of a path
//!   reaches another plugin's letters. A plugin neither loaded, waiting nor holding letters is
//!   `404`.
//! - A caller sees the letters of the tenants it may read (see [`super::auth`]); a plugin of
//!   any other tenant is the same `404` as a missing one. Retrying and dropping need `update`
//!   on the plugin's tenant (`403` otherwise, before anything is looked up).
//! - A page holds at most `limit` letters ([`DEFAULT_LIMIT`] when not given, at most
//!   [`MAX_LIMIT`]). Pages are cut by key, not by position: following the `continue` tokens
//!   lists every letter present throughout exactly once, whatever is retried, dropped or added
//!   meanwhile. A token only says where to resume, so a forged one can only skip letters of the
//!   caller's own view, never widen it.
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
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use informant_state::tenant_of;

use super::AdminState;
use super::auth::Access;
use super::scope::Scope;
use crate::durable::Durable;
use crate::plugin::load::loader::PluginHost;
use crate::plugin::text::escape_controls;
use informant_state::DeadLetter;

/// Most ids one request may name.
pub(crate) const MAX_IDS: usize = 10_000;

/// Letters in a page when the request gives no `limit`.
pub(crate) const DEFAULT_LIMIT: usize = 500;

/// Most letters in one page, whatever the request asks.
pub(crate) const MAX_LIMIT: usize = 5_000;

/// One page of `GET /dead-letters`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Page {
    /// The letters, in order of plugin then id.
    pub dead_letters: Vec<DeadLetter>,
    /// Where the next page starts; absent on the last one.
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
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
    limit: Option<String>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
}

pub(super) async fn list(
    State(state): State<Arc<AdminState>>,
    access: Access,
    Query(q): Query<ListQuery>,
) -> Response {
    let scope = match access.read(&state).await {
        Ok(scope) => scope,
        Err(r) => return r.into_response(),
    };
    let host = state.host().map(Arc::as_ref);
    let listed = (|| {
        let limit = limit(q.limit.as_deref())?;
        let after = q.continue_token.as_deref().map(resume_at).transpose()?;
        if let Some(p) = &q.plugin
            && !scope.sees_tenant(tenant_of(p))
        {
            // Exactly what a plugin that does not exist gets: no existence oracle.
            need_state(durable_of(host))?;
            return Err(unknown_plugin(p));
        }
        let letters = list_letters(durable_of(host), host, q.plugin.as_deref())?;
        Ok(page(letters, &scope, limit, after))
    })();
    match listed {
        Ok(page) => Json(page).into_response(),
        Err(r) => r.into_response(),
    }
}

pub(super) async fn retry(
    State(state): State<Arc<AdminState>>,
    access: Access,
    body: Bytes,
) -> Response {
    act_as(&state, &access, &body, Action::Retry).await
}

pub(super) async fn drop_letters(
    State(state): State<Arc<AdminState>>,
    access: Access,
    body: Bytes,
) -> Response {
    act_as(&state, &access, &body, Action::Drop).await
}

/// `act`, once the caller is known to hold `update` on the plugin's tenant.
async fn act_as(state: &AdminState, access: &Access, body: &[u8], action: Action) -> Response {
    let host = state.host().map(Arc::as_ref);
    // A malformed body is refused first: saying so reveals nothing about any plugin or host.
    let s = match selection(body) {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    if let Err(r) = access
        .update(state, tenant_of(&s.plugin), "dead letters")
        .await
    {
        return r.into_response();
    }
    respond(act(durable_of(host), host, &s, action))
}

/// The page size `limit` asks for: [`DEFAULT_LIMIT`] without one, at most [`MAX_LIMIT`].
fn limit(asked: Option<&str>) -> Result<usize, Refused> {
    let Some(asked) = asked else {
        return Ok(DEFAULT_LIMIT);
    };
    match asked.parse::<usize>() {
        Ok(0) | Err(_) => Err(refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "`limit` is a number of letters from 1 to {MAX_LIMIT}, not `{}`",
                escape_controls(asked)
            ),
        )),
        Ok(n) => Ok(n.min(MAX_LIMIT)),
    }
}

/// The key a `continue` token resumes after: (plugin, id).
fn resume_at(token: &str) -> Result<(String, u64), Refused> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<(String, u64)>(&bytes).ok())
        .ok_or_else(|| {
            refuse(
                StatusCode::BAD_REQUEST,
                "`continue` is not a token this server gave: start again without it",
            )
        })
}

fn continue_token(plugin: &str, id: u64) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::json!([plugin, id]).to_string())
}

/// The letters `scope` sees after `after`, at most `limit` of them, and where the next page
/// starts if any are left.
fn page(
    mut letters: Vec<DeadLetter>,
    scope: &Scope,
    limit: usize,
    after: Option<(String, u64)>,
) -> Page {
    letters.retain(|l| scope.sees_tenant(tenant_of(&l.plugin)));
    letters.sort_by(|a, b| (&a.plugin, a.id).cmp(&(&b.plugin, b.id)));
    if let Some((plugin, id)) = &after {
        letters.retain(|l| (&l.plugin, l.id) > (plugin, *id));
    }
    let more = letters.len() > limit;
    letters.truncate(limit);
    let continue_token = more
        .then(|| letters.last().map(|l| continue_token(&l.plugin, l.id)))
        .flatten();
    Page {
        dead_letters: letters,
        continue_token,
    }
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
        return Err(unknown_plugin(plugin));
    }
    Ok(letters)
}

/// The `404` of a plugin neither loaded, waiting nor holding letters (or not the caller's).
fn unknown_plugin(plugin: &str) -> Refused {
    refuse(
        StatusCode::NOT_FOUND,
        format!(
            "no plugin `{}` is loaded, waiting or holding dead letters (see /plugins)",
            escape_controls(plugin)
        ),
    )
}

/// The letters of `plugin`, or of every plugin.
pub(super) fn list_letters(
    durable: Option<&Arc<Durable>>,
    host: Option<&PluginHost>,
    plugin: Option<&str>,
) -> Result<Vec<DeadLetter>, Refused> {
    let durable = need_state(durable)?;
    let letters = match plugin {
        Some(p) => known(durable, host, p)?,
        None => durable.dead_letters(None).map_err(stored)?,
    };
    Ok(letters)
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

/// Retries or drops the letters `s` selects.
pub(super) fn act(
    durable: Option<&Arc<Durable>>,
    host: Option<&PluginHost>,
    s: &Selection,
    action: Action,
) -> Result<Outcome, Refused> {
    let durable = need_state(durable)?;
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

    /// [`act`] on what `body` selects, as the route parses it.
    fn act_on(
        durable: Option<&Arc<Durable>>,
        host: Option<&PluginHost>,
        body: &[u8],
        action: Action,
    ) -> Result<Outcome, Refused> {
        act(durable, host, &selection(body)?, action)
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
            let Err(Refused(s, why)) = act_on(None, None, body, action) else {
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
                status(act_on(Some(&d), None, body.as_bytes(), Action::Drop)),
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
        // Shown with its time in RFC 3339, as the route's JSON has it.
        let shown = serde_json::to_value(&listed[0]).unwrap();
        assert_eq!(shown["at"], "2023-11-14T22:13:20Z");
        let back: DeadLetter = serde_json::from_value(shown).unwrap();
        assert_eq!(back, listed[0]);
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
                let Err(Refused(s, why)) = act_on(Some(&d), None, body, action) else {
                    panic!("accepted {}", String::from_utf8_lossy(body));
                };
                assert_eq!(s, StatusCode::BAD_REQUEST, "{why}");
                assert!(why.contains(says), "{why}");
                assert_eq!(why.lines().count(), 1, "one line: {why:?}");
            }
        }
        let many = serde_json::json!({"plugin": "top", "ids": vec![1; MAX_IDS + 1]}).to_string();
        assert_eq!(
            status(act_on(Some(&d), None, many.as_bytes(), Action::Drop)),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(d.dead_letters(None).unwrap().len(), 3, "nothing dropped");
    }

    #[tokio::test]
    async fn drop_removes_the_named_letters_and_reports_ids_that_name_none() {
        let (_dir, d) = with_letters().await;
        let body = br#"{"plugin": "team-a/p", "ids": [2, 2, 3, 99]}"#;
        let out = act_on(Some(&d), None, body, Action::Drop).unwrap();
        assert_eq!(out.dropped, [2]);
        // Id 3 is `top`'s letter (ids count per plugin): not reachable through another plugin.
        assert_eq!(out.missing, [3, 99]);
        let left: Vec<u64> = d.dead_letters(None).unwrap().iter().map(|l| l.id).collect();
        assert_eq!(left, [1, 1], "team-a/p's 1 and top's 1");
        let all = act_on(
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

    fn shown(plugin: &str, id: u64) -> DeadLetter {
        let mut l = letter(plugin, &format!("ns/{id}"));
        l.id = id;
        l
    }

    /// Every page of `all` as `scope` sees it, `limit` at a time; `between` runs after each
    /// page on what is left to list.
    fn pages(
        all: &mut Vec<DeadLetter>,
        scope: &Scope,
        limit: usize,
        mut between: impl FnMut(&mut Vec<DeadLetter>),
    ) -> Vec<(String, u64)> {
        let mut seen = Vec::new();
        let mut after = None;
        for _ in 0..1000 {
            let page = page(all.clone(), scope, limit, after.take());
            assert!(page.dead_letters.len() <= limit);
            seen.extend(page.dead_letters.iter().map(|l| (l.plugin.clone(), l.id)));
            let Some(token) = page.continue_token else {
                return seen;
            };
            after = Some(resume_at(&token).unwrap());
            between(all);
        }
        panic!("paging never ended");
    }

    #[test]
    fn pages_list_every_letter_present_throughout_exactly_once() {
        let mut all: Vec<DeadLetter> = ["team-a/p", "team-b/q", "top"]
            .iter()
            .flat_map(|p| (1..=7).map(move |id| shown(p, id)))
            .collect();
        // Shuffled as a store may hand them: pages follow the key order regardless.
        all.reverse();
        let everything = pages(&mut all.clone(), &Scope::Everything, 4, |_| {});
        assert_eq!(everything.len(), 21);
        let mut sorted = everything.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, everything, "in key order, none twice");

        // Letters dropped and added between pages: what stays throughout is listed once.
        let mut added = 100;
        let listed = pages(&mut all, &Scope::Everything, 3, |left| {
            left.retain(|l| !(l.plugin == "team-b/q" && l.id % 2 == 0));
            left.push(shown("team-a/p", added));
            added += 1;
        });
        let mut unique = listed.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), listed.len(), "none twice: {listed:?}");
        for id in [1, 3, 5, 7] {
            assert!(listed.contains(&("team-b/q".into(), id)), "{id}");
        }
        for id in 1..=7 {
            assert!(listed.contains(&("top".into(), id)), "{id}");
            assert!(listed.contains(&("team-a/p".into(), id)), "{id}");
        }
    }

    #[test]
    fn a_tenant_pages_through_its_own_letters_and_no_token_widens_that() {
        let all: Vec<DeadLetter> = ["team-a/p", "team-a/r", "team-ab/x", "team-b/q", "top"]
            .iter()
            .flat_map(|p| (1..=3).map(move |id| shown(p, id)))
            .collect();
        let a = Scope::Tenants(["team-a".to_string()].into());
        let listed = pages(&mut all.clone(), &a, 2, |_| {});
        assert_eq!(listed.len(), 6);
        assert!(
            listed.iter().all(|(p, _)| tenant_of(p) == "team-a"),
            "{listed:?}"
        );
        // A forged position anywhere, before or after the tenant's letters, only moves the
        // start within the tenant's own view.
        for (plugin, id) in [
            ("", 0),
            ("team-b/q", 0),
            ("top", 99),
            ("team-a/p", 2),
            ("\u{10ffff}", 0),
        ] {
            let page = page(all.clone(), &a, 100, Some((plugin.to_string(), id)));
            assert!(
                page.dead_letters
                    .iter()
                    .all(|l| tenant_of(&l.plugin) == "team-a"),
                "{plugin}"
            );
        }
        assert_eq!(tenant_of("team-a/../team-b/q"), "team-a");
        assert_eq!(tenant_of("top"), "");
        assert_eq!(tenant_of("/p"), "");
    }

    #[test]
    fn limits_and_tokens_that_are_not_ours_are_bad_requests() {
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
        assert_eq!(limit(Some("7")).unwrap(), 7);
        assert_eq!(limit(Some("999999999")).unwrap(), MAX_LIMIT);
        for bad in ["0", "-1", "1.5", "", "ten", "1e3", " 5"] {
            assert_eq!(status(limit(Some(bad))), StatusCode::BAD_REQUEST, "{bad:?}");
        }
        for bad in ["", "!!", "bm9wZQ", &URL_SAFE_NO_PAD.encode(b"[1, \"p\"]")] {
            let Err(Refused(s, why)) = resume_at(bad) else {
                panic!("{bad:?} accepted");
            };
            assert_eq!(s, StatusCode::BAD_REQUEST);
            assert_eq!(why.lines().count(), 1);
        }
        let token = continue_token("team-a/p", 42);
        assert_eq!(resume_at(&token).unwrap(), ("team-a/p".to_string(), 42));
    }

    #[tokio::test]
    async fn retry_needs_the_plugin_running() {
        let (_dir, d) = with_letters().await;
        let Err(Refused(s, why)) = act_on(
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
