"""Unit-test plugins natively with pytest: no cluster, no wasm runtime.

A ``Harness`` owns a plugin instance, an in-memory ``MemCache``, the captured log, the writes
and metric calls made and an ``HttpStub`` answering outbound requests. While it runs the plugin,
the plugin's ``informant.cache``, ``log``, ``kube``, ``metrics`` and ``http`` calls go to them. Like the host, ``send``
first applies the event to the cache (added, updated and resync store the object, deleted removes
it), so queries see the object the event is about. ``admit`` answers an admission request built
by ``admission_request``.

    h = Harness(Echo, {})
    h.send(added({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"namespace": "default", "name": "cfg"}}))
    assert h.logs == [(Level.INFO, "added default/cfg")]
"""

import dataclasses
import json
import re
import tomllib
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

from . import _backend
# admission_request and its builder are the harness's too: re-exported from here.
from ._testing_admission import AdmissionRequestBuilder, admission_request, declares  # noqa: F401
from .admission import HTTP_REFUSED, WRITES_REFUSED, Admission, AdmissionRequest
from .errors import BadSelector, NotWatched, Retry, UnknownIndex
from .cache import join_headers
from .event import Event, EventType, Meta, encode_header
from .http import Denied as HttpDenied
from .http import HttpError, Request, Response, error_for
from .log import Level
from .plugin import answer, construct, dispatch
from .resource import Resource

Obj = Dict[str, Any]


class MetricCall(NamedTuple):
    """One ``metrics`` call a plugin made, as the harness recorded it."""

    #: ``counter-add``, ``gauge-set``, ``histogram-observe``, ``delete`` or ``delete-group``.
    call: str
    name: str
    help: str
    #: Label pairs, sorted by name.
    labels: Tuple[Tuple[str, str], ...]
    group: Optional[str]
    #: Added, set or observed (0 for deletes).
    value: float


def resource_of(obj: Obj) -> Resource:
    """The kind of a Kubernetes object given as a dict (``apiVersion`` and ``kind`` required)."""
    try:
        return Resource.from_api_version(obj["apiVersion"], obj["kind"])
    except KeyError as e:
        raise ValueError(f"object has no {e.args[0]}: {obj!r:.200}") from None


def meta_of(obj: Obj) -> Meta:
    """The metadata the host would parse from ``obj``."""
    m = obj.get("metadata") or {}
    if not m.get("name"):
        raise ValueError(f"object has no metadata.name: {obj!r:.200}")
    return Meta(
        m.get("namespace") or None,
        m["name"],
        m.get("uid", ""),
        m.get("resourceVersion", ""),
        dict(m.get("labels") or {}),
    )


class DictSource:
    """An object given as a dict, answering as the host does for an event's object."""

    def __init__(self, obj: Obj):
        self.obj = obj

    def header(self) -> bytes:
        """The contract's header encoding of the object's kind and metadata."""
        return encode_header(resource_of(self.obj), meta_of(self.obj))

    def json(self) -> str:
        """The object as JSON."""
        return json.dumps(self.obj)


def added(obj: Obj, initial: bool = False) -> Event:
    """An added event (``initial`` for one from a replay)."""
    return Event(EventType.ADDED, DictSource(obj), None, initial=initial)


def updated(old: Obj, new: Obj) -> Event:
    """An updated event from ``old`` to ``new``."""
    return Event(EventType.UPDATED, DictSource(new), DictSource(old))


def deleted(obj: Obj, final_state_unknown: bool = False) -> Event:
    """A deleted event with ``obj`` as the final state."""
    return Event(EventType.DELETED, DictSource(obj), None, final_state_unknown=final_state_unknown)


def resync(obj: Obj) -> Event:
    """A resync event."""
    return Event(EventType.RESYNC, DictSource(obj), None)


_KEY = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_REQ = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<nkey>[^\s,!=()]+)"
    r"|(?P<key>[^\s,!=()]+)\s*(?:(?P<op>==|=|!=)\s*(?P<val>[^\s,!=()]*)"
    r"|\s(?P<set>in|notin)\s*\((?P<vals>[^()]*)\))?)\s*$"
)

Requirement = Callable[[Dict[str, str]], bool]


def parse_selector(selector: str) -> List[Requirement]:
    """Parses a Kubernetes label selector; raises ``BadSelector`` naming the bad requirement."""
    parts, depth, cur = [], 0, ""
    for c in selector:
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    reqs: List[Requirement] = []
    for p in parts:
        if not p.strip() and selector.strip() == "":
            continue
        m = _REQ.match(p)
        key = m and (m["nkey"] or m["key"])
        if not m or not _KEY.match(key):
            raise BadSelector(f"label selector `{selector}`: cannot parse `{p.strip()}`")
        values = [m["val"]] if m["op"] else [v.strip() for v in (m["vals"] or "").split(",")]
        if (m["op"] or m["set"]) and not all(_VALUE.match(v) for v in values):
            raise BadSelector(f"label selector `{selector}`: invalid value in `{p.strip()}`")
        if m["nkey"]:
            reqs.append(lambda ls, k=key: k not in ls)
        elif m["op"] in ("=", "=="):
            reqs.append(lambda ls, k=key, v=values[0]: ls.get(k) == v)
        elif m["op"] == "!=":
            reqs.append(lambda ls, k=key, v=values[0]: ls.get(k) != v)
        elif m["set"] == "in":
            reqs.append(lambda ls, k=key, vs=values: ls.get(k) in vs)
        elif m["set"] == "notin":
            reqs.append(lambda ls, k=key, vs=values: ls.get(k) not in vs)
        else:
            reqs.append(lambda ls, k=key: k in ls)
    return reqs


class MemCache:
    """The informer cache in memory, answering queries as the host does.

    Until a kind is declared with ``watch`` (``Harness.from_manifest`` declares the manifest's),
    every kind may be queried; once one is, queries on undeclared kinds raise ``NotWatched``.
    """

    def __init__(self) -> None:
        self.objects: Dict[Tuple[Resource, Optional[str], str], Obj] = {}
        self.watched: set = set()
        self.indexes: Dict[Tuple[Resource, str], Callable[[Obj], Iterable[str]]] = {}

    def watch(self, r: Resource) -> "MemCache":
        """Declares a watched kind."""
        self.watched.add(r)
        return self

    def add_index(self, r: Resource, name: str, fn: Callable[[Obj], Iterable[str]]) -> "MemCache":
        """Declares index ``name`` on kind ``r``: ``fn`` gives an object's values."""
        self.indexes[(r, name)] = fn
        return self

    def put(self, *objs: Obj) -> "MemCache":
        """Stores objects (replacing any with the same kind, namespace and name)."""
        for o in objs:
            m = meta_of(o)
            self.objects[(resource_of(o), m.namespace, m.name)] = o
        return self

    def remove(self, obj: Obj) -> None:
        """Removes an object if present."""
        m = meta_of(obj)
        self.objects.pop((resource_of(obj), m.namespace, m.name), None)

    def _check(self, r: Resource) -> None:
        if self.watched and r not in self.watched:
            raise NotWatched(f"{r} is not watched by this plugin")

    def _of(self, r: Resource) -> List[Obj]:
        return [o for (kr, _, _), o in sorted(self.objects.items(), key=lambda kv: kv[0][1:]) if kr == r]

    def get(self, r: Resource, namespace: Optional[str], name: str) -> Optional[str]:
        """One object as JSON, or None."""
        self._check(r)
        o = self.objects.get((r, namespace, name))
        return None if o is None else json.dumps(o)

    def list(self, r: Resource, namespace: Optional[str], selector: Optional[str]) -> List[str]:
        """Objects as JSON, by namespace and label selector."""
        self._check(r)
        reqs = parse_selector(selector) if selector else []
        out = []
        for o in self._of(r):
            m = meta_of(o)
            if namespace is not None and m.namespace != namespace:
                continue
            if all(req(m.labels) for req in reqs):
                out.append(json.dumps(o))
        return out

    def by_index(self, r: Resource, index: str, value: str) -> List[str]:
        """Objects as JSON whose index has ``value``; built-ins: namespace, label, owner."""
        return [json.dumps(o) for o in self._indexed(r, index, value)]

    def by_index_headers(self, r: Resource, index: str, value: str) -> bytes:
        """What ``by_index`` finds as the host sends it to ``by-index-headers``."""
        return join_headers([encode_header(r, meta_of(o)) for o in self._indexed(r, index, value)])

    def count_by_index(self, r: Resource, index: str, value: str, selector: Optional[str]) -> int:
        """How many of what ``by_index`` finds match the label selector (all when None)."""
        reqs = parse_selector(selector) if selector else []
        return sum(1 for o in self._indexed(r, index, value) if all(q(meta_of(o).labels) for q in reqs))

    def _indexed(self, r: Resource, index: str, value: str) -> List[Obj]:
        self._check(r)
        builtin: Dict[str, Callable[[Obj], Iterable[str]]] = {
            "namespace": lambda o: [meta_of(o).namespace or ""],
            "label": lambda o: [f"{k}={v}" for k, v in meta_of(o).labels.items()],
            "owner": lambda o: [
                ref.get("uid", "") for ref in (o.get("metadata") or {}).get("ownerReferences") or []
            ],
        }
        fn = self.indexes.get((r, index)) or builtin.get(index)
        if fn is None:
            raise UnknownIndex(f"no index `{index}` is declared for {r}")
        return [o for o in self._of(r) if value in fn(o)]


def _origin(scheme: str, authority: str) -> Tuple[str, str, str]:
    """``(scheme, lowercase host, port)`` of a URL's authority (the scheme's default port when
    it names none; ``*`` stays a wildcard)."""
    host, port = authority, ""
    if authority.startswith("["):
        end = authority.find("]") + 1
        host, rest = authority[:end], authority[end:]
        port = rest[1:] if rest.startswith(":") else ""
    elif ":" in authority:
        host, port = authority.rsplit(":", 1)
    return scheme, host.lower(), port or ("443" if scheme == "https" else "80")


class HttpStub:
    """Outbound HTTP in tests: records each request and answers from canned responses.

    Nothing leaves the process. A request to a URL with no canned response raises
    ``HttpError``, as there is no host to send it through. With ``allowed`` set (a harness built
    from a manifest sets its ``allowed-outbound-hosts``), a request to an origin not listed
    raises ``http.Denied`` and is not recorded, as on the host (which also refuses
    non-canonical spellings this stub does not check).
    """

    def __init__(self) -> None:
        #: Every request sent (denied ones excepted), oldest first.
        self.requests: List[Request] = []
        #: Allowed origins (``scheme://host[:port]``, port ``*`` for any), or None: any.
        self.allowed: Optional[List[str]] = None
        self._answers: Dict[str, Union[Response, str]] = {}

    def respond(
        self,
        url: str,
        status: int = 200,
        body: Union[bytes, str, Dict[str, Any], List[Any]] = b"",
        headers: Optional[List[Tuple[str, str]]] = None,
    ) -> "HttpStub":
        """Answers every request to ``url`` (matched exactly, query included) with ``status``
        and ``body``: bytes, text (UTF-8), or a dict or list (sent as JSON)."""
        headers = list(headers or [])
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            headers.append(("content-type", "application/json"))
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        self._answers[url] = Response(status, headers, data)
        return self

    def fail(self, url: str, code: str = "connection-refused") -> "HttpStub":
        """Fails every request to ``url`` with ``wasi:http`` error ``code`` (lowercase, e.g.
        ``connection-read-timeout``, which raises ``http.Timeout``)."""
        self._answers[url] = code
        return self

    def _allows(self, request: Request) -> bool:
        if self.allowed is None:
            return True
        if "@" in request.authority:
            return False
        want = _origin(request.scheme, request.authority)
        for origin in self.allowed:
            scheme, _, authority = origin.partition("://")
            s, h, p = _origin(scheme.lower(), authority.rstrip("/"))
            if (s, h) == want[:2] and p in ("*", want[2]):
                return True
        return False

    def send(self, request: Request) -> Response:
        """The canned answer to ``request``, after recording it."""
        if not self._allows(request):
            raise error_for(request, "http-request-denied")
        self.requests.append(request)
        answer = self._answers.get(request.url)
        if answer is None:
            raise HttpError(
                f"{request.method} {request.url}: not sent: outbound HTTP needs the host, and "
                "the test harness has none (give it a canned answer with harness.http.respond)"
            )
        if isinstance(answer, str):
            raise error_for(request, answer)
        return answer


class Harness:
    """Drives one plugin instance the way the host does, against an in-memory cache."""

    def __init__(self, cls: type, config: Optional[Dict[str, Any]] = None, cache: Optional[MemCache] = None):
        self.cls = cls
        self.config_json = json.dumps(config or {})
        self.cache = cache or MemCache()
        self.logs: List[Tuple[Level, str]] = []
        #: Every write the plugin made, oldest first: dicts with ``verb``, ``resource``,
        #: ``namespace``, ``name`` and ``body`` (the object, patch, preconditions or Event).
        self.writes: List[Dict[str, Any]] = []
        #: The manifest's ``[[write]]`` tables when built from one: writes outside them raise
        #: ``kube.Denied`` as on the host. ``None``: anything goes.
        self.declared: Optional[List[Dict[str, Any]]] = None
        #: Every ``metrics`` call, oldest first (accepted: the host's rules are not checked).
        self.metrics: List[MetricCall] = []
        #: Outbound HTTP: the requests the plugin sent and the canned answers it gets.
        self.http = HttpStub()
        #: The manifest's ``[[schedule]]`` names when built from one: ``tick`` refuses others,
        #: as the host never ticks them. ``None``: any name.
        self.schedules: Optional[List[str]] = None
        #: The manifest's ``[[admit]]`` tables when built from one: ``admit`` refuses a request
        #: none of them takes, as the host never sends one. ``None``: any request.
        self.admits: Optional[List[Dict[str, Any]]] = None
        self.apply_to_cache = True
        # Inside ``admit``: writes and HTTP are refused, as the host refuses them.
        self._admitting = False
        self.plugin = self.run(lambda: construct(cls, self.config_json))

    @classmethod
    def from_manifest(
        cls, plugin_cls: type, manifest_path: str, config: Optional[Dict[str, Any]] = None
    ) -> "Harness":
        """Builds the plugin from a manifest's ``[config]`` (or ``config`` when given, to try
        another configuration with the manifest's tables); its watched kinds become the only
        kinds the cache answers for, its ``[[write]]`` tables the only writes allowed, its
        ``allowed-outbound-hosts`` the only origins ``http`` reaches, and its ``[[admit]]``
        tables the only requests ``admit`` takes, as on the host."""
        with open(manifest_path, "rb") as f:
            manifest = tomllib.load(f)
        cache = MemCache()
        for w in manifest.get("watch", []):
            cache.watch(Resource.from_api_version(w["api-version"], w["kind"]))
        harness = cls(plugin_cls, manifest.get("config", {}) if config is None else config, cache)
        harness.declared = manifest.get("write", [])
        harness.http.allowed = list(manifest.get("allowed-outbound-hosts", []))
        harness.schedules = [s["name"] for s in manifest.get("schedule", [])]
        harness.admits = list(manifest.get("admit", []))
        return harness

    def run(self, f: Callable[[], Any]) -> Any:
        """Calls ``f`` with the SDK's calls routed to this harness, as they are while it runs
        the plugin: for testing a plugin's helpers outside a handler."""
        previous, _backend.current = _backend.current, self
        try:
            return f()
        finally:
            _backend.current = previous

    def send(self, ev: Event) -> Optional[Retry]:
        """Applies the event to the cache (see ``apply_to_cache``) and hands it to the plugin.

        The plugin's exceptions propagate (the host would count the event failed); a ``Retry``
        is returned instead, as the host would schedule it.
        """
        if self.apply_to_cache:
            obj = ev.object
            if ev.event_type is EventType.DELETED:
                self.cache.remove(obj)
            else:
                self.cache.put(obj)
        try:
            self.run(lambda: dispatch(self.plugin, ev))
        except Retry as r:
            return r
        return None

    def tick(self, name: str) -> None:
        """Ticks the schedule ``name`` as the host's timer does: ``on_schedule`` with this
        harness's cache and log. The plugin's exceptions propagate (the host would count the
        tick as an error); a name the manifest does not declare raises ``ValueError``."""
        if self.schedules is not None and name not in self.schedules:
            raise ValueError(
                f"schedule `{name}` is not declared in the manifest's [[schedule]] tables"
            )
        self.run(lambda: self.plugin.on_schedule(name))

    def admit(self, request: Union[AdmissionRequestBuilder, AdmissionRequest]) -> Admission:
        """Answers one admission request as the host's webhook server does: ``admit`` on the
        instance, reading the harness's cache (the request's object is not stored: admission
        comes before the write). Writes raise ``kube.Denied`` with the host's message, and HTTP
        ``http.Denied``, neither recorded. The plugin's exceptions propagate (the host would
        apply the table's failure policy).

        A harness built from a manifest refuses a request whose kind and operation none of its
        ``[[admit]]`` tables takes (the host never sends one), with ``ValueError``, and names
        the table that takes it in ``req.hook`` unless the request names one. The answer is the
        plugin's as it is: the host's checks of it (a validating table's patch, a patch that
        renames the object, the bounds on warnings) are not made here.
        """
        wire = request.wire if isinstance(request, AdmissionRequest) else request.to_wit()
        if self.admits is not None:
            table = next(
                (t for t in self.admits
                 if (not wire.hook or t.get("name") == wire.hook) and declares(t, wire)),
                None,
            )
            if table is None:
                kind = Resource(wire.kind.group, wire.kind.version, wire.kind.kind)
                op = str(wire.operation).upper()
                raise ValueError(f"no [[admit]] table of the manifest admits {op} of {kind}")
            wire = dataclasses.replace(wire, hook=table["name"])
        req = AdmissionRequest(wire)
        self._admitting = True
        try:
            return self.run(lambda: answer(self.plugin, req))
        finally:
            self._admitting = False

    def restart(self) -> None:
        """Replaces the instance with a fresh one from the same config, as after a trap."""
        self.plugin = self.run(lambda: construct(self.cls, self.config_json))

    def take_logs(self) -> List[Tuple[Level, str]]:
        """The captured log lines, clearing them."""
        out, self.logs = self.logs, []
        return out

    # The backend interface the SDK's modules call while this harness runs the plugin.
    def get(self, r: Resource, namespace: Optional[str], name: str) -> Optional[str]:
        return self.cache.get(r, namespace, name)

    def list(self, r: Resource, namespace: Optional[str], selector: Optional[str]) -> List[str]:
        return self.cache.list(r, namespace, selector)

    def by_index(self, r: Resource, index: str, value: str) -> List[str]:
        return self.cache.by_index(r, index, value)

    def by_index_headers(self, r: Resource, index: str, value: str) -> bytes:
        return self.cache.by_index_headers(r, index, value)

    def count_by_index(self, r: Resource, index: str, value: str, selector: Optional[str]) -> int:
        return self.cache.count_by_index(r, index, value, selector)

    def log(self, level: int, message: str) -> None:
        self.logs.append((Level(level), message))

    def http_send(self, request: Request) -> Response:
        if self._admitting:
            message = f"{request.method} {request.url}: {HTTP_REFUSED}"
            raise HttpDenied(message, "http-request-denied")
        return self.http.send(request)

    def metric(self, call: str, name: str, help: str, labels: List[Tuple[str, str]],
               group: Optional[str], buckets: List[float], value: float) -> None:
        self.metrics.append(MetricCall(call, name, help, tuple(sorted(labels)), group, value))

    def _live(self) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], Optional[str]]:
        """The series written and not deleted since: (name, labels) to the latest group."""
        live: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], Optional[str]] = {}
        for c in self.metrics:
            if c.call == "delete":
                live.pop((c.name, c.labels), None)
            elif c.call == "delete-group":
                live = {k: g for k, g in live.items() if g != c.group}
            else:
                live[(c.name, c.labels)] = c.group
        return live

    def metric_delete(self, name: str, labels: List[Tuple[str, str]]) -> bool:
        key = (name, tuple(sorted(labels)))
        existed = key in self._live()
        self.metrics.append(MetricCall("delete", name, "", key[1], None, 0.0))
        return existed

    def metric_delete_group(self, group: str) -> int:
        n = sum(1 for g in self._live().values() if g == group)
        self.metrics.append(MetricCall("delete-group", "", "", (), group, 0.0))
        return n

    def metric_value(self, name: str, /, **labels: str) -> Optional[float]:
        """A counter's total or a gauge's last value over the recorded calls since the series
        was last deleted; ``None`` if it has none."""
        key = (name, tuple(sorted(labels.items())))
        if key not in self._live():
            return None
        value: Optional[float] = None
        for c in self.metrics:
            if (c.name, c.labels) != key:
                continue
            if c.call == "counter-add":
                value = (value or 0.0) + c.value
            elif c.call == "gauge-set":
                value = c.value
            elif c.call == "delete":
                value = None
        return value

    def _record(self, verb: str, r: Resource, namespace: Optional[str], name: Optional[str],
                body: str) -> str:
        from . import kube

        if self._admitting:
            raise kube.Denied(WRITES_REFUSED)
        if self.declared is not None:
            needs = {"record-event": "create", "apply-forced": "apply"}.get(verb, verb)
            needs = "patch" if needs.startswith("patch-") else needs

            def allows(w: Dict[str, Any]) -> bool:
                spaces = w.get("namespaces") or ([w["namespace"]] if "namespace" in w else None)
                return (
                    Resource.from_api_version(w.get("api-version", ""), w.get("kind", "")) == r
                    and needs in (w.get("verbs") or [])
                    and (spaces is None or namespace in spaces)
                )

            if not any(allows(w) for w in self.declared):
                where = f" in namespace `{namespace}`" if namespace else ""
                raise kube.Denied(
                    f"`{needs}` of `{r}`{where} is not declared in the manifest's [[write]] tables"
                )
        self.writes.append(
            {"verb": verb, "resource": r, "namespace": namespace, "name": name, "body": json.loads(body)}
        )
        return body

    def create(self, r: Resource, namespace: Optional[str], obj: str) -> str:
        return self._record("create", r, namespace, None, obj)

    def apply(self, r: Resource, namespace: Optional[str], name: str, obj: str, force: bool) -> str:
        return self._record("apply-forced" if force else "apply", r, namespace, name, obj)

    def patch(self, r: Resource, namespace: Optional[str], name: str, kind: str, patch: str) -> str:
        self._record(f"patch-{kind}", r, namespace, name, patch)
        # The object as stored is the host's to say; the cache's copy stands in for it.
        return self.cache.get(r, namespace, name) or "{}"

    def delete(self, r: Resource, namespace: Optional[str], name: str,
               uid: Optional[str], resource_version: Optional[str]) -> None:
        body = json.dumps({"uid": uid, "resourceVersion": resource_version})
        self._record("delete", r, namespace, name, body)

    def update_status(self, r: Resource, namespace: Optional[str], name: str, obj: str) -> str:
        return self._record("update-status", r, namespace, name, obj)

    def record_event(self, regarding: dict, warning: bool, reason: str, action: str, note: str) -> None:
        kind: Resource = regarding["kind"]
        body = json.dumps({
            "type": "Warning" if warning else "Normal", "reason": reason, "action": action,
            "note": note,
            "regarding": {"apiVersion": kind.api_version, "kind": kind.kind,
                          "namespace": regarding["namespace"], "name": regarding["name"],
                          "uid": regarding["uid"]},
        })
        events = Resource("events.k8s.io", "v1", "Event")
        self._record("record-event", events, regarding["namespace"] or "default", None, body)
