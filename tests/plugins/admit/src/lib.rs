//! A plugin for the host's admission tests. It accepts and ignores events (it is a normal
//! plugin too); `config.mode` picks how `admit` answers:
//!
//! - `deny-label`: denies an object labelled `deny=MESSAGE` with MESSAGE and code 403, allows
//!   the rest; every answer carries the warning `seen by TAG` (`config.tag`, default `admit`),
//!   so a test sees which plugin version answered;
//! - `registry`: denies a Deployment or Pod with a container image (containers, init and
//!   ephemeral containers) that starts with none of `config.allowed`, with the message
//!   ``image `IMAGE` is not from an allowed registry (A, B)``; allows anything else;
//! - `team-label` (mutating): reads the object's Namespace from the cache (`v1` `Namespace`,
//!   which the manifest must watch) and adds its `team` label to the object (a JSON Patch `add`
//!   of `/metadata/labels/team`, or of `/metadata/labels` when the object has no labels);
//!   allows without a patch when the namespace has no `team` label or is not cached;
//! - `rename` (mutating, hostile): a patch setting `/metadata/name` to `NAME-renamed`;
//! - `move` (mutating, hostile): a patch setting `/metadata/namespace` to `NAMESPACE-moved`;
//! - `trap`: panics;
//! - `hang`: loops forever (the host's timeout must stop it);
//! - `sleep`: sleeps `config.sleep-ms` (a WASI poll), then allows;
//! - `garbage`: allows with a patch that is not JSON (the text `not json`);
//! - `count-index`: reads the ConfigMaps whose `namespace` index is the request's namespace and
//!   allows with the warning `N objects`;
//! - `count-index-meta`: as `count-index`, reading the metadata only (`cache::by_index_meta`),
//!   and warns `N objects labelled app`, counting those with an `app` label;
//! - `count-index-host`: as `count-index-meta`, the host counting (`cache::count_by_index` with
//!   the selector `app`): nothing copied into the plugin;
//! - `get-one`: reads the ConfigMap `config.name` in the request's namespace, then allows;
//! - `noop` (the default): allows, reading nothing;
//! - `write`: creates the ConfigMap `admit-write` in the request's namespace during `admit`,
//!   which the host must refuse, and denies with the write's error (`write denied: ...`), or
//!   with `the write went through` if it was not refused;
//! - `validate-patch`: allows with a patch adding the annotation `admit=validate-patch`, for a
//!   `mode = "validate"` table (the host must treat it as an error).
//!
//! `admit.toml` beside this crate is a manifest example.

use informant_sdk::admission::{Admission, AdmissionRequest, PatchOp, json_pointer};
use informant_sdk::kube::raw;
use informant_sdk::{HandlerError, Plugin, Resource, cache};
use serde::Deserialize;
use serde_json::{Value, json};

/// What `admit` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Denies on a `deny` label, warns `seen by TAG`.
    DenyLabel,
    /// Denies images outside `allowed`.
    Registry,
    /// Adds the namespace's `team` label.
    TeamLabel,
    /// Patches the name.
    Rename,
    /// Patches the namespace.
    Move,
    /// Panics.
    Trap,
    /// Loops forever.
    Hang,
    /// Sleeps `sleep-ms`.
    Sleep,
    /// A patch that is not JSON.
    Garbage,
    /// Counts the namespace's ConfigMaps.
    CountIndex,
    /// Counts the namespace's ConfigMaps labelled `app`, reading their metadata only.
    CountIndexMeta,
    /// Counts the namespace's ConfigMaps labelled `app`, counted by the host.
    CountIndexHost,
    /// Reads one ConfigMap.
    GetOne,
    /// Allows.
    #[default]
    Noop,
    /// Tries a write.
    Write,
    /// A patch from a validating hook.
    ValidatePatch,
}

/// The plugin's `[config]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    /// What `admit` does.
    #[serde(default)]
    pub mode: Mode,
    /// Names this plugin version in `deny-label`'s warning.
    #[serde(default = "default_tag")]
    pub tag: String,
    /// `registry`: the image prefixes allowed.
    #[serde(default)]
    pub allowed: Vec<String>,
    /// `sleep`: how long.
    #[serde(default)]
    pub sleep_ms: u64,
    /// `get-one`: the ConfigMap read.
    #[serde(default)]
    pub name: Option<String>,
}

fn default_tag() -> String {
    "admit".to_string()
}

/// The test plugin.
pub struct Admit(Config);

fn config_maps() -> Resource {
    Resource::new("", "v1", "ConfigMap")
}

impl Plugin for Admit {
    fn init(config: Value) -> Result<Self, HandlerError> {
        let config: Config = serde_json::from_value(config)?;
        if config.mode == Mode::GetOne && config.name.is_none() {
            return Err("mode `get-one` needs `name`".into());
        }
        Ok(Admit(config))
    }

    fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
        let c = &self.0;
        let namespace = req.namespace().unwrap_or_default();
        Ok(match c.mode {
            Mode::DenyLabel => match req.meta().label("deny") {
                Some(message) => Admission::deny(message).with_code(403),
                None => Admission::allow(),
            }
            .warn(format!("seen by {}", c.tag)),
            Mode::Registry => registry(req, &c.allowed)?,
            Mode::TeamLabel => team_label(req)?,
            Mode::Rename => Admission::patch(vec![PatchOp::add(
                "/metadata/name",
                format!("{}-renamed", req.name()),
            )]),
            Mode::Move => Admission::patch(vec![PatchOp::add(
                "/metadata/namespace",
                format!("{namespace}-moved"),
            )]),
            Mode::Trap => panic!("admit: mode `trap` panics in admit"),
            Mode::Hang => {
                let mut x = 0u64;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            Mode::Sleep => {
                std::thread::sleep(std::time::Duration::from_millis(c.sleep_ms));
                Admission::allow()
            }
            Mode::Garbage => Admission::patch_text("not json"),
            Mode::CountIndex => {
                let n = cache::by_index(&config_maps(), "namespace", namespace)?.len();
                Admission::allow().warn(format!("{n} objects"))
            }
            Mode::CountIndexMeta => {
                let found = cache::by_index_meta(&config_maps(), "namespace", namespace)?;
                let n = found
                    .iter()
                    .filter(|f| f.meta().label("app").is_some())
                    .count();
                Admission::allow().warn(format!("{n} objects labelled app"))
            }
            Mode::CountIndexHost => {
                let n = cache::count_by_index(&config_maps(), "namespace", namespace, Some("app"))?;
                Admission::allow().warn(format!("{n} objects labelled app"))
            }
            Mode::GetOne => {
                let name = c.name.as_deref().unwrap_or_default();
                std::hint::black_box(cache::get(&config_maps(), Some(namespace), name)?);
                Admission::allow()
            }
            Mode::Noop => Admission::allow(),
            Mode::Write => {
                let object = json!({"metadata": {"name": "admit-write"}, "data": {}});
                match raw::create(&config_maps(), req.namespace(), &object.to_string()) {
                    Ok(_) => Admission::deny("the write went through"),
                    Err(e) => Admission::deny(e.to_string()),
                }
            }
            Mode::ValidatePatch => Admission::patch(vec![PatchOp::add(
                "/metadata/annotations",
                json!({"admit": "validate-patch"}),
            )]),
        })
    }
}

/// `registry`: the first image of a Deployment or Pod outside `allowed` denies.
fn registry(req: &AdmissionRequest, allowed: &[String]) -> Result<Admission, HandlerError> {
    let pod_spec = match (req.kind().group.as_str(), req.kind().kind.as_str()) {
        ("", "Pod") => "/spec",
        ("apps", "Deployment") => "/spec/template/spec",
        _ => return Ok(Admission::allow()),
    };
    let Some(object) = req.object::<Value>()? else {
        return Ok(Admission::allow());
    };
    let images = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .filter_map(|list| object.pointer(&format!("{pod_spec}/{list}"))?.as_array())
        .flatten()
        .filter_map(|c| c.get("image")?.as_str());
    for image in images {
        if !allowed
            .iter()
            .any(|prefix| image.starts_with(prefix.as_str()))
        {
            return Ok(Admission::deny(format!(
                "image `{image}` is not from an allowed registry ({})",
                allowed.join(", ")
            )));
        }
    }
    Ok(Admission::allow())
}

/// `team-label`: the namespace's `team` label onto the object.
fn team_label(req: &AdmissionRequest) -> Result<Admission, HandlerError> {
    let Some(namespace) = req.namespace() else {
        return Ok(Admission::allow());
    };
    let namespaces = Resource::new("", "v1", "Namespace");
    let Some(ns) = cache::get(&namespaces, None, namespace)? else {
        return Ok(Admission::allow());
    };
    let ns: Value = serde_json::from_str(&ns)?;
    let Some(team) = ns.pointer("/metadata/labels/team").and_then(Value::as_str) else {
        return Ok(Admission::allow());
    };
    let has_labels = req
        .object::<Value>()?
        .is_some_and(|o| o.pointer("/metadata/labels").is_some_and(Value::is_object));
    Ok(Admission::patch(vec![if has_labels {
        PatchOp::add(json_pointer(&["metadata", "labels", "team"]), team)
    } else {
        PatchOp::add("/metadata/labels", json!({"team": team}))
    }]))
}

informant_sdk::export_plugin!(Admit);

#[cfg(test)]
mod tests {
    use informant_sdk::admission::Operation;
    use informant_sdk::testing::{EventBuilder, Harness, admission_request};

    use super::*;

    fn harness(config: Value) -> Harness<Admit> {
        Harness::with_config(config).unwrap()
    }

    fn cm(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"namespace": "team-a", "name": "cfg", "labels": labels}})
    }

    fn create(object: &Value) -> AdmissionRequest {
        admission_request(Operation::Create, object).build()
    }

    #[test]
    fn the_manifest_example_loads_and_events_are_ignored() {
        let mut h = Harness::<Admit>::from_manifest(include_str!("../admit.toml")).unwrap();
        h.send(EventBuilder::added(
            &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a"}}),
        ))
        .unwrap();
        let a = h.admit(create(&cm(json!({"deny": "no thanks"})))).unwrap();
        assert_eq!(
            (a.is_allowed(), a.code(), a.message(), a.warnings()),
            (false, 403, "no thanks", &["seen by admit".to_string()][..])
        );
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert!(a.is_allowed() && a.warnings() == ["seen by admit"]);
    }

    #[test]
    fn registry_names_the_first_image_outside_the_allowed_prefixes() {
        let mut h = harness(json!({"mode": "registry", "allowed": ["good.io/", "ok.io/x/"]}));
        let pod = |images: &[&str]| {
            let containers: Vec<Value> = images.iter().map(|i| json!({"image": i})).collect();
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"initContainers": [{"image": "ok.io/x/init"}],
                            "containers": containers}})
        };
        assert!(h.admit(create(&pod(&["good.io/a"]))).unwrap().is_allowed());
        let a = h.admit(create(&pod(&["good.io/a", "evil.io/b"]))).unwrap();
        assert_eq!(
            a.message(),
            "image `evil.io/b` is not from an allowed registry (good.io/, ok.io/x/)"
        );
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"image": "ok.io/y"}]}}}});
        assert!(!h.admit(create(&deployment)).unwrap().is_allowed());
        assert!(h.admit(create(&cm(json!({})))).unwrap().is_allowed());
    }

    #[test]
    fn team_label_adds_the_namespaces_team() {
        let mut h = harness(json!({"mode": "team-label"}));
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(a.patch_json(), None, "the namespace is not cached");
        h.cache_mut()
            .insert(&json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"team": "payments"}}}))
            .unwrap();
        let a = h.admit(create(&cm(json!({"app": "x"})))).unwrap();
        assert_eq!(
            a.patch_json().as_deref(),
            Some(r#"[{"op":"add","path":"/metadata/labels/team","value":"payments"}]"#)
        );
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"namespace": "team-a", "name": "c"}});
        let a = h.admit(create(&bare)).unwrap();
        assert_eq!(
            a.patch_json().as_deref(),
            Some(r#"[{"op":"add","path":"/metadata/labels","value":{"team":"payments"}}]"#)
        );
    }

    #[test]
    fn reads_and_the_refused_write() {
        let mut h = harness(json!({"mode": "count-index"}));
        h.cache_mut().insert(&cm(json!({}))).unwrap();
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(a.warnings(), ["1 objects"]);
        let mut h = harness(json!({"mode": "count-index-meta"}));
        h.cache_mut().insert(&cm(json!({"app": "web"}))).unwrap();
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(a.warnings(), ["1 objects labelled app"]);
        let mut h = harness(json!({"mode": "count-index-host"}));
        h.cache_mut().insert(&cm(json!({"app": "web"}))).unwrap();
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(a.warnings(), ["1 objects labelled app"]);
        let mut h = harness(json!({"mode": "write"}));
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(
            a.message(),
            "write denied: writes are refused during admission: an admission hook has no side \
             effects"
        );
        let err = Harness::<Admit>::with_config(json!({"mode": "get-one"})).err();
        assert!(err.is_some_and(|e| e.to_string() == "mode `get-one` needs `name`"));
        let err = Harness::<Admit>::with_config(json!({"mode": "nope"})).err();
        assert!(err.is_some_and(|e| e.to_string().contains("unknown variant `nope`")));
    }

    #[test]
    fn hostile_patches() {
        let mut h = harness(json!({"mode": "rename"}));
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(
            a.patch_json().as_deref(),
            Some(r#"[{"op":"add","path":"/metadata/name","value":"cfg-renamed"}]"#)
        );
        let mut h = harness(json!({"mode": "move"}));
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert!(
            a.patch_json()
                .unwrap()
                .contains(r#""value":"team-a-moved""#)
        );
        let mut h = harness(json!({"mode": "garbage"}));
        let a = h.admit(create(&cm(json!({})))).unwrap();
        assert_eq!(a.patch_json().as_deref(), Some("not json"));
        let mut h = harness(json!({"mode": "validate-patch"}));
        assert!(
            h.admit(create(&cm(json!({}))))
                .unwrap()
                .patch_json()
                .is_some()
        );
    }
}
