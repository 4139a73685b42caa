"""Events: the kind and metadata without a JSON parse, the object as a dict on demand.

The header's bytes (``parse_header``, ``encode_header``) are defined once, in the Rust crate
``informant-header`` (``crates/header/src/lib.rs``: the layout, its contract version and its
tests); this module follows that definition.
"""

import json
import struct
from enum import Enum
from typing import Any, Dict, List, Optional, Protocol, Tuple

from .resource import Resource


class EventType(Enum):
    """What happened to the object; the value is the lower-case name."""

    ADDED = "added"
    UPDATED = "updated"
    DELETED = "deleted"
    RESYNC = "resync"


class Source(Protocol):
    """An object as the host (or the test harness) holds it: its header and its JSON."""

    def header(self) -> bytes:
        """The kind and metadata in the contract's length-prefixed encoding."""
        ...

    def json(self) -> str:
        """The object as JSON."""
        ...


class Meta:
    """The metadata most plugins need, parsed by the host: no JSON parse involved."""

    __slots__ = ("namespace", "name", "uid", "resource_version", "labels")

    def __init__(
        self,
        namespace: Optional[str],
        name: str,
        uid: str,
        resource_version: str,
        labels: Dict[str, str],
    ):
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.resource_version = resource_version
        self.labels = labels

    def label(self, key: str) -> Optional[str]:
        """The value of label ``key``, or None."""
        return self.labels.get(key)

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __repr__(self) -> str:
        return f"Meta({self.key!r}, uid={self.uid!r}, rv={self.resource_version!r}, labels={self.labels!r})"


def split_prefixed(raw: bytes, what: str, part: str, whole: str) -> List[bytes]:
    """The parts of ``raw``, each after its length as a little-endian u32 (the contract's
    encoding of a header's fields, and of ``by-index-headers``' headers); a malformed ``raw``
    raises ValueError, its message starting with ``what`` and calling the parts ``part`` and the
    whole ``whole``."""
    out: List[bytes] = []
    at, end = 0, len(raw)
    while at < end:
        if at + 4 > end:
            raise ValueError(f"{what}: truncated length at byte {at}")
        (n,) = struct.unpack_from("<I", raw, at)
        at += 4
        if at + n > end:
            raise ValueError(f"{what}: {part} of {n} bytes overruns the {whole} at byte {at}")
        out.append(bytes(raw[at : at + n]))
        at += n
    return out


def join_prefixed(parts: List[bytes]) -> bytes:
    """``parts``, each after its length as a little-endian u32."""
    return b"".join(struct.pack("<I", len(p)) + p for p in parts)


def parse_header(raw: bytes) -> Tuple[Resource, Meta]:
    """Decodes the contract's ``header`` encoding; raises ValueError if it is malformed."""
    fields = [f.decode("utf-8") for f in split_prefixed(raw, "object header", "field", "header")]
    if len(fields) < 7 or (len(fields) - 7) % 2:
        raise ValueError(f"object header: {len(fields)} fields, expected 7 plus label pairs")
    group, version, kind, namespace, name, uid, rv = fields[:7]
    labels = dict(zip(fields[7::2], fields[8::2]))
    return Resource(group, version, kind), Meta(namespace or None, name, uid, rv, labels)


def encode_header(resource: Resource, meta: Meta) -> bytes:
    """The contract's ``header`` encoding of a kind and metadata (labels sorted by key)."""
    fields = [
        resource.group,
        resource.version,
        resource.kind,
        meta.namespace or "",
        meta.name,
        meta.uid,
        meta.resource_version,
    ]
    for k in sorted(meta.labels):
        fields += [k, meta.labels[k]]
    return join_prefixed([f.encode("utf-8") for f in fields])


class _Lazy:
    """One object: header and JSON fetched from the source on first use, then kept."""

    __slots__ = ("src", "_head", "_json", "_dict")

    def __init__(self, src: Source):
        self.src = src
        self._head: Optional[Tuple[Resource, Meta]] = None
        self._json: Optional[str] = None
        self._dict: Optional[Dict[str, Any]] = None

    def head(self) -> Tuple[Resource, Meta]:
        if self._head is None:
            self._head = parse_header(self.src.header())
        return self._head

    def json(self) -> str:
        if self._json is None:
            self._json = self.src.json()
        return self._json

    def dict(self) -> Dict[str, Any]:
        if self._dict is None:
            self._dict = json.loads(self.json())
        return self._dict


class Event:
    """One event for one plugin.

    ``resource`` and ``meta`` are decoded from the header the event brought, with no host call and
    no JSON parse; ``object`` copies the JSON in and parses it on first use only, so a plugin pays
    for what it reads. Its objects can be read during the handler call it came with only: the host
    answers for the event in hand, and reading a kept event later traps.
    """

    def __init__(
        self,
        event_type: EventType,
        obj: Source,
        old: Optional[Source] = None,
        initial: bool = False,
        final_state_unknown: bool = False,
    ):
        self.event_type = event_type
        self.initial = initial
        self.final_state_unknown = final_state_unknown
        self._obj = _Lazy(obj)
        self._old = None if old is None else _Lazy(old)

    @property
    def resource(self) -> Resource:
        """The object's kind."""
        return self._obj.head()[0]

    @property
    def meta(self) -> Meta:
        """The object's metadata (for deleted: its final or last known state)."""
        return self._obj.head()[1]

    @property
    def old_meta(self) -> Optional[Meta]:
        """For updated: the previous version's metadata."""
        return None if self._old is None else self._old.head()[1]

    @property
    def json(self) -> str:
        """The object as JSON (managedFields removed)."""
        return self._obj.json()

    @property
    def old_json(self) -> Optional[str]:
        """For updated: the previous version as JSON."""
        return None if self._old is None else self._old.json()

    @property
    def object(self) -> Dict[str, Any]:
        """The object, parsed on first use."""
        return self._obj.dict()

    @property
    def old_object(self) -> Optional[Dict[str, Any]]:
        """For updated: the previous version, parsed on first use."""
        return None if self._old is None else self._old.dict()

    def __repr__(self) -> str:
        return f"Event({self.event_type.value}, {self.resource}, {self.meta.key!r})"
