"""Metrics on the host's ``/metrics``: counters, gauges and histograms, exported as
``informant_plugin_NAME`` (a tenant's plugin: ``informant_tenant_TENANT__NAME``) with the host's
``plugin`` and ``tenant`` labels added.

    from informant import metrics

    metrics.counter("violations", "Objects breaking the policy.").labels(kind="Deployment").add(1)
    metrics.gauge("queue_depth", "Items waiting.").set(4)
    metrics.histogram("payload_bytes", "Payload sizes.", buckets=[1e3, 1e4]).observe(2048)

The host checks every call that would create a series (names by Prometheus's rules; labels other
than ``plugin``, ``tenant`` and ``__*``; one type per name; the plugin's series ceiling) and
refuses it with a ``MetricError`` subclass naming the rule; a refused call changes nothing. In
tests the ``informant.testing.Harness`` records the calls (``h.metrics``) and accepts them.
"""

from typing import Dict, List, Optional, Sequence, Tuple

from . import _backend


class MetricError(Exception):
    """The host refused a metric call; the message names the metric and the rule."""


class InvalidName(MetricError):
    """The metric name breaks the naming rules."""


class InvalidLabel(MetricError):
    """A label name or value breaks the label rules."""


class InvalidValue(MetricError):
    """Not a finite number, a counter going down, or help, group or buckets out of bounds."""


class TypeConflict(MetricError):
    """The name already has another type (here or in another plugin), or other buckets."""


class TooManySeries(MetricError):
    """The plugin holds as many series as it may."""


class Metric:
    """One series to write: a name, its help, labels and group. Made by ``counter``, ``gauge``
    or ``histogram``; ``labels`` and ``group`` return a new one."""

    def __init__(self, call: str, name: str, help: str, labels: Sequence[Tuple[str, str]] = (),
                 group: Optional[str] = None, buckets: Sequence[float] = ()):
        self._call = call
        self.name = name
        self.help = help
        self.label_pairs: List[Tuple[str, str]] = list(labels)
        self.group_name = group
        self.buckets: List[float] = [float(b) for b in buckets]

    def labels(self, **labels: str) -> "Metric":
        """The series with these labels (added to any given before)."""
        pairs = self.label_pairs + [(k, str(v)) for k, v in labels.items()]
        return Metric(self._call, self.name, self.help, pairs, self.group_name, self.buckets)

    def group(self, group: str) -> "Metric":
        """The series in ``group``: ``delete_group`` removes a group's series at once."""
        return Metric(self._call, self.name, self.help, self.label_pairs, group, self.buckets)

    def _write(self, call: str, value: float) -> None:
        if call != self._call:
            raise TypeConflict(f"metric `{self.name}`: made for {self._call}, written by {call}")
        _backend.current.metric(call, self.name, self.help, list(self.label_pairs),
                                self.group_name, self.buckets, float(value))

    def add(self, value: float = 1.0) -> None:
        """Adds ``value`` (finite, not negative) to a counter."""
        self._write("counter-add", value)

    def inc(self) -> None:
        """Adds one to a counter."""
        self.add(1.0)

    def set(self, value: float) -> None:
        """Sets a gauge."""
        self._write("gauge-set", value)

    def observe(self, value: float) -> None:
        """Counts one observation into a histogram."""
        self._write("histogram-observe", value)


def counter(name: str, help: str = "") -> Metric:
    """A counter: only goes up."""
    return Metric("counter-add", name, help)


def gauge(name: str, help: str = "") -> Metric:
    """A gauge: set to any finite value."""
    return Metric("gauge-set", name, help)


def histogram(name: str, help: str = "", buckets: Sequence[float] = ()) -> Metric:
    """A histogram with these bucket upper bounds (ascending; Prometheus's defaults when none),
    fixed by the metric's first use."""
    return Metric("histogram-observe", name, help, buckets=buckets)


def delete(name: str, /, **labels: str) -> bool:
    """Removes one series; whether it existed."""
    return _backend.current.metric_delete(name, [(k, str(v)) for k, v in labels.items()])


def delete_group(group: str) -> int:
    """Removes every series of ``group``; how many there were."""
    return _backend.current.metric_delete_group(group)


#: The WIT variant's case names, as the exceptions raised for them.
ERRORS: Dict[str, type] = {
    "MetricError_InvalidName": InvalidName,
    "MetricError_InvalidLabel": InvalidLabel,
    "MetricError_InvalidValue": InvalidValue,
    "MetricError_TypeConflict": TypeConflict,
    "MetricError_TooManySeries": TooManySeries,
}
