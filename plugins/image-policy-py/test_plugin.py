"""image-policy-py's unit tests: plain pytest against the SDK's in-memory harness (no wasm), the
harness built from the plugin's own manifest."""

import copy
import os
import tomllib

import pytest

from informant.testing import Harness, admission_request
from plugin import ImagePolicy, pinned, repository

MANIFEST = os.path.join(os.path.dirname(__file__), "image-policy-py.toml")


def harness(team: bool) -> Harness:
    """The example manifest, its `team-label` dropped when `team` is false."""
    with open(MANIFEST, "rb") as f:
        config = tomllib.load(f)["config"]
    if not team:
        del config["team-label"]
    return Harness.from_manifest(ImagePolicy, MANIFEST, config=config)


def pod(images, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": "shop", "name": "web", "labels": labels or {}},
        "spec": {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]},
    }


def deployment(image):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "web", "image": image}]}}},
    }


def namespace(labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": labels}}


def test_images_from_the_allowed_registries_pass_and_others_are_named():
    h = harness(team=False)
    ok = h.admit(admission_request("create", pod(["registry.example.com/web:1.4", "ghcr.io/example/tools/sh@sha256:ab"])))
    assert (ok.allowed, ok.warnings, ok.patch_json) == (True, (), None)
    bad = h.admit(admission_request("update", pod(["registry.example.com/web:1.4", "nginx:1.27", "ghcr.io/example-evil/x:1"])))
    assert not bad.allowed
    assert bad.message == (
        "images not from an allowed registry (registry.example.com, ghcr.io/example): "
        "container `c1` uses `nginx:1.27`; container `c2` uses `ghcr.io/example-evil/x:1`"
    )
    d = h.admit(admission_request("create", deployment("docker.io/x/web:2")))
    assert "container `web` uses `docker.io/x/web:2`" in d.message
    # Init and ephemeral containers count; a status update is not checked.
    sneaky = pod([])
    sneaky["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    assert "container `init` uses `busybox`" in h.admit(admission_request("create", sneaky)).message
    assert h.admit(admission_request("update", pod(["nginx"])).sub_resource("status")).allowed
    debug = pod(["registry.example.com/web:1"])
    debug["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox"}]
    req = admission_request("update", debug).sub_resource("ephemeralcontainers")
    assert "container `dbg` uses `busybox`" in h.admit(req).message


def test_unpinned_images_pass_with_a_warning():
    h = harness(team=False)
    a = h.admit(admission_request("create", pod(["registry.example.com/web", "registry.example.com/db:latest"])))
    assert a.allowed
    assert len(a.warnings) == 2
    assert a.warnings[0] == (
        "container `c0`: image `registry.example.com/web` is not pinned (no tag, or `latest`); "
        "a digest or a version tag says what runs"
    )


def test_the_team_label_comes_from_the_namespace_in_the_mutating_tables_only():
    h = harness(team=True)

    def create(o, hook="team-pods"):
        return admission_request("create", o).hook(hook)

    unlabelled = pod(["registry.example.com/web:1"])
    # The namespace is not cached yet: no patch.
    assert h.admit(create(unlabelled)).patch_json is None
    h.cache.put(namespace({"team": "payments"}))
    assert h.admit(create(unlabelled)).patch_json == (
        '[{"op":"add","path":"/metadata/labels","value":{"team":"payments"}}]'
    )
    assert h.admit(create(pod(["registry.example.com/web:1"], {"app": "web"}))).patch_json == (
        '[{"op":"add","path":"/metadata/labels/team","value":"payments"}]'
    )
    assert h.admit(create(deployment("registry.example.com/web:1"), "team-deployments")).patch_json == (
        '[{"op":"add","path":"/metadata/labels","value":{"team":"payments"}}]'
    )
    # A team of the object's own is kept.
    assert h.admit(create(pod(["registry.example.com/web:1"], {"team": "search"}))).patch_json is None
    # The mutating tables never deny; the validating ones never patch.
    assert h.admit(create(pod(["nginx"]))).allowed
    checked = h.admit(create(unlabelled, "images-pods"))
    assert (checked.allowed, checked.patch_json) == (True, None)
    # A request without a table name goes to the first table that takes it: the validating one.
    assert not h.admit(admission_request("create", pod(["nginx"]))).allowed
    # Without `team-label`, never a patch.
    plain = harness(team=False)
    plain.cache.put(namespace({"team": "payments"}))
    assert plain.admit(create(unlabelled)).patch_json is None


def test_deletes_and_other_kinds_are_not_the_plugins_business():
    h = Harness(ImagePolicy, {"allowed-registries": ["registry.example.com"]})
    assert h.admit(admission_request("delete", pod(["nginx"]))).allowed
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "shop", "name": "c"}}
    assert h.admit(admission_request("create", cm)).allowed
    # The manifest takes no deletes at all.
    with pytest.raises(ValueError, match=r"no \[\[admit\]\] table of the manifest admits DELETE of v1/Pod"):
        harness(team=False).admit(admission_request("delete", pod(["nginx"])))


def test_a_dry_run_is_answered_as_any_other():
    h = harness(team=False)
    req = admission_request("create", pod(["nginx:1"]))
    assert h.admit(req) == h.admit(copy.deepcopy(req).dry_run())


@pytest.mark.parametrize(
    "image, repo",
    [
        ("nginx", "docker.io/library/nginx"),
        ("nginx:1.27", "docker.io/library/nginx"),
        ("acme/app:2", "docker.io/acme/app"),
        ("registry.example.com:5000/team/app:1@sha256:ab", "registry.example.com:5000/team/app"),
        ("localhost/app", "localhost/app"),
    ],
)
def test_images_are_read_as_the_container_runtime_reads_them(image, repo):
    assert repository(image) == repo


def test_pinned_means_a_digest_or_a_version_tag():
    assert [pinned(i) for i in ["a", "a:latest", "a:1", "r:5000/a", "a@sha256:x"]] == [
        False, False, True, False, True,
    ]


@pytest.mark.parametrize(
    "config, message",
    [
        ({"allowed-registries": ["r"], "colour": "red"}, "unknown field `colour`"),
        ({"allowed-registries": []}, "at least one registry"),
        ({"allowed-registries": ["/"]}, "none empty"),
        ({"allowed-registries": ["r"], "team-label": ""}, "`team-label` must be a non-empty string"),
    ],
)
def test_bad_config_is_refused_with_the_reason(config, message):
    with pytest.raises(ValueError, match=message):
        Harness(ImagePolicy, config)


def test_the_manifest_config_is_valid():
    h = Harness.from_manifest(ImagePolicy, MANIFEST)
    assert h.plugin.allowed == ["registry.example.com", "ghcr.io/example"]
    assert h.plugin.team_label == "team"
    assert [t["name"] for t in h.admits] == [
        "images-deployments", "images-pods", "team-deployments", "team-pods",
    ]
