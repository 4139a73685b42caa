"""image-policy-py: the Python port of ``plugins/image-policy`` (and of ``image-policy-ts``, whose
messages it shares). Admits Deployments and Pods only with images from allowed registries, and
labels them with their namespace's team.

Config:

- ``allowed-registries = ["registry.example.com", "ghcr.io/example"]`` (at least one): where
  images may come from, each a registry host or a host and a path. An image is admitted when its
  repository is an entry or lies under one: ``ghcr.io/example`` admits
  ``ghcr.io/example/app:1.2``, not ``ghcr.io/example-evil/app``. Images are read as the container
  runtime reads them: ``nginx`` is ``docker.io/library/nginx``, ``acme/app`` is
  ``docker.io/acme/app``, so ``docker.io/library`` admits Docker Hub's official images.
- ``team-label = "team"`` (optional): a label copied from the object's Namespace (read from the
  cache: the manifest watches Namespaces) onto an object that does not carry it.

The manifest's tables are told apart by name (``req.hook``): those named ``team-...`` are
mutating and only label, every other one validates and never patches (a validating table's
patch is an error).

Validation: a create or update of a Deployment (its pod template) or a Pod whose containers,
init containers or ephemeral containers use an image from elsewhere is denied (403), naming
each::

    images not from an allowed registry (registry.example.com, ghcr.io/example): container `web` uses `nginx:1.27`

An admitted image without a tag or digest, or tagged ``latest``, passes with a warning (the
client shows it). Subresource requests (``status``, ``scale``, ...) are allowed untouched,
except ``ephemeralcontainers``, which adds images.

Labelling: with ``team-label``, a created or updated object without that label in a namespace
that has it gets it, by a JSON Patch (``add /metadata/labels/team``, or ``/metadata/labels`` on
an object with none). An object that has the label keeps its value; a namespace without it (or
not cached yet) leaves the object unchanged. Kubernetes calls mutating hooks first, so the
validating call sees the object labelled.
"""

from typing import Any, Dict, List, Optional, Tuple

from informant import (
    Admission,
    AdmissionRequest,
    Operation,
    PatchOp,
    Plugin,
    Resource,
    cache,
    json_pointer,
)

NAMESPACE = Resource("", "v1", "Namespace")

#: The prefix of the mutating tables' names in the manifest.
LABEL_HOOKS = "team-"

_CONFIG_KEYS = {"allowed-registries", "team-label"}


class ImagePolicy(Plugin):
    """The plugin: the config, checked. It keeps no state between requests."""

    def __init__(self, config: Dict[str, Any]):
        unknown = sorted(set(config) - _CONFIG_KEYS)
        if unknown:
            raise ValueError(f"image-policy-py config: unknown field `{unknown[0]}`")
        registries = config.get("allowed-registries")
        if (
            not isinstance(registries, list)
            or not registries
            or not all(isinstance(r, str) and r.rstrip("/") for r in registries)
        ):
            raise ValueError(
                "image-policy-py config: `allowed-registries` needs at least one registry, "
                "none empty"
            )
        self.allowed = [r.rstrip("/") for r in registries]
        label = config.get("team-label")
        if label is not None and (not isinstance(label, str) or not label):
            raise ValueError("image-policy-py config: `team-label` must be a non-empty string")
        self.team_label: Optional[str] = label

    def admit(self, req: AdmissionRequest) -> Admission:
        if req.operation not in (Operation.CREATE, Operation.UPDATE):
            return Admission.allow()
        if req.hook.startswith(LABEL_HOOKS):
            return self._label(req)
        if req.sub_resource not in ("", "ephemeralcontainers"):
            return Admission.allow()
        spec = pod_spec(req)
        if spec is None:
            return Admission.allow()
        refused: List[str] = []
        warnings: List[str] = []
        for container, image in images(spec):
            if not self.admits(image):
                refused.append(f"container `{container}` uses `{image}`")
            elif not pinned(image):
                warnings.append(
                    f"container `{container}`: image `{image}` is not pinned "
                    "(no tag, or `latest`); a digest or a version tag says what runs"
                )
        if refused:
            allowed = ", ".join(self.allowed)
            return Admission.deny(
                f"images not from an allowed registry ({allowed}): {'; '.join(refused)}"
            )
        answer = Admission.allow()
        for w in warnings:
            answer = answer.warn(w)
        return answer

    def admits(self, image: str) -> bool:
        """Whether ``image`` comes from an allowed registry."""
        repo = repository(image)
        return any(repo == entry or repo.startswith(entry + "/") for entry in self.allowed)

    def _label(self, req: AdmissionRequest) -> Admission:
        """A mutating table's answer: the namespace's team label added when the object lacks it."""
        label = self.team_label
        if not label or not req.namespace or req.sub_resource != "":
            return Admission.allow()
        if req.meta.label(label) is not None:
            return Admission.allow()
        ns = cache.get(NAMESPACE, req.namespace) or {}
        team = ((ns.get("metadata") or {}).get("labels") or {}).get(label)
        if not isinstance(team, str):
            return Admission.allow()
        # The header's labels are the object's: none means no `labels` map to add into.
        if req.meta.labels:
            op = PatchOp.add(json_pointer(["metadata", "labels", label]), team)
        else:
            op = PatchOp.add("/metadata/labels", {label: team})
        return Admission.patch([op])


def pod_spec(req: AdmissionRequest) -> Optional[Dict[str, Any]]:
    """The pod spec of a Pod or of a Deployment's template; None for other kinds."""
    obj = req.object() or {}
    if req.kind.group == "" and req.kind.kind == "Pod":
        return obj.get("spec")
    if req.kind.group == "apps" and req.kind.kind == "Deployment":
        return ((obj.get("spec") or {}).get("template") or {}).get("spec")
    return None


def images(spec: Dict[str, Any]) -> List[Tuple[str, str]]:
    """Each container's name and image: containers, init containers, ephemeral containers."""
    every = [
        *(spec.get("containers") or []),
        *(spec.get("initContainers") or []),
        *(spec.get("ephemeralContainers") or []),
    ]
    return [(str(c.get("name")), c["image"]) for c in every if isinstance(c.get("image"), str)]


def repository(image: str) -> str:
    """The repository an image names, as the container runtime resolves it: without its tag and
    digest, the registry host added when it has none (``docker.io``, and ``library/`` for a bare
    name)."""
    name = image.split("@")[0]
    # A tag is a `:` after the last `/` (before it, a `:` is a registry's port).
    colon = name.rfind(":")
    if colon >= 0 and "/" not in name[colon:]:
        name = name[:colon]
    slash = name.find("/")
    if slash < 0:
        return f"docker.io/library/{name}"
    host = name[:slash]
    return name if "." in host or ":" in host or host == "localhost" else f"docker.io/{name}"


def pinned(image: str) -> bool:
    """Whether ``image`` says exactly what runs: a digest, or a tag other than ``latest``."""
    if "@" in image:
        return True
    last = image[image.rfind("/") + 1 :]
    colon = last.find(":")
    return colon >= 0 and last[colon + 1 :] != "latest"
