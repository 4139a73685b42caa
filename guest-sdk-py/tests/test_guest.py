"""The component glue (``informant._guest``) run natively against stand-in ``wit_world`` bindings:
``handle-queued`` drains ``events.next``, reporting each event's outcome with the next request
and dropping the event's handles before it."""

import enum
import importlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from informant import Plugin, Retry
from informant.testing import DictSource


@dataclass
class Ok:
    value: Any


@dataclass(frozen=True)
class Err(Exception):
    value: Any


@dataclass
class Failure_Error:
    value: str


@dataclass
class RetryLater:
    reason: str
    after_ms: Optional[int]


@dataclass
class Failure_Retry:
    value: RetryLater


class WitEventType(enum.Enum):
    ADDED = 0
    UPDATED = 1
    DELETED = 2
    RESYNC = 3


@dataclass
class WitEvent:
    event_type: WitEventType
    object: Any
    header: bytes
    old_object: Any
    initial: bool
    final_state_unknown: bool


class Handle(DictSource):
    """An object handle that records its drop and refuses use after it."""

    def __init__(self, obj, log):
        super().__init__(obj)
        self.log, self.dropped = log, False

    def header(self):
        assert not self.dropped, "handle used after it was dropped"
        return super().header()

    def __exit__(self, *exc):
        self.dropped = True
        self.log.append(("drop", self.obj["metadata"]["name"]))


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "d", "name": name}}


@pytest.fixture
def glue(monkeypatch):
    """``informant._guest`` imported over stand-in bindings; ``queue`` feeds ``events.next``."""
    log, queue = [], []

    def next_(previous):
        log.append(("next", previous))
        return queue.pop(0) if queue else None

    cpt = types.ModuleType("componentize_py_types")
    cpt.Ok, cpt.Err, cpt.Result = Ok, Err, Any
    ww = types.ModuleType("wit_world")
    ww.WitWorld = object
    imports = types.ModuleType("wit_world.imports")
    events = types.ModuleType("wit_world.imports.events")
    events.next = next_
    wit = types.ModuleType("wit_world.imports.informant_plugin_types")
    wit.EventType, wit.Event, wit.Failure = WitEventType, WitEvent, Any
    wit.Failure_Error, wit.Failure_Retry, wit.RetryLater = Failure_Error, Failure_Retry, RetryLater
    imports.events, imports.informant_plugin_types = events, wit
    for m in (cpt, ww, imports, events, wit):
        monkeypatch.setitem(sys.modules, m.__name__, m)
    monkeypatch.delitem(sys.modules, "informant._guest", raising=False)
    guest = importlib.import_module("informant._guest")
    yield guest, log, queue
    sys.modules.pop("informant._guest", None)


def event(name, log, old=None):
    t = WitEventType.UPDATED if old else WitEventType.ADDED
    header = DictSource(cm(name)).header()
    return WitEvent(t, Handle(cm(name), log), header, Handle(cm(old), log) if old else None, False, False)


class Mixed(Plugin):
    """Succeeds, fails or asks for a retry by the object's name."""

    __module__ = "plugin"  # as if defined in the plugin's own module

    def on_added(self, ev):
        if ev.meta.name == "bad":
            raise ValueError("bad object")
        if ev.meta.name == "later":
            raise Retry("not yet", after_ms=50)

    def on_updated(self, ev):
        assert ev.old_object["metadata"]["name"] == "old"


def plugin_module():
    module = types.ModuleType("plugin")
    module.Mixed = Mixed
    return module


def test_each_outcome_goes_with_the_next_request_after_the_handles_are_dropped(glue):
    guest, log, queue = glue
    w = guest.world(plugin_module())()
    w.init("{}")
    queue += [event("ok", log), event("bad", log), event("later", log), event("new", log, old="old")]
    w.handle_queued()
    steps = [s if s[0] == "drop" else ("next", s[1]) for s in log]
    assert steps[0] == ("next", None)
    assert steps[1:3] == [("drop", "ok"), ("next", Ok(None))]
    assert steps[3] == ("drop", "bad")
    err = steps[4][1]
    assert isinstance(err, Err) and isinstance(err.value, Failure_Error)
    assert err.value.value.startswith("ValueError: bad object")
    assert steps[5:7] == [("drop", "later"), ("next", Err(Failure_Retry(RetryLater("not yet", 50))))]
    assert steps[7:] == [("drop", "new"), ("drop", "old"), ("next", Ok(None))]
    # A second batch starts afresh: no outcome before its first event.
    log.clear()
    w.handle_queued()
    assert log == [("next", None)]


def test_events_before_a_successful_init_fail_one_by_one(glue):
    guest, log, queue = glue
    w = guest.world(plugin_module())()
    with pytest.raises(Err):
        w.init("not json")
    queue += [event("a", log), event("b", log)]
    w.handle_queued()
    failed = ("next", Err(Failure_Error("handle called before a successful init")))
    assert log == [("next", None), ("drop", "a"), failed, ("drop", "b"), failed]
