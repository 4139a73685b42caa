"""label-policy in Python: warns about objects missing required labels, logs per-kind summaries.

Behaves like ``plugins/label-policy`` (same config, same log lines):

- ``required = ["team", ...]``: labels every object must carry (at least one);
- ``summary-every = N`` (default 100; 0 = never): a summary after every N handled events;
- ``resources = [{ api-version = "v1", kind = "ConfigMap" }, ...]`` (optional): the kinds a
  summary covers; without it, the kinds seen in events so far.

A violation is a warn line built from the host-parsed metadata (no JSON parse)::

    {"violation":{"kind":"ConfigMap","namespace":"default","name":"cfg"},"missing":["team"]}

A summary is an info line counting, per kind and required label, the cached objects without it
(``cache.list`` with the selector ``!label``)::

    {"summary":{"apps/v1/Deployment":{"missing:team":2},"v1/ConfigMap":{"missing:team":0}}}

Summaries come after every N-th handled event and at the start of each resync round (a resync
after a non-resync event), so one burst of resyncs yields one summary.
"""

import json
import re

from informant import Event, EventType, Plugin, QueryError, Resource, cache, log

_KEY = re.compile(r"^[A-Za-z0-9._/-]+$")
_CONFIG_KEYS = {"required", "summary-every", "resources"}


def _encode(line: dict) -> str:
    return json.dumps(line, separators=(",", ":"), sort_keys=True)


class LabelPolicy(Plugin):
    """The plugin instance: the config, the kinds a summary covers, and the event count."""

    def __init__(self, config: dict):
        unknown = sorted(set(config) - _CONFIG_KEYS)
        if unknown:
            raise ValueError(f"label-policy config: unknown field `{unknown[0]}`")
        required = config.get("required")
        if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
            raise ValueError("label-policy config: `required` must be a list of label keys")
        if not required:
            raise ValueError("label-policy config: `required` names no label")
        for k in required:
            if k.count("/") > 1 or not _KEY.match(k):
                raise ValueError(f"label-policy config: `required` has an invalid label key `{k}`")
        every = config.get("summary-every", 100)
        if not isinstance(every, int) or isinstance(every, bool) or every < 0:
            raise ValueError("label-policy config: `summary-every` must be a non-negative integer")
        resources = config.get("resources")
        self.required = required
        self.summary_every = every
        self.fixed_kinds = resources is not None
        self.kinds = {Resource.from_api_version(k["api-version"], k["kind"]) for k in resources or []}
        self.handled = 0
        self.last_was_resync = False

    def on_added(self, ev: Event) -> None:
        self._after(ev, check=True)

    def on_updated(self, ev: Event) -> None:
        self._after(ev, check=True)

    def on_deleted(self, ev: Event) -> None:
        self._after(ev, check=False)

    def on_resync(self, ev: Event) -> None:
        self._after(ev, check=True)

    def _after(self, ev: Event, check: bool) -> None:
        if not self.fixed_kinds:
            self.kinds.add(ev.resource)
        if check:
            self._check(ev)
        self.handled += 1
        resync = ev.event_type is EventType.RESYNC
        round_starts = resync and not self.last_was_resync
        self.last_was_resync = resync
        periodic = self.summary_every > 0 and self.handled % self.summary_every == 0
        if round_starts or periodic:
            self._summary()

    def _check(self, ev: Event) -> None:
        meta = ev.meta
        missing = [label for label in self.required if meta.label(label) is None]
        if missing:
            obj = {"kind": ev.resource.kind, "namespace": meta.namespace, "name": meta.name}
            log.warn(_encode({"violation": obj, "missing": missing}))

    def _summary(self) -> None:
        summary = {}
        for r in sorted(self.kinds):
            counts = {}
            for label in self.required:
                try:
                    counts[f"missing:{label}"] = len(cache.list_json(r, selector=f"!{label}"))
                except QueryError as e:
                    raise RuntimeError(f"summary of {r}: {e}") from e
            summary[str(r)] = counts
        log.info(_encode({"summary": summary}))
