//! `image-policy`: admits Deployments and Pods only with images from allowed registries, and
//! labels them with their namespace's team.
//!
//! Config:
//! - `allowed-registries = ["registry.example.com", "ghcr.io/example"]` (at least one): where
//!   images may come from, each a registry host or a host and a path. An image is admitted when
//!   its repository is an entry or lies under one: `ghcr.io/example` admits
//!   `ghcr.io/example/app:1.2`, not `ghcr.io/example-evil/app`. Images are read as the container
//!   runtime reads them: `nginx` is `docker.io/library/nginx`, `acme/app` is
//!   `docker.io/acme/app`, so `docker.io/library` admits Docker Hub's official images.
//! - `team-label = "team"` (optional): a label copied from the object's Namespace (read from the
//!   cache: the manifest watches Namespaces) onto an object that does not carry it.
//!
//! Validation: a create or update of a Deployment (its pod template) or a Pod whose containers,
//! init containers or ephemeral containers use an image from elsewhere is denied (403), naming
//! each:
//!
//! ```text
//! images not from an allowed registry (registry.example.com, ghcr.io/example): container `web` uses `nginx:1.27`
//! ```
//!
//! An admitted image without a tag or digest, or tagged `latest`, passes with a warning (the
//! client shows it): ``container `web`: image `registry.example.com/web` is not pinned (no tag,
//! or `latest`); a digest or a version tag says what runs``.
//!
//! Mutation: with `team-label`, an object without that label in a namespace that has it gets
//! it, by a JSON Patch (`add /metadata/labels/team`, or `/metadata/labels` on an object with
//! none). An object that has the label keeps its value; a namespace without it (or not cached
//! yet) leaves the object unchanged.
//!
//! The manifest pairs the tables: `admit` is not told which `[[admit]]` table it answers, so it
//! always does both, and that is sound only if the mutating tables cover the validating ones'
//! kinds and operations. Kubernetes calls mutating hooks first: the object reaches the
//! validating call already labelled, and the answer there has no patch (a validating table's
//! patch is an error). Without `team-label` the plugin never patches, and the two `mutate`
//! tables can go.
//!
//! Subresource requests (`status`, `scale`, ...) are allowed untouched, except
//! `ephemeralcontainers`, which adds images.

use informant_sdk::admission::{Admission, AdmissionRequest, Operation, PatchOp, json_pointer};
use informant_sdk::{HandlerError, Plugin, cache};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, PodSpec};
use serde::Deserialize;
use serde_json::{Value, json};

/// The plugin's `[config]` table.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    /// Registry hosts, or hosts and paths, images may come from.
    pub allowed_registries: Vec<String>,
    /// The label copied from the object's Namespace; `None` never patches.
    #[serde(default)]
    pub team_label: Option<String>,
}

/// The plugin: the config, checked. It keeps no state between requests.
pub struct ImagePolicy {
    allowed: Vec<String>,
    team_label: Option<String>,
}

impl Plugin for ImagePolicy {
    fn init(config: Value) -> Result<Self, HandlerError> {
        let config: Config = serde_json::from_value(config)?;
        let allowed: Vec<String> = config
            .allowed_registries
            .iter()
            .map(|r| r.trim_end_matches('/').to_string())
            .collect();
        if allowed.is_empty() || allowed.iter().any(String::is_empty) {
            return Err("`allowed-registries` needs at least one registry, none empty".into());
        }
        if config.team_label.as_deref() == Some("") {
            return Err("`team-label` is empty".into());
        }
        Ok(ImagePolicy {
            allowed,
            team_label: config.team_label,
        })
    }

    fn admit(&mut self, req: &AdmissionRequest) -> Result<Admission, HandlerError> {
        let checked = matches!(req.operation(), Operation::Create | Operation::Update)
            && matches!(req.sub_resource(), "" | "ephemeralcontainers");
        if !checked {
            return Ok(Admission::allow());
        }
        let Some(spec) = pod_spec(req)? else {
            return Ok(Admission::allow());
        };
        let mut refused = Vec::new();
        let mut warnings = Vec::new();
        for (container, image) in images(&spec) {
            if !self.admits(image) {
                refused.push(format!("container `{container}` uses `{image}`"));
            } else if !pinned(image) {
                warnings.push(format!(
                    "container `{container}`: image `{image}` is not pinned (no tag, or \
                     `latest`); a digest or a version tag says what runs"
                ));
            }
        }
        if !refused.is_empty() {
            return Ok(Admission::deny(format!(
                "images not from an allowed registry ({}): {}",
                self.allowed.join(", "),
                refused.join("; ")
            )));
        }
        let answer = match self.team_patch(req)? {
            Some(op) => Admission::patch(vec![op]),
            None => Admission::allow(),
        };
        Ok(warnings.into_iter().fold(answer, Admission::warn))
    }
}

impl ImagePolicy {
    /// Whether `image` comes from an allowed registry.
    fn admits(&self, image: &str) -> bool {
        let repository = repository(image);
        self.allowed.iter().any(|entry| {
            repository
                .strip_prefix(entry.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }

    /// The patch adding the namespace's team label, when the object lacks it and the namespace
    /// has it.
    fn team_patch(&self, req: &AdmissionRequest) -> Result<Option<PatchOp>, HandlerError> {
        let (Some(label), Some(namespace)) = (&self.team_label, req.namespace()) else {
            return Ok(None);
        };
        if req.meta().label(label).is_some() {
            return Ok(None);
        }
        let team = cache::get_as::<Namespace>(None, namespace)?
            .and_then(|ns| ns.metadata.labels)
            .and_then(|mut labels| labels.remove(label));
        let Some(team) = team else {
            return Ok(None);
        };
        // The header's labels are the object's: none means no `labels` map to add into.
        Ok(Some(if req.meta().labels().is_empty() {
            PatchOp::add("/metadata/labels", json!({ label.as_str(): team }))
        } else {
            PatchOp::add(json_pointer(&["metadata", "labels", label]), team)
        }))
    }
}

/// The pod spec of a Pod or of a Deployment's template; `None` for other kinds.
fn pod_spec(req: &AdmissionRequest) -> Result<Option<PodSpec>, HandlerError> {
    let kind = req.kind();
    Ok(match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Pod") => req.object::<Pod>()?.and_then(|p| p.spec),
        ("apps", "Deployment") => req
            .object::<Deployment>()?
            .and_then(|d| d.spec)
            .and_then(|s| s.template.spec),
        _ => None,
    })
}

/// Each container's name and image: containers, init containers, ephemeral containers.
fn images(spec: &PodSpec) -> Vec<(&str, &str)> {
    let containers = (spec.containers.iter())
        .chain(spec.init_containers.iter().flatten())
        .map(|c| (c.name.as_str(), c.image.as_deref()));
    let ephemeral =
        (spec.ephemeral_containers.iter().flatten()).map(|c| (c.name.as_str(), c.image.as_deref()));
    containers
        .chain(ephemeral)
        .filter_map(|(name, image)| Some((name, image?)))
        .collect()
}

/// The repository an image names, as the container runtime resolves it: without its tag and
/// digest, the registry host added when it has none (`docker.io`, and `library/` for a bare
/// name).
fn repository(image: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    // A tag is a `:` after the last `/` (before it, a `:` is a registry's port).
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    match name.split_once('/') {
        Some((host, _)) if host.contains(['.', ':']) || host == "localhost" => name.to_string(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

/// Whether `image` says exactly what runs: a digest, or a tag other than `latest`.
fn pinned(image: &str) -> bool {
    if image.contains('@') {
        return true;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').is_some_and(|(_, tag)| tag != "latest")
}

informant_sdk::export_plugin!(ImagePolicy);

#[cfg(test)]
mod tests {
    use informant_sdk::testing::{Harness, admission_request};

    use super::*;

    const MANIFEST: &str = include_str!("../image-policy.toml");

    fn pod(images: &[&str], labels: Value) -> Value {
        let containers: Vec<Value> = images
            .iter()
            .enumerate()
            .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
            .collect();
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": "shop", "name": "web", "labels": labels},
               "spec": {"containers": containers}})
    }

    fn deployment(image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"namespace": "shop", "name": "web"},
               "spec": {"selector": {},
                        "template": {"spec": {"containers": [{"name": "web", "image": image}]}}}})
    }

    fn namespace(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "shop", "labels": labels}})
    }

    /// The example manifest, its `team-label` dropped when `team` is false.
    fn harness(team: bool) -> Harness<ImagePolicy> {
        let manifest = match team {
            true => MANIFEST.to_string(),
            false => MANIFEST.replace("team-label = \"team\"", ""),
        };
        Harness::from_manifest(&manifest).expect("the manifest loads")
    }

    #[test]
    fn images_from_the_allowed_registries_pass_and_others_are_named() {
        let mut h = harness(false);
        let ok = pod(
            &[
                "registry.example.com/web:1.4",
                "ghcr.io/example/tools/sh@sha256:ab",
            ],
            json!({}),
        );
        let a = h.admit(admission_request(Operation::Create, &ok)).unwrap();
        assert!(a.is_allowed() && a.warnings().is_empty() && a.patch_json().is_none());
        let bad = pod(
            &[
                "registry.example.com/web:1.4",
                "nginx:1.27",
                "ghcr.io/example-evil/x:1",
            ],
            json!({}),
        );
        let a = h.admit(admission_request(Operation::Update, &bad)).unwrap();
        assert!(!a.is_allowed());
        assert_eq!(
            a.message(),
            "images not from an allowed registry (registry.example.com, ghcr.io/example): \
             container `c1` uses `nginx:1.27`; container `c2` uses `ghcr.io/example-evil/x:1`"
        );
        let a = h
            .admit(admission_request(
                Operation::Create,
                &deployment("docker.io/x/web:2"),
            ))
            .unwrap();
        assert!(
            a.message()
                .contains("container `web` uses `docker.io/x/web:2`")
        );
    }

    #[test]
    fn unpinned_images_pass_with_a_warning() {
        let mut h = harness(false);
        let p = pod(
            &["registry.example.com/web", "registry.example.com/db:latest"],
            json!({}),
        );
        let a = h.admit(admission_request(Operation::Create, &p)).unwrap();
        assert!(a.is_allowed());
        assert_eq!(a.warnings().len(), 2);
        assert_eq!(
            a.warnings()[0],
            "container `c0`: image `registry.example.com/web` is not pinned (no tag, or \
             `latest`); a digest or a version tag says what runs"
        );
    }

    #[test]
    fn the_team_label_comes_from_the_namespace_once() {
        let mut h = harness(true);
        let unlabelled = pod(&["registry.example.com/web:1"], json!({}));
        let create = |o: &Value| admission_request(Operation::Create, o);
        // The namespace is not cached yet: no patch.
        assert_eq!(h.admit(create(&unlabelled)).unwrap().patch_json(), None);
        h.cache_mut()
            .insert(&namespace(json!({"team": "payments"})))
            .unwrap();
        let a = h.admit(create(&unlabelled)).unwrap();
        assert_eq!(
            a.patch_json().as_deref(),
            Some(r#"[{"op":"add","path":"/metadata/labels","value":{"team":"payments"}}]"#)
        );
        let a = h
            .admit(create(&pod(
                &["registry.example.com/web:1"],
                json!({"app": "web"}),
            )))
            .unwrap();
        assert_eq!(
            a.patch_json().as_deref(),
            Some(r#"[{"op":"add","path":"/metadata/labels/team","value":"payments"}]"#)
        );
        // What the validating call sees after the mutating one: labelled, so no patch.
        let labelled = pod(&["registry.example.com/web:1"], json!({"team": "payments"}));
        assert_eq!(h.admit(create(&labelled)).unwrap().patch_json(), None);
        // A team of the object's own is kept.
        let own = pod(&["registry.example.com/web:1"], json!({"team": "search"}));
        assert_eq!(h.admit(create(&own)).unwrap().patch_json(), None);
        // A refused image is refused, not labelled.
        assert!(
            !h.admit(create(&pod(&["nginx"], json!({}))))
                .unwrap()
                .is_allowed()
        );
        // Without `team-label`, never a patch.
        let mut h = harness(false);
        h.cache_mut()
            .insert(&namespace(json!({"team": "payments"})))
            .unwrap();
        assert_eq!(h.admit(create(&unlabelled)).unwrap().patch_json(), None);
    }

    #[test]
    fn subresources_other_than_ephemeral_containers_pass_untouched() {
        let mut h = harness(true);
        h.cache_mut()
            .insert(&namespace(json!({"team": "payments"})))
            .unwrap();
        let p = pod(&["nginx"], json!({}));
        let status = admission_request(Operation::Update, &p).sub_resource("status");
        assert_eq!(h.admit(status).unwrap(), Admission::allow());
        let eph = admission_request(Operation::Update, &p).sub_resource("ephemeralcontainers");
        assert!(!h.admit(eph).unwrap().is_allowed());
    }

    #[test]
    fn image_references_resolve_as_the_runtime_resolves_them() {
        for (image, repo) in [
            ("nginx", "docker.io/library/nginx"),
            ("nginx:1.27", "docker.io/library/nginx"),
            ("acme/app:v1", "docker.io/acme/app"),
            ("localhost/app", "localhost/app"),
            ("registry:5000/app:1", "registry:5000/app"),
            ("ghcr.io/a/b@sha256:00", "ghcr.io/a/b"),
        ] {
            assert_eq!(repository(image), repo, "{image}");
        }
        assert!(pinned("a/b:1") && pinned("a@sha256:00") && pinned("host:5000/a:1"));
        assert!(!pinned("a/b") && !pinned("a:latest") && !pinned("host:5000/a"));
    }

    #[test]
    fn the_config_is_checked() {
        for (config, why) in [
            (json!({"allowed-registries": []}), "at least one registry"),
            (json!({"allowed-registries": ["/"]}), "none empty"),
            (
                json!({"allowed-registries": ["a"], "team-label": ""}),
                "is empty",
            ),
            (
                json!({"allowed-registries": ["a"], "x": 1}),
                "unknown field `x`",
            ),
        ] {
            let err = Harness::<ImagePolicy>::with_config(config).err().unwrap();
            assert!(err.to_string().contains(why), "{err}");
        }
        // `docker.io/library` admits the official images.
        let mut h = Harness::<ImagePolicy>::with_config(
            json!({"allowed-registries": ["docker.io/library/"]}),
        )
        .unwrap();
        let p = pod(&["nginx:1", "docker.io/library/redis:7"], json!({}));
        assert!(
            h.admit(admission_request(Operation::Create, &p))
                .unwrap()
                .is_allowed()
        );
        let p = pod(&["acme/nginx:1"], json!({}));
        assert!(
            !h.admit(admission_request(Operation::Create, &p))
                .unwrap()
                .is_allowed()
        );
    }
}
