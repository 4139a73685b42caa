"""Where the SDK's host calls go: the component's imports, or the native test harness.

Inside a component the generated ``wit_world`` bindings exist and every call goes to the host.
Natively they do not, and ``informant.testing`` installs an in-memory backend instead; a call
made with neither fails with a clear message rather than an ImportError deep in a handler.
"""

from typing import Callable, List, Optional

from .errors import BadSelector, Forbidden, NotWatched, QueryError, UnknownIndex
from .resource import Resource


class _Unavailable:
    def __getattr__(self, name: str) -> Callable:
        raise RuntimeError(
            f"informant: `{name}` needs the host; run the plugin as a component, or in tests "
            "through informant.testing.Harness"
        )


try:  # Only a componentize-py build has the generated bindings.
    from wit_world.imports import cache as _wit_cache
    from wit_world.imports import informant_plugin_types as _wit_types
    from wit_world.imports import log as _wit_log
    from componentize_py_types import Err as _Err

    IN_COMPONENT = True
except ImportError:
    IN_COMPONENT = False


def _query_error(e: "_Err") -> QueryError:
    v = e.value
    kinds = {
        "QueryError_Forbidden": Forbidden,
        "QueryError_NotWatched": NotWatched,
        "QueryError_BadSelector": BadSelector,
        "QueryError_UnknownIndex": UnknownIndex,
    }
    cls = kinds.get(type(v).__name__, QueryError)
    return cls(getattr(v, "value", str(v)))


class _WitBackend:
    """The host's imports, with query errors turned into exceptions."""

    @staticmethod
    def _r(r: Resource):
        return _wit_types.Resource(r.group, r.version, r.kind)

    def get(self, r: Resource, namespace: Optional[str], name: str) -> Optional[str]:
        try:
            return _wit_cache.get(self._r(r), namespace, name)
        except _Err as e:
            raise _query_error(e) from None

    def list(self, r: Resource, namespace: Optional[str], selector: Optional[str]) -> List[str]:
        try:
            return _wit_cache.list(self._r(r), namespace, selector)
        except _Err as e:
            raise _query_error(e) from None

    def by_index(self, r: Resource, index: str, value: str) -> List[str]:
        try:
            return _wit_cache.by_index(self._r(r), index, value)
        except _Err as e:
            raise _query_error(e) from None

    def log(self, level: int, message: str) -> None:
        _wit_log.log(_wit_log.Level(level), message)


# Replaced by informant.testing while a harness runs a plugin.
current = _WitBackend() if IN_COMPONENT else _Unavailable()
