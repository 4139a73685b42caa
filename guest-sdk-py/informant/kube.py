"""Writes to the cluster through the host's ``kube`` import; refusals raise ``WriteError``s.

Each write must be declared in the manifest (``[[write]]``: api-version, kind, verbs, and
optionally namespaces) and fall inside the tenant's write grant; anything else raises
``Denied`` before any request. Server-side apply runs as the field manager
``informant/TENANT/PLUGIN``. A write's effect comes back as ordinary watch events; an apply
that changes nothing produces none, so applying what a plugin wants on every event settles.

    from informant import kube

    kube.apply(ev.resource, ev.meta.name, {"metadata": {"labels": {"team": "unknown"}}},
               namespace=ev.meta.namespace)

In tests, ``informant.testing.Harness`` records each write (``harness.writes``) instead of
sending it, refusing undeclared ones as the host does.
"""

import json
from typing import Any, Dict, Optional

from . import _backend
from .resource import Resource

Obj = Dict[str, Any]

#: Patch formats: RFC 7386 merge patch, RFC 6902 JSON patch, strategic merge (built-ins only).
MERGE, JSON, STRATEGIC = "merge", "json", "strategic"


class WriteError(Exception):
    """A write that did not happen; the subclass says why.

    ``code``, ``reason`` and ``message`` are the API server's ``Status`` (code 0 when no answer
    came, or when the host refused the write itself).
    """

    def __init__(self, message: str, code: int = 0, reason: str = ""):
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason


class Denied(WriteError):
    """Refused by the host before any request: undeclared, outside the grant, or malformed."""


class Conflict(WriteError):
    """409: an optimistic-lock or apply conflict, or it already exists."""


class NotFound(WriteError):
    """404."""


class Forbidden(WriteError):
    """403: the cluster's RBAC refused the identity the write was sent as."""


class Invalid(WriteError):
    """422: the object is invalid; the message lists the causes."""


class Failed(WriteError):
    """Any other answer, or none."""


def create(r: Resource, obj: Obj, namespace: Optional[str] = None) -> Obj:
    """Creates ``obj`` (its apiVersion and kind may be left out); returns it as stored."""
    return json.loads(_backend.current.create(r, namespace, json.dumps(obj)))


def apply(
    r: Resource, name: str, obj: Obj, namespace: Optional[str] = None, force: bool = False
) -> Obj:
    """Server-side applies the fields ``obj`` sets; ``force`` takes fields others own."""
    return json.loads(_backend.current.apply(r, namespace, name, json.dumps(obj), force))


def patch(
    r: Resource, name: str, patch: Any, namespace: Optional[str] = None, kind: str = MERGE
) -> Obj:
    """Patches the object (``kind``: ``MERGE``, ``JSON`` or ``STRATEGIC``); returns it as stored."""
    if kind not in (MERGE, JSON, STRATEGIC):
        raise ValueError(f"patch kind must be merge, json or strategic, got {kind!r}")
    return json.loads(_backend.current.patch(r, namespace, name, kind, json.dumps(patch)))


def delete(
    r: Resource,
    name: str,
    namespace: Optional[str] = None,
    uid: Optional[str] = None,
    resource_version: Optional[str] = None,
) -> None:
    """Deletes the object if it still has ``uid`` / ``resource_version`` (when given)."""
    _backend.current.delete(r, namespace, name, uid, resource_version)


def update_status(r: Resource, name: str, obj: Obj, namespace: Optional[str] = None) -> Obj:
    """Replaces the ``status`` subresource with ``obj``'s (send its resourceVersion)."""
    return json.loads(_backend.current.update_status(r, namespace, name, json.dumps(obj)))


def event(ev: Any, reason: str, action: str, note: str, warning: bool = False) -> None:
    """Records an ``events.k8s.io/v1`` Event about ``ev``'s object (declare ``[[write]]
    api-version = "events.k8s.io/v1"``, ``kind = "Event"``, ``verbs = ["create"]``)."""
    m = ev.meta
    regarding = {
        "kind": ev.resource,
        "namespace": m.namespace,
        "name": m.name,
        "uid": m.uid or None,
    }
    _backend.current.record_event(regarding, warning, reason, action, note)
