"""The component's exports: turns a plugin module's ``Plugin`` subclass into ``init``,
``handle-queued`` and ``handle-schedule`` (contract ``informant:plugin@0.8.1``, world ``plugin``),
and ``admission-hook.admit`` (world ``admitting-plugin``).

Imported only inside a componentize-py build (it needs the generated ``wit_world`` bindings).
The build's entry module imports the plugin module, then ``WitWorld = world(module)`` and, for
the ``admitting-plugin`` world, ``AdmissionHook = admission_hook(WitWorld)``. componentize-py
constructs a ``WitWorld`` (and an ``AdmissionHook``) per export call, so the plugin instance
lives in the closure ``world`` makes, shared by both classes.

``handle-queued`` takes the waiting events one at a time from the ``events.next`` import, and
hands each event's outcome to the following ``next`` call: ``None`` before the first event,
then ``Ok(None)`` for success or ``Err(failure)`` for an error or a retry. It returns when
``next`` answers ``None``.
"""

import inspect
from types import ModuleType
from typing import Optional

import wit_world
from componentize_py_types import Err, Ok, Result
from wit_world.imports import events
from wit_world.imports import informant_plugin_types as wit

from . import _backend
from .admission import AdmissionRequest
from .event import Event, EventType
from .plugin import Plugin, answer, construct, describe, outcome, tick

_TYPES = {
    wit.EventType.ADDED: EventType.ADDED,
    wit.EventType.UPDATED: EventType.UPDATED,
    wit.EventType.DELETED: EventType.DELETED,
    wit.EventType.RESYNC: EventType.RESYNC,
}


def plugin_class(module: ModuleType) -> type:
    """The one ``Plugin`` subclass defined in ``module``; anything else is a build error."""
    found = [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, Plugin) and c is not Plugin and c.__module__ == module.__name__
    ]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise TypeError(
            f"plugin module `{module.__name__}` must define exactly one informant.Plugin "
            f"subclass; found {names}"
        )
    return found[0]


class _Object:
    """An event's object: its header came with the event, its JSON is fetched if read (by the
    event's id, which the host answers for while the event is in hand)."""

    __slots__ = ("id", "raw")

    def __init__(self, id: int, raw: bytes):
        self.id = id
        self.raw = raw

    def header(self) -> bytes:
        return self.raw

    def json(self) -> str:
        return events.json(self.id)


class _Old:
    """An updated event's previous version: header and JSON fetched if read."""

    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id

    def header(self) -> bytes:
        raw = events.old_header(self.id)
        assert raw is not None, "the host has the previous version it announced"
        return raw

    def json(self) -> str:
        text = events.old_json(self.id)
        assert text is not None, "the host has the previous version it announced"
        return text


def _handle(plugin: Optional[Plugin], e: wit.Event) -> "Result[None, wit.Failure]":
    """Runs one event; never raises: a failure is the outcome."""
    try:
        if plugin is None:
            return Err(wit.Failure_Error("handle called before a successful init"))
        obj = _Object(e.id, e.header)
        old = _Old(e.id) if e.has_old else None
        ev = Event(_TYPES[e.event_type], obj, old, e.initial, e.final_state_unknown)
        error, retry = outcome(plugin, ev)
    except Exception as x:  # noqa: BLE001 - outcome catches the handler's; this is the SDK's own
        return Err(wit.Failure_Error(describe(x)))
    if retry is not None:
        return Err(wit.Failure_Retry(wit.RetryLater(retry.reason, retry.after_ms)))
    if error is not None:
        return Err(wit.Failure_Error(error))
    return Ok(None)


def world(module: ModuleType) -> type:
    """The ``WitWorld`` export class for the plugin defined in ``module``."""
    cls = plugin_class(module)
    instance: "list[Optional[Plugin]]" = [None]

    class WitWorld(wit_world.WitWorld):
        #: The box holding the plugin instance once ``init`` succeeded; ``admission_hook``
        #: answers with it too.
        instance_box = instance

        def init(self, config: str) -> None:
            try:
                instance[0] = construct(cls, config)
            except Exception as e:  # noqa: BLE001 - any failure is init's error
                raise Err(describe(e)) from None

        def handle_queued(self) -> None:
            previous: "Optional[Result[None, wit.Failure]]" = None
            while (e := events.next(previous)) is not None:
                previous = _handle(instance[0], e)

        def handle_schedule(self, name: str) -> None:
            plugin = instance[0]
            if plugin is None:
                raise Err("handle called before a successful init")
            error = tick(plugin, name)
            if error is not None:
                raise Err(error)

    return WitWorld


def admission_hook(world_cls: type) -> type:
    """The ``AdmissionHook`` export class (interface ``admission-hook``) answering with the
    plugin instance of ``world_cls`` (what ``world`` returned). An exception from ``admit`` is
    the ``err`` of ``result<response, string>``, which applies the table's failure policy."""
    from wit_world.imports import admission as wit_admission

    instance: "list[Optional[Plugin]]" = world_cls.instance_box

    class AdmissionHook:
        def admit(self, request: "wit_admission.Request") -> "wit_admission.Response":
            plugin = instance[0]
            if plugin is None:
                raise Err("handle called before a successful init")
            _backend.admitting = True
            try:
                a = answer(plugin, AdmissionRequest(request))
            except Exception as e:  # noqa: BLE001 - any failure is the request's error
                raise Err(describe(e)) from None
            finally:
                _backend.admitting = False
            return wit_admission.Response(
                a.allowed, a.code, a.message, list(a.warnings), a.patch_json
            )

    return AdmissionHook
