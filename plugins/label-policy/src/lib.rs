//! `label-policy`: warns about objects missing required labels, and logs per-kind summaries.
//!
//! Config:
//! - `required = ["team", ...]`: labels every object must carry (at least one);
//! - `summary-every = N` (default 100; 0 = never): a summary after every N handled events;
//! - `resources = [{ api-version = "v1", kind = "ConfigMap" }, ...]` (optional): the kinds a summary
//!   covers; they must be watched by the manifest. Without it, a summary covers the kinds seen in
//!   events so far.
//! - `fix = true` (default false) with `defaults = { team = "unknown", ... }`: adds each missing
//!   label with its default by server-side apply (this plugin's field manager then owns just
//!   those labels), and records an Event on the object. The manifest must declare the writes:
//!   `[[write]]` with `verbs = ["apply"]` for each watched kind, and one for
//!   `events.k8s.io/v1` `Event` with `verbs = ["create"]`. The labelled object comes back as an
//!   update that passes the check, so fixing settles after one write per object.
//!
//! Each added, updated or resynced object missing required labels logs a warn line (labels come
//! from the host-parsed metadata, so this never parses the object):
//!
//! ```json
//! {"violation":{"kind":"ConfigMap","namespace":"default","name":"cfg"},"missing":["team"]}
//! ```
//!
//! A summary is an info line counting, per kind and required label, the cached objects without it
//! (`cache::list` with the selector `!label`, across all namespaces):
//!
//! ```json
//! {"summary":{"apps/v1/Deployment":{"missing:team":2},"v1/ConfigMap":{"missing:team":0}}}
//! ```
//!
//! Summaries are logged after every N-th handled event (any type, replays included), at the
//! start of each resync round (on a resync event that follows a non-resync event, so one burst
//! of resyncs yields one summary rather than one per object), and at each tick of the manifest's
//! `summary` schedule (`[[schedule]] name = "summary"`), which sees the cache however quiet the
//! cluster is.
//!
//! Each summary also sets the gauge `objects_missing_label{kind, label}` (on the host's
//! `/metrics` as `informant_plugin_objects_missing_label`, with the plugin's `plugin` and
//! `tenant` labels) to the counts it logs, so a dashboard or an alert can follow them.

use std::collections::{BTreeMap, BTreeSet};

use informant_sdk::kube::{self, Severity};
use informant_sdk::{Event, EventType, HandlerError, Plugin, Resource, cache, log, metrics};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The plugin's `[config]` table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    /// Labels every object must carry.
    pub required: Vec<String>,
    /// Log a summary after this many handled events; 0 never does.
    #[serde(default = "default_summary_every")]
    pub summary_every: u64,
    /// The kinds a summary covers; `None` covers the kinds seen so far.
    #[serde(default)]
    pub resources: Option<Vec<Kind>>,
    /// Add missing labels (with `defaults`) instead of only warning.
    #[serde(default)]
    pub fix: bool,
    /// The value `fix` gives each required label.
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
}

/// One kind in the config, as a manifest's `[[watch]]` names it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Kind {
    /// `v1`, `apps/v1`, ...
    pub api_version: String,
    /// `ConfigMap`, ...
    pub kind: String,
}

fn default_summary_every() -> u64 {
    100
}

/// The plugin instance.
pub struct LabelPolicy {
    required: Vec<String>,
    summary_every: u64,
    /// Configured kinds, or the kinds seen in events.
    kinds: BTreeSet<Resource>,
    fixed_kinds: bool,
    handled: u64,
    last_was_resync: bool,
    /// Labels to add, when fixing.
    fix: Option<BTreeMap<String, String>>,
}

#[derive(Serialize)]
struct Violation<'a> {
    violation: Object<'a>,
    missing: Vec<&'a str>,
}

#[derive(Serialize)]
struct Object<'a> {
    kind: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
}

#[derive(Serialize)]
struct Summary {
    summary: BTreeMap<String, BTreeMap<String, usize>>,
}

impl LabelPolicy {
    fn check(&self, ev: &Event) -> Result<(), HandlerError> {
        let meta = ev.meta();
        let missing: Vec<&str> = self
            .required
            .iter()
            .filter(|l| meta.label(l).is_none())
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let line = Violation {
            violation: Object {
                kind: &ev.resource().kind,
                namespace: meta.namespace(),
                name: meta.name(),
            },
            missing,
        };
        log::warn(&serde_json::to_string(&line)?);
        if let Some(defaults) = &self.fix {
            self.fix(ev, &line.missing, defaults)?;
        }
        Ok(())
    }

    /// Applies the missing labels (only them: the rest of the object is other managers') and
    /// records an Event saying so.
    fn fix(
        &self,
        ev: &Event,
        missing: &[&str],
        defaults: &BTreeMap<String, String>,
    ) -> Result<(), HandlerError> {
        let meta = ev.meta();
        let labels: BTreeMap<&str, &str> = missing
            .iter()
            .map(|l| (*l, defaults[*l].as_str()))
            .collect();
        let r = ev.resource();
        let object = serde_json::json!({
            "apiVersion": r.api_version(),
            "kind": r.kind,
            "metadata": {"name": meta.name(), "namespace": meta.namespace(), "labels": labels},
        });
        kube::raw::apply(r, meta.namespace(), meta.name(), &object.to_string(), false)?;
        let added: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        kube::event(
            ev,
            Severity::Normal,
            "MissingLabelsAdded",
            "Label",
            &format!("label-policy added {}", added.join(", ")),
        )?;
        Ok(())
    }

    fn summary(&self) -> Result<(), HandlerError> {
        let mut summary = BTreeMap::new();
        for r in &self.kinds {
            let mut counts = BTreeMap::new();
            for label in &self.required {
                let without = cache::list(r, None, Some(&format!("!{label}")))
                    .map_err(|e| format!("summary of {r}: {e}"))?;
                counts.insert(format!("missing:{label}"), without.len());
                metrics::gauge(
                    "objects_missing_label",
                    "Cached objects without a required label, by kind and label.",
                )
                .labels(&[("kind", &r.to_string()), ("label", label)])
                .set(without.len() as f64)
                .map_err(|e| format!("summary gauge: {e}"))?;
            }
            summary.insert(r.to_string(), counts);
        }
        log::info(&serde_json::to_string(&Summary { summary })?);
        Ok(())
    }
}

/// Whether `key` is a label key a `!key` selector accepts.
fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.matches('/').count() <= 1
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl Plugin for LabelPolicy {
    fn init(config: Value) -> Result<Self, HandlerError> {
        let config: Config =
            serde_json::from_value(config).map_err(|e| format!("label-policy config: {e}"))?;
        if config.required.is_empty() {
            return Err("label-policy config: `required` names no label".into());
        }
        if let Some(bad) = config.required.iter().find(|k| !valid_key(k)) {
            return Err(format!(
                "label-policy config: `required` has an invalid label key `{bad}`"
            )
            .into());
        }
        if config.fix
            && let Some(l) = config
                .required
                .iter()
                .find(|l| !config.defaults.contains_key(*l))
        {
            return Err(format!(
                "label-policy config: `fix` needs a value for `{l}` in `defaults`"
            )
            .into());
        }
        let fix = config.fix.then_some(config.defaults);
        let fixed_kinds = config.resources.is_some();
        let kinds = config
            .resources
            .unwrap_or_default()
            .iter()
            .map(|k| Resource::from_api_version(&k.api_version, k.kind.as_str()))
            .collect();
        Ok(LabelPolicy {
            required: config.required,
            summary_every: config.summary_every,
            kinds,
            fixed_kinds,
            handled: 0,
            last_was_resync: false,
            fix,
        })
    }

    fn on_added(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.after(ev, true)
    }

    fn on_updated(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.after(ev, true)
    }

    fn on_deleted(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.after(ev, false)
    }

    fn on_resync(&mut self, ev: &Event) -> Result<(), HandlerError> {
        self.after(ev, true)
    }

    fn on_schedule(&mut self, name: &str) -> Result<(), HandlerError> {
        match name {
            "summary" => self.summary(),
            other => Err(format!("label-policy has no schedule `{other}`").into()),
        }
    }
}

impl LabelPolicy {
    /// Checks the object if asked, then logs a summary when one is due.
    fn after(&mut self, ev: &Event, check: bool) -> Result<(), HandlerError> {
        if !self.fixed_kinds {
            self.kinds.insert(ev.resource().clone());
        }
        if check {
            self.check(ev)?;
        }
        self.handled += 1;
        let resync = ev.event_type() == EventType::Resync;
        let after_resync = std::mem::replace(&mut self.last_was_resync, resync);
        let round_starts = resync && !after_resync;
        let periodic = self.summary_every > 0 && self.handled.is_multiple_of(self.summary_every);
        if round_starts || periodic {
            self.summary()?;
        }
        Ok(())
    }
}

informant_sdk::export_plugin!(LabelPolicy);

#[cfg(test)]
mod tests {
    use informant_sdk::log::Level;
    use informant_sdk::testing::{EventBuilder, Harness};
    use serde_json::json;

    use super::*;

    fn config_map(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": name, "labels": labels}})
    }

    fn deployment(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "prod", "name": name, "labels": labels}})
    }

    fn harness(config: Value) -> Harness<LabelPolicy> {
        Harness::with_config(config).unwrap()
    }

    #[test]
    fn objects_missing_labels_are_reported_in_config_order() {
        let mut h = harness(json!({"required": ["team", "owner"]}));
        h.send(EventBuilder::added(&config_map("a", json!({"owner": "x"}))))
            .unwrap();
        h.send(EventBuilder::updated(
            &config_map("b", json!({})),
            &config_map("b", json!({"app": "y"})),
        ))
        .unwrap();
        h.send(EventBuilder::added(&config_map(
            "c",
            json!({"team": "t", "owner": "o"}),
        )))
        .unwrap();
        h.send(EventBuilder::deleted(&config_map("d", json!({}))))
            .unwrap();
        assert_eq!(
            h.logs(),
            [
                (
                    Level::Warn,
                    r#"{"violation":{"kind":"ConfigMap","namespace":"default","name":"a"},"missing":["team"]}"#.to_string()
                ),
                (
                    Level::Warn,
                    r#"{"violation":{"kind":"ConfigMap","namespace":"default","name":"b"},"missing":["team","owner"]}"#.to_string()
                ),
            ]
        );
    }

    #[test]
    fn every_nth_event_logs_a_summary_of_seen_kinds_from_the_cache() {
        let mut h = harness(json!({"required": ["team", "owner"], "summary-every": 3}));
        h.send(EventBuilder::added(&config_map("a", json!({"team": "t"}))))
            .unwrap();
        h.send(EventBuilder::added(&config_map(
            "b",
            json!({"team": "t", "owner": "o"}),
        )))
        .unwrap();
        h.send(EventBuilder::added(&deployment("web", json!({}))))
            .unwrap();
        let logs = h.take_logs();
        assert_eq!(logs.len(), 3, "{logs:?}");
        assert_eq!(
            logs[2],
            (
                Level::Info,
                r#"{"summary":{"apps/v1/Deployment":{"missing:owner":1,"missing:team":1},"v1/ConfigMap":{"missing:owner":1,"missing:team":0}}}"#.to_string()
            )
        );
        // The deleted Deployment has left the cache by the time the next summary counts.
        h.send(EventBuilder::deleted(&deployment("web", json!({}))))
            .unwrap();
        h.send(EventBuilder::deleted(&config_map(
            "a",
            json!({"team": "t"}),
        )))
        .unwrap();
        h.send(EventBuilder::added(&config_map(
            "c",
            json!({"team": "t", "owner": "o"}),
        )))
        .unwrap();
        assert_eq!(
            h.take_logs(),
            [(
                Level::Info,
                r#"{"summary":{"apps/v1/Deployment":{"missing:owner":0,"missing:team":0},"v1/ConfigMap":{"missing:owner":0,"missing:team":0}}}"#.to_string()
            )]
        );
    }

    #[test]
    fn a_resync_round_logs_one_summary_at_its_start() {
        let mut h =
            Harness::<LabelPolicy>::from_manifest(include_str!("../label-policy.toml")).unwrap();
        let (a, b) = (
            config_map("a", json!({})),
            config_map("b", json!({"team": "t"})),
        );
        h.send(EventBuilder::added(&a).initial()).unwrap();
        h.send(EventBuilder::added(&b).initial()).unwrap();
        h.take_logs();
        h.send(EventBuilder::resync(&a)).unwrap();
        h.send(EventBuilder::resync(&b)).unwrap();
        let summary = r#"{"summary":{"apps/v1/Deployment":{"missing:team":0},"v1/ConfigMap":{"missing:team":1}}}"#;
        let violation = r#"{"violation":{"kind":"ConfigMap","namespace":"default","name":"a"},"missing":["team"]}"#;
        assert_eq!(
            h.take_logs(),
            [
                (Level::Warn, violation.to_string()),
                (Level::Info, summary.to_string()),
            ]
        );
        h.send(EventBuilder::updated(&b, &b)).unwrap();
        h.send(EventBuilder::resync(&b)).unwrap();
        assert_eq!(h.take_logs(), [(Level::Info, summary.to_string())]);
    }

    #[test]
    fn summarising_an_unwatched_kind_is_an_error() {
        let manifest = r#"
            [[watch]]
            api-version = "v1"
            kind = "ConfigMap"
            [config]
            required = ["team"]
            summary-every = 1
            resources = [{ api-version = "v1", kind = "Secret" }]
        "#;
        let mut h = Harness::<LabelPolicy>::from_manifest(manifest).unwrap();
        let err = h
            .send(EventBuilder::added(&config_map("a", json!({"team": "t"}))))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("summary of v1/Secret: not watched"),
            "{err}"
        );
    }

    const FIXING: &str = r#"
        [[watch]]
        api-version = "apps/v1"
        kind = "Deployment"
        [[write]]
        api-version = "apps/v1"
        kind = "Deployment"
        verbs = ["apply"]
        [[write]]
        api-version = "events.k8s.io/v1"
        kind = "Event"
        verbs = ["create"]
        [config]
        required = ["team", "tier"]
        fix = true
        defaults = { team = "unknown", tier = "none" }
    "#;

    #[test]
    fn fix_applies_only_the_missing_labels_and_records_an_event() {
        let mut h = Harness::<LabelPolicy>::from_manifest(FIXING).unwrap();
        h.send(EventBuilder::added(&deployment(
            "web",
            json!({"tier": "db"}),
        )))
        .unwrap();
        let writes = h.take_writes();
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert_eq!(
            (
                writes[0].verb,
                writes[0].name.as_deref(),
                writes[0].namespace.as_deref()
            ),
            ("apply", Some("web"), Some("prod"))
        );
        let applied: Value = serde_json::from_str(&writes[0].body).unwrap();
        assert_eq!(
            applied,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "prod", "labels": {"team": "unknown"}}})
        );
        assert_eq!(writes[1].verb, "record-event");
        let event: Value = serde_json::from_str(&writes[1].body).unwrap();
        assert_eq!(event["reason"], "MissingLabelsAdded");
        assert_eq!(event["note"], "label-policy added team=unknown");
        assert_eq!(event["regarding"]["name"], "web");
        // Labelled: nothing more to do, so fixing settles.
        h.send(EventBuilder::updated(
            &deployment("web", json!({"tier": "db"})),
            &deployment("web", json!({"tier": "db", "team": "unknown"})),
        ))
        .unwrap();
        assert!(h.writes().is_empty());
    }

    #[test]
    fn fixing_an_undeclared_kind_fails_the_event() {
        let mut h = Harness::<LabelPolicy>::from_manifest(&FIXING.replace(
            "kind = \"Deployment\"\n        verbs",
            "kind = \"StatefulSet\"\n        verbs",
        ))
        .unwrap();
        let err = h
            .send(EventBuilder::added(&deployment("web", json!({}))))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`apply` of `apps/v1/Deployment` in namespace `prod` is not declared"),
            "{err}"
        );
    }

    #[test]
    fn bad_config_is_refused_with_a_reason() {
        let err = |c: Value| {
            Harness::<LabelPolicy>::with_config(c)
                .err()
                .unwrap()
                .to_string()
        };
        assert!(err(json!({})).contains("missing field `required`"));
        assert!(err(json!({"required": []})).contains("names no label"));
        assert!(err(json!({"required": ["a b"]})).contains("invalid label key `a b`"));
        assert!(err(json!({"required": ["t"], "summary-every": -1})).contains("expected u64"));
        assert!(
            err(json!({"required": ["t", "u"], "fix": true, "defaults": {"t": "x"}}))
                .contains("`fix` needs a value for `u` in `defaults`")
        );
    }

    #[test]
    fn the_summary_schedule_logs_a_summary_and_sets_the_gauges() {
        let mut h = harness(json!({"required": ["team"], "summary-every": 0,
            "resources": [{"api-version": "v1", "kind": "ConfigMap"}]}));
        h.cache_mut()
            .insert(&config_map("a", json!({"team": "t"})))
            .unwrap();
        h.cache_mut().insert(&config_map("b", json!({}))).unwrap();
        h.tick("summary").unwrap();
        assert_eq!(
            h.take_logs(),
            [(
                Level::Info,
                r#"{"summary":{"v1/ConfigMap":{"missing:team":1}}}"#.to_string()
            )]
        );
        let labels = [("kind", "v1/ConfigMap"), ("label", "team")];
        assert_eq!(h.metric_value("objects_missing_label", &labels), Some(1.0));
        h.cache_mut().insert(&config_map("c", json!({}))).unwrap();
        h.tick("summary").unwrap();
        assert_eq!(h.metric_value("objects_missing_label", &labels), Some(2.0));
        assert!(h.tick("other").is_err());
    }
}
