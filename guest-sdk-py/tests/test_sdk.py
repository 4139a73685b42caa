"""The SDK's own tests: header decoding, lazy objects, the harness cache, errors and retries."""

import struct

import pytest

from informant import BadSelector, EventType, NotWatched, Plugin, Resource, Retry, UnknownIndex, cache, kube, log, metrics
from informant.event import Event, Meta, encode_header, parse_header
from informant.log import Level
from informant.plugin import describe, outcome
from informant.testing import DictSource, Harness, MemCache, added, deleted, updated


def cm(name, labels=None, ns="default", owner=None):
    meta = {"namespace": ns, "name": name, "uid": f"u-{name}", "resourceVersion": "7", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": name}}


CM = Resource("", "v1", "ConfigMap")


def test_header_round_trips_with_sorted_labels_and_unicode():
    raw = encode_header(Resource("apps", "v1", "Deployment"), Meta(None, "wéb", "u", "3", {"b": "2", "a": "1"}))
    r, m = parse_header(raw)
    assert (r, m.namespace, m.name, m.uid, m.resource_version) == (Resource("apps", "v1", "Deployment"), None, "wéb", "u", "3")
    assert list(m.labels.items()) == [("a", "1"), ("b", "2")]
    assert m.key == "wéb"


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\x01\x00", "truncated length"),
        (struct.pack("<I", 9) + b"abc", "overruns"),
        (struct.pack("<I", 0) * 8, "8 fields"),
    ],
)
def test_a_malformed_header_is_a_clear_error(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_header(raw)


class CountingSource(DictSource):
    def __init__(self, obj):
        super().__init__(obj)
        self.json_calls = 0

    def json(self):
        self.json_calls += 1
        return super().json()


def test_meta_needs_no_json_and_the_object_is_fetched_once():
    src = CountingSource(cm("a", {"team": "x"}))
    ev = Event(EventType.ADDED, src)
    assert ev.meta.label("team") == "x" and ev.resource == CM
    assert src.json_calls == 0
    assert ev.object["data"] == {"k": "a"} and ev.object is ev.object
    assert src.json_calls == 1


def test_updated_carries_the_old_version():
    ev = updated(cm("a", {"v": "1"}), cm("a", {"v": "2"}))
    assert ev.old_meta.labels == {"v": "1"} and ev.meta.labels == {"v": "2"}
    assert ev.old_object["metadata"]["labels"] == {"v": "1"}


def test_resource_api_versions():
    assert Resource.from_api_version("v1", "Pod") == Resource("", "v1", "Pod")
    assert Resource.from_api_version("apps/v1", "Deployment").api_version == "apps/v1"
    assert str(Resource("", "v1", "Pod")) == "v1/Pod"
    with pytest.raises(ValueError, match="names no version"):
        Resource.from_api_version("apps/", "X")


def test_list_by_selector():
    c = MemCache().put(cm("a", {"env": "prod", "team": "x"}), cm("b", {"env": "dev"}), cm("c", ns="other"))
    names = lambda sel, ns=None: sorted(__import__("json").loads(o)["metadata"]["name"] for o in c.list(CM, ns, sel))
    assert names(None) == ["a", "b", "c"]
    assert names("env=prod") == ["a"]
    assert names("env==prod,team") == ["a"]
    assert names("env!=prod") == ["b", "c"]
    assert names("env in (prod, dev)") == ["a", "b"]
    assert names("env notin (prod)") == ["b", "c"]
    assert names("!team") == ["b", "c"]
    assert names(None, "other") == ["c"]


@pytest.mark.parametrize("selector", ["env=", "=x", "a b", "env in prod", "a,,b", "k=(v)", "bad key"])
def test_a_bad_selector_raises(selector):
    if selector == "env=":  # an empty value is valid: it matches objects without the label's value
        assert MemCache().list(CM, None, selector) == []
        return
    with pytest.raises(BadSelector, match="label selector"):
        MemCache().list(CM, None, selector)


def test_by_index_builtins_and_declared():
    c = MemCache().put(cm("a", {"team": "x"}, owner="o1"), cm("b", ns="kube-system"))
    c.add_index(CM, "data-k", lambda o: [o["data"]["k"]])
    name = lambda objs: [__import__("json").loads(o)["metadata"]["name"] for o in objs]
    assert name(c.by_index(CM, "owner", "o1")) == ["a"]
    assert name(c.by_index(CM, "label", "team=x")) == ["a"]
    assert name(c.by_index(CM, "namespace", "kube-system")) == ["b"]
    assert name(c.by_index(CM, "data-k", "b")) == ["b"]
    with pytest.raises(UnknownIndex, match="no index `nope`"):
        c.by_index(CM, "nope", "x")


def test_by_index_meta_and_counts_through_the_sdk():
    h = Harness(Plugin)
    h.cache.put(cm("a", {"team": "x", "env": "prod"}), cm("b", {"team": "x"}), cm("c", {"team": "y"}, ns="other"))

    def queries():
        found = cache.by_index_meta(CM, "label", "team=x")
        assert [(r.kind, m.namespace, m.name, m.labels.get("env")) for r, m in found] == [
            ("ConfigMap", "default", "a", "prod"),
            ("ConfigMap", "default", "b", None),
        ]
        assert cache.count_by_index(CM, "label", "team=x") == 2
        assert cache.count_by_index(CM, "label", "team=x", "env=prod") == 1
        assert cache.count_by_index(CM, "namespace", "nowhere") == 0
        with pytest.raises(BadSelector):
            cache.count_by_index(CM, "label", "team=x", "bad key")
        with pytest.raises(UnknownIndex):
            cache.by_index_meta(CM, "nope", "x")

    h.run(queries)
    with pytest.raises(ValueError, match="overruns"):
        cache.split_headers(bytes([5, 0, 0, 0, 1]))
    with pytest.raises(ValueError, match="truncated"):
        cache.split_headers(bytes([5, 0]))


class Queries(Plugin):
    def on_added(self, ev):
        same = cache.get(ev.resource, ev.meta.name, ev.meta.namespace)
        log.info(f"{ev.meta.key} cached={same is not None}")
        if ev.meta.label("retry"):
            raise Retry("not yet", after_ms=250)
        if ev.meta.label("boom"):
            raise KeyError("boom")
        cache.list(Resource("batch", "v1", "Job"))


def test_harness_routes_queries_and_logs_and_reports_retries_and_exceptions():
    c = MemCache().watch(CM)
    h = Harness(Queries, {}, c)
    with pytest.raises(NotWatched, match="batch/v1/Job is not watched"):
        h.send(added(cm("a")))
    r = h.send(added(cm("b", {"retry": "1"})))
    assert (r.reason, r.after_ms) == ("not yet", 250)
    with pytest.raises(KeyError):
        h.send(added(cm("c", {"boom": "1"})))
    assert h.take_logs() == [(Level.INFO, f"default/{n} cached=True") for n in "abc"]
    h.send(deleted(cm("a")))
    assert c.get(CM, "default", "a") is None
    h.apply_to_cache = False
    h.send(added(cm("d", {"retry": "1"})))
    assert h.take_logs() == [(Level.INFO, "default/d cached=False")]


class Boom(Plugin):
    def on_added(self, ev):
        raise KeyError("boom")


def test_outcome_describes_an_exception_with_its_location():
    err, retry = outcome(Boom({}), added(cm("c")))
    assert retry is None and err.startswith("KeyError: 'boom' (at test_sdk.py:") and "in on_added" in err
    assert describe(ValueError("x")) == "ValueError: x"


class ChangesItsMind(Plugin):
    """Catches a helper's Retry and fails with another exception instead."""

    def on_added(self, ev):
        try:
            raise Retry("webhook down")
        except Retry:
            int(ev.meta.name)


def test_only_the_exception_that_escapes_decides_on_a_retry():
    err, retry = outcome(ChangesItsMind({}), added(cm("c")))
    assert retry is None and err.startswith("ValueError: invalid literal for int()"), err
    with pytest.raises(ValueError):
        Harness(ChangesItsMind, {}).send(added(cm("c")))


def test_calls_outside_a_harness_or_component_say_so():
    with pytest.raises(RuntimeError, match="needs the host"):
        log.info("x")


def test_retry_after_ms_must_fit_the_contract():
    with pytest.raises(ValueError, match="u32"):
        Retry("r", after_ms=-1)


class Labeller(Plugin):
    """Applies a `team` label to objects without one and records an Event."""

    def on_added(self, ev):
        if ev.meta.label("team") is None:
            kube.apply(ev.resource, ev.meta.name, {"metadata": {"labels": {"team": "unknown"}}},
                       namespace=ev.meta.namespace)
            kube.event(ev, "Labelled", "Label", "added team=unknown")


WRITES = """
[[watch]]
api-version = "v1"
kind = "ConfigMap"
[[write]]
api-version = "v1"
kind = "ConfigMap"
verbs = ["apply"]
namespace = "default"
[[write]]
api-version = "events.k8s.io/v1"
kind = "Event"
verbs = ["create"]
"""


def test_the_harness_records_declared_writes_and_refuses_the_rest(tmp_path):
    manifest = tmp_path / "labeller.toml"
    manifest.write_text(WRITES)
    h = Harness.from_manifest(Labeller, str(manifest))
    h.send(added(cm("a")))
    h.send(added(cm("b", {"team": "t"})))
    assert [(w["verb"], w["namespace"], w["name"]) for w in h.writes] == [
        ("apply", "default", "a"),
        ("record-event", "default", None),
    ]
    assert h.writes[0]["body"] == {"metadata": {"labels": {"team": "unknown"}}}
    assert h.writes[1]["body"]["regarding"]["name"] == "a"
    assert h.writes[1]["body"]["type"] == "Normal"
    # Another namespace is not declared: refused as the host would, and not recorded.
    with pytest.raises(kube.Denied, match="`apply` of `v1/ConfigMap` in namespace `other` is not declared"):
        h.send(added(cm("c", ns="other")))
    assert len(h.writes) == 2


def test_write_errors_are_typed_exceptions():
    assert issubclass(kube.Conflict, kube.WriteError)
    e = kube.Invalid("bad", 422, "Invalid")
    assert (e.code, e.reason, str(e)) == (422, "Invalid", "bad")
    with pytest.raises(ValueError, match="patch kind"):
        kube.patch(CM, "a", {}, kind="yaml")


class Ticker(Plugin):
    def on_schedule(self, name: str) -> None:
        if name == "bad":
            raise Retry("a retry is an error here")
        n = len(cache.list(Resource("", "v1", "ConfigMap")))
        log.info(f"tick {name}: {n} configmaps")


def test_tick_runs_a_schedule_with_the_cache_and_refuses_undeclared_names(tmp_path):
    manifest = tmp_path / "ticker.toml"
    manifest.write_text(
        '[[watch]]\napi-version = "v1"\nkind = "ConfigMap"\n'
        '[[schedule]]\nname = "count"\nevery = "1m"\n'
    )
    h = Harness.from_manifest(Ticker, str(manifest))
    h.cache.put(cm("a"), cm("b"))
    h.tick("count")
    assert h.take_logs() == [(Level.INFO, "tick count: 2 configmaps")]
    with pytest.raises(ValueError, match="schedule `other` is not declared"):
        h.tick("other")
    # A plugin without a handler does nothing; its harness without a manifest ticks any name.
    Harness(Plugin).tick("anything")


def test_a_tick_outcome_is_none_or_the_error_a_retry_included():
    from informant.plugin import tick

    plugin = Ticker({})
    assert tick(Plugin({}), "x") is None
    assert "a retry is an error here" in tick(plugin, "bad")


class Counting(Plugin):
    """Counts objects per namespace, a gauge per object in the object's group."""

    def on_added(self, ev):
        metrics.counter("seen_total", "Objects seen.").labels(namespace=ev.meta.namespace).inc()
        metrics.gauge("present", "Present.").labels(name=ev.meta.name).group(ev.meta.name).set(1)
        metrics.histogram("name_len", "Name lengths.", buckets=[4, 16]).observe(len(ev.meta.name))

    def on_deleted(self, ev):
        log.info(f"{metrics.delete_group(ev.meta.name)} series gone")


def test_the_harness_records_metric_calls():
    h = Harness(Counting)
    h.send(added(cm("a")))
    h.send(added(cm("b")))
    assert h.metric_value("seen_total", namespace="default") == 2
    assert h.metric_value("present", name="a") == 1
    assert [c.call for c in h.metrics[:3]] == ["counter-add", "gauge-set", "histogram-observe"]
    assert h.metrics[1].labels == (("name", "a"),) and h.metrics[1].group == "a"
    h.send(deleted(cm("a")))
    assert h.metric_value("present", name="a") is None
    assert h.metric_value("present", name="b") == 1
    assert h.take_logs() == [(Level.INFO, "1 series gone")]
    with pytest.raises(metrics.TypeConflict):
        h.run(lambda: metrics.gauge("g").add(1))
