"""Informant's Python SDK: write event hooks for Kubernetes objects as WebAssembly plugins.

A plugin module defines one ``Plugin`` subclass; the build (``informant dev`` or the tests'
builder) turns the module plus this SDK into a component for the contract in ``wit/``, with
bindings generated from it at build time. Natively, ``informant.testing`` runs the same class
against an in-memory cache so a plugin's tests are plain pytest.

    from informant import Plugin, log

    class Echo(Plugin):
        def on_added(self, ev):
            log.info(f"added {ev.meta.key}")

A plugin whose manifest has ``[[admit]]`` tables answers admission requests from ``admit``
(``informant.admission``).
"""

from . import admission, cache, http, kube, log, metrics
from .admission import (
    Admission,
    AdmissionRequest,
    GroupVersionResource,
    Operation,
    PatchOp,
    UserInfo,
    json_pointer,
)
from .errors import BadSelector, Forbidden, NotWatched, QueryError, Retry, UnknownIndex
from .event import Event, EventType, Meta
from .plugin import Plugin
from .resource import Resource

__all__ = [
    "Admission",
    "AdmissionRequest",
    "BadSelector",
    "Event",
    "EventType",
    "Forbidden",
    "GroupVersionResource",
    "Meta",
    "NotWatched",
    "Operation",
    "PatchOp",
    "Plugin",
    "QueryError",
    "Resource",
    "Retry",
    "UnknownIndex",
    "UserInfo",
    "admission",
    "cache",
    "http",
    "json_pointer",
    "kube",
    "log",
    "metrics",
]
