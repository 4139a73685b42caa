"""A Python test plugin whose config `mode` picks its behaviour; the e2e tests install it under
several names.

- `echo`: logs one JSON line per event (`tag`, `event`, `key`, `rv`, `initial`, and `cached`:
  whether `cache.get` finds the object), so tests see every event and a cache query round trip;
- `raise`: like echo, but raises ValueError for objects labelled `boom` (a failed event);
- `spin`: loops forever on every event (the deadline must stop it);
- `label`: on the (not initial) add of an object named `go-*`, applies the label `by=py` to it
  and tries to delete it (which its manifest does not declare), logging
  `{"tag", "key", "applied": labels, "delete": error class}`;
- `noop`: reads the object's name from the metadata header only, no JSON (the plugins
  benchmark's metadata-only plugin);
- `parse`: parses the object's JSON and reads a field (the benchmark's full-parse plugin);
- `post`: on each event not from a replay, POSTs `{"tag", "type", "key"}` as JSON to
  `config.url` (timeout `config.timeout-ms`, default 30000) and logs `{"tag", "key", "status",
  "body"}`, or `{"tag", "key", "class", "error"}` with the `informant.http` error's class and
  message (the event succeeds either way: the log is the record);
- `metrics`: on the (not initial) add of an object named `go-*`, adds 2 to the counter
  `polyglot_checks{name}`, observes 5 in the histogram `polyglot_sizes` (buckets 1 and 10),
  tries a gauge labelled `plugin`, deletes a gauge of its own and a group, and logs
  `{"tag", "key", "refused": "Class: message", "deleted", "group"}`.
"""

import json

from informant import Event, EventType, Plugin, cache, http, kube, log, metrics


class Hostile(Plugin):
    """Behaves as its config's `mode` says."""

    def __init__(self, config: dict):
        self.mode = config.get("mode", "echo")
        if self.mode not in ("echo", "raise", "spin", "label", "noop", "parse", "post", "metrics"):
            raise ValueError(f"unknown mode `{self.mode}`")
        self.tag = config.get("tag", self.mode)
        self.url = config.get("url")
        self.timeout = config.get("timeout-ms", 30000) / 1000

    def _on(self, ev: Event) -> None:
        if self.mode == "noop":
            # A failing event, not a silent pass, if the header path ever came back empty.
            if not ev.meta.name:
                raise ValueError("an object without a name")
            return
        if self.mode == "parse":
            if not ev.object["metadata"]["name"]:
                raise ValueError("an object without a name")
            return
        if self.mode == "spin":
            x = 0
            while True:
                x += 1
        if self.mode == "label":
            if ev.event_type is EventType.ADDED and not ev.initial and ev.meta.name.startswith("go-"):
                m = ev.meta
                stored = kube.apply(ev.resource, m.name, {"metadata": {"labels": {"by": "py"}}},
                                    namespace=m.namespace)
                try:
                    kube.delete(ev.resource, m.name, namespace=m.namespace, uid=m.uid)
                    deleted = "none"
                except kube.WriteError as e:
                    deleted = f"{type(e).__name__}: {e}"
                line = {"tag": self.tag, "key": m.key,
                        "applied": stored["metadata"]["labels"], "delete": deleted}
                log.info(json.dumps(line))
            return
        if self.mode == "post":
            if not ev.initial:
                self._post(ev)
            return
        if self.mode == "metrics":
            if ev.event_type is EventType.ADDED and not ev.initial and ev.meta.name.startswith("go-"):
                self._metrics(ev)
            return
        if self.mode == "raise" and ev.meta.label("boom") is not None:
            raise ValueError(f"boom on {ev.meta.key}")
        got = cache.get(ev.resource, ev.meta.name, ev.meta.namespace)
        line = {
            "tag": self.tag,
            "event": ev.event_type.value,
            "key": ev.meta.key,
            "rv": ev.meta.resource_version,
            "initial": ev.initial,
            "cached": got is not None,
            "value": ev.object.get("data", {}).get("value"),
        }
        log.info(json.dumps(line))

    def _metrics(self, ev: Event) -> None:
        name = ev.meta.name
        metrics.counter("polyglot_checks", 'Checks, "quoted".').labels(name=name).add(2)
        metrics.histogram("polyglot_sizes", "Sizes.", buckets=[1, 10]).observe(5)
        try:
            metrics.gauge("polyglot_gauge").labels(plugin="evil").set(1)
            refused = "none"
        except metrics.MetricError as e:
            refused = f"{type(e).__name__}: {e}"
        metrics.gauge("polyglot_temp", "Gone again.").labels(name=name).group("g").set(1)
        deleted = metrics.delete("polyglot_temp", name=name)
        metrics.gauge("polyglot_temp", "Gone again.").labels(name=name).group("g").set(1)
        group = metrics.delete_group("g")
        line = {"tag": self.tag, "key": ev.meta.key, "refused": refused, "deleted": deleted,
                "group": group}
        log.info(json.dumps(line))

    def _post(self, ev: Event) -> None:
        key = ev.meta.key
        line = {"tag": self.tag, "type": ev.event_type.value, "key": key}
        try:
            r = http.post_json(self.url, line, timeout=self.timeout)
            outcome = {"tag": self.tag, "key": key, "status": r.status, "body": r.text()}
        except http.HttpError as e:
            outcome = {"tag": self.tag, "key": key, "class": type(e).__name__, "error": str(e)}
        log.info(json.dumps(outcome))

    on_added = on_updated = on_deleted = on_resync = _on
