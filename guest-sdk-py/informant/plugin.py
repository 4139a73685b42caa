"""The plugin base class and the dispatch the host and the test harness share."""

import inspect
import json
import traceback
from typing import Any, Dict, Optional, Tuple

from .admission import NO_ADMIT, Admission, AdmissionRequest
from .errors import Retry
from .event import Event, EventType


class Plugin:
    """Subclass it and override the handlers you need; the others do nothing (except ``admit``,
    which refuses: only a plugin that overrides it should have ``[[admit]]`` tables).

    One instance lives per host instance: constructed by ``init`` with the manifest's
    ``[config]`` table as a dict, then fed one event at a time. Raise any exception to fail an
    event (logged and counted against the plugin; the instance keeps running), or ``Retry`` to
    have it redelivered later. After a trap or a missed deadline the host builds a new
    instance, so state kept here must be rebuildable from cache queries.
    """

    def __init__(self, config: Dict[str, Any]):
        self.config = config

    def on_added(self, ev: Event) -> None:
        """An object new to this plugin: created, seen in a relist, or part of a replay."""

    def on_updated(self, ev: Event) -> None:
        """An object changed; ``ev.old_object`` is the version this plugin saw before."""

    def on_deleted(self, ev: Event) -> None:
        """An object is gone; its final state, or the last known one if ``final_state_unknown``."""

    def on_resync(self, ev: Event) -> None:
        """The periodic re-delivery of a current object (the manifest's ``resync-seconds``)."""

    def on_schedule(self, name: str) -> None:
        """The manifest's ``[[schedule]]`` table ``name`` ticked. Runs under the event deadline,
        never while an event is handled; the cache answers as for events. Raise to count the
        tick as an error (``Retry`` means nothing here: it counts as an error too)."""

    def admit(self, req: AdmissionRequest) -> Admission:
        """Answers one AdmissionReview request from a ``[[admit]]`` table of the manifest (see
        ``informant.admission`` for the contract: cache reads only, no writes or HTTP, no
        per-request state). Raise to apply the table's ``failure-policy`` (``Retry`` means
        nothing here: it counts as an error too). The default raises: a plugin without
        ``[[admit]]`` tables is never asked."""
        raise NotImplementedError(NO_ADMIT)


def construct(cls: type, config_json: str) -> Plugin:
    """Builds the plugin from the config JSON; any failure becomes a ValueError with its cause."""
    try:
        config = json.loads(config_json) if config_json else {}
    except ValueError as e:
        raise ValueError(f"config is not JSON: {e}") from None
    return cls(config)


def dispatch(plugin: Plugin, ev: Event) -> None:
    """Calls the handler for the event's type."""
    handler = {
        EventType.ADDED: plugin.on_added,
        EventType.UPDATED: plugin.on_updated,
        EventType.DELETED: plugin.on_deleted,
        EventType.RESYNC: plugin.on_resync,
    }[ev.event_type]
    handler(ev)


def answer(plugin: Plugin, req: AdmissionRequest) -> Admission:
    """Runs ``admit``, checking that it answered with an ``Admission``; its exceptions propagate."""
    a = plugin.admit(req)
    if not isinstance(a, Admission):
        what = "a coroutine (admit is synchronous)" if inspect.iscoroutine(a) else type(a).__name__
        if inspect.iscoroutine(a):
            a.close()
        raise TypeError(
            f"admit returned {what}, not an Admission "
            "(Admission.allow(), .deny(message) or .patch(ops))"
        )
    return a


def tick(plugin: Plugin, name: str) -> Optional[str]:
    """Runs one schedule tick: None on success, else the error (a Retry is an error here)."""
    try:
        plugin.on_schedule(name)
    except Exception as e:  # noqa: BLE001 - every guest exception is the tick's failure
        return describe(e)
    return None


def describe(e: BaseException) -> str:
    """``Type: message (at file:line in function)``: enough to find a failure from the host's log."""
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        f = tb[-1]
        text += f" (at {f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name})"
    return text


def outcome(plugin: Plugin, ev: Event) -> Tuple[Optional[str], Optional[Retry]]:
    """Runs one event: (None, None) on success, (error, None) on failure, (None, retry) on Retry."""
    try:
        dispatch(plugin, ev)
    except Retry as r:
        return None, r
    except Exception as e:  # noqa: BLE001 - every guest exception is the event's failure
        return describe(e), None
    return None, None
