//! `kubediff`: one JSON log line per event, with a field-level diff for updates.
//!
//! Works for any watched kind, custom resources included, since it reads objects as plain JSON.
//! Each event logs at info level:
//!
//! ```json
//! {"event":"updated","apiVersion":"apps/v1","kind":"Deployment","namespace":"default","name":"web",
//!  "changes":[{"path":"/spec/replicas","old":1,"new":3}]}
//! ```
//!
//! `namespace` is `null` for cluster-scoped objects; `changes` appears on updates only. Paths are
//! JSON pointers. Objects are compared key by key and arrays index by index, so a grown or shrunk
//! array reports each extra element: an added field or element has only `new`, a removed one only
//! `old`. `metadata.resourceVersion` and `metadata.managedFields` never count as changes.
//!
//! Config: `ignore-status = true` also ignores everything under `/status`, and then an update with
//! no remaining change logs nothing. Without it every update logs a line, possibly with no changes.
//!
//! Sinks (each optional; its origin must be in the manifest's `allowed-outbound-hosts`):
//! - `webhook-url`: each record is POSTed there as the same JSON;
//! - `slack-webhook-url`: a Slack incoming-webhook payload, a `text` summary with the changes in
//!   a code block.
//!
//! A sink that fails (no answer, or a status other than 2xx) makes the event a retry: the host
//! redelivers the object's latest state after a backoff (the manifest's `[retry]`), and past its
//! attempts counts the event failed. A retried event is posted to every sink again, so a sink
//! that had taken it sees it twice: delivery is at least once. `sink-timeout-ms` (default 2000)
//! bounds each request; keep the manifest's `deadline-ms` above the sum.

use std::time::Duration;

use informant_sdk::{Event, HandlerError, Plugin, http, log};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Paths that change on every write without saying anything about the object.
const ALWAYS_IGNORED: [&str; 2] = ["/metadata/resourceVersion", "/metadata/managedFields"];

/// The plugin's `[config]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    /// Ignore `/status` and skip updates left without changes.
    #[serde(default)]
    pub ignore_status: bool,
    /// POST each record here as JSON.
    pub webhook_url: Option<String>,
    /// POST each record here as a Slack incoming-webhook message.
    pub slack_webhook_url: Option<String>,
    /// Bound of each request, in milliseconds.
    pub sink_timeout_ms: Option<u64>,
}

/// The plugin instance: only its config, since every line is computed from the event alone.
pub struct KubeDiff {
    config: Config,
}

/// One changed location.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// JSON pointer to the changed location.
    pub path: String,
    /// The previous value; absent when the location is new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The new value; absent when the location was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    event: &'a str,
    api_version: String,
    kind: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<Change>>,
}

impl KubeDiff {
    fn report(&self, ev: &Event, changes: Option<Vec<Change>>) -> Result<(), HandlerError> {
        let line = Line {
            event: ev.event_type().as_str(),
            api_version: ev.resource().api_version(),
            kind: &ev.resource().kind,
            namespace: ev.meta().namespace(),
            name: ev.meta().name(),
            changes,
        };
        let json = serde_json::to_string(&line)?;
        log::info(&json);
        self.post(&line, &json)
    }

    /// Sends the record to each configured sink; a failure asks for a retry.
    fn post(&self, line: &Line<'_>, json: &str) -> Result<(), HandlerError> {
        let timeout = Duration::from_millis(self.config.sink_timeout_ms.unwrap_or(2000));
        if let Some(url) = &self.config.webhook_url {
            // The logged text itself, fields in the documented order.
            sent(http::send("POST", url, JSON, json.as_bytes(), timeout))?;
        }
        if let Some(url) = &self.config.slack_webhook_url {
            let record = serde_json::to_value(line)?;
            sent(http::post_json(url, &slack_message(&record), timeout))?;
        }
        Ok(())
    }

    fn ignored(&self, path: &str) -> bool {
        let under = |prefix: &str| {
            path == prefix
                || path
                    .strip_prefix(prefix)
                    .is_some_and(|r| r.starts_with('/'))
        };
        ALWAYS_IGNORED.iter().any(|p| under(p)) || (self.config.ignore_status && under("/status"))
    }
}

impl Plugin for KubeDiff {
    fn init(config: Value) -> Result<Self, HandlerError> {
        let config = serde_json::from_value(config).map_err(|e| format!("kubediff config: {e}"))?;
        Ok(KubeDiff { config })
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.report(ev, None)
    }

    fn on_updated(&mut self, ev: &Event) -> Result<(), HandlerError> {
        let new: Value = ev.value()?;
        let old: Value = ev
            .old_object()?
            .ok_or("updated event without an old object")?;
        let mut changes = Vec::new();
        diff(
            &old,
            &new,
            &mut String::new(),
            &|p| self.ignored(p),
            &mut changes,
        );
        if changes.is_empty() && self.config.ignore_status {
            return Ok(());
        }
        self.report(ev, Some(changes))
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.report(ev, None)
    }

    fn on_resync(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.report(ev, None)
    }
}

informant_sdk::export_plugin!(KubeDiff);

const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

/// A sink's answer as the handler's result: anything but a 2xx asks for a retry.
fn sent(answer: Result<http::Response, http::HttpError>) -> Result<(), HandlerError> {
    match answer {
        Ok(r) if (200..300).contains(&r.status) => Ok(()),
        Ok(r) => Err(HandlerError::retry(format!("sink answered {}", r.status))),
        Err(e) => Err(HandlerError::retry(format!("sink unreachable: {e}"))),
    }
}

/// A Slack incoming-webhook payload for a record: a one-line summary, and the changes (if any)
/// as JSON in a code block.
pub fn slack_message(record: &Value) -> Value {
    let text = |k: &str| record[k].as_str().unwrap_or_default();
    let object = match record["namespace"].as_str() {
        Some(ns) => format!("{ns}/{}", text("name")),
        None => text("name").to_string(),
    };
    let mut message = format!(
        "*{}* {} {} `{object}`",
        text("event"),
        text("apiVersion"),
        text("kind")
    );
    if let Some(changes) = record.get("changes") {
        let pretty = serde_json::to_string_pretty(changes).unwrap_or_default();
        message.push_str(&format!("\n```{pretty}```"));
    }
    serde_json::json!({ "text": message })
}

/// Appends to `out` the changes from `old` to `new` below `path`, skipping ignored paths.
pub fn diff(
    old: &Value,
    new: &Value,
    path: &mut String,
    ignored: &dyn Fn(&str) -> bool,
    out: &mut Vec<Change>,
) {
    if ignored(path) || old == new {
        return;
    }
    let base = path.len();
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                push_segment(path, k);
                match (o.get(k), n.get(k)) {
                    (Some(a), Some(b)) => diff(a, b, path, ignored, out),
                    (a, b) => leaf(path, a, b, ignored, out),
                }
                path.truncate(base);
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            for i in 0..o.len().max(n.len()) {
                push_segment(path, &i.to_string());
                match (o.get(i), n.get(i)) {
                    (Some(a), Some(b)) => diff(a, b, path, ignored, out),
                    (a, b) => leaf(path, a, b, ignored, out),
                }
                path.truncate(base);
            }
        }
        _ => leaf(path, Some(old), Some(new), ignored, out),
    }
}

fn leaf(
    path: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    ignored: &dyn Fn(&str) -> bool,
    out: &mut Vec<Change>,
) {
    if !ignored(path) {
        out.push(Change {
            path: path.to_string(),
            old: old.cloned(),
            new: new.cloned(),
        });
    }
}

/// Appends `/segment`, escaped as RFC 6901 asks (`~` as `~0`, `/` as `~1`).
fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
}

#[cfg(test)]
mod tests {
    use informant_sdk::log::Level;
    use informant_sdk::testing::{EventBuilder, Harness};
    use serde_json::json;

    use super::*;

    fn deployment(replicas: u32, rv: &str, ready: u32) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "default", "name": "web", "uid": "u1", "resourceVersion": rv,
                "labels": {"app.kubernetes.io/name": "web"},
                "managedFields": [{"manager": "kubectl", "time": rv}]},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "image": "web:1"}]}}},
            "status": {"readyReplicas": ready}
        })
    }

    fn infos(h: &mut Harness<KubeDiff>) -> Vec<Value> {
        h.take_logs()
            .into_iter()
            .map(|(level, line)| {
                assert_eq!(level, Level::Info);
                serde_json::from_str(&line).unwrap()
            })
            .collect()
    }

    #[test]
    fn added_deleted_and_resync_log_identity_only() {
        let mut h = Harness::<KubeDiff>::new("{}").unwrap();
        let d = deployment(1, "1", 0);
        h.send(EventBuilder::added(&d)).unwrap();
        h.send(EventBuilder::resync(&d)).unwrap();
        h.send(EventBuilder::deleted(&d).final_state_unknown())
            .unwrap();
        let logs = h.logs();
        assert_eq!(
            logs[0].1,
            r#"{"event":"added","apiVersion":"apps/v1","kind":"Deployment","namespace":"default","name":"web"}"#
        );
        let events: Vec<_> = infos(&mut h).iter().map(|l| l["event"].clone()).collect();
        assert_eq!(events, [json!("added"), json!("resync"), json!("deleted")]);
    }

    #[test]
    fn cluster_scoped_custom_resources_have_null_namespace() {
        let mut h = Harness::<KubeDiff>::new("{}").unwrap();
        let crd_obj = json!({"apiVersion": "example.com/v1alpha1", "kind": "Widget", "metadata": {"name": "w"}});
        h.send(EventBuilder::added(&crd_obj)).unwrap();
        assert_eq!(
            h.logs()[0].1,
            r#"{"event":"added","apiVersion":"example.com/v1alpha1","kind":"Widget","namespace":null,"name":"w"}"#
        );
    }

    #[test]
    fn updates_list_changed_paths_ignoring_resource_version_and_managed_fields() {
        let mut h = Harness::<KubeDiff>::new("{}").unwrap();
        let old = deployment(1, "1", 1);
        let new = deployment(3, "2", 2);
        h.send(EventBuilder::updated(&old, &new)).unwrap();
        assert_eq!(
            h.logs()[0].1,
            concat!(
                r#"{"event":"updated","apiVersion":"apps/v1","kind":"Deployment","namespace":"default","name":"web","#,
                r#""changes":[{"path":"/spec/replicas","old":1,"new":3},{"path":"/status/readyReplicas","old":1,"new":2}]}"#
            )
        );
    }

    #[test]
    fn managed_fields_are_ignored_even_if_the_host_kept_them() {
        let old = deployment(1, "1", 1);
        let mut new = old.clone();
        new["metadata"]["managedFields"] = json!([{"manager": "other"}]);
        new["metadata"]["resourceVersion"] = json!("9");
        let kd = KubeDiff {
            config: Config::default(),
        };
        let mut out = Vec::new();
        diff(&old, &new, &mut String::new(), &|p| kd.ignored(p), &mut out);
        assert_eq!(out, []);
    }

    #[test]
    fn arrays_compare_by_index_and_report_length_changes_with_escaped_keys() {
        let mut h = Harness::<KubeDiff>::new("{}").unwrap();
        let old = deployment(1, "1", 1);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "app", "image": "web:2"}, {"name": "sidecar", "image": "proxy"}]);
        new["metadata"]["labels"]["app.kubernetes.io/name"] = json!("web2");
        new["metadata"]["labels"]["tier"] = json!("front");
        h.send(EventBuilder::updated(&old, &new)).unwrap();
        let line = &infos(&mut h)[0];
        assert_eq!(
            line["changes"],
            json!([
                {"path": "/metadata/labels/app.kubernetes.io~1name", "old": "web", "new": "web2"},
                {"path": "/metadata/labels/tier", "new": "front"},
                {"path": "/spec/template/spec/containers/0/image", "old": "web:1", "new": "web:2"},
                {"path": "/spec/template/spec/containers/1", "new": {"name": "sidecar", "image": "proxy"}},
            ])
        );
        h.send(EventBuilder::updated(&new, &old)).unwrap();
        let line = &infos(&mut h)[0];
        assert_eq!(
            line["changes"][3],
            json!({"path": "/spec/template/spec/containers/1", "old": {"name": "sidecar", "image": "proxy"}})
        );
        assert_eq!(
            line["changes"][1],
            json!({"path": "/metadata/labels/tier", "old": "front"})
        );
    }

    #[test]
    fn type_changes_and_nulls_are_leaf_changes() {
        let mut out = Vec::new();
        diff(
            &json!({"a": {"b": 1}, "c": null}),
            &json!({"a": [1], "c": 2}),
            &mut String::new(),
            &|_| false,
            &mut out,
        );
        assert_eq!(
            out,
            [
                Change {
                    path: "/a".into(),
                    old: Some(json!({"b": 1})),
                    new: Some(json!([1]))
                },
                Change {
                    path: "/c".into(),
                    old: Some(Value::Null),
                    new: Some(json!(2))
                },
            ]
        );
    }

    #[test]
    fn ignore_status_drops_status_and_skips_empty_updates() {
        let mut h = Harness::<KubeDiff>::from_manifest(include_str!("../kubediff.toml")).unwrap();
        h.send(EventBuilder::updated(
            &deployment(1, "1", 0),
            &deployment(1, "2", 1),
        ))
        .unwrap();
        assert_eq!(h.logs(), []);
        h.send(EventBuilder::updated(
            &deployment(1, "2", 1),
            &deployment(2, "3", 0),
        ))
        .unwrap();
        assert_eq!(
            infos(&mut h)[0]["changes"],
            json!([{"path": "/spec/replicas", "old": 1, "new": 2}])
        );
    }

    #[test]
    fn without_ignore_status_status_only_updates_still_log() {
        let mut h = Harness::<KubeDiff>::new(r#"{"ignore-status": false}"#).unwrap();
        let old = deployment(1, "1", 0);
        h.send(EventBuilder::updated(&old, &old)).unwrap();
        assert_eq!(infos(&mut h)[0]["changes"], json!([]));
    }

    #[test]
    fn bad_config_is_refused_with_a_reason() {
        let err = Harness::<KubeDiff>::new(r#"{"ignore-stats": true}"#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("unknown field `ignore-stats`"), "{err}");
        let err = Harness::<KubeDiff>::new(r#"{"ignore-status": "yes"}"#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.starts_with("kubediff config:"), "{err}");
    }

    #[test]
    fn slack_messages_summarise_and_quote_the_changes() {
        let record = json!({"event": "updated", "apiVersion": "apps/v1", "kind": "Deployment",
            "namespace": "default", "name": "web",
            "changes": [{"path": "/spec/replicas", "old": 1, "new": 3}]});
        let text = slack_message(&record)["text"].as_str().unwrap().to_string();
        assert!(
            text.starts_with("*updated* apps/v1 Deployment `default/web`\n```[\n"),
            "{text}"
        );
        assert!(text.contains(r#""path": "/spec/replicas""#) && text.ends_with("]```"));
        let cluster = json!({"event": "added", "apiVersion": "v1", "kind": "Namespace",
            "namespace": null, "name": "team-a"});
        assert_eq!(
            slack_message(&cluster),
            json!({"text": "*added* v1 Namespace `team-a`"})
        );
    }

    #[test]
    fn a_sink_that_cannot_be_reached_asks_for_a_retry() {
        // Natively there is no host to send through: the SDK's http fails, as a down sink would.
        let mut h =
            Harness::<KubeDiff>::new(r#"{"webhook-url": "http://127.0.0.1:9/hook"}"#).unwrap();
        let err = h
            .send(EventBuilder::added(&deployment(1, "1", 0)))
            .unwrap_err();
        let retry = err.as_retry().expect("a retry");
        assert!(
            retry
                .reason
                .starts_with("sink unreachable: POST http://127.0.0.1:9/hook: not sent"),
            "{err:?}"
        );
        assert_eq!(h.retry(), Some(retry));
        assert_eq!(
            infos(&mut h).len(),
            1,
            "the record is logged before it is posted"
        );
    }
}
