"""The component glue (``informant._guest``) run natively against stand-in ``wit_world`` bindings:
``handle-queued`` drains ``events.next``, reporting each event's outcome with the next request,
and reads an event's JSON and previous version by its id while it is in hand; ``admit`` answers
with the same instance, its errors the export's ``err``."""

import dataclasses
import enum
import importlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from informant import Admission, PatchOp, Plugin, Retry, _backend, http
from informant.admission import HTTP_REFUSED, NO_ADMIT
from informant.testing import DictSource, admission_request


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


@dataclass
class WitResponse:
    allowed: bool
    code: int
    message: str
    warnings: list
    patch: Optional[str]


class WitOperation(enum.Enum):
    CREATE = 0
    UPDATE = 1
    DELETE = 2
    CONNECT = 3


class WitEventType(enum.Enum):
    ADDED = 0
    UPDATED = 1
    DELETED = 2
    RESYNC = 3


@dataclass
class WitEvent:
    id: int
    event_type: WitEventType
    header: bytes
    has_old: bool
    initial: bool
    final_state_unknown: bool


def cm(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "d", "name": name}}


@pytest.fixture
def glue(monkeypatch):
    """``informant._guest`` imported over stand-in bindings; ``queue`` feeds ``events.next``."""
    log, queue = [], []
    # The host's side: the event in hand, by id, with its object and previous version.
    hand = {}

    def next_(previous):
        log.append(("next", previous))
        hand.clear()
        if not queue:
            return None
        e, obj, old = queue.pop(0)
        hand[e.id] = (obj, old)
        return e

    def in_hand(id):
        assert id in hand, f"event {id} read when it was not in hand"
        return hand[id]

    def json_(id):
        log.append(("json", id))
        return DictSource(in_hand(id)[0]).json()

    def old_json(id):
        old = in_hand(id)[1]
        return None if old is None else DictSource(old).json()

    def old_header(id):
        log.append(("old-header", id))
        old = in_hand(id)[1]
        return None if old is None else DictSource(old).header()

    cpt = types.ModuleType("componentize_py_types")
    cpt.Ok, cpt.Err, cpt.Result = Ok, Err, Any
    ww = types.ModuleType("wit_world")
    ww.WitWorld = object
    imports = types.ModuleType("wit_world.imports")
    events = types.ModuleType("wit_world.imports.events")
    events.next, events.json, events.old_json, events.old_header = next_, json_, old_json, old_header
    wit = types.ModuleType("wit_world.imports.informant_plugin_types")
    wit.EventType, wit.Event, wit.Failure = WitEventType, WitEvent, Any
    wit.Failure_Error, wit.Failure_Retry, wit.RetryLater = Failure_Error, Failure_Retry, RetryLater
    admission = types.ModuleType("wit_world.imports.admission")
    admission.Response = WitResponse
    imports.events, imports.informant_plugin_types, imports.admission = events, wit, admission
    for m in (cpt, ww, imports, events, wit, admission):
        monkeypatch.setitem(sys.modules, m.__name__, m)
    monkeypatch.delitem(sys.modules, "informant._guest", raising=False)
    guest = importlib.import_module("informant._guest")
    yield guest, log, queue
    sys.modules.pop("informant._guest", None)


_ids = iter(range(1, 1 << 30))


def event(name, old=None):
    """What ``events.next`` hands out, with the object and previous version the host holds."""
    t = WitEventType.UPDATED if old else WitEventType.ADDED
    header = DictSource(cm(name)).header()
    e = WitEvent(next(_ids), t, header, old is not None, False, False)
    return e, cm(name), cm(old) if old else None


class Mixed(Plugin):
    """Succeeds, fails or asks for a retry by the object's name."""

    __module__ = "plugin"  # as if defined in the plugin's own module

    def on_added(self, ev):
        if ev.meta.name == "bad":
            raise ValueError("bad object")
        if ev.meta.name == "later":
            raise Retry("not yet", after_ms=50)
        if ev.meta.name == "changed":
            try:
                raise Retry("asked first")
            except Retry:
                # The exception that escapes decides: a Retry caught on the way is not one.
                raise ValueError("changed its mind") from None

    def on_updated(self, ev):
        assert ev.old_object["metadata"]["name"] == "old"


def plugin_module():
    module = types.ModuleType("plugin")
    module.Mixed = Mixed
    return module


def test_each_outcome_goes_with_the_next_request(glue):
    guest, log, queue = glue
    w = guest.world(plugin_module())()
    w.init("{}")
    queue += [event("ok"), event("bad"), event("later"), event("changed"), event("new", old="old")]
    w.handle_queued()
    assert log[0] == ("next", None)
    assert log[1] == ("next", Ok(None))
    err = log[2][1]
    assert isinstance(err, Err) and isinstance(err.value, Failure_Error)
    assert err.value.value.startswith("ValueError: bad object")
    assert log[3] == ("next", Err(Failure_Retry(RetryLater("not yet", 50))))
    err = log[4][1]
    assert isinstance(err, Err) and isinstance(err.value, Failure_Error)
    assert err.value.value.startswith("ValueError: changed its mind")
    # The update's handler read its previous version (by the event's id, not logged here).
    assert log[5:] == [("next", Ok(None))]
    # A second batch starts afresh: no outcome before its first event.
    log.clear()
    w.handle_queued()
    assert log == [("next", None)]


def test_a_kept_event_read_after_its_turn_is_refused(glue):
    guest, log, queue = glue
    kept = []

    class Keeper(Plugin):
        __module__ = "plugin"

        def on_added(self, ev):
            if kept:
                kept[0].json
            kept.append(ev)

    module = types.ModuleType("plugin")
    module.Keeper = Keeper
    w = guest.world(module)()
    w.init("{}")
    queue += [event("first"), event("second")]
    queue_ids = [e.id for e, _, _ in queue]
    w.handle_queued()
    # Here the stand-in host refuses with an error; the real host traps.
    assert log[2] == ("json", queue_ids[0])
    err = log[3][1]
    assert isinstance(err, Err) and "not in hand" in err.value.value


def test_events_before_a_successful_init_fail_one_by_one(glue):
    guest, log, queue = glue
    w = guest.world(plugin_module())()
    with pytest.raises(Err):
        w.init("not json")
    queue += [event("a"), event("b")]
    w.handle_queued()
    failed = ("next", Err(Failure_Error("handle called before a successful init")))
    assert log == [("next", None), failed, failed]


def test_a_schedule_tick_reaches_the_plugin_and_its_error_is_the_result(glue):
    guest, log, queue = glue
    ticked = []

    class Ticker(Plugin):
        __module__ = "plugin"

        def on_schedule(self, name):
            if name == "bad":
                raise Retry("means nothing here")
            ticked.append(name)

    module = types.ModuleType("plugin")
    module.Ticker = Ticker
    w = guest.world(module)()
    with pytest.raises(Err, match="before a successful init"):
        w.handle_schedule("sweep")
    w.init("{}")
    w.handle_schedule("sweep")
    assert ticked == ["sweep"]
    with pytest.raises(Err) as refused:
        w.handle_schedule("bad")
    assert "means nothing here" in str(refused.value.value)
    # A plugin without schedules answers ok.
    w = guest.world(plugin_module())()
    w.init("{}")
    w.handle_schedule("anything")


def wit_request(operation, obj, **changes):
    """What the host passes to ``admit``: the harness's record, with the generated enum."""
    wire = admission_request(operation.name.lower(), obj).to_wit()
    return dataclasses.replace(wire, operation=operation, **changes)


class Admitter(Plugin):
    """Answers by the object's name: allows, denies, patches, fails, or tries HTTP."""

    __module__ = "plugin"

    def __init__(self, config):
        self.prefix = config.get("prefix", "")

    def admit(self, req):
        if req.name == "bad":
            raise ValueError("cannot tell")
        if req.name == "http":
            http.get("https://example.com/")
        if req.name == "deny":
            return Admission.deny(f"{self.prefix}{req.operation} of {req.meta.key}").with_code(422)
        if req.name == "patch":
            return Admission.patch([PatchOp.add("/metadata/labels", {"a": "b"})]).warn("patched")
        return Admission.allow()


def admitter_module():
    module = types.ModuleType("plugin")
    module.Admitter = Admitter
    return module


def test_admit_answers_with_the_instance_init_built(glue):
    guest, _, _ = glue
    world = guest.world(admitter_module())
    hook = guest.admission_hook(world)()
    with pytest.raises(Err, match="before a successful init"):
        hook.admit(wit_request(WitOperation.CREATE, cm("deny")))
    world().init('{"prefix": "no: "}')
    assert hook.admit(wit_request(WitOperation.CREATE, cm("ok"))) == WitResponse(True, 0, "", [], None)
    assert hook.admit(wit_request(WitOperation.DELETE, cm("deny"))) == WitResponse(
        False, 422, "no: delete of d/deny", [], None
    )
    assert hook.admit(wit_request(WitOperation.UPDATE, cm("patch"), hook="label")) == WitResponse(
        True, 0, "", ["patched"], '[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]'
    )


def test_an_admit_error_is_the_exports_err_and_http_is_refused_during_admit(glue, monkeypatch):
    guest, _, _ = glue
    # The component's backend: it refuses HTTP during admit before any import is called.
    monkeypatch.setattr(_backend, "current", _backend._WitBackend())
    world = guest.world(admitter_module())
    world().init("{}")
    hook = guest.admission_hook(world)()
    with pytest.raises(Err) as failed:
        hook.admit(wit_request(WitOperation.CREATE, cm("bad")))
    assert failed.value.value.startswith("ValueError: cannot tell (at test_guest.py:")
    with pytest.raises(Err) as refused:
        hook.admit(wit_request(WitOperation.CREATE, cm("http")))
    assert refused.value.value.startswith(
        f"informant.http.Denied: GET https://example.com/: {HTTP_REFUSED}"
    )
    # The flag is down again once admit returns, whichever way it did.
    assert _backend.admitting is False

    class Silent(Plugin):
        __module__ = "plugin"

    module = types.ModuleType("plugin")
    module.Silent = Silent
    world = guest.world(module)
    world().init("{}")
    with pytest.raises(Err) as none:
        guest.admission_hook(world)().admit(wit_request(WitOperation.CREATE, cm("x")))
    assert none.value.value.startswith(f"NotImplementedError: {NO_ADMIT}")
