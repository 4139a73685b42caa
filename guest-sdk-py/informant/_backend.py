"""Where the SDK's host calls go: the component's imports, or the native test harness.

Inside a component the generated ``wit_world`` bindings exist and every call goes to the host.
Natively they do not, and ``informant.testing`` installs an in-memory backend instead; a call
made with neither fails with a clear message rather than an ImportError deep in a handler.
"""

from typing import Any, Callable, List, Optional, Tuple

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
    from wit_world.imports import kube as _wit_kube
    from wit_world.imports import informant_plugin_types as _wit_types
    from wit_world.imports import log as _wit_log
    from wit_world.imports import metrics as _wit_metrics
    from componentize_py_types import Err as _Err

    IN_COMPONENT = True
except ImportError:
    IN_COMPONENT = False

_wasi_http = None
if IN_COMPONENT:
    try:  # Only a contract whose world imports wasi:http has its bindings.
        from . import _wasi_http
    except ImportError:
        pass


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

    def by_index_headers(self, r: Resource, index: str, value: str) -> bytes:
        try:
            return bytes(_wit_cache.by_index_headers(self._r(r), index, value))
        except _Err as e:
            raise _query_error(e) from None

    def count_by_index(self, r: Resource, index: str, value: str, selector: Optional[str]) -> int:
        try:
            return _wit_cache.count_by_index(self._r(r), index, value, selector)
        except _Err as e:
            raise _query_error(e) from None

    def log(self, level: int, message: str) -> None:
        _wit_log.log(_wit_log.Level(level), message)

    def http_send(self, request: Any) -> Any:
        if admitting:
            from .admission import HTTP_REFUSED
            from .http import Denied

            raise Denied(f"{request.method} {request.url}: {HTTP_REFUSED}", "http-request-denied")
        if _wasi_http is None:
            from .http import HttpError

            raise HttpError(
                f"{request.method} {request.url}: this plugin's contract does not import wasi:http"
            )
        return _wasi_http.send(request)

    def metric(self, call: str, name: str, help: str, labels: List[Tuple[str, str]],
               group: Optional[str], buckets: List[float], value: float) -> None:
        from .metrics import ERRORS, MetricError

        m = _wit_metrics.Metric(name, help, labels, group)
        try:
            if call == "counter-add":
                _wit_metrics.counter_add(m, value)
            elif call == "gauge-set":
                _wit_metrics.gauge_set(m, value)
            else:
                _wit_metrics.histogram_observe(m, buckets, value)
        except _Err as e:
            v = e.value
            raise ERRORS.get(type(v).__name__, MetricError)(getattr(v, "value", str(v))) from None

    def metric_delete(self, name: str, labels: List[Tuple[str, str]]) -> bool:
        return _wit_metrics.delete(name, labels)

    def metric_delete_group(self, group: str) -> int:
        return _wit_metrics.delete_group(group)

    # Writes: each host call, with its WriteError variant raised as the matching exception.
    def _write(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except _Err as e:
            raise _write_error(e) from None

    def create(self, r: Resource, namespace: Optional[str], obj: str) -> str:
        return self._write(lambda: _wit_kube.create(self._r(r), namespace, obj))

    def apply(self, r: Resource, namespace: Optional[str], name: str, obj: str, force: bool) -> str:
        return self._write(lambda: _wit_kube.apply(self._r(r), namespace, name, obj, force))

    def patch(self, r: Resource, namespace: Optional[str], name: str, kind: str, patch: str) -> str:
        kinds = {"merge": _wit_kube.PatchType.MERGE, "json": _wit_kube.PatchType.JSON,
                 "strategic": _wit_kube.PatchType.STRATEGIC}
        return self._write(lambda: _wit_kube.patch(self._r(r), namespace, name, kinds[kind], patch))

    def delete(self, r: Resource, namespace: Optional[str], name: str,
               uid: Optional[str], resource_version: Optional[str]) -> None:
        pre = _wit_kube.Preconditions(uid, resource_version)
        self._write(lambda: _wit_kube.delete(self._r(r), namespace, name, pre))

    def update_status(self, r: Resource, namespace: Optional[str], name: str, obj: str) -> str:
        return self._write(lambda: _wit_kube.update_status(self._r(r), namespace, name, obj))

    def record_event(self, regarding: dict, warning: bool, reason: str, action: str, note: str) -> None:
        ref = _wit_kube.ObjectRef(self._r(regarding["kind"]), regarding["namespace"],
                                  regarding["name"], regarding["uid"])
        severity = _wit_kube.EventSeverity.WARNING if warning else _wit_kube.EventSeverity.NORMAL
        self._write(lambda: _wit_kube.record_event(ref, severity, reason, action, note))


def _write_error(e: "_Err") -> Exception:
    from . import kube

    v = e.value
    name = type(v).__name__
    if name == "WriteError_Denied":
        return kube.Denied(v.value)
    kinds = {
        "WriteError_Conflict": kube.Conflict,
        "WriteError_NotFound": kube.NotFound,
        "WriteError_Forbidden": kube.Forbidden,
        "WriteError_Invalid": kube.Invalid,
    }
    api = v.value
    return kinds.get(name, kube.Failed)(api.message, api.code, api.reason)


#: Set by the component's ``admit`` export while it runs: the host refuses outbound HTTP then,
#: and the SDK says why first (writes the host refuses with its own message).
admitting = False

# Replaced by informant.testing while a harness runs a plugin.
current = _WitBackend() if IN_COMPONENT else _Unavailable()
