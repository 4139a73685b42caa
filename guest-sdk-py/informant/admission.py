"""Admission hooks: answer the API server's AdmissionReview requests from a plugin.

A plugin whose manifest has ``[[admit]]`` tables gets ``Plugin.admit`` calls from the host's
webhook server: one ``AdmissionRequest`` per AdmissionReview, answered with an ``Admission``. A
table of ``mode = "validate"`` allows or denies; one of ``mode = "mutate"`` may also change the
object with a JSON Patch (``Admission.patch``). A raised exception, a trap or a missed
``timeout-ms`` applies the table's ``failure-policy`` (``fail`` refuses the request, ``ignore``
lets it through).

Contract:

- During ``admit`` the plugin reads the ``cache`` under its tenant's grant (the kinds its
  manifest watches); ``kube`` writes raise ``kube.Denied`` (``WRITES_REFUSED``, the host's words)
  and outbound ``http`` raises ``http.Denied`` (``HTTP_REFUSED``): admission has no side effects.
  A request with ``dry_run`` set must be answered the same as without it.
- Each call runs on an instance of its own, never shared with a concurrent request, and the host
  keeps a pool of instances (each built from ``[config]``) and reuses them: keep no per-request
  state on the plugin between calls, and expect two requests to land on two instances.
- Kubernetes runs mutating hooks before validating ones, so a validating hook sees the object as
  the mutating ones left it. A patch may not change the object's apiVersion, kind, name or
  namespace, and a validating table's patch is an error. ``req.hook`` names the table a request
  came through, so one plugin can hold a validating and a mutating table for one kind.

    from informant import Admission, Plugin

    class NoLatest(Plugin):
        def admit(self, req):
            for c in (req.object() or {}).get("spec", {}).get("containers", []):
                if str(c.get("image", "")).endswith(":latest"):
                    return Admission.deny(f"container `{c['name']}` uses a :latest image")
            return Admission.allow()
"""

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .event import Meta, parse_header
from .resource import Resource

#: Why a write made during ``admit`` is denied: the host's words, which the harness uses too.
WRITES_REFUSED = "writes are refused during admission: an admission hook has no side effects"

#: Why outbound HTTP during ``admit`` is denied (the SDK says so before the host refuses it).
HTTP_REFUSED = "outbound HTTP is refused during admission: an admission hook has no side effects"

#: The error ``Plugin.admit`` raises when a plugin does not override it.
NO_ADMIT = "this plugin does not answer admission requests (it implements no `admit`)"


class Operation(str, Enum):
    """The API operation being admitted, as the contract (and the manifest's ``operations``)
    names it. A ``str``: ``req.operation == "create"`` holds for a create."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    CONNECT = "connect"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class GroupVersionResource:
    """A group, version and plural resource name, as the request addressed it."""

    #: API group, empty for the core group.
    group: str
    version: str
    #: The plural resource name, e.g. ``deployments``.
    resource: str


@dataclass(frozen=True)
class UserInfo:
    """The user the API server authenticated."""

    #: E.g. ``system:serviceaccount:ns:sa`` or ``alice@example.com``.
    username: str
    #: Often empty.
    uid: str = ""
    groups: Tuple[str, ...] = ()
    #: Extra attributes the authenticator added: a key and its values.
    extra: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()


@dataclass
class WireRequest:
    """The contract's ``admission.request`` record, field for field: what the harness builds
    (``testing.admission_request``) and what the component's generated record looks like.
    ``operation`` is an ``Operation`` here, the generated enum in a component."""

    uid: str
    hook: str
    kind: Resource
    resource: GroupVersionResource
    sub_resource: str
    operation: Operation
    namespace: Optional[str]
    name: str
    user_info: UserInfo
    object: Optional[str]
    old_object: Optional[str]
    header: bytes
    dry_run: bool
    options: Optional[str]


def _operation(op: Any) -> Operation:
    """Ours, a name, or the generated enum (``CREATE``, ...)."""
    if isinstance(op, Operation):
        return op
    return Operation(op.lower() if isinstance(op, str) else op.name.lower())


_ABSENT = object()


class AdmissionRequest:
    """One admission request: the object, its kind and metadata (parsed by the host, as an
    event's), the operation and who asked for it. ``meta`` needs no JSON parse; ``object()`` and
    ``old_object()`` parse the JSON on first use."""

    def __init__(self, wire: Any):
        """Wraps the contract's request record (``WireRequest``, or the generated one)."""
        self.wire = wire
        #: Identifies the request (the host copies it into the response).
        self.uid: str = wire.uid
        #: The name of the manifest's ``[[admit]]`` table the request came through: a plugin with
        #: a validating and a mutating table for one kind tells their calls apart by it.
        self.hook: str = wire.hook
        self.operation: Operation = _operation(wire.operation)
        #: The object's kind.
        self.kind = Resource(wire.kind.group, wire.kind.version, wire.kind.kind)
        #: The resource the request addressed (group, version, plural name).
        self.resource = GroupVersionResource(
            wire.resource.group, wire.resource.version, wire.resource.resource
        )
        #: The subresource addressed (``status``, ``scale``, ...); empty for the main resource.
        self.sub_resource: str = wire.sub_resource
        #: The request's namespace; None for cluster-scoped objects.
        self.namespace: Optional[str] = wire.namespace or None
        #: The object's name; empty on a create whose name the server generates.
        self.name: str = wire.name
        u = wire.user_info
        #: The user the API server authenticated.
        self.user_info = UserInfo(
            u.username, u.uid, tuple(u.groups), tuple((k, tuple(v)) for k, v in u.extra)
        )
        #: Nothing will be stored: answer as usual, and cause no effect.
        self.dry_run: bool = wire.dry_run
        #: The object as it would be stored, as JSON (managedFields removed); None for a delete.
        self.object_json: Optional[str] = wire.object
        #: For an update or a delete: the stored object as JSON (managedFields removed).
        self.old_object_json: Optional[str] = wire.old_object
        #: The operation's options (CreateOptions, UpdateOptions or DeleteOptions) as JSON.
        self.options_json: Optional[str] = wire.options
        self._meta: Optional[Meta] = None
        self._object: Any = _ABSENT
        self._old: Any = _ABSENT

    @property
    def meta(self) -> Meta:
        """The object's metadata (for a delete: the stored object's), parsed by the host."""
        if self._meta is None:
            if not self.wire.header:
                raise ValueError(
                    f"admission request {self.uid}: no object, so no metadata "
                    f"({self.operation} of {self.kind})"
                )
            self._meta = parse_header(bytes(self.wire.header))[1]
        return self._meta

    def object(self) -> Optional[Dict[str, Any]]:
        """The object as it would be stored, parsed on first use; None for a delete."""
        if self._object is _ABSENT:
            self._object = self._decode(self.object_json, "object")
        return self._object

    def old_object(self) -> Optional[Dict[str, Any]]:
        """For an update or a delete: the stored object, parsed on first use; else None."""
        if self._old is _ABSENT:
            self._old = self._decode(self.old_object_json, "old object")
        return self._old

    def _decode(self, text: Optional[str], what: str) -> Optional[Dict[str, Any]]:
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError as e:
            raise ValueError(f"admission request {self.uid}: the {what} is not JSON: {e}") from None

    def __repr__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"AdmissionRequest({self.operation}, {self.kind}, {where!r}, hook={self.hook!r})"


class PatchOp:
    """One JSON Patch (RFC 6902) operation, for ``Admission.patch``; paths are JSON pointers
    (``json_pointer`` builds one from keys)."""

    __slots__ = ("op", "path", "value")

    def __init__(self, op: str, path: str, value: Any = None):
        if op not in ("add", "replace", "remove"):
            raise ValueError(f"PatchOp: op must be add, replace or remove, got {op!r}")
        self.op = op
        self.path = path
        self.value = value

    @classmethod
    def add(cls, path: str, value: Any) -> "PatchOp":
        """Sets ``path`` to ``value``: adds an object member (replacing one there), or inserts
        into an array (``-`` appends). The parent must exist."""
        return cls("add", path, value)

    @classmethod
    def replace(cls, path: str, value: Any) -> "PatchOp":
        """Replaces the value at ``path``, which must exist."""
        return cls("replace", path, value)

    @classmethod
    def remove(cls, path: str) -> "PatchOp":
        """Removes the value at ``path``, which must exist."""
        return cls("remove", path)

    def to_json(self) -> Dict[str, Any]:
        """The operation as JSON: ``{"op": ..., "path": ..., "value": ...}``."""
        if self.op == "remove":
            return {"op": self.op, "path": self.path}
        return {"op": self.op, "path": self.path, "value": self.value}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PatchOp) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"PatchOp({self.to_json()!r})"


def json_pointer(keys: Sequence[str]) -> str:
    """A JSON pointer (RFC 6901) to the member reached by ``keys``: each key escaped (``~`` as
    ``~0``, ``/`` as ``~1``) and prefixed with ``/``; ``["metadata", "labels", "a/b"]`` is
    ``/metadata/labels/a~1b``."""
    if isinstance(keys, str):
        raise TypeError("json_pointer takes a list of keys, not a string")
    return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in keys)


def _compact(value: Any) -> str:
    """JSON as the host and the other SDKs write it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Admission:
    """The answer to an ``AdmissionRequest``: allowed (possibly with a patch) or denied, with
    warnings either way. Immutable: ``with_code`` and ``warn`` return a new answer."""

    #: Whether the request is let through.
    allowed: bool
    #: A denial's HTTP status code (0 means 403).
    code: int = 0
    #: A denial's message.
    message: str = ""
    #: The warnings, in the order they were added.
    warnings: Tuple[str, ...] = field(default=())
    #: The patch as the host receives it (JSON text); None without one.
    patch_json: Optional[str] = None

    @classmethod
    def allow(cls) -> "Admission":
        """Lets the request through unchanged."""
        return cls(True)

    @classmethod
    def deny(cls, message: str) -> "Admission":
        """Refuses the request: the client sees ``admission webhook "..." denied the request:
        MESSAGE`` with HTTP status 403 (see ``with_code``)."""
        return cls(False, 0, str(message))

    @classmethod
    def patch(cls, ops: Sequence[Union[PatchOp, Dict[str, Any]]]) -> "Admission":
        """Lets the request through with a JSON Patch (RFC 6902) applied to the object: a
        mutating hook's answer. ``ops`` is the list of operations (``PatchOp``s, or plain
        ``{"op", "path", "value"}`` dicts); an empty list is no patch."""
        if isinstance(ops, (str, bytes, dict)) or not isinstance(ops, (list, tuple)):
            raise TypeError("Admission.patch takes a list of JSON Patch operations")
        body = [op.to_json() if isinstance(op, PatchOp) else op for op in ops]
        return cls(True, 0, "", (), _compact(body) if body else None)

    @classmethod
    def patch_text(cls, text: str) -> "Admission":
        """Lets the request through with a JSON Patch already serialized, passed on as it is
        (the host refuses text that is not a JSON Patch array)."""
        return cls(True, 0, "", (), str(text))

    def with_code(self, code: int) -> "Admission":
        """This answer with a denial's HTTP status code (default 403)."""
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code < 2**16:
            raise ValueError(f"Admission code must fit in a u16, got {code!r}")
        return Admission(self.allowed, code, self.message, self.warnings, self.patch_json)

    def warn(self, text: str) -> "Admission":
        """This answer with a warning shown to the client, allowed or not (the host keeps at
        most 16, each at most 256 bytes)."""
        warnings = self.warnings + (str(text),)
        return Admission(self.allowed, self.code, self.message, warnings, self.patch_json)

    def patch_ops(self) -> Optional[List[Dict[str, Any]]]:
        """The patch parsed back into operations (for tests); None without one."""
        return None if self.patch_json is None else json.loads(self.patch_json)
