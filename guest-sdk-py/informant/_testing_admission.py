"""Admission requests in the harness: ``admission_request`` builds one as the host would hand it
over, ``Harness.admit`` (in ``informant.testing``) answers it with the plugin against the
harness's cache. Re-exported from ``informant.testing``."""

import copy
import json
import re
from typing import Any, Dict, Optional, Sequence, Union

from .admission import AdmissionRequest, GroupVersionResource, Operation, UserInfo, WireRequest
from .event import Meta, encode_header
from .resource import Resource

Obj = Dict[str, Any]


def admission_request(
    operation: Union[Operation, str], obj: Union[Obj, str]
) -> "AdmissionRequestBuilder":
    """Starts an admission request for ``operation`` (``"create"``, ``"update"``, ``"delete"``,
    ``"connect"`` or an ``Operation``) on ``obj`` (a dict or JSON text; ``managedFields``
    removed). For ``"delete"``, ``obj`` is the stored object: the request has no object, its old
    object is this one, as the API server sends it.

    The kind, namespace and name come from the object (``apiVersion`` and ``kind`` are required,
    the name may be absent as on a create with ``generateName``), the header as the host encodes
    it, the plural resource name from the kind (override with ``.resource(...)``). The user is
    ``tester`` in ``system:authenticated``.

        answer = harness.admit(admission_request("create", pod).user("alice", ["devs"]))
    """
    return AdmissionRequestBuilder(operation, obj)


class AdmissionRequestBuilder:
    """An ``AdmissionRequest`` being built: see ``admission_request``. Each setter returns the
    builder."""

    def __init__(self, operation: Union[Operation, str], obj: Union[Obj, str]):
        try:
            self.operation = Operation(operation)
        except ValueError:
            ops = ", ".join(o.value for o in Operation)
            raise ValueError(
                f"admission_request: operation must be one of {ops}, got {operation!r}"
            ) from None
        self._object = _to_object(obj)
        _kind_of(self._object)  # refused here, where the test names the object
        self._old: Optional[Obj] = None
        self._uid = "test-request"
        self._hook = ""
        # Boxed: (None,) is a cluster-scoped request, no box the object's namespace.
        self._ns: Optional[tuple] = None
        self._name: Optional[str] = None
        self._gvr: Optional[GroupVersionResource] = None
        self._sub = ""
        self._who = UserInfo("tester", "", ("system:authenticated",), ())
        self._dry = False
        self._options: Optional[str] = None

    def old_object(self, old: Union[Obj, str]) -> "AdmissionRequestBuilder":
        """The stored object an update replaces (for a delete, ``admission_request``'s object is
        already the stored one; this replaces it)."""
        self._old = _to_object(old)
        return self

    def namespace(self, namespace: Optional[str]) -> "AdmissionRequestBuilder":
        """The request's namespace (default: the object's; None for cluster-scoped)."""
        self._ns = (namespace or None,)
        return self

    def name(self, name: str) -> "AdmissionRequestBuilder":
        """The request's name (default: the object's ``metadata.name``, or empty)."""
        self._name = name
        return self

    def hook(self, hook: str) -> "AdmissionRequestBuilder":
        """The ``[[admit]]`` table the request comes through (default: the first of the
        harness's manifest that takes it, else empty)."""
        self._hook = hook
        return self

    def uid(self, uid: str) -> "AdmissionRequestBuilder":
        """The request's uid (default ``test-request``)."""
        self._uid = uid
        return self

    def user(self, username: str, groups: Sequence[str] = ()) -> "AdmissionRequestBuilder":
        """The user asking, and the groups they are in."""
        if isinstance(groups, str):
            raise TypeError("user: groups is a list of group names, not a string")
        self._who = UserInfo(username, self._who.uid, tuple(groups), self._who.extra)
        return self

    def user_info(self, info: UserInfo) -> "AdmissionRequestBuilder":
        """The user asking, in full (uid and extra attributes too)."""
        self._who = info
        return self

    def dry_run(self, dry_run: bool = True) -> "AdmissionRequestBuilder":
        """Marks the request as a dry run."""
        self._dry = dry_run
        return self

    def sub_resource(self, sub_resource: str) -> "AdmissionRequestBuilder":
        """The subresource addressed, e.g. ``status``."""
        self._sub = sub_resource
        return self

    def resource(self, group: str, version: str, resource: str) -> "AdmissionRequestBuilder":
        """The resource addressed (default: the kind's group and version, and its plural)."""
        self._gvr = GroupVersionResource(group, version, resource)
        return self

    def options(self, options: Obj) -> "AdmissionRequestBuilder":
        """The operation's options (e.g. ``{"kind": "CreateOptions", ...}``)."""
        self._options = json.dumps(options, separators=(",", ":"))
        return self

    def to_wit(self) -> WireRequest:
        """The record the host would pass to the ``admit`` export."""
        if self.operation is Operation.DELETE:
            obj, old = None, self._old if self._old is not None else self._object
        else:
            obj, old = self._object, self._old
        # The header is the object's, or for a delete the stored object's.
        described = obj if obj is not None else old
        kind = _kind_of(described)
        meta = described.get("metadata") or {}

        def text(key: str) -> Optional[str]:
            v = meta.get(key)
            return v if isinstance(v, str) else None

        namespace = self._ns[0] if self._ns is not None else (text("namespace") or None)
        name = self._name if self._name is not None else (text("name") or "")
        # As the host does: the object's metadata, its name and namespace filled in from the
        # request's when it has none.
        own_ns = text("namespace")
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if isinstance(v, str)}
        header = encode_header(
            kind,
            Meta(
                own_ns if own_ns is not None else namespace,
                text("name") if text("name") is not None else name,
                text("uid") or "",
                text("resourceVersion") or "",
                labels,
            ),
        )
        gvr = self._gvr or GroupVersionResource(kind.group, kind.version, plural(kind.kind))
        return WireRequest(
            uid=self._uid,
            hook=self._hook,
            kind=kind,
            resource=gvr,
            sub_resource=self._sub,
            operation=self.operation,
            namespace=namespace,
            name=name,
            user_info=self._who,
            object=None if obj is None else _compact(obj),
            old_object=None if old is None else _compact(old),
            header=header,
            dry_run=self._dry,
            options=self._options,
        )

    def build(self) -> AdmissionRequest:
        """The request."""
        return AdmissionRequest(self.to_wit())


def declares(table: Dict[str, Any], request: WireRequest) -> bool:
    """Whether the ``[[admit]]`` table (as parsed TOML) sends ``request`` to the plugin, its
    selectors aside. A table without ``operations`` takes creates and updates, as the host reads
    it."""
    kind = Resource.from_api_version(table.get("api-version", ""), table.get("kind", ""))
    ops = table.get("operations", ["create", "update"])
    return kind == Resource(request.kind.group, request.kind.version, request.kind.kind) and (
        str(request.operation) in ops
    )


def plural(kind: str) -> str:
    """The plural resource name the API server most likely serves a kind under: lower case,
    ``-es`` after a sibilant, ``-ies`` for a consonant and ``y`` (``Ingress`` -> ``ingresses``,
    ``NetworkPolicy`` -> ``networkpolicies``); a kind it gets wrong (``Endpoints``) takes
    ``.resource(...)``."""
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if re.search(r"[^aeiou]y$", lower):
        return lower[:-1] + "ies"
    return lower + "s"


def _compact(obj: Obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _to_object(o: Union[Obj, str]) -> Obj:
    """A copy of ``o`` (or ``o`` parsed) without ``metadata.managedFields``."""
    value: Any = o
    if isinstance(o, (str, bytes)):
        try:
            value = json.loads(o)
        except ValueError as e:
            raise ValueError(f"admission_request: object is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"admission_request: object must be a JSON object, got {value!r:.200}")
    out = copy.deepcopy(value)
    if isinstance(out.get("metadata"), dict):
        out["metadata"].pop("managedFields", None)
    return out


def _kind_of(o: Obj) -> Resource:
    """An object's kind, from ``apiVersion`` and ``kind``."""
    if not isinstance(o.get("apiVersion"), str):
        raise ValueError("admission_request: object has no `apiVersion`")
    if not isinstance(o.get("kind"), str):
        raise ValueError("admission_request: object has no `kind`")
    return Resource.from_api_version(o["apiVersion"], o["kind"])
