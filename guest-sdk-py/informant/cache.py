"""Read-only queries against the host's informer cache; refusals raise ``QueryError``s.

Answers reflect the cache at the moment of the call, which may be ahead of the event being
handled. Each function parses the objects it returns; the ``*_json`` forms hand back the JSON
text for plugins that only pass it on.
"""

import json
from typing import Any, Dict, List, Optional, Tuple

from . import _backend
from .event import Meta, join_prefixed, parse_header, split_prefixed
from .resource import Resource


def get_json(r: Resource, name: str, namespace: Optional[str] = None) -> Optional[str]:
    """One object by name (and namespace, None for cluster-scoped kinds) as JSON, or None."""
    return _backend.current.get(r, namespace, name)


def get(r: Resource, name: str, namespace: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """One object by name (and namespace, None for cluster-scoped kinds), or None."""
    text = get_json(r, name, namespace)
    return None if text is None else json.loads(text)


def list_json(
    r: Resource, namespace: Optional[str] = None, selector: Optional[str] = None
) -> List[str]:
    """Objects in a namespace (all when None) matching a label selector (all when None), as JSON."""
    return _backend.current.list(r, namespace, selector)


def list(
    r: Resource, namespace: Optional[str] = None, selector: Optional[str] = None
) -> List[Dict[str, Any]]:
    """Objects in a namespace (all when None) matching a label selector (all when None)."""
    return [json.loads(t) for t in list_json(r, namespace, selector)]


def by_index_json(r: Resource, index: str, value: str) -> List[str]:
    """Objects whose index ``index`` has ``value``, as JSON (see ``by_index``)."""
    return _backend.current.by_index(r, index, value)


def by_index(r: Resource, index: str, value: str) -> List[Dict[str, Any]]:
    """Objects whose index ``index`` has ``value``.

    Built-in indexes: ``namespace``, ``label`` (values ``key=value``), ``owner`` (owner uid);
    others come from the manifest. Costs the number of matches, never a scan of the cache.
    """
    return [json.loads(t) for t in by_index_json(r, index, value)]


def by_index_meta(r: Resource, index: str, value: str) -> List[Tuple[Resource, Meta]]:
    """The kind and metadata of each object whose index ``index`` has ``value``: one copy from
    the host and no JSON, for policies that look at many objects' names and labels."""
    return [parse_header(h) for h in split_headers(_backend.current.by_index_headers(r, index, value))]


def count_by_index(r: Resource, index: str, value: str, selector: Optional[str] = None) -> int:
    """How many objects whose index ``index`` has ``value`` match a label selector (all when
    None), counted in the host's cache: nothing is copied into the plugin."""
    return _backend.current.count_by_index(r, index, value, selector)


def split_headers(buf: bytes) -> List[bytes]:
    """The headers of a ``by-index-headers`` answer: each after its length, a little-endian u32."""
    return split_prefixed(buf, "header list", "header", "list")


def join_headers(headers: List[bytes]) -> bytes:
    """The ``by-index-headers`` encoding of ``headers``: each after its length, a little-endian u32."""
    return join_prefixed(headers)
